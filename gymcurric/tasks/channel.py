"""Per-env task slots between a vector env's main process and its worker processes.

With ``AsyncVectorEnv`` every sub-env runs in its own worker and picks its task inside its own
``reset()`` (autoresets pass no options). Without a channel each worker samples from the shared
curriculum and reports its episodes to it: per episode, a handful of Python calls and numpy
operations on shared arrays, which with more workers than cores run with cold caches (measured
at ~100 us of CPU per episode inside 8 workers on 2 cores, against ~15 us in one hot process).

A :class:`TaskChannel` moves that work to the main process, where the vector wrapper does it
in batches, once per vector step, for the envs that need it:

* **next task**: per env, one task id drawn ahead by the main process. The sub-env's reset
  takes it (two integer reads and one write in shared memory) instead of sampling. The main
  process counts a task as sampled when it sees it taken, and then draws the next.
* **refusals** (with ``spares``, which ``make_curriculum_vec`` sets to ``max_retries``): per env
  ``spares`` more tasks drawn ahead for the retries after the env refuses a task. The sub-env
  writes the refusal into its slot and takes the next spare; the main process applies the
  refusals (``mark_invalid``, in env order) and counts and redraws the spares taken at its next
  :meth:`TaskChannel.refill`. The sub-env never draws from, nor writes to, the shared curriculum
  then. Without spares (or once they are used up) it refuses and redraws through the curriculum
  itself, and the draw depends on when it reaches the curriculum.
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
step (an env that does not reset in a step neither takes nor refuses a task in it).

The task stream then depends only on the main process's generator and the order of the envs, so
the same seed gives the same tasks in every env and run, whenever the main process's work runs
relative to the workers' (worker-side sampling depends on which worker reaches the curriculum
first).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gymcurric.tasks._channel_slots import ChannelSlots
from gymcurric.tasks.signals import check_episode, check_episode_arrays
from gymcurric.tasks.transport import TaskTransport

__all__ = ["ChannelTransport", "TaskChannel"]

#: draws a sub-env without spares left makes to pass over the tasks it refused (see take_task)
FALLBACK_REDRAWS = 64
#: the main process's bookkeeping (TaskChannel._init_main_side) that a copy carries on from
_MAIN_SIDE = (
    "_counted",
    "_seen",
    "_pool_seen",
    "_stale",
    "_any_stale",
    "_spares_due",
    "_any_spares_due",
)


class TaskChannel(ChannelSlots):
    """Task and result slots for ``num_envs`` sub-envs of one vector env, in shared memory.

    Built by :func:`gymcurric.wrappers.vector.make_curriculum_vec` for async vector envs; the
    sub-env wrappers use :meth:`take`, :meth:`take_spare`, :meth:`refuse` and :meth:`put`
    (through :meth:`transport`), the vector wrapper :meth:`refill` and :meth:`collect`.
    The slots and the sub-env side come from its base,
    :class:`~gymcurric.tasks._channel_slots.ChannelSlots`; this class adds the main process's
    side.

    A copy (a spawn or forkserver worker's, ``copy.deepcopy``, ``copy.copy``) maps the same
    slots and goes on where the channel stood when it was copied: its main-process side is a
    copy of the channel's at that moment (a new channel's, for a copy made before any use).
    Its :meth:`refill` and :meth:`collect` therefore count each task taken, and apply each
    result written, since the channel's last refill and collect exactly once, and draw what
    the channel would have drawn. Only one of the channel and its copies acts as the main
    process (the vector env's): two that refill and collect the same slots would each count
    the tasks taken, and each apply the results written, after the copy was made. Like the
    shared curriculum, a channel is pickled only while a worker process starts (elsewhere its
    backend raises :class:`~gymcurric.errors.ConfigError`).

    Args:
        num_envs: number of sub-envs (>= 1).
        episodes_in_main: whether the main process accounts the episodes from the vector
            env's outputs (the sub-envs then neither accumulate nor :meth:`put` anything).
            Only for sub-envs whose outermost wrapper is the ``SampleCurriculumTask`` (so that the
            vector env's rewards and infos are the ones it would see), with no ``success_fn``
            and no ``factory``; ``make_curriculum_vec`` decides.
        spares: tasks drawn ahead per env for the retries after a refusal (>= 0); with
            spares, refusals go through the channel too. ``make_curriculum_vec`` passes the
            sub-envs' ``max_retries``, so that a sub-env never draws a task itself.
        key_modulus: the curriculum space's ``key_modulus`` (0: task ids are the keys), so
            that a retry passes over spares of a cell the env just refused.
    """

    def __init__(
        self,
        num_envs: int,
        *,
        episodes_in_main: bool = False,
        spares: int = 0,
        key_modulus: int = 0,
    ) -> None:
        super().__init__(
            num_envs, episodes_in_main=episodes_in_main, spares=spares, key_modulus=key_modulus
        )
        self._init_main_side()

    def _init_main_side(self) -> None:
        """The main process's bookkeeping of a new channel (never read by workers).

        A copy carries on the copied channel's (``_MAIN_SIDE``, see ``__getstate__``).
        """
        num_envs, spares = self.num_envs, self.spares
        self._counted = np.zeros(num_envs, dtype=np.int64)  # tasks taken and counted
        self._seen = np.zeros(num_envs, dtype=np.int64)  # results applied
        self._pool_seen = (-1, -1)  # the curriculum's membership version at the last refill
        # busy envs whose waiting task a pool change should have withdrawn (see refill)
        self._stale = np.zeros(num_envs, dtype=bool)
        self._any_stale = False
        # envs whose spares are to be drawn (withdrawn, or taken and counted)
        self._spares_due = np.full(num_envs, spares > 0)
        self._any_spares_due = spares > 0
        self._no_retries = bytes(self._retries.nbytes)  # none refused or used

    # ---------------------------------------------------------------- sub-env side
    # (the slot operations, take to put, are ChannelSlots')
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
        try:
            needs_success = curriculum.config.signal.source == "success"
        except AttributeError:  # not a gymcurric Curriculum's config
            needs_success = False
        if needs_success and np.isnan(successes).any():
            # the curriculum's own check raises, naming the entry, and applies nothing
            curriculum.record(task_ids, returns, successes, costs)
        return task_ids, returns, successes, costs

    def refill(
        self,
        curriculum: Any,
        revoke: np.ndarray | None = None,
        busy: np.ndarray | None = None,
    ) -> None:
        """Apply the refusals and count the tasks taken since the last call; draw what is due.

        In this order: the refusals left in the slots (``mark_invalid``, in env order), the
        spares taken and then the waiting tasks taken counted as samples, then one task drawn
        for each env without a waiting task and ``spares`` for each env whose spares were
        taken or withdrawn, in one draw, in env order.

        Args:
            curriculum: the (shared) curriculum of the sub-envs, in its creating process.
            revoke: envs whose waiting task is withdrawn first (uncounted), e.g. before a
                reseed, so that their next task comes from the new generator. Every waiting
                task and spare is withdrawn when a task left the pool (disabled, evicted)
                since the last call.
            busy: a bool mask of envs whose slots are left alone: they may be taking their
                waiting task (or refusing it and taking spares) right now (the vector wrapper
                refills while the workers step). Their refusals and takes are applied, and
                their slots refilled, by a later call; a pool change withdraws their waiting
                task and spares then, if they did not take them.
        """
        if self.spares and self._retries.tobytes() != self._no_retries:
            self._apply_retries(curriculum, busy)
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
                self.drop_spares(np.ones(self.num_envs, dtype=bool))
                self._stale[:], self._any_stale = False, False
            else:
                idle = ~busy
                given[idle] = taken[idle]
                self.drop_spares(idle)
                self._stale[:], self._any_stale = busy, bool(np.count_nonzero(busy))
        elif self._any_stale:  # busy at the last pool change, and free now
            later = self._stale if busy is None else self._stale & ~busy
            given[later] = taken[later]  # a taken task is gone already: a no-op there
            self.drop_spares(later)
            self._stale &= ~later
            self._any_stale = bool(np.count_nonzero(self._stale))
        if revoke is not None:
            given[revoke] = taken[revoke]
        empty = given == taken
        if busy is not None:
            empty &= ~busy
        empty = empty.nonzero()[0]
        due = None
        if self._any_spares_due:
            due = self._spares_due if busy is None else self._spares_due & ~busy
            due = due.nonzero()[0]
        k = len(empty) + (0 if due is None else len(due) * self.spares)
        if k:
            drawn = curriculum.draw(k)
            if due is None or not len(due):
                self._next_id[empty] = drawn.ids
                self._next_slot[empty] = drawn.slots
            else:
                m = len(empty)
                self._next_id[empty] = drawn.ids[:m]
                self._next_slot[empty] = drawn.slots[:m]
                self._put_spares(due, drawn.ids[m:], drawn.slots[m:])
            given[empty] += 1

    def _apply_retries(self, curriculum: Any, busy: np.ndarray | None) -> None:
        """The refusals (``mark_invalid``) and spares taken of the envs not ``busy``, in order."""
        refused, used = self._refused, self._spare_used
        mask = (refused != 0) | (used != 0)
        if busy is not None:
            mask &= ~busy
        envs = mask.nonzero()[0]
        if not len(envs):
            return
        counts, spent = refused[envs].tolist(), used[envs].tolist()
        refused[envs] = 0  # read once, even if a refusal below raises
        for env, n in zip(envs.tolist(), counts, strict=True):
            for j in range(n):
                why = self._refused_why[env, j].tobytes().rstrip(b"\0")
                curriculum.mark_invalid(
                    int(self._refused_id[env, j]), why.decode("utf-8", "replace")
                )
        slots: list[int] = []
        ids: list[int] = []
        for env, n in zip(envs.tolist(), spent, strict=True):
            taken = self._spare_id[env, :n]
            slots += self._spare_slot[env, :n][taken >= 0].tolist()
            ids += taken[taken >= 0].tolist()
        if ids:
            curriculum.count(slots, ids)
        if any(spent):
            self.drop_spares(envs[np.asarray(spent) > 0])

    def drop_spares(self, envs: np.ndarray) -> None:
        """Withdraw the spares of ``envs`` (uncounted); the next :meth:`refill` draws new ones.

        The vector wrapper calls it after reseeding the curriculum, so that the resetting
        envs' spares come from the new generator too. ``envs``: indices or a bool mask, of
        envs that are not resetting.
        """
        if not self.spares:
            return
        self._spare_id[envs] = -1
        self._spare_used[envs] = 0
        self._spares_due[envs] = True
        self._any_spares_due = bool(np.count_nonzero(self._spares_due))

    def _put_spares(self, envs: np.ndarray, ids: np.ndarray, slots: list[int]) -> None:
        shape = (len(envs), self.spares)
        self._spare_id[envs] = np.asarray(ids).reshape(shape)
        self._spare_slot[envs] = np.asarray(slots, dtype=np.int64).reshape(shape)
        self._spare_used[envs] = 0
        self._spares_due[envs] = False
        self._any_spares_due = bool(np.count_nonzero(self._spares_due))

    def waiting(self) -> list[int]:
        """Per env, the task id waiting in its slot, or -1 (for checkpoints)."""
        return np.where(self._given > self._taken, self._next_id, -1).tolist()

    def waiting_spares(self) -> list[list[int]]:
        """Per env, its spare task ids not taken yet, -1 after them (for checkpoints)."""
        out = []
        for env, used in enumerate(self._spare_used.tolist()):
            row = self._spare_id[env, used:].tolist()
            out.append(row + [-1] * used)
        return out

    def waiting_slots(self) -> list[list[int]]:
        """Per env, the pool slots of :meth:`waiting` and :meth:`waiting_spares` (-1: none)."""
        out = []
        for env, used in enumerate(self._spare_used.tolist()):
            first = int(self._next_slot[env]) if self._given[env] > self._taken[env] else -1
            ids, slots = self._spare_id[env, used:], self._spare_slot[env, used:]
            out.append([first, *np.where(ids >= 0, slots, -1).tolist(), *[-1] * used])
        return out

    def stale(self, curriculum: Any) -> list[bool]:
        """Per env, whether what waits in its slot predates a pool change (refills withdraw it)."""
        if curriculum.pool_version != self._pool_seen:
            return [True] * self.num_envs
        return self._stale.tolist()

    def mark_stale(self, envs: Any) -> None:
        """Mark ``envs`` (a bool mask) :meth:`stale`, after :meth:`restore_waiting`."""
        self._stale |= np.asarray(envs, dtype=bool)
        self._any_stale = bool(np.count_nonzero(self._stale))

    def restore_waiting(
        self, curriculum: Any, ids: list[int], spares: Any = None, slots: Any = None
    ) -> None:
        """Put back a checkpoint's waiting tasks (and spares), after its state was loaded.

        With their ``slots`` (:meth:`waiting_slots`) each is put back as it was, even one that
        left the pool; without, such a task is dropped (its env gets a fresh draw). They are
        counted as samples when taken; an env with no spare restored gets fresh ones now.
        """

        def slot(env: int, col: int, tid: int) -> int | None:
            if slots is None:
                return curriculum.slot_of(tid) if tid >= 0 else None
            return slots[env][col] if tid >= 0 and slots[env][col] >= 0 else None

        self._given[:] = self._taken  # withdraw what waits now (uncounted)
        self._stale[:], self._any_stale = False, False
        for env, tid in enumerate(ids):
            if (at := slot(env, 0, tid)) is not None:
                self._next_id[env], self._next_slot[env] = tid, at
                self._given[env] += 1
        self._pool_seen = curriculum.pool_version
        if not self.spares:
            return
        self._refused[:] = 0  # refusals of the replaced state
        self.drop_spares(np.ones(self.num_envs, dtype=bool))
        for env, row in enumerate(spares or []):
            pairs = [(t, slot(env, j + 1, t)) for j, t in enumerate(row[: self.spares])]
            if kept := [(t, at) for t, at in pairs if at is not None]:
                n = len(kept)
                self._spare_id[env, :n], self._spare_slot[env, :n] = zip(*kept, strict=True)
                self._spares_due[env] = False
        self._any_spares_due = bool(np.count_nonzero(self._spares_due))
        due = self._spares_due.nonzero()[0]
        if len(due):
            drawn = curriculum.draw(len(due) * self.spares)
            self._put_spares(due, drawn.ids, drawn.slots)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        # The main process's side as it stands, for a copy to go on from (see the class
        # docstring): a new channel's over used slots counted every env's last take again
        # at its refill, and applied every env's last result again at its collect.
        main = {name: getattr(self, name) for name in _MAIN_SIDE}
        state["main_side"] = {
            name: value.copy() if isinstance(value, np.ndarray) else value
            for name, value in main.items()
        }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        # every attribute __init__ sets (an old copy lacked _no_retries and _pool_seen, and
        # refill failed on them), then the copied channel's bookkeeping over them
        self._init_main_side()
        for name, value in state["main_side"].items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        main = ", episodes_in_main=True" if self.episodes_in_main else ""
        spares = f", spares={self.spares}" if self.spares else ""
        return f"TaskChannel(num_envs={self.num_envs}{main}{spares}, {self._backend!r})"


class ChannelTransport(TaskTransport):
    """One sub-env's end of a :class:`TaskChannel`: the task waiting in its slot, results there.

    A retry after the env refused a task takes the next spare in the slot, and the refusal is
    left there too. A sub-env that finds neither (a channel without spares) refuses and draws
    through ``fallback``, its own transport to the shared curriculum, which also regenerates
    task dicts. With ``episodes_in_main`` the sub-env reports nothing
    (:attr:`reports_episodes` is False): the vector wrapper accounts its episodes.
    """

    def __init__(self, channel: TaskChannel, env: int, fallback: TaskTransport) -> None:
        self.channel, self.env, self.fallback = channel, env, fallback
        self.reports_episodes = not channel.episodes_in_main

    def take_task(self) -> tuple[int, dict[str, Any]]:
        """The task waiting in this env's slot, else its next spare, else one from the fallback.

        The fallback's draws pass over the tasks this env refused that the main process has
        not applied yet (they are still in the pool), up to ``FALLBACK_REDRAWS`` times.
        """
        chan = self.channel
        tid = chan.take(self.env)
        if tid is None:
            tid = chan.take_spare(self.env)
            if tid is None:
                drawn = self.fallback.take_task()
                refused = chan.refused_keys(self.env)
                modulus = chan.key_modulus
                for _ in range(FALLBACK_REDRAWS):
                    if (drawn[0] % modulus if modulus else drawn[0]) not in refused:
                        break
                    drawn = self.fallback.take_task()
                return drawn
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
        """Leave the refusal in this env's slot; without room there, report it to the fallback."""
        if not self.channel.refuse(self.env, task_id, reason):
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
