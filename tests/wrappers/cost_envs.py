"""Cost-emitting stub envs and wrappers shared by the single-env and vector wrapper tests.

:class:`RandomWalkCostEnv` (``make_walk``) feeds the risk tests (``test_risk.py``, its vector and
Stable-Baselines3 counterparts); :class:`CostAt` feeds the Saute tests.
"""

from typing import Any

import gymnasium as gym
import numpy as np


class RandomWalkCostEnv(gym.Env[np.ndarray, int]):
    """A walk on [0, 1]: actions are ignored, the position drifts at random; cost = p**2.

    The discounted cost-to-go is monotone in the position, which is the observation (plus a
    noise coordinate). ``nan_cost_every`` makes every k-th cost NaN.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, episode_len=200, nan_cost_every=0, render_mode=None, cost=True):
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.episode_len = episode_len
        self.nan_cost_every = nan_cost_every
        self.render_mode = render_mode
        self.cost = cost
        self.t = 0
        self.p = 0.0

    def _obs(self):
        return np.array([self.p, self.np_random.normal()], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.p = float(self.np_random.random())
        return self._obs(), {"caption": f"at {self.p:.2f}"}

    def step(self, action):
        self.t += 1
        cost = self.p**2
        if self.nan_cost_every and self.t % self.nan_cost_every == 0:
            cost = float("nan")
        self.p = float(np.clip(self.p + self.np_random.normal(0, 0.05), 0.0, 1.0))
        info = {"caption": f"at {self.p:.2f}"}
        if self.cost:
            info["cost"] = cost
        return self._obs(), 0.0, False, self.t >= self.episode_len, info

    def render(self):
        frame = np.zeros((8, 8, 3), np.uint8)
        frame[..., 0] = int(255 * self.p)
        return frame


def make_walk(**kwargs):
    """A :class:`RandomWalkCostEnv` of ``kwargs`` (an env factory for vector envs)."""
    return RandomWalkCostEnv(**kwargs)


class CostAt(gym.Wrapper):
    """ScriptedCostEnv's cost, replaced by ``value`` at the step indices in ``at``."""

    def __init__(self, env, value, at):
        super().__init__(env)
        self.value, self.at = value, at

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.env.unwrapped.t in self.at:
            info = {**info, "cost": self.value}
        return obs, reward, terminated, truncated, info
