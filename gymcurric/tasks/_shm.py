"""Low-level shared-memory helpers of :mod:`gymcurric.tasks.shared_backend`.

A ``SharedMemory`` that never unmaps under live numpy views, attaching without owning the
segment, the creator's unlink-on-finalize, and a liveness probe for pids.
"""

from __future__ import annotations

import contextlib
import os
import sys
from multiprocessing.shared_memory import SharedMemory

#: Header slots (int64) at offset 0 of a segment; see :mod:`gymcurric.tasks.shared_backend`.
MAGIC, SEQ, HOLDER, CLOSED, CREATOR, SIZE = range(6)


class _Segment(SharedMemory):
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


def _open(name: str) -> _Segment:
    """Attach to ``name`` without taking part in its unlinking.

    Python >= 3.13: ``track=False``. Before, attaching registers the name with the resource
    tracker again; workers share their parent's tracker, whose registry is a set, so this is a
    no-op there (unregistering would instead drop the creator's registration, the crash-time
    cleanup).
    """
    if sys.version_info >= (3, 13):
        return _Segment(name=name, track=False)  # type: ignore[call-arg,unused-ignore]
    return _Segment(name=name)


def segment_exists(name: str) -> bool:
    """True if a shared-memory segment called ``name`` exists (it is not opened or registered)."""
    if os.path.isdir("/dev/shm"):
        return os.path.exists(os.path.join("/dev/shm", name))
    try:
        import _posixshmem  # POSIX without /dev/shm (macOS)
    except ImportError:  # Windows: opening registers nothing there
        try:
            _open(name).close()
        except FileNotFoundError:
            return False
        return True
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_RDONLY, mode=0o600)
    except FileNotFoundError:
        return False
    os.close(fd)
    return True


def _alive(pid: int) -> bool:
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


def _finalize(seg: _Segment, creator: int) -> None:
    """Unlink the segment if this is the creating process; always drop this mapping."""
    if os.getpid() == creator:
        buf = seg._buf
        if buf is not None:  # tell attached processes, which may still be running
            buf[CLOSED * 8 : CLOSED * 8 + 8] = (1).to_bytes(8, sys.byteorder)
        with contextlib.suppress(FileNotFoundError):
            seg.unlink()
    seg.close()
