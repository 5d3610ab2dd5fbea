"""A cost given as text or bytes is refused by every single-env reader of costs, naming
``info['cost']`` and the value; Python and numpy numbers are read as before, and a bool (an
indicator, ``info["cost"] = collided``) as 0 or 1."""

import math
import warnings

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.wrappers import (
    AnnotateCost,
    AnnotateRisk,
    EmitCostTuple,
    RecordEpisodeStatisticsWithCost,
)

from .cost_values import BOOL_COSTS, COSTS, NOT_COSTS, GivenCostEnv

READERS = {
    "AnnotateCost": lambda env: AnnotateCost(env, nonfinite="ignore"),
    "RecordEpisodeStatisticsWithCost": RecordEpisodeStatisticsWithCost,
    "EmitCostTuple": EmitCostTuple,
    "AnnotateRisk": lambda env: AnnotateRisk(env, horizon=3),
}


def _step(reader, cost):
    env = READERS[reader](GivenCostEnv(cost))
    env.reset(seed=0)
    return env.step(0)


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("cost", NOT_COSTS, ids=repr)
def test_a_cost_that_is_no_number_is_refused(reader, cost):
    if reader == "AnnotateRisk":
        pytest.importorskip("torch")
    with pytest.raises(ConfigError, match=r"info\['cost'\]") as info:
        _step(reader, cost)
    assert info.value.key == "info['cost']"
    assert type(cost).__name__.rstrip("_") in info.value.reason


@pytest.mark.parametrize("reader", ["AnnotateCost", "EmitCostTuple"])
@pytest.mark.parametrize("cost", COSTS, ids=repr)
def test_numbers_are_read_as_before(reader, cost):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _step(reader, cost)
    got = out[-1]["cost"] if reader == "AnnotateCost" else out[2]
    expected = 0.0 if reader == "AnnotateCost" and math.isnan(cost) else float(cost)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("flag", BOOL_COSTS, ids=repr)
def test_a_bool_cost_in_the_info_is_an_indicator_read_as_0_or_1(reader, flag):
    """``info["cost"] = collided``: 0 or 1, as a ``cost_fn``'s bool (d381ee8 refused it)."""
    if reader == "AnnotateRisk":
        pytest.importorskip("torch")
    env = READERS[reader](GivenCostEnv(flag))
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: a bool is a cost
        out = [env.step(0) for _ in range(3)][-1]
    if reader == "AnnotateCost":
        assert out[-1]["cost"] == float(flag) and type(out[-1]["cost"]) is float
    elif reader == "EmitCostTuple":
        assert out[2] == float(flag) and type(out[2]) is float
    elif reader == "RecordEpisodeStatisticsWithCost":
        assert env.episode_cost == 3 * float(flag) and type(env.episode_cost) is float
    else:  # the risk head learns from 0 or 1: the risks of a float cost, bit for bit
        number = READERS[reader](GivenCostEnv(float(flag)))
        number.reset(seed=0)
        assert out[-1]["risk"] == [number.step(0) for _ in range(3)][-1][-1]["risk"]


def test_a_cost_fn_that_returns_text_is_refused():
    env = AnnotateCost(GivenCostEnv(None), cost_fn=lambda obs, action, info: "0.5")
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"AnnotateCost.*'cost_fn'.*'0\.5'.*got str"):
        env.step(0)


@pytest.mark.parametrize("flag", [True, np.bool_(True), False])
def test_a_cost_fn_may_return_a_bool_an_indicator(flag):
    """As documented (``cost_fn=lambda obs, action, info: abs(obs[0]) > 1.0``): 0 or 1."""
    env = AnnotateCost(GivenCostEnv(None), cost_fn=lambda obs, action, info: flag)
    env.reset(seed=0)
    assert env.step(0)[-1]["cost"] == float(flag)
