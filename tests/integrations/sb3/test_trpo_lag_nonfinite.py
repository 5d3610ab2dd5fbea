"""TRPOLag on non-finite numbers (issue 25): nothing raised, nothing corrupted, the skip counted.

sb3-contrib's TRPO step is unguarded: a NaN surrogate or Fisher product makes the trial
parameters NaN in the line search, where the policy's distribution raises (or, without
validation, the actor is left NaN), and NaN critic targets write NaN into the critics.
"""

import math
import warnings

import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback

from gymcurric.integrations.sb3 import TRPOLag
from tests.integrations.sb3.hazard_runs import hazard_vec, policy_params
from tests.integrations.sb3.poison import Poison

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}


def actor_keys(params):
    return [k for k in params if "value" not in k]


def assert_finite(model):
    for k, v in policy_params(model).items():
        assert bool(th.isfinite(v).all()), k


@pytest.mark.parametrize("field", ["advantages", "cost_advantages"])
def test_a_nonfinite_surrogate_skips_the_step_and_counts_it(field):
    # λ pinned at 1: A_c enters the penalised advantage (with λ = 0 it is left out)
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, lagrange_init=1.0, lagrange_lr=0.0, **SMALL)
    before = policy_params(model)
    model.learn(192, callback=Poison(field, (0, 0)))  # 3 rollouts of 2 x 32 steps; raises nothing
    after = policy_params(model)
    assert model.nonfinite_skipped == model._n_updates == 3
    logs = model.logger.name_to_value
    assert logs["train/nonfinite_skipped"] == 3 and logs["train/is_line_search_success"] == 0.0
    for k in actor_keys(before):
        assert th.equal(before[k], after[k]), k
    # the critics are still fitted on their (finite) targets, as after a rejected step
    assert not th.equal(before["value_net.weight"], after["value_net.weight"])
    assert_finite(model)


@pytest.mark.parametrize("product", ["nan", "zero"])
def test_nonfinite_or_degenerate_fisher_products_skip_the_step(monkeypatch, product):
    hvp = TRPO.hessian_vector_product
    scale = math.nan if product == "nan" else 0.0  # zero: sᵀHs = 0, TRPO divides by it
    monkeypatch.setattr(
        TRPO, "hessian_vector_product", lambda self, *a, **k: hvp(self, *a, **k) * scale
    )
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    before = policy_params(model)
    model.learn(128)
    assert model.nonfinite_skipped == 2
    after = policy_params(model)
    for k in actor_keys(before):
        assert th.equal(before[k], after[k]), k
    assert_finite(model)


@pytest.mark.parametrize("field", ["returns", "cost_returns"])
def test_nonfinite_critic_targets_skip_that_critic_s_fit(field):
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    before = policy_params(model)
    model.learn(192, callback=Poison(field, (0, 0)))
    after = policy_params(model)
    critic = "value_net.weight" if field == "returns" else "cost_value_net.0.weight"
    other = "cost_value_net.0.weight" if field == "returns" else "value_net.weight"
    assert th.equal(before[critic], after[critic])
    assert not th.equal(before[other], after[other])
    # the policy steps were finite: one skipped fit per update (3) is all that is counted
    assert model.nonfinite_skipped == model._n_updates == 3
    assert_finite(model)


def test_the_guard_changes_nothing_when_everything_is_finite():
    trpo = TRPO("MlpPolicy", hazard_vec(), seed=2, **SMALL).learn(192)
    lag = TRPOLag(
        "MlpPolicy", hazard_vec(), seed=2, lagrange_init=0.0, lagrange_lr=0.0, **SMALL
    ).learn(192)
    assert lag.nonfinite_skipped == 0
    assert lag.logger.name_to_value["train/nonfinite_skipped"] == 0
    a, b = policy_params(trpo), policy_params(lag)
    for k in a:
        assert th.equal(a[k], b[k]), k


@pytest.mark.parametrize("field", ["returns", "advantages"])
def test_a_skipped_critic_fit_raises_no_numpy_warning(field):
    # returns: TRPO's own log took np.mean of no value losses ("Mean of empty slice")
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model.learn(128, callback=Poison(field, (0, 0)))
    # no fit, no loss (NaN, as before); NaN advantages skip the step, the critic is fitted
    value_loss = model.logger.name_to_value["train/value_loss"]
    assert math.isnan(value_loss) if field == "returns" else math.isfinite(value_loss)
    assert_finite(model)


class WarnEachStep(BaseCallback):
    """The same UserWarning, from the same line, at every env step."""

    def _on_step(self):
        warnings.warn("repeated", UserWarning, stacklevel=1)
        return True


def test_finite_updates_leave_the_warning_filters_alone():
    # The filter for a skipped critic fit was set up in catch_warnings() on every update;
    # entering it resets Python's once-per-location registry, so a warning shown once under
    # the "default" action came back after each update (3 times here; TRPO shows it once).
    shown = []
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL)
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, *args, **kwargs: shown.append(str(message))
        model.learn(192, callback=WarnEachStep())
    assert model._n_updates == 3
    assert shown == ["repeated"]
