"""Stage definitions of the staged datapack curriculum, and the schedule it hands out.

A curriculum config (YAML or JSON) maps 1:1 onto :class:`DataPackCurriculumConfig`::

    window: 100                      # episodes in the rolling diagnostics window
    prerequisite_threshold: 0.9      # a tag is satisfied once its success rate exceeds this
    prerequisite_min_attempts: 10    # ... over at least this many attempts
    auto_advance: true
    stages:
      - name: warmup
        strategy: balanced
        strategy_params: {tier_ratios: {0: 0.6, 1: 0.4, 2: 0.0}}
        weight_multipliers: {safety_critical: 1.5}   # selector -> factor
        filters: {min_tier: 0, max_tier: 1, exclude_tags: [], require_tags: [],
                  curriculum_stage: null}            # a stage name, a list of them, or null
        rules: [{metric: error_rate, op: "<=", threshold: 0.3}]   # op <=, >=, < or >;
                                     # optional window (episodes; default the config's window)
        fallback_episodes: 500       # advance after this many episodes whatever the rules say
        fallback_episode: null       # ... or once the curriculum has run this many episodes

The specification's format (``stages`` a mapping from name to stage, with
``filter_constraints``, ``transition_rule`` and ``fallback_episode``) is read too, by
:mod:`gymcurric.datapacks.spec_config`. Selectors (keys of ``weight_multipliers``, entries of
``exclude_tags`` / ``require_tags``) are tag families, ``tier_<n>`` or
``curriculum_stage_<name>`` (:mod:`gymcurric.datapacks.table`).

Rule metrics: ``error_rate`` (rolling share of episodes with an error), ``affordance_success_rate``
(rolling share of successful affordance/tag attempts), ``mpl_improvement_rate`` (relative
change of mean MPL from the older to the newer half of the window) and ``mean_return`` (mean
episode return over the window, from ``update_diagnostics(return_=...)``). A stage advances when all
its rules hold over a full window of its own episodes (each rule's ``window``), or after
``fallback_episodes`` of its episodes, or at episode ``fallback_episode``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric._checks import check_int, finite_reason, is_finite_number, shown
from gymcurric._parsing import (
    drop_bom,
    is_blank_config,
    is_yaml_file,
    load_yaml_unique,
    loads_json_unique,
    yaml_error_text,
)
from gymcurric.datapacks.strategies import make_strategy
from gymcurric.datapacks.table import DatapackTable, check_selector
from gymcurric.errors import ConfigError, DataError

__all__ = [
    "CONVENTIONS",
    "METRICS",
    "CurriculumSchedule",
    "DataPackCurriculumConfig",
    "FilterConstraints",
    "StageSpec",
    "TransitionRule",
    "load_curriculum_config",
]

#: Values of :attr:`DataPackCurriculumConfig.conventions`.
CONVENTIONS: tuple[str, ...] = ("gymcurric", "specification")
#: Metrics a :class:`TransitionRule` may test.
METRICS: tuple[str, ...] = (
    "error_rate",
    "affordance_success_rate",
    "mpl_improvement_rate",
    "mean_return",
)


def _tags(name: str, value: Any, owner: str) -> tuple[str, ...]:
    if isinstance(value, str | Mapping) or not isinstance(value, list | tuple):
        raise ConfigError(name, value, "expected a list of selectors", source=owner)
    for i, t in enumerate(value):
        check_selector(t, f"{name}[{i}]", owner)
    return tuple(value)


@dataclass(frozen=True)
class FilterConstraints:
    """Which datapacks a stage may present.

    Attributes:
        min_tier: lowest tier allowed.
        max_tier: highest tier allowed.
        exclude_tags: selectors (tag families, ``tier_<n>``, ``curriculum_stage_<name>``;
            see :mod:`~gymcurric.datapacks.table`) that exclude a datapack.
        require_tags: selectors a datapack must all match.
        curriculum_stage: a stage name or a list of them; if set, datapacks hinted for a stage
            not named here are excluded (datapacks without a ``curriculum_stage`` hint stay
            eligible).
    """

    min_tier: int = 0
    max_tier: int = 2
    exclude_tags: tuple[str, ...] = ()
    require_tags: tuple[str, ...] = ()
    curriculum_stage: str | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        owner = "FilterConstraints"
        for key in ("min_tier", "max_tier"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 2:
                raise ConfigError(key, v, "expected a tier in {0, 1, 2}", source=owner)
        if self.min_tier > self.max_tier:
            raise ConfigError(
                "min_tier", self.min_tier, f"above max_tier {self.max_tier}", source=owner
            )
        object.__setattr__(self, "exclude_tags", _tags("exclude_tags", self.exclude_tags, owner))
        object.__setattr__(self, "require_tags", _tags("require_tags", self.require_tags, owner))
        stage = self.curriculum_stage
        if isinstance(stage, list | tuple) and all(isinstance(v, str) for v in stage):
            object.__setattr__(self, "curriculum_stage", tuple(stage))
        elif stage is not None and not isinstance(stage, str):
            # an int of 400 digits (YAML's or JSON's) cut; a list item by item, so that a
            # YAML 1e3 among long names is still found and named by unquoted_name_error
            got = [shown(v) for v in stage] if isinstance(stage, list | tuple) else shown(stage)
            raise ConfigError(
                "curriculum_stage",
                tuple(got) if isinstance(stage, tuple) else got,
                "expected a stage name, a list of them or null",
                source=owner,
            )

    @property
    def stages(self) -> tuple[str, ...] | None:
        """The hinted stages :attr:`curriculum_stage` admits (``None``: any)."""
        stage = self.curriculum_stage
        return None if stage is None else (stage,) if isinstance(stage, str) else tuple(stage)

    def mask(self, table: DatapackTable) -> np.ndarray:
        """Boolean mask of the rows of ``table`` that pass."""
        ok = (table.tier >= self.min_tier) & (table.tier <= self.max_tier)
        for t in self.exclude_tags:
            ok &= ~table.select(t)
        for t in self.require_tags:
            ok &= table.select(t)
        stages = self.stages
        if stages is not None:
            codes, values = table.codes("curriculum_stage")
            keep = np.array([v in ("", *stages) for v in values], np.bool_)
            ok &= keep[codes]
        return ok


_OPS = ("<=", ">=", "<", ">")


@dataclass(frozen=True)
class TransitionRule:
    """``metric op threshold`` over a window, e.g. ``error_rate <= 0.3``.

    Attributes:
        metric: one of :data:`METRICS`.
        threshold: the bound.
        op: ``"<="``, ``">="``, ``"<"`` or ``">"``.
        window: episodes of the stage the metric is measured over (and needed before the rule
            can hold); ``None``: the config's ``window``.
    """

    metric: str
    threshold: float
    op: str = ">="
    window: int | None = None

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(
                "metric", self.metric, f"expected one of {list(METRICS)}", source="TransitionRule"
            )
        t = self.threshold
        if not is_finite_number(t):  # an int too large for a float included
            reason = finite_reason(t, "expected a finite number")
            raise ConfigError("threshold", shown(t), reason, source="TransitionRule")
        if self.op not in _OPS:
            raise ConfigError(
                "op", self.op, f"expected one of {list(_OPS)}", source="TransitionRule"
            )
        check_int(
            "window",
            self.window,
            minimum=2,
            optional=True,
            source="TransitionRule",
            reason="expected an integer >= 2 or null",
        )

    def holds(self, value: float | None) -> bool:
        """Whether ``value`` (``None``: not measurable yet) satisfies the rule."""
        if value is None:
            return False
        t = self.threshold
        return {"<=": value <= t, ">=": value >= t, "<": value < t, ">": value > t}[self.op]


@dataclass(frozen=True)
class StageSpec:
    """One stage: its strategy, weights, filters and when to leave it.

    Attributes:
        name: unique stage name.
        strategy: a strategy name (see :data:`~gymcurric.datapacks.STRATEGIES`).
        strategy_params: the strategy's parameters (validated here).
        weight_multipliers: tag family -> factor >= 0 applied to matching datapacks.
        filters: which datapacks are eligible.
        rules: all must hold (over a full window of this stage's episodes) to advance.
        fallback_episodes: advance after this many episodes in the stage anyway (``None``:
            never; the last stage never advances).
        fallback_episode: advance once the curriculum's episode count reaches this anyway,
            however long the stage has run (the specification's ``fallback_episode``; ``None``:
            never).
        inherits_strategy: the stage names no strategy of its own (a stage of the
            specification's format without ``strategy``): under the specification's
            conventions a sampler's strategy applies to it; ``strategy`` (``balanced``) is used
            when the sampler has none.
    """

    name: str
    strategy: str = "balanced"
    strategy_params: Mapping[str, Any] = field(default_factory=dict)
    weight_multipliers: Mapping[str, float] = field(default_factory=dict)
    filters: FilterConstraints = field(default_factory=FilterConstraints)
    rules: tuple[TransitionRule, ...] = ()
    fallback_episodes: int | None = None
    fallback_episode: int | None = None
    inherits_strategy: bool = False

    def __post_init__(self) -> None:
        src = f"stage {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            reason = "expected a non-empty string"  # an int of 400 digits cut
            raise ConfigError("name", shown(self.name), reason, source="StageSpec")
        try:
            params = make_strategy(self.strategy, self.strategy_params, source=src).to_dict()
        except ConfigError as exc:
            top = exc.key in ("strategy", "strategy_params")
            key = exc.key if top else f"strategy_params.{exc.key}"
            raise ConfigError(key, exc.value, exc.reason, source=src) from exc
        del params["strategy"]
        object.__setattr__(self, "strategy_params", params)  # explicit, with defaults
        if not isinstance(self.weight_multipliers, Mapping):
            raise ConfigError(
                "weight_multipliers",
                self.weight_multipliers,
                "expected a mapping of tag family to factor",
                source=src,
            )
        object.__setattr__(self, "weight_multipliers", dict(self.weight_multipliers))
        for k, v in self.weight_multipliers.items():
            check_selector(k, f"weight_multipliers[{k!r}]", src)
            if not is_finite_number(v) or v < 0:  # an int too large for a float is not
                reason = finite_reason(v, "expected a finite number >= 0")
                raise ConfigError(f"weight_multipliers[{k!r}]", shown(v), reason, source=src)
        check_int(
            "fallback_episodes",
            self.fallback_episodes,
            source=src,
            optional=True,
            reason="expected an integer >= 1 or null",
        )
        check_int(
            "fallback_episode",
            self.fallback_episode,
            minimum=0,
            source=src,
            optional=True,
            reason="expected an integer >= 0 or null",
        )
        if not isinstance(self.inherits_strategy, bool):
            raise ConfigError(
                "inherits_strategy", self.inherits_strategy, "expected true or false", source=src
            )
        object.__setattr__(self, "rules", tuple(self.rules))

    def weights(self, table: DatapackTable) -> np.ndarray:
        """Per-row weight: filter mask times every matching selector's multiplier."""
        w = self.filters.mask(table).astype(np.float64)
        for sel, m in self.weight_multipliers.items():
            w = np.where(table.select(sel), w * m, w)
        return w


def _default_stages() -> tuple[StageSpec, ...]:
    return (
        StageSpec(
            "warmup",
            "balanced",
            {"tier_ratios": {0: 0.6, 1: 0.4, 2: 0.0}},
            filters=FilterConstraints(max_tier=1),
            rules=(TransitionRule("error_rate", 0.3, "<="),),
            fallback_episodes=500,
        ),
        StageSpec(
            "skill_building",
            "balanced",
            {},
            {"novel_affordance": 1.5},
            rules=(TransitionRule("affordance_success_rate", 0.7, ">="),),
            fallback_episodes=2000,
        ),
        StageSpec(
            "frontier",
            "frontier_prioritized",
            {},
            {"safety_critical": 1.5},
            rules=(TransitionRule("mpl_improvement_rate", 0.02, "<="),),
            fallback_episodes=5000,
        ),
        StageSpec("fine_tuning", "tag_aware", {}),
    )


@dataclass(frozen=True)
class DataPackCurriculumConfig:
    """Everything a :class:`~gymcurric.datapacks.DataPackCurriculum` is configured with.

    Attributes:
        stages: the stages in order (default: warmup → skill_building → frontier → fine_tuning).
        window: episodes in the rolling diagnostics window (>= 2).
        prerequisite_threshold: a tag is satisfied once its success rate exceeds this.
        prerequisite_min_attempts: attempts needed before a tag can be satisfied.
        auto_advance: advance stages by rule / fallback after each episode.
        conventions: ``"gymcurric"`` or ``"specification"`` (set by reading the
            specification's format, stages by name): how a sampler's strategy
            (``DataPackRLSampler(strategy=...)``, ``--sampling-strategy``) meets the stages'.
            Under gymcurric's it overrides every stage's strategy. Under the specification's
            it is the default for the stages that name none (its §2.5), takes the
            specification's default parameters (:data:`~gymcurric.datapacks.spec_config.
            SPEC_DEFAULTS`), and the logged ``urgency_score`` of stages sampled otherwise
            follows its §2.2.2 (tier weights ``{0: 0.2, 1: 0.5, 2: 1.0}``).
    """

    stages: tuple[StageSpec, ...] = field(default_factory=_default_stages)
    window: int = 100
    prerequisite_threshold: float = 0.9
    prerequisite_min_attempts: int = 10
    auto_advance: bool = True
    conventions: str = "gymcurric"

    def __post_init__(self) -> None:
        owner = "DataPackCurriculumConfig"
        object.__setattr__(self, "stages", tuple(self.stages))
        names = [s.name for s in self.stages]
        if not names or len(set(names)) != len(names):
            raise ConfigError(
                "stages", names, "expected at least one stage, names unique", source=owner
            )
        for key, lo in (("window", 2), ("prerequisite_min_attempts", 1)):
            check_int(
                key,
                getattr(self, key),
                minimum=lo,
                source=owner,
                reason=f"expected an integer >= {lo}",
            )
        p = self.prerequisite_threshold
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
            reason = "expected a number in [0, 1]"
            raise ConfigError("prerequisite_threshold", shown(p), reason, source=owner)
        if not isinstance(self.auto_advance, bool):
            raise ConfigError(
                "auto_advance", self.auto_advance, "expected true or false", source=owner
            )
        if self.conventions not in CONVENTIONS:
            raise ConfigError(
                "conventions",
                self.conventions,
                f"expected one of {list(CONVENTIONS)}",
                source=owner,
            )

    def stage_index(self, name: str) -> int:
        """Position of stage ``name`` (:class:`ConfigError` naming the known stages if absent)."""
        for i, s in enumerate(self.stages):
            if s.name == name:
                return i
        raise ConfigError("stage", name, f"expected one of {[s.name for s in self.stages]}")

    @property
    def ring_size(self) -> int:
        """Episodes the curriculum's diagnostics rings hold: the largest window in use."""
        return max([self.window, *(r.window or 0 for s in self.stages for r in s.rules)])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form that :meth:`from_dict` reads back (in gymcurric's format).

        Options left at their default that older configs did not have (a rule's ``window``, a
        stage's ``fallback_episode`` and ``inherits_strategy``, ``conventions``) are left out,
        so a checkpoint's config still matches.
        """
        out = json.loads(json.dumps(dataclasses.asdict(self), default=list))
        if out["conventions"] == "gymcurric":
            del out["conventions"]
        for stage in out["stages"]:
            if stage["fallback_episode"] is None:
                del stage["fallback_episode"]
            if not stage["inherits_strategy"]:
                del stage["inherits_strategy"]
            for rule in stage["rules"]:
                if rule["window"] is None:
                    del rule["window"]
        return out

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, source: str | None = None
    ) -> DataPackCurriculumConfig:
        """Build from a mapping; errors name ``source`` and the dotted key.

        ``stages`` as a list is gymcurric's format; as a mapping from stage name to stage it is
        the specification's (§4.4), read by :func:`~gymcurric.datapacks.spec_config.from_spec`.
        """
        if isinstance(data, Mapping) and isinstance(data.get("stages"), Mapping):
            from gymcurric.datapacks.spec_config import from_spec

            return from_spec(data, source=source)

        def build(klass: type, d: Any, path: str) -> Any:
            if not isinstance(d, Mapping):
                raise ConfigError(path, d, "expected a mapping", source=source)
            names = {f.name for f in dataclasses.fields(klass)}
            for k in d:
                if k not in names:
                    raise ConfigError(
                        f"{path}.{k}" if path else k,
                        d[k],
                        f"unknown key; expected one of {sorted(names)}",
                        source=source,
                    )
            kw = dict(d)
            if klass is StageSpec:
                kw["filters"] = build(FilterConstraints, kw.get("filters", {}), f"{path}.filters")
                rules = kw.get("rules", [])
                if not isinstance(rules, list):
                    raise ConfigError(f"{path}.rules", rules, "expected a list", source=source)
                kw["rules"] = tuple(
                    build(TransitionRule, r, f"{path}.rules[{j}]") for j, r in enumerate(rules)
                )
            if klass is DataPackCurriculumConfig and "stages" in kw:
                if not isinstance(kw["stages"], list):
                    raise ConfigError("stages", kw["stages"], "expected a list", source=source)
                kw["stages"] = tuple(
                    build(StageSpec, s, f"stages[{j}]") for j, s in enumerate(kw["stages"])
                )
            try:
                return klass(**kw)
            except TypeError as exc:
                raise ConfigError(path or "config", dict(d), str(exc), source=source) from exc
            except ConfigError as exc:
                key = f"{path}.{exc.key}" if path else str(exc.key)
                raise ConfigError(key, exc.value, exc.reason, source=source) from exc

        return build(cls, data, "")


def load_curriculum_config(path: str | os.PathLike[str]) -> DataPackCurriculumConfig:
    """Read a curriculum config from ``.yaml`` / ``.yml`` (needs pyyaml) or ``.json``.

    The suffix is matched in any case (``cur.YAML`` is YAML), as ``gymcurric train --config``
    matches it, on the whole name (a file named just ``.yaml`` is YAML); any other is JSON.
    The file is UTF-8 text; one leading byte order mark (BOM) is accepted in either format, not
    two.

    An empty file (only whitespace or YAML comments, or an empty YAML document) is an error, not
    the shipped default: that default is what no file gives (``DataPackCurriculum()``,
    ``build_sampler(dir)``, ``gymcurric train`` without ``--curriculum-config``).

    Raises:
        ConfigError: unreadable file (missing, or not UTF-8 text), an empty file, bad syntax,
            unknown key or bad value (naming the file); a key given twice in one mapping
            (naming the file, the dotted key and, in YAML, both lines), in either config
            format; a stage name YAML reads as a number or bool (``name: 1e3``, ``123``, ``yes``:
            quote it), naming it as written; also JSON/YAML over the input limits of
            :mod:`gymcurric._parsing` (nesting depth, YAML size and alias expansion).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # missing, a folder, not UTF-8 text
        raise ConfigError("path", str(p), f"cannot read ({exc})") from exc
    try:
        # one leading UTF-8 BOM (which Windows editors write) is dropped, for JSON as for YAML
        text = drop_bom(text)
    except DataError as exc:  # a second one
        raise ConfigError("file", str(p), str(exc), source=str(p)) from None
    is_yaml = is_yaml_file(p)
    if is_blank_config(text, yaml=is_yaml):
        raise _empty_file(p)
    try:
        if is_yaml:
            from gymcurric._optional import import_optional

            import_optional("yaml", "datapacks", purpose="to read YAML curriculum configs")
            # safe_load with 1e-3 a float (as train reads it), bounded; duplicate keys refused
            data = load_yaml_unique(text)
        else:
            data = loads_json_unique(text)  # bounded, duplicate keys refused
        # both read without a source, so that a limit's DataError or a value's does not name
        # the file a second time once wrapped below
    except ConfigError as exc:  # a duplicate key, named with the file here
        raise ConfigError(exc.key, exc.value, exc.reason, source=str(p)) from None
    except DataError as exc:  # an input limit (the file is named below)
        raise ConfigError("file", str(p), str(exc), source=str(p)) from exc
    except ValueError as exc:  # json.JSONDecodeError
        raise ConfigError("file", str(p), f"invalid JSON ({exc})", source=str(p)) from exc
    except Exception as exc:  # yaml.YAMLError; yaml may be absent so it cannot be named here
        if type(exc).__module__.startswith("yaml"):
            why = f"invalid YAML ({yaml_error_text(exc)})"
            raise ConfigError("file", str(p), why, source=str(p)) from exc
        raise
    if data is None and is_yaml:  # an empty YAML document ("---", "~", "null"): no settings
        raise _empty_file(p)  # (JSON's null is a value: not a mapping, as from_dict says)
    try:
        return DataPackCurriculumConfig.from_dict(data, source=str(p))
    except ConfigError as exc:  # a stage name written 1e3 or 123 is named as written, in YAML
        if not is_yaml:
            raise
        from gymcurric._yaml_floats import unquoted_name_error

        raise unquoted_name_error(exc, text) from None


def _empty_file(path: Path) -> ConfigError:
    return ConfigError(
        "file",
        str(path),
        "the file is empty: it holds no settings (only whitespace, YAML comments or an empty YAML "
        "document); write the curriculum config in it, or give no file for the shipped "
        "four-stage default",
        source=str(path),
    )


@dataclass(frozen=True)
class CurriculumSchedule:
    """What the curriculum prescribes at one episode (JSON round trip via ``to_dict``).

    Attributes:
        stage: stage name.
        episode: the episode count it was computed at.
        strategy: strategy name.
        strategy_params: its parameters.
        weight_multipliers: tag family -> factor.
        filter_constraints: the stage's filters.
    """

    stage: str
    episode: int
    strategy: str
    strategy_params: Mapping[str, Any]
    weight_multipliers: Mapping[str, float]
    filter_constraints: FilterConstraints

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return json.loads(json.dumps(dataclasses.asdict(self), default=list))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CurriculumSchedule:
        """Inverse of :meth:`to_dict`: ``from_dict(s.to_dict()) == s``, through JSON too.

        Raises:
            ConfigError: a missing or unknown key, or strategy parameters its strategy refuses.
        """
        src = "CurriculumSchedule"
        d = dict(data)
        names = [f.name for f in dataclasses.fields(cls)]
        for key in names:
            if key not in d:
                raise ConfigError(key, None, f"missing; expected the keys {names}", source=src)
        # the strategy's own form: JSON made tier_ratios' / tier_weights' int keys strings;
        # only the parameters given (a schedule built with some of them keeps those)
        given = d["strategy_params"]
        params = make_strategy(d["strategy"], given, source=src).to_dict()
        if given is not None:
            d["strategy_params"] = {k: params[k] for k in given if k != "strategy"}
        try:
            d["filter_constraints"] = FilterConstraints(**d["filter_constraints"])
            return cls(**d)
        except TypeError as exc:  # an unknown key
            raise ConfigError("schedule", dict(data), str(exc), source=src) from exc
