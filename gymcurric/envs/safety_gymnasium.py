"""Safety-Gymnasium tasks as standard Gymnasium envs: ``gym.make("gymcurric/SafetyPointGoal1-v0")``.

safety-gymnasium 1.0.0 cannot be imported on Python 3.11 / Gymnasium 1.x / NumPy 2; this module
loads its env-building submodules with the patches of :mod:`._safety_patches` and wraps the
built task in :class:`SafetyGymnasiumEnv`. Install: ``pip install "gymcurric[safety]" && pip
install --no-deps safety-gymnasium==1.0.0`` (``python -m gymcurric.envs.safety_gymnasium
install`` runs the second step). Without a display ``MUJOCO_GL=egl`` is set (unless set) before
mujoco is imported here. Once a process has rendered, workers forked from it hang when they
render (``AsyncVectorEnv(context="fork")``): use ``"forkserver"`` or ``"spawn"``. See
docs/safety_gymnasium.md.
"""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from gymcurric._checks import check_int
from gymcurric.envs import _safety_patches as patches
from gymcurric.envs.safety_captions import SafetyTaskCaptioner
from gymcurric.envs.safety_ids import (
    SAFETY_GYMNASIUM_IDS,
    SAFETY_NAMESPACE,
    SafetyEnvSpec,
    register_safety_envs,
    safety_env_spec,
)
from gymcurric.errors import ConfigError, EnvUnavailableError, InfoKeyConflictError, TaskError

__all__ = [
    "SAFETY_GYMNASIUM_IDS",
    "TASK_KEYS",
    "SafetyGymnasiumEnv",
    "build_raw_safety_env",
    "make_safety_env",
]

RENDER_MODES: tuple[str, ...] = ("human", "rgb_array", "depth_array")
_SEED_LIMIT = 2**32  # safety-gymnasium seeds a np.random.RandomState
# Above this share of the placement area covered by keep-out disks, safety-gymnasium's rejection
# sampler (10,000 layouts x 100 draws per object) spins for minutes before giving up.
# Measured on Goal1/Button1: ~0.46 places in < 1 s, ~0.5 takes 1-10 s, ~0.55 fails after minutes.
_MAX_KEEPOUT_DENSITY = 0.45

#: Task parameters ``reset(options={"task": {...}})`` accepts on navigation tasks. A key is
#: available on a task only if the task has that object (``SafetyGymnasiumEnv.task_defaults``
#: lists them). A task dict gives the whole episode configuration: keys it leaves out take the
#: registered defaults; a reset without a ``"task"`` option keeps the previous episode's task.
TASK_KEYS: Mapping[str, str] = {
    "hazards.num": "number of hazard areas (int >= 0)",
    "hazards.size": "hazard radius in m (0 < size < hazard keep-out + agent keep-out)",
    "vases.num": "number of vases (int >= 0)",
    "pillars.num": "number of pillars (int >= 0)",
    "gremlins.num": "number of moving gremlins (int >= 0)",
    "goal.size": "goal radius in m (0 < size <= 1)",
    "placements.extents": "[xmin, ymin, xmax, ymax] of the area where the agent and objects are "
    "placed, inside the floor",
}
_MAX_COUNT = 200


def _has_display() -> bool:
    if not sys.platform.startswith("linux"):
        return True  # macOS/Windows windows need no DISPLAY
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _configure_headless_gl() -> None:
    # Called before this module imports mujoco. Gymnasium's viewer reads MUJOCO_GL when it
    # creates the first GL context; unset, it would try glfw first, which "succeeds" without a
    # display and then fails in MjrContext. A value the user set is kept.
    if not _has_display():
        os.environ.setdefault("MUJOCO_GL", "egl")


def build_raw_safety_env(
    env_id: str,
    *,
    render_mode: str | None = None,
    width: int | None = None,
    height: int | None = None,
    camera_id: int | None = None,
    camera_name: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> Any:
    """Build safety-gymnasium's own env for ``env_id`` (6-tuple ``step``, no wrappers).

    Most code wants :func:`make_safety_env` / ``gym.make``; this is for benchmarks and for
    inspecting the upstream objects. Arguments are as for :class:`SafetyGymnasiumEnv`.

    Returns:
        A ``safety_gymnasium.builder.Builder`` (navigation/vision ids) or the velocity env.

    Raises:
        DependencyNotInstalled: mujoco or safety-gymnasium is missing.
        EnvUnavailableError: the installed package cannot build this task (Race: missing texture).
        ConfigError: an argument is invalid.
    """
    spec = safety_env_spec(env_id)
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ConfigError("render_mode", render_mode, f"expected None or one of {RENDER_MODES}")
    if spec.is_vision and render_mode not in (None, "rgb_array"):
        raise ConfigError(
            "render_mode", render_mode, "Vision tasks render the agent camera: use 'rgb_array'"
        )
    if camera_id is not None and camera_name is not None:
        raise ConfigError("camera_id", camera_id, f"give camera_id or camera_name={camera_name!r}")
    for key, size in (("width", width), ("height", height)):
        check_int(
            key, size, optional=True, allow_numpy=True, reason="expected a positive int (pixels)"
        )
    width, height = (None if size is None else int(size) for size in (width, height))
    if render_mode == "human" and not _has_display():
        # glfw would abort the whole process (a C assertion), not raise.
        raise EnvUnavailableError(
            f"{spec.env_id}: render_mode='human' needs a display and DISPLAY is unset; "
            "use render_mode='rgb_array'"
        )
    _configure_headless_gl()
    package = patches.load_safety_gymnasium()
    _check_required_files(spec, os.path.dirname(str(package.__file__)))
    render = dict(render_mode=render_mode, width=width, height=height, camera_id=camera_id)
    render = {k: v for k, v in {**render, "camera_name": camera_name}.items() if v is not None}
    if spec.kind == "navigation":
        builder = patches.import_package_module("builder")
        merged = {**spec.config, **(config or {})}
        try:
            # float32 ctrl ranges into a float64 Box make Gymnasium's bound check overflow (noise).
            with np.errstate(over="ignore"):
                return builder.Builder(spec.task_id, config=merged, **render)
        except AssertionError as exc:  # Underlying._parse asserts on unknown config keys
            raise ConfigError("config", dict(config or {}), f"safety-gymnasium: {exc}") from exc
    module_name, _, class_name = spec.entry_point.partition(":")
    module = patches.import_package_module(module_name.removeprefix(f"{patches.PACKAGE}."))
    try:
        return getattr(module, class_name)(**render, **(config or {}))
    except TypeError as exc:
        raise ConfigError("config", dict(config or {}), f"{class_name}: {exc}") from exc


def _check_required_files(spec: SafetyEnvSpec, package_dir: str) -> None:
    for relative in spec.required_files:
        path = os.path.join(package_dir, relative)
        if not os.path.exists(path):
            raise EnvUnavailableError(
                f"{spec.env_id} cannot be built with this safety-gymnasium installation: it needs "
                f"{relative!r}, which the safety-gymnasium 1.0.0 wheel does not ship (looked for "
                f"{path}). All Race tasks are affected; use another task."
            )


class SafetyGymnasiumEnv(gym.Env[Any, np.ndarray]):
    """A safety-gymnasium task with the standard Gymnasium API and the cost in ``info``.

    ``gym.make("gymcurric/<Id>")`` builds this env and adds Gymnasium's usual wrappers
    (``PassiveEnvChecker``, ``OrderEnforcing``, ``TimeLimit`` with the registered episode
    length). Observations, actions and rewards are those of safety-gymnasium.

    Step: returns ``(obs, reward, terminated, truncated, info)``. Reset: ``seed`` seeds both
    ``np_random`` and the task's layout/physics generator, so equal seeds give identical
    trajectories; ``options={"task": {...}}`` sets the episode's task parameters on navigation
    tasks (:data:`TASK_KEYS`). Pickling re-creates the env from its make arguments (simulator
    state is not carried over: reset after unpickling).

    Examples:
        >>> import gymnasium as gym, gymcurric
        >>> env = gym.make("gymcurric/SafetyPointGoal1-v0")
        >>> obs, info = env.reset(seed=0, options={"task": {"hazards.num": 2}})
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> isinstance(info["cost"], float)
        True
        >>> env.close()

    Info keys written:
        ``cost``: float, this step's cost (safety-gymnasium's ``cost_sum``).
        ``cost_<source>``: floats, the per-source costs the task reports (e.g. ``cost_hazards``).
        ``caption``: with ``caption=True``, a sentence describing the state (reset and step),
        from :class:`~gymcurric.envs.safety_captions.SafetyTaskCaptioner`.
        Other keys safety-gymnasium reports (e.g. ``goal_met``) pass through.

    Args:
        env_id: a safety-gymnasium id (:data:`SAFETY_GYMNASIUM_IDS`), with or without the
            ``gymcurric/`` namespace.
        render_mode: ``None``, ``"rgb_array"``, ``"depth_array"`` or ``"human"`` (needs a
            display). Vision tasks accept ``"rgb_array"`` only: ``render()`` returns the
            agent-camera frame of the last observation.
        width: frame width in pixels (safety-gymnasium's default when ``None``).
        height: frame height in pixels.
        camera_id: camera index to render from (exclusive with ``camera_name``).
        camera_name: camera to render from, e.g. ``"fixedfar"``, ``"track"``, ``"vision"``.
        config: construction parameters passed to safety-gymnasium: ``Builder`` config keys for
            navigation tasks (e.g. ``{"vision_env_conf.vision_size": (64, 64)}``), keyword
            arguments of Gymnasium's mujoco v4 env for velocity tasks.
        caption: write ``info["caption"]`` (Goal, Button and Push tasks only; see
            :mod:`gymcurric.envs.safety_captions`). Off by default: a caption's cost is not
            negligible against a step (measured: docs/safety_gymnasium.md#captions).
    """

    metadata: dict[str, Any] = {"render_modes": list(RENDER_MODES), "render_fps": 30}

    def __init__(
        self,
        env_id: str,
        *,
        render_mode: str | None = None,
        width: int | None = None,
        height: int | None = None,
        camera_id: int | None = None,
        camera_name: str | None = None,
        config: Mapping[str, Any] | None = None,
        caption: bool = False,
    ) -> None:
        self._info = safety_env_spec(env_id)
        if not isinstance(caption, bool):
            raise ConfigError("caption", caption, "expected True or False")
        if caption and self._info.kind != "navigation":
            raise ConfigError("caption", caption, f"{self._info.env_id} is not a navigation task")
        given: dict[str, Any] = {
            "render_mode": render_mode,
            "width": width,
            "height": height,
            "camera_id": camera_id,
            "camera_name": camera_name,
            "config": dict(config) if config is not None else None,
            "caption": True if caption else None,
        }
        self._make_kwargs = {k: v for k, v in given.items() if v is not None}
        build = {k: v for k, v in self._make_kwargs.items() if k != "caption"}
        self._raw = build_raw_safety_env(self._info.env_id, **build)
        self.render_mode = render_mode
        self.observation_space = self._raw.observation_space
        self.action_space = self._raw.action_space
        fps = getattr(self._raw, "metadata", {}).get("render_fps", 30)
        # What this instance can render here (check_env makes one env per listed mode).
        modes = ["rgb_array"] if self._info.is_vision else list(RENDER_MODES)
        modes = [m for m in modes if m != "human" or _has_display()]
        self.metadata = {"render_modes": modes, "render_fps": fps}
        self._navigation = self._info.kind == "navigation"
        self._task = _TaskParams(self._info.env_id, self._raw.task) if self._navigation else None
        self._captioner: SafetyTaskCaptioner | None = None
        if caption:  # Goal, Button and Push only (ConfigError otherwise)
            self._captioner = SafetyTaskCaptioner(self._raw.task)
        self._raw_seeded = False
        self._frame: np.ndarray | None = None

    @property
    def env_id(self) -> str:
        """The safety-gymnasium id, without namespace."""
        return self._info.env_id

    @property
    def raw_env(self) -> Any:
        """safety-gymnasium's own env (``Builder`` or velocity env), e.g. ``raw_env.task``."""
        return self._raw

    @property
    def task_defaults(self) -> dict[str, Any]:
        """The task keys this env accepts in ``reset(options={"task": ...})``, with defaults."""
        return copy.deepcopy(self._task.defaults) if self._task is not None else {}

    @property
    def task(self) -> dict[str, Any]:
        """The task parameters of the current episode (the defaults until a task is set)."""
        return copy.deepcopy(self._task.current) if self._task is not None else {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; see the class docstring for ``seed`` and ``options={"task": ...}``."""
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is not None and not isinstance(task, Mapping):
            raise TaskError(
                "task", task, "expected a dict of task parameters", source="reset(options)"
            )
        if self._task is None:
            if task:
                key = next(iter(task))
                raise TaskError(
                    key,
                    task[key],
                    f"{self.env_id} takes no task parameters",
                    source="reset(options['task'])",
                )
            obs, info = self._raw.reset(seed=seed)
            return obs, info
        previous = self._task.current
        if task is not None:
            self._task.apply(task)
        try:
            obs, info = self._raw.reset(seed=self._raw_seed(seed))
        except Exception as exc:
            if type(exc).__name__ != "ResamplingError":
                raise
            self._task.apply(previous)
            raise TaskError(
                "task",
                dict(task or {}),
                f"objects could not be placed: {exc}",
                source="reset(options['task'])",
            ) from exc
        if self._info.is_vision:
            self._frame = obs["vision"]
        if self._captioner is not None:
            info["caption"] = self._captioner.caption()
        return obs, info

    def _raw_seed(self, seed: int | None) -> int | None:
        task = self._raw.task
        if not task.mechanism_conf.randomize_layout:
            return None  # Builder.reset asserts seed is None then
        if seed is not None:
            self._raw_seeded = True
            return seed if 0 <= seed < _SEED_LIMIT else int(self.np_random.integers(_SEED_LIMIT))
        if not self._raw_seeded:
            # Builder seeded itself from the global np.random at construction (identical in
            # forked workers); draw from our own entropy-seeded generator instead.
            self._raw_seeded = True
            return int(self.np_random.integers(_SEED_LIMIT))
        return None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; the cost is in ``info["cost"]`` (see the class docstring)."""
        raw = self._raw
        if self._navigation and raw.done:
            raise gym.error.ResetNeeded(
                f"{self.env_id}: the episode has ended (or never started); call reset() first"
            )
        obs, reward, cost, terminated, truncated, info = raw.step(np.asarray(action))
        if "cost" in info:
            raise InfoKeyConflictError(f"{self.env_id} already reported info['cost']")
        for key, value in info.items():
            if key.startswith("cost_"):
                info[key] = float(value)
        info["cost"] = float(cost)
        if self._captioner is not None:
            if "caption" in info:
                raise InfoKeyConflictError(f"{self.env_id} already reported info['caption']")
            info["caption"] = self._captioner.caption(goal_met=bool(info.get("goal_met", False)))
        if self._frame is not None:
            self._frame = obs["vision"]
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> Any:
        """Render a frame per ``render_mode`` (``None`` warns and returns ``None``)."""
        if self.render_mode is None:
            gym.logger.warn(
                f"{self.env_id}: render() called without a render_mode; "
                'pass render_mode="rgb_array" to make()'
            )
            return None
        if self._info.is_vision:
            return None if self._frame is None else self._frame.copy()
        return self._raw.render()

    def close(self) -> None:
        """Free the renderers' GL contexts (avoids EGL noise at interpreter exit)."""
        raw = getattr(self, "_raw", None)
        if raw is None:
            return
        if self._navigation:
            viewers = raw.task._viewers
            for viewer in viewers.values():
                viewer.close()
            viewers.clear()
            raw.task.viewer = None
        else:
            raw.close()

    def __reduce__(self) -> tuple[Any, ...]:
        # The simulator and its GL contexts cannot be pickled: re-create from the make arguments.
        return (_rebuild, (self._info.env_id, self._make_kwargs, self.spec))


def _rebuild(env_id: str, kwargs: dict[str, Any], spec: Any) -> SafetyGymnasiumEnv:
    env = SafetyGymnasiumEnv(env_id, **kwargs)
    env.spec = spec
    return env


class _TaskParams:
    """Validates task dicts and sets them on a navigation task before the reset rebuild."""

    def __init__(self, env_id: str, task: Any) -> None:
        self._env_id = env_id
        self._task = task
        objects = {**task._geoms, **task._free_geoms, **task._mocaps}
        self._objects = {
            name: objects[name]
            for name in ("hazards", "vases", "pillars", "gremlins", "goal")
            if name in objects
        }
        self.defaults: dict[str, Any] = {}
        for key in TASK_KEYS:
            name, attr = key.split(".")
            if name == "placements":
                self.defaults[key] = [float(x) for x in task.placements_conf.extents]
            elif name in self._objects:
                self.defaults[key] = getattr(self._objects[name], attr)
        self.current = dict(self.defaults)

    def apply(self, task: Mapping[str, Any]) -> None:
        values = dict(self.defaults)
        for key, value in task.items():
            values[key] = self._validate(key, value)
        self._check_density(values, task)
        for key, value in values.items():
            name, attr = key.split(".")
            if name == "placements":
                self._task.placements_conf.extents = list(value)
            else:
                setattr(self._objects[name], attr, value)
        self._task.placements_conf.placements = None  # re-derive placements at the next build
        self.current = values

    def _error(self, key: str, value: Any, reason: str) -> TaskError:
        return TaskError(key, value, reason, source=f"{self._env_id} reset(options['task'])")

    def _validate(self, key: str, value: Any) -> Any:
        if key not in self.defaults:
            where = f"{self._env_id} has no such object" if key in TASK_KEYS else "unknown task key"
            raise self._error(key, value, f"{where}; supported here: {sorted(self.defaults)}")
        if key.endswith(".num"):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise self._error(key, value, "expected an int")
            if not 0 <= value <= _MAX_COUNT:
                raise self._error(key, value, f"expected 0 <= num <= {_MAX_COUNT}")
            return int(value)
        if key == "placements.extents":
            return self._validate_extents(key, value)
        number = _finite(value)
        if number is None or number <= 0:
            raise self._error(key, value, "expected a finite number > 0")
        if key == "goal.size" and number > 1.0:
            raise self._error(key, value, "expected a goal radius <= 1 m")
        if key == "hazards.size":
            limit = self._objects["hazards"].keepout + self._task.agent.keepout
            if number >= limit:
                why = "larger hazards can cover the start position"
                raise self._error(key, value, f"expected < {limit:g} m (keep-outs): {why}")
        return number

    def _validate_extents(self, key: str, value: Any) -> list[float]:
        numbers = [_finite(v) for v in value] if isinstance(value, Sequence) else []
        if len(numbers) != 4 or any(n is None for n in numbers):
            raise self._error(key, value, "expected 4 finite numbers [xmin, ymin, xmax, ymax]")
        xmin, ymin, xmax, ymax = (float(n) for n in numbers if n is not None)
        half_x, half_y = (float(s) for s in self._task.floor_conf.size[:2])
        if not (xmin < xmax and ymin < ymax):
            raise self._error(key, value, "expected xmin < xmax and ymin < ymax")
        if not (-half_x <= xmin and xmax <= half_x and -half_y <= ymin and ymax <= half_y):
            raise self._error(key, value, f"expected inside the floor (+-{half_x:g}, +-{half_y:g})")
        return [xmin, ymin, xmax, ymax]

    def _check_density(self, values: Mapping[str, Any], task: Mapping[str, Any]) -> None:
        xmin, ymin, xmax, ymax = values.get("placements.extents", (-2.0, -2.0, 2.0, 2.0))
        covered = math.pi * self._task.agent.keepout**2
        for obstacle in self._task._obstacles:
            count = values.get(f"{obstacle.name}.num", getattr(obstacle, "num", 1))
            count -= len(getattr(obstacle, "locations", None) or ())  # fixed positions
            covered += max(count, 0) * math.pi * float(getattr(obstacle, "keepout", 0.0)) ** 2
        density = covered / ((xmax - xmin) * (ymax - ymin))
        if task and density > _MAX_KEEPOUT_DENSITY:
            why = f"too crowded: keep-out disks would cover {density:.0%} of the placement area"
            limit = f"(limit {_MAX_KEEPOUT_DENSITY:.0%}); use fewer objects or wider extents"
            raise self._error("task", dict(task), f"{why} {limit}")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return None
    return float(value) if math.isfinite(value) else None


def make_safety_env(env_id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gym.make`` a safety-gymnasium task by id, registering the ids first if needed.

    Picklable as a factory: ``functools.partial(make_safety_env, "SafetyPointGoal1-v0")`` works
    as an ``AsyncVectorEnv``/``SubprocVecEnv`` env function under spawn and forkserver.

    Args:
        env_id: a safety-gymnasium id, with or without the ``gymcurric/`` namespace.
        **kwargs: passed to ``gym.make``: :class:`SafetyGymnasiumEnv` arguments and
            ``max_episode_steps``/``disable_env_checker``.

    Returns:
        The env, wrapped as ``gym.make`` wraps it.
    """
    spec = safety_env_spec(env_id)
    register_safety_envs()
    return gym.make(f"{SAFETY_NAMESPACE}/{spec.env_id}", **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gymcurric.envs.safety_gymnasium install|check``: install or smoke-test."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["install"]:
        command = [sys.executable, "-m", "pip", "install", "--no-deps", patches.PINNED_RELEASE]
        print(" ".join(command))
        return subprocess.call(command)
    if args == ["check"]:
        env = make_safety_env("SafetyPointGoal1-v0", render_mode="rgb_array", width=64, height=64)
        env.reset(seed=0)
        _, _, _, _, info = env.step(env.action_space.sample())
        frame = env.render()
        env.close()
        print(
            f"ok: cost={info['cost']} frame={getattr(frame, 'shape', None)} "
            f"MUJOCO_GL={os.environ.get('MUJOCO_GL')!r} patches={patches.applied_patches()}"
        )
        return 0
    print("usage: python -m gymcurric.envs.safety_gymnasium install|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
