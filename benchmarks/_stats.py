"""Small statistics shared by the benchmark scripts (no scipy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Student t 97.5 % quantiles for 0..15 degrees of freedom (index 0 unused)
T975 = (
    math.nan,
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
)


def ci95(x: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % Student-t interval (0 for one value)."""
    a = np.asarray(x, dtype=float)
    if len(a) < 2:
        return float(a.mean()) if len(a) else math.nan, 0.0
    df = len(a) - 1
    t = T975[df] if df < len(T975) else 1.96
    half = t * a.std(ddof=1) / math.sqrt(len(a))
    return float(a.mean()), float(half)
