"""The safety-gymnasium task ids gymcurric serves, and their registration (no mujoco import).

The table below restates what ``safety_gymnasium/__init__.py`` (1.0.0) registers for single-agent
tasks; that ``__init__`` cannot run on Gymnasium 1.x, so gymcurric never executes it (a test
parses it with :mod:`ast` and checks this table against it). Each id ``<Id>`` is registered
with Gymnasium as ``gymcurric/<Id>``; building one goes through
:mod:`gymcurric.envs.safety_gymnasium`, which is imported only when an env is made.

Not served: the ``…Debug-v0`` variants (keyboard tele-operation: they ignore ``step``'s action
and need a window), the ``…Gymnasium-v0`` aliases (the same tasks with the 5-tuple API, which is
what every ``gymcurric/`` id already has), and the multi-agent and Isaac Gym tasks.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import gymnasium as gym

from gymcurric.errors import ConfigError

__all__ = [
    "SAFETY_GYMNASIUM_IDS",
    "SAFETY_NAMESPACE",
    "SAFETY_ROBOTS",
    "SafetyEnvSpec",
    "register_safety_envs",
    "safety_env_spec",
]

SAFETY_NAMESPACE = "gymcurric"
SAFETY_ROBOTS: tuple[str, ...] = ("Point", "Car", "Doggo", "Racecar", "Ant")
# Where the gymcurric entry point lives; imported by Gymnasium only when an id is made.
_ENTRY_POINT = "gymcurric.envs.safety_gymnasium:SafetyGymnasiumEnv"
_VELOCITY_MODULE = "safety_gymnasium.tasks.safe_velocity"
# The Race floor texture is missing from the 1.0.0 wheel (path relative to the package).
_VILLAGE_TEXTURE = "assets/textures/village_floor.PNG"


@dataclass(frozen=True)
class SafetyEnvSpec:
    """How one safety-gymnasium id is built.

    Attributes:
        env_id: the id without namespace, e.g. ``"SafetyPointGoal1-v0"``.
        kind: ``"navigation"`` (built with safety-gymnasium's ``Builder``) or ``"velocity"``.
        max_episode_steps: the episode length Gymnasium's ``TimeLimit`` enforces.
        reward_threshold: the reward threshold safety-gymnasium registers, if any.
        task_id: for navigation ids, the id whose task class ``Builder`` looks up (a Vision
            variant uses its base id).
        config: for navigation ids, the ``config`` safety-gymnasium passes to ``Builder``.
        entry_point: for velocity ids, ``"module:Class"`` of the env class.
        required_files: files (relative to the installed package) the task needs.
    """

    env_id: str
    kind: Literal["navigation", "velocity"]
    max_episode_steps: int
    reward_threshold: float | None = None
    task_id: str = ""
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    entry_point: str = ""
    required_files: tuple[str, ...] = ()

    @property
    def is_vision(self) -> bool:
        """Whether observations include the agent's camera image (``obs["vision"]``)."""
        return bool(self.config.get("observe_vision", False))


# (task name, max_episode_steps, extra config), in safety-gymnasium's registration order.
_NAVIGATION_TASKS: tuple[tuple[str, int, Mapping[str, Any]], ...] = (
    *((f"Button{level}", 1000, {}) for level in range(3)),
    *((f"Push{level}", 1000, {}) for level in range(3)),
    *((f"Goal{level}", 1000, {}) for level in range(3)),
    *((f"Circle{level}", 500, {}) for level in range(3)),
    ("Run0", 500, {}),
    *((f"Race{level}", 500, {"floor_conf.type": "village"}) for level in range(3)),
    *((f"FadingEasy{level}", 1000, {}) for level in range(3)),
    *((f"FadingHard{level}", 1000, {}) for level in range(3)),
)

# env id -> (module suffix, class name, reward_threshold); all have max_episode_steps=1000.
_VELOCITY_TASKS: tuple[tuple[str, str, str, float | None], ...] = tuple(
    (f"Safety{robot}Velocity-{version}", f"safety_{module}_velocity_{version}", cls, threshold)
    for version in ("v0", "v1")
    for robot, module, cls, threshold in (
        ("HalfCheetah", "half_cheetah", "SafetyHalfCheetahVelocityEnv", 4800.0),
        ("Hopper", "hopper", "SafetyHopperVelocityEnv", 3800.0),
        ("Swimmer", "swimmer", "SafetySwimmerVelocityEnv", 360.0),
        ("Walker2d", "walker2d", "SafetyWalker2dVelocityEnv", None),
        ("Ant", "ant", "SafetyAntVelocityEnv", 6000.0),
        ("Humanoid", "humanoid", "SafetyHumanoidVelocityEnv", None),
    )
)


def _build_specs() -> dict[str, SafetyEnvSpec]:
    specs: dict[str, SafetyEnvSpec] = {}
    for task, steps, extra in _NAVIGATION_TASKS:
        needs = (_VILLAGE_TEXTURE,) if extra.get("floor_conf.type") == "village" else ()
        for robot in SAFETY_ROBOTS:
            base_id = f"Safety{robot}{task}-v0"
            config = {**extra, "agent_name": robot}
            specs[base_id] = SafetyEnvSpec(
                base_id, "navigation", steps, None, base_id, MappingProxyType(config), "", needs
            )
            vision_id = f"Safety{robot}{task}Vision-v0"
            vision = {"observe_vision": True, "observation_flatten": False, **config}
            specs[vision_id] = SafetyEnvSpec(
                vision_id, "navigation", steps, None, base_id, MappingProxyType(vision), "", needs
            )
    for env_id, module, cls, threshold in _VELOCITY_TASKS:
        specs[env_id] = SafetyEnvSpec(
            env_id, "velocity", 1000, threshold, entry_point=f"{_VELOCITY_MODULE}.{module}:{cls}"
        )
    return specs


_SPECS: Mapping[str, SafetyEnvSpec] = MappingProxyType(_build_specs())

#: Every safety-gymnasium id gymcurric registers (without the ``gymcurric/`` namespace).
SAFETY_GYMNASIUM_IDS: tuple[str, ...] = tuple(_SPECS)


def safety_env_spec(env_id: str) -> SafetyEnvSpec:
    """Return how ``env_id`` is built.

    Args:
        env_id: a safety-gymnasium id, with or without the ``gymcurric/`` namespace.

    Returns:
        The :class:`SafetyEnvSpec` of that id.

    Raises:
        ConfigError: ``env_id`` is not one of :data:`SAFETY_GYMNASIUM_IDS`.
    """
    name = env_id.removeprefix(f"{SAFETY_NAMESPACE}/") if isinstance(env_id, str) else env_id
    spec = _SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        close = difflib.get_close_matches(str(name), SAFETY_GYMNASIUM_IDS, n=3)
        hint = f"did you mean {close}?" if close else "see SAFETY_GYMNASIUM_IDS"
        raise ConfigError("env_id", env_id, f"not a safety-gymnasium id gymcurric serves; {hint}")
    return spec


def register_safety_envs() -> None:
    """Register ``gymcurric/<safety id>`` for every id in :data:`SAFETY_GYMNASIUM_IDS`.

    Idempotent: ids already in Gymnasium's registry are left as they are. Only entry-point
    strings are recorded; neither mujoco nor safety_gymnasium is imported.
    """
    registry = gym.envs.registration.registry
    for env_id, spec in _SPECS.items():
        full_id = f"{SAFETY_NAMESPACE}/{env_id}"
        if full_id in registry:
            continue
        gym.register(
            id=full_id,
            entry_point=_ENTRY_POINT,
            max_episode_steps=spec.max_episode_steps,
            reward_threshold=spec.reward_threshold,
            kwargs={"env_id": env_id},
        )
