"""An int too large for a float (``10**400``, as JSON and YAML read it) given to a safety
parameter is a ConfigError naming the parameter, the value cut short and why, not a raw
``OverflowError``."""

import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety import NonFiniteGuard, PendingCostToGo, RiskModulation, cost_to_go_targets
from gymcurric.safety.budget_control import PIBudgetController, QBudgetController
from gymcurric.safety.costs import EpisodeCostTracker
from gymcurric.safety.modulation import lagrange_modulation

BIG = 10**400


def _refused(call, key):
    with pytest.raises(ConfigError, match=rf"'{key}'.*\(401 characters\).*") as info:
        call()
    assert info.value.key == key
    return str(info.value)


@pytest.mark.parametrize("name", ["alpha", "quantile_p", "slope", "eps"])
def test_modulation_settings(name):
    text = _refused(lambda: RiskModulation(**{name: BIG}), name)
    assert "does not fit a float" in text
    _refused(lambda: lagrange_modulation([1.0], **{name: BIG}), name)


def test_a_modulation_parameter_that_is_no_number_is_a_config_error_too():
    for name in ("alpha", "quantile_p", "slope", "eps", "min_episodes", "episodes_seen"):
        with pytest.raises(ConfigError, match=name):
            lagrange_modulation([1.0], **{name: "x"})
    # a count of episodes may be any size: the gate stays closed
    assert lagrange_modulation([1.0], min_episodes=BIG).status == "gated"


def test_cost_to_go_gamma_and_horizon():
    _refused(lambda: PendingCostToGo(1, gamma=BIG, horizon=3), "gamma")
    _refused(lambda: cost_to_go_targets([1.0], [False], gamma=0.9, horizon=BIG), "horizon")


def test_the_guard_replacement_and_the_tracker_queue():
    text = _refused(lambda: NonFiniteGuard("cost", replacement=BIG), "nonfinite_value")
    assert "does not fit a float" in text
    _refused(lambda: EpisodeCostTracker(1, BIG), "queue_length")


@pytest.mark.parametrize("name", ["kp", "ki", "kaw", "polyak", "action_bound", "window"])
def test_pi_budget_controller(name):
    _refused(lambda: PIBudgetController([1.0, 2.0], **{name: BIG}), name)


@pytest.mark.parametrize("name", ["lr", "gamma", "epsilon_greedy", "polyak", "reward_thresh"])
def test_q_budget_controller(name):
    _refused(lambda: QBudgetController([1.0, 2.0], **{name: BIG}), name)


def test_budget_levels():
    with pytest.raises(ConfigError, match=r"'budget_levels'.*\(408 characters\)"):
        PIBudgetController([1.0, BIG])
