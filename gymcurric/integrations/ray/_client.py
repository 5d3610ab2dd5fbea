"""The transport of a Ray curriculum client: buffers, flushes, snapshots, failures, pickling.

Private to :mod:`gymcurric.integrations.ray.curriculum`: :class:`_Client` is the base of
:class:`~gymcurric.integrations.ray.RayCurriculum` (see :mod:`gymcurric.integrations.ray` for
the design). Every call to the actor goes through :meth:`_Client._submit` and
:meth:`_Client._get`, which turn a dead actor into :class:`~gymcurric.errors.WorkerError` and
unwrap the curriculum's own errors from Ray's ``RayTaskError``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Mapping
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from gymcurric._optional import import_optional
from gymcurric.errors import ConfigError, GymcurricError, WorkerError
from gymcurric.integrations.ray.actor import (
    CurriculumActor,
    Generation,
    Snapshot,
    UpdateBatch,
    snapshot_state,
)
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.spaces import TaskSpace
from gymcurric.tasks.state import CurriculumState

_SRC = "RayCurriculum"
#: Sample counts a client keeps before it sends them even without episodes to report.
_PENDING_MAX = 1024
_REMOTE: list[Any] = []  # ray.remote(CurriculumActor), made once per process on first use
#: The process this module first used Ray in; a fork child inherits it (and a dead connection).
_RAY_PID: list[int] = []


def _check_process() -> None:
    pid = os.getpid()
    if not _RAY_PID:
        _RAY_PID.append(pid)
    elif _RAY_PID[0] != pid:
        raise ConfigError(
            "process",
            pid,
            f"a RayCurriculum reached process {pid} by fork from process {_RAY_PID[0]}, "
            "whose Ray connection does not survive a fork; use the client in the Ray driver "
            "and in Ray tasks/actors, or backend='shared' for worker processes of one machine",
            source=_SRC,
        )


def _owns_connection() -> bool:
    return not _RAY_PID or _RAY_PID[0] == os.getpid()


def _ray() -> ModuleType:
    return import_optional("ray", "ray", purpose="by gymcurric.integrations.ray")


class _RemoteActor(CurriculumActor):
    """The class Ray runs: a construction error is kept and raised by ``ready()``.

    Ray reports an exception in an actor's ``__init__`` as a dead actor; raised from a method,
    a :class:`~gymcurric.errors.ConfigError` reaches the client as itself.
    """

    def __init__(self, space: TaskSpace, config: CurriculumConfig | None = None) -> None:
        self._error: GymcurricError | None = None
        try:
            super().__init__(space, config)
        except GymcurricError as exc:
            self._error = exc

    def ready(self) -> dict[str, Any]:
        if self._error is not None:
            raise self._error
        return super().ready()


def _actor_class(ray: ModuleType) -> Any:
    if not _REMOTE:
        _REMOTE.append(ray.remote(_RemoteActor))
    return _REMOTE[0]


def _config(config: CurriculumConfig | None, overrides: Mapping[str, Any]) -> CurriculumConfig:
    cfg = config if config is not None else CurriculumConfig()
    if not isinstance(cfg, CurriculumConfig):
        raise ConfigError("config", cfg, "expected a CurriculumConfig", source=_SRC)
    names = {f.name for f in dataclasses.fields(CurriculumConfig)}
    for key, value in overrides.items():
        if key not in names:
            raise ConfigError(
                key, value, f"unknown keyword; expected one of {sorted(names)}", source=_SRC
            )
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def _positive(name: str, value: Any, *, none: bool = False) -> float | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(
            name, value, "expected None or seconds > 0" if none else "expected > 0", source=_SRC
        )
    return float(value)


class _Pending(NamedTuple):
    ref: Any  # the ObjectRef of an ``apply`` call
    episodes: int  # episodes it carries
    reported: int  # this client's ``update`` count when it was sent
    sent_at: float  # time.monotonic() when it was sent


class RayBackend:
    """Where a :class:`RayCurriculum`'s state lives: a Ray actor running :class:`CurriculumActor`.

    This describes the actor for the env wrappers (which close a worker's copy through
    :attr:`is_creator` / :attr:`closed`, as for a shared-memory curriculum); it is not a
    :class:`~gymcurric.tasks.StateBackend` to pass to :class:`~gymcurric.tasks.Curriculum`.
    """

    shared = True

    def __init__(self, actor: Any, is_creator: bool) -> None:
        self.actor = actor
        self.is_creator = is_creator
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("creator" if self.is_creator else "attached")
        return f"RayBackend({self.actor!r}, {state})"


class _Client:
    """Buffers, in-flight flushes and the snapshot of one client (see the module docstring)."""

    _down: str | None
    _spec: dict[str, Any]

    def _setup(
        self,
        ray: ModuleType,
        space: TaskSpace,
        cfg: CurriculumConfig,
        actor: Any,
        settings: tuple[int, int, float | None, float | None],
        *,
        creator: bool,
    ) -> None:
        self._ray, self.space, self.config = ray, space, cfg
        self._pool = cfg.pool
        self._every, self._max_pending, self._refresh_s, self._timeout = settings
        self._actor, self._apply = actor, actor.apply
        self._backend = RayBackend(actor, creator)
        self._mod = (space.size or 0) if space.has_variants else 0
        #: This client's sampling generator (:meth:`reseed`); a copy starts unseeded.
        self.rng = np.random.default_rng()
        self._snap: Snapshot | None = None
        self._st: CurriculumState | None = None
        self._gen: Generation | None = None
        self._t_snap = 0.0
        self._snap_reported = 0
        self._ids: list[int] = []
        self._rets: list[float] = []
        self._succ: list[float | None] = []
        self._costs: list[float] = []
        self._pslots: list[int] = []
        self._pkeys: list[int] = []
        self._rejected = 0
        self._reported = 0
        self._in_hand = 0  # episodes of the call being sent or awaited (lost if it fails)
        self._pending: deque[_Pending] = deque()
        self._down: str | None = None
        self.flushes = self.snapshots = 0

    def flush(self) -> None:
        """Send everything buffered and wait until the actor applied it; refresh the snapshot.

        Raises:
            WorkerError: the actor is gone, or did not answer within ``timeout``.
        """
        self._flush(True)

    def _flush(self, wait: bool) -> None:
        if self._down is not None:
            raise WorkerError(self._down)
        _check_process()
        if self._ids or self._pslots or self._rejected or wait:
            batch = None
            if self._ids or self._pslots or self._rejected:
                batch = UpdateBatch(
                    self._ids,
                    self._rets,
                    self._succ,
                    self._costs,
                    self._pslots,
                    self._pkeys,
                    self._rejected,
                )
                self._ids, self._rets, self._succ, self._costs = [], [], [], []
                self._pslots, self._pkeys, self._rejected = [], [], 0
            self._in_hand = len(batch.task_ids) if batch else 0
            try:
                ref = self._submit(self._apply, batch, self._gen)
            finally:
                self._in_hand = 0
            self._pending.append(
                _Pending(ref, len(batch.task_ids) if batch else 0, self._reported, time.monotonic())
            )
            self.flushes += 1
        self._drain(0 if wait else self._max_pending)

    def _drain(self, keep: int) -> None:
        pending = self._pending
        while len(pending) > keep:
            p = pending.popleft()  # first: an error is raised once, not at every later flush
            self._in_hand = p.episodes
            try:
                snap = self._get(p.ref)
            finally:
                self._in_hand = 0
            self._install(snap, p.reported, p.sent_at)

    def _install(self, snap: Snapshot | None, reported: int, sent_at: float) -> None:
        if snap is not None:
            self._snap, self._gen, self._st = snap, snap.gen, snapshot_state(snap)
            self.snapshots += 1
        # Either way the actor confirmed the distribution as of when the call was sent.
        self._snap_reported, self._t_snap = reported, sent_at

    def _submit(self, method: Any, *args: Any) -> Any:
        try:
            return method.remote(*args)
        except self._ray.exceptions.RayActorError as exc:
            self._fail(exc)

    def _get(self, ref: Any, timeout: float | None = -1.0) -> Any:
        ex = self._ray.exceptions
        timeout = self._timeout if timeout == -1.0 else timeout
        try:
            return self._ray.get(ref, timeout=timeout)
        except ex.RayActorError as exc:
            self._fail(exc)
        except ex.GetTimeoutError:
            raise WorkerError(
                f"the curriculum actor {self._actor!r} did not answer within {timeout} s "
                "(the RayCurriculum's timeout): it is overloaded, hung or unreachable"
            ) from None
        except ex.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, GymcurricError):
                raise cause from None  # ConfigError, TaskError, DataError of the curriculum
            raise

    def _fail(self, exc: BaseException) -> Any:
        lost = len(self._ids) + self._in_hand + sum(p.episodes for p in self._pending)
        self._pending.clear()
        self._snap, self._st, self._gen = None, None, None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        self._down = (
            f"the curriculum actor {self._actor!r} is gone ({type(exc).__name__}: {first}); "
            f"it died, was killed, or its creator closed the RayCurriculum. {lost} episode "
            "report(s) of this client were not applied. Rebuild the curriculum and restore it "
            "from a checkpoint (state_dict / save_curriculum_state)"
        )
        raise WorkerError(self._down) from None

    def _rpc(self, method: str, *args: Any) -> Any:
        """Call an actor method after this client's buffered updates (one round trip)."""
        if self._down is not None:
            raise WorkerError(self._down)
        self._flush(False)
        ref = self._submit(getattr(self._actor, method), *args)
        self._drain(0)  # all sent before ``ref``, so all done once ``ref`` is
        return self._get(ref)

    @property
    def staleness(self) -> tuple[int, float]:
        """``(updates, seconds)``: this client's updates since, and the age of, its snapshot.

        Bounded by ``flush_every * (max_pending + 1)`` updates and ``refresh_seconds`` (checked
        at each ``sample``), plus one round trip.
        """
        return self._reported - self._snap_reported, time.monotonic() - self._t_snap

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot this client samples from (``None`` before its first ``sample``)."""
        return self._snap

    @property
    def backend(self) -> RayBackend:
        """The actor holding the state."""
        return self._backend

    @property
    def actor(self) -> Any:
        """The Ray actor handle (a :class:`CurriculumActor`)."""
        return self._actor

    def __getstate__(self) -> dict[str, Any]:
        if self._backend.closed:
            raise WorkerError("a closed RayCurriculum cannot be copied")
        settings = (self._every, self._max_pending, self._refresh_s, self._timeout)
        return {
            "space": self.space,
            "config": self.config,
            "actor": self._actor,
            "settings": settings,
            "spec": self._spec,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A copy (in a Ray worker, or a deepcopy) is a new client: empty buffers, no snapshot
        # until its first sample, an unseeded generator until reseed() (workers never repeat
        # each other's stream), and it never kills the actor.
        _check_process()
        self._setup(
            _ray(),
            state["space"],
            state["config"],
            state["actor"],
            state["settings"],
            creator=False,
        )
        self._spec = state["spec"]
