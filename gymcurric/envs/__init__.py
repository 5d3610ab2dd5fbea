"""Built-in task environments and the Safety-Gymnasium loader, registered under ``gymcurric/``.

Registration only records entry-point strings: it imports neither the env modules nor mujoco.

Ids:
    ``gymcurric/HazardNav-v0``: 2-D continuous hazard navigation (see :mod:`.hazard_nav`).
    ``gymcurric/HazardGrid-v0``: its discrete grid variant, for fast tests (see :mod:`.grid`).
    ``gymcurric/Safety*``: every safety-gymnasium task (see :mod:`.safety_gymnasium`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from gymcurric.envs.builtin_ids import register_builtin_envs
from gymcurric.envs.safety_ids import SAFETY_GYMNASIUM_IDS, register_safety_envs

__all__ = [
    "SAFETY_GYMNASIUM_IDS",
    "make_safety_env",
    "register_builtin_envs",
    "register_envs",
    "register_safety_envs",
]


def make_safety_env(env_id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """Build a Safety-Gymnasium task (see :func:`gymcurric.envs.safety_gymnasium.make_safety_env`).

    Imported lazily: the loader applies its patches and imports mujoco only when called.
    """
    from gymcurric.envs.safety_gymnasium import make_safety_env as make

    return make(env_id, **kwargs)


def register_envs() -> None:
    """Register every ``gymcurric/…`` id with Gymnasium (idempotent)."""
    register_builtin_envs()
    register_safety_envs()


register_envs()
