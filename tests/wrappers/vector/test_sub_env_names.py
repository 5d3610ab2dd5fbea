"""gymcurric reads and sets its own wrappers in the sub-envs of Gymnasium vector envs.

A vector env's ``get_attr`` / ``set_attr`` reach the outermost layer of a sub-env with the name:
a user's wrapper above gymcurric's with a ``task_id``, ``pending_task_id``, ``resuming`` or
``next_datapack`` of its own was read (``env_task_ids`` failed on ``int("mine")``) or set (the
datapack presets and the resumed tasks went to the user's attributes) instead of gymcurric's.
Now those go through names only gymcurric's wrappers have. And a per-sub-env set that fails
there (resuming a task, binding to the task channel) was raised by Gymnasium after it shut the
sub-env's worker down; now the error names the sub-env and the worker goes on.
"""

from __future__ import annotations

import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from gymcurric.errors import ConfigError, SubEnvCallError
from gymcurric.tasks import Curriculum
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import (
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers._sub_envs import call_sub_envs_each
from gymcurric.wrappers.vector import make_curriculum_vec
from gymcurric.wrappers.vector.datapack import PresentDatapack
from tests.curriculum_stubs import make_wrapped
from tests.sub_env_faults import (
    SPACE,
    resume_refuses,
    shadowing_curriculum,
    shadowing_present_datapack,
)
from tests.wrappers.vector.datapack_stubs import ENV_ID, Events, packs
from tests.wrappers.vector.refused_loads import refuse_a_load_that_cannot_be_put_back

STUB = gym.envs.registration.EnvSpec(
    "gymcurric-test/TaskStub-v0", entry_point="tests.curriculum_stubs:TaskStubEnv"
)


def vector(fns, vec):
    return AsyncVectorEnv(fns, context="fork") if vec == "async" else SyncVectorEnv(fns)


def worker_errors(caught, capfd):
    """What Gymnasium reported of a worker's error (it logs one as a warning or on stderr)."""
    reported = [str(w.message) for w in caught] + [capfd.readouterr().err]
    return [r for r in reported if "Worker" in r or "Traceback" in r]


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_user_task_id_above_the_curriculum_wrapper_is_not_read_or_set(tmp_path, vec):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(shadowing_curriculum, cur)] * 2, vec)
    try:
        _, info = envs.reset(seed=0)
        started = info["task_id"].tolist()
        assert env_task_ids(envs) == started  # was ["mine", "mine"]: int("mine") raised
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert np.load(path)["env_task_ids"].tolist() == started
        for _ in range(6):  # the 4-step episodes end, the next tasks start
            envs.step(np.zeros(2, np.int64))
        load_curriculum_state(path, cur, env=envs)
        # the resumed tasks went to the curriculum wrapper, not to the user's attributes
        assert envs.get_attr("pending_task_id") == ("mine", "mine")
        assert envs.get_attr("resuming") == ("mine", "mine")
        again = save_curriculum_state(tmp_path / "again.npz", cur, env=envs)
        assert np.load(again)["env_task_ids"].tolist() == started  # armed, not reset yet
        _, info = envs.reset()
        assert info["task_id"].tolist() == started
    finally:
        envs.close()
        cur.close()


def test_a_user_task_id_above_a_single_env_curriculum_wrapper_is_not_read_or_set(tmp_path):
    cur = Curriculum(SPACE, seed=0)
    env = shadowing_curriculum(cur)
    _, info = env.reset(seed=0)
    assert env_task_ids(env) == [info["task_id"]]  # get_wrapper_attr("task_id"): "mine"
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=env)
    load_curriculum_state(path, cur, env=env)
    assert (env.pending_task_id, env.resuming) == ("mine", "mine")
    assert env.env.resuming  # the curriculum wrapper's (env.env)
    assert env.reset()[1]["task_id"] == info["task_id"]


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_user_next_datapack_above_present_datapack_does_not_take_the_presets(vec):
    # set_attr("next_datapack") set the user's attribute: the sub-env had no preset to present
    sampler = Events(packs())
    base = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode=vec, wrappers=[shadowing_present_datapack]
    )
    envs = PresentDatapack(base, sampler)
    try:
        _, info = envs.reset(seed=0)
        assert info["datapack"]["pack_id"].tolist() == ["p0", "p1"]
        for _ in range(12):
            envs.step(np.zeros(2, dtype=np.int64))
        assert len(sampler.reports()) >= 2
        assert base.get_attr("next_datapack") == ("mine", "mine")  # the user's: untouched
    finally:
        envs.close()


def armed(envs):
    """What each sub-env's next reset resumes (None: nothing), read from the wrapper itself."""
    return [r for _, r in envs.call("curriculum_task_ids")]


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_resuming_a_task_a_sub_env_refuses_names_it_keeps_the_workers_and_arms_none(capfd, vec):
    # sub-env 1's wrapper refuses task 2 in its process: the others are put back
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(resume_refuses, cur), partial(resume_refuses, cur, [2])], vec)
    try:
        envs.reset(seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            match = r"sub-env 1: resume_curriculum_task\(\) raised builtins.ValueError: this"
            with pytest.raises(SubEnvCallError, match=match) as err:
                resume_env_tasks(envs, [1, 2])
        assert err.value.index == 1 and isinstance(err.value.__cause__, ValueError)
        assert "put back" in err.value.__notes__[-1]
        assert armed(envs) == [None, None]  # sub-env 0 resumed task 1 at its next reset
        if vec == "async":
            assert all(p.is_alive() for p in envs.processes), "a worker was shut down"
        assert not worker_errors(caught, capfd)
        resume_env_tasks(envs, [1, 3])  # it goes on
        _, info = envs.reset()
        assert info["task_id"].tolist() == [1, 3]
    finally:
        envs.close()
        cur.close()


@pytest.mark.parametrize("vec", ["async", "sync"])
@pytest.mark.parametrize(
    ("task_ids", "key", "value"),
    [
        ([1, -5, 2], "task_ids[1]", -5),
        ([1, 2, True], "task_ids[2]", True),
        ([1.0, 2, 3], "task_ids[0]", 1.0),
        ([1, None, 3], "task_ids[1]", None),
        ([1, 2], "task_ids", [1, 2]),
    ],
)
def test_task_ids_are_checked_before_any_sub_env_is_armed(vec, task_ids, key, value):
    # sub-envs 0 and 2 were armed when sub-env 1's wrapper refused -5
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(make_wrapped, cur)] * 3, vec)
    try:
        envs.reset(seed=0)
        with pytest.raises(ConfigError) as err:
            resume_env_tasks(envs, task_ids)
        assert (err.value.key, err.value.value) == (key, value)
        assert err.value.source == "resume_env_tasks"
        if key != "task_ids":
            assert f"sub-env {key[9]}" in str(err.value)
        assert armed(envs) == [None, None, None]
    finally:
        envs.close()
        cur.close()


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_load_a_sub_env_refuses_loads_nothing_and_arms_no_sub_env(tmp_path, vec):
    # the curriculum was loaded, and sub-env 0 armed, before sub-env 1 refused its task
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(resume_refuses, cur), partial(resume_refuses, cur, range(8))], vec)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        for _ in range(6):  # the 4-step episodes end, the curriculum learns of them
            envs.step(np.zeros(2, np.int64))
        save_curriculum_state(tmp_path / "now.npz", cur, env=envs)  # flushes the workers
        now = cur.state_dict()
        with pytest.raises(SubEnvCallError, match="sub-env 1: resume_curriculum_task"):
            load_curriculum_state(path, cur, env=envs)
        after = cur.state_dict()
        assert {k: v for k, v in after.items() if k != "arrays"} == {
            k: v for k, v in now.items() if k != "arrays"
        }
        for name, array in now["arrays"].items():
            np.testing.assert_array_equal(after["arrays"][name], array, err_msg=name)
        assert armed(envs) == [None, None]
        if vec == "async":
            assert all(p.is_alive() for p in envs.processes), "a worker was shut down"
    finally:
        envs.close()
        cur.close()


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_user_flush_curriculum_above_the_curriculum_wrapper_is_not_called(tmp_path, vec):
    # call("flush_curriculum") ran the user's (the outermost layer with the name) instead
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(shadowing_curriculum, cur)] * 2, vec)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        load_curriculum_state(path, cur, env=envs)
        assert envs.get_attr("calls") == ([], [])
    finally:
        envs.close()
        cur.close()


def test_a_user_awaiting_reset_above_a_single_env_curriculum_wrapper_is_not_called(tmp_path):
    # the user's awaiting_reset() ([True]) was found first: the running task was saved as -1
    cur = Curriculum(SPACE, seed=0)
    env = shadowing_curriculum(cur)
    _, info = env.reset(seed=0)
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=env)
    assert np.load(path)["env_task_ids"].tolist() == [info["task_id"]]
    for _ in range(4):  # the episode ends: the wrapper's own awaiting_reset() says so
        env.step(0)
    ended = save_curriculum_state(tmp_path / "ended.npz", cur, env=env)
    assert np.load(ended)["env_task_ids"].tolist() == [-1]
    load_curriculum_state(path, cur, env=env)
    assert env.calls == []  # nor its flush_curriculum()
    assert env.reset()[1]["task_id"] == info["task_id"]


def test_a_sub_env_that_cannot_bind_to_the_channel_is_named_and_its_worker_goes_on(
    monkeypatch, capfd
):
    # set_attr("channel_index") raised in sub-env 1's worker, which Gymnasium then shut down
    bind = TaskChannel.transport

    def transport(self, env, fallback):
        if env == 1:
            raise OSError("no shared memory left")
        return bind(self, env, fallback)

    monkeypatch.setattr(TaskChannel, "transport", transport)  # the forked workers inherit it
    alive = []
    close = AsyncVectorEnv.close

    def closing(self, **kwargs):  # make_curriculum_vec closes the env it could not bind
        alive.append([p.is_alive() for p in self.processes])
        return close(self, **kwargs)

    monkeypatch.setattr(AsyncVectorEnv, "close", closing)
    cur = Curriculum(SPACE, seed=0, backend="shared")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            match = r"sub-env 1: set_wrapper_attr\(\) raised builtins.OSError: no shared memory"
            with pytest.raises(SubEnvCallError, match=match) as err:
                make_curriculum_vec(
                    STUB, cur, 2, vectorization_mode="async", vector_kwargs={"context": "fork"}
                )
        assert err.value.index == 1 and isinstance(err.value.__cause__, OSError)
        assert alive == [[True, True]], "a worker was shut down"
        assert not worker_errors(caught, capfd)
    finally:
        cur.close()


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_call_sub_envs_each_gives_each_sub_env_its_own_arguments(vec):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(make_wrapped, cur)] * 3, vec)
    try:
        envs.reset(seed=0)
        done = call_sub_envs_each(envs, "resume_curriculum_task", [(5,), (-1,), (7,)])
        assert done == [None] * 3
        assert [r for _, r in envs.call("curriculum_task_ids")] == [5, -1, 7]
        assert not any(envs.call("has_wrapper_attr", "gymcurric_staged_call"))  # taken
        with pytest.raises(ConfigError, match="one per env"):
            call_sub_envs_each(envs, "resume_curriculum_task", [(5,)])
    finally:
        envs.close()
        cur.close()


def resume_as_a_new_run(path: str, vecs: list[str]) -> list[list[list[int]]]:
    """In a new interpreter: per vector env kind, the tasks of the reset after each resume.

    The first safe call of this process, and of each spawn worker, is ``resume_env_tasks``'s
    ``call_sub_envs_each`` (``check_wrapped`` only asks ``has_wrapper_attr``): it must give
    them ``gymcurric_call`` itself, before it is called there. Then ``path`` is loaded.
    """
    got = []
    for vec in vecs:
        cur = Curriculum(SPACE, seed=0, backend="shared")
        fns = [partial(shadowing_curriculum, cur)] * 2
        envs = AsyncVectorEnv(fns, context="spawn") if vec == "spawn" else SyncVectorEnv(fns)
        try:
            envs.reset(seed=1)
            resume_env_tasks(envs, [6, 7])
            first = envs.reset()[1]["task_id"].tolist()
            load_curriculum_state(path, cur, env=envs)
            assert envs.get_attr("pending_task_id") == ("mine", "mine")  # the user's: untouched
            got.append([first, envs.reset()[1]["task_id"].tolist()])
        finally:
            envs.close()
            cur.close()
    return got


def test_a_new_run_resumes_through_the_curriculum_wrapper_in_sync_and_spawn_sub_envs(tmp_path):
    from tests.new_interpreter import call_in_new_interpreter

    cur = Curriculum(SPACE, seed=0)
    envs = SyncVectorEnv([partial(shadowing_curriculum, cur)] * 2)
    started = envs.reset(seed=0)[1]["task_id"].tolist()
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
    envs.close()
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_sub_env_names",
        "resume_as_a_new_run",
        str(path),
        ["sync", "spawn"],
    )
    assert got == [[[6, 7], started]] * 2


@pytest.mark.parametrize(
    ("task_ids", "key"),
    [
        (np.array([[1], [2], [3]]), "task_ids[0]"),  # a row of a 2-d array is not an id
        ([1, np.array(True), 3], "task_ids[1]"),  # nor is a 0-d bool array
    ],
)
def test_task_ids_numpy_cannot_read_as_one_are_a_config_error(task_ids, key):
    # __index__ of these raises TypeError, which escaped instead of the ConfigError naming them
    cur = Curriculum(SPACE, seed=0)
    envs = vector([partial(make_wrapped, cur)] * 3, "sync")
    try:
        envs.reset(seed=0)
        with pytest.raises(ConfigError) as err:
            resume_env_tasks(envs, task_ids)
        assert err.value.key == key
        assert armed(envs) == [None, None, None]
        resume_env_tasks(envs, np.array([4, -1, 0]))  # a user's array of ids is one
        assert armed(envs) == [4, -1, 0]
    finally:
        envs.close()


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_refused_load_whose_sub_envs_cannot_be_put_back_raises_the_refusal(tmp_path, vec):
    # the error of putting the sub-envs back replaced the curriculum's DataError
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = vector([partial(resume_refuses, cur), partial(resume_refuses, cur, [None])], vec)
    try:
        refuse_a_load_that_cannot_be_put_back(tmp_path, cur, envs)
        assert armed(envs)[0] is None  # put back; sub-env 1 refused to be
    finally:
        envs.close()
        cur.close()
