"""Per-env task slots between a vector env's main process and its worker processes.

With ``AsyncVectorEnv`` every sub-env runs in its own worker and picks its task inside its own
``reset()`` (autoresets pass no options). Without a channel each worker samples from the shared
curriculum and reports its episodes to it: per episode, a handful of Python calls and numpy
operations on shared arrays, which with more workers than cores run with cold caches (measured
at ~100 us of CPU per episode inside 8 workers on 2 cores, against ~15 us in one hot process).

A :class:`TaskChannel` moves that work to the main process, where the vector wrapper does it
in batches, once per vector step, for the envs that need it:

* **next task**: per env, one task id drawn ahead by the main process. The sub-env's reset
  takes it (two integer reads and one write in shared memory) instead of sampling; an env that
  finds no task waiting (a retry after the env refused one) samples from the curriculum itself.
  The main process counts a task as sampled when it sees it taken, and then draws the next.
* **result**: the sub-env writes its finished episode (task id, return, success, cost) into its
  slot and bumps a counter; the main process reads the new results after the step that ended
  them (:meth:`TaskChannel.take_results`) and applies them in one batch. With
  ``episodes_in_main=True`` the sub-envs report nothing: the main process's vector wrapper sums
  each episode's return and cost from the vector env's own rewards and infos, and the sub-env
  wrappers leave ``step`` to the env (no wrapper code runs in a worker between two resets).

No lock is needed: between two commands the main process owns every slot, and during a command
each worker touches only its own. The command and reply pipes order the writes. The one
exception is :meth:`TaskChannel.refill` with ``busy``: the vector wrapper calls it while the
workers step, and it then reads and writes only the slots of the envs that do not reset in that
step.

The task stream then depends only on the main process's generator and the order of the envs, so
the same seed gives the same tasks in every env and run (worker-side sampling depends on which
worker reaches the curriculum first).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.tasks.shared_backend import SharedMemoryBackend
from gymcurric.tasks.signals import check_episode, check_episode_arrays
from gymcurric.tasks.state import FieldSpec
from gymcurric.tasks.transport import TaskTransport

__all__ = ["ChannelTransport", "TaskChannel"]

_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)
_FIELDS = {
    "given": _I64,  # next tasks written by the main process (a running count)
    "taken": _I64,  # next tasks taken by the sub-env (a running count)
    "next_id": _I64,
    "next_slot": _I64,  # the pool slot it was drawn from (for the sample count)
    "res_seq": _I64,  # results written by the sub-env (a running count)
    "res_id": _I64,
    "res_return": _F64,
    "res_success": _F64,  # NaN: none reported
    "res_cost": _F64,
}


class TaskChannel:
    """Task and result slots for ``num_envs`` sub-envs of one vector env, in shared memory.

    Built by :func:`gymcurric.wrappers.vector.make_curriculum_vec` for async vector envs; the
    sub-env wrappers use :meth:`take` and :meth:`put`, the vector wrapper :meth:`refill` and
    :meth:`collect`. Picklable into worker processes at their start, like the shared
    curriculum.

    Args:
        num_envs: number of sub-envs (>= 1).
        episodes_in_main: whether the main process accounts the episodes from the vector
            env's outputs (the sub-envs then neither accumulate nor :meth:`put` anything).
            Only for sub-envs whose outermost wrapper is the ``SampleCurriculumTask`` (so that the
            vector env's rewards and infos are the ones it would see), with no ``success_fn``
            and no ``factory``; ``make_curriculum_vec`` decides.
    """

    def __init__(self, num_envs: int, *, episodes_in_main: bool = False) -> None:
        check_int("num_envs", num_envs, source="TaskChannel")
        self.num_envs = num_envs
        self.episodes_in_main = bool(episodes_in_main)
        self._backend = SharedMemoryBackend()
        arrays = self._backend.allocate({k: FieldSpec(d, (num_envs,)) for k, d in _FIELDS.items()})
        self._bind(arrays)
        # main-process bookkeeping (never read by workers)
        self._counted = np.zeros(num_envs, dtype=np.int64)  # tasks taken and counted
        self._seen = np.zeros(num_envs, dtype=np.int64)  # results applied
        self._pool_seen = (-1, -1)  # the curriculum's membership version at the last refill
        # busy envs whose waiting task a pool change should have withdrawn (see refill)
        self._stale = np.zeros(num_envs, dtype=bool)
        self._any_stale = False

    def _bind(self, arrays: dict[str, np.ndarray]) -> None:
        self._given, self._taken = arrays["given"], arrays["taken"]
        self._next_id, self._next_slot = arrays["next_id"], arrays["next_slot"]
        self._res_seq, self._res_id = arrays["res_seq"], arrays["res_id"]
        self._res_r, self._res_s = arrays["res_return"], arrays["res_success"]
        self._res_c = arrays["res_cost"]
        # the sub-env side reads and writes single items: memoryviews of the same memory are
        # 2-3x cheaper per item than numpy scalar access
        self._mv: dict[str, Any] = {k: a.data for k, a in arrays.items()}
        mv = self._mv
        self._w_given, self._w_taken, self._w_next = mv["given"], mv["taken"], mv["next_id"]

    # ---------------------------------------------------------------- sub-env side
    def take(self, env: int) -> int | None:
        """The task id waiting for sub-env ``env`` (it is then taken), or None if none waits."""
        taken = self._w_taken
        t = taken[env]
        if t == self._w_given[env]:
            return None
        taken[env] = t + 1
        return self._w_next[env]

    def put(self, env: int, task_id: int, return_: float, success: float | None, cost: float):
        """Leave sub-env ``env``'s finished episode (values already checked) for the main."""
        mv = self._mv
        mv["res_id"][env] = task_id
        mv["res_return"][env] = return_
        mv["res_success"][env] = math.nan if success is None else success
        mv["res_cost"][env] = cost
        seq = mv["res_seq"]
        seq[env] = seq[env] + 1

    def transport(self, env: int, fallback: TaskTransport) -> ChannelTransport:
        """Sub-env ``env``'s end of the channel (in its worker), falling back to ``fallback``."""
        return ChannelTransport(self, env, fallback)

    # ---------------------------------------------------------------- main-process side
    def collect(self, curriculum: Any) -> int:
        """Apply the results written since the last call (in env order); return how many."""
        new = self.take_results()
        if new is None:
            return 0
        curriculum.record(*new)
        return len(new[0])

    def take_results(self) -> tuple[np.ndarray, ...] | None:
        """The results written since the last call, in env order, marked as read.

        ``(task_ids, returns, successes, costs)`` arrays, ready for the curriculum's ``record``
        (each was checked where its episode ended); None if there is none. Call it only
        between two vector steps: during one, a worker may be writing its slot.
        """
        seq = self._res_seq
        new = (seq != self._seen).nonzero()[0]
        if not len(new):
            return None
        self._seen[new] = seq[new]
        return self._res_id[new], self._res_r[new], self._res_s[new], self._res_c[new]

    def report(
        self, curriculum: Any, task_ids: np.ndarray, returns: np.ndarray, successes: Any, costs: Any
    ) -> None:
        """Apply episodes the main process accounted (``episodes_in_main``), in order.

        The same as ``curriculum.record(*channel.check_report(curriculum, ...))``.
        """
        curriculum.record(*self.check_report(curriculum, task_ids, returns, successes, costs))

    @staticmethod
    def check_report(
        curriculum: Any, task_ids: np.ndarray, returns: np.ndarray, successes: Any, costs: Any
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """Check episodes the main process accounted; return them ready for ``record``.

        ``successes`` is a float64 array (NaN: none) or a list (``None``: none); ``costs`` a
        float64 array or a list (``None``: none). Plain finite arrays are returned as they are,
        anything else is checked one by one, naming the first bad value
        (:class:`~gymcurric.errors.NonFiniteValueError`,
        :class:`~gymcurric.errors.ConfigError`). A curriculum whose signal needs a success
        (``SignalConfig(source="success")``) refuses an episode without one here too.
        """
        if not (
            isinstance(successes, np.ndarray)
            and isinstance(costs, np.ndarray)
            # one Python sum per array: a NaN or inf anywhere makes it non-finite (so does an
            # overflow, which the full check below then clears); cheaper than np.isfinite here
            and math.isfinite(sum(returns.tolist()) + sum(costs.tolist()))
        ):
            if isinstance(successes, np.ndarray):  # NaN there means none
                successes = [None if v != v else v for v in successes.tolist()]
            if isinstance(costs, np.ndarray):
                costs = costs.tolist()
            task_ids, returns, successes, costs = check_episode_arrays(
                task_ids, returns.tolist(), successes, costs, source="Curriculum.update_batch"
            )
        signal = getattr(getattr(curriculum, "config", None), "signal", None)
        if getattr(signal, "source", None) == "success" and np.isnan(successes).any():
            # the curriculum's own check raises, naming the entry, and applies nothing
            curriculum.record(task_ids, returns, successes, costs)
        return task_ids, returns, successes, costs

    def refill(
        self,
        curriculum: Any,
        revoke: np.ndarray | None = None,
        busy: np.ndarray | None = None,
    ) -> None:
        """Count the tasks taken since the last call as samples; draw one for each env without.

        Args:
            curriculum: the (shared) curriculum of the sub-envs, in its creating process.
            revoke: envs whose waiting task is withdrawn first (uncounted), e.g. before a
                reseed, so that their next task comes from the new generator. Every waiting
                task is withdrawn when a task left the pool (disabled, evicted) since the
                last call.
            busy: a bool mask of envs whose slots are left alone: they may be taking their
                waiting task right now (the vector wrapper refills while the workers step).
                Their takes are counted, and their slots refilled, by a later call; a pool
                change withdraws their waiting task then, if they did not take it.
        """
        taken = self._taken
        fresh = taken != self._counted
        if busy is not None:
            fresh &= ~busy
        fresh = fresh.nonzero()[0]
        if len(fresh):
            self._counted[fresh] = taken[fresh]
            curriculum.count(self._next_slot[fresh].tolist(), self._next_id[fresh].tolist())
        given = self._given
        version = curriculum.pool_version
        if version != self._pool_seen:  # a task left the pool: what waits may be one of them
            self._pool_seen = version
            revoke = None
            if busy is None:
                given[:] = taken
                self._stale[:], self._any_stale = False, False
            else:
                idle = ~busy
                given[idle] = taken[idle]
                self._stale[:], self._any_stale = busy, bool(np.count_nonzero(busy))
        elif self._any_stale:  # busy at the last pool change, and free now
            later = self._stale if busy is None else self._stale & ~busy
            given[later] = taken[later]  # a taken task is gone already: a no-op there
            self._stale &= ~later
            self._any_stale = bool(np.count_nonzero(self._stale))
        if revoke is not None:
            given[revoke] = taken[revoke]
        empty = given == taken
        if busy is not None:
            empty &= ~busy
        empty = empty.nonzero()[0]
        if len(empty):
            drawn = curriculum.draw(len(empty))
            self._next_id[empty] = drawn.ids
            self._next_slot[empty] = drawn.slots
            given[empty] += 1

    def waiting(self) -> list[int]:
        """Per env, the task id waiting in its slot, or -1 (for checkpoints)."""
        return np.where(self._given > self._taken, self._next_id, -1).tolist()

    def restore_waiting(self, curriculum: Any, ids: list[int]) -> None:
        """Put back the waiting tasks of a checkpoint (after the curriculum state was loaded).

        An id whose task is no longer in the pool is dropped (its env gets a fresh draw). The
        restored tasks are counted as samples when taken, as the saved ones would have been.
        """
        self._given[:] = self._taken  # withdraw what waits now (uncounted)
        self._stale[:], self._any_stale = False, False
        for env, tid in enumerate(ids):
            slot = curriculum.slot_of(tid) if tid >= 0 else None
            if slot is not None:
                self._next_id[env], self._next_slot[env] = tid, slot
                self._given[env] += 1
        self._pool_seen = curriculum.pool_version

    def close(self) -> None:
        """Unlink the segment (creator) or drop this process's mapping (a worker)."""
        self._backend.close()

    @property
    def is_creator(self) -> bool:
        """True in the process that made the channel (the vector env's process)."""
        return self._backend.is_creator

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._backend.closed

    def __getstate__(self) -> dict[str, Any]:
        return {
            "num_envs": self.num_envs,
            "episodes_in_main": self.episodes_in_main,
            "backend": self._backend,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.num_envs, self._backend = state["num_envs"], state["backend"]
        self.episodes_in_main = state["episodes_in_main"]
        self._bind(self._backend.arrays())
        self._counted = self._seen = np.zeros(0, dtype=np.int64)  # main-process only
        self._stale, self._any_stale = np.zeros(0, dtype=bool), False

    def __repr__(self) -> str:
        main = ", episodes_in_main=True" if self.episodes_in_main else ""
        return f"TaskChannel(num_envs={self.num_envs}{main}, {self._backend!r})"


class ChannelTransport(TaskTransport):
    """One sub-env's end of a :class:`TaskChannel`: the task waiting in its slot, results there.

    A sub-env that finds no task waiting (a retry after its env refused one) takes one from
    ``fallback``, its own transport to the shared curriculum, which also regenerates task dicts
    and takes refusals. With ``episodes_in_main`` the sub-env reports nothing
    (:attr:`reports_episodes` is False): the vector wrapper accounts its episodes.
    """

    def __init__(self, channel: TaskChannel, env: int, fallback: TaskTransport) -> None:
        self.channel, self.env, self.fallback = channel, env, fallback
        self.reports_episodes = not channel.episodes_in_main

    def take_task(self) -> tuple[int, dict[str, Any]]:
        """The task waiting in this env's slot, else one from the fallback."""
        tid = self.channel.take(self.env)
        if tid is None:
            return self.fallback.take_task()
        return tid, self.fallback.task(tid)

    def task(self, task_id: int) -> dict[str, Any]:
        """The task dict of ``task_id`` (from the fallback)."""
        return self.fallback.task(task_id)

    def any_task(self) -> dict[str, Any]:
        """A task without drawing (from the fallback)."""
        return self.fallback.any_task()

    def report_episode(
        self, task_id: int, return_: float, success: float | bool | None, cost: float | None
    ) -> None:
        """Check the episode and leave it in this env's slot for the main process."""
        self.channel.put(self.env, task_id, *check_episode(task_id, return_, success, cost))

    def refuse_task(self, task_id: int, reason: str) -> None:
        """Report the refusal through the fallback (the shared curriculum)."""
        self.fallback.refuse_task(task_id, reason)

    def reseed(self, seed: int) -> None:
        """Reseed the fallback's stream (the draws this env makes itself)."""
        self.fallback.reseed(seed)

    def flush(self) -> None:
        """Flush the fallback (results in the slot are the main process's to apply)."""
        self.fallback.flush()

    def release(self) -> None:
        """Drop this worker's channel mapping, then release the fallback."""
        chan = self.channel
        if not chan.is_creator and not chan.closed:
            chan.close()  # this worker's mapping; the vector env's process unlinks
        self.fallback.release()
