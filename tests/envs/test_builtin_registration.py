"""Registration of the built-in env ids (gymcurric.envs.builtin_ids)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401  (registers the ids)
from gymcurric.envs.builtin_ids import BUILTIN_ENV_IDS, register_builtin_envs
from gymcurric.envs.grid import HazardGridEnv
from gymcurric.envs.hazard_nav import HazardNavEnv

CLASSES = {"gymcurric/HazardNav-v0": HazardNavEnv, "gymcurric/HazardGrid-v0": HazardGridEnv}


def test_ids_are_registered_with_entry_point_strings_and_no_time_limit() -> None:
    assert set(BUILTIN_ENV_IDS) == set(CLASSES)
    for env_id, cls in CLASSES.items():
        spec = gym.spec(env_id)
        assert spec.entry_point == f"{cls.__module__}:{cls.__name__}"
        assert spec.max_episode_steps is None


def test_import_gymcurric_does_not_import_the_env_modules() -> None:
    code = (
        "import sys, gymcurric, gymnasium as gym;"
        "assert 'gymcurric/HazardNav-v0' in gym.registry;"
        "loaded = [m for m in ('gymcurric.envs.hazard_nav', 'gymcurric.envs.grid') "
        "if m in sys.modules];"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registration_is_idempotent_and_silent() -> None:
    before = {env_id: gym.spec(env_id) for env_id in CLASSES}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Gymnasium warns when an id is registered twice
        register_builtin_envs()
        register_builtin_envs()
    assert all(gym.spec(env_id) is spec for env_id, spec in before.items())


@pytest.mark.parametrize("env_id", sorted(CLASSES))
def test_make_builds_the_env_with_kwargs_and_it_truncates_itself(env_id: str) -> None:
    env = gym.make(env_id, render_mode="rgb_array", num_hazards=0, max_steps=3)
    assert isinstance(env.unwrapped, CLASSES[env_id])
    assert env.unwrapped.default_task["num_hazards"] == 0
    assert not any(isinstance(w, gym.wrappers.TimeLimit) for w in _wrappers(env))
    env.reset(seed=0)
    still = np.zeros(2, np.float32) if env_id.endswith("Nav-v0") else 0
    truncated = [env.step(still)[3] for _ in range(3)]
    assert truncated[-1] is True and env.render().shape == (64, 64, 3)
    env.reset(options={"task": {"max_steps": 5}})
    assert env.unwrapped.task["max_steps"] == 5


def _wrappers(env: gym.Env) -> list[gym.Env]:
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain
