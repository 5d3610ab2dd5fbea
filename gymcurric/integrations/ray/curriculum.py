"""The client of the Ray backend: :class:`RayCurriculum` (see :mod:`gymcurric.integrations.ray`).

Per call: ``sample`` is the pool's inverse-CDF lookup on the client's snapshot (O(log n), no
Ray call); ``update`` validates the episode and appends it to a buffer (O(1)). Every
``flush_every`` updates the buffer goes to the actor in one ``apply`` call, submitted without
waiting; the answer (a newer snapshot, or ``None`` when the client's is still current) is
collected at the next flush, or at once with ``max_pending=0``. Nothing here scans the pool.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, WorkerError
from gymcurric.integrations.ray._client import (
    _PENDING_MAX,
    _SRC,
    RayBackend,
    _actor_class,
    _check_process,
    _Client,
    _config,
    _owns_connection,
    _positive,
    _ray,
)
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.signals import check_episode, check_episodes
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState

__all__ = ["RayBackend", "RayCurriculum"]

#: Seconds the constructor waits at least for the actor to start (scheduling, process start).
_START_TIMEOUT = 120.0
_KILL_WAIT = 10.0  # seconds close() waits for a killed actor to stop answering


class RayCurriculum(_Client):
    """A curriculum whose state lives on a Ray actor, sampled locally from a refreshed snapshot.

    Builds a :class:`~gymcurric.integrations.ray.CurriculumActor` (a normal local
    :class:`~gymcurric.tasks.Curriculum` on a Ray actor) and is itself a picklable client of it:
    pass it to Ray tasks and actors, or wrap envs there with
    :class:`~gymcurric.wrappers.SampleCurriculumTask`. See :mod:`gymcurric.integrations.ray` for
    the staleness and batching trade-offs.

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
        ray = _ray()
        _check_process()
        if not isinstance(space, TaskSpace):
            raise ConfigError("space", space, "expected a TaskSpace", source=_SRC)
        cfg = _config(config, overrides)
        for name, value, low in (("flush_every", flush_every, 1), ("max_pending", max_pending, 0)):
            check_int(name, value, minimum=low, source=_SRC)
        opts = dict(actor_options or {})
        if opts.get("max_restarts", 0) != 0:
            raise ConfigError(
                "actor_options.max_restarts",
                opts["max_restarts"],
                "a restarted actor would start from a fresh curriculum; keep 0 and "
                "restart from a checkpoint (state_dict) instead",
                source=_SRC,
            )
        opts["max_restarts"] = 0
        settings = (
            flush_every,
            max_pending,
            _positive("refresh_seconds", refresh_seconds, none=True),
            _positive("timeout", timeout, none=True),
        )
        actor = _actor_class(ray).options(**opts).remote(space, cfg)
        self._setup(ray, space, cfg, actor, settings, creator=True)
        try:
            wait = None if self._timeout is None else max(self._timeout, _START_TIMEOUT)
            init = self._get(actor.ready.remote(), wait)  # the actor may take a while to start
        except BaseException:
            self._down = "failed to start"
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            raise
        self._spec = init["spec"]
        self.rng.bit_generator.state = init["rng"]  # the creator samples as a local run would
        self._install(init["snapshot"], self._reported, time.monotonic())

    # ---------------------------------------------------------------- sampling (local)
    def _ready(self) -> CurriculumState:
        st = self._st
        if st is None or (
            self._refresh_s is not None and time.monotonic() - self._t_snap > self._refresh_s
        ):
            self.flush()
            st = self._st
            assert st is not None
        return st

    def sample(self, k: int = 1) -> np.ndarray:
        """Draw ``k`` task ids with replacement from the snapshot (int64 array of shape ``(k,)``).

        Raises:
            ConfigError: ``k`` is not an int >= 1.
            WorkerError: the actor is gone or this client was closed.
        """
        st = self._ready()
        if k == 1:
            slot = self._pool.sample_one(st, self.rng)
            self._pslots.append(slot)
            ids = st.task_id[slot : slot + 1].copy()
        else:
            check_int("k", k, source=f"{_SRC}.sample", allow_numpy=True)
            slots = self._pool.sample(st, self.rng, int(k))
            self._pslots.extend(slots.tolist())
            ids = st.task_id[slots]
        self._pkeys.extend(ids.tolist())
        if len(self._pslots) >= _PENDING_MAX:
            self._flush(False)
        return self.space.expand(ids, self.rng) if self._mod else ids

    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id``, regenerated locally from the task space."""
        task, rejected = self.space.generate(task_id)
        self._rejected += rejected
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
        check_int("seed", seed, minimum=0, source=f"{_SRC}.reseed", allow_numpy=True)
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
        tid = self.space.check_id(task_id)
        if self._down is not None:
            raise WorkerError(self._down)
        self._ids.append(tid)
        self._rets.append(r)
        self._succ.append(s)
        self._costs.append(c)
        self._reported += 1
        if len(self._ids) >= self._every:
            self._flush(False)

    def update_batch(
        self,
        task_ids: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        successes: Sequence[float | bool | None] | np.ndarray | None = None,
        costs: Sequence[float | None] | np.ndarray | None = None,
    ) -> None:
        """Report several episodes, in order (every value is validated before any is buffered)."""
        ids, checked = check_episodes(task_ids, returns, successes, costs, source=_SRC)
        tids = [self.space.check_id(t) for t in ids]
        if self._down is not None:
            raise WorkerError(self._down)
        for tid, (r, s, c) in zip(tids, checked, strict=True):
            self._ids.append(tid)
            self._rets.append(r)
            self._succ.append(s)
            self._costs.append(c)
        self._reported += len(ids)
        if len(self._ids) >= self._every:
            self._flush(False)

    # ---------------------------------------------------------------- talking to the actor
    def mark_invalid(self, task_id: int, reason: str = "") -> None:
        """Report that the env refused ``task_id`` (one blocking call; see ``Curriculum``).

        Raises:
            TaskError: no valid task is left.
        """
        tid = self.space.check_id(task_id)
        self._install(self._rpc("mark_invalid", tid, reason), self._reported, time.monotonic())

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, probabilities)`` of the live tasks at the actor's last recompute."""
        keys, probs = self._rpc("probabilities")
        return keys, probs

    def stats(self) -> dict[str, float]:
        """The actor's ``curriculum/...`` stats (after this client's flush) plus this client's.

        Client keys: ``curriculum/ray_flushes`` (batches sent) and ``curriculum/ray_snapshots``
        (snapshots received).
        """
        out: dict[str, float] = self._rpc("stats")
        out["curriculum/ray_flushes"] = float(self.flushes)
        out["curriculum/ray_snapshots"] = float(self.snapshots)
        return out

    def recompute(self) -> None:
        """Recompute the distribution on the actor now and take the new snapshot."""
        self._install(self._rpc("recompute"), self._reported, time.monotonic())

    def invalidate(self) -> None:
        """Make the actor recompute before its next snapshot."""
        self._rpc("invalidate")

    # ---------------------------------------------------------------- checkpoints
    def config_spec(self) -> dict[str, Any]:
        """What a state dict must match (as :meth:`Curriculum.config_spec`)."""
        return dict(self._spec)

    def state_dict(self) -> dict[str, Any]:
        """The actor's state dict after this client's flush, with this client's generator."""
        state: dict[str, Any] = self._rpc("state_dict")
        state["rng"] = self.rng.bit_generator.state
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state dict (local or Ray) on the actor; this client takes its generator.

        Raises:
            DataError: the state dict is malformed or comes from another configuration.
        """
        self._install(self._rpc("load_state_dict", dict(state)), self._reported, time.monotonic())
        self.rng.bit_generator.state = state["rng"]

    # ---------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Flush, then make this client unusable; the creating client also kills the actor.

        A copy in a worker (which :class:`~gymcurric.wrappers.SampleCurriculumTask` closes with its
        env) only flushes. If the actor is already gone the buffered reports are dropped.
        """
        if self._backend.closed:
            return
        here = _owns_connection()  # False in a fork child: its inherited connection is dead
        if here:
            with contextlib.suppress(WorkerError):
                self._flush(True)
        self._backend.closed = True
        self._down = "this RayCurriculum was closed"
        self._snap, self._st, self._gen = None, None, None
        if here and self._backend.is_creator:
            with contextlib.suppress(Exception):
                self._ray.kill(self._actor, no_restart=True)
                self._await_death()

    def _await_death(self) -> None:
        # ``ray.kill`` only requests the kill: a call made right after it may still be served.
        # Wait (bounded) until the actor answers no more, so that once ``close()`` returns every
        # other client's next call fails with WorkerError instead of reaching a dying actor.
        deadline = time.monotonic() + _KILL_WAIT
        while time.monotonic() < deadline:
            try:
                self._ray.get(self._actor.ping.remote(), timeout=_KILL_WAIT)
            except self._ray.exceptions.GetTimeoutError:
                return
            except Exception:
                return  # RayActorError: the actor is dead
            time.sleep(0.01)

    def __enter__(self) -> RayCurriculum:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"RayCurriculum({type(self.space).__name__}, {self._backend!r}, "
            f"flush_every={self._every}, max_pending={self._max_pending})"
        )
