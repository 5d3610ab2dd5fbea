"""Pool membership and the distribution recompute: the curriculum's internals over its arrays.

Private to :mod:`gymcurric.tasks.curriculum`: :class:`_Membership` is the base of
:class:`~gymcurric.tasks.Curriculum` and holds what the pools call back into (``PoolOps``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks.state import EXPLORE, CurriculumState, K

if TYPE_CHECKING:
    from gymcurric.tasks.config import CurriculumConfig
    from gymcurric.tasks.pools import Pool
    from gymcurric.tasks.scorers import Scorer
    from gymcurric.tasks.shared_backend import SharedMemoryBackend
    from gymcurric.tasks.signals import SignalConfig
    from gymcurric.tasks.spaces import TaskSpace


class _Taken(Collection[int]):
    """Keys that may not be drawn again: those in the pool plus those reported invalid."""

    def __init__(self, live: dict[int, int], disabled: set[int]) -> None:
        self._live, self._disabled = live, disabled

    def __contains__(self, key: object) -> bool:
        return key in self._live or key in self._disabled

    def __len__(self) -> int:
        return len(self._live) + len(self._disabled)

    def __iter__(self) -> Iterator[int]:
        return chain(self._live, self._disabled)


class _Ops:
    """What pools may ask of the curriculum while maintaining themselves (``PoolOps``)."""

    def __init__(self, cur: _Membership) -> None:
        self._cur = cur
        self.rng = cur.rng

    def replace(self, slot: int, label: int) -> bool:
        return self._cur._replace(slot, label)

    def fill_empty(self, label: int) -> bool:
        return self._cur._fill_empty(label)


class _Membership:
    """Which task each slot holds, the id -> slot map, and the cadence recompute."""

    space: TaskSpace
    config: CurriculumConfig
    rng: np.random.Generator
    _scorer: Scorer
    _pool: Pool
    _signal: SignalConfig
    _st: CurriculumState
    _lock: Any
    _sb: SharedMemoryBackend | None
    _slot_of: dict[int, int]
    _seen_version: int
    _disabled: set[int]
    _taken: _Taken

    def _fill(self, capacity: int) -> None:
        n = self._pool.initial_slots(capacity)
        if self.space.size == capacity == n:
            for slot in range(n):  # every key of a finite space: slot i holds key i
                self._put(slot, slot, EXPLORE)
            return
        for slot in range(n):
            if not self._draw_into(slot, EXPLORE):
                raise ConfigError(
                    "capacity", capacity, "more slots than tasks to fill them", source="Curriculum"
                )

    def _put(self, slot: int, key: int, label: int) -> None:
        self._st.clear_slot(slot, key, label)
        if key >= 0:
            self._slot_of[key] = slot
        self._seen_version = int(self._st.counters[K.VERSION])

    def _draw_into(self, slot: int, label: int) -> bool:
        res = self.space.draw_key(self.rng, self._taken)
        if res is None:
            return False
        key, rejected = res
        self._st.counters[K.INVALID_GENERATED] += rejected
        old = int(self._st.task_id[slot])
        if old >= 0:
            del self._slot_of[old]
        self._put(slot, key, label)
        return True

    def _replace(self, slot: int, label: int) -> bool:
        if self._draw_into(slot, label):
            return True
        self._st.pool[slot] = label
        self._st.age[slot] = 0
        return False

    def _fill_empty(self, label: int) -> bool:
        empty = np.flatnonzero(self._st.task_id < 0)
        return bool(empty.size) and self._draw_into(int(empty[0]), label)

    def _rebuild_map(self) -> None:
        ids = self._st.task_id
        live = np.flatnonzero(ids >= 0)
        self._slot_of.clear()
        self._slot_of.update(zip(ids[live].tolist(), live.tolist(), strict=True))
        self._seen_version = int(self._st.counters[K.VERSION])

    def _recompute(self) -> None:
        # Shared backend: readers of the cumulative arrays retry while this is published.
        sb = self._sb
        opened = sb is not None and sb.publish_begin()
        try:
            self._recompute_now()
        finally:
            if sb is not None:
                sb.publish_end(opened)

    def _recompute_now(self) -> None:
        st = self._st
        active = st.pool >= 0
        if not active.any():
            raise TaskError(
                "task",
                None,
                f"no valid task left in the {type(self.space).__name__}"
                f" ({len(self._disabled)} reported invalid)",
                source="Curriculum",
            )
        raw = self._scorer.raw(st, active, self._signal)
        if self._pool.maintain(st, raw, _Ops(self)):
            raw = self._scorer.raw(st, st.pool >= 0, self._signal)
        self._pool.distribute(st, self._scorer, raw)
        st.raw[:] = raw
        c = st.counters
        c[K.RECOMPUTES] += 1
        c[K.SINCE_RECOMPUTE] = 0
        c[K.DIRTY] = 0
