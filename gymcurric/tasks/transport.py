"""How an env reaches its curriculum: take a task, report an episode, wherever the curriculum is.

The env wrappers (:class:`~gymcurric.wrappers.SampleCurriculumTask` and its vector twin) talk
only to a :class:`TaskTransport`. Four implement it:

* :class:`LocalTransport`: a curriculum object in this process (a process-local
  :class:`~gymcurric.tasks.Curriculum`, or any object with its methods). Calls go straight
  through.
* :class:`SharedMemoryTransport`: a :class:`~gymcurric.tasks.Curriculum` on the shared-memory
  backend. In the process that built the curriculum it behaves as the local one; in a worker
  process it buffers episodes and draws tasks ahead (``worker_update_batch`` and
  ``worker_sample_batch`` of :class:`~gymcurric.tasks.SharedMemoryBackend`), so that an episode
  end never waits on another process's locked section.
* :class:`~gymcurric.tasks.channel.ChannelTransport`: one sub-env's slot in a
  :class:`~gymcurric.tasks.channel.TaskChannel`, through which the main process of an async
  vector env hands out tasks and collects results in batches.
* :class:`~gymcurric.integrations.ray.RayCurriculum`: a client of a curriculum on a Ray actor,
  which samples from a local snapshot and sends its episodes in batches.

:func:`transport_for` picks the transport of a curriculum object.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from gymcurric.errors import ConfigError, WorkerError
from gymcurric.tasks.backends import PROCESS_ID
from gymcurric.tasks.curriculum import Curriculum
from gymcurric.tasks.shared_backend import SharedMemoryBackend

__all__ = [
    "CURRICULUM_METHODS",
    "LocalTransport",
    "SharedMemoryTransport",
    "TaskTransport",
    "transport_for",
]

#: What a curriculum object must have for :class:`LocalTransport`.
CURRICULUM_METHODS = ("sample_task", "task", "update", "mark_invalid", "probabilities")
#: A worker applies its buffered episodes once the oldest is this old (seconds), so slow workers
#: (long episodes) report about as soon as they would unbuffered.
BUFFER_MAX_AGE_S = 1.0
#: A worker whose buffer is due but finds the lock taken keeps buffering, up to this many
#: batches or this age (seconds); past either it waits for the lock.
HOLD_BATCHES = 8
HOLD_S = 4.0


class TaskTransport(ABC):
    """What an env wrapper needs of its curriculum, wherever that lives."""

    #: False where the env side reports nothing: another process accounts its episodes
    #: (a :class:`~gymcurric.tasks.channel.TaskChannel` with ``episodes_in_main=True``).
    reports_episodes: bool = True

    @abstractmethod
    def take_task(self) -> tuple[int, dict[str, Any]]:
        """The task of the env's next episode: ``(task_id, task dict)``."""

    @abstractmethod
    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id`` (to resume an episode)."""

    @abstractmethod
    def any_task(self) -> dict[str, Any]:
        """A task of the curriculum, drawn from nothing (to build a first env)."""

    @abstractmethod
    def report_episode(
        self, task_id: int, return_: float, success: float | bool | None, cost: float | None
    ) -> None:
        """Report a finished episode; a bad value raises here, naming it."""

    @abstractmethod
    def refuse_task(self, task_id: int, reason: str) -> None:
        """The env refused ``task_id``: it is never drawn again."""

    def reseed(self, seed: int) -> None:  # noqa: B027 - optional, a no-op by default
        """Reseed this process's task stream (``reset(seed=...)``)."""

    def flush(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Deliver whatever this end buffered (before a checkpoint reads the curriculum)."""

    def release(self) -> None:  # noqa: B027 - optional, a no-op by default
        """This env's end is done: flush it; a copy in a worker drops its connection.

        Never closes a curriculum in the process that created it.
        """


class CurriculumTransport(TaskTransport):
    """A transport to a curriculum object in this process (its own copy in a worker)."""

    def __init__(self, curriculum: Any) -> None:
        missing = [m for m in CURRICULUM_METHODS if not callable(getattr(curriculum, m, None))]
        if missing:
            raise ConfigError(
                "curriculum",
                curriculum,
                f"expected a gymcurric Curriculum (missing methods {missing})",
                source="SampleCurriculumTask",
            )
        try:  # a Curriculum owns its transport: a weak reference back keeps them cycle-free
            self._curriculum: Callable[[], Any] = weakref.ref(curriculum)
        except TypeError:  # an object without weak references
            self._curriculum = lambda: curriculum
        #: the process this transport was made in
        self.pid = PROCESS_ID[0]

    @property
    def curriculum(self) -> Any:
        """The curriculum this transport reaches (it does not keep the curriculum alive)."""
        cur = self._curriculum()
        if cur is None:
            raise ReferenceError(
                "the curriculum of this transport was garbage collected; keep a reference "
                "to the curriculum while its transport is in use"
            )
        return cur

    def settle(self) -> None:
        """Adopt the current process (after a fork): nothing per process here."""
        self.pid = PROCESS_ID[0]

    def task(self, task_id: int) -> dict[str, Any]:
        task: dict[str, Any] = (self._curriculum() or self.curriculum).task(task_id)
        return task

    def any_task(self) -> dict[str, Any]:
        return self.task(int(self.curriculum.probabilities()[0][0]))

    def refuse_task(self, task_id: int, reason: str) -> None:
        self.curriculum.mark_invalid(task_id, reason)

    def discard_drawn(self) -> None:
        """Forget tasks drawn ahead (the generator was reseeded); none here."""

    def reseed(self, seed: int) -> None:
        """Reseed the curriculum's generator in this process, if it has one."""
        reseed = getattr(self.curriculum, "reseed", None)
        if callable(reseed):
            reseed(seed)

    def flush(self) -> None:
        """Flush the curriculum (a shared one adds this process's pending sample counts)."""
        flush = getattr(self.curriculum, "flush", None)
        if callable(flush):
            flush()

    def release(self) -> None:
        """Close a worker's copy of the curriculum (the creator's is never closed here)."""
        backend = getattr(self.curriculum, "backend", None)
        if getattr(backend, "is_creator", True) is False and not getattr(backend, "closed", 1):
            self.curriculum.close()  # an attached copy: adds its pending counts, drops its map

    def __reduce__(self) -> tuple[Any, ...]:
        # unpickled as the curriculum's own transport of the new process (one per process)
        return (transport_for, (self.curriculum,))


class LocalTransport(CurriculumTransport):
    """Straight calls to a curriculum in this process.

    Examples:
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(3)]), seed=0)
        >>> transport = transport_for(cur)
        >>> tid, task = transport.take_task()
        >>> transport.report_episode(tid, 1.0, True, None)
        >>> cur.stats()["curriculum/updates"]
        1.0
    """

    def take_task(self) -> tuple[int, dict[str, Any]]:
        """Draw one task from the curriculum."""
        tid, task = (self._curriculum() or self.curriculum).sample_task()
        return int(tid), task

    def report_episode(
        self, task_id: int, return_: float, success: float | bool | None, cost: float | None
    ) -> None:
        """Report the episode with the curriculum's ``update`` (checked there)."""
        (self._curriculum() or self.curriculum).update(task_id, return_, success, cost)


class SharedMemoryTransport(CurriculumTransport):
    """A shared curriculum, from its creator (straight calls) or a worker (batched).

    In a worker process (any process but the curriculum's creator) episodes are checked where
    they end and buffered, up to ``worker_update_batch`` of them or until the oldest is 1 s
    old, then applied in order under one lock acquisition, if the lock is free at that moment;
    otherwise the worker keeps buffering (up to 8 batches or 4 s) and tries again at its next
    episode end. Tasks are drawn ``worker_sample_batch`` at a time and handed out in order,
    each counted as a sample when handed out; ``reseed`` and a change of the disabled tasks
    discard the ones drawn ahead. :meth:`flush` and :meth:`release` apply the buffer.
    """

    def __init__(self, curriculum: Curriculum) -> None:
        super().__init__(curriculum)
        self.settle()

    def settle(self) -> None:
        """Batch sizes for the process this transport runs in; empty buffers."""
        backend = self.curriculum.backend
        assert isinstance(backend, SharedMemoryBackend)
        self._backend = backend
        self.pid = PROCESS_ID[0]
        worker = self.pid != backend.creator_pid
        self._worker = worker
        self._update_batch = backend.worker_update_batch if worker else 1
        self._sample_batch = backend.worker_sample_batch if worker else 1
        # buffered episodes, checked, as the columns record() takes (success NaN: none)
        self._ids: list[int] = []
        self._returns: list[float] = []
        self._successes: list[float] = []
        self._costs: list[float] = []
        self._oldest = 0.0  # when the oldest buffered episode ended
        self._ahead: list[tuple[int, int]] = []  # (slot, task id) drawn ahead, last first
        self._ahead_version = -1
        space = self.curriculum.space
        # ids of a space with variants are expanded per draw: those are drawn one at a time
        self._draws_ahead = self._sample_batch > 1 and not (space.has_variants and space.size)
        self._link = self.curriculum.link

    def take_task(self) -> tuple[int, dict[str, Any]]:
        """Draw one task from the curriculum."""
        if PROCESS_ID[0] != self.pid:
            self.settle()  # inherited by fork: the parent's buffers are not ours
        cur = self._curriculum() or self.curriculum  # (the property raises if it is gone)
        if not self._worker:  # the creator: the curriculum's own call (a subclass may extend it)
            tid, task = cur.sample_task()
            return tid, task
        if not self._draws_ahead:  # (a worker's sample_task comes here: draw without it)
            tid = int(cur.sample(1)[0])
            return tid, cur.task(tid)
        ahead, version = self._ahead, self._link.invalidations()
        if version != self._ahead_version:
            ahead.clear()  # tasks were disabled (or the state loaded) meanwhile: draw afresh
        if not ahead:
            drawn = cur.draw(self._sample_batch)
            ahead.extend(reversed(list(zip(drawn.slots, drawn.ids.tolist(), strict=True))))
            self._ahead_version = version
        slot_and_id = ahead.pop()
        self._link.count((slot_and_id,))  # counted as handed out
        tid = slot_and_id[1]
        return tid, cur.task(tid)

    def report_episode(
        self, task_id: int, return_: float, success: float | bool | None, cost: float | None
    ) -> None:
        """Report the episode with the curriculum's ``update`` (checked there)."""
        if PROCESS_ID[0] != self.pid:
            self.settle()
        cur = self._curriculum() or self.curriculum
        if not self._worker:  # the creator: the curriculum's own call (a subclass may extend it)
            cur.update(task_id, return_, success, cost)
            return
        if self._update_batch <= 1:  # (a worker's update comes here: apply without it)
            cur.apply_update(*cur.check_update(task_id, return_, success, cost))
            return
        task_id, return_, checked_success, checked_cost = cur.check_update(
            task_id, return_, success, cost
        )
        now = time.monotonic()
        ids = self._ids
        if not ids:
            self._oldest = now
        ids.append(task_id)
        self._returns.append(return_)
        self._successes.append(math.nan if checked_success is None else checked_success)
        self._costs.append(checked_cost)
        n, age = len(ids), now - self._oldest
        if n < self._update_batch and age < BUFFER_MAX_AGE_S:
            return
        # Due. Below the hold limits never wait for another process's locked section here (the
        # worker would stall its vector env's step): apply only if the lock is free now.
        self._apply(wait=n >= HOLD_BATCHES * self._update_batch or age >= HOLD_S)

    def _apply(self, *, wait: bool) -> None:
        # taken out first: an error while applying drops the batch (never applies part twice)
        columns = (self._ids, self._returns, self._successes, self._costs)
        self._ids, self._returns, self._successes, self._costs = [], [], [], []
        if not self.curriculum.record(*columns, wait=wait, checked=True):
            self._ids, self._returns, self._successes, self._costs = columns  # lock was busy

    def discard_buffer(self) -> None:
        """Drop the buffered episodes (the state they were for was replaced)."""
        for column in (self._ids, self._returns, self._successes, self._costs):
            column.clear()

    def discard_drawn(self) -> None:
        """Forget the tasks drawn ahead (the generator was reseeded)."""
        self._ahead.clear()

    def reseed(self, seed: int) -> None:
        """Discard the tasks drawn ahead and reseed this process's generator."""
        self._ahead.clear()
        self.curriculum.reseed(seed)

    def flush(self) -> None:
        """Apply the buffered episodes (waiting for the lock) and the pending sample counts."""
        if self._ids and PROCESS_ID[0] == self.pid and not self._backend.closed:
            self._apply(wait=True)
        self._link.flush()

    def release(self) -> None:
        """Flush, then close a worker's copy of the curriculum."""
        with contextlib.suppress(WorkerError):  # the creator closed the segment: nothing to add
            self.flush()
        super().release()


def transport_for(curriculum: Any) -> TaskTransport:
    """The transport through which an env in this process reaches ``curriculum``.

    A transport is returned as is; a :class:`~gymcurric.tasks.Curriculum` gives its own
    (:meth:`~gymcurric.tasks.Curriculum.transport`: a :class:`SharedMemoryTransport` on the
    shared-memory backend, one per process, else a :class:`LocalTransport`); any other
    curriculum object (with the methods of :data:`CURRICULUM_METHODS`) gets a
    :class:`LocalTransport`.

    Raises:
        ConfigError: ``curriculum`` lacks a method a transport needs.
    """
    if isinstance(curriculum, TaskTransport):
        return curriculum
    if isinstance(curriculum, Curriculum):
        return curriculum.transport()
    return LocalTransport(curriculum)
