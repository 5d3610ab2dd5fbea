"""Helpers of the CheckedSubprocVecEnv tests: a time limit on a call, and env factories.

(Their Ctrl-C, ``ctrl_c_after``, is in ``tests/interrupts.py``.)

``make_grid`` is what a worker calls (under any start method: it is found by its module's
name); it leaves a file named by its process id in ``pid_dir``, so that a test can check that
every worker it started was ended and reaped, also where the vector env was never built.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tests.faulty_envs import HANG_S, MAKE_ID

#: Seconds a call may take before the test fails instead of hanging.
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


def make_grid(pid_dir: str, **env_kwargs: Any) -> gym.Env[Any, Any]:
    """A healthy FaultyGrid (``env_kwargs``: e.g. ``build_s``), its process's id noted first."""
    Path(pid_dir, str(os.getpid())).touch()
    return gym.make(MAKE_ID, size=8, max_steps=40, fail_rank=-1, **env_kwargs)


def late_grid(pid_dir: str, delay_s: float, **env_kwargs: Any) -> gym.Env[Any, Any]:
    """``make_grid``'s env, its process's id noted only after ``delay_s`` s (a slow import)."""
    time.sleep(delay_s)
    return make_grid(pid_dir, **env_kwargs)


class HangingReset(gym.Wrapper[Any, Any, Any, Any]):
    """An env whose every ``reset`` takes ``HANG_S`` s (for ever, as far as a test is concerned)."""

    def reset(self, **kwargs: Any) -> Any:
        time.sleep(HANG_S)
        return self.env.reset(**kwargs)


def hang_in_reset(pid_dir: str, build_s: float) -> gym.Env[Any, Any]:
    """``make_grid``'s env, built in ``build_s`` s, whose resets hang (:class:`HangingReset`)."""
    return HangingReset(make_grid(pid_dir, build_s=build_s))


class BigAnswers(gym.Env[Any, Any]):
    """An env whose observations (4 MB) are more than a pipe holds: a worker blocks sending one."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1_000_000,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(self.observation_space.shape, np.float32), 0.0, False, False, {}


def die_building(pid_dir: str) -> gym.Env[Any, Any]:
    """A factory whose process, noted in ``pid_dir``, kills itself (SIGKILL) building its env."""
    Path(pid_dir, str(os.getpid())).touch()
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("not reached")


def grid_factories(pid_dir: Path, build_s: list[float]) -> list[Callable[[], Any]]:
    """One ``make_grid`` factory per entry of ``build_s``, the seconds its env takes to build."""
    return [functools.partial(make_grid, str(pid_dir), build_s=s) for s in build_s]


def ended(pids: list[int]) -> bool:
    """Whether none of the processes ``pids`` (children of this one) runs or is a zombie."""
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)


def worker_pids(pid_dir: Path) -> list[int]:
    """The process ids that ``make_grid`` noted in ``pid_dir``."""
    return sorted(int(path.name) for path in pid_dir.iterdir())
