import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import (
    ConfigError,
    GymcurricWarning,
    InfoKeyConflictError,
    NonFiniteValueError,
)
from gymcurric.wrappers import AnnotateCost
from gymcurric.wrappers.saute import AugmentStateSaute, saute_step_budget
from tests.stubs import ScriptedCostEnv
from tests.wrappers.cost_envs import CostAt


def reference(costs, rewards, d, gamma, T, unsafe):
    """Sauté RL by hand: z_{t+1} = (z_t - c_t / b) / gamma, reward replaced while z <= 0."""
    b = d * (1 - gamma**T) / ((1 - gamma) * T) if gamma < 1 else d
    z, zs, rs = 1.0, [], []
    for c, r in zip(costs, rewards, strict=True):
        z = (z - c / b) / gamma
        zs.append(z)
        rs.append(r if z > 0 else unsafe)
    return zs, rs


def test_step_budget_formula():
    # OmniSafe's Safety-Gymnasium defaults: d = 25, gamma_s = 0.999, T = 1000
    assert saute_step_budget(25.0, 0.999, 1000) == pytest.approx(25 * (1 - 0.999**1000) / 1.0)
    assert saute_step_budget(25.0, 1.0, 1000) == 25.0
    assert saute_step_budget(10.0, 0.99, 100) == pytest.approx(10 * 0.6339676587, rel=1e-9)


@pytest.mark.parametrize("gamma", [1.0, 0.99, 0.9])
def test_safety_state_and_rewards_match_the_formula(gamma):
    # ScriptedCostEnv: reward t and cost t/2 at step t (1, 2, ...): the budget runs out mid-way
    env = AugmentStateSaute(
        ScriptedCostEnv(episode_len=8), safety_budget=6.0, saute_gamma=gamma,
        max_episode_steps=8, unsafe_reward=-3.0,
    )  # fmt: skip
    obs, info = env.reset(seed=0)
    assert obs.tolist() == [0.0, 1.0] and info["saute_state"] == 1.0
    zs, rs, obs_z = [], [], []
    for _ in range(8):
        obs, r, term, trunc, info = env.step(0)
        zs.append(info["saute_state"])
        obs_z.append(float(obs[-1]))
        rs.append(r)
    ref_z, ref_r = reference([t / 2 for t in range(1, 9)], list(range(1, 9)), 6.0, gamma, 8, -3.0)
    np.testing.assert_allclose(zs, ref_z)
    np.testing.assert_allclose(obs_z, np.clip(np.float32(ref_z), -1, gamma**-8), rtol=1e-6)
    assert min(zs) < -1 and min(obs_z) == -1.0  # observed z clipped, info keeps the value
    assert rs == ref_r
    assert rs[0] == 1 and rs[-1] == -3.0  # safe at first, unsafe once spent, and it stays
    assert term
    obs, info = env.reset()
    assert float(obs[-1]) == 1.0 and env.z == 1.0  # a new episode has the whole budget


def test_gamma_one_is_the_plain_remaining_share():
    env = AugmentStateSaute(ScriptedCostEnv(episode_len=3), safety_budget=10.0, saute_gamma=1.0,
                      max_episode_steps=3)  # fmt: skip
    env.reset()
    got = [env.step(0)[4]["saute_state"] for _ in range(3)]
    np.testing.assert_allclose(got, [1 - 0.5 / 10, 1 - 1.5 / 10, 1 - 3.0 / 10])


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_observation_space_and_check_env():
    env = AugmentStateSaute(
        gym.make("gymcurric/HazardGrid-v0"), safety_budget=5.0, max_episode_steps=100
    )
    inner = env.env.observation_space
    assert env.observation_space.shape == (inner.shape[0] + 1,)
    assert env.observation_space.dtype == inner.dtype
    assert env.observation_space.low[-1] == -1.0
    assert env.observation_space.high[-1] == pytest.approx(0.999**-100)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_dict_observations_get_a_key():
    class DictEnv(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = gym.spaces.Dict({"x": env.observation_space})

        def observation(self, obs):
            return {"x": obs}

    env = AugmentStateSaute(DictEnv(ScriptedCostEnv()), safety_budget=2.0, max_episode_steps=5)
    obs, _ = env.reset()
    assert set(obs) == {"x", "saute_state"} and obs["saute_state"].tolist() == [1.0]
    obs, *_ = env.step(0)
    assert env.observation_space.contains(obs)
    assert obs["saute_state"][0] == pytest.approx(env.z)


def test_unsupported_observation_space():
    with pytest.raises(ConfigError, match="observation_space"):
        AugmentStateSaute(gym.make("FrozenLake-v1"), safety_budget=1.0)


def test_missing_cost_is_a_clear_error():
    env = AugmentStateSaute(ScriptedCostEnv(mode="none"), safety_budget=1.0, max_episode_steps=5)
    env.reset()
    with pytest.raises(ConfigError, match=r"info\['cost'\].*AnnotateCost"):
        env.step(0)
    # with AnnotateCost's cost_fn it works
    ok = AugmentStateSaute(
        AnnotateCost(gym.make("CartPole-v1"), cost_fn=lambda o, a, i: 0.25), safety_budget=1.0
    )
    ok.reset(seed=0)
    assert ok.step(0)[4]["saute_state"] == pytest.approx((1 - 0.25 / ok.step_budget) / 0.999)


def test_default_horizon_from_the_spec():
    env = AugmentStateSaute(
        AnnotateCost(gym.make("CartPole-v1"), cost_fn=lambda o, a, i: 0.0), 25.0
    )
    assert env.max_episode_steps == 500
    with pytest.raises(ConfigError, match="max_episode_steps"):
        AugmentStateSaute(ScriptedCostEnv(), safety_budget=1.0)  # no spec, no horizon


def test_info_key_conflict():
    class Sets(gym.Wrapper):
        def step(self, action):
            obs, r, term, trunc, info = self.env.step(action)
            return obs, r, term, trunc, {**info, "saute_state": 0}

    env = AugmentStateSaute(Sets(ScriptedCostEnv()), safety_budget=1.0, max_episode_steps=5)
    env.reset()
    with pytest.raises(InfoKeyConflictError, match="saute_state"):
        env.step(0)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"safety_budget": 0.0}, "safety_budget"),
        ({"safety_budget": math.inf}, "safety_budget"),
        ({"saute_gamma": 0.0}, "saute_gamma"),
        ({"saute_gamma": 1.5}, "saute_gamma"),
        ({"max_episode_steps": 0}, "max_episode_steps"),
        ({"max_episode_steps": 2.5}, "max_episode_steps"),
        ({"unsafe_reward": "low"}, "unsafe_reward"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, key):
    kw = {"safety_budget": 1.0, "max_episode_steps": 5, **kwargs}
    with pytest.raises(ConfigError, match=key):
        AugmentStateSaute(ScriptedCostEnv(), **kw)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_costs_are_sanitised_as_annotate_cost_does(bad):
    # issue 21: a NaN cost passed to AugmentStateSaute reached the observation
    kw = {"safety_budget": 6.0, "saute_gamma": 1.0, "max_episode_steps": 5}
    env = AugmentStateSaute(CostAt(ScriptedCostEnv(episode_len=5), bad, at=(2, 3)), **kw)
    env.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps = [env.step(0) for _ in range(5)]
    obs_z = [float(s[0][-1]) for s in steps]
    zs = [s[4]["saute_state"] for s in steps]
    assert all(math.isfinite(v) for v in obs_z + zs), (obs_z, zs)
    # the non-finite costs count as AnnotateCost's nonfinite_value (0.0)
    ref_z, _ = reference([0.5, 0.0, 0.0, 2.0, 2.5], [1, 2, 3, 4, 5], 6.0, 1.0, 5, -1.0)
    np.testing.assert_allclose(zs, ref_z)
    assert env.nonfinite_count == 2
    warned = [w for w in caught if issubclass(w.category, GymcurricWarning)]
    assert len(warned) == 1 and "non-finite cost" in str(warned[0].message)  # once


def test_nonfinite_options_match_annotate_cost():
    kw = {"safety_budget": 6.0, "saute_gamma": 1.0, "max_episode_steps": 5}
    env = AugmentStateSaute(CostAt(ScriptedCostEnv(), math.nan, at=(1,)), nonfinite="ignore",
                      nonfinite_value=3.0, **kw)  # fmt: skip
    env.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "ignore": no warning
        assert env.step(0)[4]["saute_state"] == pytest.approx(1 - 3.0 / 6.0)
    strict = AugmentStateSaute(
        CostAt(ScriptedCostEnv(), math.inf, at=(1,)), nonfinite="raise", **kw
    )
    strict.reset()
    with pytest.raises(NonFiniteValueError, match="non-finite cost"):
        strict.step(0)
    with pytest.raises(ConfigError, match="nonfinite"):
        AugmentStateSaute(ScriptedCostEnv(), nonfinite="zero", **kw)
    with pytest.raises(ConfigError, match="nonfinite_value"):
        AugmentStateSaute(ScriptedCostEnv(), nonfinite_value=math.nan, **kw)
