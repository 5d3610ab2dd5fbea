"""The pool's slots: which task each holds, episodes recorded into them, and the recompute.

A :class:`~gymcurric.tasks.Curriculum` owns one :class:`Membership`. It keeps the id -> slot map
and the keys reported invalid (both per process: a shared curriculum rebuilds them from the
shared arrays when another process changed the pool), fills and refills slots from the task
space, records checked episodes (and regret scores) into their slots (one by one or
vectorised) and runs the recompute (scorer, pool maintenance, distribution) on the state arrays
on its cadence. It is also what the pools call back into while maintaining themselves
(:class:`~gymcurric.tasks.pools.PoolOps`). It runs under the curriculum's lock; it checks
nothing the curriculum has checked.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks.regret import uses_scores
from gymcurric.tasks.scorers import Scorer
from gymcurric.tasks.signals import record_episode, record_episodes
from gymcurric.tasks.state import EXPLORE, CurriculumState, K

if TYPE_CHECKING:
    from gymcurric.tasks.config import CurriculumConfig
    from gymcurric.tasks.spaces import TaskSpace

__all__ = ["VECTOR_MIN", "Membership", "Publisher", "TakenKeys"]

#: Batches of at least this many episodes are recorded vectorised (``record_episodes``) when
#: the recompute cadence is at least as long; otherwise one by one: the vectorised path has a
#: fixed cost of a few dozen array operations per piece between two recomputes, which pays off
#: only for long pieces (measured: 2x faster per episode at 10,000 tasks, slower at 1,000 tasks
#: whose default cadence is 32). Both give the same state, bit for bit.
VECTOR_MIN = 64


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
        config: the curriculum's scorer, pool and signal.
        recompute_every: recorded episodes between two recomputes.
        key_modulus: ids map to scoring keys modulo this (0: they are the keys).
        publisher: brackets a recompute, so that lock-free readers never see half of one.
    """

    def __init__(
        self,
        space: TaskSpace,
        state: CurriculumState,
        rng: np.random.Generator,
        config: CurriculumConfig,
        *,
        recompute_every: int,
        key_modulus: int,
        publisher: Publisher,
    ) -> None:
        self.space, self.state, self.rng = space, state, rng
        self.scorer, self.pool, self.signal = config.scorer, config.pool, config.signal
        self.recompute_every, self.key_modulus = recompute_every, key_modulus
        #: whether the scorer reacts to each episode (it then sees every one, never a batch)
        self.scorer_hook = type(self.scorer).on_update is not Scorer.on_update
        #: whether the scorer reads the regret scores (new ones make the next draw recompute)
        self.scorer_reads_scores = uses_scores(self.scorer)
        self.attach(publisher)
        #: task key -> slot of every task in the pool (this process's copy)
        self.slot_of: dict[int, int] = {}
        #: keys reported invalid (never drawn again)
        self.disabled: set[int] = set()
        self.taken = TakenKeys(self.slot_of, self.disabled)
        #: the state's ``K.VERSION`` when :attr:`slot_of` was last brought up to date
        self.seen_version = 0

    def attach(self, publisher: Publisher) -> None:
        """Publish recomputes through ``publisher`` (the curriculum's link).

        Held by a weak proxy: the link holds this membership, and a cycle between them would
        keep a shared segment alive until the cyclic garbage collector runs, instead of
        unlinking it when the curriculum is dropped.
        """
        self.publisher = weakref.proxy(publisher)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["state"] = None  # the owner gives it back (a shared state is re-attached)
        state["publisher"] = None  # a weak proxy: the owner attaches its link again
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

    def slots(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each task key (int64), ``-1`` where the task is not in the pool."""
        slot_of = self.slot_of.get
        return np.fromiter((slot_of(k, -1) for k in keys.tolist()), np.int64, keys.size)

    # ---------------------------------------------------------------- episodes
    def record_one(self, task_id: Any, return_: float, success: float | None, cost: float) -> None:
        """Record one checked episode into its task's slot; recompute when due.

        An episode of a task no longer in the pool counts in ``stale_updates``.
        """
        st = self.state
        counters = st.counters
        if self.key_modulus:
            task_id %= self.key_modulus
        slot = self.slot_of.get(task_id)
        if slot is None:
            self.space.check_id(task_id)
            counters[K.STALE_UPDATES] += 1
            return
        signal = record_episode(st, self.signal, slot, return_, success, cost)
        since = counters.item(K.SINCE_RECOMPUTE) + 1
        counters[K.SINCE_RECOMPUTE] = since
        if since >= self.recompute_every or (
            self.scorer_hook and self.scorer.on_update(st, slot, signal, return_)
        ):
            self.recompute()

    def record(self, keys: Any, returns: Any, successes: Any, costs: Any) -> None:
        """Record checked episodes in order.

        One by one with :meth:`record_one`, or vectorised in chunks that end where the
        recompute cadence falls, so that every episode after a recompute maps through the pool
        as that recompute left it. A scorer with an ``on_update`` hook sees every episode.
        ``keys`` are checked task ids (an array or a sequence), ``returns``, ``successes`` (NaN:
        none) and ``costs`` float arrays or sequences.
        """
        n, every = len(keys), self.recompute_every
        if self.scorer_hook or n < VECTOR_MIN or every < VECTOR_MIN:
            ks, rs, ss, cs = (
                v.tolist() if isinstance(v, np.ndarray) else v
                for v in (keys, returns, successes, costs)
            )
            for i, key in enumerate(ks):
                si = ss[i]
                self.record_one(key, rs[i], None if si != si else si, cs[i])
            return
        returns, successes, costs = (
            np.asarray(v, dtype=np.float64) for v in (returns, successes, costs)
        )
        keys = np.asarray(keys, dtype=np.int64)
        if self.key_modulus:
            keys = keys % self.key_modulus
        st, counters = self.state, self.state.counters
        slot_of = self.slot_of.get
        todo = keys.tolist()
        start = 0
        while start < n:
            # up to the episode that makes the recompute due; stale ids (not in the pool) do
            # not count, so a piece holding some ends before it and the next piece goes on
            since = counters.item(K.SINCE_RECOMPUTE)
            end = min(n, start + max(every - since, 1))
            slots = np.array([slot_of(k, -1) for k in todo[start:end]], dtype=np.int64)
            ok = slots >= 0
            took = int(ok.sum())
            if took < len(slots):
                counters[K.STALE_UPDATES] += len(slots) - took
            if took:
                if took == len(slots):
                    at: slice | np.ndarray = slice(start, end)
                else:
                    slots = slots[ok]
                    at = np.flatnonzero(ok) + start
                record_episodes(st, self.signal, slots, returns[at], successes[at], costs[at])
                counters[K.SINCE_RECOMPUTE] = since + took
                if since + took >= every:
                    self.recompute()
            start = end

    def record_scores(self, keys: np.ndarray, scores: np.ndarray, nonfinite: int = 0) -> None:
        """Record checked finite regret scores of task keys (in order); count the rest.

        A key no longer in the pool counts in ``stale_scores``; ``nonfinite`` scores the caller
        skipped count in ``nonfinite_scores``. A task scored twice keeps its last score. If the
        scorer reads scores, the distribution is recomputed before the next draw.
        """
        st, counters = self.state, self.state.counters
        slots = self.slots(keys)
        ok = slots >= 0
        took = int(np.count_nonzero(ok))
        counters[K.SCORES] += took
        counters[K.STALE_SCORES] += keys.size - took
        counters[K.NONFINITE_SCORES] += nonfinite
        if not took:
            return
        slots, scores = slots[ok], scores[ok]
        last, at = np.unique(slots[::-1], return_index=True)  # each slot's last score
        st.score[last] = scores[::-1][at]
        np.add.at(st.scored, slots, 1)
        if self.scorer_reads_scores:
            counters[K.DIRTY] = 1

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
