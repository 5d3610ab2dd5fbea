"""Low-level shared-memory helpers of :mod:`gymcurric.tasks.shared_backend`.

A ``SharedMemory`` that never unmaps under live numpy views, attaching without owning the
segment, the creator's unlink-on-finalize, a liveness probe for pids, and the segment's write
lock where the kernel can hold it (:class:`FileLock`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from multiprocessing.shared_memory import SharedMemory

from gymcurric.errors import WorkerError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment,unused-ignore]

#: Header slots (int64) at offset 0 of a segment; see :mod:`gymcurric.tasks.shared_backend`.
MAGIC, SEQ, HOLDER, CLOSED, CREATOR, SIZE = range(6)
#: True where a segment is a file (``/dev/shm/<name>``) that :class:`FileLock` can lock: Linux.
FILE_LOCKS = fcntl is not None and sys.platform.startswith("linux")


class Segment(SharedMemory):
    """A ``SharedMemory`` whose ``close`` never unmaps under live numpy views.

    ``SharedMemory.close()`` unmaps even when numpy arrays still point into the mapping (their
    next access is a segfault), and its ``__del__`` calls it. Here the mapping is only dropped:
    the ``mmap`` object unmaps itself once no view references it.
    """

    def close(self) -> None:
        buf = getattr(self, "_buf", None)
        if buf is not None:
            with contextlib.suppress(BufferError):  # an array exports it; it goes with it
                buf.release()
            self._buf = None
        self._mmap = None
        fd = getattr(self, "_fd", -1)
        if os.name != "nt" and fd >= 0:
            os.close(fd)
            self._fd = -1


def open_segment(name: str) -> Segment:
    """Attach to ``name`` without taking part in its unlinking.

    Python >= 3.13: ``track=False``. Before, attaching registers the name with the resource
    tracker again; workers share their parent's tracker, whose registry is a set, so this is a
    no-op there (unregistering would instead drop the creator's registration, the crash-time
    cleanup).
    """
    if sys.version_info >= (3, 13):
        return Segment(name=name, track=False)  # type: ignore[call-arg,unused-ignore]
    return Segment(name=name)


def segment_exists(name: str) -> bool:
    """True if a shared-memory segment called ``name`` exists (it is not opened or registered)."""
    if os.path.isdir("/dev/shm"):
        return os.path.exists(os.path.join("/dev/shm", name))
    try:
        import _posixshmem  # POSIX without /dev/shm (macOS)
    except ImportError:  # Windows: opening registers nothing there
        try:
            open_segment(name).close()
        except FileNotFoundError:
            return False
        return True
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_RDONLY, mode=0o600)
    except FileNotFoundError:
        return False
    os.close(fd)
    return True


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped, counts as dead)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill would terminate the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def unlink_segment(seg: Segment, creator: int) -> None:
    """Unlink the segment if this is the creating process; always drop this mapping."""
    if os.getpid() == creator:
        buf = seg._buf
        if buf is not None:  # tell attached processes, which may still be running
            buf[CLOSED * 8 : CLOSED * 8 + 8] = (1).to_bytes(8, sys.byteorder)
        with contextlib.suppress(FileNotFoundError):
            seg.unlink()
    seg.close()


_EX_NB = (fcntl.LOCK_EX | fcntl.LOCK_NB) if fcntl is not None else 0
_UN = fcntl.LOCK_UN if fcntl is not None else 0

#: Every live :class:`FileLock` of this process, for the fork hook.
_FILE_LOCKS: weakref.WeakSet[FileLock] = weakref.WeakSet()
_FORK_HOOKED: list[bool] = [False]


class FileLock:
    """The write lock of a segment as an exclusive ``flock`` on the segment's file.

    Same interface as a ``multiprocessing`` lock (``acquire(block, timeout)``, ``release()``).
    The kernel drops a ``flock`` when its process dies, whenever that is, so a holder killed
    between taking the lock and recording its pid in the header leaves the lock free, instead of
    taken by nobody anyone can name (a semaphore stays taken until ``lock_timeout``).

    ``flock`` excludes open file descriptions, not threads: a thread lock orders the threads of
    one process, and each handle opens the file itself. A fork child inherits its parent's
    descriptor, and with it a lock the parent holds: the fork hook gives every child a
    descriptor of its own, reopened through ``/proc/self/fd`` (the creator may have unlinked the
    segment already). Waiting polls (``flock`` has no timeout), backing off from a yield to 1 ms.
    """

    def __init__(self, name: str) -> None:
        self.path = os.path.join("/dev/shm", name)
        self._fd = os.open(self.path, os.O_RDWR)  # close-on-exec, as every Python descriptor
        self._threads = threading.Lock()
        _FILE_LOCKS.add(self)
        if not _FORK_HOOKED[0]:
            os.register_at_fork(after_in_child=_reopen_file_locks)
            _FORK_HOOKED[0] = True

    def _try_flock(self) -> bool:
        if self._fd < 0:
            raise WorkerError(f"the lock file {self.path!r} could not be reopened in this process")
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; wait up to ``timeout`` seconds (``None``: forever) if ``block``."""
        # fast path (the lock is free): one thread-lock try and one flock call, nothing else
        if self._threads.acquire(False):
            try:
                fcntl.flock(self._fd, _EX_NB)
                return True
            except BlockingIOError:
                pass
            except OSError as exc:  # a descriptor closed or not reopened in this process
                self._threads.release()
                if self._fd < 0:
                    raise WorkerError(
                        f"the lock file {self.path!r} could not be reopened in this process"
                    ) from exc
                raise
            self._threads.release()
        return self._acquire_slow(block, timeout)

    def _acquire_slow(self, block: bool, timeout: float | None) -> bool:
        deadline = None
        if not block:
            took = self._threads.acquire(False)
        elif timeout is None:
            took = self._threads.acquire()
        else:
            deadline = time.monotonic() + timeout
            took = self._threads.acquire(True, max(timeout, 0.0))
        if not took:
            return False
        try:
            if self._try_flock():
                return True
            delay = 0.0
            while block:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                time.sleep(delay if deadline is None else min(delay, deadline - now))
                if self._try_flock():
                    return True
                delay = min(2 * delay or 2e-5, 1e-3)
        except BaseException:
            self._threads.release()
            raise
        self._threads.release()
        return False

    def release(self) -> None:
        """Release the lock (taken by this thread)."""
        fcntl.flock(self._fd, _UN)
        self._threads.release()

    def close(self) -> None:
        """Close the descriptor (which releases the lock if this handle still holds it)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _reopen_file_locks() -> None:
    """Fork hook (child): a descriptor and a thread lock of its own for every file lock."""
    for lock in list(_FILE_LOCKS):
        lock._threads = threading.Lock()
        old, lock._fd = lock._fd, -1
        if old < 0:
            continue
        with contextlib.suppress(OSError):  # no /proc: acquire() raises, naming the file
            lock._fd = os.open(f"/proc/self/fd/{old}", os.O_RDWR)
        os.close(old)  # the parent's lock, if held, stays held through the parent's descriptor
