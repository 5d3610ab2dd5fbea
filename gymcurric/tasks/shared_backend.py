"""The shared-memory backend: one curriculum state for every worker process of a machine.

Design:

* **One segment, many views.** :meth:`SharedMemoryBackend.allocate` (called when the
  :class:`~gymcurric.tasks.Curriculum` is built, never at import) creates one
  ``multiprocessing.shared_memory`` segment named ``gymcurric_<uuid4 hex>``. It starts with a
  64-byte header (``int64`` slots: magic, seqlock sequence, lock holder pid, closed flag,
  creator pid, size), followed by the named arrays of the layout, each 64-byte aligned, as
  ``np.ndarray`` views at fixed offsets.
* **Crossing a process boundary.** Pickling the backend (or a curriculum holding it) carries the
  segment name, the layout and the lock; unpickling re-attaches by name, so spawn and forkserver
  workers (the env factory of ``AsyncVectorEnv`` / SB3's ``SubprocVecEnv``) and fork children
  (which inherit the mapping) all see the same memory. Nothing is copied.
* **One lock, the kernel's where it can be.** The lock guards every write. On Linux it is an
  exclusive ``flock`` on the segment's own file (:class:`~gymcurric.tasks._shm.FileLock`):
  every process, however it was started, opens it by name, and the kernel releases it when its
  holder dies, at any point. Elsewhere the creator makes one ``multiprocessing`` lock in
  :meth:`allocate`; it travels to workers with the pickled backend and is never re-made in a
  worker (a lock made per process locks nothing). ``context=None`` makes it through the
  ``"spawn"`` context: a named POSIX semaphore, which fork children inherit and spawn/forkserver
  children re-open by name, so one backend works with every start method (a lock made in the
  fork context cannot be sent to spawn/forkserver workers, and SB3 defaults to forkserver while
  Python <= 3.13 defaults to fork on Linux). The holder records its pid in the header right
  after taking the lock and clears it right before releasing it.
* **A dead holder.** One that died before recording its pid wrote nothing: on Linux its lock is
  free again at once and nobody notices (with a semaphore, waiters raise after
  ``lock_timeout``). One that died after, inside its locked section, may have left the state
  half-written: its pid stays in the header, and every process that then takes the lock, or
  waits for it (checking every :data:`POLL_S` seconds), raises
  :class:`~gymcurric.errors.WorkerError` naming it.
* **Seqlock.** Writes that change what ``sample`` reads (pool membership, the cumulative
  arrays, their totals) are bracketed by :meth:`publish_begin` / :meth:`publish_end`, which make
  the header's sequence odd, then even. A reader notes an even sequence, copies what sampling
  reads (cumulative arrays, task ids, a few scalars: a few kB) into a private snapshot and
  keeps it if the sequence did not move; it draws from that snapshot until the next publish.
  So ``sample`` takes no lock and, while another process publishes, draws from the last
  consistent copy instead of waiting (with more processes than cores a publisher can be
  descheduled mid-publish for a whole time slice). This relies on stores and loads each staying
  in program order (x86's TSO); elsewhere (ARM) ``sample`` takes the lock (``LOCK_FREE_READS``).
* **Lifetime.** Only the creating process unlinks the segment: :meth:`close`, or a
  ``weakref.finalize`` when the backend is garbage collected or the interpreter exits; the
  resource tracker is the last resort if the creator itself is killed. Attached copies only
  drop their mapping, so a worker that dies (even by SIGKILL) leaks nothing. A mapping is never
  unmapped under live numpy views (see :mod:`gymcurric.tasks._shm`).
* **Failures are named.** A process that dies holding the lock, a segment closed by its creator,
  or one that no longer exists raise :class:`~gymcurric.errors.WorkerError` naming the segment.
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import time
import uuid
import weakref
from collections.abc import Mapping
from multiprocessing.context import BaseContext, assert_spawning
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.tasks._shm import (
    CLOSED,
    CREATOR,
    FILE_LOCKS,
    HOLDER,
    MAGIC,
    SEQ,
    SIZE,
    FileLock,
    Segment,
    open_segment,
    pid_alive,
    segment_exists,
    unlink_segment,
)
from gymcurric.tasks.backends import StateBackend, current_pid, watch_forks
from gymcurric.tasks.state import FieldSpec

__all__ = [
    "CLOSED",
    "LOCK_FREE_READS",
    "POLL_S",
    "SEGMENT_PREFIX",
    "SEQ",
    "SharedMemoryBackend",
    "segment_exists",
]

#: Prefix of every segment name (``/dev/shm/gymcurric_...`` on Linux).
SEGMENT_PREFIX = "gymcurric_"
#: True where ``sample`` reads without the lock (x86 keeps stores/loads in program order).
LOCK_FREE_READS = platform.machine().lower() in {"x86_64", "amd64", "i386", "i686", "x86"}

_MAGIC = 0x3172_7275_636D_7967  # b"gymcurr1", little-endian
_ALIGN = 64
_HEADER_BYTES = 64
#: Waits for the lock or a stable sequence check the holder's liveness this often (seconds).
POLL_S = 0.5
_SRC = "SharedMemoryBackend"


def _context(context: str | BaseContext | None) -> tuple[BaseContext, str | None]:
    if context is None:
        return mp.get_context("spawn"), None
    if isinstance(context, BaseContext):
        return context, context.get_start_method()
    methods = mp.get_all_start_methods()
    if not isinstance(context, str) or context not in methods:
        raise ConfigError(
            "context",
            context,
            f"expected None, a multiprocessing context or one of the start methods {methods}",
            source=_SRC,
        )
    return mp.get_context(context), context


class _Guard:
    """The write lock: the multiprocessing lock plus the holder's pid in the header."""

    __slots__ = ("_acquire", "_backend", "_hdr", "_release")

    def __init__(self, backend: SharedMemoryBackend, lock: Any, hdr: np.ndarray) -> None:
        self._backend, self._hdr = backend, hdr
        self._acquire, self._release = lock.acquire, lock.release

    def __enter__(self) -> None:
        if not self._acquire(True, POLL_S):
            self._backend._wait_for_lock(self._acquire)
        self._record()

    def __exit__(self, *exc: object) -> None:
        self._hdr[HOLDER] = 0
        self._release()

    def try_enter(self) -> bool:
        """Take the lock only if it is free now (then leave with ``__exit__``); never waits."""
        if not self._acquire(False):
            return False
        self._record()
        return True

    def _record(self) -> None:
        """Just taken: refuse a closed segment or a dead holder's leftovers; record our pid."""
        hdr = self._hdr
        holder = hdr.item(HOLDER)
        if hdr.item(CLOSED) or (holder and holder != current_pid()):
            # A holder clears its pid before releasing: one still there died in its locked
            # section (the kernel freed its file lock), leaving the state maybe half-written.
            # It stays there, so that every later holder refuses too.
            self._release()
            if hdr.item(CLOSED):
                self._backend._raise_closed()
            self._backend._raise_dead(holder)
        hdr[HOLDER] = current_pid()


class SharedMemoryBackend(StateBackend):
    """Curriculum state in one shared-memory segment, shared by every process it is pickled into.

    Pass it (or ``backend="shared"``) to :class:`~gymcurric.tasks.Curriculum`; the curriculum is
    then picklable into worker processes, where it attaches to the same memory and lock.

    Args:
        context: start method the workers use (``"fork"``, ``"spawn"``, ``"forkserver"``) or a
            ``multiprocessing`` context, which the lock is made in. ``None`` (default) makes a
            lock that works with every start method (see the module docstring).
        lock_timeout: seconds to wait for the lock before raising
            :class:`~gymcurric.errors.WorkerError` (``None``: forever). A holder that died
            inside its locked section is reported within :data:`POLL_S` seconds either way; on
            Linux one that died before recording its pid (having written nothing) frees the lock
            at once (see the module docstring).
        worker_update_batch: in processes other than the creator, ``update`` buffers up to this
            many episodes, or until the oldest is 1 s old, and applies them, in order, under one
            lock acquisition (the buffer is also applied by any other locked call, ``flush()``
            and ``close()``, which ``SampleCurriculumTask.close()`` calls in each worker). Many
            workers ending episodes at the same moment otherwise queue on the lock. A due buffer is
            applied only if the lock is free at that moment; otherwise the worker keeps
            buffering, up to 8 batches or 4 s, and tries again at its next episode end, so an
            episode end never waits for another process's locked section. With 8 async
            workers on 2 cores, skipping worker updates altogether lifted throughput from
            ~80 % to ~95 % of the plain vector env. ``1`` applies every update at once. The
            creator process always applies at once, so single-process runs are unchanged.
        worker_sample_batch: in processes other than the creator, ``sample_task`` draws this
            many tasks at once and hands them out one per call (the env wrappers call it once
            per episode), so a worker's episodes use a distribution up to this many of its
            episodes old and the per-episode cost of sampling is divided by it. Their sample
            counts are recorded when drawn. ``reseed`` (``reset(seed=...)``) and a change of
            the disabled tasks discard the prefetched ones. ``1`` draws at every call; the
            creator process always does.

    Raises:
        ConfigError: an unknown start method or a bad timeout.

    Examples:
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> with Curriculum(FixedTaskSpace([{"level": i} for i in range(3)]),
        ...                 backend=SharedMemoryBackend(), seed=0) as cur:
        ...     cur.backend.name.startswith(SEGMENT_PREFIX)
        True
    """

    shared = True

    def __init__(
        self,
        context: str | BaseContext | None = None,
        *,
        lock_timeout: float | None = 60.0,
        worker_update_batch: int = 16,
        worker_sample_batch: int = 4,
    ) -> None:
        self._ctx, self.start_method = _context(context)
        for name, value in (
            ("worker_update_batch", worker_update_batch),
            ("worker_sample_batch", worker_sample_batch),
        ):
            check_int(name, value, source=_SRC)
        self.worker_update_batch = worker_update_batch
        self.worker_sample_batch = worker_sample_batch
        if lock_timeout is not None and (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, int | float)
            or not lock_timeout > 0
        ):
            raise ConfigError(
                "lock_timeout", lock_timeout, "expected None or seconds > 0", source=_SRC
            )
        self.lock_timeout = lock_timeout
        self.name: str | None = None
        self._seg: Segment | None = None
        self._lock: Any = None
        self._creator = 0
        self._layout: dict[str, tuple[str, tuple[int, ...], int]] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._hdr = np.zeros(0, dtype=np.int64)
        self._finalizer: weakref.finalize | None = None
        self._closed = False

    # ------------------------------------------------------------------ memory
    def allocate(self, layout: Mapping[str, FieldSpec]) -> dict[str, np.ndarray]:
        """Create the segment and the lock; return zero-filled views, one per name in ``layout``.

        Raises:
            ConfigError: the backend already holds a curriculum's state.
        """
        if self.name is not None:
            raise ConfigError(
                "backend",
                self.name,
                "this SharedMemoryBackend already holds a "
                "curriculum's state; make one backend per Curriculum",
                source=_SRC,
            )
        watch_forks()
        offset = _HEADER_BYTES
        for key, spec in layout.items():
            self._layout[key] = (spec.dtype.str, tuple(spec.shape), offset)
            offset += -(-spec.nbytes // _ALIGN) * _ALIGN
        self.name = SEGMENT_PREFIX + uuid.uuid4().hex[:16]  # <= 31 bytes with "/" (macOS)
        seg = Segment(name=self.name, create=True, size=offset)
        self._creator = current_pid()
        self._finalizer = weakref.finalize(self, unlink_segment, seg, self._creator)
        self._lock = FileLock(self.name) if FILE_LOCKS else self._ctx.Lock()
        self._map(seg)
        hdr = self._hdr
        hdr[MAGIC], hdr[CREATOR], hdr[SIZE] = _MAGIC, self._creator, offset
        return dict(self._arrays)

    def _map(self, seg: Segment) -> None:
        buf = seg.buf
        self._seg = seg
        self._hdr = np.ndarray((_HEADER_BYTES // 8,), np.int64, buffer=buf)
        self._arrays = {
            key: np.ndarray(shape, np.dtype(dt), buffer=buf, offset=off)
            for key, (dt, shape, off) in self._layout.items()
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The named views (after :meth:`allocate`, or in an attached copy)."""
        if self._closed or self._seg is None:
            self._raise_closed()
        return dict(self._arrays)

    @property
    def header(self) -> np.ndarray:
        """The ``int64`` header slots (``SEQ``, ``CLOSED``, ... of this module)."""
        return self._hdr

    @property
    def creator_pid(self) -> int:
        """The id of the process that created the segment."""
        return self._creator

    @property
    def is_creator(self) -> bool:
        """True in the process that created the segment, on the creating object."""
        return self._finalizer is not None and self._creator == current_pid()

    # ------------------------------------------------------------------ locking
    def lock(self) -> _Guard:
        """The context manager that serialises writes (the one lock, made by the creator)."""
        if self._lock is None or self._closed:
            self._raise_closed()
        return _Guard(self, self._lock, self._hdr)

    def _wait_for_lock(self, acquire: Any) -> None:
        start = time.monotonic()
        while True:
            self._check_holder()
            if self.lock_timeout is not None and time.monotonic() - start > self.lock_timeout:
                raise WorkerError(
                    f"could not acquire the lock of shared curriculum segment "
                    f"{self.name!r} within {self.lock_timeout} s (held by process "
                    f"{self._hdr.item(HOLDER) or 'unknown'})"
                )
            if acquire(True, POLL_S):
                return

    def _check_holder(self) -> None:
        hdr = self._hdr
        if hdr.item(CLOSED):
            self._raise_closed()
        holder = hdr.item(HOLDER)
        if holder and holder != current_pid() and not pid_alive(holder):
            self._raise_dead(holder)

    def _raise_dead(self, holder: int) -> None:
        raise WorkerError(
            f"process {holder} died while holding the lock of shared curriculum "
            f"segment {self.name!r}; the shared state may be half-written: "
            "close the curriculum and restart from a checkpoint (state_dict)"
        )

    def publish_begin(self) -> bool:
        """Make the sequence odd (readers retry); False if a publish is already open."""
        hdr = self._hdr
        seq = hdr.item(SEQ)
        if seq & 1:
            return False
        hdr[SEQ] = seq + 1
        return True

    def publish_end(self, opened: bool) -> None:
        """Make the sequence even again, if this caller opened the publish."""
        if opened:
            self._hdr[SEQ] = self._hdr.item(SEQ) + 1

    def wait_stable(self) -> None:
        """Wait until no write is being published (an even sequence); raise if its writer died."""
        hdr = self._hdr
        spins = 0
        start = last = time.monotonic()
        while hdr.item(SEQ) & 1:
            if hdr.item(CLOSED):
                self._raise_closed()
            spins += 1
            time.sleep(0 if spins < 1000 else 1e-4)
            now = time.monotonic()
            if now - last >= POLL_S:
                last = now
                self._check_holder()
                if self.lock_timeout is not None and now - start > self.lock_timeout:
                    raise WorkerError(
                        f"shared curriculum segment {self.name!r} stayed "
                        f"mid-write for {self.lock_timeout} s"
                    )

    def check_open(self) -> None:
        """Raise :class:`~gymcurric.errors.WorkerError` if the segment was closed (by anyone)."""
        if self._closed or self._hdr.size == 0 or self._hdr.item(CLOSED):
            self._raise_closed()

    def _raise_closed(self) -> None:
        raise WorkerError(
            f"shared curriculum segment {self.name!r} was closed (by this handle or "
            f"by its creator, process {self._creator}); it can no longer be used"
        )

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Creator: mark closed and unlink the segment. Attached copy: drop the mapping only.

        Numpy views still held elsewhere keep their (unlinked) memory until they are freed.
        """
        if self._closed:
            return
        self._closed = True
        seg, self._seg = self._seg, None
        self._arrays, self._hdr = {}, np.zeros(0, dtype=np.int64)
        # a file lock's descriptor closes, and the creator's semaphore is unlinked, once the
        # last reference (a guard in use) goes
        self._lock = None
        if self._finalizer is not None:
            self._finalizer()  # unlinks in the creating process only
        elif seg is not None:
            seg.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    # ------------------------------------------------------------------ pickling
    def _state(self) -> dict[str, Any]:
        if self._closed or self._seg is None:
            self._raise_closed()
        return {
            "name": self.name,
            "layout": self._layout,
            "lock": None if isinstance(self._lock, FileLock) else self._lock,  # reopened by name
            "start_method": self.start_method,
            "creator": self._creator,
            "lock_timeout": self.lock_timeout,
            "worker_update_batch": self.worker_update_batch,
            "worker_sample_batch": self.worker_sample_batch,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = self._state()
        try:
            assert_spawning(self)
        except RuntimeError:
            raise ConfigError(
                "backend",
                "shared",
                "a shared-memory curriculum can be pickled "
                "only while a worker process is being started (as a Process "
                "argument, e.g. inside the env factory of AsyncVectorEnv or "
                "SubprocVecEnv), the one time its lock can travel; save it with "
                "state_dict() instead",
                source=_SRC,
            ) from None
        if self.start_method == "fork":
            raise ConfigError(
                "context",
                "fork",
                "this shared curriculum's lock was made for "
                "fork workers, but it is being sent to a spawn/forkserver worker; "
                "build the backend with context=None (any start method) or the "
                "workers' start method",
                source=_SRC,
            )
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        watch_forks()
        self._ctx, self.start_method = _context(state["start_method"])
        self.lock_timeout = state["lock_timeout"]
        self.worker_update_batch = state["worker_update_batch"]
        self.worker_sample_batch = state.get("worker_sample_batch", 1)
        self.name, self._layout, self._lock = state["name"], state["layout"], state["lock"]
        self._creator, self._finalizer, self._closed = state["creator"], None, False
        self._seg, self._arrays = None, {}
        try:
            seg = open_segment(state["name"])
        except FileNotFoundError:
            raise WorkerError(
                f"shared curriculum segment {self.name!r} does not exist any more: "
                f"its creator (process {self._creator}) closed it or exited"
            ) from None
        need = max(
            (
                off + np.dtype(dt).itemsize * int(np.prod(shape))
                for dt, shape, off in self._layout.values()
            ),
            default=_HEADER_BYTES,
        )
        if seg.size < need:
            seg.close()
            raise ConfigError(
                "name",
                self.name,
                f"segment of {seg.size} bytes, expected at least {need}",
                source=_SRC,
            )
        self._map(seg)
        if self._hdr.item(MAGIC) != _MAGIC:
            self.close()
            raise ConfigError("name", self.name, "not a gymcurric curriculum segment", source=_SRC)
        if self._hdr.item(CLOSED):
            self.close()
            raise WorkerError(
                f"shared curriculum segment {self.name!r} was closed by its "
                f"creator (process {self._creator})"
            )
        if self._lock is None:
            try:
                self._lock = FileLock(self.name)
            except FileNotFoundError:  # unlinked since it was opened above
                self.close()
                raise WorkerError(
                    f"shared curriculum segment {self.name!r} does not exist any more: "
                    f"its creator (process {self._creator}) closed it or exited"
                ) from None

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedMemoryBackend:
        # A copy of a handle to shared memory is another handle to it (same memory, same lock).
        clone = SharedMemoryBackend.__new__(SharedMemoryBackend)
        clone.__setstate__(self._state())
        return clone

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("creator" if self.is_creator else "attached")
        return f"SharedMemoryBackend(name={self.name!r}, {state})"
