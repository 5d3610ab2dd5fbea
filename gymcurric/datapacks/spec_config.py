"""The datapack-sampler specification's curriculum config format (its §4.4), read as written.

The specification maps stages by name, in the order they run::

    stages:
      warmup:
        strategy: balanced
        strategy_params: {tier_ratios: {0: 0.5, 1: 0.5, 2: 0.0}, use_trust_weighting: true}
        weight_multipliers: {safety_critical: 2.0, fragile_high: 0.5, fragile_critical: 0.0}
        filter_constraints:
          max_tier: 1
          exclude_tags: ["fragile_critical", "novel_affordance"]
          curriculum_stage: "early"
        transition_rule: {type: rolling_error_rate, threshold: 0.05, window: 100}
        fallback_episode: 1000
      skill_building:
        strategy: tag_aware
        ...

and gymcurric reads it into the same :class:`~gymcurric.datapacks.DataPackCurriculumConfig` as
its own list form. Each stage takes the keys ``strategy``, ``strategy_params``,
``weight_multipliers``, ``filter_constraints`` (gymcurric's ``filters``), ``transition_rule``
(one rule, or a list that must all hold; gymcurric's ``rules``) and ``fallback_episode`` (the
curriculum's episode count at which the stage is left anyway, as the specification's
thresholds 1000 / 5000 / 15000 are; gymcurric's ``fallback_episodes`` counts the stage's own
episodes). The top level may also hold gymcurric's ``window``, ``prerequisite_threshold``,
``prerequisite_min_attempts`` and ``auto_advance``.

Transition-rule types (:data:`RULE_TYPES`), each ``{type, threshold, window}`` with ``window``
optional (the config's ``window``, default 100):

=============================  =========================================================
type                           the stage is left when, over the last ``window`` episodes
=============================  =========================================================
``rolling_error_rate``         the share of episodes with an error is < ``threshold``
``affordance_success_rate``    the affordance success rate is > ``threshold``
``mpl_improvement_rate``       the relative MPL improvement is < ``threshold`` (a plateau)
``mean_return``                the mean episode return is > ``threshold``
=============================  =========================================================

Strategy parameters a stage leaves out take the specification's defaults where they differ from
gymcurric's: ``tier_weights`` ``{0: 0.2, 1: 0.5, 2: 1.0}`` (§2.2.2) for ``frontier_prioritized``
and ``allow_overlap: true`` (§2.2.3) for ``tag_aware``.

Such a config follows the specification's conventions
(:attr:`~gymcurric.datapacks.DataPackCurriculumConfig.conventions`): a sampler's strategy
(``--sampling-strategy``) is the default for the stages that give no ``strategy`` (nor
``strategy_params``), with the same default parameters, and each stage's own strategy wins
(its §2.5: "Default sampling strategy (can be overridden by curriculum)"). A stage without a
strategy samples with ``balanced`` when the sampler has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gymcurric.errors import ConfigError

if TYPE_CHECKING:
    from gymcurric.datapacks.schedule import DataPackCurriculumConfig

__all__ = ["RULE_TYPES", "SPEC_DEFAULTS", "STAGE_KEYS", "from_spec"]

#: Transition-rule ``type`` -> (gymcurric metric, comparison with ``threshold``).
RULE_TYPES: dict[str, tuple[str, str]] = {
    "rolling_error_rate": ("error_rate", "<"),
    "affordance_success_rate": ("affordance_success_rate", ">"),
    "mpl_improvement_rate": ("mpl_improvement_rate", "<"),
    "mean_return": ("mean_return", ">"),
}
#: The keys a stage takes in the specification's format.
STAGE_KEYS: tuple[str, ...] = (
    "strategy",
    "strategy_params",
    "weight_multipliers",
    "filter_constraints",
    "transition_rule",
    "fallback_episode",
)
#: Strategy parameters whose specification default differs from gymcurric's.
SPEC_DEFAULTS: dict[str, dict[str, Any]] = {
    "frontier_prioritized": {"tier_weights": {0: 0.2, 1: 0.5, 2: 1.0}},
    "tag_aware": {"allow_overlap": True},
}
_RULE_KEYS = ("type", "threshold", "window")


def _check_keys(
    value: Any, key: str, allowed: tuple[str, ...], source: str | None, *, among: bool = False
) -> None:
    """Refuse a ``value`` at ``key`` that is not a mapping, or that has a key not ``allowed``."""
    if not isinstance(value, Mapping):
        keys = "keys among" if among else "keys"
        raise ConfigError(
            key, value, f"expected a mapping with {keys} {list(allowed)}", source=source
        )
    for k in value:
        if k not in allowed:
            raise ConfigError(
                f"{key}.{k}",
                value[k],
                f"unknown key; expected one of {list(allowed)}",
                source=source,
            )


def _rule(rule: Any, key: str, source: str | None) -> dict[str, Any]:
    _check_keys(rule, key, _RULE_KEYS, source)
    kind = rule.get("type")
    if not isinstance(kind, str) or kind not in RULE_TYPES:
        raise ConfigError(f"{key}.type", kind, f"expected one of {list(RULE_TYPES)}", source=source)
    if "threshold" not in rule:
        raise ConfigError(f"{key}.threshold", None, "required key is missing", source=source)
    metric, op = RULE_TYPES[kind]
    out = {"metric": metric, "op": op, "threshold": rule["threshold"]}
    if rule.get("window") is not None:
        out["window"] = rule["window"]
    return out


def _stage(name: Any, stage: Any, source: str | None) -> dict[str, Any]:
    key = f"stages.{name}"
    if stage is None:
        stage = {}
    _check_keys(stage, key, STAGE_KEYS, source, among=True)
    out: dict[str, Any] = {"name": name}
    params = stage.get("strategy_params")
    if stage.get("strategy") is None:  # the sampler's strategy applies (its §2.5)
        if params is not None:
            raise ConfigError(
                f"{key}.strategy_params",
                params,
                "given without the stage's strategy: name the strategy they are for (a stage "
                "that names neither takes the sampler's strategy)",
                source=source,
            )
        out["inherits_strategy"] = True
    strategy = stage.get("strategy", "balanced") or "balanced"
    out["strategy"] = strategy
    params = {} if params is None else params
    if not isinstance(params, Mapping):
        raise ConfigError(f"{key}.strategy_params", params, "expected a mapping", source=source)
    defaults = SPEC_DEFAULTS.get(strategy, {}) if isinstance(strategy, str) else {}
    out["strategy_params"] = {**defaults, **params}
    if stage.get("weight_multipliers") is not None:
        out["weight_multipliers"] = stage["weight_multipliers"]
    if stage.get("filter_constraints") is not None:
        out["filters"] = stage["filter_constraints"]
    rules = stage.get("transition_rule")
    if isinstance(rules, list):
        out["rules"] = [
            _rule(r, f"{key}.transition_rule[{i}]", source) for i, r in enumerate(rules)
        ]
    elif rules is not None:
        out["rules"] = [_rule(rules, f"{key}.transition_rule", source)]
    if stage.get("fallback_episode") is not None:
        out["fallback_episode"] = stage["fallback_episode"]
    return out


def _spec_key(key: Any, names: list[str], single_rule: list[bool]) -> Any:
    """A gymcurric dotted key (``stages[1].filters.max_tier``) in the specification's terms."""
    if not isinstance(key, str):
        return key
    m = re.match(r"stages\[(\d+)\](.*)", key)
    if m is None:
        return key
    j, rest = int(m.group(1)), m.group(2)
    rest = rest.replace(".filters", ".filter_constraints", 1)
    rest = re.sub(
        r"\.rules\[(\d+)\]",
        lambda r: ".transition_rule" if single_rule[j] else f".transition_rule[{r.group(1)}]",
        rest,
    )
    return f"stages.{names[j]}{rest}"


def from_spec(data: Mapping[str, Any], *, source: str | None = None) -> DataPackCurriculumConfig:
    """Read a curriculum config in the specification's format (``stages`` a mapping).

    Raises:
        ConfigError: a bad key or value, named in the specification's terms
            (``stages.warmup.transition_rule.type``) with the value received and, for a
            transition-rule type, the choices.

    Examples:
        >>> cfg = from_spec({"stages": {
        ...     "warmup": {"strategy": "balanced", "fallback_episode": 1000,
        ...                "transition_rule": {"type": "rolling_error_rate",
        ...                                    "threshold": 0.05, "window": 100}},
        ...     "frontier": {"strategy": "frontier_prioritized"}}})
        >>> [s.name for s in cfg.stages], cfg.stages[0].rules[0].op, cfg.stages[0].fallback_episode
        (['warmup', 'frontier'], '<', 1000)
        >>> cfg.stages[1].strategy_params["tier_weights"]
        {0: 0.2, 1: 0.5, 2: 1.0}
    """
    from gymcurric.datapacks.schedule import DataPackCurriculumConfig

    stages = data["stages"]
    if not stages:
        raise ConfigError("stages", dict(stages), "expected at least one stage", source=source)
    names = [str(n) for n in stages]
    converted = [_stage(name, stages[name], source) for name in stages]
    single = [not isinstance((stages[n] or {}).get("transition_rule"), list) for n in stages]
    out = {k: v for k, v in data.items() if k != "stages"}
    if out.setdefault("conventions", "specification") != "specification":
        raise ConfigError(
            "conventions",
            out["conventions"],
            "a config in the specification's format (stages by name) follows its conventions; "
            "write the stages as a list for gymcurric's",
            source=source,
        )
    out["stages"] = converted
    try:
        return DataPackCurriculumConfig.from_dict(out, source=source)
    except ConfigError as exc:
        raise ConfigError(
            _spec_key(exc.key, names, single), exc.value, exc.reason, source=source
        ) from exc
