"""CheckedSubprocVecEnv / CheckedDummyVecEnv: a sub-env that raises or dies is an error naming it.

SB3's ``SubprocVecEnv`` hung here: ``close()`` after a failed ``step_wait`` waited for answers it
had already read, and under ``fork`` a sibling worker kept a dead worker's pipe open. Every
call that could hang runs in a thread with a time limit, so a regression fails, not hangs.
"""

from __future__ import annotations

import cProfile
import os
import pickle
import pstats
import signal
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

from gymcurric.errors import ConfigError, SubEnvCallError, SubEnvError, TaskError, WorkerError
from gymcurric.integrations.sb3 import CheckedDummyVecEnv, CheckedSubprocVecEnv
from gymcurric.integrations.sb3.checked_vec_env import CLOSE_GRACE_S
from tests.faulty_envs import MAKE_ID, MESSAGE, SLEEP_S, LoadsInOneProcess
from tests.integrations.checked_vec_env_support import within
from tests.interrupts import ctrl_c_after


def venv(kind: str, timeout: float | None = None, **env_kwargs: Any) -> Any:
    """Two FaultyGrid sub-envs (seeds 0, 1: ranks 0, 1) in a checked vector env."""
    cls: Any = CheckedDummyVecEnv
    vec_kwargs: dict[str, Any] = {}
    if kind != "dummy":
        cls, vec_kwargs = CheckedSubprocVecEnv, {"start_method": kind, "timeout": timeout}
    return within(
        lambda: make_vec_env(
            MAKE_ID,
            n_envs=2,
            seed=0,
            vec_env_cls=cls,
            vec_env_kwargs=vec_kwargs,
            env_kwargs={"size": 8, "max_steps": 40, **env_kwargs},
        )
    )


def steps(env: Any, n: int) -> None:
    env.reset()
    for _ in range(n):
        env.step(np.zeros(env.num_envs, dtype=np.int64))


@pytest.mark.parametrize("kind", ["fork", "dummy"])
def test_a_step_that_raises_names_the_sub_env_the_error_and_its_traceback(kind):
    env = venv(kind, fail_at=3, fail_rank=1)
    with pytest.raises(SubEnvError) as caught:
        within(lambda: steps(env, 5))
    err = caught.value
    assert (err.index, err.command, err.error_type) == (1, "step()", "builtins.ValueError")
    assert str(err).startswith(f"sub-env 1: step() raised builtins.ValueError: {MESSAGE.format(3)}")
    assert err.in_worker == (kind != "dummy")
    assert isinstance(err.__cause__, ValueError) and MESSAGE.format(3) in str(err.__cause__)
    assert "faulty_envs.py" in err.worker_traceback and "Traceback" in err.__notes__[0]
    if kind != "dummy":  # the rest of that step's answers are unread: only close() goes on
        with pytest.raises(WorkerError, match="cannot be used after this error"):
            env.step(np.zeros(2, dtype=np.int64))
    within(env.close)
    within(env.close)  # twice is fine


def test_a_killed_worker_is_an_error_naming_the_signal_under_fork():
    # under fork the other worker holds a copy of the dead one's pipe: no EOF ever comes
    env = venv("fork", fail_at=3, fail_rank=0, fail_mode="kill")
    with pytest.raises(SubEnvError, match=r"sub-env 0: its worker process died during step\(\)"):
        within(lambda: steps(env, 5))
    with pytest.raises(SubEnvError, match="killed by signal SIGKILL"):
        raise env.failure
    within(env.close)
    assert all(not p.is_alive() for p in env.processes)


@pytest.mark.parametrize("kind", ["fork", "dummy"])
def test_a_gymcurric_error_is_raised_as_itself_with_a_note_naming_the_sub_env(kind):
    env = venv(kind, fail_at=1, fail_rank=1, fail_mode="task")
    # steps to the end of an episode (max_steps 40): the autoreset refuses the task
    with pytest.raises(TaskError, match="too crowded") as caught:
        within(lambda: steps(env, 45))
    note = caught.value.__notes__[-1]
    where = "in this process" if kind == "dummy" else "in its worker process"
    expected = "sub-env 1: reset() after an episode's end (in step()) raised this "
    assert note.startswith(f"{expected}(gymcurric.errors.TaskError) {where}"), note
    within(env.close)


def test_an_env_that_cannot_be_built_in_a_worker_is_named_and_the_workers_end():
    with pytest.raises(ConfigError, match="num_hazards") as caught:
        venv("fork", num_hazards=1000)
    assert caught.value.__notes__[-1].startswith("sub-env 0: building the env raised this")


def test_a_healthy_checked_subproc_env_works_as_sb3s():
    env = venv("fork", fail_rank=-1)
    try:
        within(lambda: steps(env, 3))
        assert env.get_attr("fail_at") == [10, 10]
        assert env.env_method("_failing") == [False, False]
        assert env.has_attr("steps_taken") and not env.has_attr("no_such_name")
        assert env.get_attr("steps_taken", indices=[1]) == [3]
    finally:
        within(env.close)
    assert all(p.exitcode == 0 for p in env.processes)


def test_it_is_sb3s_subproc_vec_env():
    assert issubclass(CheckedSubprocVecEnv, SubprocVecEnv)


def test_close_after_a_step_interrupted_between_two_answers_reads_only_the_unread_one():
    # Ctrl-C (or any exception) in step_wait after it read sub-env 0's answer: close() waited
    # for that answer again, and sub-env 0's worker for its next command
    env = venv("fork", fail_rank=-1)
    within(lambda: steps(env, 1))
    env.step_async(np.zeros(2, dtype=np.int64))
    within(env.remotes[0].recv)  # what step_wait read before it was interrupted
    within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_an_interrupt_while_waiting_for_a_worker_leaves_an_env_that_closes():
    # sub-env 1's step 2 sleeps; the interrupt comes while step_wait waits for it
    env = venv("fork", fail_at=2, fail_rank=1, fail_mode="sleep")
    within(lambda: steps(env, 1))
    with ctrl_c_after(SLEEP_S / 3), pytest.raises(KeyboardInterrupt):
        env.step(np.zeros(2, dtype=np.int64))
    within(env.close, 20.0)
    assert all(not p.is_alive() for p in env.processes)
    with pytest.raises(WorkerError, match="closed"):
        env.step(np.zeros(2, dtype=np.int64))


class _InterruptedRead:
    """A pipe end whose ``recv`` is interrupted (as Ctrl-C part way through a message)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def recv(self) -> Any:
        raise KeyboardInterrupt


def test_an_interrupt_inside_a_message_breaks_the_env_and_close_reads_that_pipe_no_more():
    env = venv("fork", fail_rank=-1)
    within(lambda: steps(env, 1))
    env.remotes[1].conn = _InterruptedRead(env.remotes[1].conn)
    with pytest.raises(KeyboardInterrupt):
        env.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(WorkerError, match="sub-env 1: interrupted reading its answer"):
        env.step(np.zeros(2, dtype=np.int64))
    within(env.close, 20.0)
    assert all(not p.is_alive() for p in env.processes)


@pytest.mark.parametrize(
    ("method", "stage", "what"),
    [
        ("unloadable", "load", "does not load in the main process: builtins.ValueError: an "),
        ("unsendable", "send", "cannot be sent to the main process: builtins.TypeError: cannot "),
    ],
)
def test_a_value_that_cannot_cross_the_pipe_is_a_call_error_and_the_env_goes_on(
    method, stage, what
):
    # the answer was read whole (or never sent): the pipe is in step, the worker serving
    env = venv("fork", fail_rank=-1)
    with pytest.raises(SubEnvCallError) as caught:
        within(lambda: env.env_method(method, indices=[1]))
    assert str(caught.value).startswith(f"sub-env 1: the value {method}() returned {what}")
    assert (caught.value.index, caught.value.method, caught.value.stage) == (1, method, stage)
    assert env.failure is None
    within(lambda: steps(env, 2))
    assert within(lambda: env.get_attr("steps_taken")) == [2, 2]
    within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_call_arguments_that_do_not_load_in_the_worker_are_a_call_error_and_the_env_goes_on():
    # a class only the main process has (e.g. defined in a notebook, under spawn): the worker
    # read the command whole, did nothing, and goes on (it died of it before)
    env = venv("fork", fail_rank=-1)
    within(lambda: steps(env, 1))
    with pytest.raises(SubEnvCallError) as caught:
        within(lambda: env.set_attr("fail_at", LoadsInOneProcess(), indices=[1]))
    err = caught.value
    assert (err.index, err.method, err.stage) == (1, "set_attr('fail_at')", "args")
    assert str(err).startswith(
        "sub-env 1: the arguments of set_attr('fail_at') do not load in the sub-env's process: "
        "builtins.ValueError: a LoadsInOneProcess of process"
    ), err
    with pytest.raises(SubEnvCallError) as caught:
        within(lambda: env.env_method("answer", LoadsInOneProcess()))
    err = caught.value
    assert (err.index, err.method, err.stage, err.__notes__[-1]) == (
        0,
        "answer",
        "args",
        "Sub-envs [1] raised too",
    )
    assert env.failure is None
    within(lambda: steps(env, 2))
    assert within(lambda: env.get_attr("fail_at")) == [10, 10]  # not set: the pipes in step
    within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_step_arguments_that_do_not_load_in_the_worker_break_the_env_and_close_ends_it():
    env = venv("fork", fail_rank=-1)
    within(lambda: steps(env, 1))
    with pytest.raises(SubEnvError) as caught:
        within(lambda: env.step([LoadsInOneProcess(), LoadsInOneProcess()]))
    assert str(caught.value).startswith(
        "sub-env 0: step() (its arguments do not load in its worker) raised builtins.ValueError"
    ), caught.value
    within(env.close, 20.0)
    assert [p.exitcode for p in env.processes] == [0, 0]


def _calls_per_step(env: Any, n: int = 20) -> float:
    """Python calls (cProfile's count, not a timing) per ``env.step`` in this process."""
    actions = np.zeros(env.num_envs, dtype=np.int64)
    env.reset()
    env.step(actions)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        env.step(actions)
    profile.disable()
    return pstats.Stats(profile).total_calls / n  # type: ignore[attr-defined]


def test_a_step_costs_a_few_python_calls_per_sub_env_more_than_sb3s():
    # waiting on each pipe with multiprocessing.connection.wait cost ~40 calls per sub-env
    kwargs: dict[str, Any] = {"n_envs": 4, "seed": 0, "vec_env_kwargs": {"start_method": "fork"}}
    kwargs["env_kwargs"] = {"size": 8, "max_steps": 40, "fail_rank": -1}
    sb3 = make_vec_env(MAKE_ID, vec_env_cls=SubprocVecEnv, **kwargs)
    checked = make_vec_env(MAKE_ID, vec_env_cls=CheckedSubprocVecEnv, **kwargs)
    kwargs["vec_env_kwargs"] = {"start_method": "fork", "timeout": 30.0}
    timed = make_vec_env(MAKE_ID, vec_env_cls=CheckedSubprocVecEnv, **kwargs)
    kwargs["vec_env_kwargs"] = {"start_method": "fork", "reward_dtype": np.float32}
    cast = make_vec_env(MAKE_ID, vec_env_cls=CheckedSubprocVecEnv, **kwargs)
    try:
        calls = _calls_per_step(checked)
        extra = calls - _calls_per_step(sb3)
        with_timeout = _calls_per_step(timed)
        with_cast = _calls_per_step(cast)
    finally:
        sb3.close()
        checked.close()
        timed.close()
        cast.close()
    assert extra <= 8 * 4, extra
    assert with_timeout <= calls + 1, (with_timeout, calls)  # the poll's argument: no call more
    assert with_cast <= calls + 1, (with_cast, calls)  # one astype per step


def _trace(cls: Any, **vec_kwargs: Any) -> list[Any]:
    """What a vector env of 2 healthy sub-envs answers: resets (seeds, options), 90 steps (two
    episode ends each: terminal_observation, TimeLimit.truncated, reset_infos) and queries."""
    env = make_vec_env(
        MAKE_ID,
        n_envs=2,
        seed=3,
        vec_env_cls=cls,
        vec_env_kwargs=vec_kwargs,
        env_kwargs={"size": 8, "max_steps": 40, "fail_rank": -1},
    )
    rng = np.random.default_rng(0)
    try:
        out: list[Any] = [env.reset(), env.reset_infos]
        for i in range(90):
            out += [*env.step(rng.integers(0, 4, 2)), env.reset_infos]
            if i == 50:
                env.seed(11)
                env.set_options([{"task": None}, {}])
                out += [env.reset(), env.reset_infos]
        env.set_attr("fail_at", 7, indices=[1])
        out += [env.get_attr("fail_at"), env.get_attr("steps_taken", indices=1)]
        out += [env.env_method("_failing", indices=[0]), env.env_is_wrapped(type(None))]
        return out
    finally:
        env.close()


def _same(a: Any, b: Any, where: str = "") -> None:
    assert type(a) is type(b), (where, a, b)
    if isinstance(a, dict):
        assert a.keys() == b.keys(), (where, a, b)
        for key in a:  # not the Monitor's episode wall time
            if not (key == "t" and where.endswith(".episode")):
                _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), (where, a, b)
    else:
        assert a == b, (where, a, b)


@pytest.mark.parametrize("kind", ["fork", "dummy"])
def test_a_healthy_checked_env_answers_exactly_as_sb3s(kind):
    from stable_baselines3.common.vec_env import DummyVecEnv

    infos = [i for part in _trace(DummyVecEnv) if isinstance(part, list | tuple) for i in part]
    assert any("terminal_observation" in i for i in infos if isinstance(i, dict))  # episodes end
    if kind == "dummy":
        _same(_trace(DummyVecEnv), _trace(CheckedDummyVecEnv))
    else:
        _same(
            _trace(SubprocVecEnv, start_method=kind),
            _trace(CheckedSubprocVecEnv, start_method=kind),
        )


# ------------------------------------------------------------------ a worker that hangs


def test_a_step_that_hangs_past_the_timeout_names_the_sub_env_and_close_ends_its_worker():
    env = venv("fork", timeout=0.5, fail_at=2, fail_rank=1, fail_mode="hang")
    within(lambda: steps(env, 1))
    with pytest.raises(SubEnvError) as caught:
        within(lambda: env.step(np.zeros(2, dtype=np.int64)))  # sub-env 1 sleeps HANG_S
    err = caught.value
    assert str(err) == (
        "sub-env 1: step(): no reply within 0.5 s (the worker is alive: hung?); "
        "the vector env cannot go on"
    )
    assert (err.index, err.command, err.error_type, err.timeout) == (1, "step()", None, 0.5)
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.timeout, again.error_type) == (str(err), 0.5, None)
    with pytest.raises(WorkerError, match="cannot be used after this error"):
        env.step(np.zeros(2, dtype=np.int64))
    # at once: not after the CLOSE_GRACE_S (5 s) that a worker which reads commands gets
    within(env.close, CLOSE_GRACE_S - 1)
    assert not any(p.is_alive() for p in env.processes)
    assert [p.exitcode for p in env.processes] == [0, -signal.SIGTERM]


def test_a_healthy_run_with_a_timeout_answers_exactly_as_one_without():
    _same(
        _trace(CheckedSubprocVecEnv, start_method="fork"),
        _trace(CheckedSubprocVecEnv, start_method="fork", timeout=30.0),
    )


def test_with_reward_dtype_float32_a_checked_env_steps_exactly_as_sb3s_dummy_vec_env():
    # SB3's DummyVecEnv gives float32 rewards (its buffer), SubprocVecEnv float64 (np.stack)
    from stable_baselines3.common.vec_env import DummyVecEnv

    def run(cls: Any, **vec_kwargs: Any) -> list[Any]:
        env_kwargs = {"size": 8, "max_steps": 40, "fail_rank": -1}
        env = make_vec_env(
            MAKE_ID, 2, seed=3, vec_env_cls=cls, vec_env_kwargs=vec_kwargs, env_kwargs=env_kwargs
        )
        rng = np.random.default_rng(0)
        try:
            out = [env.reset()]
            for _ in range(90):  # two episode ends each
                out += env.step(rng.integers(0, 4, 2))[:3]
            return out
        finally:
            env.close()

    dummy = run(DummyVecEnv)
    assert run(CheckedSubprocVecEnv, start_method="fork")[2].dtype == np.float64  # as SB3's
    _same(dummy, run(CheckedSubprocVecEnv, start_method="fork", reward_dtype=np.float32))
    assert dummy[2].dtype == np.float32 and any(np.any(r != 0) for r in dummy[2::3])


@pytest.mark.parametrize("bad", [np.int64, "abc", bool, [1]])
def test_a_bad_reward_dtype_is_a_config_error_naming_it_before_any_worker_starts(bad):
    with pytest.raises(ConfigError) as caught:
        CheckedSubprocVecEnv([], start_method="fork", reward_dtype=bad)
    assert caught.value.key == "reward_dtype" and caught.value.value is bad
    assert "expected a floating numpy dtype" in str(caught.value)


def test_a_workers_first_answer_may_take_longer_than_the_timeout():
    # building an env (imports, a simulator) is not a hang: each sub-env takes 1 s here
    env = venv("fork", timeout=0.3, build_s=1.0, fail_rank=-1)
    try:
        within(lambda: steps(env, 3))
    finally:
        within(env.close)
    assert [p.exitcode for p in env.processes] == [0, 0]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), 1e7, True, "5", [1]])
def test_a_bad_timeout_is_a_config_error_naming_it_before_any_worker_starts(bad):
    with pytest.raises(ConfigError) as caught:
        CheckedSubprocVecEnv([], start_method="fork", timeout=bad)
    assert caught.value.key == "timeout" and caught.value.value is bad
    expected = f"CheckedSubprocVecEnv: invalid value for 'timeout': {bad!r} (expected seconds"
    assert str(caught.value).startswith(expected), caught.value


def test_the_timeout_holds_where_select_has_no_poll():
    # multiprocessing's wait (Windows, macOS without poll) ends on the timeout as well
    env = venv("fork", timeout=0.5, fail_at=2, fail_rank=1, fail_mode="hang")
    for remote in env.remotes:
        remote.poller = None
    within(lambda: steps(env, 1))
    with pytest.raises(SubEnvError, match=r"sub-env 1: step\(\): no reply within 0.5 s"):
        within(lambda: env.step(np.zeros(2, dtype=np.int64)))
    within(env.close, CLOSE_GRACE_S - 1)
    assert not any(p.is_alive() for p in env.processes)


# ------------------------------------------- a call that raises in a sub-env: the env goes on


def test_env_method_that_raises_in_one_sub_env_is_a_call_error_and_the_env_goes_on():
    # sub-env 0 raises: sub-env 1's answer is read before the error is raised (unread, the
    # next call would have read it as its own answer). SB3's worker exited on the exception.
    env = venv("fork", fail_rank=0)
    try:
        within(lambda: steps(env, 2))
        with pytest.raises(SubEnvCallError) as caught:
            within(lambda: env.env_method("answer"))
        err = caught.value
        assert (err.index, err.method, err.error_type, err.stage, err.in_worker) == (
            0,
            "answer",
            "builtins.ValueError",
            "call",
            True,
        )
        assert str(err).startswith(
            "sub-env 0: answer() raised builtins.ValueError: sub-env of rank 0 will not answer "
            "(the sub-env's worker goes on: the vector env can be stepped or closed)"
        ), err
        assert isinstance(err.__cause__, ValueError) and "faulty_envs.py" in err.worker_traceback
        assert env.failure is None and all(p.is_alive() for p in env.processes)
        assert within(lambda: env.env_method("answer", indices=[1])) == [1]
        assert within(lambda: env.get_attr("steps_taken")) == [2, 2]
        within(lambda: env.step(np.zeros(2, dtype=np.int64)))
        assert within(lambda: env.get_attr("steps_taken")) == [3, 3]
    finally:
        within(env.close)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_get_attr_has_attr_and_set_attr_that_raise_are_call_errors_naming_what_was_asked():
    env = venv("fork", fail_rank=1)
    try:
        within(lambda: steps(env, 1))
        raised = r"^sub-env 1: {} raised builtins\.{}: "
        with pytest.raises(
            SubEnvCallError, match=raised.format(r"get_attr\('touchy'\)", "RuntimeError")
        ):
            within(lambda: env.get_attr("touchy"))
        with pytest.raises(
            SubEnvCallError, match=raised.format(r"has_attr\('touchy'\)", "RuntimeError")
        ):
            within(lambda: env.has_attr("touchy"))
        # a property without a setter on the outermost wrapper (SB3's Monitor)
        match = raised.format(r"set_attr\('render_mode'\)", "AttributeError")
        with pytest.raises(SubEnvCallError, match=match):
            within(lambda: env.set_attr("render_mode", "human", indices=[1]))
        assert within(lambda: env.get_attr("touchy", indices=[0])) == [0]
        within(lambda: env.set_attr("fail_at", 99))
        assert within(lambda: env.get_attr("fail_at")) == [99, 99]
        within(lambda: env.step(np.zeros(2, dtype=np.int64)))
    finally:
        within(env.close)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_a_call_that_raises_in_several_sub_envs_names_the_first_and_notes_the_others():
    env = venv("fork", fail_rank=-1)
    try:
        within(lambda: steps(env, 1))  # the first reset gives each sub-env its rank
        with pytest.raises(SubEnvCallError, match=r"^sub-env 0: get_attr\('no_such_name'\)") as c:
            within(lambda: env.get_attr("no_such_name"))
        assert c.value.__notes__[-1] == "Sub-envs [1] raised too"
        # a gymcurric error is raised as itself, with a note naming the sub-env
        within(lambda: env.env_method("set_wrapper_attr", "fail_rank", 1, indices=[1]))
        with pytest.raises(TaskError, match="not here") as caught:
            within(lambda: env.env_method("answer", "task"))
        assert caught.value.__notes__[0].startswith(
            "raised by answer() of sub-env 1; its worker goes on. In the sub-env's process:\n"
        )
        assert within(lambda: env.env_method("answer", indices=[0])) == [0]
    finally:
        within(env.close)
    assert [p.exitcode for p in env.processes] == [0, 0]


def test_a_worker_that_died_before_a_call_still_breaks_the_env():
    env = venv("fork", fail_rank=-1)
    within(lambda: steps(env, 1))
    os.kill(env.processes[1].pid, signal.SIGKILL)
    env.processes[1].join(10.0)
    with pytest.raises(SubEnvError, match=r"sub-env 1: its worker process died during env_m"):
        within(lambda: env.env_method("answer"))
    with pytest.raises(WorkerError, match="cannot be used after this error"):
        env.step(np.zeros(2, dtype=np.int64))
    within(env.close, 20.0)
    assert not any(p.is_alive() for p in env.processes)
