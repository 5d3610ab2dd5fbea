"""The curriculum facade: ``sample`` task ids, ``update`` with episode results, checkpoint.

Per call: ``sample`` is an inverse-CDF lookup on a cached cumulative array (O(log n)); ``update``
writes a few scalars into the episode's slot (O(1)). Every ``recompute_every`` accepted updates
(default ``max(32, capacity // 32)``) the pool is maintained and the distribution recomputed in
batched numpy (O(n)); nothing scans the pool per reset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from gymcurric.errors import ConfigError, DataError, TaskError
from gymcurric.tasks.backends import LocalBackend, StateBackend
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.diagnostics import base_stats
from gymcurric.tasks.scorers import Scorer
from gymcurric.tasks.signals import check_episode, record_episode
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import EMPTY, EXPLOIT, EXPLORE, CurriculumState, K, state_layout

__all__ = ["STATE_FORMAT", "Curriculum"]

#: Format tag written into every state dict.
STATE_FORMAT = "gymcurric.curriculum/1"


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

    def __init__(self, cur: Curriculum) -> None:
        self._cur = cur
        self.rng = cur.rng

    def replace(self, slot: int, label: int) -> bool:
        return self._cur._replace(slot, label)

    def fill_empty(self, label: int) -> bool:
        return self._cur._fill_empty(label)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


class Curriculum:
    """Learning-progress task selection over a task space, with checkpointable array state.

    Args:
        space: where tasks come from (:mod:`gymcurric.tasks.spaces`).
        config: scorer, pool, signal, seed and cadence (default :class:`CurriculumConfig`).
        backend: where the state arrays live (default :class:`LocalBackend`).
        **overrides: fields of :class:`CurriculumConfig` replacing those of ``config``.

    Raises:
        ConfigError: a bad config value or a scorer/pool that does not fit the space.
        TaskError: the space's validator rejected every retry while filling the pool.

    Example:
        >>> from gymcurric.tasks import FixedTaskSpace
        >>> cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(3)]), seed=0)
        >>> (tid,) = cur.sample()
        >>> cur.update(tid, return_=1.0, success=True)
        >>> cur.stats()["curriculum/updates"]
        1.0
    """

    def __init__(
        self,
        space: TaskSpace,
        config: CurriculumConfig | None = None,
        *,
        backend: StateBackend | None = None,
        **overrides: Any,
    ) -> None:
        if not isinstance(space, TaskSpace):
            raise ConfigError("space", space, "expected a TaskSpace", source="Curriculum")
        cfg = config if config is not None else CurriculumConfig()
        if not isinstance(cfg, CurriculumConfig):
            raise ConfigError("config", cfg, "expected a CurriculumConfig", source="Curriculum")
        if overrides:
            names = {f.name for f in dataclasses.fields(CurriculumConfig)}
            for key in overrides:
                if key not in names:
                    raise ConfigError(key, overrides[key], f"unknown keyword; expected one of "
                                      f"{sorted(names)}", source="Curriculum")
            cfg = dataclasses.replace(cfg, **overrides)
        self.space, self.config = space, cfg
        self._scorer, self._pool, self._signal = cfg.scorer, cfg.pool, cfg.signal
        capacity = self._pool.capacity_for(space)
        self._scorer.check(space, capacity, self._pool)
        self._backend = backend if backend is not None else LocalBackend()
        layout = state_layout(capacity, self._pool.window_length)
        self._st = CurriculumState(self._backend.allocate(layout))
        self._lock = self._backend.lock()
        self.rng = np.random.default_rng(cfg.seed)
        self._slot_of: dict[int, int] = {}
        self._seen_version = 0
        self._disabled: set[int] = set()
        self._taken = _Taken(self._slot_of, self._disabled)
        self._mod = space.size if space.has_variants else 0
        self._every = cfg.cadence(capacity)
        self._hook = type(self._scorer).on_update is not Scorer.on_update
        self._shared = self._backend.shared
        with self._lock:
            self._st.initialise()
            self._pool.init(self._st)
            self._fill(capacity)
            self._recompute()

    # ---------------------------------------------------------------- pool membership
    def _fill(self, capacity: int) -> None:
        n = self._pool.initial_slots(capacity)
        if self.space.size == capacity == n:
            for slot in range(n):  # every key of a finite space: slot i holds key i
                self._put(slot, slot, EXPLORE)
            return
        for slot in range(n):
            if not self._draw_into(slot, EXPLORE):
                raise ConfigError("capacity", capacity, "more slots than tasks to fill them",
                                  source="Curriculum")

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

    # ---------------------------------------------------------------- distribution
    def _recompute(self) -> None:
        st = self._st
        active = st.pool >= 0
        if not active.any():
            raise TaskError("task", None, f"no valid task left in the {type(self.space).__name__}"
                            f" ({len(self._disabled)} reported invalid)", source="Curriculum")
        raw = self._scorer.raw(st, active, self._signal)
        if self._pool.maintain(st, raw, _Ops(self)):
            raw = self._scorer.raw(st, st.pool >= 0, self._signal)
        self._pool.distribute(st, self._scorer, raw)
        st.raw[:] = raw
        c = st.counters
        c[K.RECOMPUTES] += 1
        c[K.SINCE_RECOMPUTE] = 0
        c[K.DIRTY] = 0

    def recompute(self) -> None:
        """Maintain the pool and recompute the distribution now (normally on the cadence)."""
        with self._lock:
            self._recompute()

    def invalidate(self) -> None:
        """Recompute before the next ``sample`` (after writing to the state from outside)."""
        with self._lock:
            self._st.counters[K.DIRTY] = 1

    # ---------------------------------------------------------------- public API
    def sample(self, k: int = 1) -> np.ndarray:
        """Draw ``k`` task ids with replacement (int64 array of shape ``(k,)``)."""
        st = self._st
        with self._lock:
            cnt = st.counters
            if cnt.item(K.DIRTY):
                self._recompute()
            if k == 1:
                slot = self._pool.sample_one(st, self.rng)
                st.samples[slot] = st.samples.item(slot) + 1
                ids = st.task_id[slot : slot + 1].copy()
            else:
                if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
                    raise ConfigError("k", k, "expected an int >= 1", source="Curriculum.sample")
                slots = self._pool.sample(st, self.rng, int(k))
                np.add.at(st.samples, slots, 1)
                ids = st.task_id[slots]
            cnt[K.SAMPLES] = cnt.item(K.SAMPLES) + k
            return self.space.expand(ids, self.rng) if self._mod else ids

    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id`` (regenerated deterministically from the id)."""
        task, rejected = self.space.generate(task_id)
        if rejected:
            with self._lock:
                self._st.counters[K.INVALID_GENERATED] += rejected
        return task

    def sample_task(self) -> tuple[int, dict[str, Any]]:
        """Draw one task: ``(task_id, task dict)``."""
        tid = int(self.sample(1)[0])
        return tid, self.task(tid)

    def update(self, task_id: int, return_: float, success: float | bool | None = None,
               cost: float | None = None) -> None:
        """Report one finished episode of ``task_id``.

        Args:
            task_id: the id returned by :meth:`sample`.
            return_: the episode return (finite).
            success: bool or float in ``[0, 1]``, or None (the return is used, normalised).
            cost: the episode cost (finite), or None.

        Raises:
            NonFiniteValueError: a NaN/inf return or cost.
            ConfigError: a malformed id or value.

        An episode of a task that has meanwhile left the pool is counted in
        ``curriculum/stale_updates`` and otherwise ignored.
        """
        r, s, c = check_episode(task_id, return_, success, cost)
        with self._lock:
            self._update_one(task_id, r, s, c)

    def update_batch(self, task_ids: Sequence[int] | np.ndarray,
                     returns: Sequence[float] | np.ndarray,
                     successes: Sequence[float | bool | None] | np.ndarray | None = None,
                     costs: Sequence[float | None] | np.ndarray | None = None) -> None:
        """Report several episodes, in order (same result as calling :meth:`update` for each).

        Every value is validated before any is applied, so a bad entry changes nothing.
        """
        ids = list(task_ids)
        n = len(ids)
        succ = [None] * n if successes is None else list(successes)
        cst = [None] * n if costs is None else list(costs)
        rets = list(returns)
        if not len(rets) == len(succ) == len(cst) == n:
            raise ConfigError("update_batch", (n, len(rets), len(succ), len(cst)),
                              "task_ids, returns, successes and costs differ in length")
        checked = [check_episode(ids[i], rets[i], succ[i], cst[i]) for i in range(n)]
        with self._lock:
            for tid, (r, s, c) in zip(ids, checked, strict=True):
                self._update_one(tid, r, s, c)

    def _update_one(self, task_id: Any, r: float, s: float | None, c: float) -> None:
        st = self._st
        cnt = st.counters
        if self._shared and cnt.item(K.VERSION) != self._seen_version:
            self._rebuild_map()  # another process changed the pool
        if type(task_id) is not int:
            task_id = self.space.check_id(task_id)  # numpy ints; rejects floats, bools, str
        if self._mod:
            task_id %= self._mod
        slot = self._slot_of.get(task_id)
        if slot is None:
            self.space.check_id(task_id)
            cnt[K.STALE_UPDATES] += 1
            return
        sig = record_episode(st, self._signal, slot, r, s, c)
        since = cnt.item(K.SINCE_RECOMPUTE) + 1
        cnt[K.SINCE_RECOMPUTE] = since
        if since >= self._every or (self._hook and self._scorer.on_update(st, slot, sig, r)):
            self._recompute()

    def mark_invalid(self, task_id: int, reason: str = "") -> None:
        """Report that the env refused ``task_id``: it is removed and never drawn again.

        For a :class:`~gymcurric.tasks.BoxTaskSpace` the whole cell is disabled. The slot is
        refilled from the space when possible.

        Raises:
            TaskError: no valid task is left.
        """
        key = self.space.key(self.space.check_id(task_id))
        with self._lock:
            st = self._st
            st.counters[K.INVALID_REPORTED] += 1
            self._disabled.add(key)
            slot = self._slot_of.get(key)
            if slot is not None and (
                st.pool[slot] == EXPLOIT or not self._draw_into(slot, EXPLORE)
            ):
                del self._slot_of[key]
                self._put(slot, -1, EMPTY)
            try:
                self._recompute()
            except TaskError as exc:
                raise TaskError("task_id", task_id, f"{exc.reason}; last refusal: {reason!r}",
                                source="Curriculum.mark_invalid") from exc

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, probabilities)`` of the live tasks at the last recompute."""
        live = self._st.pool >= 0
        return self._st.task_id[live].copy(), self._st.prob[live].copy()

    def stats(self) -> dict[str, float]:
        """Flat ``curriculum/...`` floats, ready for SB3's ``logger.record``."""
        out = base_stats(self._st)
        out.update(self._pool.stats(self._st))
        out.update(self._scorer.stats(self._st))
        return out

    @property
    def state(self) -> CurriculumState:
        """The live state arrays (views; read them, do not write)."""
        return self._st

    # ---------------------------------------------------------------- checkpoints
    def config_spec(self) -> dict[str, Any]:
        """What a state dict must match: the space's spec and the config (minus the seed)."""
        cfg = self.config.to_dict()
        cfg.pop("seed")
        return {"space": self.space.spec(), **cfg}

    def state_dict(self) -> dict[str, Any]:
        """Copies of the arrays, the generator state, the disabled keys and the config spec."""
        with self._lock:
            return {
                "format": STATE_FORMAT,
                "config": self.config_spec(),
                "arrays": {k: v.copy() for k, v in self._st.arrays().items()},
                "rng": self.rng.bit_generator.state,
                "disabled": sorted(self._disabled),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; sampling continues exactly where it stopped.

        Raises:
            DataError: the state dict is malformed or comes from another configuration
                (the message lists the differing keys).
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise DataError(f"not a curriculum state dict (format {got!r}, expected "
                            f"{STATE_FORMAT!r})")
        mine, theirs = _flatten(self.config_spec()), _flatten(state.get("config", {}))
        diff = [f"{k}: saved {theirs.get(k, '<missing>')!r}, current {mine.get(k, '<missing>')!r}"
                for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
        if diff:
            raise DataError("curriculum state dict comes from another configuration: "
                            + "; ".join(diff))
        arrays = state.get("arrays")
        own = self._st.arrays()
        if not isinstance(arrays, Mapping) or set(arrays) != set(own):
            raise DataError(f"curriculum state dict arrays {sorted(arrays or [])} != "
                            f"expected {sorted(own)}")
        for name, dst in own.items():
            src = np.asarray(arrays[name])
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise DataError(f"curriculum state array {name!r}: saved {src.dtype}{src.shape}, "
                                f"expected {dst.dtype}{dst.shape}")
        with self._lock:
            for name, dst in own.items():
                np.copyto(dst, arrays[name])
            self.rng.bit_generator.state = state["rng"]
            self._disabled.clear()
            self._disabled.update(int(k) for k in state.get("disabled", []))
            self._rebuild_map()

    def close(self) -> None:
        """Release the backend's memory."""
        self._backend.close()
