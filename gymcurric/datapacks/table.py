"""Per-datapack arrays, computed once, that every strategy works on (no per-record Python).

Tag families (bit ``i`` of :attr:`DatapackTable.tags` is ``TAG_FAMILIES[i]``):

==========================  ======================================================================
family                      a datapack belongs to it when
==========================  ======================================================================
``safety_critical``         ``supervision_hints.safety_critical`` is true
``fragile_objects``         ``enrichment.fragility`` is ``"high"`` or ``"critical"``
``high_energy_cost``        ``enrichment.efficiency.energy`` is scored and < 0.5
``novel_affordance``        some affordance has ``demonstrated: false``
``intervention``            ``enrichment.interventions`` > 0
``demonstrated_affordance`` some affordance has ``demonstrated: true``
``efficiency_time``         ``enrichment.efficiency.time`` is scored
``efficiency_energy``       ``enrichment.efficiency.energy`` is scored
``baseline``                none of ``safety_critical``, ``fragile_objects``, ``high_energy_cost``,
                            ``novel_affordance``, ``intervention``
==========================  ======================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import ConfigError

__all__ = ["STRATIFY_KEYS", "TAG_FAMILIES", "DatapackTable"]

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
)
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
    bits = 0
    if h.safety_critical:
        bits |= _BIT["safety_critical"]
    if e.fragility in ("high", "critical"):
        bits |= _BIT["fragile_objects"]
    if e.efficiency_energy is not None and e.efficiency_energy < 0.5:
        bits |= _BIT["high_energy_cost"]
    if any(not a.demonstrated for a in e.affordances):
        bits |= _BIT["novel_affordance"]
    if e.interventions > 0:
        bits |= _BIT["intervention"]
    if any(a.demonstrated for a in e.affordances):
        bits |= _BIT["demonstrated_affordance"]
    if e.efficiency_time is not None:
        bits |= _BIT["efficiency_time"]
    if e.efficiency_energy is not None:
        bits |= _BIT["efficiency_energy"]
    if not bits & _SPECIAL:
        bits |= _BIT["baseline"]
    return bits


class DatapackTable:
    """Datapack records plus read-only numpy columns for vectorised sampling.

    Args:
        packs: the records, e.g. from :func:`~gymcurric.datapacks.load_datapacks`.

    Attributes:
        records: the records (row ``i`` of every array describes ``records[i]``).
        tier: ``int8`` tiers.
        trust: ``float64`` trust scores.
        sampling_weight: ``float64`` curator weights.
        novelty: ``float64`` novelty scores.
        mpl_gain: ``float64`` marginal-productivity gains.
        risk: ``float64`` risk scores.
        safety_critical: ``bool`` flags.
        tags: ``uint16`` bit masks over :data:`TAG_FAMILIES`.

    Examples:
        >>> from gymcurric.datapacks import DataPack
        >>> packs = [DataPack(f"p{i}", "reach", "E-v0", tier=i % 3) for i in range(4)]
        >>> table = DatapackTable(packs)
        >>> table.tier.tolist(), bool(table.has_tag("baseline").all())
        ([0, 1, 2, 0], True)
    """

    def __init__(self, packs: Sequence[DataPack]) -> None:
        self.records: tuple[DataPack, ...] = tuple(packs)
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
        self.novelty = np.fromiter((p.enrichment.novelty for p in r), np.float64, n)
        self.mpl_gain = np.fromiter((p.mpl_gain for p in r), np.float64, n)
        self.risk = np.fromiter((p.enrichment.risk for p in r), np.float64, n)
        self.safety_critical = np.fromiter(
            (p.supervision_hints.safety_critical for p in r), np.bool_, n
        )
        self.tags = np.fromiter((_tag_bits(p) for p in r), np.uint16, n)
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
                "fragility": lambda p: p.enrichment.fragility,
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
