"""Sub-envs whose methods that gymcurric calls raise: for the worker-survival tests.

Shared by ``tests/wrappers/vector/test_sub_env_errors.py`` (Gymnasium vector envs) and
``tests/integrations/test_sb3_sub_env_errors.py`` (SB3 ``SubprocVecEnv``); importable by
spawn/forkserver workers. Also the user's wrapper whose attributes are named like those of
gymcurric's wrappers (``tests/wrappers/vector/test_sub_env_names.py``,
``tests/integrations/test_sb3_sub_env_names.py``), a curriculum wrapper that refuses to resume
some tasks (and a vector env of two over a channel, :func:`channel_envs`), a look-alike of the
curriculum wrapper (:class:`LookAlike`), and a user's wrapper whose methods return values a
worker cannot send.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import PresentDatapack, SampleCurriculumTask
from gymcurric.wrappers.vector import SampleCurriculumTask as VectorSampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv
from tests.semantics.stubs import StateEnv

SPACE = FixedTaskSpace([{"level": i + 1, "len": 4} for i in range(8)])


@contextlib.contextmanager
def shared_curriculum_envs(make: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """A shared-memory curriculum over :data:`SPACE` (seed 0) and the vector env ``make(cur)``.

    Both are closed afterwards, the env first; the curriculum also where ``make`` raises.
    """
    cur = Curriculum(SPACE, seed=0, backend="shared")
    try:
        envs = make(cur)
        try:
            yield cur, envs
        finally:
            envs.close()
    finally:
        cur.close()


class DescribeFails(StateEnv):
    """A caption-less env whose ``describe()`` (user code) raises ``error`` at step ``fail_at``."""

    def __init__(self, fail_at: int = -1, error: type[Exception] = ValueError) -> None:
        super().__init__(captions=False)
        self.fail_at = fail_at
        self.error = error

    def describe(self) -> str:
        if self.t == self.fail_at:
            raise self.error(f"no words for step {self.t}")
        return f"state {self.v}"


class FlushFails(SampleCurriculumTask):
    """A curriculum wrapper whose ``flush_curriculum()`` raises ``error`` (when one is given)."""

    def __init__(self, env, curriculum, error=None):
        super().__init__(env, curriculum)
        self.error = error

    def flush_curriculum(self) -> None:
        if self.error is not None:
            raise self.error
        super().flush_curriculum()


def flush_fails(curriculum, error=None):
    return FlushFails(TaskStubEnv("stub"), curriculum, error)


class ResumeRefuses(SampleCurriculumTask):
    """A curriculum wrapper (a subclass of yours) that refuses to resume the tasks ``refused``.

    Its ``resume_curriculum_task()`` raises ``ValueError`` for them, in the sub-env's process:
    after the main process checked the ids, so the other sub-envs may already be armed.
    """

    def __init__(self, env, curriculum, refused=(), channel=None, channel_index=None):
        super().__init__(env, curriculum, channel=channel)
        if channel_index is not None:
            self.channel_index = channel_index  # as make_curriculum_vec binds it
        self.refused = frozenset(refused)

    def resume_curriculum_task(self, task_id):
        if task_id in self.refused:
            raise ValueError(f"this sub-env does not resume task {task_id}")
        super().resume_curriculum_task(task_id)


def resume_refuses(curriculum, refused=()):
    return ResumeRefuses(TaskStubEnv("stub"), curriculum, refused)


def channel_resume_refuses(curriculum, channel, index, refused=()):
    """A stub env in :class:`ResumeRefuses`, bound to ``channel`` as its sub-env ``index``."""
    return ResumeRefuses(TaskStubEnv("stub"), curriculum, refused, channel, index)


def channel_envs(curriculum, refused=(), spares=0):
    """Two sub-envs taking their tasks from a channel; sub-env 1 refuses to resume ``refused``.

    A ``SyncVectorEnv`` under gymcurric's vector ``SampleCurriculumTask``, which holds the
    channel (``TaskChannel(2, spares=spares)``).
    """
    chan = TaskChannel(2, spares=spares)
    fns = [
        partial(channel_resume_refuses, curriculum, chan, 0),
        partial(channel_resume_refuses, curriculum, chan, 1, refused),
    ]
    return VectorSampleCurriculumTask(SyncVectorEnv(fns), curriculum, channel=chan)


def step_and_flush(envs, steps):
    """Step a two-sub-env vector env ``steps`` times, then flush its curriculum work."""
    for _ in range(steps):
        envs.step(np.zeros(2, np.int64))
    envs.flush_curriculum()


class LookAlike(TaskStubEnv):
    """Every plain name a checkpoint uses, without gymcurric's wrapper (runs task 2's level)."""

    task_id: Any = 2
    pending_task_id: Any = None
    resuming: Any = False

    def __init__(self) -> None:
        super().__init__("look-alike")
        self.flushes = 0

    def flush_curriculum(self) -> None:
        self.flushes += 1


class RecordsCurriculumCalls:
    """A user's ``flush_curriculum()`` and ``awaiting_reset()``, named like gymcurric's wrappers'.

    Mixed into a user's single-env wrapper (:class:`Shadowing`) or vector wrapper
    (``tests/wrappers/vector/test_curriculum_outer_names.py``): each method records its call in
    :attr:`calls`, and ``awaiting_reset()`` answers what the curriculum wrapper would not there,
    every env awaiting its reset (``[True]`` per env).
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)  # gym.Wrapper's or VectorWrapper's
        self.calls: list[str] = []

    def flush_curriculum(self) -> None:
        self.calls.append("flush_curriculum")

    def awaiting_reset(self) -> list[bool]:
        self.calls.append("awaiting_reset")
        return [True] * getattr(self, "num_envs", 1)  # a single env's wrapper: one entry


class Shadowing(RecordsCurriculumCalls, gym.Wrapper):
    """A user's wrapper with attributes and methods named like those of gymcurric's wrappers.

    Stacked above them, it has each name first for a vector env's ``get_attr`` / ``set_attr``
    (the outermost layer with the name), for SB3's ``env_method("set_wrapper_attr", ...)``, and
    for a method called by name (``call`` / ``env_method``, ``get_wrapper_attr``, the ``.env``
    chain). Its ``flush_curriculum()`` and ``awaiting_reset()`` are its own (the latter says
    ``[True]``): it records each call in :attr:`calls` (:class:`RecordsCurriculumCalls`).
    """

    task_id: Any = "mine"
    pending_task_id: Any = "mine"
    resuming: Any = "mine"
    next_datapack: Any = "mine"


def shadowing_curriculum(curriculum, name="env"):
    """A curriculum-wrapped stub env under :class:`Shadowing`."""
    return Shadowing(SampleCurriculumTask(TaskStubEnv(name), curriculum))


def shadowing_present_datapack(env):
    """``PresentDatapack(env, None)`` under :class:`Shadowing` (a vector env's sub-env)."""
    return Shadowing(PresentDatapack(env, None))


class Unsendable(gym.Wrapper):
    """A user's wrapper whose methods return values that cannot travel back from a worker.

    ``lock()``: a lock, which the worker's pipe cannot pickle (the worker exited on it);
    ``unloadable()``: a value that pickles but does not load in the main process (the pipe's
    unpickling raised there); ``number()``: 7.
    """

    def lock(self) -> Any:
        return threading.Lock()

    def unloadable(self) -> Any:
        return WorkerOnly()

    def number(self) -> int:
        return 7


class UnsendableTaskId(gym.Wrapper):
    """A user's wrapper with a ``task_id`` of its own that a worker cannot send (a lock).

    Stacked above gymcurric's curriculum wrapper, it has the name first for a vector env's
    ``get_attr("task_id")``: a worker asked for it exits on the pickling error.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.task_id = threading.Lock()


def unsendable_task_id_curriculum(curriculum):
    """A curriculum-wrapped stub env under :class:`UnsendableTaskId`."""
    return UnsendableTaskId(SampleCurriculumTask(TaskStubEnv("stub"), curriculum))


class WorkerOnly:
    """Pickles anywhere; loads nowhere (as a class only the worker has)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (refuse_to_load, ())


def refuse_to_load() -> Any:
    raise RuntimeError("built only in the worker")


def unsendable():
    """A caption-less stub env under :class:`Unsendable`."""
    return Unsendable(StateEnv(captions=False))
