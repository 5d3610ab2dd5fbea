"""The advisory datapack sampler: curriculum stage -> eligible weights -> strategy -> batch.

The sampler only *chooses* datapacks: it returns the (immutable) records and never changes a
reward, an objective vector, an economics field or a datapack. Every batch appends a JSON-safe
log entry; the same datapacks, configuration and seed give the same batches, logs (timestamps
aside) and diagnostics.

A log entry carries the specification's sampling-log fields (its §2.4 / §7.2) under its names,
with gymcurric's extra fields beside them, and validates against the JSON Schema shipped with
the package (:mod:`gymcurric.datapacks.logschema`)::

    {"sample_id": 0, "timestamp": "2026-11-17T12:34:56.123456Z",   # ISO 8601, UTC
     "episode_count": 0, "curriculum_stage": "warmup",             # null without a curriculum
     "strategy": "balanced", "strategy_params": {...}, "batch_size": 64, "seed": 42,
     "sampled_episodes": [{"pack_id": "pack_001", "tier": 2, "urgency_score": 0.85,
                           "weight": 1.5}, ...],
     "diagnostics": {"tier_distribution": {"0": 12, "1": 32, "2": 20},
                     "avg_urgency": 0.68, "avg_novelty": 0.54,
                     "safety_critical_count": 8, "fragile_object_count": 15,
                     "tag_coverage": {"fragility": 0.23, "risk": 0.31, ...},   # share per kind
                     "tag_family_counts": {"safety_critical": 8, ...}}}        # gymcurric's

``urgency_score`` is the frontier formula with the active strategy's parameters when it is
``frontier_prioritized``; otherwise with the default ones, which under the specification's
conventions (a curriculum config in its format) are its §2.2.2 (tier weights
``{0: 0.2, 1: 0.5, 2: 1.0}``), and gymcurric's (``{0: 0.3, 1: 0.6, 2: 1.0}``) else.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.datapacks.curriculum import DataPackCurriculum
from gymcurric.datapacks.schema import TIERS, DataPack
from gymcurric.datapacks.spec_config import SPEC_DEFAULTS
from gymcurric.datapacks.strategies import (
    FrontierPrioritizedStrategy,
    SamplingStrategy,
    make_strategy,
)
from gymcurric.datapacks.table import TAG_FAMILIES, TAG_KINDS, DatapackTable
from gymcurric.errors import ConfigError, GymcurricWarning

__all__ = ["LOG_FILENAME", "DataPackRLSampler"]

#: File name :meth:`DataPackRLSampler.write_logs` appends to inside a run directory.
LOG_FILENAME = "datapack_samples.jsonl"


class DataPackRLSampler:
    """Sample batches of datapacks, following a staged curriculum or a fixed strategy.

    The arguments come in the specification's order (``DataPackRLSampler(datapacks,
    curriculum, seed=42)`` as in its determinism test).

    How ``strategy`` meets the stages' strategies depends on the curriculum config's
    :attr:`~gymcurric.datapacks.DataPackCurriculumConfig.conventions`: in gymcurric's (a config
    with a list of stages, or none) it overrides every stage's strategy; in the
    specification's (a config in its format, stages by name) it is the default for the stages
    that name no strategy, and a stage's own strategy wins, as the specification's §2.5 has it.

    Args:
        datapacks: the records (or a prebuilt :class:`DatapackTable`).
        curriculum: supplies the stage's strategy, filters, multipliers and prerequisites;
            ``None`` samples every datapack with ``strategy``.
        strategy: a strategy (or its name): overrides the stages' or is their default (see
            above); default ``"balanced"`` when there is no curriculum.
        strategy_params: the parameters of ``strategy`` when it is given by name; under the
            specification's conventions those left out take its defaults
            (:data:`~gymcurric.datapacks.spec_config.SPEC_DEFAULTS`).
        seed: seeds the sampler's own generator.

    Examples:
        >>> from gymcurric.datapacks import DataPack
        >>> packs = [DataPack(f"p{i}", "reach", "E-v0", i % 3) for i in range(9)]
        >>> sampler = DataPackRLSampler(packs, strategy="balanced", seed=0)
        >>> batch = sampler.sample_batch(4)
        >>> len(batch), sampler.logs[-1]["strategy"], sampler.logs[-1]["batch_size"]
        (4, 'balanced', 4)
    """

    def __init__(
        self,
        datapacks: Sequence[DataPack] | DatapackTable,
        curriculum: DataPackCurriculum | None = None,
        strategy: SamplingStrategy | str | None = None,
        strategy_params: Mapping[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.table = datapacks if isinstance(datapacks, DatapackTable) else DatapackTable(datapacks)
        if len(self.table) == 0:
            raise ConfigError(
                "datapacks", 0, "expected at least one datapack", source="DataPackRLSampler"
            )
        if strategy_params is not None and not isinstance(strategy_params, Mapping):
            # as make_strategy refuses it, before the specification's defaults are merged in
            whose = f"{strategy}'s" if isinstance(strategy, str) else "the strategy's"
            raise ConfigError(
                "strategy_params",
                strategy_params,
                f"expected a mapping of {whose} parameter names to values",
                source="DataPackRLSampler",
            )
        # the specification's conventions: its default parameters, and its urgency (§2.2.2)
        spec = curriculum is not None and curriculum.config.conventions == "specification"
        if isinstance(strategy, str):
            if spec:
                strategy_params = {**SPEC_DEFAULTS.get(strategy, {}), **(strategy_params or {})}
            strategy = make_strategy(strategy, strategy_params, source="DataPackRLSampler")
        elif strategy_params is not None:
            raise ConfigError(
                "strategy_params",
                dict(strategy_params),
                "needs a strategy given by name",
                source="DataPackRLSampler",
            )
        if strategy is None and curriculum is None:
            strategy = make_strategy("balanced")
        self.strategy = strategy
        self.curriculum = curriculum
        # the urgency logged for stages not sampled with frontier_prioritized
        self._urgency_reference = FrontierPrioritizedStrategy(
            **(SPEC_DEFAULTS["frontier_prioritized"] if spec else {})
        )
        self.seed = _checked_seed(seed, "DataPackRLSampler")
        self.rng = np.random.default_rng(self.seed)
        self.logs: list[dict[str, Any]] = []
        self._sample_id = 0
        self._tier_counts = np.zeros(len(TIERS), np.int64)
        self._family_counts = np.zeros(len(TAG_FAMILIES), np.int64)
        self._kind_counts = np.zeros(len(TAG_KINDS), np.int64)
        self._kinds_counted = 0  # the datapacks in _kind_counts (tag_coverage's denominator)
        self._bits = 1 << np.arange(len(TAG_FAMILIES), dtype=np.uint16)
        self._kind_bits = 1 << np.arange(len(TAG_KINDS), dtype=np.uint8)
        self._strategies: dict[str, SamplingStrategy] = {}
        self._urgency: dict[str, np.ndarray] = {}
        self._eligible: tuple[Any, np.ndarray] | None = None
        self._written = 0

    def _current(self) -> SamplingStrategy:
        cur = self.curriculum
        if self.strategy is not None and (
            cur is None
            or cur.config.conventions != "specification"  # gymcurric's: it overrides
            or cur.config.stages[cur.stage_index].inherits_strategy
        ):
            return self.strategy
        assert cur is not None
        sch = cur.schedule()
        key = json.dumps([sch.strategy, sch.strategy_params], sort_keys=True, default=str)
        if key not in self._strategies:
            self._strategies[key] = make_strategy(sch.strategy, sch.strategy_params)
        return self._strategies[key]

    def _urgency_of(self, strategy: SamplingStrategy) -> np.ndarray:
        s = strategy if isinstance(strategy, FrontierPrioritizedStrategy) else None
        s = s or self._urgency_reference
        key = json.dumps(s.to_dict(), sort_keys=True, default=str)
        if key not in self._urgency:
            self._urgency[key] = s.urgency(self.table)
        return self._urgency[key]

    def _weights(self) -> np.ndarray:
        # Eligibility depends only on the stage and the satisfied prerequisite tags, which
        # change rarely: recompute (O(N) numpy passes) only when they do.
        cur = self.curriculum
        key = None if cur is None else (cur.stage_index, cur.satisfied_tags)
        if self._eligible is None or self._eligible[0] != key:
            w = np.ones(len(self.table)) if cur is None else cur.eligible_weights(self.table)
            w = np.array(w, np.float64)
            w.setflags(write=False)
            self._eligible = (key, w)
        return self._eligible[1]

    def sample_batch(self, batch_size: int) -> list[DataPack]:
        """The next batch of datapack records (and one log entry appended to :attr:`logs`)."""
        strategy = self._current()
        weights = self._weights()
        rows = strategy.sample(self.table, batch_size, self.rng, weights)
        urgency = self._urgency_of(strategy)
        t = self.table
        tiers = np.bincount(t.tier[rows], minlength=len(TIERS))
        families = ((t.tags[rows, None] & self._bits) != 0).sum(axis=0)
        kinds = ((t.kinds[rows, None] & self._kind_bits) != 0).sum(axis=0)
        self._tier_counts += tiers
        self._family_counts += families
        self._kind_counts += kinds
        self._kinds_counted += int(rows.size)
        params = strategy.to_dict()
        name = params.pop("strategy")
        cur = self.curriculum
        entry = {
            "sample_id": self._sample_id,
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "episode_count": None if cur is None else cur.episode,
            "curriculum_stage": None if cur is None else cur.stage,
            "strategy": name,
            "strategy_params": json.loads(json.dumps(params)),
            "batch_size": int(rows.size),
            "seed": self.seed,
            "sampled_episodes": [
                {
                    "pack_id": t.records[r].pack_id,
                    "tier": int(t.tier[r]),
                    "urgency_score": float(urgency[r]),
                    "weight": float(weights[r]),
                }
                for r in rows.tolist()
            ],
            "diagnostics": {
                "tier_distribution": {str(k): int(v) for k, v in zip(TIERS, tiers, strict=True)},
                "avg_urgency": float(urgency[rows].mean()),
                "avg_novelty": float(t.novelty[rows].mean()),
                "safety_critical_count": int(t.safety_critical[rows].sum()),
                "fragile_object_count": int(families[TAG_FAMILIES.index("fragile_objects")]),
                "tag_coverage": _shares(kinds, rows.size),
                "tag_family_counts": {
                    f: int(c) for f, c in zip(TAG_FAMILIES, families, strict=True)
                },
            },
        }
        self.logs.append(entry)
        self._sample_id += 1
        return [t.records[r] for r in rows.tolist()]

    def get_diagnostics(self) -> dict[str, Any]:
        """Totals since the last :meth:`reset`, plus the curriculum's diagnostics."""
        total = int(self._tier_counts.sum())
        return {
            "batches": self._sample_id,
            "datapacks_sampled": total,
            "tier_distribution": {
                str(k): int(v) for k, v in zip(TIERS, self._tier_counts, strict=True)
            },
            "tag_coverage": _shares(self._kind_counts, self._kinds_counted),
            "tag_family_counts": {
                f: int(c) for f, c in zip(TAG_FAMILIES, self._family_counts, strict=True)
            },
            "curriculum": None if self.curriculum is None else self.curriculum.get_diagnostics(),
        }

    def reset(self, seed: int | None = None) -> None:
        """Re-seed the generator (same seed if ``None``) and clear logs and totals."""
        if seed is not None:
            self.seed = _checked_seed(seed, "DataPackRLSampler.reset")
        self.rng = np.random.default_rng(self.seed)
        self.logs.clear()
        self._sample_id = 0
        self._tier_counts[:] = 0
        self._family_counts[:] = 0
        self._kind_counts[:] = 0
        self._kinds_counted = 0
        self._written = 0

    def write_logs(self, run_dir: str | os.PathLike[str]) -> Path:
        """Append the log entries not yet written to ``run_dir/datapack_samples.jsonl``.

        Raises:
            ConfigError: ``run_dir`` cannot be created or written (e.g. it is a file), naming
                it; the entries then count as not written.
        """
        path = Path(run_dir) / LOG_FILENAME
        start = self._written
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                for entry in self.logs[start:]:
                    f.write(json.dumps(entry) + "\n")
        except OSError as exc:
            raise ConfigError(
                "run_dir",
                str(run_dir),
                f"cannot write the sampling log {LOG_FILENAME} there ({exc})",
                source="DataPackRLSampler.write_logs",
            ) from exc
        self._written = len(self.logs)
        return path

    def state_dict(self) -> dict[str, Any]:
        """Generator state and totals (the curriculum checkpoints itself)."""
        return {
            "seed": self.seed,
            "rng": self.rng.bit_generator.state,
            "sample_id": self._sample_id,
            "tier_counts": self._tier_counts.copy(),
            "family_counts": self._family_counts.copy(),
            "kind_counts": self._kind_counts.copy(),
            "kinds_counted": self._kinds_counted,
        }

    def load_state_dict(
        self,
        state: Mapping[str, Any],
        sampling_log: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Restore a :meth:`state_dict`; sampling continues exactly.

        A state that does not fit (a key missing, a seed, generator state or count of the
        wrong kind) is a :class:`~gymcurric.errors.ConfigError` naming the key, and leaves the
        sampler as it was.

        Args:
            state: a :meth:`state_dict`.
            sampling_log: the sampling log written up to ``state`` (the path of its
                ``datapack_samples.jsonl``, or its entries). Only a state saved before the tag
                kinds and the ``fragile_high`` / ``fragile_critical`` / ``low_efficiency_score``
                families were counted needs it: those totals are recounted from the pack ids
                of the log's last ``sample_id`` entries, so :meth:`get_diagnostics` is right
                after a resume. Without a log that fits, they count the batches drawn after
                the resume only (``tag_coverage`` is then a share of those), with a
                :class:`~gymcurric.errors.GymcurricWarning`.
        """
        seed, rng, sample_id, tiers, families, kinds, kinds_counted = _checked_state(state)
        # checked whole first: a state that does not fit leaves the sampler as it was
        self.seed, self.rng, self._sample_id = seed, rng, sample_id
        self._tier_counts[:] = tiers
        if kinds is not None and families.size == len(TAG_FAMILIES):
            self._family_counts[:] = families
            self._kind_counts[:] = kinds
            total = self._tier_counts.sum()
            self._kinds_counted = int(total if kinds_counted is None else kinds_counted)
            return
        recounted = self._recount(sampling_log)
        if recounted is not None:
            self._family_counts[:], self._kind_counts[:] = recounted
            self._kinds_counted = int(self._tier_counts.sum())
            return
        # the older families as saved; the rest, and the kinds, from the resume on
        self._family_counts[:] = 0
        self._family_counts[: families.size] = families
        self._kind_counts[:] = 0
        self._kinds_counted = 0
        warnings.warn(
            "DataPackRLSampler.load_state_dict: the state was saved before tag kinds were "
            "counted, and no sampling log that fits it was given (sampling_log="
            f"{sampling_log!r}): tag_coverage and the counts of the newer tag families cover "
            "the batches drawn from now on only",
            GymcurricWarning,
            stacklevel=2,
        )

    def _recount(
        self, log: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Family and kind totals of the log's last ``sample_id`` entries (``None``: no fit)."""
        n = self._sample_id
        try:
            if isinstance(log, str | os.PathLike):
                with open(log, encoding="utf-8") as f:
                    log = [json.loads(line) for line in f if line.strip()]
            entries = list(log or [])[-n:] if n else []
            if len(entries) != n or [e["sample_id"] for e in entries] != list(range(n)):
                return None
            ids = [
                s["pack_id"]
                for e in entries
                for s in e.get("sampled_episodes", e.get("samples", ()))  # older logs: samples
            ]
            rows = np.array([self.table.index(i) for i in ids], np.int64)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        t = self.table
        if not np.array_equal(np.bincount(t.tier[rows], minlength=len(TIERS)), self._tier_counts):
            return None  # not the batches this state counted
        families = ((t.tags[rows, None] & self._bits) != 0).sum(axis=0)
        kinds = ((t.kinds[rows, None] & self._kind_bits) != 0).sum(axis=0)
        return families, kinds


def _checked_state(
    state: Any,
) -> tuple[int, np.random.Generator, int, np.ndarray, np.ndarray, np.ndarray | None, int | None]:
    """The parts of a sampler ``state_dict``, checked (``ConfigError`` naming the key)."""
    src = "DataPackRLSampler.load_state_dict"
    if not isinstance(state, Mapping):
        raise ConfigError("state", state, "expected a mapping (a state_dict)", source=src)
    key = "seed"
    try:
        seed = _checked_seed(state["seed"], src)
        key = "rng"
        rng = np.random.default_rng(seed)
        rng.bit_generator.state = state["rng"]
        key = "sample_id"
        check_int(key, state[key], minimum=0, allow_numpy=True, source=src)
        sample_id = int(state[key])
        key = "kinds_counted"  # absent in older states
        check_int(key, state.get(key), minimum=0, allow_numpy=True, source=src, optional=True)
        kinds_counted = None if state.get(key) is None else int(state[key])
        counts: list[np.ndarray | None] = []
        for key, size in (
            ("tier_counts", len(TIERS)),
            ("family_counts", None),  # older states counted fewer families
            ("kind_counts", len(TAG_KINDS)),
        ):
            if key == "kind_counts" and key not in state:
                counts.append(None)
                continue
            arr = np.asarray(state[key])
            if arr.ndim != 1 or arr.size != (size or min(arr.size, len(TAG_FAMILIES))):
                raise ValueError(f"expected {size or f'at most {len(TAG_FAMILIES)}'} counts")
            counts.append(arr.astype(np.int64))
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        value = state.get(key) if isinstance(state, Mapping) else None
        raise ConfigError(
            key, value, f"does not fit a DataPackRLSampler state ({exc!r})", source=src
        ) from exc
    tiers, families, kinds = counts
    assert tiers is not None and families is not None
    return seed, rng, sample_id, tiers, families, kinds, kinds_counted


def _checked_seed(seed: Any, source: str) -> int:
    """``seed`` as an int, or a :class:`ConfigError` naming it (a bool, a float, < 0)."""
    check_int("seed", seed, minimum=0, allow_numpy=True, source=source)
    return int(seed)


def _shares(counts: np.ndarray, total: int) -> dict[str, float]:
    """The share of ``total`` sampled datapacks carrying each tag kind (``tag_coverage``)."""
    return {k: float(c) / total if total else 0.0 for k, c in zip(TAG_KINDS, counts, strict=True)}
