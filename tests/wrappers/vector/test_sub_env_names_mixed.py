"""A vector env that mixes gymcurric's curriculum wrappers and look-alikes: each by its own names.

A checkpoint accepts a sub-env with every plain name of the curriculum wrapper (``task_id``,
``pending_task_id``, ``resuming``, ``flush_curriculum``) and no wrapper mark (a look-alike), and
reaches it by those names. It used to decide per vector env: one look-alike made every sub-env
read, set and flushed by the plain names, so a real wrapper under a user's wrapper with names of
its own beside it was read as the user's (``env_task_ids`` failed on ``int("mine")``), its
resumed task went to the user's attributes (its reset did not resume it), and the user's
``flush_curriculum()`` ran instead of the wrapper's. Now each sub-env is reached by the names it
has: the wrapper's through names only it has, a look-alike's by the plain names.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from gymcurric.errors import ConfigError
from gymcurric.wrappers import (
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers._sub_envs import call_sub_envs
from tests.sub_env_faults import LookAlike, shadowing_curriculum, shared_curriculum_envs


def mixed(cur: Any, vec: str) -> Any:
    """Sub-env 0 a look-alike, sub-env 1 a curriculum wrapper under a user's wrapper."""
    fns = [LookAlike, partial(shadowing_curriculum, cur)]
    return AsyncVectorEnv(fns, context="fork") if vec == "async" else SyncVectorEnv(fns)


def armed(envs: Any) -> tuple[int, int | None]:
    """Sub-env 1's wrapper's ``curriculum_task_ids()`` (the look-alike has none)."""
    return tuple(call_sub_envs(envs, "curriculum_task_ids", indices=[1])[0])


def attr(envs: Any, i: int, name: str) -> Any:
    """Sub-env ``i``'s attribute ``name`` (which the other sub-env lacks)."""
    return call_sub_envs(envs, "get_wrapper_attr", name, indices=[i])[0]


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_each_sub_env_of_a_mix_is_read_set_and_flushed_by_its_own_names(tmp_path, vec):
    with shared_curriculum_envs(lambda cur: mixed(cur, vec)) as (cur, envs):
        _, info = envs.reset(seed=0)
        task = int(info["task_id"][1])
        assert env_task_ids(envs) == [2, task]  # was int("mine"): ValueError
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert np.load(path)["env_task_ids"].tolist() == [2, task]
        assert attr(envs, 1, "calls") == []  # was ["flush_curriculum"]: the user's ran
        assert attr(envs, 0, "flushes") == 1  # the look-alike's, by its name
        for _ in range(6):  # sub-env 1's 4-step episode ends, its next task starts
            envs.step(np.zeros(2, np.int64))
        load_curriculum_state(path, cur, env=envs)
        # the look-alike is set by the plain names; the user's attributes are left alone
        assert envs.get_attr("pending_task_id") == (2, "mine")
        assert envs.get_attr("resuming") == (True, "mine")
        assert armed(envs)[1] == task  # the wrapper is armed
        again = save_curriculum_state(tmp_path / "again.npz", cur, env=envs)
        assert np.load(again)["env_task_ids"].tolist() == [2, task]  # armed, not reset yet
        _, info = envs.reset()
        assert info["task_id"][1] == task  # resumed
        assert attr(envs, 1, "calls") == []


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_resume_env_tasks_arms_each_sub_env_of_a_mix_by_its_own_names(vec):
    with shared_curriculum_envs(lambda cur: mixed(cur, vec)) as (cur, envs):
        _, info = envs.reset(seed=0)
        task = int(info["task_id"][1])
        resume_env_tasks(envs, [-1, 5])
        assert envs.get_attr("pending_task_id") == (-1, "mine")
        assert envs.get_attr("resuming") == (True, "mine")
        assert armed(envs) == (task, 5)
        _, info = envs.reset()
        assert info["task_id"][1] == 5


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_call_sub_envs_each_calls_each_sub_env_by_its_own_name(vec):
    from gymcurric.errors import SubEnvCallError
    from gymcurric.wrappers._sub_envs import call_sub_envs_each

    with shared_curriculum_envs(lambda cur: mixed(cur, vec)) as (cur, envs):
        envs.reset(seed=0)
        names = ["get_wrapper_attr", "curriculum_task_ids"]
        assert call_sub_envs_each(envs, names, [("task_id",), ()])[0] == 2
        with pytest.raises(SubEnvCallError) as err:  # the error names the sub-env's own
            call_sub_envs_each(envs, ["has_wrapper_attr", "no_such_method"], [("x",), ()])
        assert (err.value.index, err.value.method) == (1, "no_such_method")
        with pytest.raises(ConfigError):  # one name per sub-env
            call_sub_envs_each(envs, ["has_wrapper_attr"], [("x",), ("x",)])


@pytest.mark.parametrize("vec", ["async", "sync"])
@pytest.mark.parametrize("refusing", [0, 1])
def test_a_wrapper_of_a_mix_that_refuses_its_task_leaves_every_sub_env_as_it_was(vec, refusing):
    # the look-alike is set in the same pass as the wrapper refuses (before it, or after it)
    from gymcurric.errors import SubEnvCallError
    from tests.sub_env_faults import resume_refuses

    def make(cur: Any) -> Any:
        fns: list[Any] = [LookAlike, LookAlike]
        fns[refusing] = partial(resume_refuses, cur, [5])
        return AsyncVectorEnv(fns, context="fork") if vec == "async" else SyncVectorEnv(fns)

    with shared_curriculum_envs(make) as (_, envs):
        envs.reset(seed=0)
        ids = [3, 3]
        ids[refusing] = 5
        with pytest.raises(SubEnvCallError) as err:
            resume_env_tasks(envs, ids)
        assert (err.value.index, err.value.method) == (refusing, "resume_curriculum_task")
        assert "put back" in err.value.__notes__[-1]
        other = 1 - refusing
        assert attr(envs, other, "pending_task_id") is None  # was set to 3 in the same pass
        assert attr(envs, other, "resuming") is False
        assert call_sub_envs(envs, "curriculum_task_ids", indices=[refusing])[0][1] is None


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_mix_reads_no_plain_name_of_a_wrapped_sub_env(tmp_path, vec):
    # the look-alikes' plain names were read from every sub-env (get_attr) and the wrapped
    # ones' dropped: a task_id of a user's wrapper above the curriculum wrapper that cannot be
    # pickled (a lock) ended that AsyncVectorEnv worker (TypeError: cannot pickle '_thread.lock')
    from tests.sub_env_faults import unsendable_task_id_curriculum

    def make(cur: Any) -> Any:
        fns = [LookAlike, partial(unsendable_task_id_curriculum, cur)]
        return AsyncVectorEnv(fns, context="fork") if vec == "async" else SyncVectorEnv(fns)

    with shared_curriculum_envs(make) as (cur, envs):
        _, info = envs.reset(seed=0)
        task = int(info["task_id"][1])
        assert env_task_ids(envs) == [2, task]
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert np.load(path)["env_task_ids"].tolist() == [2, task]
        resume_env_tasks(envs, [3, 5])
        assert attr(envs, 0, "pending_task_id") == 3 and armed(envs) == (task, 5)
        load_curriculum_state(path, cur, env=envs)
        assert attr(envs, 0, "pending_task_id") == 2 and armed(envs) == (task, task)
        _, info = envs.reset()  # the workers go on: sub-env 1 resumes its saved task
        assert info["task_id"][1] == task


def record_messages(envs: Any) -> list[tuple[str, Any]]:
    """Record the messages ``envs`` (a Gymnasium vector env) sends its sub-envs: method, name.

    A message sent inside another (``AsyncVectorEnv.get_attr`` sends a ``call``) is one.
    """
    sent: list[tuple[str, Any]] = []
    inside: list[str] = []
    base = envs.unwrapped

    def recording(method: Any) -> Any:
        def record(name: str, *args: Any, **kwargs: Any) -> Any:
            if not inside:
                sent.append((method.__name__, name))
            inside.append(name)
            try:
                return method(name, *args, **kwargs)
            finally:
                inside.pop()

        return record

    for method in ("call", "get_attr", "set_attr"):
        setattr(base, method, recording(getattr(base, method)))
    return sent


@pytest.mark.parametrize("kind", ["wrapped", "look-alikes"])
def test_envs_of_one_kind_are_read_with_the_messages_they_were(tmp_path, kind):
    # a mix is read by safe calls, each sub-env for its own names; a vector env of one kind as
    # before: the wrappers by one safe curriculum_task_ids(), the look-alikes by get_attr
    def make(cur: Any) -> Any:
        sub = LookAlike if kind == "look-alikes" else partial(shadowing_curriculum, cur)
        return AsyncVectorEnv([sub, sub], context="fork")

    has, safe = ("call", "has_wrapper_attr"), ("call", "gymcurric_call")
    with shared_curriculum_envs(make) as (cur, envs):
        envs.reset(seed=0)
        sent = record_messages(envs)
        env_task_ids(envs)
        read = list(sent)
        save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
    if kind == "wrapped":  # the mark; curriculum_task_ids(); then the save's flush first
        assert read == [has, safe]
        assert sent[2:] == [has, safe, safe]
    else:  # the mark and each name; task_id; the save's flush, then the three names
        assert read == [has] * 5 + [("get_attr", "task_id")]
        names = ["task_id", "resuming", "pending_task_id"]
        assert sent[6:] == [has] * 5 + [safe] + [("get_attr", n) for n in names]


def test_a_mix_is_read_in_safe_calls_only():
    # the look-alikes' task_id was read by get_attr from every sub-env (8 messages; 7 now)
    def make(cur: Any) -> Any:
        return AsyncVectorEnv([LookAlike, partial(shadowing_curriculum, cur)], context="fork")

    with shared_curriculum_envs(make) as (_, envs):
        envs.reset(seed=0)
        sent = record_messages(envs)
        env_task_ids(envs)
    assert sent == [("call", "has_wrapper_attr")] * 5 + [
        ("set_attr", "gymcurric_staged_call"),
        ("call", "gymcurric_call"),
    ]
