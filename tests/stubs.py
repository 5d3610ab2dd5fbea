"""Tiny scripted envs for unit tests (importable by spawned worker processes)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ScriptedCostEnv(gym.Env[np.ndarray, int]):
    """Counts steps; reward = step index in the episode (1, 2, ...), cost = 0.5 * reward.

    ``cost = 0.5 * reward`` on every real step lets tests check that a wrapper keeps cost and
    reward of the same transition together. ``mode`` picks how the cost is reported:
    ``"info"`` (``info["cost"]``), ``"tuple"`` (Safety-Gymnasium 6-tuple) or ``"none"``.
    ``nan_at`` makes the cost NaN at those step indices.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        episode_len: int = 5,
        mode: str = "info",
        nan_at: tuple[int, ...] = (),
        truncate: bool = False,
        reset_info_cost: bool = False,
    ) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.episode_len = episode_len
        self.mode = mode
        self.nan_at = nan_at
        self.truncate = truncate
        self.reset_info_cost = reset_info_cost
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        info: dict[str, Any] = {"cost": 99.0} if self.reset_info_cost else {}
        return np.zeros(1, np.float32), info

    def step(self, action: int):
        self.t += 1
        reward = float(self.t)
        cost = float("nan") if self.t in self.nan_at else 0.5 * reward
        done = self.t >= self.episode_len
        terminated, truncated = (False, done) if self.truncate else (done, False)
        obs = np.array([self.t], np.float32)
        info: dict[str, Any] = {}
        if self.mode == "tuple":
            return obs, reward, cost, terminated, truncated, info
        if self.mode == "info":
            info["cost"] = cost
        return obs, reward, terminated, truncated, info


def make_scripted(episode_len: int = 5, **kwargs: Any) -> gym.Env:
    return ScriptedCostEnv(episode_len=episode_len, **kwargs)
