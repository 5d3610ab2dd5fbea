"""HazardNav sub-envs that put a given value into every step's info, for the tests of what the
safe agents read from ``info["cost"]``, ``info["costs"]`` and ``info["risk"]``."""

import gymnasium as gym
from stable_baselines3.common.vec_env import DummyVecEnv

from tests.integrations.sb3.hazard_runs import make_hazard


class SetInfo(gym.Wrapper):
    """Puts ``info[key] = value`` into every step's info."""

    def __init__(self, env, key, value):
        super().__init__(env)
        self.key, self.value = key, value

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, self.key: self.value}


def vec_with(key, values, seed=0):
    """A seeded DummyVecEnv whose sub-env ``i`` reports ``info[key] = values[i]``."""
    venv = DummyVecEnv([lambda v=v: SetInfo(make_hazard(), key, v) for v in values])
    venv.seed(seed)
    return venv
