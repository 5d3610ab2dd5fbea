"""CheckedSubprocVecEnv / CheckedDummyVecEnv: a sub-env that raises or dies is an error naming it.

SB3's ``SubprocVecEnv`` hung here: ``close()`` after a failed ``step_wait`` waited for answers it
had already read, and under ``fork`` a sibling worker kept a dead worker's pipe open. Every
call that could hang runs in a thread with a time limit, so a regression fails, not hangs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_util import make_vec_env

from gymcurric.errors import ConfigError, SubEnvError, TaskError, WorkerError
from gymcurric.integrations.sb3 import CheckedDummyVecEnv, CheckedSubprocVecEnv
from tests.faulty_envs import MAKE_ID, MESSAGE

LIMIT_S = 60.0


def within(call: Callable[[], Any], limit: float = LIMIT_S) -> Any:
    """``call()`` in a thread: its value or its exception, or a failure after ``limit`` s."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"{call} still waits after {limit} s (a hang)"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def venv(kind: str, **env_kwargs: Any) -> Any:
    """Two FaultyGrid sub-envs (seeds 0, 1: ranks 0, 1) in a checked vector env."""
    cls: Any = CheckedDummyVecEnv
    vec_kwargs: dict[str, Any] = {}
    if kind != "dummy":
        cls, vec_kwargs = CheckedSubprocVecEnv, {"start_method": kind}
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
