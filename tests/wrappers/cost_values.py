"""An env whose every step reports ``info["cost"]`` exactly as given, for the tests of costs
that are no number (text, bytes) and of indicator costs (bools), single-env and vector."""

from typing import Any

import gymnasium as gym
import numpy as np

#: costs ``float()`` reads without a word and the readers refuse
NOT_COSTS = ["0.5", b"1", bytearray(b"1"), np.str_("2")]
#: indicator costs (``info["cost"] = collided``), read as 0 and 1
BOOL_COSTS = [True, False, np.bool_(True), np.bool_(False)]
#: costs the readers take, as they did
COSTS = [0.5, np.float32(0.5), np.float16(1.5), np.int64(1), 1, float("nan")]


class GivenCostEnv(gym.Env[np.ndarray, int]):
    """Steps forever; each step's ``info["cost"]`` is ``cost``, as given (None: no cost)."""

    def __init__(self, cost: Any) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.cost = cost

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: int):
        info = {} if self.cost is None else {"cost": self.cost}
        return np.zeros(2, np.float32), 0.0, False, False, info
