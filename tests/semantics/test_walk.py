"""probe_states_from_walk: captions of a seeded random walk, labelled by the costs that follow.

Real envs throughout: HazardNav (a bounded float Box) and HazardGrid (Discrete) write
``info["caption"]`` and ``info["cost"]``; CartPole writes neither.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.errors import ConfigError
from gymcurric.semantics import ProbeWalk, ShapingConfig, probe_states_from_walk

HAZARDS = {"num_hazards": 12, "hazard_radius": 0.25, "hazard_placement": "random"}


@pytest.fixture
def nav():
    env = gym.make("gymcurric/HazardNav-v0", **HAZARDS)
    yield env
    env.close()


def replay(env, walk: ProbeWalk) -> tuple[list[str], list[float], list[int]]:
    """The walk's steps redone by hand: the documented actions, resets and labels' inputs."""
    rng = np.random.default_rng(walk.seed)
    space = env.action_space
    captions, costs, episodes = [], [], []
    env.reset(seed=walk.seed)
    ep = 0
    for k in range(len(walk.captions)):
        if k % walk.hold == 0:
            action = rng.uniform(space.low, space.high).astype(np.float32).astype(space.dtype)
        _, _, terminated, truncated, info = env.step(action)
        captions.append(info["caption"])
        costs.append(info["cost"])
        episodes.append(ep)
        if terminated or truncated:
            ep += 1
            env.reset(seed=walk.seed + ep)
    return captions, costs, episodes


def test_the_labels_are_the_costs_now_and_within_the_horizon_of_the_same_episode(nav):
    walk = probe_states_from_walk(nav, steps=600, horizon=7, seed=4, hold=5)
    captions, costs, episodes = replay(nav, walk)
    assert list(walk.captions) == captions
    assert list(walk.unsafe_now) == [c > 0 for c in costs]
    soon = [
        any(costs[j] > 0 and episodes[j] == episodes[k] for j in range(k, min(k + 7, 600)))
        for k in range(600)
    ]
    assert list(walk.unsafe_soon) == soon
    assert (walk.episodes, walk.horizon, walk.seed, walk.hold) == (episodes[-1] + 1, 7, 4, 5)
    # the walk met hazards and crossed episodes (so the boundaries were exercised)
    assert 0 < sum(walk.unsafe_now) < sum(walk.unsafe_soon) < 600 and walk.episodes > 1


def test_the_same_seed_gives_the_same_walk_and_another_seed_another(nav):
    first = probe_states_from_walk(nav, steps=400, seed=11)
    again = probe_states_from_walk(gym.make("gymcurric/HazardNav-v0", **HAZARDS), 400, seed=11)
    assert first == again
    assert probe_states_from_walk(nav, steps=400, seed=12).captions != first.captions


def test_horizon_one_is_now_and_a_long_horizon_never_crosses_an_episode(nav):
    one = probe_states_from_walk(nav, steps=300, horizon=1, seed=2)
    assert one.unsafe_soon == one.unsafe_now
    long = probe_states_from_walk(nav, steps=300, horizon=10_000, seed=2)
    _, costs, episodes = replay(nav, long)
    for k in range(300):
        rest = [costs[j] > 0 for j in range(k, 300) if episodes[j] == episodes[k]]
        assert long.unsafe_soon[k] == any(rest)


def test_a_discrete_env_is_walked_too_and_leaves_its_action_space_alone():
    env = gym.make("gymcurric/HazardGrid-v0")
    env.action_space.seed(5)
    expected = env.action_space.sample()
    env.action_space.seed(5)
    walk = probe_states_from_walk(env, steps=200, horizon=3, seed=1, hold=2)
    assert walk == probe_states_from_walk(env, steps=200, horizon=3, seed=1, hold=2)
    assert env.action_space.sample() == expected  # its own generator was not drawn from
    assert len(walk.captions) == 200 and all(isinstance(c, str) for c in walk.captions)


def test_the_walk_feeds_the_shaping_config(nav):
    walk = probe_states_from_walk(nav, steps=500, seed=3)
    cfg = ShapingConfig(**walk.shaping_kwargs())
    assert cfg.probe_states == walk.captions and cfg.probe_unsafe == walk.unsafe_soon


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("steps", 0),
        ("steps", 2.0),
        ("steps", True),
        ("horizon", 0),
        ("horizon", "10"),
        ("hold", 0),
        ("hold", -1),
        ("seed", -1),
        ("seed", None),
    ],
)
def test_out_of_range_arguments_are_refused_by_name(nav, name, value):
    kwargs = {"steps": 10, "horizon": 2, "seed": 0, "hold": 1, name: value}
    with pytest.raises(ConfigError, match=rf"invalid value for '{name}': {value!r} \(expected"):
        probe_states_from_walk(nav, **kwargs)


def test_numpy_ints_are_taken(nav):
    walk = probe_states_from_walk(nav, np.int64(20), np.int32(3), np.int64(7), np.int8(4))
    assert walk == probe_states_from_walk(nav, 20, 3, 7, 4)
    assert type(walk.horizon) is int and type(walk.seed) is int


def test_an_env_without_captions_is_named_with_the_missing_key():
    env = gym.make("CartPole-v1")
    with pytest.raises(ConfigError, match=r"'env': 'CartPole-v1' \(its step info has no 'caption'"):
        probe_states_from_walk(env, steps=5)


class DropInfo(gym.Wrapper):
    """HazardNav with one info key removed or replaced, as an env that writes it wrong."""

    def __init__(self, env, key, value=None, drop=True):
        super().__init__(env)
        self.key, self.value, self.drop = key, value, drop

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        if self.drop:
            del info[self.key]
        else:
            info[self.key] = self.value
        return obs, reward, terminated, truncated, info


def test_an_env_without_costs_is_named_with_the_missing_key(nav):
    with pytest.raises(
        ConfigError, match=r"'gymcurric/HazardNav-v0' \(its step info has no 'cost'"
    ):
        probe_states_from_walk(DropInfo(nav, "cost"), steps=5)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("caption", "", r"\"info\['caption'\]\": '' \(expected a non-empty str"),
        ("caption", 3, r"\"info\['caption'\]\": 3 \(expected a non-empty str"),
        ("cost", "0.5", r"\"info\['cost'\]\": '0.5' \(expected a real number"),
        ("cost", None, r"\"info\['cost'\]\": None \(expected a finite real number"),
        ("cost", float("nan"), r"\"info\['cost'\]\": nan \(expected a finite real number"),
    ],
)
def test_a_bad_caption_or_cost_is_refused_with_its_value(nav, key, value, match):
    with pytest.raises(ConfigError, match=match):
        probe_states_from_walk(DropInfo(nav, key, value, drop=False), steps=5)


def test_a_bool_cost_is_an_indicator(nav):
    walk = probe_states_from_walk(DropInfo(nav, "cost", True, drop=False), steps=5, horizon=2)
    assert walk.unsafe_now == walk.unsafe_soon == (True,) * 5


@pytest.mark.safety
def test_safety_point_goal_walks_its_float64_box_with_float32_rounded_actions():
    pytest.importorskip("mujoco")
    if importlib.util.find_spec("safety_gymnasium") is None:  # imported by gymcurric's loader
        pytest.skip("safety-gymnasium is not installed")
    from gymcurric.envs import make_safety_env

    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    assert env.action_space.dtype == np.float64
    walk = probe_states_from_walk(env, steps=200, horizon=20, seed=12345)
    captions, costs, _ = replay(env, walk)
    env.close()
    assert list(walk.captions) == captions and list(walk.unsafe_now) == [c > 0 for c in costs]
    assert len(set(walk.captions)) > 1


def test_a_vector_env_is_refused_naming_it():
    # a vector env's info['caption'] is an array of captions: the error named the caption
    # ('expected a non-empty str') and an SB3 VecEnv's 4-tuple step was a raw ValueError
    venv = gym.make_vec("gymcurric/HazardNav-v0", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ConfigError, match=r"'env': .*HazardNav.* \(a vector env of 2 sub-envs"):
        probe_states_from_walk(venv, steps=5)
    venv.close()
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    sb3 = vec_env.DummyVecEnv([lambda: gym.make("gymcurric/HazardNav-v0")] * 3)
    with pytest.raises(ConfigError, match=r"'env': .* \(a vector env of 3 sub-envs"):
        probe_states_from_walk(sb3, steps=5)


@pytest.mark.parametrize(("steps", "episodes"), [(20, 2), (25, 3), (9, 1), (10, 1)])
def test_episodes_counts_the_episodes_walked_not_the_reset_after_the_last_step(steps, episodes):
    # a walk whose last step ended an episode counted the episode its reset began, of which it
    # recorded nothing: SafetyPointGoal1's 5,000 steps are 5 episodes of 1,000, reported as 6
    env = gym.make("gymcurric/HazardNav-v0", **HAZARDS, max_steps=10)
    walk = probe_states_from_walk(env, steps=steps, horizon=3, seed=0)
    _, _, walked = replay(env, walk)
    assert walk.episodes == walked[-1] + 1 == episodes
