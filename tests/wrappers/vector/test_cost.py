from functools import partial
from types import SimpleNamespace

import gymnasium as gym
import gymnasium.wrappers.common
import gymnasium.wrappers.vector.common
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from gymcurric.errors import (
    ConfigError,
    GymcurricWarning,
    InfoKeyConflictError,
    NonFiniteValueError,
)
from gymcurric.wrappers import RecordEpisodeStatisticsWithCost as SingleStatsWithCost
from gymcurric.wrappers.vector import AnnotateCost, RecordEpisodeStatisticsWithCost
from gymcurric.wrappers.vector.cost import AutoresetSteps
from tests.stubs import ScriptedCostEnv, make_scripted

LENGTHS = (2, 3, 5)  # episodes end at different steps in different sub-envs
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def make_vec(kind, autoreset, lengths=LENGTHS, **env_kwargs):
    fns = [partial(make_scripted, n, **env_kwargs) for n in lengths]
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=autoreset)
    return AsyncVectorEnv(fns, autoreset_mode=autoreset, context="spawn")


def expected_episode_costs(lengths, steps, mode):
    """Costs of the episodes each sub-env finishes in `steps` vector steps (reference)."""
    out = []
    for n in lengths:
        period = n + 1 if mode == AutoresetMode.NEXT_STEP else n
        out.append([0.5 * n * (n + 1) / 2] * (steps // period + (steps % period >= n)))
    return out


def check_run(envs, mode, steps=13, stats_outside=False):
    envs.reset(seed=0)
    episodes = [[] for _ in LENGTHS]
    for _ in range(steps):
        _, rewards, term, trunc, info = envs.step(np.zeros(envs.num_envs, dtype=np.int64))
        # cost and reward of the same transition stay together, in every autoreset mode
        np.testing.assert_allclose(info["cost"], 0.5 * rewards)
        assert info["_cost"].all() and info["cost"].dtype == np.float64
        for i in np.flatnonzero(term | trunc):
            assert info["_episode"][i]
            assert info["episode"]["c"][i] == pytest.approx(0.5 * info["episode"]["r"][i])
            episodes[i].append(info["episode"]["c"][i])
    assert episodes == expected_episode_costs(LENGTHS, steps, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_costs_aligned_with_rewards_and_episode_cost(kind, mode):
    envs = AnnotateCost(RecordEpisodeStatistics(make_vec(kind, mode)))
    try:
        check_run(envs, mode)
        assert len(envs.cost_queue) == sum(map(len, expected_episode_costs(LENGTHS, 13, mode)))
    finally:
        envs.close()


@pytest.mark.parametrize("mode", MODES)
def test_record_episode_statistics_with_cost_outside(mode):
    envs = RecordEpisodeStatisticsWithCost(AnnotateCost(make_vec("sync", mode)))
    check_run(envs, mode)


@pytest.mark.parametrize("mode", MODES)
def test_record_episode_statistics_with_cost_on_native_costs(mode):
    # no AnnotateCost: under SAME_STEP the final cost must be read from final_info
    envs = RecordEpisodeStatisticsWithCost(make_vec("sync", mode, reset_info_cost=True))
    envs.reset(seed=0)
    for _ in range(6):
        _, rewards, term, trunc, info = envs.step(np.zeros(3, dtype=np.int64))
        for i in np.flatnonzero(term | trunc):
            assert info["episode"]["c"][i] == pytest.approx(0.5 * info["episode"]["r"][i])


@pytest.mark.parametrize("mode", [*MODES, AutoresetMode.DISABLED])
def test_record_episode_statistics_with_cost_matches_the_single_env_wrapper(mode, monkeypatch):
    """Episode by episode, each sub-env's r/l/c/t equal the single-env wrapper's on the same
    env. Under DISABLED, a partial reset (reset_mask) used to restart every sub-env's r/l/t:
    the vector env pops reset_mask before Gymnasium's vector RecordEpisodeStatistics reads it."""
    clock = [0.0]  # both Gymnasium wrappers time episodes with time.perf_counter
    fake_time = SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr(gymnasium.wrappers.common, "time", fake_time)
    monkeypatch.setattr(gymnasium.wrappers.vector.common, "time", fake_time)
    lengths = (2, 5, 3)
    envs = RecordEpisodeStatisticsWithCost(make_vec("sync", mode, lengths))
    singles = [SingleStatsWithCost(make_scripted(n)) for n in lengths]
    envs.reset(seed=0)
    for single in singles:
        single.reset(seed=0)
    got, want = [[] for _ in lengths], [[] for _ in lengths]
    reset_steps = np.zeros(len(lengths), dtype=bool)
    for k in range(1, 30):
        clock[0] = float(k)
        *_, term, trunc, info = envs.step(np.zeros(len(lengths), dtype=np.int64))
        dones = term | trunc
        for i, single in enumerate(singles):
            if reset_steps[i]:  # NEXT_STEP: the vector env reset sub-env i in this step
                single.reset()
                continue
            *_, single_term, single_trunc, single_info = single.step(0)
            assert single_term or single_trunc or not dones[i]
            if dones[i]:
                want[i].append({key: single_info["episode"][key] for key in "rlct"})
                got[i].append({key: info["episode"][key][i] for key in "rlct"})
                if mode == AutoresetMode.SAME_STEP:
                    single.reset()
        reset_steps = dones if mode == AutoresetMode.NEXT_STEP else reset_steps
        if mode == AutoresetMode.DISABLED and dones.any():
            envs.reset(options={"reset_mask": dones})
            for i in np.flatnonzero(dones):
                singles[i].reset()
    assert got == want
    assert min(len(episodes) for episodes in want) >= 4


def test_same_step_reset_info_cost_is_not_mistaken_for_the_step_cost():
    envs = AnnotateCost(make_vec("sync", AutoresetMode.SAME_STEP, reset_info_cost=True))
    envs.reset(seed=0)
    for _ in range(6):
        _, rewards, *_, info = envs.step(np.zeros(3, dtype=np.int64))
        np.testing.assert_allclose(info["cost"], 0.5 * rewards)


def test_disabled_autoreset_with_reset_mask():
    envs = AnnotateCost(make_vec("sync", AutoresetMode.DISABLED, lengths=(2, 4)))
    envs.reset(seed=0)
    for _ in range(2):
        _, rewards, term, _, info = envs.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_allclose(info["cost"], 0.5 * rewards)
    assert term.tolist() == [True, False]
    assert list(envs.cost_queue) == [1.5]
    envs.reset(options={"reset_mask": np.array([True, False])})
    assert envs.episode_cost.tolist() == [0.0, 1.5]


def test_cost_fn_vector():
    envs = AnnotateCost(
        make_vec("sync", AutoresetMode.NEXT_STEP, mode="none"),
        cost_fn=lambda obs, actions, infos: obs[:, 0] >= 2,
    )
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(np.zeros(3, dtype=np.int64))
    assert info["cost"].tolist() == [0.0, 0.0, 0.0]
    _, _, _, _, info = envs.step(np.zeros(3, dtype=np.int64))
    assert info["cost"].tolist() == [1.0, 1.0, 1.0]
    # sub-env 0 ended at step 2: step 3 is its NEXT_STEP reset step and carries no cost
    _, _, _, _, info = envs.step(np.zeros(3, dtype=np.int64))
    assert info["cost"].tolist() == [0.0, 1.0, 1.0]


def test_cost_fn_wrong_shape():
    envs = AnnotateCost(
        make_vec("sync", AutoresetMode.NEXT_STEP, mode="none"), cost_fn=lambda *a: 0
    )
    envs.reset(seed=0)
    with pytest.raises(ConfigError, match=r"shape \(\)"):
        envs.step(np.zeros(3, dtype=np.int64))


def test_cost_fn_conflict():
    envs = AnnotateCost(make_vec("sync", AutoresetMode.NEXT_STEP), cost_fn=lambda *a: np.zeros(3))
    envs.reset(seed=0)
    with pytest.raises(InfoKeyConflictError):
        envs.step(np.zeros(3, dtype=np.int64))


def test_missing_cost_names_sub_envs():
    fns = [partial(make_scripted, 3), partial(make_scripted, 3, mode="none")]
    envs = AnnotateCost(SyncVectorEnv(fns))
    envs.reset(seed=0)
    with pytest.raises(ConfigError, match=r"sub-envs \[1\]"):
        envs.step(np.zeros(2, dtype=np.int64))


def test_nan_costs_vector():
    envs = AnnotateCost(make_vec("sync", AutoresetMode.NEXT_STEP, nan_at=(2,)))
    envs.reset(seed=0)
    envs.step(np.zeros(3, dtype=np.int64))
    with pytest.warns(GymcurricWarning, match="non-finite cost"):
        _, _, _, _, info = envs.step(np.zeros(3, dtype=np.int64))
    assert info["cost"].tolist() == [0.0, 0.0, 0.0]
    assert envs.nonfinite_count == 3

    strict = AnnotateCost(make_vec("sync", AutoresetMode.NEXT_STEP, nan_at=(1,)), nonfinite="raise")
    strict.reset(seed=0)
    with pytest.raises(NonFiniteValueError, match=r"index \[0, 1, 2\]"):
        strict.step(np.zeros(3, dtype=np.int64))


def test_works_on_make_vec_of_registered_env():
    gym.register("gymcurric-test/ScriptedV-v0", entry_point="tests.stubs:make_scripted")
    try:
        envs = AnnotateCost(gym.make_vec("gymcurric-test/ScriptedV-v0", num_envs=2))
        envs.reset(seed=0)
        assert envs.step(np.zeros(2, dtype=np.int64))[-1]["cost"].tolist() == [0.5, 0.5]
    finally:
        gym.registry.pop("gymcurric-test/ScriptedV-v0")


def test_scripted_env_is_deterministic_reference():
    env = ScriptedCostEnv(episode_len=2)
    env.reset(seed=0)
    assert env.step(0)[4]["cost"] == 0.5


@pytest.mark.parametrize("mode", [*MODES, AutoresetMode.DISABLED])
def test_autoreset_steps_marks_reset_steps_only_under_next_step(mode):
    envs = make_vec("sync", mode, lengths=(2, 2))
    steps = AutoresetSteps(envs)
    envs.close()
    assert steps.same_step == (mode == AutoresetMode.SAME_STEP)
    ended = np.array([True, False])
    dones, reset_steps = steps.begin(ended, np.array([False, True]))
    assert dones.tolist() == [True, True] and not reset_steps.any()
    steps.end(dones)
    _, reset_steps = steps.begin(np.zeros(2, bool), np.zeros(2, bool))
    next_step = mode == AutoresetMode.NEXT_STEP
    assert reset_steps.tolist() == [next_step, next_step]
    steps.reset(np.array([True, False]))  # reset(options={"reset_mask": ...})
    assert steps.prev_dones.tolist() == [False, True]
    steps.reset()
    assert not steps.prev_dones.any()
