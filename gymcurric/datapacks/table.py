"""Per-datapack arrays, computed once, that every strategy works on (no per-record Python).

Both record forms (gymcurric's flattened enrichment and the specification's Stage 2.4 tag lists,
see :mod:`gymcurric.datapacks.schema`) give the same columns. Tag families (bit ``i`` of
:attr:`DatapackTable.tags` is ``TAG_FAMILIES[i]``); "or" joins the two forms:

===========================  =====================================================================
family                       a datapack belongs to it when
===========================  =====================================================================
``safety_critical``          ``supervision_hints.safety_critical`` is true
``fragile_objects``          ``enrichment.fragility`` or some ``fragility_tags[].fragility_level``
                             is ``"high"`` or ``"critical"``
``high_energy_cost``         an energy score (``efficiency.energy``, or an ``efficiency_tags``
                             entry with ``metric: energy``) is < 0.5
``novel_affordance``         some affordance or affordance tag has ``demonstrated: false``
``intervention``             ``enrichment.interventions`` > 0 or ``intervention_tags`` non-empty
``demonstrated_affordance``  some affordance or affordance tag has ``demonstrated: true``
``efficiency_time``          a time score is given (``efficiency.time`` or a ``time`` tag)
``efficiency_energy``        an energy score is given
``baseline``                 none of ``safety_critical``, ``fragile_objects``,
                             ``high_energy_cost``, ``novel_affordance``, ``intervention``
``fragile_high``             a fragility level is ``"high"``
``fragile_critical``         a fragility level is ``"critical"``
``low_efficiency_score``     some efficiency score (any metric) is < 0.5
===========================  =====================================================================

A *selector* (a key of ``weight_multipliers`` or ``tag_quotas``, an entry of ``exclude_tags`` or
``require_tags``) is a tag family, ``tier_0`` / ``tier_1`` / ``tier_2``, or
``curriculum_stage_<name>`` (the hint's ``curriculum_stage`` is ``<name>``); see
:meth:`DatapackTable.select`.

Tag kinds (:data:`TAG_KINDS`, bit ``i`` of :attr:`DatapackTable.kinds`) say which kinds of tag a
datapack carries at all, for the sampling log's ``tag_coverage``: ``fragility`` (a level other
than ``none``), ``risk`` (``risk`` > 0 or ``risk_tags``), ``affordance``, ``efficiency``,
``novelty`` (``novelty`` > 0 or ``novelty_tags``) and ``intervention``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import ConfigError

__all__ = ["STRATIFY_KEYS", "TAG_FAMILIES", "TAG_KINDS", "DatapackTable", "check_selector"]

TAG_FAMILIES: tuple[str, ...] = (
    "safety_critical",
    "fragile_objects",
    "high_energy_cost",
    "novel_affordance",
    "intervention",
    "demonstrated_affordance",
    "efficiency_time",
    "efficiency_energy",
    "baseline",
    "fragile_high",
    "fragile_critical",
    "low_efficiency_score",
)
#: Kinds of tag counted by the sampling log's ``tag_coverage`` (the specification's names).
TAG_KINDS: tuple[str, ...] = (
    "fragility",
    "risk",
    "affordance",
    "efficiency",
    "novelty",
    "intervention",
)
_SELECTOR_FORMS = [*TAG_FAMILIES, "tier_0", "tier_1", "tier_2", "curriculum_stage_<name>"]
_BIT = {name: 1 << i for i, name in enumerate(TAG_FAMILIES)}
_SPECIAL = (
    _BIT["safety_critical"]
    | _BIT["fragile_objects"]
    | _BIT["high_energy_cost"]
    | _BIT["novel_affordance"]
    | _BIT["intervention"]
)

#: Record attributes a strategy may stratify by (besides the tier).
STRATIFY_KEYS: tuple[str, ...] = ("task_type", "env_id", "curriculum_stage", "fragility")


def _tag_bits(p: DataPack) -> int:
    e, h = p.enrichment, p.supervision_hints
    levels = e.fragility_levels
    energy = e.efficiency_scores("energy")
    demonstrated = e.demonstrated
    flags = {
        "safety_critical": h.safety_critical,
        "fragile_objects": bool(levels & {"high", "critical"}),
        "high_energy_cost": any(v < 0.5 for v in energy),
        "novel_affordance": not all(demonstrated),
        "intervention": e.intervention_count > 0,
        "demonstrated_affordance": any(demonstrated),
        "efficiency_time": bool(e.efficiency_scores("time")),
        "efficiency_energy": bool(energy),
        "fragile_high": "high" in levels,
        "fragile_critical": "critical" in levels,
        "low_efficiency_score": any(v < 0.5 for v in e.all_efficiency_scores),
    }
    bits = sum(_BIT[name] for name, on in flags.items() if on)
    if not bits & _SPECIAL:
        bits |= _BIT["baseline"]
    return bits


def _kind_bits(p: DataPack) -> int:
    e = p.enrichment
    present = (
        e.fragility_level != "none",
        e.risk > 0 or bool(e.tags("risk_tags")),
        bool(e.demonstrated),
        bool(e.all_efficiency_scores),
        e.novelty > 0 or bool(e.tags("novelty_tags")),
        e.intervention_count > 0,
    )
    return sum(1 << i for i, on in enumerate(present) if on)


def check_selector(name: Any, key: str, source: str | None) -> str:
    """``name`` if it is a selector (see the module docstring), else a ``ConfigError``.

    Args:
        name: the selector to check.
        key: the config key it was read from, for the message.
        source: where the config came from, for the message.
    """
    ok = isinstance(name, str) and (
        name in _BIT
        or name in ("tier_0", "tier_1", "tier_2")
        or (name.startswith("curriculum_stage_") and len(name) > len("curriculum_stage_"))
    )
    if not ok:
        raise ConfigError(key, name, f"expected a selector among {_SELECTOR_FORMS}", source=source)
    return name


def datapack_records(packs: Any, key: str, source: str) -> tuple[DataPack, ...]:
    """``packs`` as a tuple of :class:`DataPack`, or a ``ConfigError`` naming ``key``.

    A path (a folder to read with ``load_datapacks``) or an item that is not a ``DataPack``
    (a raw dict record) is refused.
    """
    if isinstance(packs, str | os.PathLike):
        raise ConfigError(
            key,
            str(packs),
            "expected DataPack records, not a path (read a folder with load_datapacks)",
            source=source,
        )
    records = tuple(packs)
    for i, p in enumerate(records):
        if not isinstance(p, DataPack):
            raise ConfigError(
                key,
                p,
                f"item {i} is a {type(p).__name__}, expected a DataPack "
                "(DataPack.from_dict reads a record; load_datapacks a folder)",
                source=source,
            )
    return records


class DatapackTable:
    """Datapack records plus read-only numpy columns for vectorised sampling.

    Args:
        packs: the records, e.g. from :func:`~gymcurric.datapacks.load_datapacks`.

    Attributes:
        records: the records (row ``i`` of every array describes ``records[i]``).
        tier: ``int8`` tiers.
        trust: ``float64`` trust scores.
        sampling_weight: ``float64`` curator weights.
        novelty: ``float64`` novelty scores (:attr:`Enrichment.novelty_score`: the largest of
            ``novelty`` and the novelty tags' ``novelty_score``).
        mpl_gain: ``float64`` marginal-productivity gains (:attr:`DataPack.expected_mpl_gain`:
            ``mpl_gain`` plus the novelty tags' ``expected_mpl_gain``).
        risk: ``float64`` risk scores.
        safety_critical: ``bool`` flags.
        tags: ``uint16`` bit masks over :data:`TAG_FAMILIES`.
        kinds: ``uint8`` bit masks over :data:`TAG_KINDS`.

    Examples:
        >>> from gymcurric.datapacks import DataPack
        >>> packs = [DataPack(f"p{i}", "reach", "E-v0", tier=i % 3) for i in range(4)]
        >>> table = DatapackTable(packs)
        >>> table.tier.tolist(), bool(table.has_tag("baseline").all())
        ([0, 1, 2, 0], True)
    """

    def __init__(self, packs: Sequence[DataPack]) -> None:
        self.records: tuple[DataPack, ...] = datapack_records(packs, "packs", "DatapackTable")
        n = len(self.records)
        ids = [p.pack_id for p in self.records]
        self._index = {pid: i for i, pid in enumerate(ids)}
        if len(self._index) != n:
            dup = next(pid for i, pid in enumerate(ids) if self._index[pid] != i)
            raise ConfigError("packs", dup, "duplicate pack_id", source="DatapackTable")
        r = self.records
        self.tier = np.fromiter((p.tier for p in r), np.int8, n)
        self.trust = np.fromiter((p.trust_score for p in r), np.float64, n)
        self.sampling_weight = np.fromiter((p.sampling_weight for p in r), np.float64, n)
        self.novelty = np.fromiter((p.enrichment.novelty_score for p in r), np.float64, n)
        self.mpl_gain = np.fromiter((p.expected_mpl_gain for p in r), np.float64, n)
        self.risk = np.fromiter((p.enrichment.risk for p in r), np.float64, n)
        self.safety_critical = np.fromiter(
            (p.supervision_hints.safety_critical for p in r), np.bool_, n
        )
        self.tags = np.fromiter((_tag_bits(p) for p in r), np.uint16, n)
        self.kinds = np.fromiter((_kind_bits(p) for p in r), np.uint8, n)
        self._codes: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
        self._prereq: tuple[np.ndarray, tuple[str, ...]] | None = None
        for arr in (
            self.tier,
            self.trust,
            self.sampling_weight,
            self.novelty,
            self.mpl_gain,
            self.risk,
            self.safety_critical,
            self.tags,
            self.kinds,
        ):
            arr.setflags(write=False)

    def __len__(self) -> int:
        return len(self.records)

    def index(self, pack_id: str) -> int:
        """Row of ``pack_id`` (``KeyError`` if absent)."""
        return self._index[pack_id]

    def has_tag(self, family: str) -> np.ndarray:
        """Boolean mask of the datapacks in tag ``family`` (one of :data:`TAG_FAMILIES`)."""
        bit = _BIT.get(family)
        if bit is None:
            raise ConfigError(
                "tag",
                family,
                f"expected one of {list(TAG_FAMILIES)}",
                source="DatapackTable.has_tag",
            )
        return (self.tags & bit) != 0

    def select(self, selector: str) -> np.ndarray:
        """Boolean mask of the datapacks a selector picks.

        A selector is a tag family, ``tier_<n>`` or ``curriculum_stage_<name>`` (see the module
        docstring).

        Raises:
            ConfigError: not a selector (naming the forms a selector takes).
        """
        check_selector(selector, "selector", "DatapackTable.select")
        if selector in _BIT:
            return self.has_tag(selector)
        if selector.startswith("tier_"):
            return self.tier == int(selector[len("tier_") :])
        codes, values = self.codes("curriculum_stage")
        stage = selector[len("curriculum_stage_") :]
        return codes == values.index(stage) if stage in values else np.zeros(len(self), np.bool_)

    def codes(self, key: str) -> tuple[np.ndarray, tuple[str, ...]]:
        """Integer codes of a :data:`STRATIFY_KEYS` attribute per row, and the sorted values.

        Missing values (e.g. no ``curriculum_stage``) are coded as the string ``""``.
        """
        if key not in self._codes:
            if key not in STRATIFY_KEYS:
                raise ConfigError(
                    "stratify_by",
                    key,
                    f"expected keys among {list(STRATIFY_KEYS)}",
                    source="DatapackTable",
                )
            get = {
                "task_type": lambda p: p.task_type,
                "env_id": lambda p: p.env_id,
                "curriculum_stage": lambda p: p.supervision_hints.curriculum_stage or "",
                "fragility": lambda p: p.enrichment.fragility_level,
            }[key]
            values = np.array([get(p) for p in self.records], dtype=object)
            uniq, inv = np.unique(values.astype(str), return_inverse=True)
            inv = inv.astype(np.int64)
            inv.setflags(write=False)
            self._codes[key] = (inv, tuple(str(u) for u in uniq))
        return self._codes[key]

    def prerequisites(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """``(matrix, tags)``: ``matrix[i, j]`` is true when row ``i`` requires ``tags[j]``.

        ``tags`` are the sorted distinct ``supervision_hints.prerequisite_tags`` of the table.
        """
        if self._prereq is None:
            tags = tuple(
                sorted({t for p in self.records for t in p.supervision_hints.prerequisite_tags})
            )
            col = {t: j for j, t in enumerate(tags)}
            matrix = np.zeros((len(self), len(tags)), np.bool_)
            for i, p in enumerate(self.records):
                for t in p.supervision_hints.prerequisite_tags:
                    matrix[i, col[t]] = True
            matrix.setflags(write=False)
            self._prereq = (matrix, tags)
        return self._prereq
