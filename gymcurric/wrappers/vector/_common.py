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

    Raises ``missing([i])`` for the first sub-env ``i`` without one.
    """
    base = env.unwrapped
    if not isinstance(base, SyncVectorEnv):
        return []
    found = []
    for i, sub in enumerate(base.envs):
        wrapper = find_wrapper(sub, cls)
        if wrapper is None:
            raise missing([i])
        found.append(wrapper)
    return found


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The env's autoreset mode; Gymnasium's default (``NEXT_STEP``) when it declares none."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if not isinstance(mode, AutoresetMode):
        raise ConfigError(
            "metadata['autoreset_mode']", mode, "expected a gymnasium.vector.AutoresetMode"
        )
    return mode
