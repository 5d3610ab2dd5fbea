"""Diagnostics over the curriculum state: Gini coefficients, entropy, the flat stats dict.

All functions are O(n log n) at most and run when ``Curriculum.stats()`` is called (typically
once per logging interval), never on the sample/update path.
"""

from __future__ import annotations

import numpy as np

from gymcurric.tasks.state import CurriculumState, K

__all__ = ["base_stats", "entropy", "gini"]


def gini(x: np.ndarray) -> float:
    """Gini coefficient of non-negative values: 0 = all equal, -> 1 = all mass on one.

    ``G = sum_i (2 i - n - 1) x_(i) / (n sum x)`` over the ascending order statistics ``x_(i)``,
    ``i = 1..n``. Returns 0 for an empty vector or a zero sum.

    Examples:
        >>> gini(np.array([1.0, 1.0, 1.0])), round(gini(np.array([0.0, 0.0, 3.0])), 3)
        (0.0, 0.667)
    """
    v = np.sort(np.clip(np.asarray(x, dtype=np.float64).ravel(), 0.0, None))
    n = v.size
    total = float(v.sum())
    if n == 0 or total <= 0.0:
        return 0.0
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(np.dot(2.0 * i - n - 1.0, v) / (n * total))


def entropy(p: np.ndarray) -> float:
    """Shannon entropy (nats) of a probability vector; zeros are skipped."""
    q = p[p > 0.0]
    return float(-(q * np.log(q)).sum()) if q.size else 0.0


def base_stats(st: CurriculumState) -> dict[str, float]:
    """Pool-independent ``curriculum/...`` statistics of the state."""
    c = st.counters
    active = st.pool >= 0
    n = int(np.count_nonzero(active))
    prob, raw = st.prob[active], st.raw[active]
    warm = active & (st.count > 0)
    g_raw, g_prob = gini(raw), gini(prob)
    return {
        "curriculum/num_tasks": float(n),
        "curriculum/updates": float(c[K.UPDATES]),
        "curriculum/samples": float(c[K.SAMPLES]),
        "curriculum/recomputes": float(c[K.RECOMPUTES]),
        "curriculum/evictions": float(c[K.EVICTIONS]),
        "curriculum/invalid_generated": float(c[K.INVALID_GENERATED]),
        "curriculum/invalid_reported": float(c[K.INVALID_REPORTED]),
        "curriculum/stale_updates": float(c[K.STALE_UPDATES]),
        "curriculum/scores": float(c[K.SCORES]),
        "curriculum/stale_scores": float(c[K.STALE_SCORES]),
        "curriculum/nonfinite_scores": float(c[K.NONFINITE_SCORES]),
        "curriculum/entropy": entropy(prob),
        "curriculum/entropy_norm": entropy(prob) / float(np.log(n)) if n > 1 else 1.0,
        "curriculum/max_prob": float(prob.max()) if n else 0.0,
        "curriculum/mean_lp": float(raw.mean()) if n else 0.0,
        "curriculum/mean_success": float(st.fast[warm].mean()) if warm.any() else 0.0,
        "curriculum/gini_occupancy": gini(st.count[active]),
        "curriculum/gini_raw_lp": g_raw,
        "curriculum/gini_probs": g_prob,
        "curriculum/selectivity_loss": g_raw - g_prob,
    }
