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


def t975(df: int) -> float:
    """Student t's 97.5 % quantile: the table to 15 degrees of freedom, then the
    Cornish-Fisher expansion about the normal quantile (error < 1e-4 from 16 on).

    Raises:
        ValueError: ``df`` is below 1.
    """
    if df < 1:  # a negative index would read the table from its end
        raise ValueError(f"invalid value for 'df': {df!r} (expected an int >= 1)")
    if df < len(T975):
        return T975[df]
    z = 1.959964
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def ci95(x: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % Student-t interval (0 for one value)."""
    a = np.asarray(x, dtype=float)
    if len(a) < 2:
        return float(a.mean()) if len(a) else math.nan, 0.0
    df = len(a) - 1
    t = t975(df)
    half = t * a.std(ddof=1) / math.sqrt(len(a))
    return float(a.mean()), float(half)
