"""Registration of the built-in pure-numpy envs.

Only entry-point strings are registered, so ``import gymcurric`` does not import the env
modules; ``gym.make`` imports them on first use.
"""

from __future__ import annotations

import gymnasium as gym

__all__ = ["BUILTIN_ENV_IDS", "register_builtin_envs"]

# id -> entry point. The envs truncate themselves at their task's ``max_steps``, so no TimeLimit
# is added (a fixed one would override the per-episode episode length).
_ENTRY_POINTS = {
    "gymcurric/HazardNav-v0": "gymcurric.envs.hazard_nav:HazardNavEnv",
    "gymcurric/HazardGrid-v0": "gymcurric.envs.grid:HazardGridEnv",
}

BUILTIN_ENV_IDS: tuple[str, ...] = tuple(_ENTRY_POINTS)


def register_builtin_envs() -> None:
    """Register ``gymcurric/HazardNav-v0`` and ``gymcurric/HazardGrid-v0`` (idempotent)."""
    for env_id, entry_point in _ENTRY_POINTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=None)
