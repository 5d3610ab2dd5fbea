"""Seeded HazardNav runs of the Stable-Baselines3 safe algorithms, and how to compare them.

Shared by ``test_ppo_lag.py``, ``test_p3o.py`` and the other tests here: the HazardNav task and
vector envs, parameter snapshots and exact comparisons, quiet loggers, and a saved model
continued here or in a new interpreter (``tests.new_interpreter``).
"""

import importlib

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch as th
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv

import gymcurric  # noqa: F401  (registers the built-in envs)
from tests.new_interpreter import call_in_new_interpreter

ENV_ID = "gymcurric/HazardNav-v0"
# Many hazards across the start-goal path: costs are frequent even for a random policy.
TASK = {"num_hazards": 8, "hazard_radius": 0.3, "hazard_placement": "between", "max_steps": 50}
SMALL = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "device": "cpu"}


def make_hazard(**task):
    """A HazardNav env of :data:`TASK`, with ``task`` changed."""
    return gym.make(ENV_ID, **{**TASK, **task})


def hazard_vec(n=2, seed=0):
    """A seeded DummyVecEnv of ``n`` :func:`make_hazard` envs."""
    venv = DummyVecEnv([make_hazard] * n)
    venv.seed(seed)
    return venv


def policy_params(model):
    """A copy of the policy's parameters, by name."""
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def assert_same(x, y, where="model"):
    """``x`` equals ``y`` item by item (dicts, lists, tensors); ``where`` names a difference."""
    if isinstance(x, dict | list | tuple):
        assert type(x) is type(y) and len(x) == len(y), where
        items = x.items() if isinstance(x, dict) else enumerate(x)
        for k, v in items:
            assert_same(v, y[k], f"{where}[{k!r}]")
    elif isinstance(x, th.Tensor):
        assert th.equal(x, y), where
    else:
        assert x == y, where


def silent(model):
    """``model`` with a logger that writes nowhere."""
    model.set_logger(configure(None, []))
    return model


def logged(model):
    """What ``model`` logged since its last dump, by key."""
    return model.logger.name_to_value


def no_cost_vec(seed=0):
    """A seeded DummyVecEnv of two HazardNav envs without hazards (no cost ever)."""
    venv = DummyVecEnv([lambda: gym.make(ENV_ID, num_hazards=0, max_steps=50)] * 2)
    venv.seed(seed)
    return venv


def continue_saved(module, name, path, out, steps):
    """Load ``path`` into ``module.name``, continue ``steps``, save to ``out`` (new process)."""
    cls = getattr(importlib.import_module(module), name)
    model = cls.load(path, env=hazard_vec(), device="cpu")
    model.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    model.learn(steps, reset_num_timesteps=False)
    model.save(out)


def continue_in_new_interpreter(cls, path, out, steps):
    """:func:`continue_saved` in a new interpreter; the model it saved, loaded."""
    call_in_new_interpreter(
        "tests.integrations.sb3.hazard_runs", "continue_saved",
        cls.__module__, cls.__name__, str(path), str(out), steps, timeout=120,
    )  # fmt: skip
    return cls.load(out, device="cpu")


def continue_here(model, steps):
    """Continue ``model`` ``steps`` here, seeded as :func:`continue_saved` does."""
    model.set_env(hazard_vec())  # a fresh reset of the same seeded envs, as after load
    model.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    return model.learn(steps, reset_num_timesteps=False)
