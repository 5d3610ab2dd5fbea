"""Task-parameter specs shared by the built-in envs: declaration, validation, JSON description.

A built-in env declares its task parameters once, as a :class:`TaskSpec` class attribute. The
same object validates constructor kwargs (raising :class:`~gymcurric.errors.ConfigError`) and the
per-episode ``reset(options={"task": ...})`` dicts (raising :class:`~gymcurric.errors.TaskError`),
and describes itself as plain JSON (:meth:`TaskSpec.to_json`) so a curriculum can build a task
space from it without importing the env.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Generic, Literal, TypeVar

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from gymcurric._checks import finite_reason, shown, too_large_int
from gymcurric.errors import ConfigError, TaskError

__all__ = ["TaskEnv", "TaskParam", "TaskSpec", "check_number"]

ActT = TypeVar("ActT")

TaskValue = int | float | str


@dataclass(frozen=True)
class TaskParam:
    """One task parameter: its type, valid range or choices, default and meaning.

    Attributes:
        kind: ``"int"``, ``"float"`` or ``"choice"`` (a string from ``choices``).
        default: the value used when neither the constructor nor the task sets it.
        low: smallest valid value (inclusive) for ``int``/``float``.
        high: largest valid value (inclusive) for ``int``/``float``.
        choices: the valid strings for ``choice``.
        doc: one line saying what the parameter does.
    """

    kind: Literal["int", "float", "choice"]
    default: TaskValue
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    def to_json(self) -> dict[str, Any]:
        """This parameter as a JSON-safe dict (``type``, ``default`` and bounds or choices)."""
        out: dict[str, Any] = {"type": self.kind, "default": self.default, "doc": self.doc}
        if self.kind == "choice":
            out["choices"] = list(self.choices)
        else:
            out["low"], out["high"] = self.low, self.high
        return out

    def check(self, key: str, value: object, *, error: type[ConfigError], source: str) -> TaskValue:
        """Validate ``value`` for parameter ``key`` and return it as a plain Python value.

        Raises:
            ConfigError: (``error``, e.g. :class:`TaskError`) naming ``key`` and ``value`` when
                the type is wrong, the value is NaN/infinite, out of range, or not a choice.
        """
        if self.kind == "choice":
            if not isinstance(value, str):
                raise error(
                    key, value, f"expected a str, got {type(value).__name__}", source=source
                )
            if value not in self.choices:
                raise error(key, value, f"expected one of {list(self.choices)}", source=source)
            return str(value)
        # bool is an int subclass; a True hazard count is a bug, not a 1.
        if isinstance(value, bool | np.bool_):
            raise error(key, value, f"expected {self.kind}, got bool", source=source)
        number: int | float
        if self.kind == "int":
            if not isinstance(value, int | np.integer):
                raise error(
                    key, value, f"expected an int, got {type(value).__name__}", source=source
                )
            number = int(value)
        else:
            if not isinstance(value, int | float | np.integer | np.floating):
                raise error(
                    key, value, f"expected a float, got {type(value).__name__}", source=source
                )
            # float() raises OverflowError on an int too large for a float (10**400)
            if too_large_int(value):
                raise error(
                    key, shown(value), finite_reason(value, "must be finite"), source=source
                )
            number = float(value)
            if not math.isfinite(number):
                raise error(key, value, "must be finite", source=source)
        assert self.low is not None and self.high is not None
        if not self.low <= number <= self.high:
            raise error(
                key,
                shown(value),
                f"must be in [{_fmt(self.low)}, {_fmt(self.high)}]",
                source=source,
            )
        return number


def check_number(
    key: str,
    value: object,
    kind: Literal["int", "float"],
    low: float,
    high: float,
    *,
    source: str,
    error: type[ConfigError] = ConfigError,
) -> float:
    """Validate a numeric argument (not a bool, finite, in ``[low, high]``) and return it.

    Returns an ``int`` for ``kind="int"``, else a ``float``.

    Raises:
        ConfigError: (``error``) naming ``key`` and ``value``.
    """
    number = TaskParam(kind, low, low, high).check(key, value, error=error, source=source)
    assert not isinstance(number, str)
    return number


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


class TaskSpec(Mapping[str, TaskParam]):
    """An immutable, ordered mapping of task-parameter name to :class:`TaskParam`.

    Args:
        params: the parameters, in the order they are documented.
    """

    def __init__(self, params: Mapping[str, TaskParam]) -> None:
        for name, param in params.items():
            param.check(name, param.default, error=ConfigError, source="TaskSpec default")
        self._params = MappingProxyType(dict(params))

    def __getitem__(self, key: str) -> TaskParam:
        return self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __repr__(self) -> str:
        return f"TaskSpec({list(self._params)})"

    def defaults(self) -> dict[str, TaskValue]:
        """The default task: every parameter at its declared default."""
        return {name: p.default for name, p in self._params.items()}

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The whole spec as JSON-safe data: ``{name: {"type", "default", "low"/"high"|...}}``."""
        return {name: p.to_json() for name, p in self._params.items()}

    def resolve(
        self,
        task: object,
        base: Mapping[str, TaskValue],
        *,
        source: str,
        error: type[ConfigError] = TaskError,
    ) -> dict[str, TaskValue]:
        """Validate a (partial) task dict and fill the keys it leaves out from ``base``.

        Args:
            task: the task as received (expected: a mapping of str keys to values).
            base: a complete, already valid task that supplies missing keys.
            source: where the task came from, for the message (e.g. ``"reset(options)"``).
            error: the error class to raise (:class:`TaskError` or :class:`ConfigError`).

        Returns:
            A new dict with every key of the spec, holding plain Python values.

        Raises:
            ConfigError: (``error``) naming the key and the value received: for a task that is
                not a mapping, an unknown key (the message lists the valid keys), or a bad value.
        """
        if not isinstance(task, Mapping):
            raise error(
                "task",
                task,
                f"expected a dict of task parameters, got {type(task).__name__}",
                source=source,
            )
        out = dict(base)
        for key, value in task.items():
            param = self._params.get(key) if isinstance(key, str) else None
            if param is None:
                raise error(
                    str(key),
                    value,
                    f"unknown task key; valid keys: {sorted(self._params)}",
                    source=source,
                )
            out[key] = param.check(key, value, error=error, source=source)
        return out


class TaskEnv(gym.Env[NDArray[np.float32], ActT], Generic[ActT]):
    """Base of the built-in envs: task bookkeeping, ``options={"task": ...}``, render plumbing.

    Subclasses set :attr:`TASK_SPEC`, may override :meth:`_check_task` for cross-parameter
    rules, implement :meth:`_render_frame`, and call :meth:`_task_from_options` in ``reset``
    *before* changing any state, so that a refused task leaves the env as it was.
    """

    TASK_SPEC: ClassVar[TaskSpec]
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 30}

    def _init_task(
        self,
        task_kwargs: Mapping[str, Any],
        *,
        render_mode: str | None,
        render_size: int,
        min_render_size: int = 16,
    ) -> None:
        source = f"{type(self).__name__}(...)"
        task = self.TASK_SPEC.resolve(
            task_kwargs, self.TASK_SPEC.defaults(), source=source, error=ConfigError
        )
        self._check_task(task, error=ConfigError, source=source)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                "render_mode",
                render_mode,
                f"expected None or one of {self.metadata['render_modes']}",
                source=source,
            )
        self.render_mode = render_mode
        self.render_size = int(
            check_number("render_size", render_size, "int", min_render_size, 2048, source=source)
        )
        self._default_task: dict[str, TaskValue] = task
        self._task: dict[str, TaskValue] = dict(task)
        self._ready = False  # True once reset() has laid out an episode

    @classmethod
    def task_spec(cls) -> TaskSpec:
        """The task parameters this env accepts (name → type, range or choices, default)."""
        return cls.TASK_SPEC

    @property
    def task(self) -> dict[str, TaskValue]:
        """The current episode's task, as a new JSON-safe dict (editing it changes nothing)."""
        return dict(self._task)

    @property
    def default_task(self) -> dict[str, TaskValue]:
        """The task set by the constructor kwargs; partial tasks are filled from it."""
        return dict(self._default_task)

    def _check_task(
        self, task: Mapping[str, TaskValue], *, error: type[ConfigError], source: str
    ) -> None:
        """Raise ``error`` for combinations of values that cannot work together."""

    def validate_task(self, task: Mapping[str, Any]) -> dict[str, TaskValue]:
        """Check a (partial) task without applying it; return the full task it would run.

        Usable as a task space's validator. Whether hazards can be laid out is only known when
        a layout is drawn, so ``reset`` may still refuse a crowded task that passes here.

        Raises:
            TaskError: naming the key and the value received.
        """
        source = f"{type(self).__name__}.reset(options)"
        full = self.TASK_SPEC.resolve(task, self._default_task, source=source)
        self._check_task(full, error=TaskError, source=source)
        return full

    def _task_from_options(self, options: Mapping[str, Any] | None) -> dict[str, TaskValue]:
        """The task for the next episode: ``options["task"]`` validated, else the current one."""
        if options is None or options.get("task") is None:
            return self._task
        return self.validate_task(options["task"])

    def render(self) -> NDArray[np.uint8] | None:
        """The current state as an ``(S, S, 3)`` uint8 top-down frame (``render_mode="rgb_array"``).

        Returns ``None`` (with a warning, as Gymnasium's own envs do) when no render mode was set.
        """
        if self.render_mode is None:
            gym.logger.warn(
                f"{type(self).__name__}.render() called without a render_mode; "
                'construct it with render_mode="rgb_array".'
            )
            return None
        self._require_reset("render")
        return self._render_frame()

    def _require_reset(self, what: str) -> None:
        if not self._ready:
            raise gym.error.ResetNeeded(f"call reset() before {what}()")

    def _render_frame(self) -> NDArray[np.uint8]:
        raise NotImplementedError
