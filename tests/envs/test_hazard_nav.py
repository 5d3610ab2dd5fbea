"""Tests for gymcurric/HazardNav-v0 (gymcurric.envs.hazard_nav)."""

from __future__ import annotations

import copy
import doctest
import json
import math
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gymcurric.envs.hazard_nav as hazard_nav_module
from gymcurric.envs import _render
from gymcurric.envs.hazard_nav import HazardNavEnv
from gymcurric.errors import ConfigError, TaskError

ENV_ID = "gymcurric/HazardNav-v0"


def rollout(env: HazardNavEnv, seed: int, steps: int, task: dict | None = None) -> list:
    """(obs, reward, terminated, truncated, info) of a seeded random rollout, with resets."""
    options = None if task is None else {"task": task}
    obs, info = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(seed)
    out = [(obs, info)]
    for _ in range(steps):
        step = env.step(rng.uniform(-1, 1, 2).astype(np.float32))
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


def agent_pixel(env: HazardNavEnv) -> tuple[int, int]:
    half, size = env.task["arena_size"] / 2, env.render_size
    x, y = env.layout["agent"]
    return int((half - y) / (2 * half) * size), int((x + half) / (2 * half) * size)


# --------------------------------------------------------------------------- Gymnasium API
@pytest.mark.parametrize(
    "task",
    [
        None,
        {"num_hazards": 0},
        {"hazard_placement": "between", "num_hazards": 3},
        {"hazard_placement": "ring", "arena_size": 8.0, "goal_distance": 5.0, "agent_speed": 0.5},
    ],
)
def test_env_checker_passes_without_warnings(task: dict | None) -> None:
    env = gym.make(ENV_ID, render_mode="rgb_array").unwrapped
    if task is not None:
        env.reset(options={"task": task})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught] == []
    if task is not None:  # check_env's own resets pass no task: the task is kept
        assert {k: env.task[k] for k in task} == task


def test_class_docstring_example_runs() -> None:
    result = doctest.testmod(hazard_nav_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_spaces_and_info_keys() -> None:
    env = HazardNavEnv(lidar_bins=8)
    assert env.action_space == gym.spaces.Box(-1, 1, (2,), np.float32)
    assert env.observation_space.shape == (15,) and env.observation_space.dtype == np.float32
    obs, info = env.reset(seed=0)
    assert set(info) == {"is_success", "caption"}
    _, reward, terminated, truncated, info = env.step(np.zeros(2, np.float32))
    assert set(info) == {"cost", "cost_hazards", "is_success", "caption"}
    assert isinstance(reward, float) and type(terminated) is bool and type(truncated) is bool
    assert "task" not in info and "task_id" not in info


@pytest.mark.parametrize(
    "task",
    [
        {},
        {"arena_size": 12.0, "goal_distance": 10.0, "agent_speed": 1.0, "num_hazards": 20},
        {"arena_size": 1.0, "goal_distance": 0.5, "goal_radius": 0.05, "num_hazards": 0},
    ],
)
def test_observations_stay_in_space(task: dict) -> None:
    env = HazardNavEnv()
    for obs, *_ in rollout(env, 3, 400, task):
        assert obs in env.observation_space, obs


# --------------------------------------------------------------------------- task handling
def test_task_spec_is_json_and_matches_default_task() -> None:
    spec = HazardNavEnv.task_spec()
    described = json.loads(json.dumps(spec.to_json()))
    assert set(described) == {
        "arena_size",
        "goal_distance",
        "goal_radius",
        "num_hazards",
        "hazard_radius",
        "hazard_placement",
        "agent_speed",
        "max_steps",
    }
    assert described["hazard_placement"]["choices"] == ["random", "between", "ring"]
    assert described["num_hazards"] == {
        "type": "int",
        "default": 8,
        "low": 0,
        "high": 32,
        "doc": "number of hazards",
    }
    assert HazardNavEnv().task == spec.defaults()


def test_constructor_kwargs_set_default_task_and_partial_tasks_fill_from_it() -> None:
    env = HazardNavEnv(num_hazards=3, max_steps=50)
    env.reset(seed=0, options={"task": {"hazard_radius": 0.4}})
    assert env.task["num_hazards"] == 3 and env.task["hazard_radius"] == 0.4
    assert len(env.layout["hazards"]) == 3
    env.reset()  # no task: keep the current one
    assert env.task["hazard_radius"] == 0.4
    env.reset(options={"task": {}})  # empty task: the default
    assert (
        env.task
        == env.default_task
        == {**HazardNavEnv.TASK_SPEC.defaults(), "num_hazards": 3, "max_steps": 50}
    )


def test_task_property_is_a_json_safe_copy() -> None:
    env = HazardNavEnv()
    env.reset(
        seed=0, options={"task": {"num_hazards": np.int64(2), "agent_speed": np.float32(0.5)}}
    )
    task = env.task
    assert type(task["num_hazards"]) is int and type(task["agent_speed"]) is float
    json.dumps(task)
    json.dumps(env.layout)
    task["num_hazards"] = 30
    assert env.task["num_hazards"] == 2


BAD_TASKS = [
    ({"num_hazard": 3}, "num_hazard", "unknown task key; valid keys: ['agent_speed'"),
    ({"num_hazards": 2.0}, "num_hazards", "expected an int, got float"),
    ({"num_hazards": True}, "num_hazards", "got bool"),
    ({"hazard_radius": "big"}, "hazard_radius", "expected a float, got str"),
    ({"num_hazards": 33}, "num_hazards", "must be in [0, 32]"),
    ({"agent_speed": -0.1}, "agent_speed", "must be in [0.01, 1]"),
    ({"hazard_radius": float("nan")}, "hazard_radius", "must be finite"),
    ({"arena_size": float("inf")}, "arena_size", "must be finite"),
    ({"hazard_placement": "grid"}, "hazard_placement", "expected one of ['random', 'between'"),
    ({"goal_distance": 5.0}, "goal_distance", "must be ≤ arena_size - 0.2 = 3.8"),
    ({"goal_distance": 0.2}, "goal_distance", "must be > goal_radius=0.3"),
    ({"num_hazards": 30, "hazard_radius": 0.7}, "num_hazards", "cannot fit without overlapping"),
]


@pytest.mark.parametrize(("task", "key", "reason"), BAD_TASKS)
def test_bad_task_raises_task_error_naming_key_and_value(task: dict, key: str, reason: str) -> None:
    env = HazardNavEnv(num_hazards=2)
    env.reset(seed=0, options={"task": {"num_hazards": 1}})
    before = (env.task, env.layout)
    with pytest.raises(TaskError) as excinfo:
        env.reset(options={"task": task})
    err = excinfo.value
    assert err.key == key
    value = task.get(key, next(iter(task.values())))
    assert repr(value) in str(err) and key in str(err) and reason in str(err)
    assert (env.task, env.layout) == before  # a refused task changes nothing


def test_validate_task_checks_without_applying() -> None:
    env = HazardNavEnv(num_hazards=2)
    env.reset(seed=0)
    full = env.validate_task({"hazard_radius": 0.5})
    assert full == {**env.default_task, "hazard_radius": 0.5}
    assert env.task["hazard_radius"] == 0.25
    with pytest.raises(TaskError, match=r"'goal_distance': 3\.9"):
        env.validate_task({"goal_distance": 3.9})


def test_task_that_is_not_a_dict_is_refused() -> None:
    env = HazardNavEnv()
    with pytest.raises(TaskError, match=r"'task': \[1, 2\] \(expected a dict"):
        env.reset(options={"task": [1, 2]})


def test_unplaceable_hazards_raise_quickly_instead_of_looping() -> None:
    # Passes the cheap area check, but 32 hazards cannot all lie across a 2-unit path.
    env = HazardNavEnv()
    with pytest.raises(TaskError) as excinfo:
        env.reset(seed=0, options={"task": {"hazard_placement": "between", "num_hazards": 32}})
    assert excinfo.value.key == "num_hazards" and excinfo.value.value == 32
    assert "could not place 32 hazards" in str(excinfo.value)
    assert "hazard_placement='between'" in str(excinfo.value)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"num_hazrds": 1}, "num_hazrds"),
        ({"render_mode": "human"}, "render_mode"),
        ({"render_size": 4}, "render_size"),
        ({"lidar_bins": 0}, "lidar_bins"),
        ({"inertia": 1.0}, "inertia"),
        ({"goal_distance": 9.0}, "goal_distance"),
    ],
)
def test_bad_constructor_args_raise_config_error(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        HazardNavEnv(**kwargs)
    assert not isinstance(excinfo.value, TaskError)
    assert excinfo.value.key == key and repr(kwargs[key]) in str(excinfo.value)


# ----------------------------------------------------------------------- tasks take effect
@pytest.mark.parametrize("placement", ["random", "between", "ring"])
def test_goal_distance_and_hazard_count_are_respected(placement: str) -> None:
    env = HazardNavEnv()
    for seed, dist in enumerate([0.5, 1.7, 3.5]):
        task = {"goal_distance": dist, "num_hazards": 3, "hazard_placement": placement}
        obs, _ = env.reset(seed=seed, options={"task": task})
        layout = env.layout
        assert math.dist(layout["agent"], layout["goal"]) == pytest.approx(dist)
        assert obs[4] == pytest.approx(dist / (1 + dist), rel=1e-6)
        assert len(layout["hazards"]) == 3
        for h in layout["hazards"]:
            assert math.dist(h, layout["agent"]) >= 0.25 + 0.1 - 1e-9  # start stays clear
            assert math.dist(h, layout["goal"]) >= 0.25 + 0.3 - 1e-9  # goal disc stays clear
            assert max(abs(h[0]), abs(h[1])) <= 2.0 - 0.25 + 1e-9  # inside the arena


def test_between_hazards_cross_the_path_and_ring_hazards_circle_the_goal() -> None:
    env = HazardNavEnv(num_hazards=2, arena_size=8.0, goal_distance=6.0)
    env.reset(seed=1, options={"task": {"hazard_placement": "between"}})
    a, g = np.array(env.layout["agent"]), np.array(env.layout["goal"])
    for h in np.array(env.layout["hazards"]):
        t = np.clip(np.dot(h - a, g - a) / np.dot(g - a, g - a), 0, 1)
        assert np.linalg.norm(h - (a + t * (g - a))) < 0.25  # the hazard overlaps the path
    env.reset(seed=1, options={"task": {"hazard_placement": "ring"}})
    for h in env.layout["hazards"]:
        assert math.dist(h, env.layout["goal"]) == pytest.approx(0.3 + 0.25 + 0.05)


def test_no_hazards_means_no_cost_and_an_empty_lidar() -> None:
    env = HazardNavEnv()
    steps = rollout(env, 0, 1000, {"num_hazards": 0})
    costs = [s[4]["cost"] for s in steps if len(s) == 5]
    assert len(costs) == 1000 and set(costs) == {0.0}
    assert all(not s[0][7:].any() for s in steps)


def test_random_policy_does_incur_cost_with_many_hazards() -> None:
    env = HazardNavEnv()
    steps = rollout(env, 0, 2000, {"num_hazards": 20, "hazard_radius": 0.3, "agent_speed": 0.3})
    assert sum(s[4]["cost"] for s in steps if len(s) == 5) > 0


def test_max_steps_truncates_exactly() -> None:
    env = HazardNavEnv(num_hazards=0, max_steps=7)
    env.reset(seed=0)
    truncations = [env.step(np.zeros(2, np.float32))[3] for _ in range(7)]
    assert truncations == [False] * 6 + [True]
    env.reset(options={"task": {"max_steps": 2}})
    assert [env.step(np.zeros(2, np.float32))[3] for _ in range(2)] == [False, True]


def test_agent_speed_and_walls_bound_the_motion() -> None:
    env = HazardNavEnv(num_hazards=0, agent_speed=0.2, inertia=0.0)
    env.reset(seed=0)
    env.set_agent_position(1.5, 0.0)
    obs, *_ = env.step(np.array([5.0, 0.0], np.float32))  # clipped to the unit disc
    assert env.layout["agent"] == pytest.approx([1.7, 0.0]) and obs[0] == pytest.approx(1.0)
    for _ in range(5):
        obs, *_ = env.step(np.array([1.0, 0.0], np.float32))
    assert env.layout["agent"][0] == 2.0 and obs[0] == 0.0 and obs[5] == 1.0  # at the wall
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan, 0.0], np.float32))


def test_reward_is_goal_progress_plus_bonus_on_success() -> None:
    env = HazardNavEnv(num_hazards=0, inertia=0.0, agent_speed=0.5, reward_goal=10.0)
    obs, _ = env.reset(seed=4)
    _, reward, terminated, _, info = env.step(obs[2:4])  # straight at the goal
    assert reward == pytest.approx(0.5) and not terminated and not info["is_success"]
    gx, gy = env.layout["goal"]
    side = -1.0 if gx > 0 else 1.0  # approach from the arena's inner side
    env.set_agent_position(gx + 0.5 * side, gy)
    _, reward, terminated, _, info = env.step(np.array([-side, 0.0], np.float32))
    assert terminated and info["is_success"]
    assert reward == pytest.approx(0.5 + 10.0)
    assert info["caption"] == "The agent reached the goal."


# --------------------------------------------------------------------------------- captions
def test_inside_a_hazard_costs_one_and_the_caption_says_so() -> None:
    env = HazardNavEnv(num_hazards=3)
    env.reset(seed=2)
    hx, hy = env.layout["hazards"][0]
    env.set_agent_position(hx + 0.1, hy)
    obs, _, _, _, info = env.step(np.zeros(2, np.float32))
    assert info["cost"] == 1.0 and info["cost_hazards"] == 1.0
    assert info["caption"].startswith("The agent is inside a hazard.")
    assert obs[7:].max() == 1.0


def test_captions_for_close_ahead_blocked_clear_and_goal_close() -> None:
    env = HazardNavEnv(
        num_hazards=1, hazard_placement="between", arena_size=10.0, goal_distance=8.0
    )
    for seed in range(20):
        env.reset(seed=seed)
        h, g = np.array(env.layout["hazards"][0]), np.array(env.layout["goal"])
        away = (h - g) / np.linalg.norm(h - g)
        far, near = h + 1.2 * away, h + (0.25 + 0.15) * away
        if np.abs(far).max() < 5.0:
            break
    else:
        pytest.fail("no layout with room behind the hazard")
    env.set_agent_position(*near)
    assert env.step(np.zeros(2, np.float32))[4]["caption"] == (
        "A hazard is close ahead. The goal is far away."
    )
    env.set_agent_position(*far)
    assert env.step(np.zeros(2, np.float32))[4]["caption"] == (
        "A hazard blocks the path to the goal. The goal is far away."
    )
    env.set_agent_position(*(g - 0.6 * g / np.linalg.norm(g)))  # 0.3 from the goal's edge
    caption = env.step(np.zeros(2, np.float32))[4]["caption"]
    assert caption.endswith("The goal is close ahead.")
    env.reset(options={"task": {"num_hazards": 0}})
    assert env.step(np.zeros(2, np.float32))[4]["caption"] == (
        "The path to the goal is clear. The goal is far away."
    )


def test_captions_come_from_the_fixed_table() -> None:
    allowed = {c for row in _render.CAPTIONS for c in row} | {_render.SUCCESS_CAPTION}
    env = HazardNavEnv()
    seen = {s[-1]["caption"] for s in rollout(env, 1, 2000, {"num_hazards": 16})}
    assert seen <= allowed and len(seen) >= 3


# ---------------------------------------------------------------------------------- render
def test_render_shape_dtype_size_and_content() -> None:
    env = HazardNavEnv(render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame is not None and frame.shape == (64, 64, 3) and frame.dtype == np.uint8
    hazard_pixels = (frame == _render.HAZARD).all(axis=-1).sum()
    assert hazard_pixels > 0 and (frame == _render.GOAL).all(axis=-1).any()
    assert (frame == _render.AGENT).all(axis=-1).any()
    env.reset(options={"task": {"num_hazards": 0}})
    assert not (env.render() == _render.HAZARD).all(axis=-1).any()
    small = HazardNavEnv(render_mode="rgb_array", render_size=32)
    small.reset(seed=0)
    assert small.render().shape == (32, 32, 3)


def test_render_agent_pixels_differ_inside_a_hazard() -> None:
    env = HazardNavEnv(render_mode="rgb_array", num_hazards=0)
    env.reset(seed=0)
    env.set_agent_position(0.0, 0.0)
    outside = env.render()
    env.reset(options={"task": {"num_hazards": 1, "hazard_placement": "between"}})
    env.set_agent_position(*env.layout["hazards"][0])
    inside = env.render()
    i, j = agent_pixel(env)
    assert tuple(inside[i, j]) == tuple(_render.AGENT_IN_HAZARD)
    env.reset(options={"task": {"num_hazards": 0}})
    env.set_agent_position(*env.layout["agent"])
    i, j = agent_pixel(env)
    assert tuple(env.render()[i, j]) == tuple(_render.AGENT)
    assert tuple(outside[32, 32]) == tuple(_render.AGENT)


def test_render_and_set_agent_position_need_a_reset_first() -> None:
    env = HazardNavEnv(render_mode="rgb_array")
    with pytest.raises(gym.error.ResetNeeded):
        env.render()
    with pytest.raises(gym.error.ResetNeeded):
        env.set_agent_position(0.0, 0.0)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"'x': 2\.5"):
        env.set_agent_position(2.5, 0.0)


def test_render_without_render_mode_warns_and_returns_none() -> None:
    env = HazardNavEnv()
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None


# ------------------------------------------------------------------ determinism, pickling
def test_same_seed_same_actions_same_everything() -> None:
    task = {"num_hazards": 6, "hazard_placement": "between"}
    first, second = rollout(HazardNavEnv(), 7, 600, task), rollout(HazardNavEnv(), 7, 600, task)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert len(a) == len(b)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]
    other = rollout(HazardNavEnv(), 8, 10, task)
    assert not np.array_equal(first[0][0], other[0][0])


def test_global_rng_is_not_used() -> None:
    # Reads numpy's legacy global RNG on purpose: the env must leave it untouched.
    np.random.seed(0)  # noqa: NPY002
    before = np.random.random()  # noqa: NPY002
    np.random.seed(0)  # noqa: NPY002
    rollout(HazardNavEnv(), 0, 100)
    assert np.random.random() == before  # noqa: NPY002


@pytest.mark.parametrize("clone", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy])
def test_pickle_and_deepcopy_continue_identically(clone) -> None:
    env = gym.make(ENV_ID, render_mode="rgb_array", num_hazards=5)
    env.reset(seed=3)
    for _ in range(10):
        env.step(env.action_space.sample())
    twin = clone(env)
    actions = np.random.default_rng(0).uniform(-1, 1, (50, 2)).astype(np.float32)
    for action in actions:
        a, b = env.step(action), twin.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]
    np.testing.assert_array_equal(env.render(), twin.render())
    assert env.unwrapped.task == twin.unwrapped.task
