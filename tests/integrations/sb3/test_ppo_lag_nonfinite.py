"""PPOLag on non-finite advantages or critic targets (issue 25): skipped and counted, no NaN.

SB3's PPO update steps the optimiser on a NaN loss: the policy went NaN and the next rollout
raised from the policy's distribution. PPOLag now runs the guarded update P3O and PPOSimmer use.
"""

import pytest

pytest.importorskip("stable_baselines3")

import torch as th

from gymcurric.integrations.sb3 import PPOLag, PPOPIDLag
from tests.integrations.sb3.hazard_runs import assert_same, hazard_vec, policy_params
from tests.integrations.sb3.poison import Poison

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "device": "cpu"}


@pytest.mark.parametrize("cls", [PPOLag, PPOPIDLag])
@pytest.mark.parametrize("field", ["advantages", "returns"])
def test_a_nonfinite_loss_skips_the_minibatch_and_counts_it(cls, field):
    model = cls("MlpPolicy", hazard_vec(), seed=0, **SMALL).learn(64)
    before = policy_params(model)
    adam = model.policy.optimizer.state_dict()
    model.learn(64, callback=Poison(field), reset_num_timesteps=False)  # raises nothing
    # every minibatch (2 per pass, 2 passes) holds the NaN: nothing was stepped
    assert model.nonfinite_skipped == 2 * SMALL["n_epochs"]
    assert model.logger.name_to_value["train/nonfinite_skipped"] == 4
    after = policy_params(model)
    for k in before:
        if not k.startswith("cost_value"):  # the cost critic fits its own (finite) targets
            assert th.equal(before[k], after[k]), k
    assert_same(adam, model.policy.optimizer.state_dict())
    assert all(bool(th.isfinite(v).all()) for v in after.values())
    model.learn(64, reset_num_timesteps=False)  # and training goes on
    assert model.nonfinite_skipped == 4


def test_nonfinite_cost_returns_leave_the_cost_critic_as_it_was():
    model = PPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    before = policy_params(model)
    model.learn(64, callback=Poison("cost_returns"))
    after = policy_params(model)
    assert th.equal(before["cost_value_net.0.weight"], after["cost_value_net.0.weight"])
    assert not th.equal(before["value_net.weight"], after["value_net.weight"])
    assert model.nonfinite_skipped == 1  # the skipped fit; every policy step was taken
