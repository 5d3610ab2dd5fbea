"""The curriculum state: a fixed set of named numpy arrays plus two counter vectors.

Everything a curriculum knows lives here, so that the same code runs on process-local arrays,
on a shared-memory block or behind a Ray actor (see :mod:`gymcurric.tasks.backends`), and a
checkpoint is just a copy of these arrays (plus the sampling generator's state).

Layout (``C`` = pool capacity, ``W`` = promotion window length)::

    per slot, shape (C,)
      task_id  int64    the key held by the slot (-1: empty)
      pool     int8     EMPTY (-1) / EXPLORE (0; also the only pool of a single pool) / EXPLOIT (1)
      count    int64    episodes reported for the slot's task since it entered the pool
      age      int64    episodes since the task entered its current pool or last promotion attempt
      samples  int64    times the task was handed out by ``sample``
      fast     float64  fast EMA of the episode signal s in [0, 1]   (rate max(alpha, 1/n))
      slow     float64  slow EMA of the same signal          (rate max(alpha * slow_factor, 1/n))
      w2       float64  sum of squared weights behind ``fast`` (Var(fast) = Var(s) * w2)
      base     float64  random baseline: mean signal of the first episodes
      ret_ema  float64  EMA of the raw episode return
      cost_ema float64  EMA of the raw episode cost
      raw      float64  scorer value at the last recompute (learning progress, learnability, ...)
      prob     float64  overall sampling probability at the last recompute
      cdf_a    float64  cumulative weights of the explore pool (the single pool)
      cdf_b    float64  cumulative weights of the exploit pool
      score    float64  the task's latest regret score (``Curriculum.update_scores``; 0: none)
      scored   int64    scores received for the task since it entered the pool (0: unseen)
      last_sampled int64  ``counters[K.SAMPLES]`` when the task was last handed out (or when it
                        entered the pool): its staleness is ``counters[K.SAMPLES] - last_sampled``
    window   int8 (W,)  outcomes of the last W promotion attempts (1 = promoted)
    counters int64 (K.N,)   event counters, see :class:`K`
    scalars  float64 (S.N,) running scalars, see :class:`S`

Slot order is stable: a task keeps its slot until it is evicted, so per-slot arrays can be
updated in place with scalar writes (O(1) per episode) and read in batches on a cadence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = [
    "EMPTY",
    "EXPLOIT",
    "EXPLORE",
    "SLOT_FIELDS",
    "CurriculumState",
    "FieldSpec",
    "K",
    "S",
    "state_layout",
]

#: Pool labels stored in ``CurriculumState.pool``.
EMPTY = -1
EXPLORE = 0
EXPLOIT = 1


class K:
    """Indices into ``CurriculumState.counters`` (plain ints: they index numpy arrays fast)."""

    UPDATES = 0  #: episodes reported (accepted)
    SAMPLES = 1  #: task ids handed out
    RECOMPUTES = 2  #: distribution recomputes
    SINCE_RECOMPUTE = 3  #: accepted episodes since the last recompute
    VERSION = 4  #: bumped whenever a slot changes task (invalidates per-process id maps)
    EVICTIONS = 5  #: tasks removed from the pool for low progress (or displaced from exploit)
    INVALID_GENERATED = 6  #: generated tasks the validator rejected (and that were retried)
    INVALID_REPORTED = 7  #: tasks reported invalid through ``mark_invalid``
    STALE_UPDATES = 8  #: episodes reported for a task no longer in the pool (ignored)
    PROMOTIONS = 9  #: successful promotion attempts in the steady phase
    ATTEMPTS = 10  #: promotion attempts in the steady phase
    BOOTSTRAP_PROMOTIONS = 11  #: promotions into free exploit slots during bootstrap
    PHASE = 12  #: 0 = bootstrap, 1 = steady (dual pool)
    WIN_POS = 13  #: next write position in ``window``
    WIN_FILL = 14  #: number of valid entries in ``window``
    WIN_SUM = 15  #: number of 1s among the valid entries of ``window``
    STAGE = 16  #: current stage (sequential scorer)
    STAGE_EPISODES = 17  #: episodes counted in the current stage
    LAST_A = 18  #: last slot with positive mass in ``cdf_a`` (-1: none)
    LAST_B = 19  #: last slot with positive mass in ``cdf_b`` (-1: none)
    DIRTY = 20  #: 1 when the distribution must be recomputed before the next sample
    SCORES = 21  #: regret scores accepted (``update_scores``)
    STALE_SCORES = 22  #: scores reported for a task no longer in the pool (ignored)
    NONFINITE_SCORES = 23  #: NaN/inf scores reported (skipped)
    N = 24


class S:
    """Indices into ``CurriculumState.scalars``."""

    RHO = 0  #: probability of sampling the explore pool in the steady phase
    PROMO_RATE = 1  #: success fraction of the promotion window
    RET_LO = 2  #: lowest episode return seen (running return normalisation)
    RET_HI = 3  #: highest episode return seen
    COST_HI = 4  #: highest episode cost seen (running cost normalisation)
    STAGE_SUCCESS = 5  #: EMA of the signal within the current stage
    STAGE_RETURN = 6  #: EMA of the return within the current stage
    TOTAL_A = 7  #: ``cdf_a[-1]``
    TOTAL_B = 8  #: ``cdf_b[-1]``
    N = 9


#: Per-slot fields, in layout order, with their dtypes.
SLOT_FIELDS: dict[str, np.dtype] = {
    "task_id": np.dtype(np.int64),
    "pool": np.dtype(np.int8),
    "count": np.dtype(np.int64),
    "age": np.dtype(np.int64),
    "samples": np.dtype(np.int64),
    "fast": np.dtype(np.float64),
    "slow": np.dtype(np.float64),
    "w2": np.dtype(np.float64),
    "base": np.dtype(np.float64),
    "ret_ema": np.dtype(np.float64),
    "cost_ema": np.dtype(np.float64),
    "raw": np.dtype(np.float64),
    "prob": np.dtype(np.float64),
    "cdf_a": np.dtype(np.float64),
    "cdf_b": np.dtype(np.float64),
    "score": np.dtype(np.float64),
    "scored": np.dtype(np.int64),
    "last_sampled": np.dtype(np.int64),
}


@dataclass(frozen=True)
class FieldSpec:
    """Shape and dtype of one named state array (what a backend allocates)."""

    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Size of the array in bytes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def state_layout(capacity: int, window: int) -> dict[str, FieldSpec]:
    """Return the named arrays of a curriculum with ``capacity`` slots.

    Args:
        capacity: number of task slots in the pool(s).
        window: length of the promotion-outcome window (1 when no dual pool is used).
    """
    layout = {name: FieldSpec(dtype, (capacity,)) for name, dtype in SLOT_FIELDS.items()}
    layout["window"] = FieldSpec(np.dtype(np.int8), (max(int(window), 1),))
    layout["counters"] = FieldSpec(np.dtype(np.int64), (K.N,))
    layout["scalars"] = FieldSpec(np.dtype(np.float64), (S.N,))
    return layout


class CurriculumState:
    """Attribute access to the named state arrays (views; no copies are made).

    Args:
        arrays: one array per name in :func:`state_layout`, e.g. from a backend's ``allocate``.
    """

    task_id: np.ndarray
    pool: np.ndarray
    count: np.ndarray
    age: np.ndarray
    samples: np.ndarray
    fast: np.ndarray
    slow: np.ndarray
    w2: np.ndarray
    base: np.ndarray
    ret_ema: np.ndarray
    cost_ema: np.ndarray
    raw: np.ndarray
    prob: np.ndarray
    cdf_a: np.ndarray
    cdf_b: np.ndarray
    score: np.ndarray
    scored: np.ndarray
    last_sampled: np.ndarray
    window: np.ndarray
    counters: np.ndarray
    scalars: np.ndarray

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        self._names = (*SLOT_FIELDS, "window", "counters", "scalars")
        for name in self._names:
            setattr(self, name, arrays[name])

    @property
    def capacity(self) -> int:
        """Number of slots."""
        return int(self.task_id.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        """The named arrays (views into the backend's memory)."""
        return {name: getattr(self, name) for name in self._names}

    def initialise(self) -> None:
        """Write the empty-pool values into every array."""
        for name in self._names:
            getattr(self, name).fill(0)
        self.task_id.fill(-1)
        self.pool.fill(EMPTY)
        self.counters[K.LAST_A] = -1
        self.counters[K.LAST_B] = -1
        self.scalars[S.RET_LO] = np.inf
        self.scalars[S.RET_HI] = -np.inf

    def clear_slot(self, slot: int, key: int, label: int) -> None:
        """Put task ``key`` (or nothing, with ``key=-1``) into ``slot`` with fresh statistics."""
        self.task_id[slot] = key
        self.pool[slot] = label
        self.count[slot] = 0
        self.age[slot] = 0
        self.samples[slot] = 0
        self.fast[slot] = 0.0
        self.slow[slot] = 0.0
        self.w2[slot] = 0.0
        self.base[slot] = 0.0
        self.ret_ema[slot] = 0.0
        self.cost_ema[slot] = 0.0
        self.raw[slot] = 0.0
        self.score[slot] = 0.0
        self.scored[slot] = 0
        self.last_sampled[slot] = self.counters[K.SAMPLES]  # fresh: stale since it entered
        self.counters[K.VERSION] += 1
