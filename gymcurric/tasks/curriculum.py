"""The curriculum facade: ``sample`` task ids, ``update`` with episode results, checkpoint.

Per call: ``sample`` is an inverse-CDF lookup on a cached cumulative array (O(log n)); ``update``
writes a few scalars into the episode's slot (O(1)). Every ``recompute_every`` accepted updates
(default ``max(32, capacity // 32)``) the pool is maintained and the distribution recomputed in
batched numpy (O(n)); nothing scans the pool per reset.

Processes. With ``backend="shared"`` (:class:`~gymcurric.tasks.shared_backend.SharedMemoryBackend`)
the state lives in one shared-memory segment and the curriculum can be pickled into worker
processes (the env factory of ``AsyncVectorEnv`` / SB3's ``SubprocVecEnv``, any start method) or
inherited by fork: every copy reads and writes the same arrays. ``update`` runs under the one
lock, and whichever process crosses the recompute cadence recomputes under it; ``sample`` reads
the cumulative arrays without the lock (a seqlock) with the process's own generator
(:meth:`Curriculum.reseed`). Per-task sample counts are kept per process and added to the shared
arrays at that process's next locked call. A copy arriving in a new process draws from a fresh
unseeded generator until ``reseed`` is called, so that workers never repeat each other's stream.

A process-local curriculum (the default backend) refuses ``sample``/``update`` once it finds
itself in another process (unpickled there or inherited by fork): its copies would diverge
silently. Pickling it within one process (``copy.deepcopy``, or a pickle round trip) gives an
independent copy and is allowed; checkpoints should use :meth:`Curriculum.state_dict`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks._membership import _Taken
from gymcurric.tasks._processes import _CrossProcess, _make_backend, add_shared_fields
from gymcurric.tasks.backends import _PID, StateBackend, watch_forks
from gymcurric.tasks.checkpoint import STATE_FORMAT, check_state_dict
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.diagnostics import base_stats
from gymcurric.tasks.scorers import Scorer
from gymcurric.tasks.shared_backend import SharedMemoryBackend
from gymcurric.tasks.signals import (
    check_episode,
    check_episode_arrays,
    record_episode,
    record_episodes,
)
from gymcurric.tasks.spaces import ID_LIMIT, TaskSpace
from gymcurric.tasks.state import EMPTY, EXPLOIT, EXPLORE, CurriculumState, K, state_layout

#: A worker applies its buffered episodes once the oldest is this old (see worker_update_batch),
#: so slow workers (long episodes) report about as soon as they would unbuffered.
_UPD_MAX_AGE_S = 1.0
#: Batches of at least this many episodes are applied vectorised (``record_episodes``) when the
#: recompute cadence is at least as long; otherwise one by one: the vectorised path has a fixed
#: cost of a few dozen array operations per piece between two recomputes, which pays off only
#: for long pieces (measured: 2x faster per episode at 10,000 tasks, slower at 1,000 tasks
#: whose default cadence is 32). Both give the same state, bit for bit.
_VECTOR_MIN = 64
#: An attached copy whose buffer is due but finds the lock taken keeps buffering, up to this
#: many batches or this age (seconds); past either it waits for the lock.
_UPD_HOLD_BATCHES = 8
_UPD_HOLD_S = 4.0

__all__ = ["STATE_FORMAT", "Curriculum"]


class Curriculum(_CrossProcess):
    """Learning-progress task selection over a task space, with checkpointable array state.

    Args:
        space: where tasks come from (:mod:`gymcurric.tasks.spaces`).
        config: scorer, pool, signal, seed and cadence (default :class:`CurriculumConfig`).
        backend: where the state arrays live: ``"local"`` (default, :class:`LocalBackend`),
            ``"shared"`` (a :class:`~gymcurric.tasks.shared_backend.SharedMemoryBackend` with
            default settings) or a backend instance (one per curriculum).
        **overrides: fields of :class:`CurriculumConfig` replacing those of ``config``.

    Raises:
        ConfigError: a bad config value or a scorer/pool that does not fit the space.
        TaskError: the space's validator rejected every retry while filling the pool.

    A shared curriculum is a context manager; :meth:`close` (or leaving the ``with`` block, or
    garbage collection of the creating object) unlinks its segment. See the module docstring
    for what happens when a curriculum crosses a process boundary.

    Examples:
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
        backend: StateBackend | str | None = None,
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
                    raise ConfigError(
                        key,
                        overrides[key],
                        f"unknown keyword; expected one of {sorted(names)}",
                        source="Curriculum",
                    )
            cfg = dataclasses.replace(cfg, **overrides)
        self.space, self.config = space, cfg
        self._scorer, self._pool, self._signal = cfg.scorer, cfg.pool, cfg.signal
        capacity = self._pool.capacity_for(space)
        self._scorer.check(space, capacity, self._pool)
        self._backend = _make_backend(backend)
        sb = self._backend if isinstance(self._backend, SharedMemoryBackend) else None
        self._sb, self._shared = sb, sb is not None
        layout = state_layout(capacity, self._pool.window_length)
        if sb is not None:
            add_shared_fields(layout, space, capacity)
        arrays = self._backend.allocate(layout)
        try:
            watch_forks()
            self._pid = _PID[0]
            self._pend: list[tuple[int, int]] = []
            self._upd: list[tuple[Any, float, float | None, float]] = []
            self._upd_batch = 1  # the creating process applies every update at once
            self._smp_batch = 1  # and draws one task per sample_task call
            self._ahead: list[tuple[int, int]] = []  # (slot, id) drawn ahead by a worker
            self._ahead_epoch = -1
            self._upd_t0 = 0.0
            self._epoch = 0
            self._attach(arrays)
            self.rng = np.random.default_rng(cfg.seed)
            self._slot_of: dict[int, int] = {}
            self._seen_version = 0
            self._disabled: set[int] = set()
            self._taken = _Taken(self._slot_of, self._disabled)
            self._mod = (space.size or 0) if space.has_variants else 0
            self._every = cfg.cadence(capacity)
            self._id_limit = (
                space.size if space.size is not None and not space.has_variants else ID_LIMIT
            )
            self._hook = type(self._scorer).on_update is not Scorer.on_update
            with self._lock:
                self._st.initialise()
                self._pool.init(self._st)
                self._fill(capacity)
                self._recompute()
        except BaseException:
            self._backend.close()  # a failed construction leaves no segment behind
            raise

    def recompute(self) -> None:
        """Maintain the pool and recompute the distribution now (normally on the cadence)."""
        with self._lock:
            self._enter("recompute")
            self._recompute()

    def invalidate(self) -> None:
        """Recompute before the next ``sample`` (after writing to the state from outside)."""
        with self._lock:
            self._enter("invalidate")
            self._st.counters[K.DIRTY] = 1

    def reseed(self, seed: int) -> None:
        """Reseed this process's sampling generator (to the stream of ``seed=seed``).

        The env wrappers call it from ``reset(seed=...)``, so that each sub-env of a vector env
        (seeded ``seed + i``) draws its own reproducible task stream from the shared
        distribution. With a shared backend only this process's copy is affected.

        Raises:
            ConfigError: ``seed`` is not an int >= 0.
        """
        check_int("seed", seed, minimum=0, source="Curriculum.reseed", allow_numpy=True)
        if _PID[0] != self._pid:
            self._moved("reseed")
        self._ahead.clear()
        self.rng.bit_generator.state = np.random.PCG64(int(seed)).state

    def sample(self, k: int = 1) -> np.ndarray:
        """Draw ``k`` task ids with replacement (int64 array of shape ``(k,)``).

        Raises:
            ConfigError: ``k`` is not an int >= 1, or a process-local curriculum is used in
                another process than the one it was built in.
            WorkerError: the shared segment was closed, or a process died mid-write.
        """
        if _PID[0] != self._pid:
            self._moved("sample")
        if self._shared:
            return self._sample_shared(k)
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
                check_int("k", k, source="Curriculum.sample", allow_numpy=True)
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
        """Draw one task: ``(task_id, task dict)``.

        In a worker process of a shared curriculum, tasks are drawn
        ``worker_sample_batch`` at a time and handed out in order (see
        :class:`~gymcurric.tasks.SharedMemoryBackend`).
        """
        if self._smp_batch > 1 and not self._mod:  # a worker of a shared curriculum
            return self._sample_ahead()
        tid = int(self.sample(1)[0])
        return tid, self.task(tid)

    def update(
        self,
        task_id: int,
        return_: float,
        success: float | bool | None = None,
        cost: float | None = None,
    ) -> None:
        """Report one finished episode of ``task_id``.

        Args:
            task_id: the id returned by :meth:`sample`.
            return_: the episode return (finite).
            success: bool or float in ``[0, 1]``, or None (the return is used, normalised).
            cost: the episode cost (finite), or None.

        Raises:
            NonFiniteValueError: a NaN/inf return or cost.
            ConfigError: a malformed id or value, or a process-local curriculum used in another
                process than the one it was built in.
            WorkerError: the shared segment was closed, or a process died holding its lock.

        An episode of a task that has meanwhile left the pool is counted in
        ``curriculum/stale_updates`` and otherwise ignored.
        """
        r, s, c = check_episode(task_id, return_, success, cost)
        if _PID[0] != self._pid:
            self._moved("update")
        if type(task_id) is not int or not 0 <= task_id < self._id_limit:
            task_id = self.space.check_id(task_id)  # numpy ints; rejects the rest by name
        if s is None and self._signal.source == "success":
            raise ConfigError(
                "success", None, "SignalConfig(source='success') needs success= in every update"
            )
        if self._upd_batch > 1:  # an attached copy of a shared curriculum: buffer
            now = time.monotonic()
            if not self._upd:
                self._upd_t0 = now
            self._upd.append((task_id, r, s, c))
            n, age = len(self._upd), now - self._upd_t0
            if n < self._upd_batch and age < _UPD_MAX_AGE_S:
                return
            if n < _UPD_HOLD_BATCHES * self._upd_batch and age < _UPD_HOLD_S:
                # Due, but never wait for another process's locked section here: the worker
                # would stall its vector env's step. Apply now if the lock is free, else keep
                # buffering (bounded) and try again at the next episode end.
                guard = self._lock
                if guard.try_enter():
                    try:
                        self._sync()
                    finally:
                        guard.__exit__(None, None, None)
                return
        with self._lock:
            if self._shared:
                self._sync()  # applies the buffered episodes, in order
            if self._upd_batch <= 1:
                self._update_one(task_id, r, s, c)

    def flush(self) -> None:
        """Apply this process's buffered episodes and sample counts to the shared state.

        Only attached copies of a shared curriculum buffer (see ``worker_update_batch`` of
        :class:`~gymcurric.tasks.SharedMemoryBackend`); ``close()`` flushes too. A no-op
        otherwise.
        """
        sb = self._sb
        if sb is not None and (self._upd or self._pend) and not sb.closed:
            with self._lock:
                self._enter("flush")

    def update_batch(
        self,
        task_ids: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        successes: Sequence[float | bool | None] | np.ndarray | None = None,
        costs: Sequence[float | None] | np.ndarray | None = None,
    ) -> None:
        """Report several episodes, in order (same result as calling :meth:`update` for each).

        Every value and id is validated before any is applied, so a bad entry changes nothing.
        Long batches under a long recompute cadence (64 or more episodes each) are applied
        vectorised, a few array operations per piece between two recomputes instead of per
        episode, with the same result bit for bit. The Ray actor applies its batches here.
        """
        ids, r, s, c = check_episode_arrays(
            task_ids, returns, successes, costs, source="Curriculum.update_batch"
        )
        self._report_episodes(ids, r, s, c)

    def _check_ids(self, ids: Any) -> np.ndarray:
        """Task ids as an int64 array of scoring keys; ConfigError names the first bad one."""
        space, limit = self.space, self._id_limit
        arr: np.ndarray | None = None
        if isinstance(ids, np.ndarray):
            if ids.ndim == 1 and ids.dtype.kind in "iu":
                arr = ids.astype(np.int64, copy=False)
        elif all(type(t) is int for t in ids):
            arr = np.asarray(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
        if arr is not None and len(arr):
            if len(arr) <= 16:  # a vector step's episodes: Python's min/max are cheaper
                few = arr.tolist()
                lo, hi = min(few), max(few)
            else:
                lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= limit:
                arr = None
        if arr is None:
            arr = np.array([space.check_id(t) for t in ids], dtype=np.int64)  # raises
        return arr % self._mod if self._mod else arr

    def _check_signals(self, s: np.ndarray) -> None:
        if self._signal.source == "success" and np.isnan(s).any():
            raise ConfigError(
                "success",
                None,
                "SignalConfig(source='success') needs a success for every episode; entry "
                f"{int(np.flatnonzero(np.isnan(s))[0])} has none",
                source="Curriculum.update_batch",
            )

    def _report_episodes(self, ids: Any, r: np.ndarray, s: np.ndarray, c: np.ndarray) -> None:
        """``update_batch`` for checked values (``s``: NaN where no success); ids checked here.

        The :class:`~gymcurric.tasks.channel.TaskChannel` applies its results through it.
        """
        keys = self._check_ids(ids)
        self._check_signals(s)
        with self._lock:
            self._enter("update_batch")
            self._apply_episodes(keys, r, s, c)

    def _one_by_one(self, n: int) -> bool:
        """Whether ``n`` episodes go one by one (``_VECTOR_MIN``; a scorer hook sees each)."""
        return self._hook or n < _VECTOR_MIN or self._every < _VECTOR_MIN

    def _apply_buffered(self, upd: list[tuple[int, float, float | None, float]]) -> None:
        """Apply a worker's buffered episodes (checked by ``update``), in order."""
        n = len(upd)
        if self._one_by_one(n):
            for tid, r, s, c in upd:
                self._update_one(tid, r, s, c)
            return
        keys = np.fromiter((u[0] for u in upd), np.int64, n)
        self._apply_episodes(
            keys % self._mod if self._mod else keys,
            np.fromiter((u[1] for u in upd), np.float64, n),
            np.fromiter((np.nan if u[2] is None else u[2] for u in upd), np.float64, n),
            np.fromiter((u[3] for u in upd), np.float64, n),
        )

    def _apply_episodes(
        self, keys: np.ndarray, r: np.ndarray, s: np.ndarray, c: np.ndarray
    ) -> None:
        """Apply checked episodes in order (under the lock).

        One by one with :meth:`_update_one`, or vectorised in chunks that end where the
        recompute cadence falls, so that every episode after a recompute maps through the pool
        as that recompute left it.
        """
        n, every = len(keys), self._every
        if self._one_by_one(n):
            ks, rs, cs = keys.tolist(), r.tolist(), c.tolist()
            for i, si in enumerate(s.tolist()):
                self._update_one(ks[i], rs[i], None if si != si else si, cs[i])
            return
        st, cnt = self._st, self._st.counters
        get = self._slot_of.get
        todo = keys.tolist()
        start = 0
        while start < n:
            # up to the episode that makes the recompute due; stale ids (not in the pool) do
            # not count, so a piece holding some ends before it and the next piece goes on
            since = cnt.item(K.SINCE_RECOMPUTE)
            end = min(n, start + max(every - since, 1))
            slots = np.array([get(k, -1) for k in todo[start:end]], dtype=np.int64)
            ok = slots >= 0
            took = int(ok.sum())
            if took < len(slots):
                cnt[K.STALE_UPDATES] += len(slots) - took
            if took:
                if took == len(slots):
                    at: slice | np.ndarray = slice(start, end)
                else:
                    slots = slots[ok]
                    at = np.flatnonzero(ok) + start
                record_episodes(st, self._signal, slots, r[at], s[at], c[at])
                cnt[K.SINCE_RECOMPUTE] = since + took
                if since + took >= every:
                    self._recompute()
            start = end

    def _update_one(self, task_id: Any, r: float, s: float | None, c: float) -> None:
        st = self._st
        cnt = st.counters
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
            self._enter("mark_invalid")
            sb = self._sb
            opened = sb is not None and sb.publish_begin()
            try:
                st = self._st
                st.counters[K.INVALID_REPORTED] += 1
                if sb is not None and key not in self._disabled:
                    self._share_disabled(key)
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
                    raise TaskError(
                        "task_id",
                        task_id,
                        f"{exc.reason}; last refusal: {reason!r}",
                        source="Curriculum.mark_invalid",
                    ) from exc
            finally:
                if sb is not None:
                    sb.publish_end(opened)

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, probabilities)`` of the live tasks at the last recompute."""
        with self._lock:
            live = self._st.pool >= 0
            return self._st.task_id[live].copy(), self._st.prob[live].copy()

    def stats(self) -> dict[str, float]:
        """Flat ``curriculum/...`` floats, ready for SB3's ``logger.record``."""
        with self._lock:
            if self._shared:
                self._enter("stats")
            out = base_stats(self._st)
            out.update(self._pool.stats(self._st))
            out.update(self._scorer.stats(self._st))
        return out

    @property
    def state(self) -> CurriculumState:
        """The live state arrays (views; read them, do not write)."""
        return self._st

    @property
    def backend(self) -> StateBackend:
        """Where the state arrays live."""
        return self._backend

    # ---------------------------------------------------------------- checkpoints
    def config_spec(self) -> dict[str, Any]:
        """What a state dict must match: the space's spec and the config (minus the seed)."""
        cfg = self.config.to_dict()
        cfg.pop("seed")
        return {"space": self.space.spec(), **cfg}

    def state_dict(self) -> dict[str, Any]:
        """Copies of the arrays, the generator state, the disabled keys and the config spec.

        With a shared backend: the shared arrays (with this process's pending sample counts
        added) and this process's generator.
        """
        with self._lock:
            if self._shared:
                self._enter("state_dict")
            return {
                "format": STATE_FORMAT,
                "config": self.config_spec(),
                "arrays": {k: v.copy() for k, v in self._st.arrays().items()},
                "rng": self.rng.bit_generator.state,
                "disabled": sorted(self._disabled),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` (of either backend); sampling continues exactly.

        With a shared backend the arrays are replaced for every process, the generator for this
        one.

        Raises:
            DataError: the state dict is malformed, comes from another configuration (the
                message lists the differing keys), or breaks the state's invariants (NaN or
                out-of-range values, negative counters, task keys outside the space; see
                :func:`~gymcurric.tasks.checkpoint.state_problems`). Nothing is changed then.
        """
        own = self._st.arrays()
        # everything is checked before anything is written: a refused state changes nothing
        arrays = check_state_dict(
            self.config_spec(),
            own,
            state,
            key_limit=self._mod or self._id_limit,
            pool=self._pool,
        )
        with self._lock:
            self._enter("load_state_dict")
            sb = self._sb
            opened = sb is not None and sb.publish_begin()
            try:
                for name, dst in own.items():
                    np.copyto(dst, arrays[name])
            finally:
                if sb is not None:
                    sb.publish_end(opened)
            self.rng.bit_generator.state = state["rng"]
            self._disabled.clear()
            self._disabled.update(int(k) for k in state.get("disabled", []))
            if sb is not None:
                self._share_all_disabled()
            self._rebuild_map()

    # ---------------------------------------------------------------- lifetime
    def __enter__(self) -> Curriculum:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the backend's memory.

        Shared backend: the creating process unlinks the segment (attached copies only drop
        their mapping) and this object can no longer be used. Process-local: nothing to do.
        """
        if self._sb is not None:
            self._close_shared()
        self._backend.close()
