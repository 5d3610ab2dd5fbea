import math

import gymnasium as gym
import numpy as np
import pytest

from gymcurric.errors import (
    ConfigError,
    GymcurricWarning,
    InfoKeyConflictError,
    NonFiniteValueError,
)
from gymcurric.wrappers import AnnotateCost, EmitCostTuple, RecordEpisodeStatisticsWithCost
from tests.stubs import ScriptedCostEnv


def run_episode(env, seed=0):
    env.reset(seed=seed)
    steps = []
    while True:
        out = env.step(0)
        steps.append(out)
        if out[-3] or out[-2]:
            return steps


@pytest.mark.parametrize("mode", ["info", "tuple"])
def test_cost_in_info_every_step(mode):
    env = AnnotateCost(ScriptedCostEnv(episode_len=4, mode=mode))
    steps = run_episode(env)
    assert all(len(s) == 5 for s in steps)
    assert [s[4]["cost"] for s in steps] == [0.5, 1.0, 1.5, 2.0]
    assert all(isinstance(s[4]["cost"], float) for s in steps)
    assert list(env.cost_queue) == [5.0]


def test_episode_cost_added_to_inner_episode_statistics():
    env = AnnotateCost(gym.wrappers.RecordEpisodeStatistics(ScriptedCostEnv(episode_len=4)))
    for _ in range(2):
        info = run_episode(env)[-1][4]
        assert info["episode"]["r"] == 10.0
        assert info["episode"]["c"] == 5.0  # reset between episodes


def test_record_episode_statistics_with_cost_outside():
    env = RecordEpisodeStatisticsWithCost(
        AnnotateCost(ScriptedCostEnv(episode_len=3, mode="tuple"))
    )
    info = run_episode(env)[-1][4]
    assert info["episode"]["c"] == 3.0
    assert info["episode"]["r"] == 6.0
    assert sorted(info["episode"]) == ["c", "l", "r", "t"]
    assert list(env.cost_queue) == [3.0]


def test_record_episode_statistics_with_cost_needs_a_cost():
    env = RecordEpisodeStatisticsWithCost(ScriptedCostEnv(mode="none"))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="cost_fn"):
        env.step(0)


def test_cost_fn_for_env_without_cost():
    seen = []

    def cost_fn(obs, action, info):
        seen.append((float(obs[0]), action))
        return obs[0] >= 2

    env = AnnotateCost(ScriptedCostEnv(episode_len=3, mode="none"), cost_fn=cost_fn)
    steps = run_episode(env)
    assert [s[4]["cost"] for s in steps] == [0.0, 1.0, 1.0]
    assert seen == [(1.0, 0), (2.0, 0), (3.0, 0)]


def test_cost_fn_refuses_to_overwrite_existing_cost():
    env = AnnotateCost(ScriptedCostEnv(mode="info"), cost_fn=lambda o, a, i: 0.0)
    env.reset(seed=0)
    with pytest.raises(InfoKeyConflictError, match="'cost'"):
        env.step(0)


def test_tuple_and_info_cost_conflict():
    class Both(ScriptedCostEnv):
        def step(self, action):
            obs, r, c, te, tr, info = super().step(action)
            info["cost"] = c
            return obs, r, c, te, tr, info

    env = AnnotateCost(Both(mode="tuple"))
    env.reset(seed=0)
    with pytest.raises(InfoKeyConflictError, match="6-tuple"):
        env.step(0)


def test_missing_cost_is_a_clear_error():
    env = AnnotateCost(ScriptedCostEnv(mode="none"))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="cost_fn") as err:
        env.step(0)
    assert "ScriptedCostEnv" in str(err.value)


def test_bad_tuple_length():
    class Four(ScriptedCostEnv):
        def step(self, action):
            return super().step(action)[:4]

    env = AnnotateCost(Four())
    env.reset(seed=0)
    with pytest.raises(Exception, match="4-tuple"):
        env.step(0)


def test_nan_cost_warned_once_counted_and_replaced():
    env = AnnotateCost(ScriptedCostEnv(episode_len=5, nan_at=(2, 4)))
    env.reset(seed=0)
    with pytest.warns(GymcurricWarning, match="non-finite cost") as record:
        costs = [env.step(0)[4]["cost"] for _ in range(5)]
    assert len(record) == 1
    assert costs == [0.5, 0.0, 1.5, 0.0, 2.5]
    assert env.nonfinite_count == 2
    assert list(env.cost_queue) == [4.5]


def test_nan_cost_custom_replacement_and_ignore():
    env = AnnotateCost(ScriptedCostEnv(nan_at=(1,)), nonfinite="ignore", nonfinite_value=1.0)
    env.reset(seed=0)
    assert env.step(0)[4]["cost"] == 1.0
    assert env.nonfinite_count == 1


def test_nan_cost_raise_keeps_state():
    env = AnnotateCost(ScriptedCostEnv(nan_at=(2,)), nonfinite="raise")
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(NonFiniteValueError, match="nan"):
        env.step(0)
    assert env.episode_cost == 0.5  # what was accumulated before is kept


def test_inf_cost_guarded():
    class Inf(ScriptedCostEnv):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            info["cost"] = math.inf
            return obs, r, te, tr, info

    env = AnnotateCost(Inf(), nonfinite="ignore")
    env.reset(seed=0)
    assert env.step(0)[4]["cost"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"nonfinite": "skip"}, "nonfinite"),
        ({"nonfinite_value": float("nan")}, "nonfinite_value"),
        ({"cost_fn": 3}, "cost_fn"),
    ],
)
def test_bad_arguments_name_key_and_value(kwargs, key):
    with pytest.raises(ConfigError) as err:
        AnnotateCost(ScriptedCostEnv(), **kwargs)
    assert err.value.key == key
    assert repr(next(iter(kwargs.values())))[:3] in str(err.value)


def test_emit_cost_tuple_round_trip():
    six = ScriptedCostEnv(episode_len=3, mode="tuple")
    env = EmitCostTuple(AnnotateCost(ScriptedCostEnv(episode_len=3, mode="tuple")))
    six.reset(seed=0)
    env.reset(seed=0)
    for _ in range(3):
        a, b = six.step(0), env.step(0)
        assert len(b) == 6
        assert a[1:5] == b[1:5]
        assert b[5]["cost"] == b[2]


def test_emit_cost_tuple_needs_cost():
    env = EmitCostTuple(ScriptedCostEnv(mode="none"))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="cost_fn"):
        env.step(0)


def test_annotate_cost_spec_round_trip():
    gym.register("gymcurric-test/Scripted-v0", entry_point="tests.stubs:make_scripted")
    try:
        env = AnnotateCost(gym.make("gymcurric-test/Scripted-v0"), nonfinite="raise")
        rebuilt = gym.make(env.spec)
        assert isinstance(rebuilt, AnnotateCost)
        assert rebuilt._guard.policy == "raise"
    finally:
        gym.registry.pop("gymcurric-test/Scripted-v0")


def test_cost_queue_length():
    env = AnnotateCost(ScriptedCostEnv(episode_len=1), queue_length=3)
    for _ in range(5):
        run_episode(env)
    assert list(env.cost_queue) == [0.5, 0.5, 0.5]
    assert np.isclose(sum(env.cost_queue), 1.5)


def test_a_queue_length_no_deque_takes_is_a_config_error():
    for bad in (10**400, -1, 2.0, "5", True):
        with pytest.raises(ConfigError, match="'queue_length'"):
            AnnotateCost(gym.make("CartPole-v1"), cost_fn=lambda o, a, i: 0.0, queue_length=bad)


def test_a_queue_length_of_none_keeps_every_episode_cost():
    # deque(maxlen=None) has no limit: None worked before queue_length was checked, and still does
    env = AnnotateCost(ScriptedCostEnv(episode_len=1), queue_length=None)
    for _ in range(150):
        run_episode(env)
    assert len(env.cost_queue) == 150
    vec = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    from gymcurric.wrappers.vector import AnnotateCost as VecAnnotateCost

    assert VecAnnotateCost(vec, cost_fn=lambda o, a, i: 0.0, queue_length=None) is not None
    vec.close()
