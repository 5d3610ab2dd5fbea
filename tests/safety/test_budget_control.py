"""Bad arguments of the budget controllers are ConfigErrors naming them, not raw tracebacks."""

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety.budget_control import PIBudgetController, QBudgetController


@pytest.mark.parametrize("seed", [-1, 1.5, "x", -(10**400)])
def test_a_seed_numpy_refuses_is_a_config_error(seed):
    # numpy's SeedSequence raised ValueError ('expected non-negative integer') or TypeError
    with pytest.raises(ConfigError, match=r"QBudgetController: invalid value for 'seed'") as err:
        QBudgetController([1.0, 2.0], seed=seed)
    assert err.value.value == seed or "characters" in str(err.value.value)


def test_seeds_numpy_takes_draw_as_before():
    for seed in (None, 0, 2**64, np.uint64(7), [1, 2]):
        QBudgetController([1.0, 2.0], seed=seed)  # accepted, as numpy's default_rng takes them
    a, b = (QBudgetController([1.0, 2.0, 3.0], seed=3) for _ in range(2))
    steps = [(a.step(c), b.step(c)) for c in (0.5, 2.5, 1.0, 3.5)]
    assert all(x == y for x, y in steps)


@pytest.mark.parametrize("bounds", [3, (1.0,), (0.0, 1.0, 2.0), 2.5])
def test_budget_bounds_that_are_no_pair_is_a_config_error(bounds):
    # unpacking raised TypeError (an int) or ValueError (one or three numbers)
    with pytest.raises(ConfigError, match=r"invalid value for 'budget_bounds'.*\(low, high\)"):
        PIBudgetController([1.0, 2.0], budget_bounds=bounds)


def test_budget_bounds_pairs_as_before():
    for bounds in ((0.0, 2.0), [0.5, 1.5], np.array([0.0, 3.0])):
        low, high = (float(x) for x in bounds)
        assert PIBudgetController([1.0, 2.0], budget_bounds=bounds).budget_bounds == (low, high)


@pytest.mark.parametrize(
    "bounds", ["01", b"01", {0.0: 1.0, 1.0: 2.0}, {"low": 0.0, "high": 2.0}, {0.5, 2.0}], ids=repr
)
def test_budget_bounds_as_text_a_mapping_or_a_set_is_no_pair(bounds):
    # unpacking took the characters, the keys ({0.0: 1.0, 1.0: 2.0} became (0.0, 1.0)) or a
    # set's own order, and the error, if any, blamed 'budget_bounds[0]'
    with pytest.raises(ConfigError, match=r"invalid value for 'budget_bounds':.*\(low, high\)"):
        PIBudgetController([1.0, 2.0], budget_bounds=bounds)
