"""Vector ``info["cost"]`` typed int by Gymnasium: every reader of vector costs warns, once."""

import warnings
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from gymcurric.errors import GymcurricWarning
from gymcurric.safety import costs as costs_module
from gymcurric.safety.costs import check_vector_cost_dtype
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import AnnotateCost as SingleAnnotateCost
from gymcurric.wrappers.vector import AnnotateCost, make_curriculum_vec

from .vector_runs import STUB


class ConstCostEnv(gym.Env[np.ndarray, int]):
    """3-step episodes whose every step reports ``info["cost"] = cost`` exactly as given."""

    def __init__(self, cost: Any) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.cost, self.t = cost, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int):
        self.t += 1
        return np.zeros(1, np.float32), 0.0, self.t >= 3, False, {"cost": self.cost}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test starts with no reader having warned (the check warns once per process)."""
    monkeypatch.setattr(costs_module, "_DTYPE_WARNED", set())


def _mixed(wrap_single=False):
    fns = [partial(ConstCostEnv, 0), partial(ConstCostEnv, 0.5)]  # int first, then a float
    if wrap_single:
        fns = [lambda f=f: SingleAnnotateCost(f()) for f in fns]
    return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)


def test_mixed_int_and_float_costs_lose_the_fraction_and_the_reader_says_so():
    envs = AnnotateCost(_mixed())
    envs.reset(seed=0)
    with pytest.warns(GymcurricWarning, match=r"vector\.AnnotateCost: .*int64 array") as rec:
        _, _, _, _, infos = envs.step(np.zeros(2, dtype=np.int64))
    assert len(rec) == 1
    assert infos["cost"].tolist() == [0.0, 0.0]  # Gymnasium truncated sub-env 1's 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per reader and process
        envs.step(np.zeros(2, dtype=np.int64))
    envs.close()


def test_sub_envs_in_annotate_cost_report_floats_and_nothing_is_lost():
    envs = AnnotateCost(_mixed(wrap_single=True))
    envs.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, _, _, _, infos = envs.step(np.zeros(2, dtype=np.int64))
    assert infos["cost"].tolist() == [0.0, 0.5]
    envs.close()


@pytest.mark.parametrize(
    ("values", "warns"),
    [
        (np.zeros(2, np.int64), True),
        (np.zeros(2, bool), True),
        (np.zeros(2, np.uint8), True),
        (np.zeros(2, np.float32), False),
        (np.zeros(2, np.float64), False),
        (np.array([0, 0.5], dtype=object), False),  # objects keep their values
        ([0, 1], False),  # not an array from a vector env: nothing to say
    ],
)
def test_check_warns_for_integer_and_bool_arrays_only(values, warns):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        check_vector_cost_dtype(values, "reader")
    assert len(rec) == int(warns)
    if warns:
        assert issubclass(rec[0].category, GymcurricWarning)
        assert str(rec[0].message).startswith("reader: ")


def test_each_reader_warns_once_by_its_own_name():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            check_vector_cost_dtype(np.zeros(2, np.int64), "a")
            check_vector_cost_dtype(np.zeros(2, np.int64), "b")
    assert [str(w.message)[:2] for w in rec] == ["a:", "b:"]


@pytest.mark.filterwarnings("ignore:.*(Worker|exception|Traceback).*:UserWarning")
def test_the_curriculum_accounting_in_main_warns_by_name():
    cur = Curriculum(FixedTaskSpace([{"level": 2, "len": 2, "cost": 0}]), seed=0, backend="shared")
    envs = make_curriculum_vec(
        STUB, cur, 2, vectorization_mode="async", vector_kwargs={"context": "fork"}
    )
    try:
        envs.reset(seed=0)
        with pytest.warns(GymcurricWarning, match=r"vector\.SampleCurriculumTask: .*int64 array"):
            envs.step(np.zeros(2, dtype=np.int64))
            envs.step(np.zeros(2, dtype=np.int64))
    finally:
        envs.close()
        cur.close()
