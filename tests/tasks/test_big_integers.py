"""An integer too large for a float in a task-side setting: a ConfigError, no traceback.

``math.isfinite`` raised ``OverflowError: int too large to convert to float`` on ``1`` and 400
zeros (as JSON and YAML read it) in these checks.
"""

from __future__ import annotations

import pytest

from gymcurric.errors import ConfigError
from gymcurric.tasks.pools import is_fraction
from gymcurric.tasks.regret import PLRScorer
from gymcurric.tasks.scorers import LearningProgressScorer
from gymcurric.tasks.signals import SignalConfig
from gymcurric.tasks.spaces import Span
from gymcurric.tasks.stages import StopCondition
from gymcurric.wrappers.saute import check_saute_args

BIG = 10**400
CUT = "100000000000000000000000000000000000000000000000000000000000... (401 characters)"


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: Span(0, BIG), "max"),
        (lambda: StopCondition(mean_return=BIG), "mean_return"),
        (lambda: StopCondition(success_rate=BIG), "success_rate"),
        (lambda: LearningProgressScorer(explore_z=BIG), "explore_z"),
        (lambda: PLRScorer(temperature=BIG), "temperature"),
        (lambda: check_saute_args(BIG, 0.99, 100, 0.0, "saute"), "safety_budget"),
    ],
)
def test_an_integer_too_large_for_a_float_is_refused_naming_the_key_and_the_value_cut(build, key):
    with pytest.raises(ConfigError) as info:
        build()
    assert (info.value.key, info.value.value) == (key, CUT)


def test_an_integer_too_large_for_a_float_is_no_fraction():
    assert not is_fraction(BIG) and not is_fraction(-BIG)


@pytest.mark.parametrize(
    ("kwargs", "key", "value"),
    [
        ({"return_range": (0, BIG)}, "return_range", f"(0, {CUT[:56]}... (406 characters)"),
        ({"return_range": [-BIG, 0.0]}, "return_range", f"[-{CUT[:58]}... (409 characters)"),
        ({"cost_limit": BIG}, "cost_limit", CUT),
    ],
    ids=["return_range hi", "return_range lo", "cost_limit"],
)
def test_a_signal_setting_too_large_for_a_float_is_refused_naming_it(kwargs, key, value):
    # return_range raised a raw OverflowError from math.isfinite; cost_limit, 10**400 < inf,
    # was accepted, to fail where the cost EMA is divided by it
    with pytest.raises(ConfigError, match="an integer this large does not fit a float") as info:
        SignalConfig(**kwargs)
    assert (info.value.key, info.value.value) == (key, value)
