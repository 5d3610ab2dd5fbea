"""``train/nonfinite_skipped`` means the same in every safe-RL agent (docs/safe_rl.md).

One count per update of a network skipped because a number was not finite: a PPO minibatch
step (actor and reward critic share it), a trust-region policy step, a separate reward-critic
fit (TRPOLag, CPO) or a cost-critic fit. CPO counted critic fits and the others did not.
"""

import pytest

pytest.importorskip("sb3_contrib")

import torch as th

from gymcurric.integrations.sb3 import CPO, P3O, PPOLag, PPOPIDLag, PPOSimmer, TRPOLag
from tests.integrations.sb3.hazard_runs import hazard_vec, policy_params
from tests.integrations.sb3.poison import Poison

pytestmark = pytest.mark.sb3

PPO_KW = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "device": "cpu"}
TRPO_KW = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}
ROLLOUTS = 2  # learn(128) on 2 envs x 32 steps
MINIBATCH_STEPS = 2 * 2  # PPO: 2 minibatches per pass, 2 passes (per rollout)

ALGORITHMS = {
    "PPOLag": (PPOLag, PPO_KW),
    "PPOPIDLag": (PPOPIDLag, PPO_KW),
    "P3O": (P3O, PPO_KW),
    "PPOSimmer": (PPOSimmer, {**PPO_KW, "max_episode_steps": 50}),
    "TRPOLag": (TRPOLag, TRPO_KW),
    "CPO": (CPO, TRPO_KW),
}
TRUST_REGION = {"TRPOLag", "CPO"}
NO_COST_CRITIC = {"PPOSimmer"}


def expected_per_rollout(name, field):
    """Skipped updates per rollout, by the one definition."""
    if field == "cost_returns":  # the cost critic's fit, one per rollout
        return 1
    if name in TRUST_REGION:  # returns: the reward critic's fit; advantages: the policy step
        return 1
    return MINIBATCH_STEPS  # one joint step per minibatch, each holds the NaN


CASES = [
    (name, field)
    for name in ALGORITHMS
    for field in ("advantages", "returns", "cost_returns")
    if not (field == "cost_returns" and name in NO_COST_CRITIC)
]


@pytest.mark.parametrize(("name", "field"), CASES)
def test_every_algorithm_counts_each_skipped_network_update_once(name, field):
    cls, kwargs = ALGORITHMS[name]
    model = cls("MlpPolicy", hazard_vec(), seed=0, **kwargs)
    before = policy_params(model)
    model.learn(128, callback=Poison(field))
    want = ROLLOUTS * expected_per_rollout(name, field)
    assert model.nonfinite_skipped == want
    assert model.logger.name_to_value["train/nonfinite_skipped"] == want
    after = policy_params(model)
    assert all(bool(th.isfinite(v).all()) for v in after.values())
    if field == "cost_returns":  # that critic was left as it was, the rest trained
        assert th.equal(before["cost_value_net.0.weight"], after["cost_value_net.0.weight"])
        assert not th.equal(before["value_net.weight"], after["value_net.weight"])


def test_cpo_keeps_its_own_key_with_the_same_count():
    model = CPO("MlpPolicy", hazard_vec(), seed=0, **TRPO_KW)
    model.learn(128, callback=Poison("cost_returns"))
    logs = model.logger.name_to_value
    assert logs["train/cpo_nonfinite_skipped"] == logs["train/nonfinite_skipped"] == ROLLOUTS


def test_no_cost_critic_fit_no_count():
    # update_cost_critic=False: there is no fit to skip
    model = PPOLag("MlpPolicy", hazard_vec(), seed=0, update_cost_critic=False, **PPO_KW)
    model.learn(128, callback=Poison("cost_returns"))
    assert model.nonfinite_skipped == 0
