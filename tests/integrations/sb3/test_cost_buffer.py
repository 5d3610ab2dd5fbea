from functools import partial

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import gymnasium as gym
import torch as th
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer, discounted_gae
from gymcurric.integrations.sb3.ppo_lag import PPOLag
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

OBS = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
ACT = gym.spaces.Discrete(2)


def test_discounted_gae_hand_computed():
    # one env, an episode ends (terminal) after step 1; gamma 0.9, lambda 0.5
    costs = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    values = np.full((4, 1), 0.5, np.float32)
    starts = np.array([[1.0], [0.0], [1.0], [0.0]], np.float32)
    adv, ret = discounted_gae(costs, values, starts, np.array([0.5]), np.array([False]), 0.9, 0.5)
    # by hand: d3 = 4 + .45 - .5; A2 = (3 + .45 - .5) + .45*A3; A1 = 2 - .5 (terminal); A0 = ...
    a3 = 3.95
    a2 = 2.95 + 0.45 * a3
    a1 = 1.5
    a0 = 0.95 + 0.45 * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2, a3], rtol=1e-6)
    np.testing.assert_allclose(ret, adv + values, rtol=1e-6)
    # the last step ended an episode: no bootstrap from last_values
    adv_done, _ = discounted_gae(costs, values, starts, np.array([0.5]), np.array([True]), 0.9, 0.5)
    assert adv_done[3, 0] == pytest.approx(3.5)


def test_discounted_gae_equals_sb3_reward_gae():
    rng = np.random.default_rng(0)
    buf = RolloutBuffer(7, OBS, ACT, device="cpu", gae_lambda=0.8, gamma=0.95, n_envs=3)
    rewards = rng.normal(size=(7, 3)).astype(np.float32)
    values = rng.normal(size=(7, 3)).astype(np.float32)
    starts = (rng.random((7, 3)) < 0.3).astype(np.float32)
    for t in range(7):
        buf.add(
            np.zeros((3, 1)), np.zeros(3), rewards[t], starts[t], th.tensor(values[t]), th.zeros(3)
        )
    last, dones = th.tensor([0.1, -0.2, 0.3]), np.array([True, False, False])
    buf.compute_returns_and_advantage(last, dones)
    adv, ret = discounted_gae(rewards, values, starts, last.numpy(), dones, 0.95, 0.8)
    np.testing.assert_array_equal(adv, buf.advantages)
    np.testing.assert_array_equal(ret, buf.returns)


def test_buffer_penalised_advantage():
    buf = CostRolloutBuffer(4, OBS, ACT, device="cpu", n_envs=2)
    rng = np.random.default_rng(1)
    for _ in range(4):
        buf.add(
            np.zeros((2, 1)),
            np.zeros(2),
            rng.normal(size=2),
            np.zeros(2),
            th.zeros(2),
            th.zeros(2),
            cost=rng.random(2),
            cost_value=th.zeros(2),
        )
    buf.compute_returns_and_advantage(th.zeros(2), np.zeros(2, bool), last_cost_values=th.zeros(2))
    buf.penalty = 2.0
    (batch,) = list(buf.get(None))
    a_r = th.tensor(buf.advantages).flatten()
    a_c = th.tensor(buf.cost_advantages).flatten()
    perm = [
        int(np.flatnonzero(buf.advantages.flatten() == v)[0])
        for v in (batch.returns - batch.old_values).numpy()
    ]
    a_r, a_c = a_r[perm], a_c[perm]
    expected = ((a_r - a_r.mean()) / (a_r.std() + 1e-8) - 2.0 * (a_c - a_c.mean())) / 3.0
    th.testing.assert_close(batch.advantages, expected)
    th.testing.assert_close(batch.cost_advantages, a_c - a_c.mean())
    assert abs(float(batch.cost_advantages.mean())) < 1e-6


def test_buffer_rejects_bad_cost_gamma():
    with pytest.raises(ConfigError, match="cost_gamma"):
        CostRolloutBuffer(4, OBS, ACT, cost_gamma=1.5)
    buf = CostRolloutBuffer(1, OBS, ACT, device="cpu")
    buf.add(
        np.zeros((1, 1)),
        np.zeros(1),
        np.zeros(1),
        np.ones(1),
        th.zeros(1),
        th.zeros(1),
        cost=np.zeros(1),
        cost_value=th.zeros(1),
    )
    with pytest.raises(ConfigError, match="last_cost_values"):
        buf.compute_returns_and_advantage(th.zeros(1), np.zeros(1, bool))


class Capture(BaseCallback):
    """Copies the cost arrays at the end of the (only) rollout, before train() flattens them."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buf = self.model.rollout_buffer
        self.costs = buf.costs.copy()
        self.cost_values = buf.cost_values.copy()
        self.starts = buf.episode_starts.copy()
        self.cost_adv = buf.cost_advantages.copy()
        self.cost_ret = buf.cost_returns.copy()
        self.last = self.locals["last_cost_values"].numpy().flatten()
        v_c = self.model.policy.predict_cost_values
        self.v_terminal = float(v_c(th.tensor([[3.0]]))[0, 0].detach())
        obs = th.arange(0.0, 5.0).reshape(-1, 1)
        self.v_table = self.model.policy.predict_cost_values(obs).detach().numpy().flatten()


def test_cost_gae_with_truncations_and_terminals():
    # env 0 truncates every 3 steps (bootstrapped), env 1 terminates every 4 steps
    env = DummyVecEnv([partial(make_scripted, 3, truncate=True), partial(make_scripted, 4)])
    gamma_c, lam_c, n = 0.9, 0.7, 10
    model = PPOLag(
        "MlpPolicy",
        env,
        n_steps=n,
        batch_size=10,
        n_epochs=1,
        seed=0,
        cost_gamma=gamma_c,
        cost_gae_lambda=lam_c,
        device="cpu",
    )
    cap = Capture()
    model.learn(2 * n, callback=cap)
    # raw costs: 0.5 * step index; truncated steps get + gamma_c * V_c(terminal obs [3.0])
    t0 = np.arange(n) % 3 + 1
    t1 = np.arange(n) % 4 + 1
    expected0 = 0.5 * t0 + np.where(t0 == 3, gamma_c * cap.v_terminal, 0.0)
    np.testing.assert_allclose(cap.costs[:, 0], expected0, rtol=1e-5)
    np.testing.assert_array_equal(cap.costs[:, 1], 0.5 * t1)
    # V_c was evaluated on the observation before each step (obs = steps done so far)
    np.testing.assert_allclose(cap.cost_values[:, 0], cap.v_table[t0 - 1], rtol=1e-5)
    # hand-written GAE per env: an episode boundary after step t stops bootstrapping
    for e, ends in ((0, t0 == 3), (1, t1 == 4)):
        adv = np.zeros(n)
        nxt_adv, nxt_v = 0.0, float(cap.last[e])
        for t in reversed(range(n)):
            keep = 0.0 if ends[t] else 1.0
            delta = cap.costs[t, e] + gamma_c * keep * nxt_v - cap.cost_values[t, e]
            adv[t] = delta + gamma_c * lam_c * keep * nxt_adv
            nxt_adv, nxt_v = adv[t], cap.cost_values[t, e]
        np.testing.assert_allclose(cap.cost_adv[:, e], adv, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(cap.cost_ret[:, e], adv + cap.cost_values[:, e], rtol=1e-5)
