"""Tests for gymcurric/HazardGrid-v0 (gymcurric.envs.grid)."""

from __future__ import annotations

import copy
import doctest
import functools
import json
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gymcurric.envs.grid as grid_module
from gymcurric.envs import _render
from gymcurric.envs.grid import HazardGridEnv
from gymcurric.errors import ConfigError, TaskError

ENV_ID = "gymcurric/HazardGrid-v0"
UP, RIGHT, DOWN, LEFT = range(4)
MOVES = {UP: (-1, 0), RIGHT: (0, 1), DOWN: (1, 0), LEFT: (0, -1)}


def rollout(env: HazardGridEnv, seed: int, steps: int, task: dict | None = None) -> list:
    options = None if task is None else {"task": task}
    obs, info = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(seed)
    out = [(obs, info)]
    for _ in range(steps):
        step = env.step(int(rng.integers(4)))
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


def manhattan(a, b) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


# --------------------------------------------------------------------------- Gymnasium API
@pytest.mark.parametrize(
    "task",
    [
        None,
        {"num_hazards": 0},
        {"size": 3, "goal_distance": 4, "num_hazards": 7},
        {"size": 32, "goal_distance": 40, "hazard_placement": "between", "slip_prob": 0.5},
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
    if task is not None:
        assert {k: env.task[k] for k in task} == task


def test_class_docstring_example_runs() -> None:
    result = doctest.testmod(grid_module)
    assert result.attempted > 0 and result.failed == 0


def test_spaces_info_keys_and_fixed_obs_shape() -> None:
    env = HazardGridEnv(view_radius=1)
    assert env.action_space == gym.spaces.Discrete(4)
    for size in (3, 8, 32):
        obs, info = env.reset(seed=0, options={"task": {"size": size, "goal_distance": 2}})
        assert obs.shape == (13,) and obs in env.observation_space
        assert set(info) == {"is_success", "caption"}
    _, reward, terminated, truncated, info = env.step(0)
    assert set(info) == {"cost", "cost_hazards", "is_success", "caption"}
    assert isinstance(reward, float) and type(terminated) is bool and type(truncated) is bool


def test_observation_layout() -> None:
    env = HazardGridEnv(view_radius=1, size=5, num_hazards=0, goal_distance=4)
    env.reset(seed=0)
    env.set_agent_cell(0, 0)
    goal = env.layout["goal"]
    obs = env.step(UP)[0]  # bumps into the wall, stays at (0, 0)
    assert obs[:4].tolist() == pytest.approx([0, 0, goal[0] / 4, goal[1] / 4])
    view = obs[4:].reshape(3, 3)
    assert (view[0] == -1).all() and (view[:, 0] == -1).all()  # outside the grid
    assert view[1, 1] == 0.0


@pytest.mark.parametrize(
    "task", [{}, {"size": 3, "goal_distance": 3, "num_hazards": 7}, {"slip_prob": 1.0}]
)
def test_observations_stay_in_space(task: dict) -> None:
    env = HazardGridEnv()
    for obs, *_ in rollout(env, 1, 300, task):
        assert obs in env.observation_space


# --------------------------------------------------------------------------- task handling
def test_task_spec_defaults_and_partial_tasks() -> None:
    spec = HazardGridEnv.task_spec()
    assert json.loads(json.dumps(spec.to_json()))["slip_prob"] == {
        "type": "float",
        "default": 0.0,
        "low": 0.0,
        "high": 1.0,
        "doc": "chance of a random action",
    }
    env = HazardGridEnv(size=10)
    env.reset(seed=0, options={"task": {"num_hazards": 2}})
    assert env.task == {**spec.defaults(), "size": 10, "num_hazards": 2}
    env.reset()
    assert env.task["num_hazards"] == 2
    env.reset(options={"task": {}})
    assert env.task == env.default_task


@pytest.mark.parametrize(
    ("task", "key", "reason"),
    [
        ({"hazards": 3}, "hazards", "unknown task key; valid keys: ['goal_distance'"),
        ({"size": 8.0}, "size", "expected an int, got float"),
        ({"slip_prob": "0.1"}, "slip_prob", "expected a float, got str"),
        ({"size": 2}, "size", "must be in [3, 32]"),
        ({"slip_prob": float("nan")}, "slip_prob", "must be finite"),
        ({"hazard_placement": "ring"}, "hazard_placement", "expected one of"),
        ({"size": 4, "goal_distance": 7}, "goal_distance", "must be <= 2·(size - 1) = 6"),
        ({"size": 4, "num_hazards": 15}, "num_hazards", "must be <= size² - 2 = 14"),
    ],
)
def test_bad_task_raises_task_error_naming_key_and_value(task: dict, key: str, reason: str) -> None:
    env = HazardGridEnv()
    env.reset(seed=0)
    before = (env.task, env.layout)
    with pytest.raises(TaskError) as excinfo:
        env.reset(options={"task": task})
    assert excinfo.value.key == key
    assert repr(task[key]) in str(excinfo.value) and reason in str(excinfo.value)
    assert (env.task, env.layout) == before


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"sise": 4}, "sise"),
        ({"view_radius": -1}, "view_radius"),
        ({"render_size": 16}, "render_size"),
        ({"size": 3, "goal_distance": 5}, "goal_distance"),
    ],
)
def test_bad_constructor_args_raise_config_error(kwargs: dict, key: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        HazardGridEnv(**kwargs)
    assert not isinstance(excinfo.value, TaskError) and excinfo.value.key == key


# ----------------------------------------------------------------------- tasks take effect
@pytest.mark.parametrize("placement", ["random", "between"])
def test_layout_respects_size_distance_and_hazard_count(placement: str) -> None:
    env = HazardGridEnv()
    for seed, (size, dist, count) in enumerate([(3, 4, 7), (5, 1, 3), (12, 22, 40), (32, 62, 0)]):
        task = {
            "size": size,
            "goal_distance": dist,
            "num_hazards": count,
            "hazard_placement": placement,
        }
        env.reset(seed=seed, options={"task": task})
        layout = env.layout
        assert manhattan(layout["agent"], layout["goal"]) == dist
        cells = [layout["agent"], layout["goal"], *layout["hazards"]]
        assert len(layout["hazards"]) == count and len({tuple(c) for c in cells}) == count + 2
        assert all(0 <= v < size for c in cells for v in c)


def test_between_fills_the_start_goal_box_first() -> None:
    env = HazardGridEnv(size=10, goal_distance=6, hazard_placement="between", num_hazards=3)
    checked = 0
    for seed in range(10):
        env.reset(seed=seed)
        (ar, ac), (gr, gc) = env.layout["agent"], env.layout["goal"]
        if (abs(ar - gr) + 1) * (abs(ac - gc) + 1) - 2 >= 3:  # room for all three in the box
            checked += 1
            for r, c in env.layout["hazards"]:
                assert min(ar, gr) <= r <= max(ar, gr) and min(ac, gc) <= c <= max(ac, gc)
    assert checked >= 3


def test_no_hazards_means_no_cost() -> None:
    steps = rollout(HazardGridEnv(), 0, 1000, {"num_hazards": 0, "size": 5})
    costs = [s[4]["cost"] for s in steps if len(s) == 5]
    assert len(costs) == 1000 and set(costs) == {0.0}


def test_max_steps_truncates_exactly() -> None:
    env = HazardGridEnv(num_hazards=0, max_steps=5, size=3, goal_distance=4)  # corner to corner
    env.reset(seed=0)
    row, col = env.layout["agent"]
    # Pressing into a wall keeps the agent (and the episode) where it is.
    wall = next(a for a, (dr, dc) in MOVES.items() if not (0 <= row + dr < 3 and 0 <= col + dc < 3))
    assert [env.step(wall)[3] for _ in range(5)] == [False] * 4 + [True]
    env.reset(options={"task": {"max_steps": 1}})
    assert env.step(wall)[3] is True


def test_reward_progress_success_and_slip() -> None:
    env = HazardGridEnv(num_hazards=0, size=5, goal_distance=1, reward_goal=2.0)
    env.reset(seed=0)
    (ar, ac), goal = env.layout["agent"], env.layout["goal"]
    toward = next(a for a, (dr, dc) in MOVES.items() if [ar + dr, ac + dc] == goal)
    _, reward, terminated, _, info = env.step(toward)
    assert terminated and info["is_success"] and reward == pytest.approx(0.1 + 2.0)
    assert info["caption"] == "The agent reached the goal."


def positions(slip_prob: float, action: int) -> list[list[int]]:
    env = HazardGridEnv(slip_prob=slip_prob, num_hazards=0, size=9, goal_distance=16)
    env.reset(seed=5)
    return [env.step(action)[0][:2].tolist() for _ in range(30)]


def test_slip_replaces_the_action_with_a_seeded_random_one() -> None:
    # slip_prob=1: the chosen action is ignored; the walk is the same whichever action is sent.
    assert positions(1.0, UP) == positions(1.0, DOWN)
    assert positions(0.0, UP) != positions(0.0, DOWN)
    assert positions(1.0, UP) != positions(0.0, UP)


# --------------------------------------------------------------------------------- captions
def stepping_onto_a_hazard(env: HazardGridEnv) -> tuple[list[int], int]:
    """A free cell next to a hazard and the action that moves onto it."""
    hazards = {tuple(h) for h in env.layout["hazards"]}
    n = env.task["size"]
    for hr, hc in sorted(hazards):
        for action, (dr, dc) in MOVES.items():
            r, c = hr - dr, hc - dc
            if 0 <= r < n and 0 <= c < n and (r, c) not in hazards and [r, c] != env.layout["goal"]:
                return [r, c], action
    raise AssertionError("no free cell next to a hazard")


def test_stepping_onto_a_hazard_costs_one_and_the_caption_says_so() -> None:
    env = HazardGridEnv(num_hazards=10)
    env.reset(seed=3)
    cell, action = stepping_onto_a_hazard(env)
    env.set_agent_cell(*cell)
    _, _, _, _, info = env.step(action)
    assert info["cost"] == 1.0 and info["cost_hazards"] == 1.0
    assert info["caption"].startswith("The agent is inside a hazard.")
    _, _, _, _, info = env.step((action + 2) % 4)  # step back off it
    assert info["cost"] == 0.0 and not info["caption"].startswith("The agent is inside")


@functools.cache
def brute_force_clear(hazards: frozenset, cell: tuple, goal: tuple) -> bool:
    """Whether some shortest path from cell to goal avoids every hazard (plain recursion)."""
    if cell in hazards:
        return False
    if cell == goal:
        return True
    steps = [(int(np.sign(goal[0] - cell[0])), 0), (0, int(np.sign(goal[1] - cell[1])))]
    return any(
        brute_force_clear(hazards, (cell[0] + dr, cell[1] + dc), goal)
        for dr, dc in steps
        if dr or dc
    )


def expected_caption(hazards: set, cell: tuple, goal: tuple) -> str:
    """The caption, worked out independently of the env."""
    distance = manhattan(cell, goal)
    if distance == 0:
        return "The agent reached the goal."
    near = [(cell[0] + dr, cell[1] + dc) for dr, dc in MOVES.values()]
    near = [n for n in near if n in hazards]
    if cell in hazards:
        first = "The agent is inside a hazard."
    elif any(manhattan(n, goal) < distance for n in near):
        first = "A hazard is close ahead."
    elif near:
        first = "A hazard is close by."
    elif brute_force_clear(frozenset(hazards), cell, goal):
        first = "The path to the goal is clear."
    else:
        first = "A hazard blocks the path to the goal."
    return f"{first} The goal is {'close ahead' if distance <= 2 else 'far away'}."


def test_captions_match_an_independent_computation_in_every_cell() -> None:
    env = HazardGridEnv(size=7, goal_distance=8, num_hazards=12)
    seen = set()
    for seed in range(10):
        env.reset(seed=seed)
        hazards = {tuple(h) for h in env.layout["hazards"]}
        goal = tuple(env.layout["goal"])
        for cell in np.ndindex(7, 7):
            _, info = env.set_agent_cell(*cell)
            expected = expected_caption(hazards, cell, goal)
            assert info["caption"] == expected, (seed, cell)
            assert info["is_success"] == (cell == goal)
            seen.add(expected.split(".")[0])
    assert len(seen) == 6  # every hazard/path clause and the success sentence occurred


# ---------------------------------------------------------------------------------- render
def test_render_shape_size_and_agent_pixels_on_a_hazard() -> None:
    env = HazardGridEnv(render_mode="rgb_array", num_hazards=10, size=8)
    env.reset(seed=3)
    frame = env.render()
    assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8
    assert (frame == _render.HAZARD).all(axis=-1).sum() == 10 * 64  # 10 cells of 8x8 pixels
    assert (frame == _render.GOAL).all(axis=-1).sum() == 64
    cell, action = stepping_onto_a_hazard(env)
    env.set_agent_cell(*cell)
    before = env.render()
    assert tuple(before[cell[0] * 8 + 4, cell[1] * 8 + 4]) == tuple(_render.AGENT)
    env.step(action)
    on = env.render()
    r, c = env.layout["agent"]
    centre = (r * 8 + 4, c * 8 + 4)
    assert tuple(on[centre]) == tuple(_render.AGENT_IN_HAZARD)
    assert tuple(before[centre]) == tuple(_render.HAZARD)  # the same pixel before the step
    assert tuple(on[r * 8, c * 8]) == tuple(_render.HAZARD)  # the cell's rim stays visible
    big = HazardGridEnv(render_mode="rgb_array", render_size=100, size=7)
    big.reset(seed=0)
    assert big.render().shape == (100, 100, 3)


# ------------------------------------------------------------------ determinism, pickling
def test_same_seed_same_actions_same_everything() -> None:
    task = {"slip_prob": 0.3, "num_hazards": 12}
    first, second = rollout(HazardGridEnv(), 11, 500, task), rollout(HazardGridEnv(), 11, 500, task)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]
    a, b = HazardGridEnv(), HazardGridEnv()
    a.reset(seed=11, options={"task": task})
    b.reset(seed=12, options={"task": task})
    assert a.layout != b.layout


@pytest.mark.parametrize("clone", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy])
def test_pickle_and_deepcopy_continue_identically(clone) -> None:
    env = gym.make(ENV_ID, render_mode="rgb_array", slip_prob=0.5)
    env.reset(seed=3)
    for _ in range(5):
        env.step(env.action_space.sample())
    twin = clone(env)
    for action in np.random.default_rng(0).integers(4, size=60):
        a, b = env.step(action), twin.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]
        if a[2] or a[3]:
            np.testing.assert_array_equal(env.reset()[0], twin.reset()[0])
    np.testing.assert_array_equal(env.render(), twin.render())
