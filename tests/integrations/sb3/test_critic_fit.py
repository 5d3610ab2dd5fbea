"""The reward-critic fit TRPOLag and CPO share (common/critic_fit.py) is sb3-contrib TRPO's."""

import copy

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from sb3_contrib import TRPO

from gymcurric.integrations.sb3 import CPO, TRPOLag
from gymcurric.integrations.sb3.common import critic_fit
from gymcurric.integrations.sb3.common.critic_fit import fit_reward_critic
from gymcurric.integrations.sb3.cpo import cpo as cpo_module
from gymcurric.integrations.sb3.trpo_lag import trpo_lag as trpo_lag_module
from tests.integrations.sb3.hazard_runs import hazard_vec, policy_params
from tests.integrations.sb3.poison import Poison

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 16, "n_critic_updates": 3, "device": "cpu"}


class SnapshotTRPO(TRPO):
    """sb3-contrib's TRPO that keeps what its last ``train`` started from."""

    def train(self) -> None:
        self.snapshot = (
            copy.deepcopy(self.policy.state_dict()),
            copy.deepcopy(self.policy.optimizer.state_dict()),
            copy.deepcopy(self.rollout_buffer),
            np.random.get_state(),  # noqa: NPY002  (SB3 shuffles with the global RNG)
        )
        super().train()


def test_the_fit_is_trpo_s_own_critic_loop_to_the_bit():
    model = SnapshotTRPO("MlpPolicy", hazard_vec(), seed=1, **SMALL).learn(64)
    trained = policy_params(model)
    logged = model.logger.name_to_value["train/value_loss"]
    state, optimizer_state, buffer, rng = model.snapshot
    model.policy.load_state_dict(state)
    model.policy.optimizer.load_state_dict(optimizer_state)
    np.random.set_state(rng)  # noqa: NPY002
    next(buffer.get(None))  # TRPO's policy step draws its one batch first
    actor = [p for name, p in model.policy.named_parameters() if "value" not in name]
    losses = fit_reward_critic(model.policy, buffer, n_epochs=3, batch_size=16, frozen=actor)
    assert len(losses) == 3 * 4  # 3 passes of 64 / 16 minibatches
    assert np.mean(losses) == logged
    refit = policy_params(model)
    for k, v in trained.items():
        if "value" in k:  # the critic moved exactly as in TRPO's train
            assert th.equal(v, refit[k]), k
        else:  # the actor did not move at all (TRPO's own actor took its step)
            assert th.equal(state[k], refit[k]), k


def spy(monkeypatch, module):
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs["frozen"])
        return critic_fit.fit_reward_critic(*args, **kwargs)

    monkeypatch.setattr(module, "fit_reward_critic", counting)
    return calls


def test_trpolag_s_skipped_step_and_cpo_fit_through_it(monkeypatch):
    trpo_calls = spy(monkeypatch, trpo_lag_module)
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    model.learn(128, callback=Poison("advantages", (0, 0)))
    assert model.nonfinite_skipped >= 2 and len(trpo_calls) == 2  # one per skipped step
    cpo_calls = spy(monkeypatch, cpo_module)
    CPO("MlpPolicy", hazard_vec(), seed=0, **SMALL).learn(128)
    assert len(cpo_calls) == 2 and all(cpo_calls)  # one per update, the actor frozen
