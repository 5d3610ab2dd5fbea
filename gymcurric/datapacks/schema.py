"""Typed, immutable datapack records and their validation.

A *datapack* describes one scenario (an env id plus task parameters) with metadata that a
curriculum uses to choose what to present next. The JSON form of one record::

    {
      "pack_id": "pick-0001",                  # required, unique string
      "task_type": "pick_place",               # required string
      "env_id": "gymcurric/HazardNav-v0",      # required string
      "tier": 2,                               # required: 0 redundant, 1 context-novel, 2 frontier
      "task_params": {"hazard_radius": 0.3},   # JSON object, default {}
      "seed": 7,                               # int or null
      "trust_score": 0.9,                      # [0, 1], default 1.0
      "sampling_weight": 1.0,                  # >= 0, default 1.0
      "objective_vector": [1.0, 0.2],          # numbers, default []
      "mpl_gain": 4.0,                         # marginal-productivity gain (economics), default 0
      "timestamp": "2026-11-01T12:00:00Z",     # number, string or null
      "episode": "episodes/pick-0001.npz",     # optional, relative to the record's file
      "enrichment": {
        "fragility": "high",                   # none | low | medium | high | critical
        "risk": 0.4,                           # [0, 1]
        "affordances": [{"name": "grasp", "demonstrated": false}],
        "efficiency": {"time": 0.8, "energy": 0.3},   # scores in [0, 1], each optional
        "novelty": 0.7,                        # [0, 1]
        "interventions": 2                     # count >= 0
      },
      "supervision_hints": {
        "safety_critical": true,
        "curriculum_stage": "frontier",        # string or null
        "prerequisite_tags": ["grasp"]
      }
    }

Fields not listed above are kept, at every level, in ``extra`` and written back by
:meth:`DataPack.to_dict`, so files written by newer tools survive a round trip. Records are
frozen and their mappings are read-only views: nothing in gymcurric changes a datapack.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymcurric.datapacks._fields import (
    Location,
    empty_mapping,
    extra_fields,
    freeze,
    read_bool,
    read_int,
    read_num,
    read_object,
    read_str,
    thaw,
)

__all__ = [
    "FRAGILITY_LEVELS",
    "TIERS",
    "Affordance",
    "DataPack",
    "Enrichment",
    "SupervisionHints",
]

#: Tier codes: 0 redundant, 1 context-novel, 2 frontier.
TIERS: tuple[int, ...] = (0, 1, 2)
#: Allowed ``enrichment.fragility`` levels, least to most fragile.
FRAGILITY_LEVELS: tuple[str, ...] = ("none", "low", "medium", "high", "critical")


@dataclass(frozen=True)
class Affordance:
    """One affordance a datapack exercises, and whether it has been demonstrated.

    Attributes:
        name: the affordance, e.g. ``"grasp"``.
        demonstrated: ``False`` marks a *novel* (undemonstrated) affordance.
        extra: unknown keys, kept for the round trip.
    """

    name: str
    demonstrated: bool = True
    extra: Mapping[str, Any] = field(default_factory=empty_mapping, compare=False)

    _KNOWN = frozenset({"name", "demonstrated"})

    @classmethod
    def from_dict(cls, data: Any, at: Location) -> Affordance:
        """Validate one affordance object (``at`` says where it was read)."""
        d = read_object(data, "", at)
        return cls(
            read_str(d, "name", at, required=True),
            read_bool(d, "demonstrated", at, True),
            extra_fields(d, cls._KNOWN),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, unknown keys included."""
        return {"name": self.name, "demonstrated": self.demonstrated, **thaw(self.extra)}


@dataclass(frozen=True)
class Enrichment:
    """Semantic enrichment tags of a datapack (all optional).

    Attributes:
        fragility: one of :data:`FRAGILITY_LEVELS`.
        risk: risk score in [0, 1].
        affordances: the affordances the scenario exercises.
        efficiency_time: time-efficiency score in [0, 1], or ``None`` if not scored.
        efficiency_energy: energy-efficiency score in [0, 1], or ``None`` if not scored.
        novelty: novelty score in [0, 1].
        interventions: number of human interventions recorded.
        extra: unknown keys, kept for the round trip.
    """

    fragility: str = "none"
    risk: float = 0.0
    affordances: tuple[Affordance, ...] = ()
    efficiency_time: float | None = None
    efficiency_energy: float | None = None
    novelty: float = 0.0
    interventions: int = 0
    extra: Mapping[str, Any] = field(default_factory=empty_mapping, compare=False)
    efficiency_extra: Mapping[str, Any] = field(default_factory=empty_mapping, compare=False)

    _KNOWN = frozenset(
        {"fragility", "risk", "affordances", "efficiency", "novelty", "interventions"}
    )

    @classmethod
    def from_dict(cls, data: Any, at: Location) -> Enrichment:
        """Validate an ``enrichment`` object (``at`` says where it was read)."""
        d = read_object(data, "enrichment", at)
        at = at.sub("enrichment")
        fragility = d.get("fragility", "none")
        if fragility not in FRAGILITY_LEVELS:
            raise at.error("fragility", fragility, f"expected one of {list(FRAGILITY_LEVELS)}")
        affs = d.get("affordances", [])
        if not isinstance(affs, list):
            raise at.error("affordances", affs, "expected a list of objects")
        eff = read_object(d.get("efficiency"), "efficiency", at)
        eat = at.sub("efficiency")
        return cls(
            fragility=fragility,
            risk=read_num(d, "risk", at, 0.0, 0.0, 1.0),
            affordances=tuple(
                Affordance.from_dict(a, at.sub(f"affordances[{i}]")) for i, a in enumerate(affs)
            ),
            efficiency_time=read_num(eff, "time", eat, None, 0.0, 1.0),
            efficiency_energy=read_num(eff, "energy", eat, None, 0.0, 1.0),
            novelty=read_num(d, "novelty", at, 0.0, 0.0, 1.0),
            interventions=read_int(d, "interventions", at, 0, lo=0),
            extra=extra_fields(d, cls._KNOWN),
            efficiency_extra=extra_fields(eff, frozenset({"time", "energy"})),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, unknown keys included."""
        eff: dict[str, Any] = {}
        if self.efficiency_time is not None:
            eff["time"] = self.efficiency_time
        if self.efficiency_energy is not None:
            eff["energy"] = self.efficiency_energy
        eff.update(thaw(self.efficiency_extra))
        return {
            "fragility": self.fragility,
            "risk": self.risk,
            "affordances": [a.to_dict() for a in self.affordances],
            "efficiency": eff,
            "novelty": self.novelty,
            "interventions": self.interventions,
            **thaw(self.extra),
        }


@dataclass(frozen=True)
class SupervisionHints:
    """Hints from whoever curated the datapack.

    Attributes:
        safety_critical: the scenario matters for safety (boosted by urgency-based strategies).
        curriculum_stage: the stage the curator suggests, e.g. ``"frontier"``, or ``None``.
        prerequisite_tags: tags that must be mastered before this datapack is presented.
        extra: unknown keys, kept for the round trip.
    """

    safety_critical: bool = False
    curriculum_stage: str | None = None
    prerequisite_tags: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=empty_mapping, compare=False)

    _KNOWN = frozenset({"safety_critical", "curriculum_stage", "prerequisite_tags"})

    @classmethod
    def from_dict(cls, data: Any, at: Location) -> SupervisionHints:
        """Validate a ``supervision_hints`` object (``at`` says where it was read)."""
        d = read_object(data, "supervision_hints", at)
        at = at.sub("supervision_hints")
        tags = d.get("prerequisite_tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise at.error("prerequisite_tags", tags, "expected a list of strings")
        return cls(
            read_bool(d, "safety_critical", at, False),
            read_str(d, "curriculum_stage", at),
            tuple(tags),
            extra_fields(d, cls._KNOWN),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, unknown keys included."""
        return {
            "safety_critical": self.safety_critical,
            "curriculum_stage": self.curriculum_stage,
            "prerequisite_tags": list(self.prerequisite_tags),
            **thaw(self.extra),
        }


@dataclass(frozen=True)
class DataPack:
    """One datapack: a scenario plus the metadata a curriculum samples by (immutable).

    Attributes:
        pack_id: unique id.
        task_type: kind of task, e.g. ``"pick_place"``.
        env_id: the Gymnasium id the scenario runs in.
        tier: 0 redundant, 1 context-novel, 2 frontier.
        task_params: the task dict passed as ``reset(options={"task": ...})`` (read-only).
        seed: the reset seed, or ``None``.
        trust_score: how much the data is trusted, in [0, 1].
        sampling_weight: the curator's base weight, >= 0.
        objective_vector: per-objective values (never changed by gymcurric).
        mpl_gain: marginal-productivity gain (an economics field, never changed).
        timestamp: when the datapack was made (number, string or ``None``, kept as given).
        enrichment: semantic tags.
        supervision_hints: curator hints.
        episode: path of a recorded-episode ``.npz``, relative to ``source``'s directory.
        extra: unknown top-level keys, kept for the round trip.
        source: the file the record was read from (not part of the JSON form).

    Examples:
        >>> pack = DataPack.from_dict({"pack_id": "a", "task_type": "reach",
        ...                            "env_id": "gymcurric/Grid-v0", "tier": 2, "colour": "red"})
        >>> pack.tier, pack.trust_score, pack.extra["colour"]
        (2, 1.0, 'red')
        >>> DataPack.from_dict(pack.to_dict()) == pack
        True
    """

    pack_id: str
    task_type: str
    env_id: str
    tier: int
    task_params: Mapping[str, Any] = field(default_factory=empty_mapping)
    seed: int | None = None
    trust_score: float = 1.0
    sampling_weight: float = 1.0
    objective_vector: tuple[float, ...] = ()
    mpl_gain: float = 0.0
    timestamp: float | str | None = None
    enrichment: Enrichment = field(default_factory=Enrichment)
    supervision_hints: SupervisionHints = field(default_factory=SupervisionHints)
    episode: str | None = None
    extra: Mapping[str, Any] = field(default_factory=empty_mapping, compare=False)
    source: str | None = field(default=None, compare=False, repr=False)

    _KNOWN = frozenset(
        {
            "pack_id",
            "task_type",
            "env_id",
            "tier",
            "task_params",
            "seed",
            "trust_score",
            "sampling_weight",
            "objective_vector",
            "mpl_gain",
            "timestamp",
            "enrichment",
            "supervision_hints",
            "episode",
        }
    )

    def __post_init__(self) -> None:
        # Records built directly (not via from_dict) get the same range checks and the same
        # read-only containers, so no path leads to a mutable or out-of-range datapack.
        at = Location(self.source, None)
        if isinstance(self.tier, bool) or self.tier not in TIERS:
            raise at.error("tier", self.tier, f"expected one of {list(TIERS)}")
        read_num({"trust_score": self.trust_score}, "trust_score", at, 1.0, 0.0, 1.0)
        read_num({"sampling_weight": self.sampling_weight}, "sampling_weight", at, 1.0, 0.0)
        read_num({"mpl_gain": self.mpl_gain}, "mpl_gain", at, 0.0)
        object.__setattr__(self, "task_params", freeze(self.task_params))
        object.__setattr__(self, "extra", freeze(self.extra))
        object.__setattr__(self, "objective_vector", tuple(self.objective_vector))

    @classmethod
    def from_dict(
        cls, data: Any, *, source: str | None = None, line: int | None = None
    ) -> DataPack:
        """Validate one record; a :class:`~gymcurric.errors.DataError` names where it failed.

        Args:
            data: the decoded JSON object.
            source: the file it came from, for messages and for resolving ``episode``.
            line: its line (JSONL) or ``None``.
        """
        at = Location(source, line)
        if not isinstance(data, Mapping):
            raise at.error("<record>", data, "expected a JSON object")
        params = data.get("task_params", {})
        if not isinstance(params, Mapping):
            raise at.error("task_params", params, "expected a JSON object")
        objv = data.get("objective_vector", [])
        if not isinstance(objv, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in objv
        ):
            raise at.error("objective_vector", objv, "expected a list of finite numbers")
        ts = data.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int | float | str)):
            raise at.error("timestamp", ts, "expected a number, a string or null")
        return cls(
            pack_id=read_str(data, "pack_id", at, required=True),
            task_type=read_str(data, "task_type", at, required=True),
            env_id=read_str(data, "env_id", at, required=True),
            tier=read_int(data, "tier", at, None, allowed=TIERS),
            task_params=params,  # frozen (once) by __post_init__
            seed=read_int(data, "seed", at, None),
            trust_score=read_num(data, "trust_score", at, 1.0, 0.0, 1.0),
            sampling_weight=read_num(data, "sampling_weight", at, 1.0, 0.0),
            objective_vector=tuple(float(v) for v in objv),
            mpl_gain=read_num(data, "mpl_gain", at, 0.0),
            timestamp=ts,
            enrichment=Enrichment.from_dict(data.get("enrichment"), at),
            supervision_hints=SupervisionHints.from_dict(data.get("supervision_hints"), at),
            episode=read_str(data, "episode", at),
            extra={k: v for k, v in data.items() if k not in cls._KNOWN},  # frozen there too
            source=source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a fresh dict), unknown keys included; ``from_dict`` reads it back."""
        out: dict[str, Any] = {
            "pack_id": self.pack_id,
            "task_type": self.task_type,
            "env_id": self.env_id,
            "tier": self.tier,
            "task_params": thaw(self.task_params),
            "seed": self.seed,
            "trust_score": self.trust_score,
            "sampling_weight": self.sampling_weight,
            "objective_vector": list(self.objective_vector),
            "mpl_gain": self.mpl_gain,
            "timestamp": self.timestamp,
            "enrichment": self.enrichment.to_dict(),
            "supervision_hints": self.supervision_hints.to_dict(),
        }
        if self.episode is not None:
            out["episode"] = self.episode
        out.update(thaw(self.extra))
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Mapping proxies do not pickle: travel as the JSON form (e.g. to vector-env workers).
        return (_unpickle, (self.to_dict(), self.source))


def _unpickle(data: dict[str, Any], source: str | None) -> DataPack:
    return DataPack.from_dict(data, source=source)
