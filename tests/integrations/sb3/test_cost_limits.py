"""Absurd costs in the Lagrangian agents: saturated to the documented cap, counted, never NaN."""

import csv
import math

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch as th
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv

from gymcurric.integrations.sb3.ppo_lag import PPOLag
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

CAP = 1e6  # lagrange.COST_CAP, the documented cap


class ConstantCost(gym.Wrapper):
    """Reports ``info['cost'] = cost`` on every step."""

    def __init__(self, env, cost):
        super().__init__(env)
        self.cost = cost

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "cost": self.cost}


def agent(algo):
    if algo == "trpolag":
        pytest.importorskip("sb3_contrib")
        from gymcurric.integrations.sb3.trpo_lag import TRPOLag

        return TRPOLag, {"n_critic_updates": 2}
    return PPOLag, {"n_epochs": 2}


@pytest.mark.parametrize(
    ("algo", "multiplier"),
    [("ppolag", "adam"), ("ppolag", "sgd"), ("ppolag", "pid"), ("trpolag", "adam")],
)
@pytest.mark.parametrize("cost", [1e200, -1e200])
def test_absurd_step_costs_are_saturated_and_the_policy_stays_finite(
    tmp_path, algo, multiplier, cost
):
    # issue 21: PPOLag with a per-step cost of 1e200 ended with a NaN policy
    cls, kw = agent(algo)
    venv = DummyVecEnv([lambda: ConstantCost(make_scripted(4), cost)] * 2)
    model = cls(
        "MlpPolicy", venv, n_steps=16, batch_size=16, seed=0, device="cpu",
        multiplier=multiplier, **kw,
    )  # fmt: skip
    model.set_logger(configure(str(tmp_path), ["csv"]))
    with pytest.warns(UserWarning, match="saturated"):
        model.learn(64)
    for name, param in model.policy.state_dict().items():
        assert th.isfinite(param).all(), name
    assert math.isfinite(model.lagrange_multiplier)
    buffer = model.rollout_buffer
    assert np.all(buffer.costs == math.copysign(CAP, cost))
    for arr in (buffer.cost_advantages, buffer.cost_returns, buffer.cost_values):
        assert np.isfinite(arr).all()
    # every step's cost was saturated, and both J_c (4 steps of ±CAP per episode) too
    assert model.cost_clipped == 64
    assert model.lagrange.input_clipped == 2
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["train/cost_clipped"]) == 32  # logged before the second rollout
    assert float(rows[-1]["train/lagrange_input_clipped"]) == 1
    assert float(rows[-1]["train/lagrange_input_skipped"]) == 0
    assert model.logger.name_to_value["train/cost_clipped"] == 64


def test_ordinary_costs_are_not_counted(tmp_path):
    model = PPOLag("MlpPolicy", DummyVecEnv([lambda: make_scripted(4)]), n_steps=16,
                   batch_size=16, n_epochs=1, seed=0, device="cpu")  # fmt: skip
    model.learn(32)
    assert model.cost_clipped == 0 and model.lagrange.input_clipped == 0
    assert model.logger.name_to_value["train/cost_clipped"] == 0
