"""Curriculum checkpoints of SB3 VecEnvs whose sub-envs are not wrapped.

A ``SubprocVecEnv`` worker exits on any exception raised in it (``env_method``, ``get_attr``),
so a save or load must ask whether every sub-env is wrapped in ``SampleCurriculumTask`` before
calling anything there: a ``ConfigError`` naming the sub-envs, and a working VecEnv after it.
"""

import re
from functools import partial
from types import SimpleNamespace

import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import (
    CurriculumCallback,
    load_curriculum_state,
    save_curriculum_state,
)
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import env_task_ids, resume_env_tasks
from tests.curriculum_stubs import make_stub, make_wrapped
from tests.wrappers.unwrapped_cases import (
    NOT_WRAPPED,
    SPACE,
    checkpoint,
    make_task_id_stub,
)
from tests.wrappers.unwrapped_cases import (
    SOURCES as GYMNASIUM_SOURCES,
)

pytestmark = pytest.mark.sb3

SOURCES = {**GYMNASIUM_SOURCES, "callback": "save_curriculum_state"}


def attempt(action, venv, tmp_path):
    cur = Curriculum(SPACE, seed=0)
    if action == "save":
        save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
    elif action == "callback":  # CurriculumCallback.save, as at a checkpoint during learn()
        callback = CurriculumCallback(cur, save_path=tmp_path, save_freq=1)
        callback.model = SimpleNamespace(get_env=lambda: venv)  # its training_env
        callback.save()
    elif action == "load":
        load_curriculum_state(checkpoint(tmp_path, venv.num_envs), cur, env=venv)
    elif action == "task_ids":
        env_task_ids(venv)
    else:
        resume_env_tasks(venv, [-1] * venv.num_envs)


def refused(action, venv, tmp_path, capfd, *, match):
    """The ConfigError of ``action``, after checking that ``venv`` survived it."""
    with pytest.raises(ConfigError) as info:
        attempt(action, venv, tmp_path)
    base = venv.unwrapped
    if isinstance(base, SubprocVecEnv):
        assert all(p.is_alive() for p in base.processes), "a worker exited"
    venv.reset()
    for _ in range(3):
        venv.step([venv.action_space.sample() for _ in range(venv.num_envs)])
    assert "Traceback" not in capfd.readouterr().err  # a worker's dying words
    assert re.search(match, str(info.value)), str(info.value)
    assert info.value.source == SOURCES[action]
    assert not list(tmp_path.glob("*curriculum*.npz")) and not (tmp_path / "c.npz").exists()
    return info.value


def subproc(fns):
    return VecMonitor(SubprocVecEnv(fns, start_method="fork"))


ACTIONS = list(SOURCES)


@pytest.mark.parametrize("action", ACTIONS)
def test_subproc_partly_wrapped_names_the_unwrapped_sub_envs(tmp_path, capfd, action):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc([partial(make_wrapped, cur, "a"), make_stub, make_stub])
    try:
        refused(action, venv, tmp_path, capfd, match=NOT_WRAPPED.format("1, 2", 3))
    finally:
        venv.close()


@pytest.mark.parametrize("action", ACTIONS)
def test_subproc_env_with_a_task_id_of_its_own_is_not_wrapped(tmp_path, capfd, action):
    # SB3's has_attr("task_id") says yes here; the flush (env_method) would kill the workers
    venv = subproc([make_task_id_stub, make_task_id_stub])
    try:
        exc = refused(action, venv, tmp_path, capfd, match=NOT_WRAPPED.format("0, 1", 2))
        assert "'flush_curriculum'" in exc.reason and "'task_id'" not in exc.reason
    finally:
        venv.close()


@pytest.mark.parametrize("action", ["save", "load"])
def test_dummy_vec_env_unwrapped(tmp_path, capfd, action):
    venv = DummyVecEnv([make_stub, make_stub])
    refused(action, venv, tmp_path, capfd, match=NOT_WRAPPED.format("0, 1", 2))


@pytest.mark.parametrize("action", ["save", "load", "task_ids", "resume"])
def test_wrapped_sub_envs_are_asked_once(tmp_path, action):
    # each has_wrapper_attr is a round trip to the workers of a SubprocVecEnv: one for the check
    venv = DummyVecEnv([partial(make_wrapped, Curriculum(SPACE, seed=0))] * 2)
    venv.reset()
    path = checkpoint(tmp_path, 2) if action == "load" else None
    asked, env_method = [], venv.env_method

    def counting(name, *args, **kwargs):
        if name == "has_wrapper_attr":
            asked.append(args)
        return env_method(name, *args, **kwargs)

    venv.env_method = counting
    if action == "load":
        load_curriculum_state(path, Curriculum(SPACE, seed=0), env=venv)
    else:
        attempt(action, venv, tmp_path)
    assert len(asked) == 1, asked
