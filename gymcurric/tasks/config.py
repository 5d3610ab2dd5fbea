"""The curriculum's configuration: one dataclass, JSON round-trip with errors naming the key.

``CurriculumConfig.to_dict()`` writes every nested dataclass as a dict with a ``"type"`` key;
``CurriculumConfig.from_dict()`` reads it back (e.g. from a YAML/JSON file) and reports an
unknown key, an unknown type or a bad value with its dotted path and the file it came from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.tasks.dual_pool import DualPool
from gymcurric.tasks.pools import OpenEndedPool, Pool, ReplacementPool
from gymcurric.tasks.regret import PLRScorer, RobustPLRScorer
from gymcurric.tasks.scorers import (
    LearnabilityScorer,
    LearningProgressScorer,
    Scorer,
    UniformScorer,
)
from gymcurric.tasks.signals import SignalConfig
from gymcurric.tasks.stages import SequentialScorer, Stage, StopCondition

__all__ = ["CONFIG_TYPES", "CurriculumConfig"]

#: Dataclasses a config dict may name in its ``"type"`` keys.
CONFIG_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        LearningProgressScorer,
        LearnabilityScorer,
        UniformScorer,
        PLRScorer,
        RobustPLRScorer,
        SequentialScorer,
        Stage,
        StopCondition,
        ReplacementPool,
        OpenEndedPool,
        DualPool,
        SignalConfig,
    )
}


def _to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"type": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = _to_jsonable(getattr(obj, f.name))
        return out
    if isinstance(obj, tuple | list):
        return [_to_jsonable(v) for v in obj]
    return obj


def _build(data: Any, path: str, default: type | None, source: str | None) -> Any:
    if isinstance(data, list):
        return tuple(_build(v, f"{path}[{i}]", default, source) for i, v in enumerate(data))
    if not isinstance(data, Mapping):
        return data
    name = data.get("type", default.__name__ if default else None)
    cls = CONFIG_TYPES.get(name) if isinstance(name, str) else None
    # a top-level key takes one kind of part, a nested one (stages, until) its own type
    kind = _KINDS.get(path, default if "." in path or "[" in path else None)
    if cls is None or (kind is not None and not issubclass(cls, kind)):
        choices = sorted(n for n, c in CONFIG_TYPES.items() if kind is None or issubclass(c, kind))
        raise ConfigError(f"{path}.type", name, f"expected one of {choices}", source=source)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "type":
            continue
        if key not in names:
            raise ConfigError(
                f"{path}.{key}",
                value,
                f"unknown field of {name}; expected one of {sorted(names)}",
                source=source,
            )
        sub = {"stages": Stage, "until": StopCondition}.get(key)
        kwargs[key] = _build(value, f"{path}.{key}", sub, source)
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}.{exc.key}", exc.value, exc.reason, source=source) from exc


#: the kind of part each top-level key of a curriculum config takes
_KINDS: dict[str, type] = {"scorer": Scorer, "pool": Pool, "signal": SignalConfig}


@dataclass(frozen=True)
class CurriculumConfig:
    """Everything a :class:`~gymcurric.tasks.Curriculum` is configured with.

    Attributes:
        scorer: how tasks are valued (default: learning progress).
        pool: which tasks are live and how they are replaced (default: a fixed pool).
        signal: how episode results become statistics.
        seed: seed of the curriculum's own generator (sampling, refills, tie-breaks).
        recompute_every: accepted episodes between distribution recomputes (>= 1), or ``None``
            for ``max(32, capacity // 32)``: a recompute is O(capacity), so scaling the cadence
            with the pool keeps its amortised cost per episode constant, while each task still
            sees a fresh distribution long before it is sampled again.

    Examples:
        >>> cfg = CurriculumConfig(pool=DualPool(explore_size=4, exploit_size=8), seed=3)
        >>> CurriculumConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    scorer: Scorer = field(default_factory=LearningProgressScorer)
    pool: Pool = field(default_factory=ReplacementPool)
    signal: SignalConfig = field(default_factory=SignalConfig)
    seed: int = 0
    recompute_every: int | None = None

    def __post_init__(self) -> None:
        c = "CurriculumConfig"
        for name, cls in (("scorer", Scorer), ("pool", Pool), ("signal", SignalConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(name, getattr(self, name), f"expected a {cls.__name__}", source=c)
        check_int("seed", self.seed, minimum=0, source=c)
        if self.recompute_every is not None:
            check_int("recompute_every", self.recompute_every, source=c)

    def cadence(self, capacity: int) -> int:
        """Accepted episodes between recomputes for a pool of ``capacity`` slots."""
        if self.recompute_every is not None:
            return self.recompute_every
        return max(32, capacity // 32)

    @classmethod
    def merged(
        cls, config: CurriculumConfig | None, overrides: Mapping[str, Any], *, source: str
    ) -> CurriculumConfig:
        """``config`` (default ``CurriculumConfig()``) with the fields in ``overrides`` replaced.

        Raises:
            ConfigError: ``config`` is not a :class:`CurriculumConfig`, or an override names no
                field (the message lists the fields).
        """
        cfg = config if config is not None else cls()
        if not isinstance(cfg, CurriculumConfig):
            raise ConfigError("config", cfg, "expected a CurriculumConfig", source=source)
        if not overrides:
            return cfg
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in overrides.items():
            if key not in names:
                raise ConfigError(
                    key, value, f"unknown keyword; expected one of {sorted(names)}", source=source
                )
        return dataclasses.replace(cfg, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; nested dataclasses carry a ``"type"`` key."""
        out: dict[str, Any] = _to_jsonable(self)
        out.pop("type")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> CurriculumConfig:
        """Build from :meth:`to_dict` output; errors name the dotted key and ``source``."""
        if not isinstance(data, Mapping):
            raise ConfigError("curriculum", data, "expected a mapping", source=source)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        defaults = {
            "scorer": LearningProgressScorer,
            "pool": ReplacementPool,
            "signal": SignalConfig,
        }
        for key, value in data.items():
            if key not in names:
                raise ConfigError(
                    key, value, f"unknown key; expected one of {sorted(names)}", source=source
                )
            kwargs[key] = _build(value, key, defaults.get(key), source)
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(exc.key, exc.value, exc.reason, source=source) from exc
