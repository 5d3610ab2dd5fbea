"""A cost given as text or bytes is refused by every vector reader of costs, naming the
sub-env's ``info['cost'][i]`` and the value; Python and numpy numbers are read as before, and
bools (indicators) as 0 and 1: a bool array, as an int array, with one warning."""

import math
import warnings
from functools import partial

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.safety import costs as costs_module
from gymcurric.safety.costs import read_step_costs
from gymcurric.wrappers.vector import AnnotateCost, AnnotateRisk, RecordEpisodeStatisticsWithCost

from ..cost_values import BOOL_COSTS, COSTS, NOT_COSTS, GivenCostEnv

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


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_bool_array_is_read_as_0_and_1_with_the_int_arrays_warning(reader, monkeypatch):
    """Sub-env 0 reports a bool first: Gymnasium makes the array bool and sub-env 1's 0.5 True.

    Read as 1 with one warning per reader, as an int array is (d381ee8 refused it).
    """
    if reader == "AnnotateRisk":
        pytest.importorskip("torch")
    monkeypatch.setattr(costs_module, "_DTYPE_WARNED", set())  # each reader warns once a process
    fns = [partial(GivenCostEnv, cost) for cost in (True, 0.5)]
    envs = READERS[reader](SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP))
    envs.reset(seed=0)
    with pytest.warns(GymcurricWarning, match=r": the vector env's info\['cost'\] is a bool array"):
        infos = envs.step(np.zeros(2, np.int64))[-1]
    if reader == "AnnotateCost":
        assert infos["cost"].tolist() == [1.0, 1.0]  # Gymnasium turned the 0.5 into True
    elif reader == "RecordEpisodeStatisticsWithCost":
        assert envs._cost_tracker.running.tolist() == [1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per reader and process
        envs.step(np.zeros(2, np.int64))


@pytest.mark.parametrize("flag", BOOL_COSTS, ids=repr)
def test_a_bool_cost_is_read_as_0_or_1(flag, monkeypatch):
    monkeypatch.setattr(costs_module, "_DTYPE_WARNED", set())
    # a float array (a number first) or an object array (a numpy bool first): no warning
    for costs in ([0.5, flag], [flag, 0.5]) if not isinstance(flag, bool) else ([0.5, flag],):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            infos = _step("AnnotateCost", costs)[-1]
        assert infos["cost"].tolist() == [float(c) for c in costs]
    infos = {"cost": np.array([flag, False]), "_cost": np.array([True, False])}
    with pytest.warns(GymcurricWarning, match="bool array"):
        read = read_step_costs(infos, 2, np.zeros(2, bool), np.zeros(2, bool), False, source="r")
    assert read[0].tolist() == [float(flag), 0.0] and read[1].tolist() == [True, False]


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
