"""A Ray curriculum client's connection to its actor: buffers, flushes, snapshots, failures.

Used by :mod:`gymcurric.integrations.ray.curriculum`: each
:class:`~gymcurric.integrations.ray.RayCurriculum` holds one :class:`ActorLink` (see
:mod:`gymcurric.integrations.ray` for the design). Every call to the actor goes through
:meth:`ActorLink.submit` and :meth:`ActorLink.get`, which turn a dead actor into
:class:`~gymcurric.errors.WorkerError` and unwrap the curriculum's own errors from Ray's
``RayTaskError``. A pickled link arrives as a new connection to the same actor (a copy: empty
buffers, no snapshot, never kills the actor). Beside it: the checks of the process a client
runs in and of its arguments, and the actor class Ray runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import deque
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple

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

#: The ``source`` of the errors a client raises.
SOURCE = "RayCurriculum"
#: Sample counts a client keeps before it sends them even without episodes to report.
PENDING_SAMPLES_MAX = 1024
#: Seconds ``close()`` waits for a killed actor to stop answering.
KILL_WAIT_S = 10.0
_REMOTE_CLASS: list[Any] = []  # ray.remote(_RemoteActor), made once per process on first use
#: The process this module first used Ray in; a fork child inherits it (and a dead connection).
_RAY_PID: list[int] = []


def check_process() -> None:
    """Refuse to use Ray in a process that inherited the client by fork.

    Raises:
        ConfigError: this process is a fork child of the one that first used Ray here.
    """
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
            source=SOURCE,
        )


def owns_connection() -> bool:
    """Whether this process's Ray connection is its own (False in a fork child)."""
    return not _RAY_PID or _RAY_PID[0] == os.getpid()


def import_ray() -> ModuleType:
    """The ``ray`` module, or :class:`~gymcurric.errors.DependencyNotInstalled`."""
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


def remote_actor_class(ray: ModuleType) -> Any:
    """``ray.remote`` of the actor class (made once per process)."""
    if not _REMOTE_CLASS:
        _REMOTE_CLASS.append(ray.remote(_RemoteActor))
    return _REMOTE_CLASS[0]


def check_seconds(name: str, value: Any) -> float | None:
    """``None``, or ``value`` as float seconds > 0.

    Raises:
        ConfigError: ``value`` is neither.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(name, value, "expected None or seconds > 0", source=SOURCE)
    return float(value)


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    """How a client batches and waits (the arguments of ``RayCurriculum``, checked there)."""

    #: Episodes buffered before they are sent in one call.
    flush_every: int
    #: Flushes in flight before the client waits for the oldest.
    max_pending: int
    #: Age (seconds) past which a snapshot is refreshed at the next sample; None: never.
    refresh_seconds: float | None
    #: Seconds to wait for an answer of the actor; None: forever.
    timeout: float | None


class _InFlight(NamedTuple):
    ref: Any  # the ObjectRef of an ``apply`` call
    episodes: int  # episodes it carries
    reported: int  # the client's ``update`` count when it was sent
    sent_at: float  # time.monotonic() when it was sent


class RayBackend:
    """Where a :class:`RayCurriculum`'s state lives: a Ray actor running :class:`CurriculumActor`.

    This describes the actor (whether this client created it, whether it was closed); it is
    not a :class:`~gymcurric.tasks.StateBackend` to pass to :class:`~gymcurric.tasks.Curriculum`.
    """

    shared = True

    def __init__(self, actor: Any, is_creator: bool) -> None:
        self.actor = actor
        self.is_creator = is_creator
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("creator" if self.is_creator else "attached")
        return f"RayBackend({self.actor!r}, {state})"


def attach(actor: Any, settings: ClientSettings) -> ActorLink:
    """A new connection to ``actor``, as a copy of a client (what an unpickled link is)."""
    check_process()
    return ActorLink(import_ray(), actor, settings, creator=False)


class ActorLink:
    """One client's connection to the actor: buffers, in-flight flushes, snapshot, failure.

    Args:
        ray: the ``ray`` module.
        actor: the actor handle (a :class:`CurriculumActor`).
        settings: batching and waiting.
        creator: whether this client created the actor (its :meth:`close` kills it).
    """

    def __init__(
        self, ray: ModuleType, actor: Any, settings: ClientSettings, *, creator: bool
    ) -> None:
        self.ray, self.actor, self.settings = ray, actor, settings
        self._apply = actor.apply
        self.backend = RayBackend(actor, creator)
        #: What the client samples from (``None`` before the first, and once gone or closed).
        self.snapshot: Snapshot | None = None
        #: :attr:`snapshot` as a :class:`CurriculumState`, for the pool's ``sample``.
        self.state: CurriculumState | None = None
        self.generation: Generation | None = None
        self.snapshot_time = 0.0  # when the actor confirmed the snapshot (monotonic)
        self.reported_at_snapshot = 0  # :attr:`reported` when it did
        #: Episodes the client reported so far.
        self.reported = 0
        #: Why the link is unusable (the actor is gone, or the client closed); None: usable.
        self.failure: str | None = None
        self.flushes = self.snapshots = 0
        self._task_ids: list[int] = []
        self._returns: list[float] = []
        self._successes: list[float | None] = []
        self._costs: list[float] = []
        self._sample_slots: list[int] = []
        self._sample_keys: list[int] = []
        self._rejected = 0
        self._episodes_in_hand = 0  # of the call being sent or awaited (lost if it fails)
        self._in_flight: deque[_InFlight] = deque()

    def __reduce__(self) -> tuple[Any, ...]:
        if self.backend.closed:
            raise WorkerError("a closed RayCurriculum cannot be copied")
        return attach, (self.actor, self.settings)

    # ---------------------------------------------------------------- starting
    def start(self, start_timeout: float) -> dict[str, Any]:
        """Wait for the new actor (at least ``start_timeout`` s) and take its first snapshot.

        Returns:
            the actor's ``ready()`` answer (snapshot, generator state, config spec).

        Raises:
            ConfigError: the curriculum rejected its arguments (the actor is killed).
            WorkerError: the actor did not start (it is killed).
        """
        timeout = self.settings.timeout
        try:
            init: dict[str, Any] = self.get(
                self.actor.ready.remote(), None if timeout is None else max(timeout, start_timeout)
            )
        except BaseException:
            self.failure = "failed to start"
            with contextlib.suppress(Exception):
                self.ray.kill(self.actor, no_restart=True)
            raise
        self.install_now(init["snapshot"])
        return init

    # ---------------------------------------------------------------- buffering
    def check_usable(self) -> None:
        """Raise :class:`~gymcurric.errors.WorkerError` if the actor is gone or this closed."""
        if self.failure is not None:
            raise WorkerError(self.failure)

    def add_samples(self, slots: Sequence[int], keys: Sequence[int]) -> None:
        """Count draws ``(slot, task id)``; they are sent with the next flush."""
        self._sample_slots.extend(slots)
        self._sample_keys.extend(keys)
        if len(self._sample_slots) >= PENDING_SAMPLES_MAX:
            self.flush(wait=False)

    def count_rejected(self, rejected: int) -> None:
        """Count generated tasks the space's validator rejected."""
        self._rejected += rejected

    def add_episode(self, task_id: int, return_: float, success: float | None, cost: float) -> None:
        """Buffer one checked episode; flush every ``flush_every``."""
        self.check_usable()
        self._task_ids.append(task_id)
        self._returns.append(return_)
        self._successes.append(success)
        self._costs.append(cost)
        self.reported += 1
        if len(self._task_ids) >= self.settings.flush_every:
            self.flush(wait=False)

    def add_episodes(
        self, task_ids: Sequence[int], episodes: Sequence[tuple[float, float | None, float]]
    ) -> None:
        """Buffer checked episodes ``(return, success, cost)`` in order; flush if due."""
        self.check_usable()
        for task_id, (return_, success, cost) in zip(task_ids, episodes, strict=True):
            self._task_ids.append(task_id)
            self._returns.append(return_)
            self._successes.append(success)
            self._costs.append(cost)
        self.reported += len(task_ids)
        if len(self._task_ids) >= self.settings.flush_every:
            self.flush(wait=False)

    # ---------------------------------------------------------------- flushes and snapshots
    def needs_refresh(self) -> bool:
        """No snapshot, or one older than ``refresh_seconds``."""
        refresh = self.settings.refresh_seconds
        return self.state is None or (
            refresh is not None and time.monotonic() - self.snapshot_time > refresh
        )

    def flush(self, *, wait: bool) -> None:
        """Send the buffers in one ``apply`` call; collect answers down to ``max_pending``.

        With ``wait`` a call is sent even with nothing buffered (it brings the current
        snapshot), and every answer is collected.

        Raises:
            WorkerError: the actor is gone, or did not answer within ``timeout``.
        """
        self.check_usable()
        check_process()
        buffered = bool(self._task_ids or self._sample_slots or self._rejected)
        if buffered or wait:
            batch = None
            if buffered:
                batch = UpdateBatch(
                    self._task_ids,
                    self._returns,
                    self._successes,
                    self._costs,
                    self._sample_slots,
                    self._sample_keys,
                    self._rejected,
                )
                self._task_ids, self._returns, self._successes, self._costs = [], [], [], []
                self._sample_slots, self._sample_keys, self._rejected = [], [], 0
            episodes = len(batch.task_ids) if batch else 0
            self._episodes_in_hand = episodes
            try:
                ref = self.submit(self._apply, batch, self.generation)
            finally:
                self._episodes_in_hand = 0
            self._in_flight.append(_InFlight(ref, episodes, self.reported, time.monotonic()))
            self.flushes += 1
        self.collect(0 if wait else self.settings.max_pending)

    def collect(self, keep: int) -> None:
        """Wait for the oldest in-flight flushes until ``keep`` remain; install their answers."""
        in_flight = self._in_flight
        while len(in_flight) > keep:
            oldest = in_flight.popleft()  # first: an error is raised once, not at every flush
            self._episodes_in_hand = oldest.episodes
            try:
                snap = self.get(oldest.ref)
            finally:
                self._episodes_in_hand = 0
            self.install(snap, oldest.reported, oldest.sent_at)

    def install(self, snap: Snapshot | None, reported: int, sent_at: float) -> None:
        """Take ``snap`` (``None``: the held one is current) as of a call sent at ``sent_at``."""
        if snap is not None:
            self.snapshot, self.generation, self.state = snap, snap.gen, snapshot_state(snap)
            self.snapshots += 1
        # Either way the actor confirmed the distribution as of when the call was sent.
        self.reported_at_snapshot, self.snapshot_time = reported, sent_at

    def install_now(self, snap: Snapshot | None) -> None:
        """:meth:`install` the answer of a call that was just collected."""
        self.install(snap, self.reported, time.monotonic())

    def staleness(self) -> tuple[int, float]:
        """``(updates, seconds)``: the client's updates since, and the age of, its snapshot."""
        return self.reported - self.reported_at_snapshot, time.monotonic() - self.snapshot_time

    # ---------------------------------------------------------------- calls
    def submit(self, method: Any, *args: Any) -> Any:
        """``method.remote(*args)``: the ObjectRef of the call."""
        try:
            return method.remote(*args)
        except self.ray.exceptions.RayActorError as exc:
            self._fail(exc)

    def get(self, ref: Any, timeout: float | None = -1.0) -> Any:
        """The answer to ``ref``, waiting ``timeout`` seconds (-1: the settings' ``timeout``).

        Raises:
            WorkerError: the actor is gone (this link becomes unusable) or did not answer.
            GymcurricError: the curriculum's own error, unwrapped.
        """
        exceptions = self.ray.exceptions
        timeout = self.settings.timeout if timeout == -1.0 else timeout
        try:
            return self.ray.get(ref, timeout=timeout)
        except exceptions.RayActorError as exc:
            self._fail(exc)
        except exceptions.GetTimeoutError:
            raise WorkerError(
                f"the curriculum actor {self.actor!r} did not answer within {timeout} s "
                "(the RayCurriculum's timeout): it is overloaded, hung or unreachable"
            ) from None
        except exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, GymcurricError):
                raise cause from None  # ConfigError, TaskError, DataError of the curriculum
            raise

    def _fail(self, exc: BaseException) -> Any:
        lost = (
            len(self._task_ids)
            + self._episodes_in_hand
            + sum(call.episodes for call in self._in_flight)
        )
        self._in_flight.clear()
        self.snapshot, self.state, self.generation = None, None, None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        self.failure = (
            f"the curriculum actor {self.actor!r} is gone ({type(exc).__name__}: {first}); "
            f"it died, was killed, or its creator closed the RayCurriculum. {lost} episode "
            "report(s) of this client were not applied. Rebuild the curriculum and restore it "
            "from a checkpoint (state_dict / save_curriculum_state)"
        )
        raise WorkerError(self.failure) from None

    def call(self, method: str, *args: Any) -> Any:
        """Call an actor method after this client's buffered updates (one round trip)."""
        self.check_usable()
        self.flush(wait=False)
        ref = self.submit(getattr(self.actor, method), *args)
        self.collect(0)  # all sent before ``ref``, so all done once ``ref`` is
        return self.get(ref)

    # ---------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Flush (unless the actor is gone), then make the link unusable; a creator kills."""
        if self.backend.closed:
            return
        here = owns_connection()  # False in a fork child: its inherited connection is dead
        if here:
            with contextlib.suppress(WorkerError):
                self.flush(wait=True)
        self.backend.closed = True
        self.failure = "this RayCurriculum was closed"
        self.snapshot, self.state, self.generation = None, None, None
        if here and self.backend.is_creator:
            with contextlib.suppress(Exception):
                self.ray.kill(self.actor, no_restart=True)
                self._await_death()

    def _await_death(self) -> None:
        # ``ray.kill`` only requests the kill: a call made right after it may still be served.
        # Wait (bounded) until the actor answers no more, so that once ``close()`` returns every
        # other client's next call fails with WorkerError instead of reaching a dying actor.
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline:
            try:
                self.ray.get(self.actor.ping.remote(), timeout=KILL_WAIT_S)
            except self.ray.exceptions.GetTimeoutError:
                return
            except Exception:
                return  # RayActorError: the actor is dead
            time.sleep(0.01)
