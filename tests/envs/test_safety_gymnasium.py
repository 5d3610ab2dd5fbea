"""The Safety-Gymnasium loader: registration, the converted env, task parameters, processes."""

from __future__ import annotations

import ast
import contextlib
import copy
import functools
import importlib.util
import os
import pickle
import subprocess
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401  (registers the ids)
from gymcurric.envs.safety_ids import SAFETY_GYMNASIUM_IDS, register_safety_envs, safety_env_spec
from gymcurric.errors import ConfigError, EnvUnavailableError, TaskError
from tests.safety_support import needs_safety

safety = pytest.mark.safety
SMALL = {"render_mode": "rgb_array", "width": 32, "height": 32}
VISION_SMALL = {"render_mode": "rgb_array", "config": {"vision_env_conf.vision_size": (32, 32)}}


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _rollout(env: gym.Env[Any, Any], seed: int, steps: int = 15) -> list[Any]:
    # An empty task dict restores the registered defaults (tests share one env).
    options = {"task": {}} if getattr(env.unwrapped, "task_defaults", None) else None
    obs, _ = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(123)
    low, high = env.action_space.low, env.action_space.high
    out = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(low, high))
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(np.array_equal(a, b))


# --- registration (no mujoco needed) -------------------------------------------------------------


def test_import_gymcurric_does_not_import_mujoco_or_safety_gymnasium() -> None:
    code = (
        "import sys, gymnasium as gym, gymcurric;"
        "assert 'gymcurric/SafetyPointGoal1-v0' in gym.registry;"
        "heavy = ('mujoco', 'safety_gymnasium', 'gymcurric.envs.safety_gymnasium');"
        "assert not [m for m in heavy if m in sys.modules], 1;"
        "import gymcurric.envs.safety_gymnasium;"  # the entry-point module is light too
        "assert not [m for m in heavy[:2] if m in sys.modules], 2"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr


def test_every_id_is_registered_with_its_episode_length() -> None:
    assert len(SAFETY_GYMNASIUM_IDS) == len(set(SAFETY_GYMNASIUM_IDS)) == 232
    for env_id in SAFETY_GYMNASIUM_IDS:
        spec = gym.spec(f"gymcurric/{env_id}")
        assert spec.entry_point == "gymcurric.envs.safety_gymnasium:SafetyGymnasiumEnv"
        assert spec.kwargs == {"env_id": env_id}
        assert spec.max_episode_steps == safety_env_spec(env_id).max_episode_steps
    assert gym.spec("gymcurric/SafetyPointCircle1-v0").max_episode_steps == 500
    assert gym.spec("gymcurric/SafetyAntVelocity-v1").reward_threshold == 6000.0


def test_registration_is_idempotent_and_silent() -> None:
    before = gym.spec("gymcurric/SafetyPointGoal1-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        register_safety_envs()
        register_safety_envs()
    assert gym.spec("gymcurric/SafetyPointGoal1-v0") is before


def test_unknown_id_is_a_config_error_with_suggestions() -> None:
    with pytest.raises(ConfigError, match="SafetyPointGoal1-v0"):
        safety_env_spec("SafetyPointGoall1-v0")


@pytest.mark.skipif(importlib.util.find_spec("safety_gymnasium") is None, reason="not installed")
def test_ids_match_the_packages_own_registration() -> None:
    """Parse (never run) safety_gymnasium/__init__.py and compare every single-agent id."""
    spec = importlib.util.find_spec("safety_gymnasium")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    variables: dict[str, Any] = {}
    expected: dict[str, tuple[Any, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError):  # only literal assignments matter
                variables[node.targets[0].id] = ast.literal_eval(node.value)
        call = node.value if isinstance(node, ast.Expr) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        if call.func.id == "__combine":
            tasks = variables[call.args[0].id]  # type: ignore[attr-defined]
            for task, config in tasks.items():
                for robot in variables["ROBOT_NAMES"]:
                    base = f"Safety{robot}{task}-v0"
                    full = {**config, "agent_name": robot}
                    vision = {"observe_vision": True, "observation_flatten": False, **full}
                    expected[base] = (kwargs["max_episode_steps"], None, base, full, "")
                    expected[f"Safety{robot}{task}Vision-v0"] = (
                        kwargs["max_episode_steps"],
                        None,
                        base,
                        vision,
                        "",
                    )
        elif call.func.id == "__register_helper":
            expected[kwargs["env_id"]] = (
                kwargs["max_episode_steps"],
                kwargs.get("reward_threshold"),
                "",
                {},
                kwargs["entry_point"],
            )
    ours = {
        env_id: (s.max_episode_steps, s.reward_threshold, s.task_id, dict(s.config), s.entry_point)
        for env_id in SAFETY_GYMNASIUM_IDS
        for s in [safety_env_spec(env_id)]
    }
    assert ours == expected


# --- building, stepping, rendering ----------------------------------------------------------------

FAMILIES = [
    ("SafetyPointButton1-v0", {"cost_buttons", "cost_hazards", "cost_gremlins"}),
    ("SafetyPointPush1-v0", {"cost_hazards"}),
    ("SafetyPointCircle1-v0", {"cost_out_of_boundary"}),
    ("SafetyCarGoal1-v0", {"cost_hazards"}),
    ("SafetyDoggoGoal0-v0", set()),
    ("SafetyRacecarCircle1-v0", {"cost_out_of_boundary"}),
    ("SafetyAntPush0-v0", set()),
    ("SafetyHopperVelocity-v1", set()),
]


@pytest.fixture(scope="module")
def goal_env() -> Any:
    needs_safety()
    env = gym.make("gymcurric/SafetyPointGoal1-v0", **SMALL)
    yield env
    env.close()


def _check_family(env: gym.Env[Any, Any], cost_keys: set[str], other_seed: bool = False) -> None:
    first, second = _rollout(env, seed=7), _rollout(env, seed=7)
    assert _same(first, second), "same seed must give the same trajectory"
    if other_seed:  # another reset (0.2-0.45 s): checked on one task only
        assert not _same(first[0], _rollout(env, seed=8, steps=0)[0])
    obs, reward, terminated, truncated, info = second[-1]
    assert obs in env.observation_space
    assert isinstance(reward, float) and isinstance(terminated, bool)
    assert isinstance(info["cost"], float)
    assert cost_keys <= set(info), info
    assert all(isinstance(info[k], float) for k in info if k.startswith("cost"))
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
    assert frame.shape == (32, 32, 3) and frame.std() > 0


@safety
def test_point_goal_builds_steps_renders_and_is_deterministic(goal_env: Any) -> None:
    _check_family(goal_env, {"cost_hazards", "cost_sum"}, other_seed=True)
    assert goal_env.spec.max_episode_steps == 1000
    assert goal_env.unwrapped.render_mode == "rgb_array"


@safety
@pytest.mark.parametrize(("env_id", "cost_keys"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_task_family_builds_steps_renders_and_is_deterministic(
    env_id: str, cost_keys: set[str]
) -> None:
    needs_safety()
    env = gym.make(f"gymcurric/{env_id}", **SMALL)
    try:
        _check_family(env, cost_keys)
        assert env.spec.max_episode_steps == safety_env_spec(env_id).max_episode_steps
    finally:
        env.close()


@safety
def test_vision_task_observes_and_renders_the_agent_camera() -> None:
    needs_safety()
    env = gym.make("gymcurric/SafetyPointGoal0Vision-v0", **VISION_SMALL)
    try:
        first, second = _rollout(env, seed=3, steps=5), _rollout(env, seed=3, steps=5)
        assert _same(first, second)
        obs = first[-1][0]
        assert obs["vision"].shape == (32, 32, 3) and obs["vision"].dtype == np.uint8
        assert obs in env.observation_space
        assert np.array_equal(env.render(), obs["vision"])
        with pytest.raises(ConfigError, match="rgb_array"):
            gym.make("gymcurric/SafetyPointGoal0Vision-v0", render_mode="depth_array")
    finally:
        env.close()


@safety
def test_check_env_is_clean_on_navigation_and_velocity_tasks(goal_env: Any) -> None:
    from gymnasium.utils.env_checker import check_env

    env = gym.make("gymcurric/SafetyHopperVelocity-v1", **SMALL)
    for candidate in (goal_env.unwrapped, env.unwrapped):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(candidate)
        # Unbounded sensor observations are inherent to the tasks (as in Gymnasium's own).
        other = [str(w.message) for w in caught if "infinity" not in str(w.message)]
        assert other == [], other
    env.close()


@safety
def test_list_actions_and_episode_end_behave(goal_env: Any) -> None:
    goal_env.reset(seed=0)
    _, _, _, _, info = goal_env.step([0.0, 0.0])
    assert "cost" in info
    raw_wrapper = goal_env.unwrapped
    raw_wrapper.raw_env.truncated = True  # as after its own time limit
    with pytest.raises(gym.error.ResetNeeded):
        raw_wrapper.step(np.zeros(2))
    goal_env.reset(seed=0)


@safety
def test_race_tasks_are_unavailable_with_a_clear_error() -> None:
    needs_safety()
    for env_id in ("SafetyPointRace0-v0", "SafetyCarRace2Vision-v0"):
        with pytest.raises(EnvUnavailableError, match="village_floor"):
            gym.make(f"gymcurric/{env_id}")


@safety
def test_bad_make_arguments_raise_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    needs_safety()
    with pytest.warns(UserWarning, match="render_mode"), pytest.raises(ConfigError, match="rgb"):
        gym.make("gymcurric/SafetyPointGoal0-v0", render_mode="rgb")
    with pytest.raises(ConfigError, match="no_such_key"):
        gym.make("gymcurric/SafetyPointGoal0-v0", config={"no_such_key": 1})
    with pytest.raises(ConfigError, match="width"):
        gym.make("gymcurric/SafetyPointGoal0-v0", width=0)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(EnvUnavailableError, match="display"):
        gym.make("gymcurric/SafetyPointGoal0-v0", render_mode="human")


@safety
def test_headless_gl_is_chosen_only_without_a_display() -> None:
    needs_safety()
    code = (
        "import os; from gymcurric.envs.safety_gymnasium import make_safety_env;"
        "make_safety_env('SafetyPointGoal0-v0'); print(os.environ.get('MUJOCO_GL'))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    cases = {"egl": {}, "None": {"DISPLAY": ":99"}, "osmesa": {"MUJOCO_GL": "osmesa"}}
    procs = {
        expected: subprocess.Popen(
            [sys.executable, "-c", code],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**clean, "WAYLAND_DISPLAY": "", **extra},
        )
        for expected, extra in cases.items()
    }
    for expected, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert out.strip().splitlines()[-1:] == [expected], err[-2000:]


# --- task parameters -----------------------------------------------------------------------------


@safety
def test_task_options_change_the_episode_layout(goal_env: Any) -> None:
    env = goal_env.unwrapped
    assert env.task_defaults == {
        "hazards.num": 8,
        "hazards.size": 0.2,
        "vases.num": 1,
        "goal.size": 0.3,
        "placements.extents": [-1.5, -1.5, 1.5, 1.5],
    }
    task = {
        "hazards.num": 3,
        "vases.num": 0,
        "hazards.size": 0.35,
        "goal.size": 0.5,
        "placements.extents": [-2.5, -2, 2.5, 2],
    }
    obs, _ = goal_env.reset(seed=1, options={"task": task})
    raw = env.raw_env.task
    assert len(raw.hazards.pos) == 3 and raw.vases.num == 0 and raw.hazards.size == 0.35
    assert raw.goal.size == 0.5 and list(raw.placements_conf.extents) == [-2.5, -2, 2.5, 2]
    assert obs in goal_env.observation_space
    assert raw.model.geom("hazard2").size[0] == pytest.approx(0.35)
    xy = np.array(list(raw.world_info.layout.values()))
    assert np.all(np.abs(xy[:, 0]) <= 2.5) and np.any(np.abs(xy[:, 0]) > 1.5)
    goal_env.step(goal_env.action_space.sample())

    goal_env.reset(seed=2)  # no task option: keep the episode's task
    assert env.task == {**env.task_defaults, **task}
    goal_env.reset(seed=2, options={"task": {"hazards.num": 5}})  # missing keys -> defaults
    assert env.task == {**env.task_defaults, "hazards.num": 5} and raw.vases.num == 1
    goal_env.reset(seed=2, options={"task": {}})
    assert env.task == env.task_defaults and len(raw.hazards.pos) == 8


@safety
@pytest.mark.parametrize(
    ("task", "match"),
    [
        ({"hazard.num": 3}, "'hazard.num': 3 .*unknown task key"),
        ({"pillars.num": 2}, "'pillars.num': 2 .*has no such object"),
        ({"hazards.num": 2.5}, "'hazards.num': 2.5"),
        ({"hazards.num": True}, "'hazards.num': True"),
        ({"hazards.size": 0.9}, "'hazards.size': 0.9 .*keep-out"),
        ({"goal.size": float("nan")}, "'goal.size': nan"),
        ({"placements.extents": [-5, -1, 5, 1]}, "inside the floor"),
        ({"placements.extents": [1, 1, -1, -1]}, "xmin < xmax"),
        ({"hazards.num": 80}, "too crowded"),
        ("hazards.num=3", "expected a dict"),
    ],
)
def test_bad_task_options_raise_task_errors_naming_key_and_value(
    goal_env: Any, task: Any, match: str
) -> None:
    goal_env.reset(seed=0, options={"task": {"hazards.num": 4}})
    with pytest.raises(TaskError, match=match):
        goal_env.reset(seed=0, options={"task": task})
    assert goal_env.unwrapped.task["hazards.num"] == 4  # a rejected task changes nothing


@safety
def test_velocity_tasks_take_no_task_parameters() -> None:
    needs_safety()
    env = gym.make("gymcurric/SafetySwimmerVelocity-v1")
    env.reset(seed=0, options={"task": {}})
    with pytest.raises(TaskError, match="'velocity_threshold': 1"):
        env.reset(seed=0, options={"task": {"velocity_threshold": 1}})
    env.close()


# --- pickling and processes ----------------------------------------------------------------------


@safety
def test_pickle_cloudpickle_and_deepcopy_recreate_the_env(goal_env: Any) -> None:
    import cloudpickle

    reference = _rollout(goal_env, seed=11, steps=5)
    for clone in (
        pickle.loads(pickle.dumps(goal_env)),
        cloudpickle.loads(cloudpickle.dumps(goal_env)),
        copy.deepcopy(goal_env),
    ):
        assert clone.spec == goal_env.spec and clone.unwrapped.render_mode == "rgb_array"
        assert _same(_rollout(clone, seed=11, steps=5), reference)
        clone.close()


@safety
def test_async_vector_env_with_spawn_reports_costs(goal_env: Any) -> None:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    fn = functools.partial(make_safety_env, "SafetyPointGoal1-v0")
    venv = gym.vector.AsyncVectorEnv([fn, fn], context="spawn")
    try:
        obs, _ = venv.reset(seed=[7, 8])
        local, _ = goal_env.reset(seed=7, options={"task": {}})
        assert np.array_equal(obs[0], local)  # same seed, other process
        for _ in range(3):
            obs, _, _, _, info = venv.step(venv.action_space.sample())
            assert info["cost"].shape == (2,) and info["_cost"].all()
    finally:
        venv.close()


@safety
def test_sb3_subproc_vec_env_with_spawn_reports_costs() -> None:
    needs_safety()
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from gymcurric.envs.safety_gymnasium import make_safety_env

    fn = functools.partial(make_safety_env, "SafetyHopperVelocity-v1")
    venv = SubprocVecEnv([fn, fn], start_method="spawn")
    try:
        venv.seed(0)
        venv.reset()
        for _ in range(3):
            _, _, _, infos = venv.step(np.stack([venv.action_space.sample() for _ in range(2)]))
            assert all(isinstance(info["cost"], float) for info in infos)
    finally:
        venv.close()


@safety
def test_check_command_runs() -> None:
    needs_safety()
    from gymcurric.envs.safety_gymnasium import main

    assert main(["check"]) == 0
    assert main(["bogus"]) == 2


# --- slow: every id, every start method -----------------------------------------------------------


@pytest.mark.slow
@safety
@pytest.mark.parametrize("env_id", SAFETY_GYMNASIUM_IDS)
def test_every_id(env_id: str) -> None:
    needs_safety()
    spec = importlib.util.find_spec("safety_gymnasium")
    package_dir = os.path.dirname(str(spec.origin if spec else ""))
    needed = safety_env_spec(env_id).required_files
    if not all(os.path.exists(os.path.join(package_dir, f)) for f in needed):
        with pytest.raises(EnvUnavailableError):  # the Race tasks with the 1.0.0 wheel
            gym.make(f"gymcurric/{env_id}")
        return
    vision = safety_env_spec(env_id).is_vision
    env = gym.make(f"gymcurric/{env_id}", **(VISION_SMALL if vision else SMALL))
    try:
        first, second = _rollout(env, seed=5, steps=10), _rollout(env, seed=5, steps=10)
        assert _same(first, second)
        assert isinstance(env.render(), np.ndarray)
    finally:
        env.close()


FORK_SCRIPT = """
import functools, sys, numpy as np, gymnasium as gym
from gymcurric.envs.safety_gymnasium import make_safety_env
from stable_baselines3.common.vec_env import SubprocVecEnv
ctx = sys.argv[1]
fns = [functools.partial(make_safety_env, "SafetyPointGoal1Vision-v0", render_mode="rgb_array",
       config={"vision_env_conf.vision_size": (32, 32)})] * 2
for shared in (True, False):
    venv = gym.vector.AsyncVectorEnv(fns, context=ctx, shared_memory=shared)
    venv.reset(seed=0)
    _, _, _, _, info = venv.step(venv.action_space.sample())
    assert info["_cost"].all() and venv.render() is not None
    venv.close()
sb3 = SubprocVecEnv(fns, start_method=ctx)
sb3.reset()
_, _, _, infos = sb3.step(np.stack([sb3.action_space.sample()] * 2))
assert all("cost" in i for i in infos)
sb3.close()
print("ok")
"""


@pytest.mark.slow
@safety
@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
def test_vector_envs_under_every_start_method(context: str) -> None:
    needs_safety()
    pytest.importorskip("stable_baselines3")
    # A fresh process that has not rendered: forking after rendering hangs (see the docs).
    result = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, context], capture_output=True, text=True, timeout=280
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
