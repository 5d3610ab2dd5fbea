"""Helpers shared by the vector wrappers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from gymcurric.errors import ConfigError

W = TypeVar("W", bound=gym.Wrapper[Any, Any, Any, Any])


def find_wrapper(env: gym.Env[Any, Any], cls: type[W]) -> W | None:
    """The outermost wrapper of type ``cls`` in ``env``'s wrapper chain, or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, cls):
            return env
        env = env.env
    return None


def sync_sub_wrappers(
    env: VectorEnv, cls: type[W], missing: Callable[[list[int]], Exception]
) -> list[W]:
    """The ``cls`` wrapper of every sub-env of a ``SyncVectorEnv`` (``[]`` for other envs).

    Raises ``missing(envs)`` with every sub-env without one, in order (as the wrappers'
    ``AsyncVectorEnv`` checks name them all).
    """
    base = env.unwrapped
    if not isinstance(base, SyncVectorEnv):
        return []
    wrappers = [find_wrapper(sub, cls) for sub in base.envs]
    unwrapped = [i for i, wrapper in enumerate(wrappers) if wrapper is None]
    if unwrapped:
        raise missing(unwrapped)
    return [wrapper for wrapper in wrappers if wrapper is not None]


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The env's autoreset mode; Gymnasium's default (``NEXT_STEP``) when it declares none."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if not isinstance(mode, AutoresetMode):
        raise ConfigError(
            "metadata['autoreset_mode']", mode, "expected a gymnasium.vector.AutoresetMode"
        )
    return mode
