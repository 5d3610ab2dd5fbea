"""The pre-registered goal of ``semantic_safety.py``, per arm and env, from the records' metrics.

``reference/semantic_safety/README.md``, section Goal: for one of the four guided conditions
(:data:`GUIDED`, prompts ``specific``; ``risk`` has none), on **each** env,

* the ratio of mean cumulative training cost to ``ppolag``'s (paired by seed) is at most
  :data:`GOAL_RATIO` and its bootstrap 95 % CI lies below 1 (``met``; ``strict`` when the
  whole CI is at most :data:`GOAL_RATIO`);
* the last-10 % return is not significantly worse: the bootstrap 95 % CI of the paired
  difference (condition - ``ppolag``) reaches 0 or above.

The goal is met when the same condition meets both on both envs. Secondary (*Confirmed*,
reported, no goal): non-inferiority of the last-10 % return at a margin of :data:`NI_MARGIN`,
the paired difference's CI lower end above ``-NI_MARGIN x`` ``ppolag``'s mean last-10 % return
(:func:`non_inferior`).

The records passed here carry ``metrics`` (:func:`_semantic_metrics.run_metrics`), as
:func:`_semantic_report.load_records` gives them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from _semantic_metrics import paired_diff, paired_ratio
from _semantic_prompts import NO_PROMPTS, PRIMARY

__all__ = [
    "BASE",
    "GOAL_RATIO",
    "GUIDED",
    "NI_MARGIN",
    "PLANNED_SEEDS",
    "SHAPED",
    "arm",
    "arm_goal",
    "by_seed",
    "goal_verdict",
    "ni_margin",
    "non_inferior",
    "primary",
]

GOAL_RATIO = 0.75  # cumulative training cost at most 75 % of PPOLag's
NI_MARGIN = 0.10  # secondary: last-10 % return non-inferior at 10 % of PPOLag's mean
PLANNED_SEEDS = 5  # per arm (semantic_safety.SEEDS): a verdict on fewer is provisional
SHAPED = ("pbrs", "additive", "pbrs_risk")
GUIDED = ("pbrs", "additive", "risk", "pbrs_risk")  # the goal's four conditions
BASE = ("ppolag", NO_PROMPTS)

Paired = tuple[float, float, float, int]


def arm(r: dict[str, Any]) -> tuple[str, str]:
    """A record's (condition, prompt set)."""
    return r["condition"], r["prompts"]


def by_seed(rs: list[dict[str, Any]], a: tuple[str, str], key: str) -> dict[int, float]:
    """``{seed: metrics[key]}`` of arm ``a``'s records."""
    return {r["seed"]: r["metrics"][key] for r in rs if arm(r) == a}


def primary(a: tuple[str, str]) -> bool:
    """Whether arm ``a`` is one the goal is judged on (a guided condition, primary prompts)."""
    return a[0] not in ("ppolag", "null") and a[1] in (PRIMARY, NO_PROMPTS)


def goal_verdict(ratio: Paired | None, ret_diff: Paired | None) -> str:
    """The pre-registered goal for one arm: ``met``, ``strict`` (CI ≤ 0.75 too) or ``no``.

    Met: the cumulative training cost ratio to ``ppolag`` is at most :data:`GOAL_RATIO` with
    its 95 % CI below 1, and the last-10 % return is not significantly worse (the CI of the
    paired difference reaches 0 or above). Fewer than 2 paired seeds: ``—``.
    """
    if ratio is None or ret_diff is None or min(ratio[3], ret_diff[3]) < 2:
        return "—"  # one seed has no interval
    if not (ratio[0] <= GOAL_RATIO and ratio[2] < 1.0 and ret_diff[2] >= 0.0):
        return "no"
    return "**strict**" if ratio[2] <= GOAL_RATIO else "**met**"


def non_inferior(ret_diff: Paired | None, base_mean: float) -> str:
    """The pre-registered secondary criterion: ``yes`` when the last-10 % return is non-inferior.

    Non-inferior at a margin of :data:`NI_MARGIN`: the lower end of the paired difference's
    bootstrap 95 % CI (condition - ``ppolag``) lies above ``-NI_MARGIN x |base_mean|``,
    ``base_mean`` being ``ppolag``'s mean last-10 % return over the same seeds (its size: a
    margin is a tolerance, so a negative mean does not turn it into a bar above 0). Fewer than 2
    paired seeds (or no finite mean): ``—``. Example: ``base_mean`` 2.5, margin -0.25: a CI
    lower end of -0.2 is non-inferior (``yes``), one of -0.3 is not (``no``).
    """
    if ret_diff is None or ret_diff[3] < 2 or not np.isfinite(base_mean):
        return "—"
    return "yes" if ret_diff[1] > -ni_margin(base_mean) else "no"


def ni_margin(base_mean: float) -> float:
    """The non-inferiority tolerance, > 0: :data:`NI_MARGIN` of ``ppolag``'s mean's size."""
    return NI_MARGIN * abs(base_mean)


def _paired_mean(x: dict[int, float], y: dict[int, float]) -> float:
    """Mean of ``y`` over the seeds where both ``x`` and ``y`` are finite (NaN if none)."""
    seeds = [s for s in set(x) & set(y) if np.isfinite(x[s]) and np.isfinite(y[s])]
    return float(np.mean([y[s] for s in seeds])) if seeds else math.nan


def arm_goal(rs: list[dict[str, Any]], a: tuple[str, str]) -> dict[str, Any]:
    """Arm ``a`` against ``ppolag`` in ``rs`` (one env): the goal's numbers and verdicts.

    ``ratio`` (cumulative cost, ratio of means) and ``d_ret`` (last-10 % return, mean paired
    difference): ``(point, CI low, CI high, paired seeds)`` or None; ``verdict``
    (:func:`goal_verdict`); ``base_mean`` and ``ni`` (:func:`non_inferior`).
    """
    ratio = paired_ratio(by_seed(rs, a, "cum_cost"), by_seed(rs, BASE, "cum_cost"))
    ret, base = by_seed(rs, a, "last10_return"), by_seed(rs, BASE, "last10_return")
    d_ret = paired_diff(ret, base)
    base_mean = _paired_mean(ret, base)
    return {
        "ratio": ratio,
        "d_ret": d_ret,
        "verdict": goal_verdict(ratio, d_ret),
        "base_mean": base_mean,
        "ni": non_inferior(d_ret, base_mean),
    }
