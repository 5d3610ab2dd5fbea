"""Which task each pool slot holds, and the distribution recompute: a part of every curriculum.

A :class:`~gymcurric.tasks.Curriculum` owns one :class:`Membership`. It keeps the id -> slot map
and the keys reported invalid (both per process: a shared curriculum rebuilds them from the
shared arrays when another process changed the pool), fills and refills slots from the task
space, and runs the recompute (scorer, pool maintenance, distribution) on the state arrays. It is
also what the pools call back into while maintaining themselves
(:class:`~gymcurric.tasks.pools.PoolOps`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks.state import EXPLORE, CurriculumState, K

if TYPE_CHECKING:
    from gymcurric.tasks.pools import Pool
    from gymcurric.tasks.scorers import Scorer
    from gymcurric.tasks.signals import SignalConfig
    from gymcurric.tasks.spaces import TaskSpace

__all__ = ["Membership", "Publisher", "TakenKeys"]


class Publisher(Protocol):
    """Brackets writes that change what sampling reads (the shared backend's seqlock)."""

    def publish(self) -> AbstractContextManager[Any]:
        """A context manager around one such write."""
        ...


class TakenKeys(Collection[int]):
    """Keys that may not be drawn again: those in the pool plus those reported invalid."""

    def __init__(self, live: dict[int, int], disabled: set[int]) -> None:
        self._live, self._disabled = live, disabled

    def __contains__(self, key: object) -> bool:
        return key in self._live or key in self._disabled

    def __len__(self) -> int:
        return len(self._live) + len(self._disabled)

    def __iter__(self) -> Iterator[int]:
        return chain(self._live, self._disabled)


class Membership:
    """The pool's slots: the id -> slot map, the disabled keys, refills and the recompute.

    Args:
        space: where tasks come from.
        state: the curriculum's state arrays.
        rng: the curriculum's generator (refills draw from it).
        scorer, pool, signal: the curriculum's parts (:class:`CurriculumConfig`).
        publisher: brackets a recompute, so that lock-free readers never see half of one.
    """

    def __init__(
        self,
        space: TaskSpace,
        state: CurriculumState,
        rng: np.random.Generator,
        scorer: Scorer,
        pool: Pool,
        signal: SignalConfig,
        publisher: Publisher,
    ) -> None:
        self.space, self.state, self.rng = space, state, rng
        self.scorer, self.pool, self.signal = scorer, pool, signal
        self.publisher = publisher
        #: task key -> slot of every task in the pool (this process's copy)
        self.slot_of: dict[int, int] = {}
        #: keys reported invalid (never drawn again)
        self.disabled: set[int] = set()
        self.taken = TakenKeys(self.slot_of, self.disabled)
        #: the state's ``K.VERSION`` when :attr:`slot_of` was last brought up to date
        self.seen_version = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["state"] = None  # the owner gives it back (a shared state is re-attached)
        return state

    # ---------------------------------------------------------------- PoolOps
    def replace(self, slot: int, label: int) -> bool:
        """Put a fresh task into ``slot``; if none is left, keep its task (relabelled)."""
        if self.draw_into(slot, label):
            return True
        self.state.pool[slot] = label
        self.state.age[slot] = 0
        return False

    def fill_empty(self, label: int) -> bool:
        """Put a fresh task into the first empty slot; False if none is empty or none is left."""
        empty = np.flatnonzero(self.state.task_id < 0)
        return bool(empty.size) and self.draw_into(int(empty[0]), label)

    # ---------------------------------------------------------------- slots
    def fill(self, capacity: int) -> None:
        """Fill the pool's initial slots (every key of a finite space that fits: in order)."""
        n = self.pool.initial_slots(capacity)
        if self.space.size == capacity == n:
            for slot in range(n):  # every key of a finite space: slot i holds key i
                self.put(slot, slot, EXPLORE)
            return
        for slot in range(n):
            if not self.draw_into(slot, EXPLORE):
                raise ConfigError(
                    "capacity", capacity, "more slots than tasks to fill them", source="Curriculum"
                )

    def put(self, slot: int, key: int, label: int) -> None:
        """Clear ``slot`` and give it ``key`` (``-1``: empty) with ``label``."""
        self.state.clear_slot(slot, key, label)
        if key >= 0:
            self.slot_of[key] = slot
        self.seen_version = int(self.state.counters[K.VERSION])

    def draw_into(self, slot: int, label: int) -> bool:
        """Put a fresh key from the space into ``slot``; False if the space has none left."""
        drawn = self.space.draw_key(self.rng, self.taken)
        if drawn is None:
            return False
        key, rejected = drawn
        self.state.counters[K.INVALID_GENERATED] += rejected
        old = int(self.state.task_id[slot])
        if old >= 0:
            del self.slot_of[old]
        self.put(slot, key, label)
        return True

    def rebuild(self) -> None:
        """Rebuild :attr:`slot_of` from the state arrays (another process changed the pool)."""
        ids = self.state.task_id
        live = np.flatnonzero(ids >= 0)
        self.slot_of.clear()
        self.slot_of.update(zip(ids[live].tolist(), live.tolist(), strict=True))
        self.seen_version = int(self.state.counters[K.VERSION])

    def reset_disabled(self, keys: Any) -> None:
        """Replace the disabled keys (from a state dict or another process) and rebuild."""
        self.disabled.clear()
        self.disabled.update(int(k) for k in keys)
        self.rebuild()

    # ---------------------------------------------------------------- recompute
    def recompute(self) -> None:
        """Maintain the pool and recompute the distribution (published as one write).

        Raises:
            TaskError: no valid task is left in the pool.
        """
        with self.publisher.publish():
            st = self.state
            active = st.pool >= 0
            if not active.any():
                raise TaskError(
                    "task",
                    None,
                    f"no valid task left in the {type(self.space).__name__}"
                    f" ({len(self.disabled)} reported invalid)",
                    source="Curriculum",
                )
            raw = self.scorer.raw(st, active, self.signal)
            if self.pool.maintain(st, raw, self):
                raw = self.scorer.raw(st, st.pool >= 0, self.signal)
            self.pool.distribute(st, self.scorer, raw)
            st.raw[:] = raw
            c = st.counters
            c[K.RECOMPUTES] += 1
            c[K.SINCE_RECOMPUTE] = 0
            c[K.DIRTY] = 0
