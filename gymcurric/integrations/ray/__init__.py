"""Ray backend (extra ``ray``): the curriculum state on a Ray actor, envs on Ray workers.

For users who outgrow one machine: :class:`RayCurriculum` builds a
:class:`CurriculumActor` (a normal process-local :class:`~gymcurric.tasks.Curriculum`, same
state arrays, same ``state_dict()``) on a Ray actor and is a picklable client of it. Hand it to
Ray tasks or actors (rollout workers); there wrap each env in
:class:`~gymcurric.wrappers.SampleCurriculumTask` exactly as with a local curriculum
(``examples/curriculum_ray.py``). Importing this module does not import ray; building a
:class:`RayCurriculum` (or unpickling one) does, and raises
:class:`~gymcurric.errors.DependencyNotInstalled` naming ``pip install "gymcurric[ray]"`` when
it is missing.

Design: no round trip per reset.

* **Local sampling.** Each client holds a *snapshot* of the distribution (the few arrays the
  pool draws from: task ids and the cumulative weights, plus the counters and ``rho``) and
  draws with its own generator through the pool's own ``sample_one`` (an inverse-CDF lookup),
  then regenerates the task dict locally from the task space. ``reseed(seed)`` fixes a client's
  stream; a copy arriving in a worker draws unseeded until reseeded (the env wrapper reseeds
  on ``reset(seed=...)``), so workers never repeat each other's stream.
* **Batched updates.** ``update`` validates the episode on the spot (a NaN return raises in
  the worker, at the episode's last ``step``) and buffers it. Every ``flush_every`` updates the
  buffer (with the client's per-task sample counts) is sent in one ``apply`` call, without
  waiting: the actor applies the episodes in order with ``update_batch``, so its curriculum
  recomputes on the usual cadence (in batched numpy; nothing scans the pool per reset) and
  ends up exactly where a local curriculum fed the same episodes in the same order would.
  Calls from one client run in the order sent (Ray's actor ordering).
* **Staleness trade-off.** The answer to a flush is a newer snapshot, or nothing when the
  client's is current (so an unchanged distribution is not re-sent). With ``max_pending=1``
  (default) the answer is collected at the next flush: a worker never waits on the actor
  unless it falls a whole batch behind, and its snapshot is at most
  ``flush_every * (max_pending + 1)`` of its own updates old. A client that samples without
  updating (evaluation) refreshes once its snapshot is ``refresh_seconds`` old, with one
  blocking call at the next ``sample``. Meanwhile other workers' episodes move the actor's
  distribution, which the client sees at its next refresh: the same one-batch delay every
  asynchronous curriculum has, in exchange for O(1) local ``sample``/``update``. Smaller
  ``flush_every`` and ``max_pending=0`` trade throughput for freshness; ``flush_every=1,
  max_pending=0, refresh_seconds=None`` with one client reproduces a local curriculum's exact
  task sequence (for pools that draw no randomness while maintaining themselves, e.g. a
  :class:`~gymcurric.tasks.ReplacementPool`; pools that refill from the space use the actor's
  generator, not the client's).
* **Reads, scores and checkpoints go to the actor.** ``stats()``, ``probabilities()``,
  ``scores()``, ``update_scores()`` (the regret-score hook, called by the driver after a
  rollout), ``state_dict()`` and ``load_state_dict()`` first send the client's buffer, then ask the
  actor (one round trip). ``state_dict()`` carries this client's generator (as a shared-memory
  curriculum's does), so it loads into a local :class:`~gymcurric.tasks.Curriculum` and back.
  Call :meth:`RayCurriculum.flush` (or ``close``) at the end of a worker's work: buffered
  episodes are not sent otherwise. Closing a ``SampleCurriculumTask`` in a worker closes (flushes)
  that worker's copy; closing one in the driver only flushes the creating client, whose own
  ``close()`` also kills the actor.
* **Failures are named.** A dead or killed actor raises :class:`~gymcurric.errors.WorkerError`
  at the client's next call that reaches it (a flush, ``stats``, ...), saying how many episode
  reports were lost; every later call raises it too. Ray actor restarts are refused
  (``max_restarts`` must stay 0): a restarted actor would silently start a fresh curriculum.
  Errors of the curriculum itself (``TaskError``, ``DataError``) arrive unwrapped. A client
  refuses to run in a process that inherited it by fork (Ray connections do not survive a
  fork), and a client is not thread-safe: give each thread its own ``copy.deepcopy``.
"""

from __future__ import annotations

from gymcurric.integrations.ray.actor import (
    SNAPSHOT_FIELDS,
    CurriculumActor,
    Snapshot,
    UpdateBatch,
)
from gymcurric.integrations.ray.curriculum import RayBackend, RayCurriculum

__all__ = [
    "RayCurriculum",
    "RayBackend",
    "CurriculumActor",
    "Snapshot",
    "UpdateBatch",
    "SNAPSHOT_FIELDS",
]
