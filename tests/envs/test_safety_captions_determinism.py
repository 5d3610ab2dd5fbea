"""Same seed, same captions (issue 26): across envs, re-resets, vector envs and interpreters.

``test_safety_captions.py`` checks two envs made one after the other in one process. Here: two
envs stepped in turn (no state shared between captioners), one env reset twice with a seed,
captions in a ``SyncVectorEnv``, and in a fresh interpreter; and turning captions on does not
change the trajectory (the captioner only reads the simulator).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytestmark = [pytest.mark.safety, pytest.mark.usefixtures("safety_installed")]

STEPS = 30
# A script that prints the captions of ``rollout`` in a new interpreter, as JSON.
SCRIPT = """
import json, sys
import numpy as np
from gymcurric.envs.safety_gymnasium import make_safety_env
env = make_safety_env(sys.argv[1], caption=True)
_, info = env.reset(seed=int(sys.argv[2]))
captions = [info["caption"]]
for action in np.random.default_rng(int(sys.argv[2])).uniform(-1, 1, (int(sys.argv[3]), 2)):
    captions.append(env.step(action)[4]["caption"])
env.close()
print(json.dumps(captions))
"""


def actions(seed: int, steps: int = STEPS) -> np.ndarray:
    """The actions the subprocess script draws (Point and Car: 2 actuators in [-1, 1])."""
    return np.random.default_rng(seed).uniform(-1, 1, (steps, 2))


def rollout(env: Any, seed: int, steps: int = STEPS) -> list[str]:
    _, info = env.reset(seed=seed)
    captions = [info["caption"]]
    for action in actions(seed, steps):
        captions.append(env.step(action)[4]["caption"])
    return captions


def make(env_id: str, **kwargs: Any) -> Any:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    return make_safety_env(env_id, caption=True, **kwargs)


@pytest.fixture(scope="module")
def goal1() -> Iterator[Any]:
    """One SafetyPointGoal1 env for the tests here, each resetting it with a seed first.

    A re-reset with a seed repeats the captions
    (``test_a_re_reset_with_the_same_seed_repeats_the_captions_and_another_seed_does_not``), so
    this saves the builds (about a second each) without changing what a test sees. Asked for with
    ``request.getfixturevalue`` inside a test, after ``safety_installed`` has run.
    """
    env = make("SafetyPointGoal1-v0")
    yield env
    env.close()


@pytest.mark.parametrize("env_id", ["SafetyPointGoal1-v0", "SafetyCarPush2-v0"])
def test_two_envs_stepped_in_turn_caption_alike(env_id: str, request: Any) -> None:
    # two instances all the same: one may be the module's, the other is new
    shared = env_id == "SafetyPointGoal1-v0"
    first = request.getfixturevalue("goal1") if shared else make(env_id)
    second = make(env_id)
    _, a = first.reset(seed=4)
    _, b = second.reset(seed=4)
    captions = [(a["caption"], b["caption"])]
    for action in actions(4):
        captions.append((first.step(action)[4]["caption"], second.step(action)[4]["caption"]))
    assert all(x == y for x, y in captions), captions
    assert len({x for x, _ in captions}) > 1  # the captions follow the state
    if not shared:
        first.close()
    second.close()


def test_a_re_reset_with_the_same_seed_repeats_the_captions_and_another_seed_does_not() -> None:
    env = make("SafetyPointButton1-v0")
    once = rollout(env, seed=9)
    other = rollout(env, seed=10)
    again = rollout(env, seed=9)
    env.close()
    assert once == again
    assert once != other


def test_captions_on_do_not_change_the_trajectory() -> None:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    on, off = make("SafetyPointGoal2-v0"), make_safety_env("SafetyPointGoal2-v0")
    obs_on, _ = on.reset(seed=2)
    obs_off, _ = off.reset(seed=2)
    assert np.array_equal(obs_on, obs_off)
    for action in actions(2):
        step_on, step_off = on.step(action), off.step(action)
        assert np.array_equal(step_on[0], step_off[0])
        assert step_on[1:4] == step_off[1:4]
        assert {k: v for k, v in step_on[4].items() if k != "caption"} == step_off[4]
    on.close()
    off.close()


def test_a_vector_env_captions_each_sub_env_as_its_own_seed(request: Any) -> None:
    env_id = "SafetyPointGoal1-v0"
    vec = gym.vector.SyncVectorEnv([lambda: make(env_id) for _ in range(2)])
    _, infos = vec.reset(seed=[6, 8])
    vector = [list(infos["caption"])]
    both = np.stack([actions(6, 10), actions(8, 10)], axis=1)
    for step in both:
        _, _, terminated, truncated, infos = vec.step(step)
        assert not (terminated.any() or truncated.any())
        vector.append(list(infos["caption"]))
    vec.close()
    single = request.getfixturevalue("goal1")  # a separate env, reset with each seed
    for i, seed in enumerate((6, 8)):
        assert [row[i] for row in vector] == rollout(single, seed, steps=10)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["SafetyPointGoal1-v0", "SafetyCarButton2-v0"])
def test_a_fresh_interpreter_gives_the_same_captions(env_id: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, env_id, "5", str(STEPS)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    there = json.loads(done.stdout.strip().splitlines()[-1])
    env = make(env_id)
    here = rollout(env, seed=5)
    env.close()
    assert there == here
