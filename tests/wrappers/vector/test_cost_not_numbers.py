"""A cost given as text, bytes or a bool is refused by every vector reader of costs, naming
the sub-env's ``info['cost'][i]`` and the value; Python and numpy numbers are read as before."""

import math
import warnings
from functools import partial

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from gymcurric.errors import ConfigError
from gymcurric.safety.costs import read_step_costs
from gymcurric.wrappers.vector import AnnotateCost, AnnotateRisk, RecordEpisodeStatisticsWithCost

from ..cost_values import COSTS, NOT_COSTS, GivenCostEnv

READERS = {
    "AnnotateCost": lambda env: AnnotateCost(env, nonfinite="ignore"),
    "RecordEpisodeStatisticsWithCost": RecordEpisodeStatisticsWithCost,
    "AnnotateRisk": lambda env: AnnotateRisk(env, horizon=3),
}


def _step(reader, costs):
    fns = [partial(GivenCostEnv, cost) for cost in costs]
    envs = READERS[reader](SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP))
    envs.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an int array's warning (test_cost_dtype.py)
        return envs.step(np.zeros(len(costs), np.int64))


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("cost", NOT_COSTS, ids=repr)
def test_a_sub_env_cost_that_is_no_number_is_refused(reader, cost):
    if reader == "AnnotateRisk":
        pytest.importorskip("torch")
    # sub-env 0 reports a number first (a float array: Gymnasium itself converts "0.5" and
    # True then), or the value first (an object or bool array), or no cost (None in an object
    # array): refused before a missing cost is
    for costs, env in (([cost, 0.5], 0), ([None, cost], 1)):
        with pytest.raises(ConfigError, match=rf"info\['cost'\]\[{env}\]") as info:
            _step(reader, costs)
        assert type(cost).__name__.rstrip("_") in info.value.reason


@pytest.mark.parametrize("cost", COSTS, ids=repr)
def test_numbers_are_read_as_before(cost):
    infos = _step("AnnotateCost", [cost, cost])[-1]
    expected = 0.0 if math.isnan(cost) else float(cost)
    assert infos["cost"].tolist() == [expected, expected]


def test_read_step_costs_names_the_sub_env_of_the_final_info():
    infos = {
        "cost": np.array([0.5, 0.0]),
        "final_info": {
            "cost": np.array([None, "1"], dtype=object),
            "_cost": np.array([False, True]),
        },
    }
    dones = np.array([False, True])
    with pytest.raises(ConfigError, match=r"'final_info'\]\['cost'\]\[1\]\": '1'"):
        read_step_costs(infos, 2, dones, np.zeros(2, bool), True)
    infos["final_info"]["cost"][1] = 2.0
    costs, present = read_step_costs(infos, 2, dones, np.zeros(2, bool), True)
    assert costs.tolist() == [0.5, 2.0] and present.all()


def test_a_vector_cost_fn_that_returns_text_is_refused():
    envs = AnnotateCost(
        SyncVectorEnv([partial(GivenCostEnv, None)] * 2),
        cost_fn=lambda obs, actions, infos: [0.0, "0.5"],
    )
    envs.reset(seed=0)
    with pytest.raises(ConfigError, match=r"'cost_fn'.*'0\.5'.*got str at index 1"):
        envs.step(np.zeros(2, np.int64))
