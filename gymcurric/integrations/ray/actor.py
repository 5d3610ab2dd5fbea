"""The actor side of the Ray backend: a local :class:`~gymcurric.tasks.Curriculum` behind calls.

:class:`CurriculumActor` is a plain Python class (no Ray import): :class:`RayCurriculum` runs it
as a Ray actor with ``ray.remote(CurriculumActor)``, and tests can drive it directly. It holds a
normal process-local curriculum, so the state arrays, the cadence recompute and ``state_dict()``
are exactly those of a local run; what it adds is the batch protocol:

* :class:`UpdateBatch` — what a client sends, every ``flush_every`` episodes: the episodes in
  report order, the ``(slot, key)`` pairs the client drew since its last batch (for the per-task
  ``samples`` counts) and how many generated tasks the client's validator rejected.
* :class:`Snapshot` — what a client samples from: copies of the few arrays a pool's
  ``sample_one``/``sample`` read (:data:`SNAPSHOT_FIELDS`), tagged with a generation that changes
  whenever the distribution or the pool membership may have changed. A client sends the
  generation it holds; the actor answers ``None`` when it is still current, so an unchanged
  distribution is not shipped again.

The actor writes sample counts and the rejected-draw counter straight into the curriculum's
arrays (as the shared-memory backend does when a process flushes its pending counts). Only
:class:`~gymcurric.tasks.PLRScorer`'s staleness reads the sample counts, as of when they
arrived; otherwise the distribution is exactly that of the local curriculum fed the same
updates in the same order. Regret scores (``record_scores``) come from the driver after a
rollout, one call each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.curriculum import Curriculum
from gymcurric.tasks.links import add_sample_array
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import SLOT_FIELDS, CurriculumState, K

__all__ = ["SNAPSHOT_FIELDS", "CurriculumActor", "Snapshot", "UpdateBatch", "snapshot_state"]

#: State arrays a snapshot carries: what the built-in pools read when drawing a slot.
SNAPSHOT_FIELDS = ("task_id", "cdf_a", "cdf_b", "counters", "scalars")
_EMPTY: dict[str, np.ndarray] = {
    name: np.zeros(0, dtype) for name, dtype in SLOT_FIELDS.items()
} | {"window": np.zeros(0, np.int8)}

#: ``(state loads, recomputes, membership version)`` of the actor's curriculum.
Generation = tuple[int, int, int]


class UpdateBatch(NamedTuple):
    """Episodes and sample counts one client buffered since its last flush (validated there)."""

    task_ids: list[int]
    returns: list[float]
    successes: list[float | None]
    costs: list[float]
    sample_slots: list[int]
    sample_keys: list[int]
    rejected: int = 0


class Snapshot(NamedTuple):
    """What a client samples from: copies of :data:`SNAPSHOT_FIELDS` at generation ``gen``."""

    gen: Generation
    arrays: dict[str, np.ndarray]


def snapshot_state(snap: Snapshot) -> CurriculumState:
    """A :class:`CurriculumState` over a snapshot's arrays (other fields are empty), for pools."""
    return CurriculumState({**_EMPTY, **snap.arrays})


class CurriculumActor:
    """A process-local curriculum that takes batched updates and hands out snapshots.

    Args:
        space: the task space.
        config: the curriculum config (``None``: the default).
        overrides: fields of :class:`CurriculumConfig` replacing those of ``config``.

    Raises:
        ConfigError: as :class:`~gymcurric.tasks.Curriculum` does.

    Examples:
        >>> from gymcurric.tasks import FixedTaskSpace
        >>> actor = CurriculumActor(FixedTaskSpace([{"level": i} for i in range(3)]), seed=0)
        >>> snap = actor.snapshot()
        >>> batch = UpdateBatch([0, 1], [1.0, 0.0], [True, False], [0.0, 0.0], [0], [0])
        >>> actor.apply(batch, snap.gen) is None  # no recompute yet: the snapshot still holds
        True
        >>> actor.stats()["curriculum/updates"], actor.stats()["curriculum/samples"]
        (2.0, 1.0)
    """

    def __init__(
        self, space: TaskSpace, config: CurriculumConfig | None = None, **overrides: Any
    ) -> None:
        self.curriculum = Curriculum(space, config, **overrides)
        self._loads = 0
        self._snap: Snapshot | None = None

    # ------------------------------------------------------------------ snapshots
    def generation(self) -> Generation:
        """The current generation (changes when what a snapshot holds may have changed)."""
        c = self.curriculum.state.counters
        return self._loads, int(c[K.RECOMPUTES]), int(c[K.VERSION])

    def snapshot(self, gen: Generation | None = None) -> Snapshot | None:
        """The current snapshot, or ``None`` if ``gen`` is already current.

        A pending recompute (after :meth:`invalidate` or a state load) is done first.
        """
        cur = self.curriculum
        if cur.state.counters[K.DIRTY]:
            cur.recompute()
        now = self.generation()
        if gen is not None and tuple(gen) == now:
            return None
        if self._snap is None or self._snap.gen != now:
            st = cur.state
            arrays = {name: getattr(st, name).copy() for name in SNAPSHOT_FIELDS}
            if st.counters[K.LAST_B] < 0:  # no second pool: no pool reads cdf_b
                arrays["cdf_b"] = _EMPTY["cdf_b"]
            self._snap = Snapshot(now, arrays)
        return self._snap

    def ready(self) -> dict[str, Any]:
        """What a new client needs: the snapshot, the generator state and the config spec."""
        return {
            "snapshot": self.snapshot(),
            "rng": self.curriculum.rng.bit_generator.state,
            "spec": self.curriculum.config_spec(),
        }

    # ------------------------------------------------------------------ updates
    def apply(self, batch: UpdateBatch | None, gen: Generation | None = None) -> Snapshot | None:
        """Add a batch's sample counts, apply its episodes in order; return a newer snapshot.

        Raises:
            ConfigError: a malformed episode (nothing of the batch is applied).
        """
        if batch is not None:
            st = self.curriculum.state
            if batch.sample_slots:  # a slot may hold another task by now: not counted
                slots = np.asarray(batch.sample_slots, dtype=np.int64)
                add_sample_array(st, slots, np.asarray(batch.sample_keys, dtype=np.int64))
            if batch.rejected:
                st.counters[K.INVALID_GENERATED] += batch.rejected
            if batch.task_ids:
                self.curriculum.update_batch(
                    batch.task_ids, batch.returns, batch.successes, batch.costs
                )
        return self.snapshot(gen)

    def record_scores(
        self, task_ids: list[int], scores: list[float], nonfinite: int = 0
    ) -> Snapshot | None:
        """:meth:`Curriculum.record_scores` (checked by the client), then the (new) snapshot.

        Raises:
            ConfigError: a malformed id or a non-finite score (nothing is applied).
        """
        self.curriculum.record_scores(task_ids, scores, nonfinite=nonfinite)
        return self.snapshot()

    def scores(self, task_ids: list[int]) -> np.ndarray:
        """:meth:`Curriculum.scores`."""
        return self.curriculum.scores(task_ids)

    def mark_invalid(self, task_id: int, reason: str = "") -> Snapshot | None:
        """:meth:`Curriculum.mark_invalid`, then the (new) snapshot."""
        self.curriculum.mark_invalid(task_id, reason)
        return self.snapshot()

    # ------------------------------------------------------------------ forwarded
    def stats(self) -> dict[str, float]:
        """:meth:`Curriculum.stats`."""
        return self.curriculum.stats()

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Curriculum.probabilities`."""
        return self.curriculum.probabilities()

    def recompute(self) -> Snapshot | None:
        """:meth:`Curriculum.recompute`, then the new snapshot."""
        self.curriculum.recompute()
        return self.snapshot()

    def invalidate(self) -> None:
        """:meth:`Curriculum.invalidate`."""
        self.curriculum.invalidate()

    def state_dict(self) -> dict[str, Any]:
        """:meth:`Curriculum.state_dict` (its ``rng`` is the actor's own generator)."""
        return self.curriculum.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> Snapshot | None:
        """:meth:`Curriculum.load_state_dict`, then the new snapshot.

        Raises:
            DataError: the state dict is malformed or comes from another configuration.
        """
        self.curriculum.load_state_dict(state)
        self._loads += 1
        return self.snapshot()

    def ping(self) -> bool:
        """True (a liveness check)."""
        return True
