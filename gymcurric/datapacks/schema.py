"""Typed, immutable datapack records and their validation.

A *datapack* describes one scenario (an env id plus task parameters) with metadata that a
curriculum uses to choose what to present next. Two record forms are read, into the same
columns: gymcurric's (below) and the datapack-sampler specification's Stage 1 + Stage 2.4 form,
whose ``enrichment`` keeps Stage 2.4's tag lists (``novelty_tags``, ``fragility_tags``,
``efficiency_tags``, ``affordance_tags``, ``intervention_tags``, ``risk_tags``) and holds the
``supervision_hints``; a record may use either form, or both. gymcurric's JSON form::

    {
      "pack_id": "pick-0001",                  # required, unique string
      "task_type": "pick_place",               # required string
      "env_id": "gymcurric/HazardNav-v0",      # required string
      "tier": 2,                               # required: 0 redundant, 1 context-novel, 2 frontier
      "task_params": {"hazard_radius": 0.3},   # JSON object, default {}
      "seed": 7,                               # int >= 0 or null
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

The specification's form of the same enrichment::

      "enrichment": {
        "novelty_tags": [{"novelty_score": 0.7, "expected_mpl_gain": 4.0}],
        "fragility_tags": [{"fragility_level": "high"}],
        "efficiency_tags": [{"metric": "energy", "score": 0.3}],
        "affordance_tags": [{"demonstrated": false}],
        "intervention_tags": [{}], "risk_tags": [],
        "supervision_hints": {"safety_critical": true, "prerequisite_tags": ["grasp"]}
      }

Each tag object is kept whole (every key); only the keys the formulas read are checked
(``novelty_score`` in [0, 1] and ``expected_mpl_gain``, ``fragility_level``, ``metric`` and
``score`` in [0, 1], ``demonstrated``). Where a record gives both forms, a flattened field
counts as one more tag: novelty is the largest score, the MPL gain the sum (``mpl_gain`` plus
every ``expected_mpl_gain``), and a tag family holds if either form puts the datapack in it.
``env_id`` may be omitted (the specification's records carry none): such a datapack runs in
whatever env it is presented to.

Fields not listed above are kept, at every level, in ``extra`` and written back by
:meth:`DataPack.to_dict`, so files written by newer tools survive a round trip. Records are
frozen and their mappings are read-only views: nothing in gymcurric changes a datapack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymcurric._checks import is_finite_number
from gymcurric.datapacks._fields import (
    Location,
    empty_mapping,
    freeze,
    read_int,
    read_num,
    read_str,
    thaw,
)
from gymcurric.datapacks.enrichment import (
    FRAGILITY_LEVELS,
    Affordance,
    Enrichment,
    SupervisionHints,
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


@dataclass(frozen=True)
class DataPack:
    """One datapack: a scenario plus the metadata a curriculum samples by (immutable).

    Attributes:
        pack_id: unique id.
        task_type: kind of task, e.g. ``"pick_place"``.
        env_id: the Gymnasium id the scenario runs in, or ``None`` (any env it is presented to;
            the specification's records name none).
        tier: 0 redundant, 1 context-novel, 2 frontier.
        task_params: the task dict passed as ``reset(options={"task": ...})`` (read-only).
        seed: the reset seed (an integer >= 0), or ``None``.
        trust_score: how much the data is trusted, in [0, 1].
        sampling_weight: the curator's base weight, >= 0.
        objective_vector: per-objective values (never changed by gymcurric).
        mpl_gain: marginal-productivity gain (an economics field, never changed).
        timestamp: when the datapack was made (number, string or ``None``, kept as given).
        enrichment: semantic tags.
        supervision_hints: curator hints, wherever the record gives them (top level, or
            ``enrichment.supervision_hints`` in the specification's form).
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
    env_id: str | None
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
        read_int({"seed": self.seed}, "seed", at, None, lo=0)  # a reset seed: Gymnasium's >= 0
        inner = self.enrichment.supervision_hints
        if inner is not None and self.supervision_hints is not inner:
            if not _hints_agree(self.supervision_hints, inner):
                raise at.error(
                    "supervision_hints",
                    self.supervision_hints.to_dict(),
                    f"differs from enrichment.supervision_hints ({inner.to_dict()!r}); "
                    "give the hints once",
                )
            object.__setattr__(self, "supervision_hints", inner)
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
        if not isinstance(objv, list) or not all(is_finite_number(v) for v in objv):
            reason = "expected a list of finite numbers"  # an int too large for a float is not
            raise at.error("objective_vector", objv, reason)
        ts = data.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int | float | str)):
            raise at.error("timestamp", ts, "expected a number, a string or null")
        enrichment = Enrichment.from_dict(data.get("enrichment"), at)
        hints = SupervisionHints.from_dict(data.get("supervision_hints"), at)
        inner = enrichment.supervision_hints
        if inner is not None and not _hints_agree(hints, inner):
            raise at.error(
                "supervision_hints",
                data.get("supervision_hints"),
                f"differs from enrichment.supervision_hints ({inner.to_dict()!r}); "
                "give the hints once",
            )
        return cls(
            pack_id=read_str(data, "pack_id", at, required=True),
            task_type=read_str(data, "task_type", at, required=True),
            env_id=read_str(data, "env_id", at, default=None),
            tier=read_int(data, "tier", at, None, allowed=TIERS),
            task_params=params,  # frozen (once) by __post_init__
            seed=read_int(data, "seed", at, None, lo=0),
            trust_score=read_num(data, "trust_score", at, 1.0, 0.0, 1.0),
            sampling_weight=read_num(data, "sampling_weight", at, 1.0, 0.0),
            objective_vector=tuple(float(v) for v in objv),
            mpl_gain=read_num(data, "mpl_gain", at, 0.0),
            timestamp=ts,
            enrichment=enrichment,
            supervision_hints=hints,
            episode=read_str(data, "episode", at),
            extra={k: v for k, v in data.items() if k not in cls._KNOWN},  # frozen there too
            source=source,
        )

    @property
    def expected_mpl_gain(self) -> float:
        """The MPL gain the strategies use (the specification's urgency input).

        ``mpl_gain`` plus the sum of the novelty tags' ``expected_mpl_gain``: the flattened
        field counts as one more tag, as ``novelty`` does in :attr:`Enrichment.novelty_score`.
        """
        return self.mpl_gain + self.enrichment.expected_mpl_gain

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a fresh dict), unknown keys included; ``from_dict`` reads it back.

        Hints read from ``enrichment.supervision_hints`` are written back there only, and a
        missing ``env_id`` stays missing.
        """
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
        if self.env_id is None:
            del out["env_id"]
        if self.enrichment.supervision_hints is not None:
            del out["supervision_hints"]
        if self.episode is not None:
            out["episode"] = self.episode
        out.update(thaw(self.extra))
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # Mapping proxies do not pickle: travel as the JSON form (e.g. to vector-env workers).
        return (_unpickle, (self.to_dict(), self.source))


def _hints_agree(top: SupervisionHints, inner: SupervisionHints) -> bool:
    """Whether top-level hints may stand beside ``enrichment.supervision_hints``.

    They may when they are the same hints (unknown keys included) or the defaults with no
    other key (what gymcurric writes for a datapack without hints); anything else would be
    dropped, since the record keeps the enrichment's.
    """
    if top == inner and dict(top.extra) == dict(inner.extra):
        return True
    return top == SupervisionHints() and not top.extra


def _unpickle(data: dict[str, Any], source: str | None) -> DataPack:
    return DataPack.from_dict(data, source=source)
