"""CheckedSubprocVecEnv from start to close: a hang while building, an interrupted wait, fds.

An env that hung in its constructor blocked the vector env's construction for ever (a worker's
first answer had no time limit). After a Ctrl-C while it waited for an answer, the next command
read that answer as its own; one in a worker's ``process.start()`` left that worker running.
A value that does not pickle was pickle's raw TypeError. A closed vector env kept two fds per
worker open until garbage collection. Every call that could hang runs in a thread with a time
limit, so a regression fails, not hangs.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing as mp
import os
import select
import signal
import threading
import time
import weakref
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_util import make_vec_env

from gymcurric.errors import ConfigError, SubEnvError, WorkerError
from gymcurric.integrations.sb3 import CheckedSubprocVecEnv
from gymcurric.integrations.sb3.checked_vec_env import CLOSE_GRACE_S
from tests.faulty_envs import HANG_S, MAKE_ID, SLEEP_S
from tests.integrations.checked_vec_env_support import (
    LIMIT_S,
    BigAnswers,
    die_building,
    ended,
    grid_factories,
    hang_in_reset,
    late_grid,
    within,
    worker_pids,
)
from tests.interrupts import ctrl_c_after, interrupts

# ------------------------------------------------------------ an env that hangs while built


def _build_hang(
    tmp_path: Any, start_method: str, build_s: list[float], limit: float, late: bool = False
) -> Any:
    """The SubEnvError of a CheckedSubprocVecEnv whose sub-envs take ``build_s`` s to build.

    Every worker it started is checked to be ended and reaped, by the process ids the vector
    env kept (a worker may be ended before it notes its own: a spawned one still importing
    under load). ``late``: the last sub-env's worker notes its id only after ``HANG_S`` s,
    as such a worker would.
    """
    made: list[CheckedSubprocVecEnv] = []

    class Kept(CheckedSubprocVecEnv):  # its processes readable after the constructor raised
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            super().__init__(*args, **kwargs)

    fns = grid_factories(tmp_path, build_s)
    if late:
        fns[-1] = functools.partial(late_grid, str(tmp_path), HANG_S, build_s=build_s[-1])
    with pytest.raises(SubEnvError) as caught:
        within(lambda: Kept(fns, start_method, build_timeout=limit))
    pids = [process.pid for process in made[0].processes]
    assert len(pids) == len(build_s) and ended(pids)  # terminated and reaped: no zombie
    assert set(worker_pids(tmp_path)) <= set(pids)  # those that got as far as noting theirs
    return caught.value


def test_an_env_that_hangs_while_built_is_named_and_every_worker_ends(tmp_path):
    # sub-env 1 sleeps HANG_S in its constructor; sub-env 0 is built: it is closed as usual.
    # (Unlike test_workers_still_building_are_terminated_at_once, where both hang: a later
    # sub-env is named, and a built worker is closed beside a hung one.) The limit is also
    # sub-env 0's to build in, a forked HazardGrid: 2 s leaves it a wide margin under load.
    err = _build_hang(tmp_path, "fork", [0.0, HANG_S], 2.0)
    assert str(err) == (
        "sub-env 1: building the env: no reply within 2 s (the worker is alive: hung while "
        "building its env?); the vector env cannot go on"
    )
    assert (err.index, err.command, err.error_type, err.timeout) == (
        1,
        "building the env",
        None,
        2.0,
    )


@pytest.mark.parametrize(
    ("start_method", "late"),
    [("fork", False), ("fork", True), pytest.param("spawn", False, marks=pytest.mark.slow)],
)
def test_workers_still_building_are_terminated_at_once(tmp_path, start_method, late):
    # both hang: sub-env 1, still building when sub-env 0's limit ends, is not given the
    # CLOSE_GRACE_S that a worker reading commands gets. late: sub-env 1 is ended before it
    # notes its process id, as a spawned worker still importing on a loaded machine is (the
    # ids were those the workers noted: only one, and the spawn case failed now and then)
    limit = 1.0 if start_method == "fork" else 10.0
    err = within(
        lambda: _build_hang(tmp_path, start_method, [HANG_S, HANG_S], limit, late),
        limit + CLOSE_GRACE_S - 1,
    )
    assert (err.index, err.command, err.timeout) == (0, "building the env", limit)
    assert "hung while building its env?" in str(err)


def test_with_a_build_timeout_healthy_workers_answer_as_without(tmp_path):
    def run(**kwargs: Any) -> list[Any]:
        env = within(
            lambda: CheckedSubprocVecEnv(grid_factories(tmp_path, [0.0, 0.0]), "fork", **kwargs)
        )
        try:
            env.seed(3)
            out = [env.reset()]
            for _ in range(45):  # an episode's end (max_steps 40)
                out += env.step(np.ones(2, dtype=np.int64))[:3]
            return out
        finally:
            within(env.close)

    plain, limited = run(), run(build_timeout=60.0, timeout=30.0)
    assert len(plain) == len(limited)
    assert all(np.array_equal(a, b) for a, b in zip(plain, limited, strict=True))


def test_an_env_that_cannot_be_built_is_named_at_construction_with_a_build_timeout(tmp_path):
    # (without one too, but only once sub-env 0 is built: VecEnv.__init__ asks every sub-env)
    fns = grid_factories(tmp_path, [0.0, 0.0])
    fns[1].keywords["num_hazards"] = 1000
    with pytest.raises(ConfigError, match="num_hazards") as caught:
        within(lambda: CheckedSubprocVecEnv(fns, "fork", build_timeout=60.0))
    assert caught.value.__notes__[-1].startswith("sub-env 1: building the env raised this")
    assert ended(worker_pids(tmp_path))


def test_without_a_build_timeout_a_sub_env_that_cannot_be_built_ends_every_worker(tmp_path):
    # sub-env 1's error came from VecEnv.__init__ (its get_attr('render_mode') asks every
    # sub-env), called after the constructor's clean-up: both workers ran on, fds open
    fns = grid_factories(tmp_path, [0.0, 0.0])
    fns[1].keywords["num_hazards"] = 1000
    with pytest.raises(ConfigError, match="num_hazards") as caught:
        within(lambda: CheckedSubprocVecEnv(fns, "fork"))
    assert caught.value.__notes__[-1].startswith("sub-env 1: building the env raised this")
    assert ended(worker_pids(tmp_path))


def test_a_ctrl_c_while_a_sub_env_is_built_ends_every_worker(tmp_path):
    # without a build_timeout, sub-env 1 (building for HANG_S) is waited for in VecEnv.__init__:
    # a Ctrl-C there left both workers running, sub-env 1's still building
    fns = grid_factories(tmp_path, [0.0, HANG_S])
    with ctrl_c_after(1.5), pytest.raises(KeyboardInterrupt):
        CheckedSubprocVecEnv(fns, "fork")
    assert len(worker_pids(tmp_path)) == 2 and ended(worker_pids(tmp_path))


@pytest.mark.parametrize("build_timeout", [None, 60.0])
def test_the_timeout_limits_the_first_reset_after_the_build(tmp_path, build_timeout):
    # the build (1 s) is not limited by the timeout (0.3 s), every answer after it is: each
    # worker answers its first question in the constructor (VecEnv.__init__ asks every
    # sub-env), so sub-env 0's first reset, which hangs, is a hang, also without build_timeout
    fns = [
        functools.partial(hang_in_reset, str(tmp_path), 1.0),
        *grid_factories(tmp_path, [1.0]),
    ]
    env = within(
        lambda: CheckedSubprocVecEnv(fns, "fork", timeout=0.3, build_timeout=build_timeout)
    )
    with pytest.raises(SubEnvError) as caught:
        within(env.reset)
    assert str(caught.value) == (
        "sub-env 0: reset(): no reply within 0.3 s (the worker is alive: hung?); the vector "
        "env cannot go on"
    )
    within(env.close, CLOSE_GRACE_S - 1)  # the hung worker terminated at once
    assert [p.exitcode for p in env.processes] == [-signal.SIGTERM, 0]
    assert ended(worker_pids(tmp_path))


@pytest.mark.parametrize("build_timeout", [60.0, None])
def test_a_worker_that_dies_while_building_its_env_is_named_so(tmp_path, build_timeout):
    # it was named by the constructor's internal question ("died during get_spaces()", and
    # without a build_timeout "died during get_attr('render_mode')", VecEnv.__init__'s first
    # question to sub-envs 1..), where a hang or an exception there is "building the env"
    fns = [*grid_factories(tmp_path, [0.0]), functools.partial(die_building, str(tmp_path))]
    with pytest.raises(SubEnvError) as caught:
        within(lambda: CheckedSubprocVecEnv(fns, "fork", build_timeout=build_timeout))
    assert (caught.value.index, caught.value.command) == (1, "building the env")
    assert str(caught.value).startswith(
        "sub-env 1: its worker process died during building the env: killed by signal SIGKILL"
    )
    assert ended(worker_pids(tmp_path))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), True, "5"])
def test_a_bad_build_timeout_is_a_config_error_naming_it_before_any_worker_starts(bad):
    with pytest.raises(ConfigError) as caught:
        CheckedSubprocVecEnv([], start_method="fork", build_timeout=bad)
    assert caught.value.key == "build_timeout" and caught.value.value is bad
    expected = f"CheckedSubprocVecEnv: invalid value for 'build_timeout': {bad!r} (expected"
    assert str(caught.value).startswith(expected), caught.value


@pytest.mark.parametrize("build_timeout", [None, 5.0])
def test_no_env_factory_is_a_config_error_naming_env_fns(build_timeout):
    # it was an IndexError ('list index out of range') reading sub-env 0's spaces
    with pytest.raises(ConfigError) as caught:
        CheckedSubprocVecEnv([], start_method="fork", build_timeout=build_timeout)
    assert (caught.value.key, caught.value.value) == ("env_fns", [])
    assert str(caught.value) == (
        "CheckedSubprocVecEnv: invalid value for 'env_fns': [] (expected at least one env factory)"
    )


@pytest.mark.parametrize(("at", "cause"), [(0, "ctrl-c"), (2, "ctrl-c"), (1, "error")])
def test_a_start_that_raises_once_its_worker_runs_ends_every_started_worker(
    tmp_path, monkeypatch, at, cause
):
    # process.start() of sub-env `at` raises once its worker runs (a real Ctrl-C: SIGINT to
    # this process; or any exception). That worker was not kept: it ran on, orphaned (its pipe
    # held open by the constructor's frame in the traceback), and at 0 so did every other
    started: list[Any] = []
    running = set(mp.active_children())  # other tests' workers, if any
    real_start = mp.get_context("fork").Process.start

    def start(process: Any) -> None:
        real_start(process)
        started.append(process)
        if len(started) == at + 1:
            if cause == "ctrl-c":
                signal.raise_signal(signal.SIGINT)  # KeyboardInterrupt, raised here
            raise OSError("start() failed once its process ran")

    monkeypatch.setattr(mp.get_context("fork").Process, "start", start)
    expected = KeyboardInterrupt if cause == "ctrl-c" else OSError
    # Python's own SIGINT handler (a test run as a background job inherits SIGINT ignored)
    with interrupts(), pytest.raises(expected):  # in the main thread, where a Ctrl-C is raised
        CheckedSubprocVecEnv(grid_factories(tmp_path, [0.0] * 4), "fork")
    assert len(started) == at + 1
    assert [p.exitcode for p in started] == [0] * (at + 1)  # closed (built), not terminated
    assert ended([p.pid for p in started]) and set(mp.active_children()) <= running


# ------------------------------------------------ a wait interrupted: the answer comes later


def _subproc(**env_kwargs: Any) -> Any:
    """Two FaultyGrid sub-envs (ranks 0, 1) in a CheckedSubprocVecEnv under fork."""
    env_kwargs = {"size": 8, "max_steps": 40, **env_kwargs}
    vec_kwargs = {"start_method": "fork"}
    return within(
        lambda: make_vec_env(
            MAKE_ID,
            2,
            seed=0,
            vec_env_cls=CheckedSubprocVecEnv,
            vec_env_kwargs=vec_kwargs,
            env_kwargs=env_kwargs,
        )
    )


def test_a_command_after_an_interrupted_wait_raises_instead_of_reading_the_late_answer():
    # sub-env 1's step 2 takes SLEEP_S; Ctrl-C comes while step_wait waits for it. Its answer
    # came later and the next command read it as its own: get_attr answered a step's tuple
    env = _subproc(fail_at=2, fail_rank=1, fail_mode="sleep")
    actions = np.zeros(2, dtype=np.int64)
    within(lambda: (env.reset(), env.step(actions)))
    with ctrl_c_after(SLEEP_S / 3), pytest.raises(KeyboardInterrupt):
        env.step(actions)
    undefined = r"interrupted while waiting for its answer to step\(\); the vector env is in "
    undefined += "an undefined state"
    with pytest.raises(WorkerError, match=undefined):
        within(lambda: env.get_attr("steps_taken"))
    with pytest.raises(WorkerError, match=undefined):
        within(lambda: env.step(actions))
    within(env.close, 20.0)  # without waiting for the late answer
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_a_command_to_a_worker_whose_answer_is_unread_raises():
    # however the read was skipped (an interrupt between two reads of step_wait's): the next
    # step read sub-env 1's old answer as its new one
    env = _subproc(fail_rank=-1)
    actions = np.zeros(2, dtype=np.int64)
    within(lambda: (env.reset(), env.step(actions)))
    env.step_async(actions)
    within(env.remotes[0].recv)  # what step_wait read before it was interrupted
    with pytest.raises(WorkerError, match=r"^sub-env 1: its answer to step\(\) is unread; "):
        within(lambda: env.step(actions))
    within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_an_interrupted_close_of_a_failed_construction_still_ends_every_worker(tmp_path):
    # sub-env 0 cannot be built; sub-env 1 is (not asked, so not terminated as still building)
    # and its env.close() hangs. A Ctrl-C while the failed constructor waited for it to close
    # left it running: no one could close it again
    fns = grid_factories(tmp_path, [0.0, 0.0])
    fns[0].keywords["num_hazards"] = 1000
    fns[1].keywords["close_s"] = HANG_S
    with ctrl_c_after(CLOSE_GRACE_S / 2), pytest.raises(KeyboardInterrupt):
        CheckedSubprocVecEnv(fns, "fork")
    assert ended(worker_pids(tmp_path))


# ------------------------------------------------------- a call whose value does not pickle


def test_set_attr_with_a_value_that_does_not_pickle_names_it_and_the_env_goes_on():
    # pickle's raw TypeError ("cannot pickle '_thread.lock' object") named neither
    env = _subproc(fail_rank=-1)
    try:
        within(lambda: env.reset())
        lock = threading.Lock()
        with pytest.raises(ConfigError) as caught:
            within(lambda: env.set_attr("fail_at", lock, indices=[1]))
        err = caught.value
        assert (err.key, err.value, err.source) == (
            "value",
            lock,
            "CheckedSubprocVecEnv.set_attr('fail_at')",
        )
        assert "(a _thread.lock that does not pickle (TypeError: cannot pickle" in str(err)
        assert isinstance(err.__cause__, TypeError) and env.failure is None
        with pytest.raises(ConfigError, match=r"env_method\('answer'\): invalid value for 'met"):
            within(lambda: env.env_method("answer", lock))

        class Local(gym.Wrapper):  # pickled by reference: a class in a function does not pickle
            pass

        # it was named by the pipe's command ('CheckedSubprocVecEnv.is_wrapped') and the
        # class's type ('a builtins.type that does not pickle')
        with pytest.raises(ConfigError) as caught:
            within(lambda: env.env_is_wrapped(Local))
        assert (caught.value.key, caught.value.value) == ("wrapper_class", Local)
        assert caught.value.source == "CheckedSubprocVecEnv.env_is_wrapped"
        assert "(a class that does not pickle (" in str(caught.value)
        assert "Can't pickle local object" in str(caught.value)
        within(lambda: env.set_attr("fail_at", 7, indices=[1]))
        within(lambda: env.step(np.zeros(2, dtype=np.int64)))
        assert within(lambda: env.get_attr("fail_at")) == [10, 7]
    finally:
        within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


# ------------------------------------------------------------------ nothing left open


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_gc():
    """No garbage collection during the test: what close() leaves open stays open."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc fds")


@needs_proc
def test_close_leaves_no_fd_open(no_gc):
    # each worker's Popen kept its 2 pipe fds until the vector env's reference cycle was
    # collected
    before = _open_fds()
    env = _subproc(fail_rank=-1)
    within(lambda: (env.reset(), env.step(np.zeros(2, dtype=np.int64))))
    within(env.close)
    assert _open_fds() == before
    assert [p.exitcode for p in env.processes] == [0, 0]  # still readable


@needs_proc
def test_a_failed_build_leaves_no_fd_open(tmp_path, no_gc):
    before = _open_fds()
    _build_hang(tmp_path, "fork", [HANG_S, HANG_S], 1.0)
    assert _open_fds() == before


@needs_proc
def test_a_close_interrupted_part_way_is_finished_by_the_next(no_gc):
    # a Ctrl-C while close() waited for workers whose env.close() hangs: the next close()
    # returned at once (closed was set), the workers ran on and their 6 fds stayed open
    before = _open_fds()
    env = _subproc(fail_rank=-1, close_s=HANG_S)
    within(env.reset)
    with ctrl_c_after(0.5), pytest.raises(KeyboardInterrupt):
        env.close()
    within(env.close, 10.0)  # terminated at once: what the first waited for is not waited for
    assert [p.exitcode for p in env.processes] == [-signal.SIGTERM, -signal.SIGTERM]
    assert _open_fds() == before
    within(env.close, 1.0)  # closed: nothing more to do


def test_a_close_while_another_is_under_way_ends_no_worker_early():
    # the second close() that finishes one interrupted part way also ran while a close() still
    # waited in another thread: it terminated the workers in their env.close(), skipping the
    # grace period (exit codes -SIGTERM), and closed the same fds (OSError: Bad file descriptor)
    env = _subproc(fail_rank=-1, close_s=2.0)
    within(env.reset)
    first = threading.Thread(target=env.close, daemon=True)
    first.start()

    def under_way() -> None:  # the first close() has begun (then it waits for the workers)
        while not env.closed:
            time.sleep(0.01)

    within(under_way)
    within(env.close, 20.0)  # returns at once
    first.join(60.0)
    assert not first.is_alive()
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_a_vector_env_no_longer_referenced_is_freed_without_the_garbage_collector(no_gc):
    # venv.remotes <-> Remote.venv was a reference cycle: a closed vector env stayed in memory,
    # and an unclosed one's workers ran on (their pipes open), until the garbage collector ran
    env = _subproc(fail_rank=-1)
    within(env.reset)
    within(env.close)
    freed = weakref.ref(env)
    del env
    assert freed() is None
    env = _subproc(fail_rank=-1)
    within(env.reset)
    processes, freed = list(env.processes), weakref.ref(env)
    del env  # never closed: its pipe ends close with it and its workers exit, as SB3's do
    assert freed() is None
    for process in processes:
        process.join(LIMIT_S)
    assert [p.exitcode for p in processes] == [0, 0]


class _Closer:
    """Closes the vector env it holds when finalized (a user's ``__del__``, say)."""

    venv: Any = None

    def __del__(self) -> None:
        self.venv.close()


def test_a_close_run_by_the_garbage_collector_reads_the_answers_not_read_yet(no_gc):
    # a finalizer's close() of an env in a reference cycle: the collector clears every weak
    # reference to the env before finalizers run, so Remote.venv (a proxy) was dead, recv()
    # raised ReferenceError (suppressed in close()) and the step's answers stayed unread: each
    # worker, blocked sending its 4 MB, was terminated after the grace period (waited for, for
    # ever, without a timeout). The closer is made first, so it is finalized first (gc off:
    # every object in one generation, in the order it was made)
    closer = _Closer()
    env = CheckedSubprocVecEnv([BigAnswers, BigAnswers], "fork", timeout=10.0)
    closer.venv, env.closer = env, closer  # type: ignore[attr-defined]
    within(env.reset)
    env.step_async(np.zeros(2, dtype=np.int64))
    processes = list(env.processes)
    del env, closer
    within(gc.collect)
    assert [p.exitcode for p in processes] == [0, 0]  # read, then closed: not terminated


class _LateCloser:
    """A user's ``__del__`` that closes the env after the collector finalized its pipe ends.

    Made after the env, it is finalized after the env's Connections (gc off: in the order the
    objects were made), whose ``__del__`` closed their fds and left them looking open. Given a
    pipe's write end, it first puts a copy of it at each of their fd numbers (as the next files
    the program opens would get those numbers).
    """

    def __init__(self, venv: Any, write: int | None) -> None:
        self.venv, self.write, self.seen = venv, write, {}

    def __del__(self) -> None:
        conns = [remote.conn for remote in self.venv.remotes]
        self.seen["finalized"] = [gc.is_finalized(c) and not c.closed for c in conns]
        if self.write is not None:
            self.seen["copies"] = [os.dup2(self.write, c.fileno()) for c in conns]
        try:
            self.venv.close()
        except BaseException as exc:
            self.seen["error"] = exc


@pytest.mark.parametrize("reuse", [False, True])
def test_a_close_after_the_collector_closed_the_pipes_closes_no_fd_twice(no_gc, reuse):
    # Connection.__del__ closes its fd but keeps its number (conn.closed stays False), and
    # close() closed that number again: OSError: [Errno 9] Bad file descriptor, or, where
    # another file had the number by then, it wrote its close command into that file and
    # closed it
    read, write = os.pipe()
    env = CheckedSubprocVecEnv([BigAnswers, BigAnswers], "fork", timeout=10.0)
    closer = _LateCloser(env, write if reuse else None)
    env.closer = closer  # type: ignore[attr-defined]
    within(env.reset)
    processes, seen = list(env.processes), closer.seen
    del env, closer
    try:
        within(gc.collect)
        assert seen["finalized"] == [True, True]  # the case this test is about
        assert "error" not in seen, repr(seen.get("error"))
        if reuse:
            for copy in seen["copies"]:
                os.fstat(copy)  # still open (OSError: Bad file descriptor where closed)
            assert select.select([read], [], [], 0)[0] == []  # nothing written into it
    finally:
        for fd in [read, write, *seen.get("copies", [])]:
            with contextlib.suppress(OSError):
                os.close(fd)
    assert [p.exitcode for p in processes] == [0, 0]  # each read its pipe's end
