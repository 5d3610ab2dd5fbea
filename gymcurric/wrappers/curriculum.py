"""Curriculum task selection for a single env: :class:`SampleCurriculumTask`.

The wrapper picks each episode's task from a :class:`~gymcurric.tasks.Curriculum` *inside*
``reset()`` (SB3 and Gymnasium vector envs auto-reset without options), hands it to the env as
``reset(options={"task": task})`` (or builds an env for it with a ``factory``), and reports the
episode's return, success and cost back when the episode ends. It reaches the curriculum only
through a transport (:mod:`gymcurric.tasks.transport`): straight calls to a curriculum in this
process, a shared-memory curriculum from a worker of a ``SubprocVecEnv`` / ``AsyncVectorEnv``
(no inter-process round trip on reset), a vector env's task channel, or a Ray client.

Checkpoints of the curriculum (plus the task each env is running) are written and read by
:func:`gymcurric.wrappers.save_curriculum_state` / :func:`gymcurric.wrappers.load_curriculum_state`.
"""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.core import ActType, ObsType

from gymcurric._checks import check_int, check_task_id
from gymcurric._deprecated import alias_getattr
from gymcurric.errors import ConfigError, GymcurricError, InfoKeyConflictError, TaskError
from gymcurric.tasks.spaces import copy_task
from gymcurric.tasks.transport import TaskTransport, transport_for
from gymcurric.wrappers._success import success_of
from gymcurric.wrappers.episode_sums import EpisodeSums

__all__ = ["SampleCurriculumTask", "EnvFactory", "SuccessFn", "task_key"]

#: ``success_fn(info) -> bool | float | None``: success of an episode from its last step's info.
SuccessFn = Callable[[dict[str, Any]], Any]
#: ``factory(task) -> env``: builds an env running ``task`` (for envs that take no task option).
EnvFactory = Callable[[dict[str, Any]], gym.Env]


def task_key(task: Any) -> str:
    """A stable, process-independent key of a JSON-safe task (sorted-key JSON).

    Examples:
        >>> task_key({"b": 1, "a": [2.5, "x"]})
        '{"a":[2.5,"x"],"b":1}'
    """
    try:
        return json.dumps(task, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            "task", task, f"tasks must be JSON-safe dicts ({exc})", source="SampleCurriculumTask"
        ) from exc


class SampleCurriculumTask(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Run every episode on a task picked by a curriculum, and report how it went.

    On ``reset()`` without a task the wrapper draws ``(task_id, task)`` from ``curriculum`` and
    resets the env with ``options={"task": task}`` (other options are passed through). When the
    episode ends (terminated or truncated) it calls
    ``curriculum.update(task_id, return_, success, cost)`` with the sum of the rewards, the
    success of the last step (``success_fn(info)`` if given, else ``info["is_success"]``, else
    ``info["success"]``, a key whose value is ``None`` counting as absent, else ``None``: the
    curriculum then scores the return) and the sum of ``info["cost"]`` (``None`` when the env
    reports no cost). Observations, rewards and step infos are passed through unchanged. An
    episode cut short by a reset is not reported.

    * **Explicit tasks**: ``reset(options={"task": {...}})`` runs that task unchanged; the
      episode gets ``task_id == -1`` and is *not* reported (the curriculum did not choose it:
      evaluation runs must not skew its statistics).
    * **Rejected tasks**: if the env (or the factory) raises ``ValueError`` (which includes
      :class:`~gymcurric.errors.TaskError`) for a curriculum task, the task is reported with
      ``curriculum.mark_invalid(task_id, reason)`` and another one is drawn, up to
      ``max_retries`` times; then a :class:`~gymcurric.errors.TaskError` names the last task
      and the env's error. Rejections are counted in :attr:`rejections`.
    * **Seeding**: ``reset(seed=s)`` also calls ``curriculum.reseed(s)`` (when the curriculum
      has it and ``reseed_curriculum`` is true), so a seeded reset fixes this process's task
      stream. A reset that resumes a checkpoint (:attr:`resuming`, :attr:`pending_task_id`)
      keeps the restored generator instead.
    * **Factory**: for envs that cannot take a task through ``options``, ``factory(task)``
      builds an env per task; the last ``cache_size`` envs are kept, keyed by
      :func:`task_key` (never Python's salted ``hash()``), and evicted envs are closed. Every
      env must have the spaces of the first one. ``env`` may then be ``None`` (the first env
      is built from the curriculum's first live task); an ``env`` passed with a factory only
      provides the spaces and is closed at the first reset. A newly built env's first reset
      gets a seed drawn from the last seed given to ``reset``, so seeded runs are reproducible.
    * **Non-finite returns**: the curriculum's :class:`~gymcurric.errors.NonFiniteValueError`
      (naming the task id) propagates from the final ``step``; nothing is recorded and the
      next ``reset`` starts cleanly.

    Info keys written (at reset): ``task`` (the task dict) and ``task_id`` (int, ``-1`` for an
    explicit task). An env that already sets either raises
    :class:`~gymcurric.errors.InfoKeyConflictError`.

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> space = FixedTaskSpace([{"num_hazards": n, "size": 5} for n in (0, 2, 4)])
        >>> cur = Curriculum(space, seed=0)
        >>> env = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), cur)
        >>> obs, info = env.reset(seed=0)
        >>> info["task"] == space.task(info["task_id"])
        True
        >>> done = False
        >>> while not done:
        ...     _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        ...     done = terminated or truncated
        >>> cur.stats()["curriculum/updates"]
        1.0
    """

    #: True on this wrapper only. A sub-env that has it has everything a curriculum checkpoint
    #: reads, sets and calls (``task_id``, ``pending_task_id``, ``resuming``,
    #: ``flush_curriculum``, and :meth:`curriculum_task_ids`, :meth:`resume_curriculum_task`,
    #: :meth:`curriculum_task_flush`, :meth:`curriculum_task_awaiting_reset`, through which it
    #: reads, sets and calls them), so one ``has_wrapper_attr`` question to a worker checks
    #: them all. Asked by name:
    #: ``gymcurric.wrappers._sub_envs.CURRICULUM_TASK_WRAPPER_MARK``.
    curriculum_task_wrapper: ClassVar[bool] = True

    def __init__(
        self,
        env: gym.Env[ObsType, ActType] | None,
        curriculum: Any,
        *,
        success_fn: SuccessFn | None = None,
        factory: EnvFactory | None = None,
        cache_size: int = 4,
        max_retries: int = 10,
        reseed_curriculum: bool = True,
        channel: Any = None,
    ) -> None:
        """Wrap ``env``.

        Args:
            env: the env; it must accept ``reset(options={"task": task})``. With a ``factory``
                it may be ``None`` (see the class docstring).
            curriculum: a :class:`~gymcurric.tasks.Curriculum` (or any object with its
                ``sample_task``, ``task``, ``update`` and ``mark_invalid`` methods).
            success_fn: ``success_fn(info) -> bool | float | None`` on the last step's info.
            factory: ``factory(task) -> env`` for envs that take no task option.
            cache_size: how many factory-built envs are kept (>= 1).
            max_retries: rejected tasks tolerated in a row per reset before raising (>= 0).
            reseed_curriculum: whether ``reset(seed=s)`` reseeds the curriculum's generator.
            channel: a :class:`~gymcurric.tasks.channel.TaskChannel` through which this sub-env
                of an async vector env takes its tasks and leaves its results, once
                :attr:`channel_index` is set (``make_curriculum_vec`` does both). ``None``:
                the curriculum is used directly.
        """
        transport = transport_for(curriculum)  # refuses an object without a curriculum's methods
        for name, fn in (("success_fn", success_fn), ("factory", factory)):
            if fn is not None and not callable(fn):
                raise ConfigError(
                    name, fn, "must be callable or None", source="SampleCurriculumTask"
                )
        check_int("cache_size", cache_size, source="SampleCurriculumTask")
        check_int("max_retries", max_retries, minimum=0, source="SampleCurriculumTask")
        if env is None and factory is None:
            raise ConfigError(
                "env",
                None,
                "pass an env, or env=None with a factory",
                source="SampleCurriculumTask",
            )
        gym.utils.RecordConstructorArgs.__init__(
            self,
            curriculum=curriculum,
            success_fn=success_fn,
            factory=factory,
            cache_size=cache_size,
            max_retries=max_retries,
            reseed_curriculum=reseed_curriculum,
            channel=channel,
            _disable_deepcopy=True,  # the curriculum must stay the same (shared) object
        )
        self._cache: OrderedDict[str, gym.Env[Any, Any]] = OrderedDict()
        self._template: gym.Env[Any, Any] | None = None
        if env is None:
            assert factory is not None
            first = transport.any_task()
            env = factory(first)
            self._cache[task_key(first)] = env
        elif factory is not None:
            self._template = env
        gym.Wrapper.__init__(self, env)
        if factory is not None:  # fixed: every task's env must present the same spaces
            self._observation_space = env.observation_space
            self._action_space = env.action_space
        self.curriculum = curriculum
        self._success_fn = success_fn
        self._factory = factory
        self._cache_size = cache_size
        self._max_retries = max_retries
        self._reseed = reseed_curriculum
        self._seeder: np.random.Generator | None = None  # first seeds of new factory envs
        self.task_id = -1
        self._task: dict[str, Any] | None = None
        self._pending: int | None = None  # resuming: a task id, or -1 to take the next task
        #: how this env reaches the curriculum: straight, or through the channel once bound
        self._direct: TaskTransport = transport
        self._transport: TaskTransport = transport
        self._sums = EpisodeSums(1)
        self._live = False  # an episode is running whose end is reported
        self._ended = False  # a reported episode ended and no reset since (awaiting_reset)
        #: How many tasks the env refused so far (each was reported with ``mark_invalid``).
        self.rejections = 0
        self._channel = channel
        self._channel_index = -1
        self._refusal: ValueError | None = None  # the fast reset's refusal
        self._refused_task: dict[str, Any] = {}  # and the task it refused

    # ---------------------------------------------------------------- public state
    @property
    def task(self) -> dict[str, Any] | None:
        """The current episode's task (a copy), ``None`` before the first reset."""
        return copy_task(self._task)

    @property
    def pending_task_id(self) -> int | None:
        """Task id the next reset without an explicit task runs instead of drawing one.

        Set when resuming from a checkpoint (:func:`load_curriculum_state` does it); consumed
        by that reset, which also skips reseeding the restored curriculum. ``None`` or ``-1``
        clears it (and :attr:`resuming`). A task id is an int (a numpy integer or 0-d int
        array too; not a bool, a float or a longer array); anything else is a ConfigError.
        """
        pending = self._pending
        return None if pending is None or pending < 0 else pending

    @pending_task_id.setter
    def pending_task_id(self, task_id: int | None) -> None:
        src = "SampleCurriculumTask"
        tid = check_task_id("pending_task_id", task_id, source=src, allow_none=True)
        self._pending = None if tid is None or tid < 0 else tid

    @property
    def resuming(self) -> bool:
        """Whether the next reset without an explicit task resumes a checkpoint.

        That reset keeps the restored curriculum's generator (its ``seed`` does not reseed
        it) and runs :attr:`pending_task_id`, or, if none is set, the task it takes as any
        reset does: the next draw, or for a vector env with a channel, the task restored in
        its slot (a sub-env whose episode had ended at the checkpoint). Set with
        :attr:`pending_task_id` and by :func:`load_curriculum_state` for every env; that reset
        clears it.
        """
        return self._pending is not None

    @resuming.setter
    def resuming(self, value: bool) -> None:
        if not value:
            self._pending = None
        elif self._pending is None:
            self._pending = -1  # resume without a task: take the next one, keep the generator

    # A vector env reads (get_attr) and sets (set_attr, SB3's env_method("set_wrapper_attr"))
    # a sub-env's attribute on the outermost wrapper that has the name: a user's wrapper above
    # this one with a ``task_id`` (or ``resuming``) of its own would be read or set instead.
    # gymcurric reaches this wrapper's state through these names, which no other wrapper has.
    def curriculum_task_ids(self) -> tuple[int, int | None]:
        """``(task_id, resumed)``: :attr:`task_id`, and the task the next reset resumes.

        ``resumed`` is :attr:`pending_task_id` while :attr:`resuming` (``-1``: the task the
        reset takes, as any reset does), else None. What curriculum checkpoints and SB3's
        ``RegretScoreCallback`` read, in one call, under a name no other wrapper has.
        """
        return self.task_id, self._pending

    def resume_curriculum_task(self, task_id: int | None) -> None:
        """Make the next reset resume ``task_id`` (``-1``: the task it takes, as any reset does).

        Sets :attr:`pending_task_id` to ``task_id`` and :attr:`resuming` to True (``None``:
        False, resuming nothing), under a name no other wrapper has
        (:func:`~gymcurric.wrappers.resume_env_tasks` calls it).

        Raises:
            ConfigError: ``task_id`` is not an int from -1 to 2**63 - 1 (a numpy integer or
                0-d int array too; not a bool) or None; nothing is changed. The same rule as
                :attr:`pending_task_id` and :func:`~gymcurric.wrappers.resume_env_tasks`.
        """
        src = "SampleCurriculumTask.resume_curriculum_task"
        # -1 is kept as is: resuming, without a task (see resuming)
        self._pending = check_task_id("task_id", task_id, source=src, allow_none=True)

    def curriculum_task_flush(self) -> None:
        """:meth:`flush_curriculum`, under a name no other wrapper has (checkpoints call it)."""
        self.flush_curriculum()

    def curriculum_task_awaiting_reset(self) -> list[bool]:
        """:meth:`awaiting_reset`, under a name no other wrapper has (checkpoints call it)."""
        return self.awaiting_reset()

    @property
    def channel_index(self) -> int:
        """This sub-env's slot in ``channel`` (-1: not bound; the curriculum is used directly).

        Binding makes the channel this env's transport
        (:class:`~gymcurric.tasks.channel.ChannelTransport`). When the channel has
        ``episodes_in_main``, the vector wrapper in the main process accounts the episodes and
        this wrapper reports nothing: its ``step`` is then the env's own (the current
        ``env``'s; not for a subclass that overrides ``step``, which runs as usual).
        """
        return self._channel_index

    @channel_index.setter
    def channel_index(self, index: int) -> None:
        chan = self._channel
        if index >= 0 and chan is None:
            raise ConfigError(
                "channel_index", index, "this wrapper has no channel", source="SampleCurriculumTask"
            )
        if (
            index >= 0
            and chan.episodes_in_main
            and (self._success_fn is not None or self._factory is not None)
        ):
            raise ConfigError(
                "channel",
                chan,
                "a channel with episodes_in_main=True cannot serve a wrapper with a "
                "success_fn or a factory (the main process could not see their episodes)",
                source="SampleCurriculumTask",
            )
        self._channel_index = int(index)
        self._transport = chan.transport(int(index), self._direct) if index >= 0 else self._direct
        # A transport that reports no episode (the vector wrapper accounts them) leaves every
        # step to the env: this wrapper's step is then the env's own (an instance attribute,
        # so that a worker's step makes no call into this wrapper), unless a subclass has a
        # step of its own, which must run. The env setter keeps it the current env's.
        if self._transport.reports_episodes or type(self).step is not SampleCurriculumTask.step:
            self.__dict__.pop("step", None)
        else:
            self.__dict__["step"] = self.env.step

    def _set_env(self, env: gym.Env[Any, Any]) -> None:
        self.__dict__["_wrapped_env"] = env
        if "step" in self.__dict__:  # the step shortcut (channel_index) steps the new env
            self.__dict__["step"] = env.step

    #: The wrapped env (a property: replacing it also replaces the step shortcut). Its getter
    #: is a C function (``attrgetter``): reading ``self.env`` makes no Python call.
    env = property(operator.attrgetter("_wrapped_env"), _set_env)

    # ---------------------------------------------------------------- reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode on the next curriculum task (or on ``options["task"]``)."""
        if options is None and seed is None and self._pending is None and self._factory is None:
            # A vector env's autoreset, kept short (inline, not a method call): it runs once per
            # episode in every worker. If the env refuses the task, the general path below goes
            # on, with one retry fewer.
            tid, task = self._transport.take_task()
            # no episode runs until one starts (_begin): a checkpoint after a failed reset
            # saves no task, and the resumed reset draws, as the next reset here does
            self._live, self._ended = False, True
            try:
                obs, info = self.env.reset(options={"task": copy_task(task)})
            except ValueError as exc:
                if isinstance(exc, _SpaceMismatch):
                    raise
                self._refused(tid, exc)
                self._refusal, self._refused_task = exc, task
            else:
                self._begin(info, tid, task)
                return obs, info
        opts = dict(options) if options else {}
        explicit = opts.pop("task", None)
        self._live, self._ended = False, True  # until an episode starts (_begin)
        resumed = None if explicit is not None else self._pending
        if resumed is not None:
            self._pending = None
        elif seed is not None and self._reseed:
            self._transport.reseed(seed)
        if seed is not None and self._factory is not None:
            self._seeder = np.random.default_rng(seed)
        if explicit is not None:
            task, tid = explicit, -1
            obs, info = self._reset_inner(task, seed, opts)
        else:
            task_id = resumed if resumed is not None and resumed >= 0 else None
            obs, info, tid, task = self._reset_curriculum(seed, opts, task_id)
        self._begin(info, tid, task)
        return obs, info

    def _begin(self, info: dict[str, Any], tid: int, task: dict[str, Any]) -> None:
        """The episode of ``task`` started: record it and write the info keys."""
        if "task" in info or "task_id" in info:
            for key in ("task", "task_id"):
                if key in info:
                    raise InfoKeyConflictError(
                        f"{self.env} already sets info[{key!r}] at reset ({info[key]!r}); "
                        f"SampleCurriculumTask will not overwrite info key {key!r}"
                    )
        self.task_id, self._task = tid, task
        self._ended = False
        info["task"] = copy_task(task)
        info["task_id"] = tid
        if tid >= 0 and self._transport.reports_episodes:
            self._sums.start_one()
            self._live = True

    def _refused(self, tid: int, exc: ValueError) -> None:
        self.rejections += 1
        rearm_passive_checker(self.env)
        self._transport.refuse_task(tid, f"{type(exc).__name__}: {exc}")

    def _reset_curriculum(
        self, seed: int | None, opts: dict[str, Any], resumed: int | None
    ) -> tuple[ObsType, dict[str, Any], int, dict[str, Any]]:
        transport = self._transport
        last: Exception | None = self._refusal  # the fast path's refusal, if any
        tries = self._max_retries + (1 if last is None else 0)
        task: dict[str, Any] = self._refused_task
        self._refusal, self._refused_task = None, {}
        for _ in range(tries):
            if resumed is not None:
                tid, task = resumed, transport.task(resumed)
                resumed = None
            else:
                tid, task = transport.take_task()
            try:
                obs, info = self._reset_inner(task, seed, opts)
            except ValueError as exc:
                if isinstance(exc, _SpaceMismatch):
                    raise
                last = exc
                self._refused(tid, exc)
                continue
            return obs, info, tid, task
        raise TaskError(
            "task",
            task,
            f"the env refused {self._max_retries + 1} curriculum tasks in a row "
            f"(max_retries={self._max_retries}); last refusal: {type(last).__name__}: {last}",
            source="SampleCurriculumTask.reset",
        ) from last

    def _reset_inner(
        self, task: dict[str, Any], seed: int | None, opts: dict[str, Any]
    ) -> tuple[ObsType, dict[str, Any]]:
        if self._factory is None:
            return self.env.reset(seed=seed, options={**opts, "task": copy_task(task)})
        env, new = self._env_for(task)
        if new and seed is None and self._seeder is not None:
            seed = int(self._seeder.integers(2**31))
        self.env = env
        return env.reset(seed=seed, options=opts or None)

    def _env_for(self, task: dict[str, Any]) -> tuple[gym.Env[Any, Any], bool]:
        key = task_key(task)
        env = self._cache.get(key)
        if env is not None:
            self._cache.move_to_end(key)
            return env, False
        assert self._factory is not None
        env = self._factory(copy_task(task))
        for name in ("observation_space", "action_space"):
            if getattr(env, name) != getattr(self, name):
                env.close()
                raise _SpaceMismatch(
                    name,
                    getattr(env, name),
                    f"factory env for task {task!r} differs from {getattr(self, name)}",
                    source="SampleCurriculumTask",
                )
        if self._template is not None:
            self._template.close()
            self._template = None
        self._cache[key] = env
        while len(self._cache) > self._cache_size:
            _, old = self._cache.popitem(last=False)
            old.close()
        return env, True

    # ---------------------------------------------------------------- step
    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at episode end report the episode to the curriculum."""
        result = self.env.step(action)
        if self._live:
            _, reward, terminated, truncated, info = result
            # the episode's sums (EpisodeSums' single-env fields), added here rather than by a
            # method: every step of a summed episode then makes no Python call but this one
            sums = self._sums
            sums.one_return += float(reward)
            cost = info.get("cost")
            if cost is not None:
                sums.one_cost += float(cost)
                sums.one_has_cost = True
            if terminated or truncated:
                self._report(info)
        return result

    def _report(self, info: dict[str, Any]) -> None:
        self._live = False  # reported at most once, even if the report raises
        self._ended = True
        fn = self._success_fn
        success = fn(info) if fn is not None else success_of(info)
        return_, cost = self._sums.finish_one()
        try:
            self._transport.report_episode(self.task_id, return_, success, cost)
        except GymcurricError as exc:
            exc.add_note(
                f"reported by SampleCurriculumTask at the end of an episode of task_id="
                f"{self.task_id}, task {self._task!r}"
            )
            raise

    def awaiting_reset(self) -> list[bool]:
        """``[True]`` from the step that ended this env's curriculum episode until its reset.

        (Terminated or truncated; ``[False]`` otherwise, and for an explicit task's episode,
        which has no task id to save.) Also ``[True]`` after a ``reset()`` that failed (an
        error, or a refusal with no retry left): no episode runs, and the next reset draws.
        ``save_curriculum_state(..., env=env)`` then saves no task (``-1``), so that the
        resumed run's first reset draws the next task, as the uninterrupted run's reset does,
        instead of replaying the one that ended. One entry,
        like the vector wrapper's ``awaiting_reset()``. With a channel that has
        ``episodes_in_main``, the vector wrapper tracks the sub-envs' episodes instead.
        """
        return [self._ended]

    def flush_curriculum(self) -> None:
        """Deliver the episodes this process buffered for a shared curriculum now.

        For a checkpoint about to read the state (:func:`save_curriculum_state` calls it in
        every sub-env, under a name no other wrapper has: :meth:`curriculum_task_flush`). A
        no-op for a process-local curriculum.
        """
        self._transport.flush()

    def close(self) -> None:
        """Close the env, every cached factory env, and this env's end of the transport.

        The transport's end flushes what it buffered; in a worker of a ``SubprocVecEnv`` /
        ``AsyncVectorEnv`` it also drops the worker's copy of a shared curriculum (adding its
        pending sample counts) and its channel mapping. The curriculum you created is never
        closed by the wrapper.
        """
        envs = {
            id(e): e for e in (*self._cache.values(), self._template, self.env) if e is not None
        }
        self._cache.clear()
        self._template = None
        for env in envs.values():
            env.close()
        self._transport.release()  # a channel's end releases the direct one behind it too
        chan = self._channel
        if chan is not None and not chan.is_creator and not chan.closed:
            chan.close()  # a worker's mapping of a channel it was never bound to


class _SpaceMismatch(ConfigError):
    """A factory env with other spaces: a configuration error, never a task rejection."""


def rearm_passive_checker(env: Any) -> None:
    """Let Gymnasium's ``PassiveEnvChecker`` check the next reset after one that raised.

    The checker marks its first reset as checked *before* running it; when that reset raises
    (an env refusing a task) and a retry succeeds, the checker holds no reset data and its
    first ``step`` fails with ``TypeError: cannot unpack non-iterable NoneType object``
    (Gymnasium 1.4's data-reuse check). Every env made by ``gym.make`` has that checker, so
    after a refused reset the checkers that saw no completed reset are re-armed.
    """
    from gymnasium.wrappers import PassiveEnvChecker

    e = env
    while e is not None:
        if (
            isinstance(e, PassiveEnvChecker)
            and e.checked_reset
            and not e.checked_step
            and getattr(e, "_previous_data", True) is None
        ):
            e.checked_reset = False
        e = getattr(e, "env", None)


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    CurriculumTask = SampleCurriculumTask
else:
    __getattr__ = alias_getattr(__name__, "CurriculumTask")
