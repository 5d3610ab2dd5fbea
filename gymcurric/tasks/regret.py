"""Regret-based curricula: per-task scores fed from training, and Prioritized Level Replay.

**The score hook.** Learning progress is measured from episode outcomes, which the env wrappers
report as episodes end. Regret curricula need a quantity only the learner knows: how wrong its
value function was on each task, computed after a rollout (the magnitude of the GAE advantages,
or their positive part). The main process reports it with
:meth:`Curriculum.update_scores(task_ids, scores) <gymcurric.tasks.Curriculum.update_scores>`
(batched; :class:`~gymcurric.integrations.sb3.RegretScoreCallback` does it for SB3). The state
keeps, per slot, the task's latest ``score``, how many it has received (``scored``; 0 means the
task is *unseen*) and the sample counter when it was last handed out (``last_sampled``), so
scores and staleness live in the same arrays as everything else: they are shared between
processes, sent to a Ray actor and saved in checkpoints. Scores of tasks no longer in the pool
are counted (``curriculum/stale_scores``) and ignored; NaN/inf scores are counted
(``curriculum/nonfinite_scores``), skipped and warned about once. Any scorer may read the
scores; one that does declares ``uses_scores = True`` (:func:`uses_scores`), so that new scores
make the curriculum recompute before its next draw. The learning-progress scorers ignore them.

**PLR** (:class:`PLRScorer`; Jiang, Grefenstette and Rocktäschel 2021, "Prioritized Level
Replay"). Over the seen tasks of a pool, with scores ``S_i``::

    P_S(i) ∝ h(S_i)^(1 / beta)      rank: h = 1 / rank(S_i) (rank 1 = highest score);
                                    power: h = S_i
    P_C(i) ∝ c - C_i                c = tasks handed out so far, C_i = c at task i's last draw
    P_replay = (1 - rho) * P_S + rho * P_C

and a new (unseen) task is drawn uniformly with probability ``1 - replay share`` while any
remain. gymcurric's pools draw from one probability vector, so the replay decision is folded
into it as a mixture: the seen tasks share ``replay share * P_replay``, the unseen ones split
the rest evenly.

**Robust PLR** (PLR⊥; Jiang, Dennis, Parker-Holder et al. 2021, "Replay-Guided Adversarial
Environment Design"): :class:`RobustPLRScorer` is the same prioritisation with that paper's
settings; the rest of the method lives in the learner: scores are the positive value loss, and
the policy takes no gradient from episodes on tasks that were unseen when drawn
(:class:`~gymcurric.integrations.sb3.RegretScoreCallback` and
:class:`~gymcurric.integrations.sb3.RegretRolloutBuffer` do both for SB3).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from gymcurric._checks import check_int, shown
from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.tasks.scorers import Scorer, finish_weights
from gymcurric.tasks.signals import SignalConfig
from gymcurric.tasks.state import CurriculumState, K

if TYPE_CHECKING:
    from gymcurric.tasks.pools import Pool
    from gymcurric.tasks.spaces import TaskSpace

__all__ = [
    "PRIORITIZATIONS",
    "REPLAY_SCHEDULES",
    "PLRScorer",
    "RobustPLRScorer",
    "ScoreBatch",
    "ScoreChecks",
    "check_scores",
    "check_task_ids",
    "latest_scores",
    "mean_ranks",
    "nonfinite_message",
    "uses_scores",
]

#: How :class:`PLRScorer` turns scores into priorities.
PRIORITIZATIONS = ("rank", "power")
#: How :class:`PLRScorer` sets the share of draws that replay seen tasks.
REPLAY_SCHEDULES = ("fixed", "proportionate")


def uses_scores(scorer: Any) -> bool:
    """Whether ``scorer`` (or the scorer it wraps as ``inner``) reads the regret scores.

    A scorer declares it with the class attribute ``uses_scores = True``
    (:attr:`Scorer.uses_scores <gymcurric.tasks.Scorer.uses_scores>`); the curriculum then
    recomputes its distribution before the next draw after :meth:`update_scores
    <gymcurric.tasks.Curriculum.update_scores>`. Scorers without it are unaffected by scores.
    """
    while scorer is not None:
        if getattr(scorer, "uses_scores", False):
            return True
        scorer = getattr(scorer, "inner", None)  # a SequentialScorer's scorer within a stage
    return False


def _int_like(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _real(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_
    )


def _brief(value: Any) -> Any:
    """``value`` for an error message: long sequences by type and length only."""
    try:
        n = len(value)
    except TypeError:
        return value
    return value if n <= 8 else f"<{type(value).__name__} of length {n}>"


def check_task_ids(task_ids: Any, *, source: str) -> np.ndarray:
    """``task_ids`` as a 1-D int64 array (only their type is checked here, not their range).

    Raises:
        ConfigError: ``task_ids`` is not a 1-D sequence (list, tuple or integer array) of ints
            (bools are not ints here).
    """
    ids: np.ndarray | None = None
    if isinstance(task_ids, np.ndarray):
        if task_ids.ndim == 1 and task_ids.dtype.kind in "iu":
            ids = task_ids.astype(np.int64, copy=False)
    elif isinstance(task_ids, list | tuple) and all(_int_like(t) for t in task_ids):
        ids = np.array(task_ids, dtype=np.int64) if task_ids else np.zeros(0, np.int64)
    if ids is None:
        raise ConfigError(
            "task_ids",
            _brief(task_ids),
            "expected a 1-D sequence (list, tuple or integer array) of int task ids",
            source=source,
        )
    return ids


def check_scores(task_ids: Any, scores: Any, *, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate a batch of scores: ``(task ids as int64, scores as float64)``, both 1-D.

    The ids are only checked to be ints here (the curriculum checks them against its space);
    NaN and inf scores pass (the curriculum counts and skips them).

    Raises:
        ConfigError: ``task_ids`` is not a 1-D sequence of ints, ``scores`` not a 1-D sequence
            of real numbers (bools are neither), or their lengths differ.
    """
    ids = check_task_ids(task_ids, source=source)
    values: np.ndarray | None = None
    if isinstance(scores, np.ndarray):
        if scores.ndim == 1 and scores.dtype.kind in "iuf":
            values = scores.astype(np.float64, copy=False)
    elif isinstance(scores, list | tuple) and all(_real(v) for v in scores):
        values = np.array(scores, dtype=np.float64) if scores else np.zeros(0)
    if values is None:
        raise ConfigError(
            "scores",
            _brief(scores),
            "expected a 1-D sequence (list, tuple or numeric array) of real numbers",
            source=source,
        )
    if values.shape != ids.shape:
        raise ConfigError(
            "scores",
            f"{values.size} scores",
            f"expected one score per task id ({ids.size} task ids)",
            source=source,
        )
    return ids, values


def nonfinite_message(owner: str, ids: np.ndarray, values: np.ndarray, finite: np.ndarray) -> str:
    """The warning text for the NaN/inf scores among ``values`` (``finite`` False there)."""
    first = int(np.flatnonzero(~finite)[0])
    return (
        f"{owner}.update_scores skipped {int(np.count_nonzero(~finite))} non-finite score(s) "
        f"(first: task_id={int(ids[first])}, score={float(values[first])!r}); they are counted "
        "in curriculum/nonfinite_scores and never enter the distribution. This warning is "
        "shown once per curriculum object"
    )


class ScoreBatch(NamedTuple):
    """A checked batch of regret scores, its NaN/inf scores taken out (:class:`ScoreChecks`)."""

    #: the ids of the finite scores (int64)
    ids: np.ndarray
    #: their scoring keys (:meth:`TaskSpace.keys <gymcurric.tasks.TaskSpace.keys>`)
    keys: np.ndarray
    #: the finite scores (float64)
    scores: np.ndarray
    #: how many NaN/inf scores were taken out
    nonfinite: int


class ScoreChecks:
    """The score hook's checks for one curriculum object, which warn once about NaN/inf scores.

    :class:`~gymcurric.tasks.Curriculum` and the Ray client each hold one and pass what
    ``update_scores``, ``record_scores`` and ``scores`` receive through it before applying or
    sending anything, so that a bad batch raises and changes nothing.

    Args:
        space: the curriculum's task space (ids are checked against it).
        source: the class errors name (``"Curriculum"``: ``Curriculum.update_scores``).
        owner: the class the NaN/inf warning names (default: ``source``).
    """

    def __init__(self, space: TaskSpace, source: str, owner: str | None = None) -> None:
        self.space, self.source, self.owner = space, source, owner or source
        #: whether the NaN/inf warning was shown (it is shown once per curriculum object)
        self.warned_nonfinite = False

    def batch(self, task_ids: Any, scores: Any) -> ScoreBatch:
        """Check an ``update_scores`` batch and take its NaN/inf scores out (warning once).

        Raises:
            ConfigError: as :meth:`Curriculum.update_scores
                <gymcurric.tasks.Curriculum.update_scores>`.
        """
        ids, values = check_scores(task_ids, scores, source=f"{self.source}.update_scores")
        keys = self.space.keys(ids)  # raises naming the first bad id
        finite = np.isfinite(values)
        skipped = int(values.size - np.count_nonzero(finite))
        if skipped:
            if not self.warned_nonfinite:
                self.warned_nonfinite = True
                msg = nonfinite_message(self.owner, ids, values, finite)
                warnings.warn(msg, GymcurricWarning, stacklevel=3)  # update_scores' caller
            ids, keys, values = ids[finite], keys[finite], values[finite]
        return ScoreBatch(ids, keys, values, skipped)

    def finite_batch(self, task_ids: Any, scores: Any, nonfinite: int) -> ScoreBatch:
        """Check a ``record_scores`` batch: finite scores, and ``nonfinite`` skipped ones.

        Raises:
            ConfigError: as :meth:`batch`, or a score that is not finite, or ``nonfinite`` is
                not an int >= 0.
        """
        source = f"{self.source}.record_scores"
        ids, values = check_scores(task_ids, scores, source=source)
        keys = self.space.keys(ids)
        if not np.isfinite(values).all():
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            raise ConfigError(
                f"scores[{bad}]",
                float(values[bad]),
                "record_scores takes finite scores (update_scores skips the others)",
                source=source,
            )
        check_int("nonfinite", nonfinite, minimum=0, source=source)
        return ScoreBatch(ids, keys, values, int(nonfinite))

    def ids_and_keys(self, task_ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """The ids ``scores`` asks for (int64), checked against the space, and their keys.

        Raises:
            ConfigError: ``task_ids`` is not a 1-D sequence of ids of the space.
        """
        ids = check_task_ids(task_ids, source=f"{self.source}.scores")
        return ids, self.space.keys(ids)


def latest_scores(st: CurriculumState, slots: np.ndarray) -> np.ndarray:
    """The latest score in each of ``slots`` (float64), NaN for an unscored slot or ``-1``."""
    out = np.full(slots.size, np.nan)
    have = slots >= 0
    have[have] = st.scored[slots[have]] > 0
    out[have] = st.score[slots[have]]
    return out


def mean_ranks(values: np.ndarray) -> np.ndarray:
    """Descending ranks of ``values`` (1 = largest); tied values share the mean of their ranks.

    Ties share a rank so that tasks with equal scores get equal probability, whatever their slot
    order (the reference implementation breaks ties by ``argsort`` order instead).

    Examples:
        >>> mean_ranks(np.array([0.5, 2.0, 0.5, 1.0])).tolist()
        [3.5, 1.0, 3.5, 2.0]
    """
    _, inverse, counts = np.unique(-values, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts + 1.0
    ranks: np.ndarray = (first + (counts - 1) / 2.0)[inverse.reshape(-1)]
    return ranks


def _fraction(cls: str, name: str, value: Any, lo: float, hi: float, *, open_lo: bool) -> None:
    # the range first: math.isfinite raises OverflowError on an int too large for a float
    ok = _real(value) and (lo < value if open_lo else lo <= value) and value <= hi
    if not ok or not math.isfinite(value):
        span = f"({lo}, {hi}]" if open_lo else f"[{lo}, {hi}]"
        raise ConfigError(name, shown(value), f"expected a float in {span}", source=cls)


@dataclass(frozen=True)
class PLRScorer(Scorer):
    """Prioritized Level Replay over the regret scores reported with ``update_scores``.

    Per pool, with ``seen`` the tasks that have a score (see :mod:`gymcurric.tasks.regret` for
    the formulas)::

        P_S     ∝ rank(S)^(-1 / temperature)       (prioritization="rank"; ties share a rank)
              or  (S / max S)^(1 / temperature)    (prioritization="power"; S < 0 counts as 0)
        P_C     ∝ samples since the task was last handed out (or entered the pool)
        replay  = (1 - staleness_coef) * P_S + staleness_coef * P_C     over the seen tasks
        p       = share * replay + (1 - share) * uniform over the unseen tasks
        p      <- (1 - uniform_mix) * p + uniform_mix / n

    ``share`` is the replay probability: with ``replay_schedule="fixed"``, ``replay_prob`` while
    unseen tasks remain and 1 once every task has a score; with ``"proportionate"``, the
    fraction of the pool that has a score (the reference code's default); 0 in both while fewer
    than ``min_seen`` of the pool's tasks have one. With no seen task every draw is a new task;
    a uniform ``P_S`` or ``P_C`` stands in where its weights are all zero.

    ``raw`` (what pools evict and promote by, and ``curriculum/mean_lp`` averages) is the score
    of seen tasks and 0 for unseen ones. Scores arrive with
    :meth:`~gymcurric.tasks.Curriculum.update_scores` (the score hook), for SB3 from
    :class:`~gymcurric.integrations.sb3.RegretScoreCallback`; without them every task stays
    unseen and sampling is uniform. New scores make the curriculum recompute before its next
    draw; staleness is read at each recompute (every ``recompute_every`` episodes and after
    each ``update_scores``), not at every draw as in the reference code.

    Defaults are the paper's best Procgen setting (rank prioritisation, ``temperature`` 0.1,
    ``staleness_coef`` 0.1) with the fixed replay schedule at ``replay_prob`` 0.5.

    Attributes:
        prioritization: ``"rank"`` or ``"power"``.
        temperature: ``beta`` in ``(0, 10]``; smaller concentrates on the top scores.
        staleness_coef: ``rho`` in ``[0, 1]``, the weight of staleness in replays.
        replay_prob: probability of a replay while unseen tasks remain (``"fixed"``).
        replay_schedule: ``"fixed"`` or ``"proportionate"``.
        min_seen: fraction of the pool that must have a score before replays start.
        uniform_mix: fraction of probability spread uniformly, in ``[0, 1]``.

    Examples:
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(4)]),
        ...                  scorer=PLRScorer(), seed=0)
        >>> cur.update_scores([0, 1, 2], [0.5, 2.0, 1.0])  # task 3 stays unseen
        >>> cur.recompute()  # (the next draw would recompute anyway)
        >>> keys, p = cur.probabilities()
        >>> float(p[3])  # (1 - replay_prob): the unseen task gets every new draw
        0.5
        >>> bool(p[1] > p[2] > p[0])  # replays by rank of score
        True
    """

    prioritization: str = "rank"
    temperature: float = 0.1
    staleness_coef: float = 0.1
    replay_prob: float = 0.5
    replay_schedule: str = "fixed"
    min_seen: float = 0.0
    uniform_mix: float = 0.0

    #: this scorer reads ``score``/``scored`` (see :func:`uses_scores`)
    uses_scores: ClassVar[bool] = True

    def __post_init__(self) -> None:
        c = type(self).__name__
        if self.prioritization not in PRIORITIZATIONS:
            raise ConfigError(
                "prioritization",
                self.prioritization,
                f"expected one of {list(PRIORITIZATIONS)}",
                source=c,
            )
        if self.replay_schedule not in REPLAY_SCHEDULES:
            raise ConfigError(
                "replay_schedule",
                self.replay_schedule,
                f"expected one of {list(REPLAY_SCHEDULES)}",
                source=c,
            )
        _fraction(c, "temperature", self.temperature, 0.0, 10.0, open_lo=True)
        for name in ("staleness_coef", "replay_prob", "min_seen", "uniform_mix"):
            _fraction(c, name, getattr(self, name), 0.0, 1.0, open_lo=False)

    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """The score of each seen task; 0 for unseen and inactive slots."""
        return np.where(active & (st.scored > 0), st.score, 0.0)

    def score_weights(self, st: CurriculumState, seen: np.ndarray) -> np.ndarray:
        """``P_S``: the prioritisation of the seen tasks by score (sums to 1 over ``seen``)."""
        p = np.zeros(st.capacity)
        s = st.score[seen]
        if self.prioritization == "rank":
            w = np.power(mean_ranks(s), -1.0 / self.temperature)
        else:
            top = float(s.max())
            w = (
                np.power(np.maximum(s, 0.0) / top, 1.0 / self.temperature)
                if top > 0
                else np.zeros_like(s)
            )
        total = float(w.sum())
        p[seen] = w / total if total > 0 and math.isfinite(total) else 1.0 / s.size
        return p

    def staleness_weights(self, st: CurriculumState, seen: np.ndarray) -> np.ndarray:
        """``P_C``: proportional to the samples since each seen task was last handed out."""
        p = np.zeros(st.capacity)
        stale = np.maximum(st.counters[K.SAMPLES] - st.last_sampled[seen], 0).astype(np.float64)
        total = float(stale.sum())
        p[seen] = stale / total if total > 0 else 1.0 / stale.size
        return p

    def replay_share(self, n_seen: int, n: int) -> float:
        """Probability that a draw replays a seen task (the rest goes to unseen tasks)."""
        if n_seen == 0 or n_seen < self.min_seen * n:
            return 0.0
        if n_seen == n:
            return 1.0
        if self.replay_schedule == "proportionate":
            return n_seen / n
        return float(self.replay_prob)

    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Replays by score and staleness, mixed with uniform draws of unseen tasks."""
        n = int(np.count_nonzero(mask))
        if n == 0:
            return np.zeros(st.capacity)
        seen = mask & (st.scored > 0)
        n_seen = int(np.count_nonzero(seen))
        share = self.replay_share(n_seen, n)
        p = np.zeros(st.capacity)
        if share > 0.0:
            replay = self.score_weights(st, seen)
            if self.staleness_coef > 0.0:
                replay *= 1.0 - self.staleness_coef
                replay += self.staleness_coef * self.staleness_weights(st, seen)
            p += share * replay
        if share < 1.0:
            unseen = mask & ~seen
            p[unseen] += (1.0 - share) / int(np.count_nonzero(unseen))
        return finish_weights(p, mask, self.uniform_mix)

    def check(self, space: TaskSpace, capacity: int, pool: Pool) -> None:
        """Any space and pool will do."""

    def stats(self, st: CurriculumState) -> dict[str, float]:
        """``curriculum/seen_frac``, ``score_mean``, ``score_max`` and ``staleness_mean``."""
        live = st.pool >= 0
        seen = live & (st.scored > 0)
        n, k = int(np.count_nonzero(live)), int(np.count_nonzero(seen))
        scores = st.score[seen]
        stale = st.counters[K.SAMPLES] - st.last_sampled[seen]
        return {
            "curriculum/seen_frac": k / n if n else 0.0,
            "curriculum/score_mean": float(scores.mean()) if k else 0.0,
            "curriculum/score_max": float(scores.max()) if k else 0.0,
            "curriculum/staleness_mean": float(stale.mean()) if k else 0.0,
        }


@dataclass(frozen=True)
class RobustPLRScorer(PLRScorer):
    """PLR with the settings of robust PLR (PLR⊥, Jiang et al. 2021b): the curation half of it.

    The same prioritisation as :class:`PLRScorer`; the defaults are those of the authors' maze
    runs (``facebookresearch/dcd``: rank, ``temperature`` 0.1, ``staleness_coef`` 0.3,
    ``replay_prob`` 0.5, replays once half the pool has a score). The other half of robust PLR
    is in the learner: score episodes by their *positive value loss* (the mean of
    ``max(GAE, 0)``), and take no gradient from episodes on tasks that were unseen when drawn.
    :class:`~gymcurric.integrations.sb3.RegretScoreCallback` does both when the curriculum's
    scorer is a ``RobustPLRScorer`` (with SB3's ``PPO(..., rollout_buffer_class=
    RegretRolloutBuffer)``); the scorer alone does neither.

    Attributes:
        staleness_coef: ``rho``, as in :class:`PLRScorer` (default 0.3).
        min_seen: as in :class:`PLRScorer` (default 0.5); the other attributes and their
            defaults are :class:`PLRScorer`'s.
    """

    staleness_coef: float = 0.3
    min_seen: float = 0.5
