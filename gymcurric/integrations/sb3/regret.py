"""Regret scores from Stable-Baselines3 rollouts: PLR and robust PLR for on-policy agents.

:class:`RegretScoreCallback` is the SB3 end of the curriculum's score hook
(:meth:`Curriculum.update_scores <gymcurric.tasks.Curriculum.update_scores>`). At the end of
each rollout, after SB3 computed the returns and GAE advantages (``OnPolicyAlgorithm``
calls ``compute_returns_and_advantage`` and then the callbacks' ``on_rollout_end``), it splits
every env's steps into episodes and scores each with the mean of a function of its advantages:

* ``"value_l1"``: the mean of ``|A_t|``, PLR's L1 value loss (Jiang et al. 2021; the reference
  code's ``value_l1`` strategy);
* ``"positive_value_loss"``: the mean of ``max(A_t, 0)``, robust PLR's score (Jiang et al.
  2021b).

An episode cut by the rollout's end is scored on the steps it has so far, and its continuation
in the next rollout is scored on its own, as the reference code does (its partial scores are
folded in after each update). Each env's task id comes from its
:class:`~gymcurric.wrappers.SampleCurriculumTask` (its ``curriculum_task_ids()``, a name no
other wrapper has, so a wrapper of yours with a ``task_id`` of its own may sit above it), read
once at the start of training and then only for the envs whose episode just ended, so it works
through ``DummyVecEnv``, ``SubprocVecEnv`` (one round trip per step with an episode end) and
``VecNormalize`` alike. Episodes of explicit tasks (``task_id == -1``) are not scored.

**Robust PLR's "no gradient on new tasks".** With ``train_on_unseen=False`` the steps of
episodes whose task had no score when it was drawn are left out of every minibatch of the
following ``train()``: no policy, value or entropy gradient comes from them, and they do not
enter the advantage normalisation. This needs a buffer that can leave steps out:
``PPO(..., rollout_buffer_class=RegretRolloutBuffer)`` (``RegretDictRolloutBuffer`` for dict
observations; A2C takes the same argument). What it cannot do: SB3 calls ``train()`` after every
rollout and PPO's ``train()`` needs at least one minibatch, so a rollout in which *every* step
is on a new task (the first one, and later ones with probability about
``(1 - replay_prob)^episodes``) cannot be skipped as robust PLR skips it; it is trained on whole
and counted in ``curriculum/unmasked_rollouts``. Zeroing those steps' advantages instead would
not do: PPO's per-minibatch advantage normalisation turns zeros into non-zeros, and the value
and entropy terms still act on them.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, RolloutBufferSamples

from gymcurric.errors import ConfigError, SubEnvCallError
from gymcurric.tasks.regret import RobustPLRScorer
from gymcurric.wrappers._sub_envs import (
    CURRICULUM_TASK_IDS,
    CURRICULUM_TASK_WRAPPER_MARK,
    call_sub_envs,
    sub_envs_lacking,
)

__all__ = [
    "SCORES",
    "RegretDictRolloutBuffer",
    "RegretRolloutBuffer",
    "RegretScoreCallback",
    "Segments",
    "segment_scores",
]

#: The per-episode scores :class:`RegretScoreCallback` computes.
SCORES = ("value_l1", "positive_value_loss")
_SOURCE = "RegretScoreCallback"


class Segments(NamedTuple):
    """A rollout's steps split into episode segments (numbered env by env, then in time)."""

    #: ``(n_steps, n_envs)``: the segment of each step
    segment_of: np.ndarray
    #: the env of each segment
    env: np.ndarray
    #: the task id of each segment (its first step's)
    task: np.ndarray
    #: the mean of the per-step values over each segment
    mean: np.ndarray
    #: the number of steps of each segment
    steps: np.ndarray
    #: whether the segment begins an episode (False: it continues one of the last rollout)
    new: np.ndarray


def segment_scores(values: np.ndarray, episode_starts: np.ndarray, tasks: np.ndarray) -> Segments:
    """Split a rollout into episode segments and average ``values`` over each (vectorised).

    Args:
        values: ``(n_steps, n_envs)`` per-step values (e.g. ``|A_t|``).
        episode_starts: ``(n_steps, n_envs)``, 1 where a step's observation begins an episode
            (SB3's ``rollout_buffer.episode_starts``).
        tasks: ``(n_steps, n_envs)`` task id of each step.

    Examples:
        >>> seg = segment_scores(np.array([[1.0], [3.0], [5.0]]), np.array([[0], [0], [1]]),
        ...                      np.array([[7], [7], [2]]))
        >>> seg.task.tolist(), seg.mean.tolist(), seg.new.tolist()
        ([7, 2], [2.0, 5.0], [False, True])
    """
    n_steps, n_envs = values.shape
    began = episode_starts.astype(bool).T  # (n_envs, n_steps): env-major, as SB3 flattens
    starts = began.copy()
    starts[:, 0] = True  # every env's first step begins a segment
    flat = starts.ravel()
    seg = np.cumsum(flat) - 1
    first = np.flatnonzero(flat)
    steps = np.bincount(seg, minlength=first.size)
    sums = np.bincount(seg, weights=values.T.ravel().astype(np.float64), minlength=first.size)
    return Segments(
        segment_of=seg.reshape(n_envs, n_steps).T,
        env=first // n_steps,
        task=tasks.T.ravel()[first].astype(np.int64),
        mean=sums / steps,
        steps=steps,
        new=began.ravel()[first],
    )


class RegretScoreCallback(BaseCallback):
    """Score each episode of a rollout by its value loss and report it to the curriculum.

    At every rollout end, each episode segment of each env (see the module docstring) is scored
    with ``score`` and the ``(task id, score)`` pairs go to ``curriculum.update_scores`` in one
    call, so a :class:`~gymcurric.tasks.PLRScorer` (or :class:`~gymcurric.tasks.RobustPLRScorer`)
    prioritises the tasks the agent still gets most wrong. The envs must be wrapped in
    :class:`~gymcurric.wrappers.SampleCurriculumTask` with the same curriculum (in this process;
    on the shared-memory backend for ``SubprocVecEnv``, or a Ray client); a sub-env without it
    raises :class:`~gymcurric.errors.ConfigError` when training starts, even one with a
    ``task_id`` of its own (not an id of the curriculum).

    Args:
        curriculum: the curriculum the envs draw from.
        score: ``"value_l1"`` (mean ``|GAE|``, PLR) or ``"positive_value_loss"`` (mean
            ``max(GAE, 0)``, robust PLR). ``None``: the latter for a curriculum whose scorer is a
            :class:`~gymcurric.tasks.RobustPLRScorer`, else the former.
        train_on_unseen: False leaves the steps of episodes on tasks that were unseen when
            drawn out of training (robust PLR; needs ``rollout_buffer_class=
            RegretRolloutBuffer``). ``None``: False for a ``RobustPLRScorer``, else True.
        verbose: SB3's verbosity.

    Logged at each rollout end: ``curriculum/rollout_score_mean`` (mean of the scores reported),
    ``curriculum/rollout_scored`` (how many), and with ``train_on_unseen=False``
    ``curriculum/exploratory_frac`` (share of the rollout's steps left out of training) and
    ``curriculum/unmasked_rollouts`` (see the module docstring).

    Examples:
        >>> from stable_baselines3 import PPO
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace, PLRScorer
        >>> from gymcurric.wrappers import SampleCurriculumTask
        >>> space = FixedTaskSpace([{"num_hazards": n, "size": 5} for n in (0, 2, 4)])
        >>> cur = Curriculum(space, scorer=PLRScorer(), seed=0)
        >>> venv = make_vec_env("gymcurric/HazardGrid-v0", n_envs=2, seed=0,
        ...                     wrapper_class=SampleCurriculumTask,
        ...                     wrapper_kwargs={"curriculum": cur})
        >>> model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0)
        >>> _ = model.learn(128, callback=RegretScoreCallback(cur))
        >>> cur.stats()["curriculum/scores"] > 0
        True
    """

    def __init__(
        self,
        curriculum: Any,
        score: str | None = None,
        train_on_unseen: bool | None = None,
        verbose: int = 0,
    ) -> None:
        """Create the callback; see the class docstring for the arguments."""
        if not (
            callable(getattr(curriculum, "update_scores", None))
            and callable(getattr(curriculum, "scores", None))
        ):
            raise ConfigError(
                "curriculum",
                curriculum,
                "expected a gymcurric Curriculum (or RayCurriculum) with update_scores",
                source=_SOURCE,
            )
        config = getattr(curriculum, "config", None)
        robust = isinstance(getattr(config, "scorer", None), RobustPLRScorer)
        if score is None:
            score = "positive_value_loss" if robust else "value_l1"
        if score not in SCORES:
            raise ConfigError("score", score, f"expected one of {list(SCORES)}", source=_SOURCE)
        if train_on_unseen is None:
            train_on_unseen = not robust
        if not isinstance(train_on_unseen, bool):
            raise ConfigError(
                "train_on_unseen", train_on_unseen, "expected a bool or None", source=_SOURCE
            )
        super().__init__(verbose)
        self.curriculum = curriculum
        self.score = score
        self.train_on_unseen = train_on_unseen
        #: Rollouts trained on whole although every step was on an unseen task.
        self.unmasked_rollouts = 0
        #: ``(task ids, scores)`` reported at the last rollout end.
        self.last_scores: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0))
        self._tasks = np.zeros(0, np.int64)  # each env's current task
        self._step_tasks = np.zeros((0, 0), np.int64)  # the task of each step of the rollout
        self._t = 0
        # per env: whether its current episode began on an unseen task (None: not known)
        self._exploratory: np.ndarray | None = None

    def rollout_buffer(self) -> Any:
        """The model's rollout buffer (an on-policy algorithm's)."""
        model: Any = self.model
        return model.rollout_buffer

    # ---------------------------------------------------------------- task ids
    def _check_tasks(self) -> None:
        """Refuse sub-envs not wrapped in ``SampleCurriculumTask`` before anything reads one.

        The scores go to the curriculum under each sub-env's ``task_id``, so it must be an id
        the curriculum assigned: a ``task_id`` of the env's own (a level index, say) is refused
        too. Asked for the wrapper's mark with each sub-env's ``has_wrapper_attr``
        (:func:`sub_envs_lacking`), as the curriculum checkpoint does: a ``SubprocVecEnv``
        worker exits on the ``AttributeError`` of a ``get_attr``, and the env would be broken
        before the user saw this error.
        """
        env = self.training_env
        lacking = sub_envs_lacking(env, [CURRICULUM_TASK_WRAPPER_MARK])
        bad = [i for i, names in enumerate(lacking or []) if names]
        if not (lacking and bad):
            return
        have_ids = sub_envs_lacking(env, ["task_id"], bad) or []
        own = [i for i, names in zip(bad, have_ids, strict=True) if not names]
        why = (
            f"sub-envs {own} have a 'task_id' of their own, not one the curriculum assigned"
            if own
            else "no 'task_id'"
        )
        raise ConfigError(
            "env",
            env,
            f"its sub-envs {bad} of {len(lacking)} are not wrapped in "
            f"gymcurric.wrappers.SampleCurriculumTask ({why}); wrap each sub-env, e.g. "
            "make_vec_env(..., wrapper_class=SampleCurriculumTask)",
            source=_SOURCE,
        )

    def _read_tasks(self, indices: list[int] | None = None) -> np.ndarray:
        """The task id of each sub-env (of ``indices``, default all), from its wrapper.

        Read with the wrapper's ``curriculum_task_ids()`` (:func:`call_sub_envs`): a name no
        other wrapper has, so a wrapper of the user's above it with a ``task_id`` of its own is
        not read instead (``get_attr("task_id")`` took the outermost one with the name).
        """
        env = self.training_env
        try:
            pairs = call_sub_envs(env, CURRICULUM_TASK_IDS, indices=indices)
        except SubEnvCallError as exc:  # a sub-env that changed since _check_tasks
            raise ConfigError(
                "env",
                env,
                f"its envs must be wrapped in gymcurric.wrappers.SampleCurriculumTask ({exc})",
                source=_SOURCE,
            ) from exc
        if pairs is None:
            raise ConfigError("env", env, "expected an SB3 VecEnv (env_method)", source=_SOURCE)
        return np.asarray([task_id for task_id, _ in pairs], dtype=np.int64)

    def _on_training_start(self) -> None:
        buffer = self.rollout_buffer()
        if not self.train_on_unseen and not isinstance(
            buffer, RegretRolloutBuffer | RegretDictRolloutBuffer
        ):
            raise ConfigError(
                "train_on_unseen",
                False,
                f"the model's rollout buffer is a {type(buffer).__name__}, which cannot leave "
                "steps out of training; build the model with "
                "rollout_buffer_class=RegretRolloutBuffer (RegretDictRolloutBuffer for dict "
                "observations), or pass train_on_unseen=True",
                source=_SOURCE,
            )
        self._check_tasks()
        self._tasks = self._read_tasks()  # learn() reset the envs already, or continues them
        if self._exploratory is not None and self._exploratory.size != self._tasks.size:
            self._exploratory = None  # another env: its episodes' flags are not ours

    def _on_rollout_start(self) -> None:
        buffer = self.rollout_buffer()
        self._step_tasks = np.full((buffer.buffer_size, buffer.n_envs), -1, dtype=np.int64)
        self._t = 0

    def _on_step(self) -> bool:
        # called after env.step: this step acted on the tasks held before the step
        if self._t < len(self._step_tasks):
            self._step_tasks[self._t] = self._tasks
        self._t += 1
        dones = self.locals.get("dones")
        if dones is not None and np.any(dones):
            ended = np.flatnonzero(dones)
            self._tasks[ended] = self._read_tasks(ended.tolist())  # the new episodes' tasks
        return True

    # ---------------------------------------------------------------- scores
    def step_values(self, advantages: np.ndarray) -> np.ndarray:
        """The per-step values whose episode means are the scores (``|A|`` or ``max(A, 0)``)."""
        if self.score == "value_l1":
            return np.abs(advantages)
        return np.maximum(advantages, 0.0)

    def _on_rollout_end(self) -> None:
        buffer = self.rollout_buffer()
        seg = segment_scores(
            self.step_values(buffer.advantages), buffer.episode_starts, self._step_tasks
        )
        ours = seg.task >= 0  # episodes of explicit tasks are not the curriculum's
        tasks, scores = seg.task[ours], seg.mean[ours]
        if not self.train_on_unseen:
            self._mask_unseen(buffer, seg, ours)
        self.curriculum.update_scores(tasks, scores)
        self.last_scores = (tasks, scores)
        self.logger.record("curriculum/rollout_scored", float(tasks.size))
        if tasks.size:
            self.logger.record("curriculum/rollout_score_mean", float(scores.mean()))

    def _mask_unseen(self, buffer: Any, seg: Segments, ours: np.ndarray) -> None:
        """Leave the steps of episodes begun on unseen tasks out of the next ``train()``."""
        # no score has arrived since these episodes began (this callback reports them only
        # now), so a task without a score now had none when it was drawn
        unseen = np.zeros(seg.task.size, dtype=bool)
        unseen[ours] = np.isnan(self.curriculum.scores(seg.task[ours]))
        carried = self._exploratory
        if carried is not None:  # an episode continued from the last rollout keeps its flag
            old = ~seg.new
            unseen[old] = carried[seg.env[old]]
        last = np.r_[seg.env[1:] != seg.env[:-1], True]  # each env's last segment
        self._exploratory = np.zeros(buffer.n_envs, dtype=bool)
        self._exploratory[seg.env[last]] = unseen[last]
        left_out = unseen[seg.segment_of]
        frac = float(left_out.mean())
        if frac == 1.0:  # nothing left to train on: PPO's train() cannot skip an update
            self.unmasked_rollouts += 1
            buffer.train_mask = None
        else:
            buffer.train_mask = ~left_out if frac > 0.0 else None
        self.logger.record("curriculum/exploratory_frac", frac)
        self.logger.record("curriculum/unmasked_rollouts", float(self.unmasked_rollouts))


def _kept_order(mask: np.ndarray) -> np.ndarray:
    """The kept steps of a ``(n_steps, n_envs)`` mask in SB3's flat (env-major) order, shuffled.

    NumPy's global generator, as SB3's own ``get`` (seeded by ``set_random_seed``): with
    nothing left out the buffer defers to SB3's ``get`` and draws exactly what it draws.
    """
    kept = np.flatnonzero(mask.T.ravel())
    return kept[np.random.permutation(kept.size)]  # noqa: NPY002


class RegretRolloutBuffer(RolloutBuffer):
    """SB3's ``RolloutBuffer`` whose minibatches can leave steps out (robust PLR).

    :class:`RegretScoreCallback` with ``train_on_unseen=False`` sets :attr:`train_mask` at each
    rollout end; ``get()`` then shuffles and batches only the kept steps (fewer minibatches of
    the same size). Without a mask it is SB3's buffer, batch for batch. Pass it to the agent:
    ``PPO(..., rollout_buffer_class=RegretRolloutBuffer)``.
    """

    #: ``(n_steps, n_envs)`` bool, True for the steps to train on; None: all (reset each rollout)
    train_mask: np.ndarray | None

    def reset(self) -> None:
        """Empty the buffer and drop the mask."""
        super().reset()
        self.train_mask = None

    def get(self, batch_size: int | None = None) -> Generator[RolloutBufferSamples, None, None]:
        """Shuffled minibatches of the kept steps (all steps without a mask), as SB3's."""
        if self.train_mask is None:
            yield from super().get(batch_size)
            return
        assert self.full, "the rollout buffer is not full"
        order = _kept_order(self.train_mask)
        if not self.generator_ready:  # flattened as SB3's get() does
            for name in ("observations", "actions", "values", "log_probs", "advantages", "returns"):
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        size = batch_size or order.size
        for start in range(0, order.size, size):
            yield self._get_samples(order[start : start + size])


class RegretDictRolloutBuffer(DictRolloutBuffer):
    """:class:`RegretRolloutBuffer` for dict observations (SB3's ``DictRolloutBuffer``)."""

    #: ``(n_steps, n_envs)`` bool, True for the steps to train on; None: all (reset each rollout)
    train_mask: np.ndarray | None

    def reset(self) -> None:
        """Empty the buffer and drop the mask."""
        super().reset()
        self.train_mask = None

    def get(  # type: ignore[override]
        self, batch_size: int | None = None
    ) -> Generator[DictRolloutBufferSamples, None, None]:
        """Shuffled minibatches of the kept steps (all steps without a mask), as SB3's."""
        if self.train_mask is None:
            yield from super().get(batch_size)
            return
        assert self.full, "the rollout buffer is not full"
        order = _kept_order(self.train_mask)
        if not self.generator_ready:  # flattened as SB3's get() does
            for key, obs in self.observations.items():
                self.observations[key] = self.swap_and_flatten(obs)
            for name in ("actions", "values", "log_probs", "advantages", "returns"):
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        size = batch_size or order.size
        for start in range(0, order.size, size):
            yield self._get_samples(order[start : start + size])
