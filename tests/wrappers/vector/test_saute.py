import math
import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import ConfigError, GymcurricWarning, InfoKeyConflictError
from gymcurric.wrappers.saute import AugmentStateSaute as SingleSaute
from gymcurric.wrappers.vector.saute import AugmentStateSaute
from tests.stubs import make_scripted
from tests.wrappers.cost_envs import CostAt

ENV_ID = "gymcurric/HazardGrid-v0"
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]
KW = {"safety_budget": 2.0, "saute_gamma": 0.95, "max_episode_steps": 12, "unsafe_reward": -0.5}
TASK = {"size": 5, "num_hazards": 8, "max_steps": 12, "goal_distance": 3}


def make_env():
    return gym.make(ENV_ID, **TASK)  # the constructor's task is the default at every reset


def twin_and_reference(mode, vec):
    """The vector twin over plain sub-envs, and the single wrapper inside every sub-env."""
    cls = SyncVectorEnv if vec == "sync" else AsyncVectorEnv
    twin = AugmentStateSaute(cls([make_env] * 3, autoreset_mode=mode), **KW)
    ref = cls([lambda: SingleSaute(make_env(), **KW)] * 3, autoreset_mode=mode)
    return twin, ref


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vec", ["sync", "async"])
def test_equals_the_single_wrapper_in_every_sub_env(mode, vec):
    twin, ref = twin_and_reference(mode, vec)
    assert twin.single_observation_space == ref.single_observation_space
    assert twin.observation_space == ref.observation_space
    o1, i1 = twin.reset(seed=3)
    o2, _ = ref.reset(seed=3)
    np.testing.assert_array_equal(o1, o2)
    assert i1["saute_state"].tolist() == [1.0, 1.0, 1.0]
    rng = np.random.default_rng(0)
    unsafe = ended = 0
    for _ in range(60):
        a = rng.integers(0, 4, size=3)
        o1, r1, t1, u1, i1 = twin.step(a)
        o2, r2, t2, u2, i2 = ref.step(a)
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        assert (t1 == t2).all() and (u1 == u2).all()
        assert twin.observation_space.contains(o1)
        dones = t1 | u1
        ended += int(dones.sum())
        unsafe += int((r1 == -0.5).sum())
        # info: the z of this transition; the reference has it in final_info where one ended
        z_ref = np.asarray(i2["saute_state"], float)
        if mode == AutoresetMode.SAME_STEP and dones.any():
            fz = i2["final_info"]["saute_state"]
            z_ref = np.where(dones, np.asarray(fz, float), z_ref)
            for i in np.flatnonzero(dones):  # final observations carry the final budget
                np.testing.assert_array_equal(i1["final_obs"][i], i2["final_obs"][i])
        np.testing.assert_allclose(i1["saute_state"], z_ref)
    twin.close()
    ref.close()
    assert ended >= 6 and unsafe > 0  # episodes ended and some budgets were spent


def test_disabled_mode_resets_masked_budgets():
    base = SyncVectorEnv([make_scripted] * 2, autoreset_mode=AutoresetMode.DISABLED)
    envs = AugmentStateSaute(base, 4.0, saute_gamma=1.0, max_episode_steps=5)
    envs.reset(seed=0)
    envs.step(np.zeros(2, np.int64))  # cost 0.5 each
    _, _, _, _, info = envs.step(np.zeros(2, np.int64))  # cost 1.0 each
    np.testing.assert_allclose(info["saute_state"], [1 - 1.5 / 4] * 2)
    obs, info = envs.reset(options={"reset_mask": np.array([True, False])})
    assert envs.z.tolist() == [1.0, 1 - 1.5 / 4] and info["saute_state"].tolist() == [1.0, 0.625]
    assert obs[:, -1].tolist() == [1.0, 0.625]
    envs.close()


def test_missing_cost_names_the_sub_envs():
    envs = AugmentStateSaute(
        SyncVectorEnv([partial(make_scripted, mode="none")] * 2), 1.0, max_episode_steps=5
    )
    envs.reset()
    with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] reported no cost"):
        envs.step(np.zeros(2, np.int64))


def test_info_key_conflict():
    envs = AugmentStateSaute(
        SyncVectorEnv([lambda: SingleSaute(make_scripted(), 1.0, max_episode_steps=5)] * 2),
        1.0,
        max_episode_steps=5,
    )
    with pytest.raises(InfoKeyConflictError, match="saute_state"):
        envs.reset()


def test_arguments_are_validated():
    base = SyncVectorEnv([make_scripted] * 2)
    with pytest.raises(ConfigError, match="max_episode_steps"):
        AugmentStateSaute(base, 1.0)  # the scripted env has no spec
    with pytest.raises(ConfigError, match="saute_gamma"):
        AugmentStateSaute(base, 1.0, saute_gamma=2.0, max_episode_steps=5)
    envs = AugmentStateSaute(base, 1.0, max_episode_steps=5, unsafe_reward=-2.0)
    assert envs.unsafe_reward == -2.0


@pytest.mark.parametrize("mode", MODES)
def test_nonfinite_costs_are_sanitised_as_the_single_wrapper_does(mode):
    # issue 21: a NaN cost must never reach the observation (the single wrapper's twin test is
    # in tests/wrappers/test_saute.py)
    kw = {"safety_budget": 4.0, "saute_gamma": 1.0, "max_episode_steps": 4}
    bad = [partial(lambda v: CostAt(make_scripted(4), v, (2,)), v)
           for v in (math.nan, math.inf, -math.inf)]  # fmt: skip
    twin = AugmentStateSaute(SyncVectorEnv(bad, autoreset_mode=mode), **kw)
    ref = SyncVectorEnv(
        [partial(lambda f: SingleSaute(f(), nonfinite="ignore", **kw), f) for f in bad],
        autoreset_mode=mode,
    )
    twin.reset(seed=0)
    ref.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(10):
            o1, r1, *_, i1 = twin.step(np.zeros(3, np.int64))
            o2, r2, *_ = ref.step(np.zeros(3, np.int64))
            assert np.isfinite(o1).all() and np.isfinite(i1["saute_state"]).all()
            np.testing.assert_array_equal(o1, o2)
            np.testing.assert_array_equal(r1, r2)
    # the second step of each episode: at steps 2 and 7 (NEXT_STEP: a reset step after each
    # episode), or 2, 6 and 10 (SAME_STEP), in each of the 3 sub-envs
    assert twin.nonfinite_count == 3 * (2 if mode == AutoresetMode.NEXT_STEP else 3)
    warned = [w for w in caught if issubclass(w.category, GymcurricWarning)]
    assert len(warned) == 1 and "non-finite cost" in str(warned[0].message)
    twin.close()
    ref.close()
