"""Sampling strategies: which datapacks (rows of a :class:`DatapackTable`) form the next batch.

Each strategy is a frozen, validated dataclass (its configuration) with a pure
``sample(table, batch_size, rng, weights=None)`` that returns row indices. All work is numpy
over the table's precomputed columns; the caller owns the ``np.random.Generator``, so the same
table, configuration and generator state give the same batch. ``weights`` are per-row
multipliers from filters or supervision hints (0 excludes a row); no strategy changes a
datapack or the table.

Empty strata and strata smaller than their quota never raise and never loop. A batch of ``n`` is
split over strata (tiers, tag families, urgent / rest) in this order:

1. Expected counts ``n * ratio`` are rounded by systematic sampling: each stratum's count is
   unbiased (its expectation is exactly ``n * ratio``) and the counts sum to ``n``.
2. A stratum gives at most its *capacity*, the number of its rows with a positive weight, so a
   batch holds no datapack twice while that is possible.
3. The shortfall of empty or too-small strata goes to ``baseline`` first (``tag_aware`` with
   ``fallback_to_baseline``), then to the strata that still have room, in proportion to their
   ratios; each round fills a stratum or places everything, so there are at most as many rounds
   as strata.
4. Only if the strata with a positive ratio together hold fewer rows than the batch is the rest
   drawn *with replacement* from them, in proportion to their ratios. If every stratum with a
   positive ratio is empty, the batch is split over the non-empty strata by size.

Only when every row has weight 0 (nothing is eligible) does ``sample`` raise
:class:`~gymcurric.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gymcurric._checks import check_int, finite_reason, is_finite_number, shown
from gymcurric.datapacks._alloc import Prepared, draw, prepare
from gymcurric.datapacks.schema import TIERS
from gymcurric.datapacks.table import STRATIFY_KEYS, TAG_FAMILIES, DatapackTable, check_selector
from gymcurric.errors import ConfigError

__all__ = [
    "STRATEGIES",
    "BalancedStrategy",
    "FrontierPrioritizedStrategy",
    "SamplingStrategy",
    "TagAwareStrategy",
    "make_strategy",
]


def _ratios(
    name: str, value: Any, keys: tuple[Any, ...], owner: str, *, total: float | None
) -> dict[Any, float]:
    """Validate a ``{key: float}`` mapping (JSON string keys of ints accepted)."""
    if not isinstance(value, Mapping):
        raise ConfigError(name, value, "expected a mapping", source=owner)
    out: dict[Any, float] = {}
    for k, v in value.items():
        key = int(k) if isinstance(k, str) and k.isdigit() and isinstance(keys[0], int) else k
        if key not in keys:
            raise ConfigError(
                f"{name}[{k!r}]", k, f"expected keys among {list(keys)}", source=owner
            )
        if not is_finite_number(v) or v < 0:  # an int too large for a float is not
            reason = finite_reason(v, "expected a finite number >= 0")
            raise ConfigError(f"{name}[{k!r}]", shown(v), reason, source=owner)
        out[key] = float(v)
    if total is not None and not math.isclose(sum(out.values()), total, abs_tol=1e-6):
        raise ConfigError(name, value, f"values must sum to {total}", source=owner)
    return out


def _flags(strategy: Any, names: tuple[str, ...], owner: str) -> None:
    """Refuse a switch that is not true or false (a quoted ``"false"`` would read as on)."""
    for name in names:
        value = getattr(strategy, name)
        if not isinstance(value, bool | np.bool_):
            raise ConfigError(name, value, "expected true or false", source=owner)
        object.__setattr__(strategy, name, bool(value))


def _unit(name: str, value: Any, owner: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(name, shown(value), "expected a number in [0, 1]", source=owner)


def _row_weights(table: DatapackTable, weights: np.ndarray | None) -> np.ndarray:
    if weights is None:
        return np.ones(len(table))
    w = np.asarray(weights, np.float64)
    if w.shape != (len(table),) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(
            "weights", f"array of shape {w.shape}", f"expected {len(table)} finite values >= 0"
        )
    return w


def _check_size(batch_size: Any) -> int:
    check_int("batch_size", batch_size, allow_numpy=True, reason="expected an integer >= 1")
    return int(batch_size)


class SamplingStrategy:
    """Base class: a named, JSON-serialisable strategy configuration with ``sample``."""

    name: ClassVar[str] = ""
    shuffle: bool

    def sample(
        self,
        table: DatapackTable,
        batch_size: int,
        rng: np.random.Generator,
        weights: np.ndarray | None = None,
    ) -> np.ndarray:
        """Row indices (``int64``, length ``batch_size``) of the next batch.

        Args:
            table: the datapacks.
            batch_size: how many to draw (>= 1).
            rng: the caller's generator; the only source of randomness.
            weights: optional per-row multipliers >= 0 (0 excludes the row).
        """
        n = _check_size(batch_size)
        prep, ratios, fallback = self._prepared(table, weights)
        rows = draw(prep, ratios, n, rng, fallback)
        return rng.permutation(rows) if self.shuffle else rows

    def _prepared(
        self, table: DatapackTable, weights: np.ndarray | None
    ) -> tuple[Prepared, np.ndarray, int | None]:
        # The strata depend only on the table and the weights, not on the batch: with weights
        # that cannot change (read-only, as the sampler passes them, or None) they are kept
        # until the next call with other weights, so a batch costs O(batch), not O(datapacks).
        frozen = weights is None or (
            isinstance(weights, np.ndarray) and not weights.flags.writeable
        )
        cached = self.__dict__.get("_cache")
        if frozen and cached is not None and cached[0] is table and cached[1] is weights:
            return cached[2]
        strata, ratios, fallback = self._plan(table, _row_weights(table, weights))
        out = (prepare(strata), np.asarray(ratios, np.float64), fallback)
        if frozen:
            object.__setattr__(self, "_cache", (table, weights, out))
        return out

    def _plan(
        self, table: DatapackTable, w: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any, int | None]:
        """``(strata as (rows, weights) pairs, ratios, fallback stratum)`` for weights ``w``."""
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        # the cache holds the table: never pickle or copy it with the configuration
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: ``{"strategy": name, **params}``; :func:`make_strategy` reads it."""
        out: dict[str, Any] = {"strategy": self.name}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = (
                dict(v) if isinstance(v, Mapping) else list(v) if isinstance(v, tuple) else v
            )
        return out


@dataclass(frozen=True)
class BalancedStrategy(SamplingStrategy):
    """Stratify by tier with ``tier_ratios``; trust-weighted within a tier.

    Attributes:
        tier_ratios: share of the batch per tier; keys in {0, 1, 2}, values >= 0 summing to 1
            (a missing tier gets 0).
        use_trust_weighting: within a stratum, draw in proportion to ``trust_score`` (else
            uniformly); either way times the caller's ``weights``.
        stratify_by: extra keys (:data:`~gymcurric.datapacks.STRATIFY_KEYS`); a tier's share is
            split equally over the values of these keys present (with weight > 0) in that tier.
            ``"tier"`` (the specification's default lists it) is accepted and dropped.
        shuffle: shuffle the batch (else it comes grouped by stratum).

    Examples:
        >>> from gymcurric.datapacks import DataPack, DatapackTable
        >>> table = DatapackTable([DataPack(f"p{i}", "reach", "E-v0", i % 3) for i in range(30)])
        >>> rows = BalancedStrategy().sample(table, 10, np.random.default_rng(0))
        >>> np.bincount(table.tier[rows], minlength=3).tolist()
        [2, 5, 3]
    """

    name: ClassVar[str] = "balanced"
    tier_ratios: Mapping[int, float] = field(default_factory=lambda: {0: 0.2, 1: 0.5, 2: 0.3})
    use_trust_weighting: bool = True
    stratify_by: tuple[str, ...] = ()
    shuffle: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _flags(self, ("use_trust_weighting", "shuffle"), owner)
        ratios = _ratios("tier_ratios", self.tier_ratios, TIERS, owner, total=1.0)
        object.__setattr__(self, "tier_ratios", {t: ratios.get(t, 0.0) for t in TIERS})
        keys = tuple(self.stratify_by) if not isinstance(self.stratify_by, str) else None
        if keys is not None:  # the specification lists "tier", which is always stratified by
            keys = tuple(k for k in keys if k != "tier")
        if keys is None or any(k not in STRATIFY_KEYS for k in keys):
            raise ConfigError(
                "stratify_by",
                self.stratify_by,
                f"expected keys among {list(STRATIFY_KEYS)}",
                source=owner,
            )
        object.__setattr__(self, "stratify_by", keys)

    def _plan(
        self, table: DatapackTable, w: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any, int | None]:
        if self.use_trust_weighting:
            w = w * table.trust
        key = table.tier.astype(np.int64)
        for k in self.stratify_by:
            codes, values = table.codes(k)
            key = key * len(values) + codes
        strata, ratios = [], []
        for tier in TIERS:
            in_tier = (table.tier == tier) & (w > 0)
            if self.stratify_by:
                subs = np.unique(key[in_tier])
            else:  # one stratum per tier: skip the sort in np.unique
                subs = np.array([tier] if in_tier.any() else [], np.int64)
            for s in subs:
                rows = np.flatnonzero(in_tier & (key == s) if self.stratify_by else in_tier)
                strata.append((rows, w[rows]))
                ratios.append(self.tier_ratios[tier] / subs.size)
            if subs.size == 0:  # an empty tier still counts, so its share is redistributed
                strata.append((np.empty(0, np.int64), np.empty(0)))
                ratios.append(self.tier_ratios[tier])
        return strata, np.array(ratios), None


@dataclass(frozen=True)
class FrontierPrioritizedStrategy(SamplingStrategy):
    """Favour urgent datapacks: frontier tiers, novel, high-gain and safety-critical ones.

    ``urgency = clip(tier_weight[tier] * (0.5 + 0.3 * novelty + 0.2 * min(mpl_gain / 10, 1))
    * (safety_boost_factor if safety_critical else 1), 0, 1)``. Datapacks with
    ``urgency >= urgency_threshold`` are *urgent*; a share ``urgent_ratio`` of the batch comes
    from them in proportion to urgency, the rest from the others in proportion to
    ``sampling_weight`` (both times the caller's ``weights``).

    Attributes:
        urgency_threshold: in [0, 1].
        urgent_ratio: in [0, 1].
        tier_weights: per-tier factor >= 0 (a missing tier gets 0).
        safety_boost_factor: factor >= 0 for ``safety_critical`` datapacks.
        shuffle: shuffle the batch (else urgent ones come first).

    Examples:
        >>> from gymcurric.datapacks import DataPack, DatapackTable
        >>> table = DatapackTable([DataPack("a", "reach", "E-v0", 2, mpl_gain=5.0)])
        >>> FrontierPrioritizedStrategy().urgency(table).round(3).tolist()  # 1.0*(0.5+0+0.1)
        [0.6]
    """

    name: ClassVar[str] = "frontier_prioritized"
    urgency_threshold: float = 0.7
    urgent_ratio: float = 0.8
    tier_weights: Mapping[int, float] = field(default_factory=lambda: {0: 0.3, 1: 0.6, 2: 1.0})
    safety_boost_factor: float = 1.5
    shuffle: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _flags(self, ("shuffle",), owner)
        _unit("urgency_threshold", self.urgency_threshold, owner)
        _unit("urgent_ratio", self.urgent_ratio, owner)
        tw = _ratios("tier_weights", self.tier_weights, TIERS, owner, total=None)
        object.__setattr__(self, "tier_weights", {t: tw.get(t, 0.0) for t in TIERS})
        f = self.safety_boost_factor
        if not is_finite_number(f) or f < 0:  # an int too large for a float is not
            reason = finite_reason(f, "expected a finite number >= 0")
            raise ConfigError("safety_boost_factor", shown(f), reason, source=owner)

    def urgency(self, table: DatapackTable) -> np.ndarray:
        """Per-row urgency in [0, 1] (formula in the class docstring)."""
        tier_w = np.array([self.tier_weights[t] for t in TIERS])[table.tier]
        base = 0.5 + 0.3 * table.novelty + 0.2 * np.minimum(table.mpl_gain / 10.0, 1.0)
        boost = np.where(table.safety_critical, self.safety_boost_factor, 1.0)
        return np.clip(tier_w * base * boost, 0.0, 1.0)

    def _plan(
        self, table: DatapackTable, w: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any, int | None]:
        u = self.urgency(table)
        urgent = u >= self.urgency_threshold
        hot, rest = np.flatnonzero(urgent), np.flatnonzero(~urgent)
        strata = [(hot, u[hot] * w[hot]), (rest, table.sampling_weight[rest] * w[rest])]
        return strata, np.array([self.urgent_ratio, 1 - self.urgent_ratio]), None


@dataclass(frozen=True)
class TagAwareStrategy(SamplingStrategy):
    """Fill the batch by quotas over tag families (:data:`~gymcurric.datapacks.TAG_FAMILIES`).

    Attributes:
        tag_quotas: share of the batch per tag family (or other selector: ``tier_2``,
            ``curriculum_stage_mid``; see :mod:`~gymcurric.datapacks.table`); values >= 0
            summing to 1. Datapacks in none of the listed families are not drawn (list
            ``baseline`` to include untagged ones).
        allow_overlap: if true, a family's stratum holds every datapack with that tag, so a
            datapack in two families can fill either quota (and may appear once per family in
            one batch). If false, each datapack belongs only to the first listed family it has,
            and appears at most once per batch while the eligible set is large enough.
        fallback_to_baseline: a family's shortfall (empty or too small) goes to ``baseline``
            datapacks first, then to the other families in proportion to their quotas.
        shuffle: shuffle the batch (else it comes grouped by family).

    Examples:
        >>> from gymcurric.datapacks import DataPack, DatapackTable, SupervisionHints
        >>> packs = [DataPack(f"p{i}", "reach", "E-v0", 1,
        ...                   supervision_hints=SupervisionHints(safety_critical=i < 5))
        ...          for i in range(20)]
        >>> s = TagAwareStrategy(tag_quotas={"safety_critical": 0.5, "baseline": 0.5})
        >>> rows = s.sample(DatapackTable(packs), 8, np.random.default_rng(0))
        >>> int((rows < 5).sum())
        4
    """

    name: ClassVar[str] = "tag_aware"
    tag_quotas: Mapping[str, float] = field(
        default_factory=lambda: {
            "safety_critical": 0.2,
            "fragile_objects": 0.15,
            "novel_affordance": 0.15,
            "intervention": 0.1,
            "high_energy_cost": 0.1,
            "baseline": 0.3,
        }
    )
    allow_overlap: bool = False
    fallback_to_baseline: bool = True
    shuffle: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _flags(self, ("allow_overlap", "fallback_to_baseline", "shuffle"), owner)
        if isinstance(self.tag_quotas, Mapping):
            for key in self.tag_quotas:
                check_selector(key, f"tag_quotas[{key!r}]", owner)
        keys = tuple(self.tag_quotas) if isinstance(self.tag_quotas, Mapping) else TAG_FAMILIES
        q = _ratios("tag_quotas", self.tag_quotas, keys, owner, total=1.0)
        object.__setattr__(self, "tag_quotas", q)

    def _plan(
        self, table: DatapackTable, w: np.ndarray
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any, int | None]:
        families = list(self.tag_quotas)
        if self.fallback_to_baseline and "baseline" not in families:
            families.append("baseline")
        taken = np.zeros(len(table), bool)
        strata = []
        for fam in families:
            member = table.select(fam)
            if not self.allow_overlap:
                member &= ~taken
                taken |= member
            rows = np.flatnonzero(member)
            strata.append((rows, w[rows]))
        ratios = np.array([self.tag_quotas.get(f, 0.0) for f in families])
        fb = families.index("baseline") if self.fallback_to_baseline else None
        return strata, ratios, fb


#: Strategy classes by name.
STRATEGIES: dict[str, type[SamplingStrategy]] = {
    cls.name: cls for cls in (BalancedStrategy, FrontierPrioritizedStrategy, TagAwareStrategy)
}


def make_strategy(
    name: str, params: Mapping[str, Any] | None = None, *, source: str | None = None
) -> SamplingStrategy:
    """Build a strategy from its name and parameters (e.g. read from YAML/JSON).

    Raises:
        ConfigError: unknown strategy name, unknown parameter, or a bad value (naming ``source``).

    Examples:
        >>> make_strategy("balanced", {"tier_ratios": {"0": 0.5, "2": 0.5}}).tier_ratios
        {0: 0.5, 1: 0.0, 2: 0.5}
    """
    cls = STRATEGIES.get(name)
    if cls is None:
        raise ConfigError("strategy", name, f"expected one of {sorted(STRATEGIES)}", source=source)
    if params is not None and not isinstance(params, Mapping):
        raise ConfigError(
            "strategy_params",
            params,
            f"expected a mapping of {name}'s parameter names to values",
            source=source,
        )
    params = dict(params or {})
    params.pop("strategy", None)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, value in params.items():
        if key not in names:
            raise ConfigError(
                key,
                value,
                f"unknown parameter of {name}; expected one of {sorted(names)}",
                source=source,
            )
    if "stratify_by" in params and isinstance(params["stratify_by"], list):
        params["stratify_by"] = tuple(params["stratify_by"])
    try:
        return cls(**params)
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.value, exc.reason, source=source or exc.source) from exc
