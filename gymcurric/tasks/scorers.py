"""Scorers: turn per-task statistics into sampling probabilities, vectorised over the pool.

A scorer is a small frozen dataclass (its config) with pure methods over the state arrays:

* ``raw(st, active, signal)`` -> one value per slot: how useful the task is to train on now
  (learning progress, learnability, ...). Pools use it for eviction and promotion, and the
  diagnostics compare its spread with that of the final probabilities.
* ``weights(st, raw, mask)`` -> a probability vector over the slots in ``mask`` (sums to 1,
  zero elsewhere).

Both run on the recompute cadence in batched numpy; nothing here runs per episode except the
optional ``on_update`` hook (used by :class:`~gymcurric.tasks.stages.SequentialScorer`).

Every scorer takes ``uniform_mix`` ``u``: ``p <- (1 - u) * p + u / n`` over the pool.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gymcurric._checks import is_finite_number, is_int, shown
from gymcurric.errors import ConfigError
from gymcurric.tasks.signals import SignalConfig, normalised_cost
from gymcurric.tasks.state import CurriculumState

if TYPE_CHECKING:
    from gymcurric.tasks.pools import Pool
    from gymcurric.tasks.spaces import TaskSpace

__all__ = [
    "LearnabilityScorer",
    "LearningProgressScorer",
    "Scorer",
    "UniformScorer",
    "V1_DEFAULTS",
    "WEIGHTINGS",
    "finish_weights",
    "reweight",
    "zscore_sigmoid",
]


def _check(cls: str, name: str, value: Any, ok: bool, expected: str) -> None:
    if isinstance(value, bool) and expected != "a bool":
        ok = False
    if not ok:
        raise ConfigError(name, shown(value), f"expected {expected}", source=cls)


def _isnum(v: Any) -> bool:
    return is_finite_number(v)  # an int too large for a float is not


def reweight(p: np.ndarray, theta: float) -> np.ndarray:
    """Early-progress reweighting ``R(p) = p (1 - theta) / (p + theta (1 - 2 p))`` on ``[0, 1]``.

    ``theta = 0.5`` is the identity; a small ``theta`` stretches differences near ``p = 0``
    (tasks the agent is just starting to solve). ``R(0) = 0`` and ``R(1) = 1``.
    """
    if theta == 0.5:
        return p
    den = p * (1.0 - 2.0 * theta)
    den += theta
    out: np.ndarray = p * (1.0 - theta)
    out /= den
    return out


def _clip01(x: np.ndarray) -> np.ndarray:
    # ufuncs with out=: np.clip's Python wrapper costs more than the work at these sizes
    np.maximum(x, 0.0, out=x)
    np.minimum(x, 1.0, out=x)
    return x


def zscore_sigmoid(
    y: np.ndarray, warm: np.ndarray, cold: np.ndarray, temperature: float, cold_z: float
) -> np.ndarray:
    """``sigmoid(z / T)``, ``z`` = ``y`` standardised over ``warm``; ``cold`` slots get ``cold_z``.

    Slots in neither mask get weight 0. With a zero spread among warm tasks every warm ``z`` is 0.
    """
    z = np.zeros_like(y)
    n = int(np.count_nonzero(warm))
    if n:
        yw = y[warm]
        mu = float(yw.sum()) / n
        var = float(np.dot(yw, yw)) / n - mu * mu
        if var > 1e-24:
            np.subtract(y, mu, out=z)
            z *= 1.0 / (math.sqrt(var) * temperature)
    z[cold] = cold_z / temperature
    # w = sigmoid(z) = 1 / (1 + exp(-z)), with z bounded so exp cannot overflow
    np.maximum(z, -60.0, out=z)
    np.minimum(z, 60.0, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    z += 1.0
    w: np.ndarray = np.reciprocal(z, out=z)
    w *= warm | cold
    return w


def finish_weights(w: np.ndarray, mask: np.ndarray, uniform_mix: float) -> np.ndarray:
    """Normalise ``w`` over ``mask`` (uniform when it sums to 0) and mix in ``uniform_mix``."""
    n = int(np.count_nonzero(mask))
    if n == 0:
        return np.zeros_like(w)
    total = float(w.sum())
    if total > 0.0 and math.isfinite(total):
        p = w / total
        if uniform_mix > 0.0:
            p *= 1.0 - uniform_mix
            p[mask] += uniform_mix / n
        return p
    return mask / float(n)


#: ``LearningProgressScorer.weighting`` values.
WEIGHTINGS = ("proportional", "sigmoid")
#: ``LearningProgressScorer.fallback`` values.
FALLBACKS = ("uniform", "progress")

#: gymcurric 0.1's ``LearningProgressScorer`` defaults (:meth:`LearningProgressScorer.v1`).
V1_DEFAULTS: dict[str, Any] = {
    "theta": 0.1,
    "min_samples": 10,
    "uniform_mix": 0.0,
    "noise_z": 0.0,
    "weighting": "sigmoid",
}


class Scorer(ABC):
    """Base class of scorers (see the module docstring)."""

    #: Whether the scorer reads the per-task regret scores of ``Curriculum.update_scores``
    #: (:mod:`gymcurric.tasks.regret`); the curriculum then recomputes before the next draw
    #: after new scores.
    uses_scores: ClassVar[bool] = False

    @abstractmethod
    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """Per-slot value of training on each task now (0 outside ``active``)."""

    @abstractmethod
    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Sampling probabilities over the slots in ``mask`` (sum 1; 0 elsewhere)."""

    def on_update(self, st: CurriculumState, slot: int, s: float, r: float) -> bool:
        """Per-episode hook; return True to force a recompute now. Default: nothing."""
        return False

    def check(self, space: TaskSpace, capacity: int, pool: Pool) -> None:  # noqa: B027
        """Raise :class:`ConfigError` if this scorer cannot work with ``space``/``pool``."""

    def stats(self, st: CurriculumState) -> dict[str, float]:
        """Scorer-specific ``curriculum/...`` diagnostics."""
        return {}


@dataclass(frozen=True)
class LearningProgressScorer(Scorer):
    """Bidirectional learning progress beyond its noise, sampled in proportion, with exploration.

    For each task (``x_f``, ``x_s``: the fast and slow EMAs after per-task baseline
    normalisation ``x = clip((v - B) / (1 - B), 0, 1)``, ``B = min(base, baseline_max)``)::

        LP = |R(x_f) - R(x_s)| * k               R = early-progress reweighting (theta)
        y  = LP + performance_weight * R(x_f) - cost_weight * cost

    ``k`` counts only progress beyond its own noise: ``k = max(0, 1 - noise_z * sd / |x_f -
    x_s|)``, where ``sd`` is the standard error of the fast EMA, ``sqrt(p (1 - p) * w2)`` with
    ``p`` the slow EMA (clipped to ``[0.01, 0.99]``; ``p (1 - p)`` bounds the variance of a
    signal in ``[0, 1]``) and ``w2`` the sum of its squared weights, in the baseline-normalised
    units of ``x``. A chance success on a task that is not improving (an uncontrollable task's
    1 %) then no longer looks like progress, while a sustained rise keeps most of its score.

    Then, with ``weighting="proportional"`` (the default)::

        w = max(y, 0)                            warm tasks (>= min_samples episodes)
        w = max over warm tasks of w (1 if 0)    cold tasks: tried as eagerly as the best task
        p = (1 - uniform_mix) * w / sum(w) + uniform_mix / n

    so a task whose progress is within its noise gets only the exploration share
    ``uniform_mix / n``: the mass on tasks with no progress (infeasible, mastered, not started)
    is a controlled quantity, ``uniform_mix`` times their fraction of the pool, however narrow
    the frontier is. Cold tasks are tried ``min_samples`` times first, so the warm-up costs
    ``min_samples`` episodes per task.

    ``weighting="sigmoid"`` is the scheme of gymcurric 0.1: ``z`` = ``y`` standardised over the
    warm tasks, ``w = sigmoid(z / temperature)``, cold tasks at ``z = explore_z``. It keeps a
    floor under zero-progress tasks that grows as the frontier narrows (about half the mass on
    72 zero-progress tasks of 108 when 3 are progressing), and it amplifies noise when every
    task's progress is small. :meth:`v1` gives all of gymcurric 0.1's defaults.

    Improving *and* forgetting tasks both score (``|fast - slow|``); mastered and impossible
    tasks have ``fast == slow`` and fall to the bottom.

    The defaults were chosen with the simulated learners of
    ``benchmarks/curriculum_simulated.py`` (see ``benchmarks/reference/curriculum_simulated``);
    whether they help an RL agent is the study in ``benchmarks/curriculum_infeasible.py``.

    Attributes:
        theta: reweighting parameter in ``(0, 1)``; 0.5 disables it.
        temperature: sharpness of the sigmoid (smaller = sharper), > 0; ``"sigmoid"`` only.
        min_samples: episodes before a task's LP counts; before that it is "cold".
        explore_z: z-score given to cold tasks (0 = as attractive as the average task);
            ``"sigmoid"`` only.
        performance_weight: weight of the (reweighted, normalised) success level ``x_f``.
        cost_weight: weight of the normalised cost EMA, subtracted.
        baseline: apply the per-task random-baseline normalisation.
        baseline_max: cap of the baseline, in ``[0, 1)``.
        uniform_mix: fraction of probability spread uniformly (the exploration share), in
            ``[0, 1]``.
        noise_z: progress within this many standard errors of the fast EMA counts as none
            (``>= 0``; 0 counts all of it).
        weighting: ``"proportional"`` or ``"sigmoid"`` (see above).
        fallback: what ``"proportional"`` samples when no warm task's progress clears its
            noise gate and no task is cold: ``"uniform"`` (the default) spreads the draws
            over the whole pool; ``"progress"`` draws in proportion to the ungated progress
            ``|R(x_f) - R(x_s)|`` (uniform only when that is 0 everywhere), so a learning
            task whose progress dips under its noise for a recompute keeps its draws, and a
            task that never succeeded gets none but the exploration share. Experimental
            (issue 23's study measures it as ``lp_fallback``).

    Examples:
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(4)]),
        ...                  scorer=LearningProgressScorer(min_samples=2), seed=0)
        >>> cur.sample(3).shape
        (3,)
    """

    theta: float = 0.3
    temperature: float = 0.15
    min_samples: int = 3
    explore_z: float = 1.0
    performance_weight: float = 0.0
    cost_weight: float = 0.0
    baseline: bool = True
    baseline_max: float = 0.75
    uniform_mix: float = 0.05
    noise_z: float = 0.5
    weighting: str = "proportional"
    fallback: str = "uniform"

    @classmethod
    def v1(cls, **overrides: Any) -> LearningProgressScorer:
        """The learning progress of gymcurric 0.1: z-score and sigmoid, no noise gate, no mix.

        Use it with ``SignalConfig(alpha=0.1)`` (also 0.1's default) to reproduce runs, or to
        resume states saved, with gymcurric 0.1's defaults; ``overrides`` replace fields.
        """
        return cls(**{**V1_DEFAULTS, **overrides})

    def __post_init__(self) -> None:
        c = type(self).__name__
        _check(
            c, "theta", self.theta, _isnum(self.theta) and 0 < self.theta < 1, "a float in (0, 1)"
        )
        _check(
            c,
            "temperature",
            self.temperature,
            _isnum(self.temperature) and self.temperature > 0,
            "a float > 0",
        )
        _check(
            c,
            "min_samples",
            self.min_samples,
            is_int(self.min_samples),
            "an int >= 1",
        )
        _check(c, "explore_z", self.explore_z, _isnum(self.explore_z), "a finite float")
        for name in ("performance_weight", "cost_weight"):
            v = getattr(self, name)
            _check(c, name, v, _isnum(v) and v >= 0, "a float >= 0")
        _check(c, "baseline", self.baseline, isinstance(self.baseline, bool), "a bool")
        _check(
            c,
            "baseline_max",
            self.baseline_max,
            _isnum(self.baseline_max) and 0 <= self.baseline_max < 1,
            "a float in [0, 1)",
        )
        _check(
            c,
            "uniform_mix",
            self.uniform_mix,
            _isnum(self.uniform_mix) and 0 <= self.uniform_mix <= 1,
            "a float in [0, 1]",
        )
        _check(
            c,
            "noise_z",
            self.noise_z,
            _isnum(self.noise_z) and self.noise_z >= 0,
            "a finite float >= 0",
        )
        _check(
            c,
            "weighting",
            self.weighting,
            self.weighting in WEIGHTINGS,
            f"one of {WEIGHTINGS}",
        )
        _check(c, "fallback", self.fallback, self.fallback in FALLBACKS, f"one of {FALLBACKS}")
        if self.fallback == "progress" and self.cost_weight:
            raise ConfigError(
                "fallback",
                self.fallback,
                f"draws by progress alone and would drop cost_weight={self.cost_weight!r}; "
                "use one of them",
                source=c,
            )
        if self.weighting == "sigmoid" and self.fallback != "uniform":
            raise ConfigError(
                "fallback",
                self.fallback,
                "applies to weighting='proportional' only (the sigmoid never sums to 0)",
                source=c,
            )
        if self.weighting == "proportional":  # no silent no-ops: these shape the sigmoid only
            defaults = {f.name: f.default for f in fields(self)}
            for name in ("temperature", "explore_z"):
                value = getattr(self, name)
                if value != defaults[name]:
                    raise ConfigError(
                        name,
                        value,
                        "applies to weighting='sigmoid' only (gymcurric 0.1's scheme); set "
                        "weighting='sigmoid' or use LearningProgressScorer.v1(...), or drop it",
                        source=c,
                    )

    def normalised(self, st: CurriculumState, *values: np.ndarray) -> list[np.ndarray]:
        """Baseline-normalised copies of per-slot signal statistics, clipped to ``[0, 1]``."""
        if not self.baseline:
            return [_clip01(v.copy()) for v in values]
        b = np.minimum(st.base, self.baseline_max)
        scale = np.subtract(1.0, b)
        np.reciprocal(scale, out=scale)
        out = []
        for v in values:
            x = np.subtract(v, b)
            x *= scale
            out.append(_clip01(x))
        return out

    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """``LP + performance_weight * R(x_f) - cost_weight * cost`` per slot."""
        xf, xs = self.normalised(st, st.fast, st.slow)
        rf = reweight(xf, self.theta)
        y = np.subtract(rf, reweight(xs, self.theta))
        np.abs(y, out=y)
        if self.noise_z:
            y *= self.beyond_noise(st, xf, xs)
        if self.performance_weight:
            y += self.performance_weight * rf
        if self.cost_weight:
            y -= self.cost_weight * normalised_cost(st, signal)
        y *= active
        return y

    def beyond_noise(self, st: CurriculumState, xf: np.ndarray, xs: np.ndarray) -> np.ndarray:
        """Per slot, the share ``k`` of ``|x_f - x_s|`` beyond ``noise_z`` standard errors."""
        p = np.clip(st.slow, 0.01, 0.99)
        sd = p * (1.0 - p)
        sd *= np.clip(st.w2, 0.0, 1.0)
        np.sqrt(sd, out=sd)
        if self.baseline:  # in the normalised units of x
            sd /= 1.0 - np.minimum(st.base, self.baseline_max)
        diff = np.abs(xf - xs)
        k = np.zeros_like(diff)
        moved = diff > 0.0
        k[moved] = 1.0 - self.noise_z * sd[moved] / diff[moved]
        return _clip01(k)

    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Proportional (or z-score and sigmoid) weights -> normalise -> uniform mix."""
        warm = mask & (st.count >= self.min_samples)
        cold = mask & ~warm
        if self.weighting == "sigmoid":
            w = zscore_sigmoid(raw, warm, cold, self.temperature, self.explore_z)
        else:
            w = np.maximum(raw, 0.0)
            w *= warm
            if cold.any():
                top = float(w.max())
                w[cold] = top if top > 0.0 else 1.0
            elif self.fallback == "progress" and not w.any():
                w = self.ungated(st) * warm
        return finish_weights(w, mask, self.uniform_mix)

    def ungated(self, st: CurriculumState) -> np.ndarray:
        """Per slot, ``|R(x_f) - R(x_s)|``: the progress before the noise gate."""
        xf, xs = self.normalised(st, st.fast, st.slow)
        y = np.subtract(reweight(xf, self.theta), reweight(xs, self.theta))
        return np.abs(y, out=y)


@dataclass(frozen=True)
class LearnabilityScorer(Scorer):
    """Learnability ``p (1 - p)`` of the success level ``p``: highest when solved half the time.

    ``p`` is the per-task ``fast`` statistic (see :mod:`gymcurric.tasks.signals`), and the value
    is the unbiased estimate ``p (1 - p) / (1 - w2)`` (``w2``: sum of squared weights behind
    ``p``), so tasks with few episodes are not ranked below well-measured ones merely because
    their estimate is noisier (``E[p^(1 - p^)] = p (1 - p) (1 - w2)`` for 0/1 outcomes).
    Weights are proportional to learnability (or uniform over the ``top_k`` most learnable
    tasks). Cold tasks (fewer than ``min_samples`` episodes) use ``cold_value``; the default 0.25
    is the maximum of ``p (1 - p)``, so unexplored tasks are tried first, on the same scale.

    Attributes:
        min_samples: episodes before a task's own learnability is used.
        cold_value: learnability assumed for cold tasks, in ``[0, 0.25]``.
        top_k: sample uniformly among the k best tasks instead of proportionally (None: off).
        uniform_mix: fraction of probability spread uniformly, in ``[0, 1]``.
    """

    min_samples: int = 5
    cold_value: float = 0.25
    top_k: int | None = None
    uniform_mix: float = 0.0

    def __post_init__(self) -> None:
        c = type(self).__name__
        _check(
            c,
            "min_samples",
            self.min_samples,
            is_int(self.min_samples),
            "an int >= 1",
        )
        _check(
            c,
            "cold_value",
            self.cold_value,
            _isnum(self.cold_value) and 0 <= self.cold_value <= 0.25,
            "a float in [0, 0.25]",
        )
        _check(
            c,
            "top_k",
            self.top_k,
            self.top_k is None or is_int(self.top_k),
            "None or an int >= 1",
        )
        _check(
            c,
            "uniform_mix",
            self.uniform_mix,
            _isnum(self.uniform_mix) and 0 <= self.uniform_mix <= 1,
            "a float in [0, 1]",
        )

    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """Unbiased ``p (1 - p)`` of the (not baseline-normalised) success level, in [0, 0.25]."""
        p = _clip01(st.fast.copy())
        y = np.subtract(1.0, p)
        y *= p
        den = np.subtract(1.0, st.w2)
        np.divide(y, den, out=y, where=den > 1e-9)
        y[den <= 1e-9] = 0.0
        np.minimum(y, 0.25, out=y)
        y *= active
        return y

    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Proportional to learnability (or uniform over the top k), then the uniform mix."""
        w = np.where(st.count >= self.min_samples, raw, self.cold_value)
        w[~mask] = 0.0
        n = int(np.count_nonzero(mask))
        if self.top_k is not None and self.top_k < n:
            idx = np.flatnonzero(mask)
            best = idx[np.argpartition(-w[idx], self.top_k - 1)[: self.top_k]]
            w = np.zeros_like(w)
            w[best] = 1.0
        return finish_weights(w, mask, self.uniform_mix)


@dataclass(frozen=True)
class UniformScorer(Scorer):
    """Uniform over the pool (domain randomisation); ``raw`` is 0 for every task."""

    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """All zeros: no task is preferred."""
        return np.zeros(st.capacity)

    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``1 / n`` over the mask."""
        return finish_weights(np.zeros(st.capacity), mask, 0.0)
