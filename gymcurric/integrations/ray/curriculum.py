"""The client of the Ray backend: :class:`RayCurriculum` (see :mod:`gymcurric.integrations.ray`).

Per call: ``sample`` is the pool's inverse-CDF lookup on the client's snapshot (O(log n), no
Ray call); ``update`` validates the episode and appends it to a buffer (O(1)). Every
``flush_every`` updates the buffer goes to the actor in one ``apply`` call, submitted without
waiting; the answer (a newer snapshot, or ``None`` when the client's is still current) is
collected at the next flush, or at once with ``max_pending=0``. Nothing here scans the pool.
The buffers, the calls in flight and the snapshot are kept by the client's ``link`` (an
``ActorLink`` of ``_client.py``); the client is itself the
:class:`~gymcurric.tasks.transport.TaskTransport` through which env wrappers reach it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.integrations.ray._client import (
    SOURCE,
    ActorLink,
    ClientSettings,
    RayBackend,
    check_process,
    check_seconds,
    import_ray,
    owns_connection,
    remote_actor_class,
)
from gymcurric.integrations.ray.actor import Snapshot
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.regret import ScoreChecks
from gymcurric.tasks.signals import check_episode, check_episodes
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState
from gymcurric.tasks.transport import TaskTransport

__all__ = ["RayBackend", "RayCurriculum"]

#: Seconds the constructor waits at least for the actor to start (scheduling, process start).
START_TIMEOUT_S = 120.0


class RayCurriculum(TaskTransport):
    """A curriculum whose state lives on a Ray actor, sampled locally from a refreshed snapshot.

    Builds a :class:`~gymcurric.integrations.ray.CurriculumActor` (a normal local
    :class:`~gymcurric.tasks.Curriculum` on a Ray actor) and is itself a picklable client of it:
    pass it to Ray tasks and actors, or wrap envs there with
    :class:`~gymcurric.wrappers.SampleCurriculumTask`. It is its own
    :class:`~gymcurric.tasks.transport.TaskTransport` (the env wrappers' view of a curriculum):
    ``take_task`` samples locally, ``report_episode`` buffers. See
    :mod:`gymcurric.integrations.ray` for the staleness and batching trade-offs.

    Args:
        space: where tasks come from; copied to the actor and to every client (tasks
            regenerate locally from their ids).
        config: scorer, pool, signal, seed and cadence (default :class:`CurriculumConfig`).
        flush_every: episodes a client buffers before sending them in one call (>= 1).
        max_pending: flushes a client may have in flight before it waits for the oldest
            (>= 0; 0: every flush waits for its answer, so the snapshot includes the client's
            own updates).
        refresh_seconds: a snapshot older than this is refreshed (with one blocking call) at
            the next ``sample``; ``None``: only flushes refresh it.
        timeout: seconds to wait for an answer of the actor before raising
            :class:`~gymcurric.errors.WorkerError` (``None``: forever); the constructor waits
            at least 120 s for the actor to start.
        actor_options: passed to ``.options()`` of the actor class (``num_cpus``, ``name``,
            ``resources``, ``scheduling_strategy``, ...). ``max_restarts`` must stay 0: a
            restarted actor would start from a fresh curriculum.
        **overrides: fields of :class:`CurriculumConfig` replacing those of ``config``.

    Raises:
        DependencyNotInstalled: ray is not installed (``pip install "gymcurric[ray]"``).
        ConfigError: a bad argument, or what :class:`~gymcurric.tasks.Curriculum` rejects.

    Example (starts a Ray cluster, so it is not run as a doctest; see
    ``examples/curriculum_ray.py``)::

        cur = RayCurriculum(FixedTaskSpace([{"level": i} for i in range(3)]), seed=0)
        tid, task = cur.sample_task()              # local: no Ray call
        cur.update(tid, return_=1.0, success=True)  # buffered
        cur.stats()["curriculum/updates"]           # flushes first: 1.0
    """

    def __init__(
        self,
        space: TaskSpace,
        config: CurriculumConfig | None = None,
        *,
        flush_every: int = 32,
        max_pending: int = 1,
        refresh_seconds: float | None = 1.0,
        timeout: float | None = 60.0,
        actor_options: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        ray = import_ray()
        check_process()
        if not isinstance(space, TaskSpace):
            raise ConfigError("space", space, "expected a TaskSpace", source=SOURCE)
        cfg = CurriculumConfig.merged(config, overrides, source=SOURCE)
        for name, value, low in (("flush_every", flush_every, 1), ("max_pending", max_pending, 0)):
            check_int(name, value, minimum=low, source=SOURCE)
        opts = dict(actor_options or {})
        if opts.get("max_restarts", 0) != 0:
            raise ConfigError(
                "actor_options.max_restarts",
                opts["max_restarts"],
                "a restarted actor would start from a fresh curriculum; keep 0 and "
                "restart from a checkpoint (state_dict) instead",
                source=SOURCE,
            )
        opts["max_restarts"] = 0
        settings = ClientSettings(
            flush_every,
            max_pending,
            check_seconds("refresh_seconds", refresh_seconds),
            check_seconds("timeout", timeout),
        )
        actor = remote_actor_class(ray).options(**opts).remote(space, cfg)
        link = ActorLink(ray, actor, settings, creator=True)
        init = link.start(START_TIMEOUT_S)  # the actor may take a while to start
        self._attach(space, cfg, link, init["spec"])
        self.rng.bit_generator.state = init["rng"]  # the creator samples as a local run would

    def _attach(
        self, space: TaskSpace, config: CurriculumConfig, link: ActorLink, spec: dict[str, Any]
    ) -> None:
        self.space, self.config = space, config
        #: This client's connection to the actor: buffers, calls in flight, snapshot.
        self.link = link
        #: This client's sampling generator (:meth:`reseed`); a copy starts unseeded.
        self.rng = np.random.default_rng()
        self._pool = config.pool
        self._spec = spec
        self._expands_ids = bool(space.has_variants and space.size)  # ids carry a variant
        self._score_checks = ScoreChecks(space, SOURCE)

    # ---------------------------------------------------------------- sampling (local)
    def _sampling_state(self) -> CurriculumState:
        link = self.link
        if link.needs_refresh():
            link.flush(wait=True)
        state = link.state
        assert state is not None
        return state

    def sample(self, k: int = 1) -> np.ndarray:
        """Draw ``k`` task ids with replacement from the snapshot (int64 array of shape ``(k,)``).

        Raises:
            ConfigError: ``k`` is not an int >= 1.
            WorkerError: the actor is gone or this client was closed.
        """
        st = self._sampling_state()
        if k == 1:
            slot = self._pool.sample_one(st, self.rng)
            ids = st.task_id[slot : slot + 1].copy()
            slots = [slot]
        else:
            check_int("k", k, source=f"{SOURCE}.sample", allow_numpy=True)
            drawn = self._pool.sample(st, self.rng, int(k))
            ids = st.task_id[drawn]
            slots = drawn.tolist()
        self.link.add_samples(slots, ids.tolist())
        return self.space.expand(ids, self.rng) if self._expands_ids else ids

    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id``, regenerated locally from the task space."""
        task, rejected = self.space.generate(task_id)
        self.link.count_rejected(rejected)
        return task

    def sample_task(self) -> tuple[int, dict[str, Any]]:
        """Draw one task: ``(task_id, task dict)``."""
        tid = int(self.sample(1)[0])
        return tid, self.task(tid)

    def reseed(self, seed: int) -> None:
        """Reseed this client's sampling generator (to the stream of ``seed=seed``).

        Raises:
            ConfigError: ``seed`` is not an int >= 0.
        """
        check_int("seed", seed, minimum=0, source=f"{SOURCE}.reseed", allow_numpy=True)
        self.rng.bit_generator.state = np.random.PCG64(int(seed)).state

    # ---------------------------------------------------------------- updates (buffered)
    def update(
        self,
        task_id: int,
        return_: float,
        success: float | bool | None = None,
        cost: float | None = None,
    ) -> None:
        """Report one finished episode; it reaches the actor with the next flush.

        Raises:
            NonFiniteValueError: a NaN/inf return or cost (raised here, nothing is buffered).
            ConfigError: a malformed id or value.
            WorkerError: the actor is gone (noticed at a flush) or this client was closed.
        """
        r, s, c = check_episode(task_id, return_, success, cost)
        self.link.add_episode(self.space.check_id(task_id), r, s, c)

    def update_batch(
        self,
        task_ids: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        successes: Sequence[float | bool | None] | np.ndarray | None = None,
        costs: Sequence[float | None] | np.ndarray | None = None,
    ) -> None:
        """Report several episodes, in order (every value is validated before any is buffered)."""
        ids, checked = check_episodes(task_ids, returns, successes, costs, source=SOURCE)
        self.link.add_episodes([self.space.check_id(t) for t in ids], checked)

    def flush(self) -> None:
        """Send everything buffered and wait until the actor applied it; refresh the snapshot.

        Raises:
            WorkerError: the actor is gone, or did not answer within ``timeout``.
        """
        self.link.flush(wait=True)

    # ---------------------------------------------------------------- regret scores
    def update_scores(
        self, task_ids: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray
    ) -> None:
        """Report regret scores of tasks (the score hook; see ``Curriculum.update_scores``).

        Checked here, then sent after this client's buffered episodes in one blocking call,
        whose answer (the distribution recomputed for the scores) becomes this client's
        snapshot. NaN/inf scores are skipped and counted on the actor
        (``curriculum/nonfinite_scores``); each client warns once.

        Raises:
            ConfigError: malformed ids or scores, or an id outside the space (nothing is sent).
            WorkerError: the actor is gone.
        """
        batch = self._score_checks.batch(task_ids, scores)  # warns once per client
        snap = self.link.call(
            "record_scores", batch.ids.tolist(), batch.scores.tolist(), batch.nonfinite
        )
        self.link.install_now(snap)

    def scores(self, task_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The actor's latest score of each task, NaN where it has none (one round trip)."""
        ids = self._score_checks.ids_and_keys(task_ids)[0]
        out: np.ndarray = self.link.call("scores", ids.tolist())
        return out

    # ---------------------------------------------------------------- talking to the actor
    def mark_invalid(self, task_id: int, reason: str = "") -> None:
        """Report that the env refused ``task_id`` (one blocking call; see ``Curriculum``).

        Raises:
            TaskError: no valid task is left.
        """
        tid = self.space.check_id(task_id)
        self.link.install_now(self.link.call("mark_invalid", tid, reason))

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, probabilities)`` of the live tasks at the actor's last recompute."""
        keys, probs = self.link.call("probabilities")
        return keys, probs

    def stats(self) -> dict[str, float]:
        """The actor's ``curriculum/...`` stats (after this client's flush) plus this client's.

        Client keys: ``curriculum/ray_flushes`` (batches sent) and ``curriculum/ray_snapshots``
        (snapshots received).
        """
        out: dict[str, float] = self.link.call("stats")
        out["curriculum/ray_flushes"] = float(self.link.flushes)
        out["curriculum/ray_snapshots"] = float(self.link.snapshots)
        return out

    def recompute(self) -> None:
        """Recompute the distribution on the actor now and take the new snapshot."""
        self.link.install_now(self.link.call("recompute"))

    def invalidate(self) -> None:
        """Make the actor recompute before its next snapshot."""
        self.link.call("invalidate")

    # ---------------------------------------------------------------- the transport of an env
    def take_task(self) -> tuple[int, dict[str, Any]]:
        """:meth:`sample_task` (the env wrapper's draw)."""
        return self.sample_task()

    def any_task(self) -> dict[str, Any]:
        """The task of the first live task id (one round trip; draws nothing)."""
        keys, _ = self.probabilities()
        return self.task(int(keys[0]))

    def report_episode(
        self, task_id: int, return_: float, success: float | bool | None, cost: float | None
    ) -> None:
        """:meth:`update` (buffered)."""
        self.update(task_id, return_, success, cost)

    def refuse_task(self, task_id: int, reason: str) -> None:
        """:meth:`mark_invalid` (one blocking call)."""
        self.mark_invalid(task_id, reason)

    def release(self) -> None:
        """An env wrapper is done with this client: flush; a copy (in a worker) also closes.

        The creating client is never closed here (its ``close()`` kills the actor): it only
        flushes, and a dead actor is not raised from the env's ``close()`` (the next call the
        caller makes on the client raises it). A client inherited by fork does nothing.
        """
        backend = self.link.backend
        if backend.closed:
            return
        if not backend.is_creator:
            self.close()  # flushes (unless the actor is gone) and drops this copy's connection
        elif owns_connection():
            with contextlib.suppress(WorkerError):
                self.flush()

    # ---------------------------------------------------------------- checkpoints
    def config_spec(self) -> dict[str, Any]:
        """What a state dict must match (as :meth:`Curriculum.config_spec`)."""
        return dict(self._spec)

    def state_dict(self) -> dict[str, Any]:
        """The actor's state dict after this client's flush, with this client's generator."""
        state: dict[str, Any] = self.link.call("state_dict")
        state["rng"] = self.rng.bit_generator.state
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state dict (local or Ray) on the actor; this client takes its generator.

        Raises:
            DataError: the state dict is malformed or comes from another configuration.
        """
        self.link.install_now(self.link.call("load_state_dict", dict(state)))
        self.rng.bit_generator.state = state["rng"]

    # ---------------------------------------------------------------- the link's state
    @property
    def staleness(self) -> tuple[int, float]:
        """``(updates, seconds)``: this client's updates since, and the age of, its snapshot.

        Bounded by ``flush_every * (max_pending + 1)`` updates and ``refresh_seconds`` (checked
        at each ``sample``), plus one round trip.
        """
        return self.link.staleness()

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot this client samples from (``None`` before its first ``sample``)."""
        return self.link.snapshot

    @property
    def backend(self) -> RayBackend:
        """The actor holding the state."""
        return self.link.backend

    @property
    def actor(self) -> Any:
        """The Ray actor handle (a :class:`CurriculumActor`)."""
        return self.link.actor

    @property
    def flushes(self) -> int:
        """Batches this client sent."""
        return self.link.flushes

    @property
    def snapshots(self) -> int:
        """Snapshots this client received."""
        return self.link.snapshots

    # ---------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Flush, then make this client unusable; the creating client also kills the actor.

        A copy in a worker (which :class:`~gymcurric.wrappers.SampleCurriculumTask` closes with its
        env) only flushes. If the actor is already gone the buffered reports are dropped.
        """
        self.link.close()

    def __enter__(self) -> RayCurriculum:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # The link pickles as a new connection to the same actor (a copy: empty buffers, no
        # snapshot until its first sample, never kills the actor); the copy's generator is
        # unseeded until reseed(), so workers never repeat each other's stream.
        return {"space": self.space, "config": self.config, "link": self.link, "spec": self._spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._attach(state["space"], state["config"], state["link"], state["spec"])

    def __repr__(self) -> str:
        settings = self.link.settings
        return (
            f"RayCurriculum({type(self.space).__name__}, {self.link.backend!r}, "
            f"flush_every={settings.flush_every}, max_pending={settings.max_pending})"
        )
