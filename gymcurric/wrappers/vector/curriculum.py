"""Curriculum task selection for Gymnasium vector envs (Sync and Async).

A vector env's sub-envs reset themselves (autoreset), without options, so the task of each
episode is picked where the reset happens: inside each sub-env, by the single-env
:class:`gymcurric.wrappers.SampleCurriculumTask`. With ``SyncVectorEnv`` all sub-envs share the one
curriculum object; with ``AsyncVectorEnv`` each worker process unpickles the curriculum, which
must then use the shared-memory backend (``Curriculum(..., backend="shared")``) so that every
update lands in the same state. :func:`~gymcurric.wrappers.vector.make_curriculum_vec` builds
such a vector env in one call.

The vector twin :class:`SampleCurriculumTask` adds what only the vector level knows: it checks that
every sub-env is wrapped (and, for Sync, with this curriculum), keeps :attr:`task_ids`, the
task of the transition each sub-env just returned, in every autoreset mode, and exposes the
curriculum's :meth:`~SampleCurriculumTask.stats`.

Where the reset info (with ``task``/``task_id``) shows up depends on
``env.metadata["autoreset_mode"]``:

* ``NEXT_STEP`` (default): in the step *after* an episode ends (the reset step, reward 0); that
  step's transition belongs to the new task.
* ``SAME_STEP``: in the step that ends the episode (the final step's info is in
  ``info["final_info"]``); that step's transition still belongs to the old task.
* ``DISABLED``: in the info returned by ``reset(options={"reset_mask": ...})``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv, VectorWrapper

from gymcurric._deprecated import alias_getattr
from gymcurric.errors import ConfigError
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers.curriculum import SampleCurriculumTask as _SingleSampleCurriculumTask
from gymcurric.wrappers.episode_sums import EpisodeSums
from gymcurric.wrappers.vector._channel_rows import check_slots_fit, checked_rows
from gymcurric.wrappers.vector._common import autoreset_mode, sync_sub_wrappers
from gymcurric.wrappers.vector._main_episodes import MainEpisodes

__all__ = ["SampleCurriculumTask"]

_F64 = np.dtype(np.float64)


class SampleCurriculumTask(MainEpisodes, VectorWrapper, gym.utils.RecordConstructorArgs):
    """Vector twin of :class:`gymcurric.wrappers.SampleCurriculumTask`: tracks the sub-envs' tasks.

    The sub-envs must each be wrapped in the single-env ``SampleCurriculumTask`` (they pick their
    own tasks at every autoreset and report their episodes); this wrapper leaves observations,
    rewards and infos unchanged. It raises :class:`~gymcurric.errors.ConfigError` when a sub-env
    starts an episode without reporting ``info["task_id"]`` (it is not wrapped), or, for
    ``SyncVectorEnv``, when a sub-env's wrapper uses another curriculum object.

    Attributes:
        curriculum: the curriculum (in the main process; for Async, on the shared backend).
        task_ids: int64 array, per sub-env the task id of the transition the last ``step`` (or
            ``reset``) returned: the task of the episode that ended for a sub-env that is done,
            in every autoreset mode; ``-1`` for explicit tasks and before the first reset.

    Info keys: none written; the sub-envs' ``task``/``_task`` and ``task_id``/``_task_id``
    appear where they reset (see the module docstring).

    Examples:
        >>> import gymcurric
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> from gymcurric.wrappers.vector import make_curriculum_vec
        >>> cur = Curriculum(FixedTaskSpace([{"num_hazards": n} for n in (0, 2, 4)]), seed=0)
        >>> envs = make_curriculum_vec("gymcurric/HazardGrid-v0", cur, num_envs=2)
        >>> _, info = envs.reset(seed=0)
        >>> info["_task_id"].tolist(), envs.task_ids.tolist() == info["task_id"].tolist()
        ([True, True], True)
        >>> for _ in range(300):
        ...     _ = envs.step(envs.action_space.sample())
        >>> envs.stats()["curriculum/updates"] > 0
        True
    """

    def __init__(
        self,
        env: VectorEnv,
        curriculum: Any,
        *,
        channel: TaskChannel | None = None,
        reseed_curriculum: bool = True,
        overlap: bool = True,
    ) -> None:
        """Wrap ``env``, whose sub-envs are wrapped in the single-env ``SampleCurriculumTask``.

        Args:
            env: the vector env.
            curriculum: the curriculum the sub-envs use (its ``stats`` are exposed).
            channel: the :class:`~gymcurric.tasks.channel.TaskChannel` the sub-envs are bound
                to (``make_curriculum_vec`` makes it for async vector envs): this wrapper then
                draws every sub-env's next task and applies their results, in batches, in
                this process, during the step after the one that needed it
                (:meth:`flush_curriculum`). It is closed with the wrapper.
            reseed_curriculum: with a channel, whether ``reset(seed=s)`` reseeds the
                curriculum's generator here (as each sub-env's wrapper does without one).
            overlap: with a channel on an ``AsyncVectorEnv``, apply a step's curriculum work
                between ``step_async`` and ``step_wait`` of the next step, while the workers
                step (the default), instead of just before it (``False``). Meant for hosts
                where the main process is the bottleneck; on a 16-core machine with trivial
                envs the two measured within noise of each other (BENCHMARKS.md). The tasks,
                episodes and curriculum state are the same either way, bit for bit, refused
                tasks included, when the channel has spares (``make_curriculum_vec``'s
                does): no sub-env then reads or writes the shared curriculum's state.
        """
        if not callable(getattr(curriculum, "stats", None)):
            raise ConfigError(
                "curriculum",
                curriculum,
                "expected a gymcurric Curriculum",
                source="vector.SampleCurriculumTask",
            )
        if channel is not None and (
            not isinstance(channel, TaskChannel) or channel.num_envs != env.num_envs
        ):
            raise ConfigError(
                "channel",
                channel,
                f"expected a TaskChannel for {env.num_envs} sub-envs",
                source="vector.SampleCurriculumTask",
            )
        gym.utils.RecordConstructorArgs.__init__(
            self,
            curriculum=curriculum,
            channel=channel,
            reseed_curriculum=reseed_curriculum,
            overlap=overlap,
            _disable_deepcopy=True,
        )
        VectorWrapper.__init__(self, env)
        self.curriculum = curriculum
        self._mode = autoreset_mode(env)
        subs = sync_sub_wrappers(env, _SingleSampleCurriculumTask, self._unwrapped_error)
        for i, wrapper in enumerate(subs):
            if wrapper.curriculum is not curriculum:
                raise ConfigError(
                    "curriculum",
                    curriculum,
                    f"sub-env {i} is wrapped with another curriculum object",
                    source="vector.SampleCurriculumTask",
                )
        self._current = np.full(self.num_envs, -1, dtype=np.int64)
        self.task_ids: npt.NDArray[np.int64] = self._current.copy()
        self._no_dones = np.zeros(self.num_envs, dtype=bool)  # never written
        self._zero_bytes = self._no_dones.tobytes()
        self._prev_dones = self._no_dones
        self._prev_any = False
        self._dirty = False  # _current changed since task_ids was last copied from it
        self._channel = channel
        self._reseed = reseed_curriculum and callable(getattr(curriculum, "reseed", None))
        # a checkpoint's waiting tasks, spares, their pool slots, stale marks and whether its
        # next refill was due (resume_channel)
        self._resume: tuple[list[int], Any, Any, list[bool] | None, bool | None] | None = None
        # episodes accounted here (channel.episodes_in_main): per sub-env running sums
        self._in_main = channel is not None and channel.episodes_in_main
        self._sums = EpisodeSums(self.num_envs)
        # The curriculum work of a step's episode ends and resets is applied during the next
        # step, while the workers step (AsyncVectorEnv: between step_async and step_wait), or
        # at the next reset, stats(), checkpoint or close, whichever comes first.
        self._pending: tuple[Any, ...] | None = None  # checked episodes to record
        self._pending_envs: npt.NDArray[np.intp] | None = None  # their sub-envs (for notes)
        self._pending_refill = False
        self._busy: npt.NDArray[np.bool_] | None = None  # sub-envs resetting in that step
        # an AsyncVectorEnv with Gymnasium's own step (checked again per step: env may be swapped)
        self._async: AsyncVectorEnv | None = None
        if overlap and isinstance(env, AsyncVectorEnv) and type(env).step is AsyncVectorEnv.step:
            self._async = env

    def _unwrapped_error(self, envs: Sequence[int]) -> ConfigError:
        return ConfigError(
            "env",
            self.env,
            f"sub-envs {list(envs)} started an episode without info['task_id']:"
            " wrap each sub-env in gymcurric.wrappers.SampleCurriculumTask (e.g. gym.make_vec(..., "
            "wrappers=[partial(SampleCurriculumTask, curriculum=cur)]) or make_curriculum_vec)",
            source="vector.SampleCurriculumTask",
        )

    def _started(
        self, infos: dict[str, Any], expected: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_] | None:
        """Mask of sub-envs that reported a new task (None: none did); raises if one is missing."""
        mask = infos.get("_task_id")
        if mask is None:
            if np.count_nonzero(expected):
                raise self._unwrapped_error(np.flatnonzero(expected).tolist())
            return None
        mask = np.asarray(mask, dtype=bool)
        missing = expected & ~mask
        if True in missing:  # (a membership test on a bool array: no Python call)
            raise self._unwrapped_error(np.flatnonzero(missing).tolist())
        return mask

    def _record(self, infos: dict[str, Any], started: npt.NDArray[np.bool_] | None) -> None:
        if started is not None and True in started:
            self._current[started] = np.asarray(infos["task_id"], dtype=np.int64)[started]
            self._dirty = True

    @property
    def channel(self) -> TaskChannel | None:
        """The sub-envs' :class:`~gymcurric.tasks.channel.TaskChannel`, or None (no channel).

        Of an env wrapped in this class twice, a checkpoint saves the wrapper's that has one.
        """
        return self._channel

    def awaiting_reset(self) -> list[bool]:
        """Per sub-env whether its episode ended in the last step and it has not reset since.

        With ``NEXT_STEP`` autoreset until its reset step (the next step), with ``DISABLED``
        until ``reset(options={"reset_mask": ...})`` resets it; never with ``SAME_STEP`` (a
        sub-env resets in the step that ends its episode). ``save_curriculum_state(...,
        env=envs)`` saves no task for these sub-envs, so that the resumed run's reset starts
        their next task (with a channel, the one waiting in their slot), as the uninterrupted
        run does, instead of the one that ended.
        """
        if self._mode == AutoresetMode.SAME_STEP:
            return [False] * self.num_envs
        return [bool(d) for d in self._prev_dones.tolist()]

    def channel_waiting(self) -> list[int] | None:
        """Per sub-env the task drawn for its next episode (-1: none); None without a channel.

        ``save_curriculum_state(..., env=envs)`` saves it. With ``DISABLED`` autoreset, -1 for
        the sub-envs :meth:`awaiting_reset`: the reset that resets them withdraws their
        waiting task and draws a new one (see :meth:`reset`), and so does the resumed run's.

        After :meth:`resume_channel` (a load) and until the reset that restores them, this and
        the other ``channel_*`` methods give the loaded checkpoint's rows (``channel_slots``,
        ``channel_stale`` and ``channel_refill_due``: None for a file without them), so that a
        save before that reset writes the checkpoint loaded.
        """
        if self._channel is None:
            return None
        self.flush_curriculum()
        if self._resume is not None:  # a loaded checkpoint's, until the reset restores them
            return list(self._resume[0])
        waiting = self._channel.waiting()
        if self._mode == AutoresetMode.DISABLED and self._prev_any:
            awaiting = self.awaiting_reset()
            waiting = [-1 if done else t for t, done in zip(waiting, awaiting, strict=True)]
        return waiting

    def channel_spares(self) -> list[list[int]] | None:
        """Per sub-env its spare tasks (-1: none), for retries; None without a channel."""
        if self._channel is None:
            return None
        self.flush_curriculum()
        if self._resume is not None:
            return _rows(self._resume[1])
        return self._channel.waiting_spares()

    def channel_slots(self) -> list[list[int]] | None:
        """Per sub-env the pool slots of its waiting task and spares; None without a channel."""
        if self._channel is None:
            return None
        waiting = self.channel_waiting()  # flushed; -1 where the next reset withdraws it
        assert waiting is not None
        if self._resume is not None:  # None: a file from before slots
            return _rows(self._resume[2])
        rows = self._channel.waiting_slots()
        return [[r[0] if t >= 0 else -1, *r[1:]] for t, r in zip(waiting, rows, strict=True)]

    def channel_stale(self) -> list[bool] | None:
        """Per sub-env whether its waiting task and spares predate a change of the pool.

        The channel withdraws those at its next refill that leaves the sub-env alone, but a
        sub-env that resets before (``NEXT_STEP``: in the reset step) still takes them, even
        one that left the pool. ``save_curriculum_state`` saves these marks and the slots,
        and :meth:`resume_channel` puts them back. None without a channel.
        """
        if self._channel is None:
            return None
        self.flush_curriculum()
        if self._resume is not None:
            stale = self._resume[3]
            return None if stale is None else list(stale)
        return self._channel.stale(self.curriculum)

    def channel_refill_due(self) -> bool | None:
        """Whether the last step ended episodes: the channel's next refill is then due.

        That refill withdraws the :meth:`channel_stale` tasks. After a step that ended
        episodes the uninterrupted run makes it after the next step (``NEXT_STEP``: after the
        reset step, which the resumed run's reset stands for; ``SAME_STEP``: after the next
        step; ``DISABLED``: at the masked reset); after a reset that started every episode
        (False), only after the next step that ends episodes, and the sub-envs that reset
        before it take the stale tasks all the same. ``save_curriculum_state`` saves it, so
        that the resumed run withdraws them at the same point. None without a channel.
        """
        if self._channel is None:
            return None
        self.flush_curriculum()
        if self._resume is not None:
            return self._resume[4]
        return self._prev_any

    def resume_channel(
        self,
        waiting: list[int] | None,
        spares: list[list[int]] | None = None,
        slots: list[list[int]] | None = None,
        stale: list[bool] | None = None,
        refill_due: bool | None = None,
    ) -> Callable[[], None] | None:
        """Make the next ``reset`` restore these waiting tasks (and spares); keep the generator.

        The curriculum is not reseeded then: with each sub-env's resumed task, the run draws
        the tasks an uninterrupted run would have drawn. With the ``slots`` and ``stale``
        marks of :meth:`channel_slots` and :meth:`channel_stale` the channel is restored as
        it was, tasks that left the pool included; the marks take effect at the refill the
        uninterrupted run makes next (``refill_due``: :meth:`channel_refill_due`; None, a file
        from before it: due, except with ``DISABLED`` autoreset where no sub-env awaited its
        masked reset). ``load_curriculum_state`` calls it before it changes anything else,
        with ``waiting=None`` for a file without a channel's rows: the next reset then restores
        nothing (an earlier load's rows are dropped), and the other arguments are ignored. An
        override of yours returns what this method returns, for a refused load to undo it (one
        that returns None, or a function that raises, is put back with
        :meth:`curriculum_channel_put_back`, and the refusal gets a note saying so).

        Returns:
            A function that puts back what the next reset was to restore before this call,
            for ``load_curriculum_state`` to call where the sub-envs or the curriculum then
            refuse the file; None without a channel.

        Raises:
            ConfigError: a list without one row per sub-env, or an entry of ``waiting`` or
                ``spares`` that is not a task id (an int from -1 to 2**63 - 1), or a row of
                ``slots`` without one slot (the same rule, -1: none) per task of the row, or
                with -1 for a task (as a checkpoint file with one is refused), or an entry of
                ``stale``, or a ``refill_due``, that is not a bool (a numpy bool too; for
                ``refill_due`` None as well); nothing is changed. A slot
                beyond the curriculum's pool is refused by the reset that restores the rows
                (the pool is known then), before it changes anything: the restore still waits.
        """
        if self._channel is None:
            return None
        restored = None  # a file without a channel's rows: nothing to restore
        if waiting is not None:  # all checked before anything is set
            restored = checked_rows(self.num_envs, waiting, spares, slots, stale, refill_due)
        undo = self.curriculum_channel_put_back()
        self._resume = restored
        return undo

    def curriculum_channel_put_back(self) -> Callable[[], None]:
        """A function that puts back what the next reset is to restore now (checkpoints call it).

        What :meth:`resume_channel` returns, taken before it changes anything. Under a name no
        other wrapper has: ``load_curriculum_state`` takes it before it calls
        ``resume_channel``, and calls it where an override of yours returned no such function
        (or one that raises) and the load is then refused.
        """
        before = self._resume

        def put_back() -> None:
            self._resume = before

        return put_back

    def stats(self) -> dict[str, float]:
        """The curriculum's flat ``curriculum/...`` statistics (after :meth:`flush_curriculum`)."""
        self.flush_curriculum()
        return dict(self.curriculum.stats())

    def flush_curriculum(self) -> None:
        """Apply the curriculum work the last step left for the next one, now.

        With a channel, the episodes that end in a vector step are applied to the curriculum,
        and the tasks that step's resets took are counted and replaced, during the next step
        (while the workers step) or at the next ``reset``, ``stats()``, checkpoint or
        ``close``. Read ``curriculum.stats()`` or ``curriculum.state_dict()`` directly only
        after this call (``save_curriculum_state(..., env=envs)`` makes it). The result is the
        same whenever it runs, so seeded runs repeat exactly. A no-op without a channel.
        """
        if self._pending is not None or self._pending_refill:
            self._apply_pending()

    def _apply_pending(self) -> None:
        episodes, self._pending = self._pending, None  # a batch that fails is dropped whole
        refill, self._pending_refill = self._pending_refill, False
        try:
            if episodes is not None:
                try:
                    self.curriculum.record(*episodes)
                except Exception as exc:
                    envs = self._pending_envs
                    where = "" if envs is None else f" of sub-envs {envs.tolist()}"
                    exc.add_note(
                        "applied by vector.SampleCurriculumTask after the step that ended "
                        f"episodes{where} (task ids {np.asarray(episodes[0]).tolist()})"
                    )
                    raise
        finally:
            if refill:  # the slots are refilled all the same: no sub-env waits in vain
                assert self._channel is not None
                self._channel.refill(self.curriculum, busy=self._busy)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs (or those in ``options["reset_mask"]``); each draws its task."""
        stale = None  # a checkpoint's stale marks (resume_channel), for the refill due next
        due = False  # whether that refill is the one after the step that ended episodes
        mask = None if options is None else options.get("reset_mask")  # the env pops it
        expected = np.ones(self.num_envs, dtype=bool) if mask is None else np.asarray(mask, bool)
        chan = self._channel
        if chan is not None:
            self.flush_curriculum()  # the last step's work first, as the next step would do it
            resume, self._resume = self._resume, None
            if resume is not None:  # a checkpoint's waiting tasks and generator
                waiting, spares, slots, stale, refill_due = resume
                try:  # slots the pool has (resume_channel cannot know the pool loaded after it)
                    check_slots_fit(slots, self.curriculum)
                except ConfigError:
                    self._resume = resume  # nothing changed: the restore still waits
                    raise
                chan.restore_waiting(self.curriculum, waiting, spares, slots)
                if refill_due is None:  # a file from before it: as such files were resumed
                    due = self._mode != AutoresetMode.DISABLED or min(waiting, default=0) < 0
                else:
                    due = refill_due
                # its stale marks apply at the refill the uninterrupted run makes next; saved
                # after a step that ended episodes (due): DISABLED, the masked reset's first
                # (this one); NEXT_STEP, the one after the reset step, which this reset stands
                # for; SAME_STEP, the one after the next step. Else (saved right after a reset)
                # the one after the next step that ends episodes, as below
                if stale is not None and due and self._mode == AutoresetMode.DISABLED:
                    chan.mark_stale(stale)
                    stale = None
                # a slot left empty (-1 saved, or a task gone from the pool) gets a draw now
                chan.refill(self.curriculum)
            else:
                if seed is not None and self._reseed:
                    self.curriculum.reseed(seed)
                    chan.drop_spares(expected)  # their retries too come from the new stream
                # the resetting envs get tasks drawn now (after any reseed), not earlier ones
                chan.refill(self.curriculum, revoke=np.flatnonzero(expected))
        obs, infos = self.env.reset(seed=seed, options=options)
        if chan is not None:
            if stale is not None and due and self._mode == AutoresetMode.NEXT_STEP:
                chan.mark_stale(stale)
                stale = None
            chan.refill(self.curriculum)
        self._record(infos, self._started(infos, expected))
        if self._in_main:
            self._sums.start(expected)
        self._prev_dones = self._prev_dones & ~expected
        self._prev_any = bool(np.count_nonzero(self._prev_dones))
        if stale is not None and any(stale):  # SAME_STEP; saved right after a reset
            assert chan is not None
            chan.mark_stale(stale)
            if due:  # SAME_STEP, as after the done step saved: the next step refills
                self._prev_any = True
        self.task_ids = self._current.copy()
        self._dirty = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the sub-envs and track which task each transition belongs to."""
        failure: Exception | None = None
        if self._pending is None and not self._pending_refill:
            out = self.env.step(actions)
        elif self._async is not None and self._async is self.env:
            env = self._async  # the last step's curriculum work runs while the workers step
            env.step_async(actions)
            try:
                self._apply_pending()
            except Exception as exc:  # raised once this step is read and tracked
                failure = exc
            finally:
                out = env.step_wait()
        else:
            self._apply_pending()
            out = self.env.step(actions)
        # Most vector steps end and start no episode (and the one before ended none): then
        # only the sums move. This path runs on most steps in this process, so it makes no
        # Python call of its own: an all-False bool array is all zero bytes, a test several
        # times cheaper than ndarray.any() at this size (any other dtype has other lengths,
        # and what is not an array raises AttributeError: both go the general way).
        infos = out[4]
        if not (self._prev_any or self._dirty) and "_task_id" not in infos:
            zero = self._zero_bytes
            try:
                quiet = out[2].tobytes() == zero and out[3].tobytes() == zero
            except AttributeError:
                quiet = False
            if quiet:
                if self._in_main:
                    sums, rewards = self._sums, out[1]
                    # EpisodeSums.add_rewards' common case, inline: every sub-env inside a
                    # summed episode and float64 rewards (the same addition, bit for bit)
                    if sums.all_live and type(rewards) is np.ndarray and rewards.dtype == _F64:
                        sums.returns += rewards
                        if "cost" in infos:
                            self._add_cost(infos, sums.live)
                    else:
                        self._add_step(rewards, infos)
                self._prev_dones = self._no_dones
                if failure is not None:
                    raise failure
                return out
        self._track(*out)
        if failure is not None:
            raise failure
        return out

    def _track(
        self, obs: Any, rewards: Any, terminations: Any, truncations: Any, infos: dict[str, Any]
    ) -> None:
        """Account the step's episodes and track each sub-env's task."""
        dones = np.logical_or(terminations, truncations)
        if True in dones:
            any_done = True
        else:
            dones, any_done = self._no_dones, False
        if not (any_done or self._prev_any or self._dirty) and "_task_id" not in infos:
            if self._in_main:
                self._add_step(rewards, infos)
            self._prev_dones = dones
            return
        if self._in_main:  # before _record: _current still holds the ended episodes' tasks
            self._account(rewards, dones, any_done, infos)
        if self._mode == AutoresetMode.NEXT_STEP:
            if self._prev_any or "_task_id" in infos:
                self._record(infos, self._started(infos, self._prev_dones))
            if self._dirty:  # a reset step belongs to the new task
                self.task_ids, self._dirty = self._current.copy(), False
        elif self._mode == AutoresetMode.SAME_STEP:
            if self._dirty:  # the final step belongs to the old task: copy before recording
                self.task_ids, self._dirty = self._current.copy(), False
            if any_done or "_task_id" in infos:
                self._record(infos, self._started(infos, dones))
        chan = self._channel
        if chan is not None and (any_done or self._prev_any):
            # episodes that ended this step left their results; resets took their tasks
            if not self._in_main:
                self._pending, self._pending_envs = chan.take_results(), None
            if self._mode == AutoresetMode.SAME_STEP:
                # a sub-env that reset in this step may end its next episode in the next one:
                # its slot cannot wait for that step
                chan.refill(self.curriculum)
            else:  # NEXT_STEP: the sub-envs done now take their waiting tasks in the next step
                # (they are busy then; DISABLED: none takes a task during a step)
                self._pending_refill = True
                self._busy = dones if any_done and self._mode == AutoresetMode.NEXT_STEP else None
        self._prev_dones, self._prev_any = dones, any_done

    def close(self, **kwargs: Any) -> None:
        """Apply the last step's curriculum work, close the vector env, then unlink the channel."""
        try:
            try:
                self.flush_curriculum()
            finally:
                super().close(**kwargs)
        finally:
            chan = self._channel
            if chan is not None and not chan.closed:
                try:
                    chan.collect(self.curriculum)
                finally:
                    chan.close()


def _rows(rows: list[list[int]] | None) -> list[list[int]] | None:
    """A copy of per-sub-env rows (None stays None)."""
    return None if rows is None else [list(r) for r in rows]


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    CurriculumTask = SampleCurriculumTask
else:
    __getattr__ = alias_getattr(__name__, "CurriculumTask")
