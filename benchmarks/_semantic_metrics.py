"""The metrics of ``semantic_safety.py``: per run from its record, and paired across runs.

Per run (:func:`run_metrics`, from a record's episodes and rollout rows alone):

* ``cum_cost``: the sum of every step's cost over training (total violations; HazardNav and
  Safety-Gymnasium's Goal tasks charge 1 per step inside a hazard), and ``violation_steps``,
  the steps whose cost was positive;
* ``return_auc20``: the normalised area under the learning curve over the first 20 % of the
  budget: that span cut into 10 equal windows, the mean return of the episodes ending in
  each, averaged over the windows (a window without an episode takes the previous one's;
  windows before the first episode are left out);
* ``last10_return`` / ``last10_cost``: mean return and cost of the episodes that ended in the
  last 10 % of the budget (the env's own return: shaping is added above the monitor);
* ``final_lambda``, ``max_lambda``, ``mean_lambda``: λ after each rollout's update;
* ``cpu_steps_per_s``: env steps per CPU-second of the training process (the host is shared,
  so wall time says more about the neighbours than about the run).

The risk head's quality (:func:`risk_quality`) is computed during the run from every step's
prediction (the per-step data is not kept): the Pearson correlation of the prediction made at
each state with the realised horizon-``H`` discounted cost-to-go from it (the head's own
target, :func:`gymcurric.safety.risk_targets.cost_to_go_targets`), over the whole run and over
its second half, and the calibration over the second half: predictions cut into 10 quantile
bins, each bin's mean prediction against its mean realised cost-to-go, and the expected
calibration error (ECE, the count-weighted mean gap).

Exploratory, not pre-registered (:func:`over_budget`): a Lagrangian agent is asked to hold
the mean episode cost at the record's cost limit, so ``limit x episodes`` of its cost is cost
the constraint allows; the rest, ``Σ_episodes (episode cost - limit)``, is what guidance could
remove (the HazardNav diagnosis in ``reference/semantic_safety/README.md``).

Across runs (:func:`paired_ratio`, :func:`paired_diff`): a condition against ``ppolag`` over
the seeds both have, the ratio of means or the mean difference with a paired bootstrap 95 %
interval (10,000 resamples of the seeds, seed 0).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "calibration",
    "last_fraction",
    "over_budget",
    "paired_diff",
    "paired_ratio",
    "return_auc",
    "risk_quality",
    "run_metrics",
]

BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES = 0, 10_000
AUC_FRACTION, AUC_WINDOWS, LAST_FRACTION = 0.2, 10, 0.1
CALIBRATION_BINS = 10


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def return_auc(
    t: Sequence[float],
    returns: Sequence[float],
    budget: int,
    fraction: float = AUC_FRACTION,
    windows: int = AUC_WINDOWS,
) -> float:
    """Mean over ``windows`` equal windows of ``[0, fraction·budget]`` of the window's mean return.

    ``t`` are the env steps at which the episodes ended. A window in which no episode ended
    takes the previous window's value; windows before the first episode are left out.

    Examples:
        Windows (0, 25], (25, 50], (50, 75], (75, 100]: 1.0, none (keeps 1.0), 4.0, 6.0.

        >>> return_auc([10, 20, 60, 90], [0.0, 2.0, 4.0, 6.0], 100, fraction=1.0, windows=4)
        3.0
    """
    t_arr, r_arr = np.asarray(t, dtype=float), np.asarray(returns, dtype=float)
    edges = np.linspace(0.0, fraction * budget, windows + 1)
    values, last = [], math.nan
    for lo, hi in itertools.pairwise(edges):
        inside = (t_arr > lo) & (t_arr <= hi)
        if inside.any():
            last = float(r_arr[inside].mean())
        values.append(last)
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def last_fraction(
    t: Sequence[float], values: Sequence[float], budget: int, fraction: float = LAST_FRACTION
) -> float:
    """Mean of ``values`` over the episodes that ended after ``(1 - fraction)·budget``."""
    t_arr, v = np.asarray(t, dtype=float), np.asarray(values, dtype=float)
    late = t_arr > (1.0 - fraction) * budget
    if not late.any():
        late = t_arr >= t_arr.max() if t_arr.size else late  # the last episode, if any
    return float(v[late].mean()) if late.any() else math.nan


def run_metrics(record: dict[str, Any]) -> dict[str, float]:
    """The per-run metrics of a record (see the module docstring)."""
    budget = int(record["config"]["budget"])
    ep = record["episodes"]
    rows = record["rows"]
    lam = np.array([_nan(r["lambda"]) for r in rows], dtype=float)
    out = {
        "cum_cost": float(record["cum_cost"]),
        "violation_steps": float(record["violation_steps"]),
        "return_auc20": return_auc(ep["t"], ep["r"], budget),
        "last10_return": last_fraction(ep["t"], ep["r"], budget),
        "last10_cost": last_fraction(ep["t"], ep["c"], budget),
        "final_lambda": float(lam[-1]) if lam.size else math.nan,
        "max_lambda": float(np.nanmax(lam)) if np.isfinite(lam).any() else math.nan,
        "mean_lambda": float(np.nanmean(lam)) if np.isfinite(lam).any() else math.nan,
        "cpu_steps_per_s": record["trained_steps"] / record["cpu_seconds"]
        if record.get("cpu_seconds")
        else math.nan,
        "episodes": float(len(ep["t"])),
    }
    risk = record.get("risk_quality") or {}
    out["risk_corr"] = _nan(risk.get("corr_late"))
    out["risk_corr_all"] = _nan(risk.get("corr_all"))
    out["risk_ece"] = _nan(risk.get("ece_late"))
    return out


def over_budget(record: dict[str, Any]) -> dict[str, float]:
    """Episodes, ``limit x episodes`` and ``Σ_episodes (episode cost - limit)`` of a record.

    Exploratory, not pre-registered (see the module docstring). The limit is the record's own
    ``config["lagrangian"]["cost_limit"]``; only finished episodes count.

    Examples:
        >>> r = {"config": {"lagrangian": {"cost_limit": 1.0}}, "episodes": {"c": [0, 3, 2]}}
        >>> over_budget(r)
        {'episodes': 3.0, 'allowed': 3.0, 'over_budget': 2.0}
    """
    limit = float(record["config"]["lagrangian"]["cost_limit"])
    cost = np.asarray(record["episodes"]["c"], dtype=float)
    allowed = limit * cost.size
    return {
        "episodes": float(cost.size),
        "allowed": allowed,
        "over_budget": float(cost.sum() - allowed),
    }


# ----------------------------------------------------------------------------- risk head


def calibration(pred: np.ndarray, real: np.ndarray, bins: int = CALIBRATION_BINS) -> dict[str, Any]:
    """Quantile bins of ``pred``: per bin the mean prediction, mean realised value and count.

    Ties may merge bins (their edges coincide); ``ece`` is the count-weighted mean absolute
    gap between a bin's mean prediction and its mean realised value.

    Examples:
        >>> c = calibration(np.array([0.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.2, 1.0, 0.6]), 2)
        >>> c["pred"], c["real"], c["count"], round(c["ece"], 3)
        ([0.0, 1.0], [0.1, 0.8], [2, 2], 0.15)
    """
    if pred.size == 0:
        return {"pred": [], "real": [], "count": [], "ece": math.nan}
    edges = np.unique(np.quantile(pred, np.linspace(0.0, 1.0, bins + 1)))
    idx = np.clip(np.searchsorted(edges, pred, side="right") - 1, 0, max(len(edges) - 2, 0))
    out: dict[str, Any] = {"pred": [], "real": [], "count": []}
    gap = 0.0
    for b in np.unique(idx):
        sel = idx == b
        p, r = float(pred[sel].mean()), float(real[sel].mean())
        out["pred"].append(p)
        out["real"].append(r)
        out["count"].append(int(sel.sum()))
        gap += sel.sum() * abs(p - r)
    out["ece"] = float(gap / pred.size)
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 3 or a.std() == 0.0 or b.std() == 0.0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def risk_quality(
    pred: np.ndarray,
    cost: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    *,
    gamma: float,
    horizon: int,
) -> dict[str, Any]:
    """How well the online predictions ``pred[t, i]`` track the realised cost-to-go.

    All arrays are time-major ``[T, n_envs]``: ``pred[t, i]`` is the prediction made at the
    state from which step ``t`` of env ``i`` was taken, ``cost`` that step's cost. Rows whose
    target is not final (the last ``H`` steps of an unfinished episode) are left out.
    """
    from gymcurric.safety.risk_targets import cost_to_go_targets

    out = cost_to_go_targets(cost, terminated, truncated, gamma=gamma, horizon=horizon)
    ready = out.ready
    late = np.zeros_like(ready)
    late[pred.shape[0] // 2 :] = True
    p_all, r_all = pred[ready].astype(np.float64), out.targets[ready]
    p_late, r_late = pred[ready & late].astype(np.float64), out.targets[ready & late]
    cal = calibration(p_late, r_late)
    return {
        "rows": int(ready.sum()),
        "corr_all": _corr(p_all, r_all),
        "corr_late": _corr(p_late, r_late),
        "pred_mean_late": float(p_late.mean()) if p_late.size else math.nan,
        "real_mean_late": float(r_late.mean()) if r_late.size else math.nan,
        "ece_late": cal["ece"],
        "calibration_late": cal,
        "gamma": gamma,
        "horizon": horizon,
    }


# ----------------------------------------------------------------------------- paired


def _paired(x: dict[int, float], y: dict[int, float]) -> tuple[np.ndarray, np.ndarray] | None:
    seeds = sorted(s for s in set(x) & set(y) if np.isfinite(x[s]) and np.isfinite(y[s]))
    if not seeds:
        return None
    return np.array([x[s] for s in seeds]), np.array([y[s] for s in seeds])


def _resample(n: int) -> np.ndarray:
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return rng.integers(0, n, (BOOTSTRAP_RESAMPLES, n))


def paired_ratio(
    x: dict[int, float], y: dict[int, float]
) -> tuple[float, float, float, int] | None:
    """``mean(x) / mean(y)`` over the seeds both have, paired bootstrap 95 % CI, n seeds.

    Examples:
        >>> paired_ratio({0: 1.0, 1: 3.0}, {0: 2.0, 1: 6.0})[:3]
        (0.5, 0.5, 0.5)
    """
    pair = _paired(x, y)
    if pair is None:
        return None
    a, b = pair
    idx = _resample(len(a))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = a[idx].mean(axis=1) / b[idx].mean(axis=1)
    lo, hi = np.nanpercentile(ratios, [2.5, 97.5])
    return float(a.mean() / b.mean()), float(lo), float(hi), len(a)


def paired_diff(x: dict[int, float], y: dict[int, float]) -> tuple[float, float, float, int] | None:
    """``mean(x - y)`` over the seeds both have, paired bootstrap 95 % CI, n seeds."""
    pair = _paired(x, y)
    if pair is None:
        return None
    d = pair[0] - pair[1]
    means = d[_resample(len(d))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi), len(d)
