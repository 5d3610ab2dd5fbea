"""Curriculum checkpoints of Gymnasium vector envs whose sub-envs are not wrapped.

An ``AsyncVectorEnv`` worker exits on any exception raised by a ``call`` / ``get_attr`` in it,
so ``save_curriculum_state`` / ``load_curriculum_state`` / ``env_task_ids`` must find out
whether the sub-envs are wrapped in ``SampleCurriculumTask`` before calling anything there:
the user gets a ``ConfigError`` naming the sub-envs and what they lack, and keeps a working env.
"""

import re
import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import (
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers.vector import SampleCurriculumTask as VectorSampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv, make_stub, make_wrapped
from tests.wrappers.unwrapped_cases import (
    NOT_WRAPPED,
    SOURCES,
    SPACE,
    TaskIdStubEnv,
    checkpoint,
    make_task_id_stub,
)


def vector(fns, mode):
    if mode == "async":
        return gym.vector.AsyncVectorEnv(fns, context="fork")
    return gym.vector.SyncVectorEnv(fns)


def cartpoles(mode, n=2):
    return vector([partial(gym.make, "CartPole-v1")] * n, mode)


def attempt(action, envs, tmp_path):
    if action == "save":
        save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE, seed=0), env=envs)
    elif action == "load":
        path = checkpoint(tmp_path, envs.num_envs)
        load_curriculum_state(path, Curriculum(SPACE, seed=0), env=envs)
    elif action == "task_ids":
        env_task_ids(envs)
    else:
        resume_env_tasks(envs, [-1] * envs.num_envs)


def refused(action, envs, tmp_path, capsys, *, match):
    """The ConfigError of ``action``, after checking that ``envs`` survived it.

    Its workers are alive, no worker reported an error (Gymnasium logs a worker's traceback
    as a warning, or on stderr), and the env still resets and steps.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ConfigError) as info:
            attempt(action, envs, tmp_path)
    base = envs.unwrapped
    if isinstance(base, gym.vector.AsyncVectorEnv):
        assert all(p.is_alive() for p in base.processes), "a worker was shut down"
    reported = [str(w.message) for w in caught] + [capsys.readouterr().err]
    assert not any("Worker" in r or "Traceback" in r for r in reported), reported
    base.reset(seed=1)
    for _ in range(3):
        base.step(base.action_space.sample())
    assert re.search(match, str(info.value)), str(info.value)
    assert "Traceback" not in str(info.value)
    assert info.value.source == SOURCES[action]
    return info.value


ACTIONS = list(SOURCES)


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("action", ACTIONS)
def test_bare_vector_env_of_unwrapped_envs(tmp_path, capsys, mode, action):
    envs = cartpoles(mode)
    try:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        for _ in range(2):  # and again: the env is intact, so is the error
            exc = refused(action, envs, tmp_path, capsys, match=NOT_WRAPPED.format("0, 1", 2))
            assert "'flush_curriculum'" in exc.reason
    finally:
        envs.close()
    assert not (tmp_path / "c.npz").exists()


@pytest.mark.parametrize("action", ACTIONS)
def test_async_env_partly_wrapped_names_the_unwrapped_sub_envs(tmp_path, capsys, action):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    fns = [partial(make_wrapped, cur, "a"), make_stub, partial(make_wrapped, cur, "c")]
    envs = vector(fns, "async")
    try:
        envs.reset(seed=0)
        before = cur.state_dict()["arrays"]
        refused(action, envs, tmp_path, capsys, match=NOT_WRAPPED.format("1", 3))
        after = cur.state_dict()["arrays"]
        assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)
    finally:
        envs.close()


@pytest.mark.parametrize("action", ACTIONS)
def test_an_env_task_id_of_its_own_is_not_the_wrapper(tmp_path, capsys, action):
    # a check for task_id alone passes here, and flush_curriculum would then kill the workers
    envs = vector([make_task_id_stub, make_task_id_stub], "async")
    try:
        envs.reset(seed=0)
        exc = refused(action, envs, tmp_path, capsys, match=NOT_WRAPPED.format("0, 1", 2))
        assert "'flush_curriculum'" in exc.reason and "'task_id'" not in exc.reason
    finally:
        envs.close()


@pytest.mark.parametrize("action", ["save", "load"])
def test_vector_curriculum_wrapper_over_unwrapped_async_sub_envs(tmp_path, capsys, action):
    # the vector twin cannot check an AsyncVectorEnv's sub-envs when it is built (it finds out
    # at the first reset); a checkpoint before that must not kill the workers either
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = VectorSampleCurriculumTask(vector([make_stub, make_stub], "async"), cur)
    try:
        refused(action, envs, tmp_path, capsys, match=NOT_WRAPPED.format("0, 1", 2))
    finally:
        envs.close()


def test_single_unwrapped_env_is_a_clear_error(tmp_path):
    env = TaskStubEnv()
    with pytest.raises(ConfigError, match=r"'env'.*not wrapped in gymcurric\.wrappers\.Sample"):
        save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE, seed=0), env=env)
    with pytest.raises(ConfigError, match="'task_id'"):
        env_task_ids(env)


def count_questions(envs):
    """Make ``envs.call`` count its ``has_wrapper_attr`` calls (each a round trip to workers)."""
    asked = []
    call = envs.call

    def counting(name, *args, **kwargs):
        if name == "has_wrapper_attr":
            asked.append(args)
        return call(name, *args, **kwargs)

    envs.call = counting
    return asked


@pytest.mark.parametrize("action", ACTIONS)
def test_wrapped_sub_envs_are_asked_once(tmp_path, action):
    # one round trip for the check, not one per name the checkpoint needs
    cur = Curriculum(SPACE, seed=0)
    envs = gym.vector.SyncVectorEnv([partial(make_wrapped, cur)] * 2)
    envs.reset(seed=0)
    path = checkpoint(tmp_path, 2) if action == "load" else None
    asked = count_questions(envs)
    if action == "load":
        load_curriculum_state(path, Curriculum(SPACE, seed=0), env=envs)
    else:
        attempt(action, envs, tmp_path)
    assert len(asked) == 1, asked


class LookAlikeEnv(TaskStubEnv):
    """Every name a checkpoint uses, without gymcurric's wrapper: accepted, as it always was."""

    task_id, pending_task_id, resuming = 2, None, False

    def flush_curriculum(self):
        pass


def test_an_env_with_every_name_of_the_wrapper_is_accepted(tmp_path):
    envs = gym.vector.SyncVectorEnv([LookAlikeEnv, partial(make_wrapped, Curriculum(SPACE))])
    envs.reset(seed=0)
    assert env_task_ids(envs)[0] == 2
    save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE, seed=0), env=envs)


def test_the_wrapper_mark_implies_every_name_a_checkpoint_uses():
    # sound only while SampleCurriculumTask has them all: the mark is asked instead of them
    from gymcurric.wrappers import SampleCurriculumTask
    from gymcurric.wrappers._curriculum_envs import WRAPPER_ATTRS
    from gymcurric.wrappers._sub_envs import CURRICULUM_TASK_WRAPPER_MARK as MARK

    # the name the checks ask for (one constant) is the wrapper's class attribute
    assert getattr(SampleCurriculumTask, MARK) is True
    assert SampleCurriculumTask.curriculum_task_wrapper is True
    env = make_wrapped(Curriculum(SPACE, seed=0))
    assert env.has_wrapper_attr(MARK)
    assert all(env.has_wrapper_attr(name) for name in WRAPPER_ATTRS)
    assert not TaskIdStubEnv().has_wrapper_attr(MARK)
    # and the names the checkpoint reads and sets the wrapper through
    from gymcurric.wrappers._sub_envs import (
        AWAITING_RESET,
        CURRICULUM_TASK_IDS,
        FLUSH_CURRICULUM,
        RESUME_CURRICULUM_TASK,
    )

    names = (CURRICULUM_TASK_IDS, RESUME_CURRICULUM_TASK, FLUSH_CURRICULUM, AWAITING_RESET)
    assert all(callable(getattr(env, n)) for n in names)
