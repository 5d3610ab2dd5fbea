"""Where the curriculum state arrays live: the backend abstraction and the process-local backend.

A backend allocates the named arrays of :func:`gymcurric.tasks.state.state_layout` and provides
the lock that guards writes to them. The curriculum logic never touches memory any other way, so a
backend swap changes where the arrays live, not what the code does.

Implemented here: :class:`LocalBackend` (plain ``np.zeros`` arrays, no lock), for one process.

Intended design of the shared-memory backend (not implemented yet; recorded here so that it stays
a drop-in):

* **One segment, many views.** ``allocate`` sums the ``FieldSpec.nbytes`` of the layout (each
  array aligned to 64 bytes), creates a single ``multiprocessing.shared_memory.SharedMemory``
  block and returns ``np.ndarray`` views at fixed offsets. The segment name is made from
  ``uuid4`` *when the backend is constructed* (never at import) and travels with the pickled
  backend; ``__setstate__`` re-attaches by name (``track=False`` on Python >= 3.13, otherwise
  unregistering from the resource tracker in children), so fork, forkserver and spawn workers
  (SB3's ``SubprocVecEnv`` defaults to forkserver) all see the same memory.
* **One lock from the right context.** The backend takes the start-method context the workers
  use (``multiprocessing.get_context(method)``) and creates ``ctx.Lock()`` in its constructor;
  the lock is pickled into workers with the env factories (allowed while spawning), never re-made
  in ``__setstate__`` (a lock created per process locks nothing). A ``Manager().Lock()`` is
  avoided: ~84 us per acquire against ~1 us.
* **What the lock covers.** ``update`` holds it for the O(1) scalar writes of one episode;
  the cadence recompute (every ``recompute_every`` updates, counted in the shared
  ``counters[K.SINCE_RECOMPUTE]``) runs batched numpy under the same single acquisition.
  ``sample`` reads ``cdf_a``/``cdf_b`` without the lock and checks ``counters[K.RECOMPUTES]``
  before and after the ``searchsorted`` (a seqlock); on a change it retries. If lock contention
  ever shows in profiles, the next step is one single-producer update ring per worker inside
  the segment, merged by whichever process crosses the cadence.
* **Id -> slot maps** are per-process dict caches validated against ``counters[K.VERSION]``
  (bumped on every slot change) and rebuilt from ``task_id`` when it moves; the arrays stay the
  single source of truth. Labels, where needed, are keyed by a stable digest (``hashlib``),
  never by Python's salted ``hash()``.
* **Lifetime.** The creating process owns the segment: ``close()`` unlinks it, a
  ``weakref.finalize`` unlinks it at interpreter exit, and a worker that dies cannot leak it
  because workers only attach. Each process samples with its own generator seeded from
  ``(seed, worker_index)``; with several writers the global task sequence depends on
  scheduling, so exact-resume guarantees hold for a single process.

A Ray backend holds the same arrays inside an actor and receives ``update_batch`` calls (one
round trip per batch of episodes) while env workers sample from a periodically refreshed copy
of ``cdf_a``/``cdf_b``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from gymcurric.tasks.state import FieldSpec

__all__ = ["LocalBackend", "StateBackend"]


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

    Example:
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
