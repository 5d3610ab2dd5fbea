"""How a curriculum crosses process boundaries: attach, adopt a new process, pickle, close.

Private to :mod:`gymcurric.tasks.curriculum` (see its module docstring for the behaviour):
:class:`_CrossProcess` is a base of :class:`~gymcurric.tasks.Curriculum`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.tasks import shared_backend as _sb
from gymcurric.tasks._membership import _Membership, _Taken
from gymcurric.tasks.backends import _PID, LocalBackend, StateBackend, watch_forks
from gymcurric.tasks.shared_backend import CLOSED, SEQ, SharedMemoryBackend
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState, FieldSpec, K

#: Extra shared array (shared backend only): [number of disabled keys, epoch, keys...]. The
#: epoch moves when the disabled keys or the whole state (load_state_dict) change, telling
#: other processes to reload their caches.
_XPROC = "_xproc"
_XP_N, _XP_EPOCH, _XP_KEYS = 0, 1, 2
#: Sample counts a process keeps before it takes the lock just to add them to the shared arrays.
_PENDING_MAX = 1024


def add_shared_fields(layout: dict[str, FieldSpec], space: TaskSpace, capacity: int) -> None:
    """Add the cross-process array to a shared curriculum's layout (room for disabled keys)."""
    room = space.size if space.size is not None else 4 * capacity + 64
    layout[_XPROC] = FieldSpec(np.dtype(np.int64), (_XP_KEYS + room,))


def _make_backend(backend: StateBackend | str | None) -> StateBackend:
    if backend is None or (isinstance(backend, str) and backend == "local"):
        return LocalBackend()
    if isinstance(backend, str) and backend == "shared":
        return SharedMemoryBackend()
    if isinstance(backend, StateBackend):
        return backend
    raise ConfigError(
        "backend", backend, "expected 'local', 'shared' or a StateBackend", source="Curriculum"
    )


class _Closed:
    """Stands in for the arrays and lock of a closed shared curriculum: any use raises."""

    def __init__(self, name: str | None) -> None:
        self._name = name

    def _raise(self) -> None:
        raise WorkerError(
            f"shared curriculum segment {self._name!r} was closed; this curriculum "
            "can no longer be used"
        )

    def __getattr__(self, attr: str) -> Any:
        self._raise()

    def __enter__(self) -> None:
        self._raise()

    def __exit__(self, *exc: object) -> None:
        return None


class _Snapshot:
    """A private copy of the arrays that sampling reads (see ``_sample_shared``)."""

    __slots__ = ("cdf_a", "cdf_b", "counters", "scalars", "task_id")

    def __init__(self, st: CurriculumState) -> None:
        self.cdf_a = st.cdf_a.copy()
        self.cdf_b = st.cdf_b.copy()
        self.task_id = st.task_id.copy()
        self.counters = st.counters.copy()
        self.scalars = st.scalars.copy()


class _CrossProcess(_Membership):
    """Per-process parts of a curriculum and the shared-backend paths of its public methods."""

    _backend: StateBackend
    _shared: bool
    _pid: int
    _pend: list[tuple[int, int]]
    _upd: list[tuple[Any, float, float | None, float]]
    _upd_batch: int
    _smp_batch: int
    _ahead: list[tuple[int, int]]
    _ahead_epoch: int
    _upd_t0: float
    _epoch: int
    _xp: np.ndarray
    _hdr: np.ndarray
    _mod: int

    def _update_one(self, task_id: Any, r: float, s: float | None, c: float) -> None:
        raise NotImplementedError  # Curriculum's

    def task(self, task_id: int) -> dict[str, Any]:
        raise NotImplementedError  # Curriculum's

    def _apply_buffered(self, upd: list[tuple[int, float, float | None, float]]) -> None:
        raise NotImplementedError  # Curriculum's

    def _attach(self, arrays: Mapping[str, np.ndarray]) -> None:
        self._st = CurriculumState(arrays)
        self._snap: _Snapshot | None = None  # the last consistent copy of what sample reads
        self._snap_seq = -1
        self._lock = self._backend.lock()
        self._xp = arrays[_XPROC] if self._shared else np.zeros(0, dtype=np.int64)
        self._hdr = self._sb.header if self._sb is not None else np.zeros(0, dtype=np.int64)

    def _moved(self, what: str) -> None:
        """This copy runs in a new process: refuse (process-local) or re-initialise (shared)."""
        pid = _PID[0]
        if not self._shared:
            raise ConfigError(
                "backend",
                "local",
                f"a process-local curriculum was copied into process {pid} "
                f"(it was built in process {self._pid}); its samples and updates would "
                "silently diverge from the other copies. Use backend='shared' to share one "
                "curriculum between processes, or state_dict()/load_state_dict() to move its "
                "state",
                source=f"Curriculum.{what}",
            )
        self._pid = pid
        self._pend = []  # counts taken before a fork belong to the parent
        self._upd = []  # and so do buffered episodes
        # Workers buffer their episodes (the creator applies at once): see worker_update_batch;
        # and draw tasks ahead: see worker_sample_batch.
        self._upd_batch = cast(SharedMemoryBackend, self._sb).worker_update_batch
        self._smp_batch = cast(SharedMemoryBackend, self._sb).worker_sample_batch
        self._ahead = []
        self._ahead_epoch = -1
        self._seen_version = self._epoch = -1
        self.rng.bit_generator.state = np.random.PCG64().state  # unseeded until reseed()

    def _enter(self, what: str) -> None:
        """At the start of a locked section: check the process; bring caches up to date."""
        if _PID[0] != self._pid:
            self._moved(what)
        if self._shared:
            self._sync()

    def _sync(self) -> None:
        if self._pend:
            self._flush()
        xp = self._xp
        if xp.item(_XP_EPOCH) != self._epoch:
            self._epoch = xp.item(_XP_EPOCH)
            self._disabled.clear()
            self._disabled.update(xp[_XP_KEYS : _XP_KEYS + xp.item(_XP_N)].tolist())
            self._rebuild_map()
        elif self._st.counters.item(K.VERSION) != self._seen_version:
            self._rebuild_map()  # another process changed the pool
        if self._upd:  # buffered episodes, in order, against the up-to-date id -> slot map
            upd, self._upd = self._upd, []
            self._apply_buffered(upd)

    def _flush(self) -> None:
        st = self._st
        ids, smp = st.task_id, st.samples
        for slot, key in self._pend:
            if ids.item(slot) == key:  # the slot may hold another task by now
                smp[slot] = smp.item(slot) + 1
        st.counters[K.SAMPLES] = st.counters.item(K.SAMPLES) + len(self._pend)
        self._pend.clear()

    def _share_disabled(self, key: int) -> None:
        xp = self._xp
        n = xp.item(_XP_N)
        if n < xp.size - _XP_KEYS:  # full only for open-ended spaces, whose ids do not repeat
            xp[_XP_KEYS + n] = key
            xp[_XP_N] = n + 1
        self._epoch = xp.item(_XP_EPOCH) + 1
        xp[_XP_EPOCH] = self._epoch

    def _share_all_disabled(self) -> None:
        xp = self._xp
        keys = sorted(self._disabled)[: xp.size - _XP_KEYS]
        xp[_XP_KEYS : _XP_KEYS + len(keys)] = keys
        xp[_XP_N] = len(keys)
        self._epoch = xp.item(_XP_EPOCH) + 1
        xp[_XP_EPOCH] = self._epoch

    def _draw(self, k: int, state: Any = None) -> tuple[list[int], np.ndarray]:
        st = cast(CurriculumState, self._st if state is None else state)
        if k == 1:
            slot = self._pool.sample_one(st, self.rng)
            return [slot], st.task_id[slot : slot + 1].copy()
        slots = self._pool.sample(st, self.rng, k)
        return slots.tolist(), st.task_id[slots]

    def _sample_shared(self, k: int) -> np.ndarray:
        if k != 1:
            check_int("k", k, source="Curriculum.sample", allow_numpy=True)
        slots, ids = self._draw_shared(int(k))
        self._count_samples(zip(slots, ids.tolist(), strict=True))
        return self.space.expand(ids, self.rng) if self._mod else ids

    def _draw_shared(self, k: int) -> tuple[list[int], np.ndarray]:
        hdr, cnt = self._hdr, self._st.counters
        while True:
            if not _sb.LOCK_FREE_READS:  # weakly ordered memory: read under the lock
                with self._lock:
                    self._enter("sample")
                    if cnt.item(K.DIRTY):
                        self._recompute()
                    slots, ids = self._draw(k)
                break
            seq = hdr.item(SEQ)
            if cnt.item(K.DIRTY) or hdr.item(CLOSED) or (seq & 1 and self._snap is None):
                self._sample_wait()
                continue
            if not seq & 1 and seq != self._snap_seq:
                # a publish since the last copy: copy what sampling reads (a few kB), and keep
                # the copy only if nothing was published meanwhile (a consistent read)
                snap = _Snapshot(self._st)
                if hdr.item(SEQ) != seq:
                    continue
                self._snap, self._snap_seq = snap, seq
            # While another process publishes (odd sequence), draw from the last consistent
            # copy instead of waiting: with more processes than cores the publisher may be
            # descheduled mid-publish for a whole time slice, and every sampler would stall.
            # The draw is then one publish older, as if made just before the publish began.
            slots, ids = self._draw(k, self._snap)
            break
        return slots, ids

    def _count_samples(self, drawn: Any) -> None:
        """Keep ``(slot, task id)`` sample counts for the next locked section."""
        pend = self._pend
        pend.extend(drawn)
        if len(pend) >= _PENDING_MAX:
            with self._lock:
                self._enter("sample")

    def _sample_ahead(self) -> tuple[int, dict[str, Any]]:
        """A worker's ``sample_task``: hand out tasks drawn ``worker_sample_batch`` at a time;
        each is counted as a sample when handed out."""
        if _PID[0] != self._pid:
            self._moved("sample")
        ahead, epoch = self._ahead, self._xp.item(_XP_EPOCH)
        if epoch != self._ahead_epoch:
            ahead.clear()  # tasks were disabled (or the state loaded) meanwhile: draw afresh
        if not ahead:  # drawn uncounted: each is counted as it is handed out
            slots, ids = self._draw_shared(self._smp_batch)
            ahead.extend(reversed(list(zip(slots, ids.tolist(), strict=True))))
            self._ahead_epoch = epoch
        slot, tid = ahead.pop()
        self._count_samples(((slot, tid),))
        return tid, self.task(tid)

    # ---------------------------------------------------------------- for TaskChannel
    def _draw_uncounted(self, k: int) -> tuple[list[int], np.ndarray]:
        """Draw ``k`` task ids, uncounted: ``(slots, ids)`` (see :meth:`_count_drawn`)."""
        if _PID[0] != self._pid:
            self._moved("sample")
        if self._shared:
            slots, ids = self._draw_shared(k)
        else:
            with self._lock:
                if self._st.counters.item(K.DIRTY):
                    self._recompute()
                slots, ids = self._draw(k)
        return slots, (self.space.expand(ids, self.rng) if self._mod else ids)

    def _count_drawn(self, slots: list[int], ids: list[int]) -> None:
        """Count ids drawn by :meth:`_draw_uncounted` as sampled (a slot since reused is not)."""
        keys = [i % self._mod for i in ids] if self._mod else ids
        if self._shared:
            self._count_samples(zip(slots, keys, strict=True))
        else:
            with self._lock:
                self._pend.extend(zip(slots, keys, strict=True))
                self._flush()

    def _slot_for(self, task_id: int) -> int | None:
        """The pool slot of ``task_id`` (None if it is not in the pool)."""
        with self._lock:
            self._enter("_slot_for")
            return self._slot_of.get(task_id % self._mod if self._mod else task_id)

    def _membership_version(self) -> tuple[int, int]:
        """Changes whenever a task leaves the pool (disabled anywhere, evicted, state loaded)."""
        disabled = self._xp.item(_XP_EPOCH) if self._shared else len(self._disabled)
        return disabled, self._st.counters.item(K.VERSION)

    def _sample_wait(self) -> None:
        sb = cast(SharedMemoryBackend, self._sb)
        if self._hdr.item(CLOSED):
            sb._raise_closed()
        if self._st.counters.item(K.DIRTY):
            with self._lock:
                self._enter("sample")
                if self._st.counters.item(K.DIRTY):
                    self._recompute()
        else:
            sb.wait_stable()

    # ---------------------------------------------------------------- pickling, closing
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pend"] = []
        state["_upd"] = []
        state["_ahead"] = []
        if self._shared:  # views and the lock guard are rebuilt by attaching, not copied
            for key in ("_st", "_lock", "_taken", "_hdr", "_xp", "_snap", "_snap_seq"):
                del state[key]
            state["_slot_of"] = {}
            state["_seen_version"] = state["_epoch"] = -1
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        watch_forks()
        if self._shared:
            self._taken = _Taken(self._slot_of, self._disabled)
            self._attach(cast(SharedMemoryBackend, self._sb).arrays())
            if self._pid != _PID[0]:
                self._moved("__setstate__")
        # a process-local copy keeps the creator's pid: used in another process, it refuses

    def _close_shared(self) -> None:
        """Drop this process's views (so the mapping can go) and make any further use raise."""
        sb = cast(SharedMemoryBackend, self._sb)
        if (self._pend or self._upd) and _PID[0] == self._pid and not sb.closed:
            with contextlib.suppress(WorkerError), self._lock:
                self._sync()  # this process's buffered episodes and sample counts
        closed = cast(Any, _Closed(cast(SharedMemoryBackend, self._sb).name))
        self._st = self._lock = self._hdr = self._xp = closed
        self._snap = None
        self._pend = []
        self._upd = []
