"""The curriculum: ``sample`` task ids, ``update`` with episode results, checkpoint.

Per call: ``sample`` is an inverse-CDF lookup on a cached cumulative array (O(log n)); ``update``
writes a few scalars into the episode's slot (O(1)); ``update_scores`` writes a batch of scores
(O(batch)). Every ``recompute_every`` accepted updates (default ``max(32, capacity // 32)``)
the pool is maintained and the distribution recomputed in batched numpy (O(n)); nothing scans
the pool per reset.

This module holds the algorithm. Its parts are composed: the slots and the recompute are a
:class:`~gymcurric.tasks.membership.Membership`; how this process reaches the state arrays is a
link (:mod:`gymcurric.tasks.links`); the checks and locked writes of what it is told (episodes,
regret scores, refused tasks) are :class:`~gymcurric.tasks.reports.Reports`; saving and loading
are functions of :mod:`gymcurric.tasks.checkpoint`. How an env reaches the curriculum, in this
process or from a worker, is a transport (:mod:`gymcurric.tasks.transport`).

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

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.tasks.backends import PROCESS_ID, StateBackend, watch_forks
from gymcurric.tasks.checkpoint import STATE_FORMAT, check_state_dict, load_state, save_state
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.diagnostics import base_stats
from gymcurric.tasks.links import StateLink, make_backend, open_link
from gymcurric.tasks.membership import Membership
from gymcurric.tasks.reports import Reports
from gymcurric.tasks.signals import check_episode, check_episode_arrays
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState, K, state_layout

if TYPE_CHECKING:
    from gymcurric.tasks.transport import TaskTransport


__all__ = ["STATE_FORMAT", "Curriculum", "Draw"]


class Draw(NamedTuple):
    """Tasks drawn by :meth:`Curriculum.draw` and not yet counted as sampled."""

    #: the pool slot each task was drawn from (for :meth:`Curriculum.count`)
    slots: list[int]
    #: the task ids (int64)
    ids: np.ndarray


class Curriculum:
    """Learning-progress task selection over a task space, with checkpointable array state.

    Episodes are reported with :meth:`update` (the env wrappers do it); regret scores from
    training, for :class:`~gymcurric.tasks.PLRScorer`, with :meth:`update_scores` (the score
    hook, called from the main process after a rollout).

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
        cfg = CurriculumConfig.merged(config, overrides, source="Curriculum")
        self.space, self.config = space, cfg
        self._scorer, self._pool, self._signal = cfg.scorer, cfg.pool, cfg.signal
        capacity = self._pool.capacity_for(space)
        self._scorer.check(space, capacity, self._pool)
        self._backend = make_backend(backend)
        watch_forks()
        layout = state_layout(capacity, self._pool.window_length)
        self._link = open_link(self._backend, layout, space, capacity)
        try:
            self._state = self._link.state
            self.rng = np.random.default_rng(cfg.seed)
            self._key_modulus = space.key_modulus
            self._members = Membership(
                space,
                self._state,
                self.rng,
                cfg,
                recompute_every=cfg.cadence(capacity),
                key_modulus=self._key_modulus,
                publisher=self._link,
            )
            self._link.bind(self._members)
            self._record_one = self._members.record_one  # per update: one lookup less
            self._needs_success = cfg.signal.source == "success"
            self._id_limit = space.id_limit
            self._transport: Any = None  # this process's transport, made at first use
            self._reports = Reports(space, self._link, self._members, type(self).__name__)
            with self._link.lock:
                self._state.initialise()
                self._pool.init(self._state)
                self._members.fill(capacity)
                self._members.recompute()
        except BaseException:
            self._backend.close()  # a failed construction leaves no segment behind
            raise

    def recompute(self) -> None:
        """Maintain the pool and recompute the distribution now (normally on the cadence)."""
        self._flush_worker()
        with self._link.lock:
            self._link.enter("recompute")
            self._members.recompute()

    def invalidate(self) -> None:
        """Recompute before the next ``sample`` (after writing to the state from outside)."""
        self._flush_worker()
        with self._link.lock:
            self._link.enter("invalidate")
            self._state.counters[K.DIRTY] = 1

    def reseed(self, seed: int) -> None:
        """Reseed this process's sampling generator (to the stream of ``seed=seed``).

        The env wrappers call it from ``reset(seed=...)``, so that each sub-env of a vector env
        (seeded ``seed + i``) draws its own reproducible task stream from the shared
        distribution. With a shared backend only this process's copy is affected.

        Raises:
            ConfigError: ``seed`` is not an int >= 0.
        """
        check_int("seed", seed, minimum=0, source="Curriculum.reseed", allow_numpy=True)
        self._link.check("reseed")
        if self._transport is not None:
            self._transport.discard_drawn()  # tasks drawn ahead with the old stream
        self.rng.bit_generator.state = np.random.PCG64(int(seed)).state

    def sample(self, k: int = 1) -> np.ndarray:
        """Draw ``k`` task ids with replacement (int64 array of shape ``(k,)``).

        Raises:
            ConfigError: ``k`` is not an int >= 1, or a process-local curriculum is used in
                another process than the one it was built in.
            WorkerError: the shared segment was closed, or a process died mid-write.
        """
        link = self._link
        if PROCESS_ID[0] != link.pid:
            link.check("sample")
        if k != 1:
            check_int("k", k, source="Curriculum.sample", allow_numpy=True)
            k = int(k)
        ids = link.sample(k)
        return self.space.expand(ids, self.rng) if self._key_modulus else ids

    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id`` (regenerated deterministically from the id)."""
        task, rejected = self.space.generate(task_id)
        if rejected:
            with self._link.lock:
                self._state.counters[K.INVALID_GENERATED] += rejected
        return task

    def sample_task(self) -> tuple[int, dict[str, Any]]:
        """Draw one task: ``(task_id, task dict)``.

        In a worker's copy of a shared curriculum the task comes through :meth:`transport`,
        which draws ``worker_sample_batch`` tasks at a time and hands them out in order.
        """
        if self._link.worker:
            return self.transport().take_task()
        tid = int(self.sample(1)[0])
        return tid, self.task(tid)

    def transport(self) -> TaskTransport:
        """How an env in this process reaches this curriculum (one per process).

        A :class:`~gymcurric.tasks.LocalTransport`, or for a shared curriculum a
        :class:`~gymcurric.tasks.SharedMemoryTransport` (which batches in a worker process).
        The env wrappers get it through :func:`~gymcurric.tasks.transport_for`.
        """
        transport = self._transport
        if transport is None:
            # transport.py builds on this module, so it is imported at first use
            from gymcurric.tasks import transport as transports

            transport = (
                transports.SharedMemoryTransport(self)
                if self._link.shared
                else transports.LocalTransport(self)
            )
            self._transport = transport
        elif transport.pid != PROCESS_ID[0]:
            transport.settle()  # inherited by fork: the same object, this process's buffers
        return transport

    def check_update(
        self,
        task_id: int,
        return_: float,
        success: float | bool | None = None,
        cost: float | None = None,
    ) -> tuple[int, float, float | None, float]:
        """Validate one episode report as :meth:`update` does, without applying it.

        Returns ``(task id, return, success or None, cost)``, ready for :meth:`record`. For
        transports that buffer episodes (:class:`~gymcurric.tasks.SharedMemoryTransport`): a
        bad report raises where the episode ended, not where the buffer is applied.
        """
        return self._reports.check(task_id, return_, success, cost)

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
        ``curriculum/stale_updates`` and otherwise ignored. In a worker's copy of a shared
        curriculum the episode goes through :meth:`transport`, which buffers it (see
        :class:`~gymcurric.tasks.SharedMemoryTransport`).
        """
        link = self._link
        if link.worker:  # a worker's copy of a shared curriculum: through its transport
            self.transport().report_episode(task_id, return_, success, cost)
            return
        return_, success, cost = check_episode(task_id, return_, success, cost)
        if PROCESS_ID[0] != link.pid:
            link.check("update")
        if type(task_id) is not int or not 0 <= task_id < self._id_limit:
            task_id = self._reports.key(task_id, success)
        elif success is None and self._needs_success:
            self._reports.key(task_id, success)  # raises
        with link.lock:
            if link.shared:
                link.enter("update")
            self._record_one(task_id, return_, success, cost)

    def apply_update(
        self, task_id: int, return_: float, success: float | None, cost: float
    ) -> None:
        """Apply one episode :meth:`check_update` returned, now, under the lock (transports)."""
        self._reports.apply(task_id, return_, success, cost)

    def flush(self) -> None:
        """Add this process's pending sample counts to a shared state now.

        A worker's copy of a shared curriculum keeps the counts of its ``sample`` calls and
        adds them at its next locked call (``update``, ``stats``, ...); ``close()`` adds them
        too; in a worker, the episodes its transport buffered are applied first. A no-op for a
        process-local curriculum.
        """
        self._flush_worker()  # a worker's buffered episodes first
        self._link.flush()

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
        checked = check_episode_arrays(
            task_ids, returns, successes, costs, source="Curriculum.update_batch"
        )
        self._flush_worker()  # a worker's buffered episodes come first, in order
        self.record(*checked)

    def record(
        self,
        task_ids: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        successes: Sequence[float] | np.ndarray,
        costs: Sequence[float] | np.ndarray,
        *,
        wait: bool = True,
        checked: bool = False,
    ) -> bool:
        """Apply episodes whose values were already checked, in order.

        For transports, which check each episode where it ends (:meth:`check_update`, or
        :func:`~gymcurric.tasks.signals.check_episode_arrays`) and apply them later in a batch.

        Args:
            task_ids: the episodes' task ids (checked here unless ``checked``).
            returns: their returns (finite).
            successes: their successes in ``[0, 1]``, NaN where none.
            costs: their costs (finite).
            wait: False applies only if the lock is free at once (a worker must not stall its
                env on another process's locked section).
            checked: the ids and successes passed :meth:`check_update` already.

        Returns:
            Whether the episodes were applied (always, with ``wait=True``).
        """
        return self._reports.record(task_ids, returns, successes, costs, wait=wait, checked=checked)

    # ---------------------------------------------------------------- regret scores
    def update_scores(
        self, task_ids: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray
    ) -> None:
        """Report regret scores of tasks from training: the score hook (batched).

        Called from the main process after a rollout, when the learner knows how much it still
        has to learn on each task it just played, e.g. the mean magnitude of an episode's GAE
        advantages (:class:`~gymcurric.integrations.sb3.RegretScoreCallback` does it for SB3).
        Each task keeps its latest score and the count of scores it received (a task without
        any is *unseen*); a scorer that reads them (:class:`~gymcurric.tasks.PLRScorer`)
        recomputes the distribution before the next draw, the others ignore them. Episode
        reports (:meth:`update`) are separate and unchanged.

        Args:
            task_ids: the tasks' ids (a 1-D sequence or integer array).
            scores: one real score per id; the last of several for one task wins.

        Raises:
            ConfigError: ``task_ids`` or ``scores`` is not a 1-D sequence of ints / real
                numbers, their lengths differ, or an id is not an id of the space (nothing is
                applied then).

        A score for a task no longer in the pool is counted in ``curriculum/stale_scores`` and
        ignored. NaN and infinite scores are counted in ``curriculum/nonfinite_scores`` and
        skipped, never reaching the distribution; the first ones a curriculum object meets
        also emit one :class:`~gymcurric.errors.GymcurricWarning`.
        """
        batch = self._reports.score_checks.batch(task_ids, scores)
        self._flush_worker()  # a worker's buffered episodes come first
        self._reports.record_scores(batch)

    def record_scores(
        self,
        task_ids: Sequence[int] | np.ndarray,
        scores: Sequence[float] | np.ndarray,
        *,
        nonfinite: int = 0,
    ) -> None:
        """Apply finite scores the caller already checked and filtered; count ``nonfinite``.

        For transports that check scores where they arise (the Ray client): as
        :meth:`update_scores`, without its warning; ``nonfinite`` is the number of NaN/inf
        scores the caller skipped.

        Raises:
            ConfigError: as :meth:`update_scores`, or a score that is not finite.
        """
        batch = self._reports.score_checks.finite_batch(task_ids, scores, nonfinite)
        self._flush_worker()  # a worker's buffered episodes come first
        self._reports.record_scores(batch)

    def scores(self, task_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The latest score of each task (float64), NaN where it has none.

        A task has none while it is unseen (no score since it entered the pool) or when it is
        not in the pool. Robust PLR's learner uses it to tell episodes on new tasks apart.

        Raises:
            ConfigError: ``task_ids`` is not a 1-D sequence of ids of the space.
        """
        keys = self._reports.score_checks.ids_and_keys(task_ids)[1]
        self._flush_worker()
        return self._reports.scores(keys)

    def mark_invalid(self, task_id: int, reason: str = "") -> None:
        """Report that the env refused ``task_id``: it is removed and never drawn again.

        For a :class:`~gymcurric.tasks.BoxTaskSpace` the whole cell is disabled. The slot is
        refilled from the space when possible.

        Raises:
            TaskError: no valid task is left.
        """
        key = self.space.key(self.space.check_id(task_id))
        self._flush_worker()
        self._reports.disable(key, task_id, reason)

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, probabilities)`` of the live tasks at the last recompute."""
        with self._link.lock:
            live = self._state.pool >= 0
            return self._state.task_id[live].copy(), self._state.prob[live].copy()

    def stats(self) -> dict[str, float]:
        """Flat ``curriculum/...`` floats, ready for SB3's ``logger.record``."""
        self._flush_worker()
        with self._link.lock:
            self._link.enter("stats")
            out = base_stats(self._state)
            out.update(self._pool.stats(self._state))
            out.update(self._scorer.stats(self._state))
        return out

    @property
    def state(self) -> CurriculumState:
        """The live state arrays (views; read them, do not write)."""
        return self._state

    @property
    def backend(self) -> StateBackend:
        """Where the state arrays live."""
        return self._backend

    @property
    def link(self) -> StateLink:
        """How this process reaches the state arrays (:mod:`gymcurric.tasks.links`)."""
        return self._link

    def _flush_worker(self) -> None:
        """In a worker, apply what its transport buffered before the state is read or changed."""
        if self._transport is not None and self._link.worker:
            self._transport.flush()

    # ---------------------------------------------------------------- for transports
    def draw(self, k: int = 1) -> Draw:
        """Draw ``k`` task ids as :meth:`sample` does, without counting them as sampled.

        For transports that hand tasks out later (a worker drawing ahead, the
        :class:`~gymcurric.tasks.channel.TaskChannel`): they :meth:`count` each task when an
        env takes it.
        """
        link = self._link
        link.check("draw")
        if type(k) is not int or k < 1:
            check_int("k", k, source="Curriculum.draw", allow_numpy=True)
        slots, ids = link.draw(int(k))
        return Draw(slots, self.space.expand(ids, self.rng) if self._key_modulus else ids)

    def count(self, slots: Sequence[int], task_ids: Sequence[int]) -> None:
        """Count tasks of a :meth:`draw` as sampled (one whose slot was reused since is not).

        With a shared backend the counts reach the shared arrays at this process's next locked
        call (as :meth:`sample`'s do).
        """
        keys = [t % self._key_modulus for t in task_ids] if self._key_modulus else task_ids
        self._link.count(zip(slots, keys, strict=True))

    @property
    def pool_version(self) -> tuple[int, int]:
        """``(invalidations, membership)``: changes whenever a task leaves the pool.

        The first item moves when tasks are reported invalid (in any process) or a state is
        loaded, the second whenever the pool's membership changes (evictions too). Transports
        holding drawn tasks compare it to know when those may have left the pool.
        """
        return self._link.version()

    def slot_of(self, task_id: int) -> int | None:
        """The pool slot of ``task_id`` (None if it is not in the pool)."""
        self._flush_worker()
        with self._link.lock:
            self._link.enter("slot_of")
            modulus = self._key_modulus
            return self._members.slot_of.get(task_id % modulus if modulus else task_id)

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
        self._flush_worker()
        with self._link.lock:
            self._link.enter("state_dict")
            return save_state(self.config_spec(), self._state, self.rng, self._members.disabled)

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
        own = self._state.arrays()
        # everything is checked before anything is written: a refused state changes nothing
        arrays = check_state_dict(
            self.config_spec(),
            own,
            state,
            key_limit=self._key_modulus or self._id_limit,
            pool=self._pool,
        )
        if self._transport is not None and self._link.worker:
            self._transport.discard_buffer()  # episodes of the state being replaced
        load_state(self._link, self._members, self.rng, own, arrays, state)

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
        if not getattr(self._backend, "closed", False):
            with contextlib.suppress(WorkerError):  # the creator closed the segment already
                self._flush_worker()
        self._link.close()
        self._state = self._members.state = self._link.state

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_transport"] = None  # per process
        if self._link.shared:
            del state["_state"]  # views of the segment: the link re-attaches them
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        watch_forks()
        self._members.attach(self._link)
        self._link.reattach()
        self._state = self._members.state = self._link.state
