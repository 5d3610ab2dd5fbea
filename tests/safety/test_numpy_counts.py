"""Counts given as numpy integers (``np.int64(2)``, as read out of an array) are accepted
wherever a plain int is, and kept as the Python int; a bool of either kind is not a count."""

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety import PendingCostToGo, RiskModulation
from gymcurric.safety.budget_control import PIBudgetController, QBudgetController


def _is_plain(value, expected):
    return type(value) is int and value == expected


def test_pending_cost_to_go_num_envs():
    assert _is_plain(PendingCostToGo(np.int64(2), gamma=0.9, horizon=3).num_envs, 2)
    with pytest.raises(ConfigError, match="'num_envs'"):
        PendingCostToGo(np.bool_(True), gamma=0.9, horizon=3)


def test_risk_modulation_counts():
    settings = RiskModulation(min_episodes=np.int64(3), reference_window=np.uint16(50))
    assert _is_plain(settings.min_episodes, 3) and _is_plain(settings.reference_window, 50)
    assert settings == RiskModulation(min_episodes=3, reference_window=50)
    with pytest.raises(ConfigError, match="'reference_window'"):
        RiskModulation(reference_window=np.bool_(True))


def test_budget_controller_counts():
    assert _is_plain(PIBudgetController([1.0, 2.0], window=np.int64(7)).window, 7)
    assert _is_plain(QBudgetController([1.0, 2.0], initial_level=np.int64(1)).level, 1)
    with pytest.raises(ConfigError, match="'initial_level'"):
        QBudgetController([1.0, 2.0], initial_level=np.bool_(True))


@pytest.mark.parametrize(
    "gamma", [np.float32(0.75), np.float16(0.75), np.float64(0.75), np.int8(1)]
)
def test_a_numpy_gamma_gives_the_targets_of_the_python_float_it_equals(gamma):
    # np.float32 (a value read from an array) was refused: 'gamma' must be a number in [0, 1]
    from gymcurric.safety import cost_to_go_targets

    costs, ends = [1.0, 0.5, 2.0, 1.0], [False, False, True, False]
    mine = cost_to_go_targets(costs, ends, gamma=gamma, horizon=3)
    plain = cost_to_go_targets(costs, ends, gamma=float(gamma), horizon=3)
    assert mine.targets.tobytes() == plain.targets.tobytes()
    assert type(PendingCostToGo(2, gamma=gamma, horizon=3).gamma) is float
    for bad in (np.bool_(True), np.float32(1.5), np.float64(np.nan)):
        with pytest.raises(ConfigError, match="'gamma'"):
            PendingCostToGo(2, gamma=bad, horizon=3)
