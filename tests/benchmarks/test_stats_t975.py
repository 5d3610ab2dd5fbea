"""benchmarks/_stats: Student t's 97.5 % quantile beyond the table (it used 1.96 from 16 on)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.benchmarks import load_script

stats = load_script("_stats")

# scipy.stats.t.ppf(0.975, df)
T975 = {1: 12.706205, 15: 2.131450, 16: 2.119905, 17: 2.109816, 20: 2.085963, 30: 2.042272,
        60: 2.000298, 120: 1.979930, 1000: 1.962339}  # fmt: skip


@pytest.mark.parametrize("df", sorted(T975))
def test_t975_matches_the_exact_quantile(df: int) -> None:
    # the table holds 3 decimals; beyond it the expansion is claimed within 1e-4 (a 1e-3
    # tolerance also passed the expansion cut after its second term: 6e-4 off at df 16)
    assert stats.t975(df) == pytest.approx(T975[df], abs=5e-4 if df <= 15 else 1e-4)


@pytest.mark.parametrize("df", [0, -1, -16])
def test_t975_refuses_fewer_than_one_degree_of_freedom(df: int) -> None:
    # a negative df indexed the table from its end (t975(-1) gave df 15's 2.131)
    with pytest.raises(ValueError, match=rf"'df'.*{df}"):
        stats.t975(df)


def test_ci95_of_17_values_uses_the_t_quantile_not_1_96() -> None:
    x = np.arange(17, dtype=float)
    mean, half = stats.ci95(x)
    assert mean == 8.0
    assert half == pytest.approx(T975[16] * x.std(ddof=1) / math.sqrt(17), rel=1e-4)
