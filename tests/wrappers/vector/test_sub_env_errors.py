"""A sub-env method gymcurric calls that raises ends no worker of an ``AsyncVectorEnv``.

The worker of a Gymnasium ``AsyncVectorEnv`` exits on an exception in a ``call``: before
``call_sub_envs``, a user's ``describe()`` that raised once (vector semantic shaping) or a
``flush_curriculum()`` that raised (a checkpoint) left a vector env whose every later call
failed. Now the error names the sub-env, the method and the original error, and the env goes on.
So does a value a sub-env's method returns that its worker's pipe cannot pickle (the worker
exited on it too), or that the main process cannot load.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import subprocess
import sys
import threading
from functools import partial
from multiprocessing.reduction import ForkingPickler

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from gymcurric.errors import DataError, SubEnvCallError
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import _sub_envs, save_curriculum_state
from gymcurric.wrappers._sub_envs import call_sub_envs
from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic
from tests.semantics.stubs import STUB_CONFIG, StateEnv, caption_embedder
from tests.sub_env_faults import SPACE, DescribeFails, WorkerOnly, flush_fails, unsendable


@pytest.mark.parametrize("vector", ["async", "sync"])
def test_describe_that_raises_names_the_sub_env_and_the_env_goes_on(vector):
    fns = [partial(DescribeFails), partial(DescribeFails, fail_at=2)]
    base = AsyncVectorEnv(fns, context="fork") if vector == "async" else SyncVectorEnv(fns)
    envs = ShapeRewardSemantic(base, caption_embedder(), STUB_CONFIG)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(2, np.int64))
        with pytest.raises(SubEnvCallError, match=r"sub-env 1: describe\(\) raised") as caught:
            envs.step(np.zeros(2, np.int64))
        error = caught.value
        assert (error.index, error.method) == (1, "describe")
        assert error.error_type == "builtins.ValueError"
        assert error.error_message == "no words for step 2"
        assert isinstance(error, RuntimeError)
        assert isinstance(error.__cause__, ValueError)
        assert "in describe" in error.worker_traceback  # formatted where it was raised
        assert pickle.loads(pickle.dumps(error)).args == error.args
        # a SyncVectorEnv has no worker to go on
        assert error.in_worker == ("worker goes on" in str(error)) == (vector == "async")
        if vector == "async":
            assert all(p.is_alive() for p in base.processes), "a worker was shut down"
        shaping = envs.step(np.zeros(2, np.int64))[-1]["shaping"]  # it goes on
        assert np.isfinite(shaping).all()
    finally:
        envs.close()


def _unpicklable() -> Exception:
    class Local(Exception):  # a local class pickles by reference to nothing: it cannot be sent
        pass

    return Local("cannot cross the pipe")


@pytest.mark.parametrize(
    ("error", "raised", "match"),
    [
        (OSError("the channel is gone"), SubEnvCallError, "raised builtins.OSError: the channel"),
        (DataError("bad episodes"), DataError, "bad episodes"),  # gymcurric's own, as itself
    ],
)
def test_async_flush_that_raises_at_a_checkpoint_keeps_the_workers(
    tmp_path, capfd, error, raised, match
):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    fns = [partial(flush_fails, cur), partial(flush_fails, cur, error)]
    envs = AsyncVectorEnv(fns, context="fork")
    try:
        envs.reset(seed=0)
        for _ in range(4):
            envs.step(np.zeros(2, np.int64))
        with pytest.raises(raised, match=match) as caught:
            save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        notes = "\n".join(getattr(caught.value, "__notes__", []))
        assert "sub-env 1" in str(caught.value) + notes
        assert "flush_curriculum" in str(caught.value) + notes
        assert all(p.is_alive() for p in envs.processes), "a worker was shut down"
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
        envs.step(np.zeros(2, np.int64))
    finally:
        envs.close()
        cur.close()


def test_an_error_that_cannot_be_sent_is_described():
    envs = AsyncVectorEnv([partial(flush_fails, Curriculum(SPACE), _unpicklable())], context="fork")
    try:
        with pytest.raises(SubEnvCallError, match="Local: cannot cross the pipe") as caught:
            call_sub_envs(envs, "flush_curriculum")
        assert caught.value.__cause__ is None and caught.value.index == 0
        assert all(p.is_alive() for p in envs.processes)
        assert call_sub_envs(envs, "has_wrapper_attr", "task_id") == [True]  # and goes on
    finally:
        envs.close()


def test_importing_gymcurric_leaves_gymnasium_env_as_it_is():
    # STYLE: no process-wide side effect at import; only a safe call installs gymcurric_call
    # (in the main process for in-process sub-envs, in a worker as it unpickles the call)
    code = (
        "import gymnasium, gymcurric, gymcurric.wrappers._sub_envs as s\n"
        "assert not hasattr(gymnasium.Env, s.SAFE_CALL)\n"
        "import pickle\n"
        "pickle.loads(pickle.dumps(s.SubEnvCall('describe')))\n"
        "assert getattr(gymnasium.Env, s.SAFE_CALL) is s.gymcurric_call\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


class _StrFails(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message either")


class DescribeRaises(StateEnv):
    """A caption-less env whose ``describe()`` raises ``error`` (the same object at each call)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(captions=False)
        self.error = error

    def describe(self) -> str:
        raise self.error


def test_an_error_whose_message_cannot_be_read_keeps_the_worker():
    # str(error) raised in gymcurric_call's except clause: the worker was shut down
    fns = [partial(DescribeRaises, _StrFails())]
    base = AsyncVectorEnv(fns, context="fork")
    envs = ShapeRewardSemantic(base, caption_embedder(), STUB_CONFIG)
    try:
        envs.reset(seed=0)
        with pytest.raises(SubEnvCallError, match=r"sub-env 0: describe\(\) raised .*_StrFails"):
            envs.step(np.zeros(1, np.int64))
        assert all(p.is_alive() for p in base.processes), "a worker was shut down"
        assert base.call("has_wrapper_attr", "describe") == (True,)  # it goes on
    finally:
        envs.close()


def test_gymcurric_error_raised_again_by_an_in_process_sub_env_gets_one_note():
    # SyncVectorEnv: the sub-env's own exception object was raised, a note added to it per call
    from gymcurric.errors import ConfigError

    error = ConfigError("level", 9, "no such level")
    envs = ShapeRewardSemantic(
        SyncVectorEnv([partial(DescribeRaises, error)]), caption_embedder(), STUB_CONFIG
    )
    envs.reset(seed=0)
    for _ in range(3):
        with pytest.raises(ConfigError, match="no such level") as caught:
            envs.step(np.zeros(1, np.int64))
        assert len(caught.value.__notes__) == 1
        assert "describe() of sub-env 0" in caught.value.__notes__[0]
        assert caught.value.key == "level"
    assert not hasattr(error, "__notes__"), "the sub-env's own exception was changed"


def test_sub_env_call_error_keeps_its_notes_through_pickle():
    envs = SyncVectorEnv([partial(DescribeFails, fail_at=0)] * 3)
    envs.reset(seed=0)
    with pytest.raises(SubEnvCallError) as caught:
        call_sub_envs(envs, "describe")
    error = caught.value
    assert error.__notes__[-1] == "Sub-envs [1, 2] raised too"
    again = pickle.loads(pickle.dumps(error))
    assert again.__notes__ == error.__notes__  # the traceback's note once, the others kept
    assert (again.index, again.method, again.error_type) == (0, "describe", error.error_type)


def _noted_config_error() -> Exception:
    from gymcurric.errors import ConfigError

    error = ConfigError("task_id", 7, "unknown")
    error.add_note("reported by SampleCurriculumTask at the end of an episode")
    return error


@pytest.mark.parametrize("vector", ["async", "sync"])
def test_a_config_error_keeps_the_notes_it_had_in_the_sub_env(vector):
    # ConfigError pickled without its notes: a worker's (and, sent as a copy, an in-process
    # sub-env's) note on where it was raised was lost
    fns = [partial(flush_fails, Curriculum(SPACE), _noted_config_error())]
    envs = AsyncVectorEnv(fns, context="fork") if vector == "async" else SyncVectorEnv(fns)
    try:
        with pytest.raises(Exception, match="unknown") as caught:
            call_sub_envs(envs, "flush_curriculum")
        notes = caught.value.__notes__
        assert notes[0] == "reported by SampleCurriculumTask at the end of an episode"
        assert "flush_curriculum() of sub-env 0" in notes[1] and len(notes) == 2
        assert (caught.value.key, caught.value.value) == ("task_id", 7)
    finally:
        envs.close()


class WorkerOnlyError(StateEnv):
    """Raises an error of a class made in its own process (a plugin registered as it starts)."""

    def __init__(self) -> None:
        super().__init__(captions=False)
        module = sys.modules[__name__]
        if not hasattr(module, "_ErrorOfTheWorker"):
            error = type("_ErrorOfTheWorker", (Exception,), {"__module__": __name__})
            module._ErrorOfTheWorker = error  # type: ignore[attr-defined]

    def describe(self) -> str:
        raise sys.modules[__name__]._ErrorOfTheWorker("made in the worker")


def test_an_error_the_main_process_cannot_load_keeps_the_env():
    # it pickled in the worker, then failed to unpickle in call_wait: a bare AttributeError,
    # and every later call was refused (AlreadyPendingCallError)
    base = AsyncVectorEnv([partial(DescribeFails), WorkerOnlyError], context="fork")
    envs = ShapeRewardSemantic(base, caption_embedder(), STUB_CONFIG)
    try:
        envs.reset(seed=0)
        with pytest.raises(SubEnvCallError, match=r"sub-env 1: .*_ErrorOfTheWorker: made in"):
            envs.step(np.zeros(2, np.int64))
        assert all(p.is_alive() for p in base.processes), "a worker was shut down"
        assert base.call("has_wrapper_attr", "describe") == (True, True)  # it goes on
        envs.reset(seed=1)
    finally:
        envs.close(terminate=True)  # a close waiting on the broken call never returned


class CountingPickler(ForkingPickler):
    """The pickler gymcurric_call checks a worker's value with, counting the values it dumps."""

    dumped = 0

    def dump(self, obj):
        type(self).dumped += 1
        return super().dump(obj)


@pytest.mark.parametrize("vector", ["async", "sync"])
def test_a_value_a_worker_cannot_send_is_an_error_and_the_worker_goes_on(
    monkeypatch, capfd, vector
):
    # the worker's pipe.send((value, True)) raised on the lock, and the worker exited
    # forked workers too (raising=False: a version without the check runs the test too)
    monkeypatch.setattr(_sub_envs, "ForkingPickler", CountingPickler, raising=False)
    monkeypatch.setattr(CountingPickler, "dumped", 0)
    fns = [unsendable, unsendable]
    envs = AsyncVectorEnv(fns, context="fork") if vector == "async" else SyncVectorEnv(fns)
    try:
        envs.reset(seed=0)
        if vector == "sync":  # in-process: the values are handed over as they are, unpickled
            assert all(type(v) is type(threading.Lock()) for v in call_sub_envs(envs, "lock"))
            assert isinstance(call_sub_envs(envs, "unloadable", indices=[1])[0], WorkerOnly)
            assert call_sub_envs(envs, "number") == [7, 7]
            assert CountingPickler.dumped == 0
            return
        match = r"sub-env 0: the value lock\(\) returned cannot be sent to the main process: "
        with pytest.raises(SubEnvCallError, match=match + "builtins.TypeError") as caught:
            call_sub_envs(envs, "lock")
        error = caught.value
        assert (error.index, error.method, error.stage) == (0, "lock", "send")
        assert "worker goes on" in str(error) and isinstance(error.__cause__, TypeError)
        assert error.__notes__[-1] == "Sub-envs [1] raised too"
        assert all(p.is_alive() for p in envs.processes), "a worker was shut down"
        match = r"sub-env 1: the value unloadable\(\) returned does not load in the main proc"
        with pytest.raises(SubEnvCallError, match=match) as caught:
            call_sub_envs(envs, "unloadable", indices=[1])
        assert isinstance(caught.value.__cause__, RuntimeError)  # built only in the worker
        assert caught.value.stage == "load"
        assert call_sub_envs(envs, "number") == [7, 7]  # the env goes on
        envs.step(np.zeros(2, np.int64))
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
    finally:
        envs.close()


class SharesAPipe(gym.Wrapper):
    """A value whose pickling shares a file descriptor before it fails on a lock.

    ``ForkingPickler`` sends a pipe end (or a torch tensor's shared memory) by dup'ing its fd
    and handing the copy to ``multiprocessing``'s resource sharer, which keeps it until the
    loading process asks for it: after a failed pickling no process ever asks.
    """

    def pipe_and_lock(self):
        ends = multiprocessing.Pipe()
        return (ends[0], threading.Lock())

    def pipe(self):
        return multiprocessing.Pipe()[0]

    def shared(self):
        from multiprocessing import resource_sharer

        return len(resource_sharer._resource_sharer._cache)


def shares_a_pipe():
    return SharesAPipe(StateEnv(captions=False))


def test_a_value_that_fails_to_send_leaves_nothing_shared_in_the_worker():
    # each failed send kept the dup'd fd of the pipe end (and its resource) in the worker
    envs = AsyncVectorEnv([shares_a_pipe, shares_a_pipe], context="fork")
    try:
        for _ in range(3):
            with pytest.raises(SubEnvCallError, match="cannot be sent") as caught:
                call_sub_envs(envs, "pipe_and_lock")
            assert caught.value.stage == "send"
        assert call_sub_envs(envs, "shared") == [0, 0]
        received = call_sub_envs(envs, "pipe")  # sent ones are still shared, and received
        assert all(isinstance(c, multiprocessing.connection.Connection) for c in received)
        assert call_sub_envs(envs, "shared") == [0, 0]
        for c in received:
            c.close()
    finally:
        envs.close()
