"""The shared guarded PPO update (P3O, PPOSimmer): its logs after a KL early stop are SB3's."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger

from gymcurric.integrations.sb3.common.ppo_update import guarded_ppo_train
from gymcurric.integrations.sb3.p3o import P3O
from tests.integrations.sb3.hazard_runs import SMALL, logged, no_cost_vec, policy_params, silent

pytestmark = pytest.mark.sb3


class StubPolicy(th.nn.Module):
    """Values ``obs[:, 0] + w`` and log-probs ``obs[:, 1] + w`` (no analytic entropy)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = th.nn.Parameter(th.zeros(()))
        # lr 0: a step leaves w at 0, so every minibatch's losses can be worked out by hand
        self.optimizer = th.optim.SGD(self.parameters(), lr=0.0)
        self.steps = 0
        step = self.optimizer.step

        def counted(*args, **kwargs):
            self.steps += 1
            return step(*args, **kwargs)

        self.optimizer.step = counted

    def set_training_mode(self, mode: bool) -> None:
        pass

    def evaluate_actions(self, obs, actions):
        return obs[:, :1] + self.w, obs[:, 1] + self.w, None


def minibatch(old_log_prob, advantages, returns):
    f = lambda x: th.tensor(x, dtype=th.float32)  # noqa: E731
    return SimpleNamespace(
        observations=th.zeros(2, 2),  # values 0, log-probs 0
        actions=th.zeros(2, 1),
        old_log_prob=f(old_log_prob),
        advantages=f(advantages),
        returns=f(returns),
        old_values=th.zeros(2),
    )


def stub_model(batches, target_kl):
    buffer = SimpleNamespace(
        get=lambda batch_size: iter(batches), values=np.zeros(6), returns=np.ones(6)
    )
    return SimpleNamespace(
        policy=StubPolicy(),
        rollout_buffer=buffer,
        action_space=spaces.Box(-1.0, 1.0, (1,)),
        n_epochs=2,
        batch_size=2,
        normalize_advantage=False,
        clip_range=lambda progress: 0.2,
        clip_range_vf=None,
        ent_coef=0.0,
        vf_coef=0.5,
        target_kl=target_kl,
        max_grad_norm=0.5,
        verbose=0,
        _n_updates=0,
        nonfinite_skipped=0,
        logger=Logger(folder=None, output_formats=[]),
    )


def test_after_a_kl_stop_the_logs_are_sb3s_by_hand():
    batches = [
        # ratio 1 (KL 0): pg -mean(1, 3) = -2, value mean(1², 3²) = 5, loss -2 + 0.5·5 = 0.5
        minibatch([0.0, 0.0], [1.0, 3.0], [1.0, 3.0]),
        # log-ratio ±0.5: ratio (e^0.5, e^-0.5), both outside 1 ± 0.2, clipped to (1.2, 0.8):
        # pg -mean(min(2e^0.5, 2.4), min(2e^-0.5, 1.6)), value 2² = 4; KL > 1.5·0.01: stop
        minibatch([-0.5, 0.5], [2.0, 2.0], [2.0, 2.0]),
        minibatch([0.0, 0.0], [100.0, 100.0], [100.0, 100.0]),  # never reached
    ]
    model = stub_model(batches, target_kl=0.01)
    guarded_ppo_train(model, 1.0)  # type: ignore[arg-type]
    pg2 = -(2.4 + 2 * math.exp(-0.5)) / 2
    kl2 = ((math.exp(0.5) - 1.5) + (math.exp(-0.5) - 0.5)) / 2
    log = model.logger.name_to_value
    # one step (the first minibatch); the second tripped the stop and took none
    assert model.policy.steps == 1 and model._n_updates == 1
    # SB3's PPO.train: means over the minibatches evaluated, the stopped one included...
    assert log["train/policy_gradient_loss"] == pytest.approx((-2.0 + pg2) / 2, rel=1e-6)
    assert log["train/value_loss"] == pytest.approx((5.0 + 4.0) / 2, rel=1e-6)
    assert log["train/approx_kl"] == pytest.approx(kl2 / 2, rel=1e-6)
    assert log["train/clip_fraction"] == 0.5
    # ...and train/loss is the last minibatch evaluated (the stopped one), not the last stepped
    assert log["train/loss"] == pytest.approx(pg2 + 0.5 * 4.0, rel=1e-6)
    # without a stop every minibatch of both passes is stepped and counted
    free = stub_model(batches, target_kl=None)
    guarded_ppo_train(free, 1.0)  # type: ignore[arg-type]
    assert free.policy.steps == 6 and free._n_updates == 2
    assert free.logger.name_to_value["train/loss"] == pytest.approx(-100.0 + 0.5 * 100.0**2)
    assert free.logger.name_to_value["train/value_loss"] == pytest.approx((5 + 4 + 1e4) / 3)


def test_logs_equal_sb3_ppos_when_the_kl_stop_cuts_every_update():
    # P3O with the ReLU closed is PPO to the bit; a tiny target_kl stops each update at its
    # second minibatch (the first has ratio 1), so the logs after a stop are compared
    kw = {**SMALL, "seed": 3, "target_kl": 1e-6}
    ppo = PPO("MlpPolicy", no_cost_vec(), **kw).learn(192)
    p3o = silent(P3O("MlpPolicy", no_cost_vec(), **kw)).learn(192)
    a, b = logged(ppo), logged(p3o)
    assert a["train/n_updates"] == b["train/n_updates"] == 3  # one (cut) pass per update
    for key in (
        "train/loss",
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/entropy_loss",
        "train/approx_kl",
        "train/clip_fraction",
    ):
        assert float(a[key]) == float(b[key]), key
    pa, pb = policy_params(ppo), policy_params(p3o)
    assert all(th.equal(pa[k], pb[k]) for k in pa)
