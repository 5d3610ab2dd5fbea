"""Where the curriculum state arrays live: the backend abstraction and the process-local backend.

A backend allocates the named arrays of :func:`gymcurric.tasks.state.state_layout` and provides
the lock that guards writes to them. The curriculum logic never touches memory any other way, so a
backend swap changes where the arrays live, not what the code does.

Implemented here: :class:`LocalBackend` (plain ``np.zeros`` arrays, no lock), for one process.
The shared-memory backend, :class:`~gymcurric.tasks.shared_backend.SharedMemoryBackend`, lives in
:mod:`gymcurric.tasks.shared_backend`; its module docstring describes the segment layout, the
lock, the seqlock that lets ``sample`` read without it, and how segments are unlinked.

Process identity. A curriculum must notice when it finds itself in another process (a fork
child inherits it without any unpickling): a process-local one then refuses to run, a shared one
re-initialises its per-process parts. ``os.getpid()`` is a system call (0.3-0.5 us in a VM,
measured), too slow for every ``sample``; :func:`current_pid` keeps the pid in a module list
that a fork hook refreshes, installed by :func:`watch_forks` when the first curriculum is
built or unpickled (never at import).

A Ray backend holds the same arrays inside an actor and receives ``update_batch`` calls (one
round trip per batch of episodes) while env workers sample from a periodically refreshed copy
of ``cdf_a``/``cdf_b``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from gymcurric.tasks.state import FieldSpec

__all__ = ["PROCESS_ID", "LocalBackend", "StateBackend", "current_pid", "watch_forks"]

#: ``[pid]`` of this process; kept current in fork children by the hook of :func:`watch_forks`.
#: A list, so that hot paths read ``PROCESS_ID[0]`` (~20 ns) instead of calling ``os.getpid()``.
PROCESS_ID: list[int] = [os.getpid()]
_HOOKED: list[bool] = [False]


def _after_fork() -> None:
    PROCESS_ID[0] = os.getpid()


def watch_forks() -> None:
    """Refresh the cached pid and, once per process, install the fork hook that keeps it current.

    Called when a curriculum is built or unpickled, so importing gymcurric changes nothing.
    """
    PROCESS_ID[0] = os.getpid()
    if not _HOOKED[0] and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
        _HOOKED[0] = True


def current_pid() -> int:
    """This process's id (cached; exact once :func:`watch_forks` has run in the process)."""
    return PROCESS_ID[0]


class StateBackend(ABC):
    """Allocates the curriculum's named state arrays and provides the lock guarding writes."""

    #: True when several processes may write the arrays at once.
    shared: bool = False

    @abstractmethod
    def allocate(self, layout: Mapping[str, FieldSpec]) -> dict[str, np.ndarray]:
        """Return one zero-filled array per name in ``layout``, with its shape and dtype."""

    @abstractmethod
    def lock(self) -> AbstractContextManager[Any]:
        """Return the context manager that serialises writes to the arrays."""

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately a no-op by default
        """Release the memory (a no-op for process-local arrays)."""


class LocalBackend(StateBackend):
    """Process-local numpy arrays; the lock is a no-op.

    Examples:
        >>> from gymcurric.tasks.state import state_layout
        >>> arrays = LocalBackend().allocate(state_layout(capacity=4, window=8))
        >>> arrays["fast"].shape, arrays["window"].dtype
        ((4,), dtype('int8'))
    """

    shared = False

    def __init__(self) -> None:
        self._lock: AbstractContextManager[Any] = nullcontext()

    def allocate(self, layout: Mapping[str, FieldSpec]) -> dict[str, np.ndarray]:
        """Return one zero-filled array per name in ``layout``."""
        return {name: np.zeros(spec.shape, dtype=spec.dtype) for name, spec in layout.items()}

    def lock(self) -> AbstractContextManager[Any]:
        """Return a no-op context manager (one process, nothing to exclude)."""
        return self._lock
