"""A HazardGrid whose sub-env fails mid-run: raises, or its process is killed by a signal.

Shared by ``tests/train/test_worker_failures.py`` (``gymcurric train`` in a new interpreter)
and ``tests/integrations/test_sb3_checked_vec_env.py`` (the vector envs themselves). Importing
this module registers :data:`ENV_ID`; a config names it as ``tests.faulty_envs:`` + ENV_ID, so
that ``gym.make`` imports it in any worker process (spawn and forkserver included).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import gymnasium as gym

from gymcurric.envs.grid import HazardGridEnv
from gymcurric.errors import TaskError

ENV_ID = "gymcurric-tests/FaultyGrid-v0"
#: What ``gymcurric train`` and ``gym.make`` take: the module, then the id it registers.
MAKE_ID = f"tests.faulty_envs:{ENV_ID}"
MESSAGE = "the faulty sub-env gives up at its step {}"
#: Seconds the ``"sleep"`` mode's step takes.
SLEEP_S = 1.5
#: Seconds the ``"hang"`` mode's step takes: for ever, as far as a test is concerned.
HANG_S = 60.0


class FaultyGrid(HazardGridEnv):
    """HazardGrid whose sub-env ``fail_rank`` fails at its step ``fail_at``.

    A sub-env's rank is its first reset's seed less ``seed0`` (SB3's ``make_vec_env`` seeds
    sub-env ``i`` with ``seed + i``). ``fail_mode``: ``"raise"`` (a ``ValueError`` of
    :data:`MESSAGE`), ``"kill"`` (its process kills itself with ``SIGKILL``), ``"task"`` (the
    reset after ``fail_at`` steps raises a :class:`~gymcurric.errors.TaskError`), ``"sleep"``
    (its step ``fail_at`` takes :data:`SLEEP_S` seconds, then goes on), ``"hang"`` (it takes
    :data:`HANG_S` seconds). Every sub-env's construction takes ``build_s`` seconds, its
    ``close()`` ``close_s`` seconds.
    """

    def __init__(
        self,
        fail_at: int = 10,
        fail_rank: int = 1,
        fail_mode: str = "raise",
        seed0: int = 0,
        build_s: float = 0.0,
        close_s: float = 0.0,
        **task: Any,
    ) -> None:
        super().__init__(**task)
        time.sleep(build_s)
        self.close_s = close_s
        self.fail_at, self.fail_rank, self.fail_mode, self.seed0 = (
            fail_at,
            fail_rank,
            fail_mode,
            seed0,
        )
        self.rank: int | None = None
        self.steps_taken = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if self.rank is None and seed is not None:
            self.rank = seed - self.seed0
        if self._failing() and self.fail_mode == "task" and self.steps_taken >= self.fail_at:
            raise TaskError("num_hazards", 99, "too crowded to place", source="FaultyGrid.reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        self.steps_taken += 1
        if self._failing() and self.steps_taken == self.fail_at:
            if self.fail_mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.fail_mode == "raise":
                raise ValueError(MESSAGE.format(self.steps_taken))
            if self.fail_mode in ("sleep", "hang"):
                time.sleep(SLEEP_S if self.fail_mode == "sleep" else HANG_S)
        return super().step(action)

    def close(self) -> None:
        time.sleep(self.close_s)
        super().close()

    def _failing(self) -> bool:
        return self.rank == self.fail_rank

    def answer(self, error: str = "value") -> int | None:
        """This sub-env's rank; the failing one raises a ``ValueError`` (or a ``TaskError``)."""
        if self._failing():
            if error == "task":
                raise TaskError("task", {"rank": self.rank}, "not here", source="FaultyGrid")
            raise ValueError(f"sub-env of rank {self.rank} will not answer")
        return self.rank

    @property
    def touchy(self) -> int:
        """0; reading it in the failing sub-env raises a ``RuntimeError``."""
        if self._failing():
            raise RuntimeError("do not read touchy here")
        return 0

    def unsendable(self) -> Any:
        """A value that does not pickle (a lock)."""
        return threading.Lock()

    def unloadable(self) -> Unloadable:
        """A value that pickles in the worker and cannot be unpickled in the main process."""
        return Unloadable()


def _refuse() -> None:
    raise ValueError("an Unloadable cannot be loaded")


class Unloadable:
    """Pickles as a call of :func:`_refuse`, which raises when it is unpickled."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_refuse, ())


def _load_in(pid: int) -> LoadsInOneProcess:
    if os.getpid() != pid:
        raise ValueError(f"a LoadsInOneProcess of process {pid} does not load in {os.getpid()}")
    return LoadsInOneProcess()


class LoadsInOneProcess:
    """Pickles in any process; loads only in the one that made it (a class a worker lacks)."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_load_in, (self.pid,))


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=FaultyGrid)
