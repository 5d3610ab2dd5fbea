import itertools
import math

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety.modulation import lagrange_modulation, lagrange_modulation_scale


def reference_formula(mean, q, alpha, slope, eps):
    z = min(max((mean - q) / (q / slope + eps), -20.0), 20.0)
    return 1.0 / (1.0 + alpha / (1.0 + math.exp(-z)))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("slope", [1.0, 4.0])
def test_matches_formula_with_reference_window(alpha, slope):
    rng = np.random.default_rng(0)
    ref = rng.exponential(1.0, 1000)
    recent = rng.exponential(1.3, 64)
    out = lagrange_modulation(
        recent, ref, alpha=alpha, quantile_p=0.8, slope=slope, episodes_seen=50
    )
    q = np.quantile(ref, 0.8)
    assert out.status == "ok"
    assert out.quantile == pytest.approx(q)
    assert out.mean == pytest.approx(recent.mean())
    assert out.scale == pytest.approx(reference_formula(recent.mean(), q, alpha, slope, 1e-6))


def test_quantile_defaults_to_the_recent_values():
    vals = np.linspace(0.0, 1.0, 11)
    out = lagrange_modulation(vals, episodes_seen=10)
    assert out.quantile == pytest.approx(0.9)
    assert out.scale == pytest.approx(reference_formula(0.5, 0.9, 1.0, 4.0, 1e-6))


def test_range_and_monotone_in_recent_risk():
    ref = np.linspace(0.0, 1.0, 101)
    scales = [
        lagrange_modulation_scale([m], ref, alpha=3.0, episodes_seen=10)
        for m in np.linspace(0.0, 10.0, 50)
    ]
    assert all(1 / 4 <= s <= 1.0 for s in scales)
    assert all(a >= b for a, b in itertools.pairwise(scales))
    assert scales[0] == pytest.approx(reference_formula(0.0, 0.9, 3.0, 4.0, 1e-6)) and scales[
        -1
    ] == pytest.approx(0.25, abs=1e-6)
    # z clipped at ±20: an absurd mean still gives a finite scale
    assert lagrange_modulation([1e300], ref, episodes_seen=10).z == 20.0


def test_episode_gate():
    ref = np.linspace(0.0, 1.0, 101)
    assert lagrange_modulation([5.0], ref, min_episodes=10, episodes_seen=9).status == "gated"
    assert lagrange_modulation_scale([5.0], ref, min_episodes=10, episodes_seen=9) == 1.0
    assert lagrange_modulation_scale([5.0], ref, min_episodes=10, episodes_seen=10) < 0.6


@pytest.mark.parametrize(
    ("recent", "ref", "reason"),
    [
        ([], None, "empty"),
        ([1.0], [], "empty"),
        ([1.0, np.nan], None, "non-finite"),
        ([1.0], [0.5, np.inf], "non-finite"),
        ([0.0, 0.0], None, "non-positive"),
        ([1.0], [-1.0, -2.0], "non-positive"),
        ([[1.0, "x"]], None, "unreadable"),
    ],
)
def test_anomalies_fall_back_to_one(recent, ref, reason):
    out = lagrange_modulation(recent, ref, episodes_seen=100)
    assert out.scale == 1.0
    assert out.status.startswith("fallback") and reason in out.status


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": -1.0},
        {"quantile_p": 1.0},
        {"quantile_p": 0.0},
        {"slope": 0.0},
        {"eps": 0.0},
        {"min_episodes": -1},
        {"alpha": float("nan")},
    ],
)
def test_invalid_configuration_raises_naming_it(kwargs):
    with pytest.raises(ConfigError) as err:
        lagrange_modulation([1.0], **kwargs)
    assert err.value.key == next(iter(kwargs))
