"""The semantic part of a datapack record: enrichment tags and supervision hints.

Both record forms are read here (see :mod:`gymcurric.datapacks.schema`): gymcurric's flattened
``enrichment`` fields and the specification's Stage 2.4 tag lists with the hints inside
``enrichment``. Records are frozen and every tag object is kept whole as a read-only mapping.
"""

from __future__ import annotations

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
    read_tag_list,
    require,
    thaw,
)

__all__ = ["FRAGILITY_LEVELS", "Affordance", "Enrichment", "SupervisionHints"]

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


def _check_novelty_tag(tag: Mapping[str, Any], at: Location) -> None:
    require(tag, "novelty_score", at)
    read_num(tag, "novelty_score", at, 0.0, 0.0, 1.0)  # a non-None default: null is refused
    read_num(tag, "expected_mpl_gain", at, 0.0)


def _check_fragility_tag(tag: Mapping[str, Any], at: Location) -> None:
    require(tag, "fragility_level", at)
    if tag["fragility_level"] not in FRAGILITY_LEVELS:
        raise at.error(
            "fragility_level", tag["fragility_level"], f"expected one of {list(FRAGILITY_LEVELS)}"
        )


def _check_efficiency_tag(tag: Mapping[str, Any], at: Location) -> None:
    read_str(tag, "metric", at, required=True)
    require(tag, "score", at)
    read_num(tag, "score", at, 0.0, 0.0, 1.0)  # a non-None default: null is refused


def _check_affordance_tag(tag: Mapping[str, Any], at: Location) -> None:
    read_bool(tag, "demonstrated", at, True)


#: The specification's (Stage 2.4) tag lists in ``enrichment``, and what each tag must hold.
_TAG_LISTS = {
    "novelty_tags": _check_novelty_tag,
    "fragility_tags": _check_fragility_tag,
    "efficiency_tags": _check_efficiency_tag,
    "affordance_tags": _check_affordance_tag,
    "intervention_tags": None,
    "risk_tags": None,
}
_DEFAULT_FLAT = {
    "fragility": "none",
    "risk": 0.0,
    "affordances": [],
    "efficiency": {},
    "novelty": 0.0,
    "interventions": 0,
}


@dataclass(frozen=True)
class Enrichment:
    """Semantic enrichment tags of a datapack (all optional), in either form.

    gymcurric's flattened fields and the specification's Stage 2.4 tag lists are both kept as
    given; the properties :attr:`novelty_score`, :attr:`expected_mpl_gain`,
    :attr:`fragility_levels`, :meth:`efficiency_scores`, :attr:`demonstrated` and
    :attr:`intervention_count` read the two together (what the strategies use).

    Attributes:
        fragility: one of :data:`FRAGILITY_LEVELS`.
        risk: risk score in [0, 1].
        affordances: the affordances the scenario exercises.
        efficiency_time: time-efficiency score in [0, 1], or ``None`` if not scored.
        efficiency_energy: energy-efficiency score in [0, 1], or ``None`` if not scored.
        novelty: novelty score in [0, 1].
        interventions: number of human interventions recorded.
        extra: unknown keys, kept for the round trip.
        efficiency_extra: unknown keys of ``efficiency``, kept for the round trip.
        novelty_tags: Stage 2.4 novelty tags (``novelty_score``, ``expected_mpl_gain``).
        fragility_tags: Stage 2.4 fragility tags (``fragility_level``).
        efficiency_tags: Stage 2.4 efficiency tags (``metric``, ``score``).
        affordance_tags: Stage 2.4 affordance tags (``demonstrated``).
        intervention_tags: Stage 2.4 intervention tags.
        risk_tags: Stage 2.4 risk tags.
        supervision_hints: the hints where the specification puts them (inside
            ``enrichment``), or ``None`` when the record gives them at the top level.

    Examples:
        >>> e = Enrichment.from_dict({"novelty_tags": [{"novelty_score": 0.4,
        ...     "expected_mpl_gain": 3}, {"novelty_score": 0.9, "expected_mpl_gain": 2}]},
        ...     Location(None, None))
        >>> e.novelty_score, e.expected_mpl_gain
        (0.9, 5.0)
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
    novelty_tags: tuple[Mapping[str, Any], ...] | None = None
    fragility_tags: tuple[Mapping[str, Any], ...] | None = None
    efficiency_tags: tuple[Mapping[str, Any], ...] | None = None
    affordance_tags: tuple[Mapping[str, Any], ...] | None = None
    intervention_tags: tuple[Mapping[str, Any], ...] | None = None
    risk_tags: tuple[Mapping[str, Any], ...] | None = None
    supervision_hints: SupervisionHints | None = None

    _KNOWN = frozenset(
        {
            "fragility",
            "risk",
            "affordances",
            "efficiency",
            "novelty",
            "interventions",
            "supervision_hints",
            *_TAG_LISTS,
        }
    )

    def __post_init__(self) -> None:
        for name in _TAG_LISTS:
            tags = getattr(self, name)
            if tags is not None:
                object.__setattr__(self, name, tuple(freeze(t) for t in tags))

    def tags(self, name: str) -> tuple[Mapping[str, Any], ...]:
        """The tag list ``name`` (e.g. ``"novelty_tags"``), ``()`` when the record has none."""
        tags: tuple[Mapping[str, Any], ...] | None = getattr(self, name)
        return tags or ()

    # ------------------------------------------------------------------ both forms together

    @property
    def novelty_score(self) -> float:
        """The larger of ``novelty`` and every tag's ``novelty_score`` (the specification's max)."""
        return max([self.novelty, *(float(t["novelty_score"]) for t in self.tags("novelty_tags"))])

    @property
    def expected_mpl_gain(self) -> float:
        """The sum of the novelty tags' ``expected_mpl_gain`` (0 without tags)."""
        return float(sum(float(t.get("expected_mpl_gain", 0.0)) for t in self.tags("novelty_tags")))

    @property
    def fragility_levels(self) -> frozenset[str]:
        """``fragility`` and every tag's ``fragility_level``."""
        return frozenset(
            [self.fragility, *(t["fragility_level"] for t in self.tags("fragility_tags"))]
        )

    @property
    def fragility_level(self) -> str:
        """The most fragile of :attr:`fragility_levels`."""
        return max(self.fragility_levels, key=FRAGILITY_LEVELS.index)

    def efficiency_scores(self, metric: str) -> list[float]:
        """Every score for ``metric`` (``"time"``, ``"energy"``, ...), from either form."""
        flat = {"time": self.efficiency_time, "energy": self.efficiency_energy}.get(metric)
        scores = [] if flat is None else [flat]
        scores += [float(t["score"]) for t in self.tags("efficiency_tags") if t["metric"] == metric]
        return scores

    @property
    def all_efficiency_scores(self) -> list[float]:
        """Every efficiency score of either form (any metric)."""
        flat = [v for v in (self.efficiency_time, self.efficiency_energy) if v is not None]
        return flat + [float(t["score"]) for t in self.tags("efficiency_tags")]

    @property
    def demonstrated(self) -> tuple[bool, ...]:
        """``demonstrated`` of every affordance and affordance tag (``False``: novel)."""
        return tuple(a.demonstrated for a in self.affordances) + tuple(
            bool(t.get("demonstrated", True)) for t in self.tags("affordance_tags")
        )

    @property
    def intervention_count(self) -> int:
        """``interventions`` plus the number of intervention tags."""
        return self.interventions + len(self.tags("intervention_tags"))

    @property
    def document_form(self) -> bool:
        """Whether the enrichment uses the specification's tag lists or in-enrichment hints."""
        return self.supervision_hints is not None or any(
            getattr(self, n) is not None for n in _TAG_LISTS
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
            **{name: read_tag_list(d, name, at, check) for name, check in _TAG_LISTS.items()},
            supervision_hints=(
                None
                if d.get("supervision_hints") is None
                else SupervisionHints.from_dict(d["supervision_hints"], at)
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, unknown keys included.

        An enrichment in the specification's form gets only the flattened fields that differ
        from their defaults, so its JSON form stays the form it was read in.
        """
        eff: dict[str, Any] = {}
        if self.efficiency_time is not None:
            eff["time"] = self.efficiency_time
        if self.efficiency_energy is not None:
            eff["energy"] = self.efficiency_energy
        eff.update(thaw(self.efficiency_extra))
        flat: dict[str, Any] = {
            "fragility": self.fragility,
            "risk": self.risk,
            "affordances": [a.to_dict() for a in self.affordances],
            "efficiency": eff,
            "novelty": self.novelty,
            "interventions": self.interventions,
        }
        if not self.document_form:
            return {**flat, **thaw(self.extra)}
        out = {k: v for k, v in flat.items() if v != _DEFAULT_FLAT[k]}
        for name in _TAG_LISTS:
            if getattr(self, name) is not None:
                out[name] = [thaw(t) for t in self.tags(name)]
        if self.supervision_hints is not None:
            out["supervision_hints"] = self.supervision_hints.to_dict()
        out.update(thaw(self.extra))
        return out


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
