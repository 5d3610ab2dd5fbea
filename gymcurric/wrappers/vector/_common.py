"""Helpers shared by the vector wrappers."""

from __future__ import annotations

from typing import Any, TypeVar

import gymnasium as gym
from gymnasium.vector import AutoresetMode, VectorEnv

from gymcurric.errors import ConfigError

W = TypeVar("W", bound=gym.Wrapper[Any, Any, Any, Any])


def find_wrapper(env: gym.Env[Any, Any], cls: type[W]) -> W | None:
    """The outermost wrapper of type ``cls`` in ``env``'s wrapper chain, or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, cls):
            return env
        env = env.env
    return None


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The env's autoreset mode; Gymnasium's default (``NEXT_STEP``) when it declares none."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if not isinstance(mode, AutoresetMode):
        raise ConfigError(
            "metadata['autoreset_mode']", mode, "expected a gymnasium.vector.AutoresetMode"
        )
    return mode
