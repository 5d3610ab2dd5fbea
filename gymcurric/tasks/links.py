"""How a curriculum reaches its state arrays from the process it runs in.

A :class:`~gymcurric.tasks.Curriculum` holds one link, chosen by its backend:

* :class:`LocalLink` (any backend but the shared-memory one): the arrays are this process's.
  A copy that finds itself in another process (unpickled there, or inherited by fork) refuses
  to run: its samples and updates would silently diverge from the original's.
* :class:`SharedLink` (:class:`~gymcurric.tasks.shared_backend.SharedMemoryBackend`): the arrays
  live in one shared-memory segment that every copy of the curriculum attaches to. The link
  keeps what is per process: the pid it last ran in, sample counts not yet added to the shared
  arrays, a consistent copy of what sampling reads (the seqlock of the backend) and the epoch of
  the disabled keys, which every process copies from the shared ``xproc`` array.

Both offer the same operations (enter a locked section, draw, count samples, publish a write,
share disabled keys, flush, close), so the curriculum's algorithm has no process-specific
branches. The link is composed, not inherited: it knows the curriculum's
:class:`~gymcurric.tasks.membership.Membership` (to rebuild the id -> slot map and to
recompute) and nothing else of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from gymcurric.errors import ConfigError, WorkerError
from gymcurric.tasks import shared_backend as shm
from gymcurric.tasks.backends import PROCESS_ID, LocalBackend, StateBackend
from gymcurric.tasks.membership import Membership
from gymcurric.tasks.pools import Pool
from gymcurric.tasks.shared_backend import CLOSED, SEQ, SharedMemoryBackend
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState, FieldSpec, K

__all__ = [
    "LocalLink",
    "SharedLink",
    "StateLink",
    "add_sample_array",
    "add_samples",
    "draw_slots",
    "make_backend",
    "open_link",
]

#: The shared array of a :class:`SharedLink`: ``[number of disabled keys, epoch, keys...]``. The
#: epoch moves when the disabled keys or the whole state (``load_state_dict``) change, telling
#: other processes to reload their copies.
XPROC = "_xproc"
XPROC_COUNT, XPROC_EPOCH, XPROC_KEYS = 0, 1, 2
#: Sample counts a process keeps before it takes the lock just to add them to the shared arrays.
PENDING_MAX = 1024


def make_backend(backend: StateBackend | str | None) -> StateBackend:
    """The backend named by ``backend`` (``"local"``, ``"shared"``, an instance or None)."""
    if backend is None or (isinstance(backend, str) and backend == "local"):
        return LocalBackend()
    if isinstance(backend, str) and backend == "shared":
        return SharedMemoryBackend()
    if isinstance(backend, StateBackend):
        return backend
    raise ConfigError(
        "backend", backend, "expected 'local', 'shared' or a StateBackend", source="Curriculum"
    )


def open_link(
    backend: StateBackend, layout: dict[str, FieldSpec], space: TaskSpace, capacity: int
) -> StateLink:
    """Allocate ``layout`` on ``backend`` and return the link of this process to it."""
    if isinstance(backend, SharedMemoryBackend):
        room = space.size if space.size is not None else 4 * capacity + 64
        layout = {**layout, XPROC: FieldSpec(np.dtype(np.int64), (XPROC_KEYS + room,))}
        return SharedLink(backend, backend.allocate(layout))
    return LocalLink(backend, backend.allocate(layout))


def draw_slots(
    pool: Pool, state: Any, rng: np.random.Generator, k: int
) -> tuple[list[int], np.ndarray]:
    """Draw ``k`` slots from ``state`` (the live arrays or a snapshot): ``(slots, task ids)``."""
    if k == 1:
        slot = pool.sample_one(state, rng)
        return [slot], state.task_id[slot : slot + 1].copy()
    slots = pool.sample(state, rng, k)
    return slots.tolist(), state.task_id[slots]


def add_samples(state: CurriculumState, drawn: Iterable[tuple[int, int]]) -> None:
    """Count ``(slot, task key)`` draws as samples; a slot holding another task by now is not.

    Each counted task's ``last_sampled`` becomes the sample counter at its draw (the staleness
    clock of :class:`~gymcurric.tasks.PLRScorer`).
    """
    ids, samples, last = state.task_id, state.samples, state.last_sampled
    n = state.counters.item(K.SAMPLES)
    for slot, key in drawn:
        n += 1
        if ids.item(slot) == key:
            samples[slot] = samples.item(slot) + 1
            last[slot] = n
    state.counters[K.SAMPLES] = n


def add_sample_array(state: CurriculumState, slots: np.ndarray, keys: np.ndarray) -> None:
    """:func:`add_samples` for int64 arrays of slots and task keys, in draw order (vectorised)."""
    base = state.counters.item(K.SAMPLES)
    held = state.task_id[slots] == keys
    ok = slots[held]
    np.add.at(state.samples, ok, 1)
    # a slot drawn several times keeps its last draw: the clock only grows
    np.maximum.at(state.last_sampled, ok, base + 1 + np.flatnonzero(held))
    state.counters[K.SAMPLES] = base + slots.size


class StateLink:
    """The operations a curriculum needs on its state from the current process."""

    shared = False
    #: True in a worker's copy of a shared curriculum (any process but the creator's)
    worker = False
    state: CurriculumState
    lock: Any
    members: Membership
    backend: StateBackend
    pid: int

    def bind(self, members: Membership) -> None:
        """Give the link the curriculum's membership (built on :attr:`state`)."""
        self.members = members

    def check(self, what: str) -> None:
        """At a public call: make sure this copy may run in this process."""
        raise NotImplementedError

    def enter(self, what: str) -> None:
        """At the start of a locked section: check the process, bring this copy up to date."""
        raise NotImplementedError

    def try_lock(self) -> bool:
        """Take the lock if it is free now (then :meth:`unlock`); never waits."""
        self.lock.__enter__()
        return True

    def unlock(self) -> None:
        """Release a lock taken by :meth:`try_lock`."""
        self.lock.__exit__(None, None, None)

    def publish(self) -> AbstractContextManager[Any]:
        """Bracket a write that changes what sampling reads."""
        return nullcontext()

    def sample(self, k: int) -> np.ndarray:
        """Draw ``k`` task ids and count them as sampled."""
        raise NotImplementedError

    def draw(self, k: int) -> tuple[list[int], np.ndarray]:
        """Draw ``k`` slots, uncounted (recomputing first if the distribution is stale)."""
        raise NotImplementedError

    def count(self, drawn: Iterable[tuple[int, int]]) -> None:
        """Count ``(slot, task key)`` draws as samples."""
        raise NotImplementedError

    def share_disabled(self, key: int) -> None:
        """Tell the other processes that ``key`` was reported invalid (after disabling it)."""

    def share_all_disabled(self) -> None:
        """Tell the other processes the whole set of disabled keys (after a state load)."""

    def invalidations(self) -> int:
        """Moves when tasks are reported invalid (in any process) or a state is loaded."""
        raise NotImplementedError

    def version(self) -> tuple[int, int]:
        """``(invalidations, pool version)``: changes whenever a task leaves the pool."""
        return self.invalidations(), self.state.counters.item(K.VERSION)

    def reattach(self) -> None:
        """After unpickling: rebuild what pickling dropped."""

    def flush(self) -> None:
        """Add this process's pending sample counts to the shared arrays."""

    def close(self) -> None:
        """Release the backend's memory (see :meth:`~gymcurric.tasks.Curriculum.close`)."""
        self.backend.close()


class LocalLink(StateLink):
    """Arrays of this process; the lock is the backend's (a no-op for :class:`LocalBackend`)."""

    def __init__(self, backend: StateBackend, arrays: Mapping[str, np.ndarray]) -> None:
        self.backend = backend
        self.state = CurriculumState(arrays)
        self.lock = backend.lock()
        self.pid = PROCESS_ID[0]

    def check(self, what: str) -> None:
        """Refuse to run in another process than the one this copy was built in."""
        pid = PROCESS_ID[0]
        if pid != self.pid:
            raise ConfigError(
                "backend",
                "local",
                f"a process-local curriculum was copied into process {pid} "
                f"(it was built in process {self.pid}); its samples and updates would "
                "silently diverge from the other copies. Use backend='shared' to share one "
                "curriculum between processes, or state_dict()/load_state_dict() to move its "
                "state",
                source=f"Curriculum.{what}",
            )

    enter = check

    def sample(self, k: int) -> np.ndarray:
        """Draw ``k`` task ids and count them as sampled, in one locked section."""
        st = self.state
        members = self.members
        with self.lock:
            counters = st.counters
            if counters.item(K.DIRTY):
                members.recompute()
            if k == 1:
                slot = members.pool.sample_one(st, members.rng)
                st.samples[slot] = st.samples.item(slot) + 1
                n = counters.item(K.SAMPLES) + 1
                st.last_sampled[slot] = n
                counters[K.SAMPLES] = n
                return st.task_id[slot : slot + 1].copy()
            slots = members.pool.sample(st, members.rng, k)
            ids = st.task_id[slots]
            add_sample_array(st, slots, ids)
            return ids

    def draw(self, k: int) -> tuple[list[int], np.ndarray]:
        """Draw ``k`` slots, uncounted, under the lock (recomputing a stale distribution)."""
        with self.lock:
            if self.state.counters.item(K.DIRTY):
                self.members.recompute()
            return draw_slots(self.members.pool, self.state, self.members.rng, k)

    def count(self, drawn: Iterable[tuple[int, int]]) -> None:
        """Count ``(slot, task key)`` draws as samples now."""
        with self.lock:
            add_samples(self.state, drawn)

    def invalidations(self) -> int:
        """The number of disabled keys."""
        return len(self.members.disabled)


class Closed:
    """Stands in for the arrays and lock of a closed shared curriculum: any use raises."""

    def __init__(self, name: str | None) -> None:
        self.name = name

    def fail(self) -> None:
        raise WorkerError(
            f"shared curriculum segment {self.name!r} was closed; this curriculum "
            "can no longer be used"
        )

    def __getattr__(self, attr: str) -> Any:
        self.fail()

    def __enter__(self) -> None:
        self.fail()

    def __exit__(self, *exc: object) -> None:
        return None


class Publish:
    """One write bracketed by the shared backend's seqlock (nested ones leave it to the outer)."""

    __slots__ = ("backend", "opened")

    def __init__(self, backend: SharedMemoryBackend) -> None:
        self.backend = backend
        self.opened = False

    def __enter__(self) -> None:
        self.opened = self.backend.publish_begin()

    def __exit__(self, *exc: object) -> None:
        self.backend.publish_end(self.opened)


class Snapshot:
    """A private copy of the arrays that sampling reads (see :meth:`SharedLink.draw`)."""

    __slots__ = ("cdf_a", "cdf_b", "counters", "scalars", "task_id")

    def __init__(self, st: CurriculumState) -> None:
        self.cdf_a = st.cdf_a.copy()
        self.cdf_b = st.cdf_b.copy()
        self.task_id = st.task_id.copy()
        self.counters = st.counters.copy()
        self.scalars = st.scalars.copy()


class SharedLink(StateLink):
    """This process's view of a curriculum state in a shared-memory segment."""

    shared = True
    backend: SharedMemoryBackend

    def __init__(self, backend: SharedMemoryBackend, arrays: Mapping[str, np.ndarray]) -> None:
        self.backend = backend
        self.pid = PROCESS_ID[0]
        self.worker = self.pid != backend.creator_pid
        self.pending: list[tuple[int, int]] = []  # (slot, key) drawn here, not yet counted
        self.epoch = 0  # the xproc epoch this copy's disabled keys are from
        self.attach(arrays)

    def attach(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Take the views of the segment's arrays."""
        self.state = CurriculumState(arrays)
        self.snapshot: Snapshot | None = None  # the last consistent copy of what draws read
        self.snapshot_seq = -1
        self.lock = self.backend.lock()
        self.xproc = arrays[XPROC]
        self.header = self.backend.header

    def reattach(self) -> None:
        """Re-attach the segment's views; a copy in a new process starts afresh."""
        self.attach(self.backend.arrays())
        if self.pid != PROCESS_ID[0]:
            self.moved()

    def moved(self) -> None:
        """This copy runs in a new process: its per-process parts start afresh."""
        self.pid = PROCESS_ID[0]
        self.worker = self.pid != self.backend.creator_pid
        self.pending = []  # counts taken before a fork belong to the parent
        self.epoch = -1
        self.members.seen_version = -1
        self.members.rng.bit_generator.state = np.random.PCG64().state  # unseeded until reseed

    def check(self, what: str) -> None:
        """A copy in a new process starts its per-process parts afresh."""
        if PROCESS_ID[0] != self.pid:
            self.moved()

    def enter(self, what: str) -> None:
        """Adopt a new process; add pending counts; reload what another process changed."""
        if PROCESS_ID[0] != self.pid:
            self.moved()
        if self.pending:
            self.add_pending()
        xp = self.xproc
        if xp.item(XPROC_EPOCH) != self.epoch:
            self.epoch = xp.item(XPROC_EPOCH)
            self.members.reset_disabled(xp[XPROC_KEYS : XPROC_KEYS + xp.item(XPROC_COUNT)].tolist())
        elif self.state.counters.item(K.VERSION) != self.members.seen_version:
            self.members.rebuild()  # another process changed the pool

    def try_lock(self) -> bool:
        """Take the lock if it is free now; never waits."""
        guard = self.lock
        return bool(guard.try_enter())

    def publish(self) -> Publish:
        """Make the seqlock's sequence odd for the write, even again after it."""
        return Publish(self.backend)

    def add_pending(self) -> None:
        """Add the pending sample counts to the shared arrays (under the lock)."""
        add_samples(self.state, self.pending)
        self.pending.clear()

    def share_disabled(self, key: int) -> None:
        """Append ``key`` to the shared disabled keys and move their epoch."""
        xp = self.xproc
        n = xp.item(XPROC_COUNT)
        if n < xp.size - XPROC_KEYS:  # full only for open-ended spaces, whose ids do not repeat
            xp[XPROC_KEYS + n] = key
            xp[XPROC_COUNT] = n + 1
        self.epoch = xp.item(XPROC_EPOCH) + 1
        xp[XPROC_EPOCH] = self.epoch

    def share_all_disabled(self) -> None:
        """Write every disabled key to the shared array and move the epoch."""
        xp = self.xproc
        keys = sorted(self.members.disabled)[: xp.size - XPROC_KEYS]
        xp[XPROC_KEYS : XPROC_KEYS + len(keys)] = keys
        xp[XPROC_COUNT] = len(keys)
        self.epoch = xp.item(XPROC_EPOCH) + 1
        xp[XPROC_EPOCH] = self.epoch

    def invalidations(self) -> int:
        """The epoch of the shared disabled keys."""
        epoch: int = self.xproc.item(XPROC_EPOCH)
        return epoch

    def sample(self, k: int) -> np.ndarray:
        """Draw ``k`` task ids without the lock; their counts wait for the next locked call."""
        slots, ids = self.draw(k)
        self.count(zip(slots, ids.tolist(), strict=True))
        return ids

    def draw(self, k: int) -> tuple[list[int], np.ndarray]:
        """Draw ``k`` slots, uncounted, from the last consistent copy (the seqlock)."""
        members, hdr, cnt = self.members, self.header, self.state.counters
        while True:
            if not shm.LOCK_FREE_READS:  # weakly ordered memory: read under the lock
                with self.lock:
                    self.enter("sample")
                    if cnt.item(K.DIRTY):
                        members.recompute()
                    return draw_slots(members.pool, self.state, members.rng, k)
            seq = hdr.item(SEQ)
            if cnt.item(K.DIRTY) or hdr.item(CLOSED) or (seq & 1 and self.snapshot is None):
                self.wait_for_draw()
                continue
            if not seq & 1 and seq != self.snapshot_seq:
                # a publish since the last copy: copy what sampling reads (a few kB), and keep
                # the copy only if nothing was published meanwhile (a consistent read)
                snap = Snapshot(self.state)
                if hdr.item(SEQ) != seq:
                    continue
                self.snapshot, self.snapshot_seq = snap, seq
            # While another process publishes (odd sequence), draw from the last consistent
            # copy instead of waiting: with more processes than cores the publisher may be
            # descheduled mid-publish for a whole time slice, and every sampler would stall.
            # The draw is then one publish older, as if made just before the publish began.
            return draw_slots(members.pool, self.snapshot, members.rng, k)

    def wait_for_draw(self) -> None:
        """Recompute a stale distribution (under the lock) or wait for a publish to end."""
        self.backend.check_open()
        if self.state.counters.item(K.DIRTY):
            with self.lock:
                self.enter("sample")
                if self.state.counters.item(K.DIRTY):
                    self.members.recompute()
        else:
            self.backend.wait_stable()

    def count(self, drawn: Iterable[tuple[int, int]]) -> None:
        """Keep ``(slot, task key)`` counts for the next locked call (the lock when many)."""
        pending = self.pending
        pending.extend(drawn)
        if len(pending) >= PENDING_MAX:
            with self.lock:
                self.enter("sample")

    def flush(self) -> None:
        """Take the lock to add this process's pending sample counts."""
        if self.pending and not self.backend.closed:
            with self.lock:
                self.enter("flush")

    def close(self) -> None:
        """Add the pending counts, drop this process's views; any further use raises."""
        if self.pending and PROCESS_ID[0] == self.pid and not self.backend.closed:
            with contextlib.suppress(WorkerError), self.lock:
                self.add_pending()
        closed: Any = Closed(self.backend.name)
        self.state = self.lock = self.header = self.xproc = closed
        self.snapshot = None
        self.pending = []
        self.backend.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("state", "lock", "header", "xproc", "snapshot", "snapshot_seq"):
            state.pop(key, None)  # views and the lock guard are rebuilt by reattach()
        state["pending"] = []
        state["epoch"] = -1  # the disabled keys and the id -> slot map are reloaded
        return state
