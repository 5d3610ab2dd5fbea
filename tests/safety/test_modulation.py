import dataclasses
import inspect
import itertools
import math

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety.modulation import (
    RiskModulation,
    lagrange_modulation,
    lagrange_modulation_scale,
)


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
        ([np.nan, np.inf], None, "non-finite"),  # no finite value left (test_non_finite.py)
        ([1.0], [np.nan, -np.inf], "non-finite"),
        ([np.nan], [0.5, 1.0], "non-finite"),
        ([0.0, 0.0], None, "non-positive"),
        ([1.0], [-1.0, -2.0], "non-positive"),
        ([[1.0, "x"]], None, "unreadable"),
    ],
)
@pytest.mark.filterwarnings("ignore:lagrange_modulation")
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


def test_risk_modulation_defaults_are_the_hook_defaults():
    # the function's defaults, plus the reference window the hook kept (10,000 values)
    defaults = {
        name: p.default
        for name, p in inspect.signature(lagrange_modulation).parameters.items()
        if p.kind is p.KEYWORD_ONLY and name != "episodes_seen"
    }
    assert dataclasses.asdict(RiskModulation()) == {**defaults, "reference_window": 10_000}


def test_risk_modulation_coerces_the_old_values():
    assert RiskModulation.coerce(None) is None and RiskModulation.coerce(False) is None
    assert RiskModulation.coerce(True) == RiskModulation()
    settings = RiskModulation(alpha=2.0, reference_window=5)
    assert RiskModulation.coerce(settings) is settings
    assert RiskModulation.coerce({"alpha": 2.0, "reference_window": 5}) == settings
    assert RiskModulation.coerce({}) == RiskModulation()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.alpha = 3.0  # type: ignore[misc]


def test_risk_modulation_scale_is_lagrange_modulation_with_its_settings():
    settings = RiskModulation(alpha=0.5, quantile_p=0.5, slope=2.0, min_episodes=3)
    recent, ref = [0.4, 0.9], [0.1, 0.2, 0.3, 0.5]
    kw = {k: v for k, v in dataclasses.asdict(settings).items() if k != "reference_window"}
    for seen in (0, 3):
        expected = lagrange_modulation(recent, ref, episodes_seen=seen, **kw)
        got = settings.modulation(recent, ref, episodes_seen=seen)
        assert (got.scale, got.status) == (expected.scale, expected.status)
    assert got.status == "ok" and 1 / 1.5 < got.scale < 1.0


def test_risk_modulation_unknown_keys_are_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown keys \['gain'\]; expected some of") as err:
        RiskModulation.coerce({"gain": 2.0, "alpha": 1.0}, source="PPOLag")
    assert err.value.key == "risk_modulation" and err.value.source == "PPOLag"
    assert "reference_window" in err.value.reason


@pytest.mark.parametrize(
    "settings",
    [
        {"alpha": -1.0},
        {"alpha": "1"},
        {"quantile_p": 1.0},
        {"slope": 0.0},
        {"eps": float("inf")},
        {"min_episodes": -1},
        {"min_episodes": True},
        {"reference_window": 0},
        {"reference_window": 2.5},
    ],
)
def test_risk_modulation_bad_values_are_keyed_by_field(settings):
    name = next(iter(settings))
    with pytest.raises(ConfigError) as err:
        RiskModulation.coerce(settings, source="PPOLag")
    assert err.value.key == f"risk_modulation.{name}" and err.value.source == "PPOLag"
    with pytest.raises(ConfigError) as direct:
        RiskModulation(**settings)
    assert direct.value.key == name


@pytest.mark.parametrize("value", ["on", 1, 0.5, ["alpha"]])
def test_risk_modulation_of_another_type_is_refused(value):
    with pytest.raises(ConfigError, match="expected a RiskModulation, a bool, a dict"):
        RiskModulation.coerce(value)


@pytest.mark.parametrize(
    "name, value",
    [
        ("alpha", 2.0),
        ("quantile_p", 0.5),
        ("slope", 3),
        ("eps", 1e-3),
        ("min_episodes", 4),
        ("episodes_seen", 12),
    ],
)
def test_lagrange_modulation_takes_a_0d_array_as_its_number(name, value):
    # a 0-d array (np.load, arr.sum(keepdims=...)[()] forgotten) was read as its number
    # before 8d2055b's checks; its result is the scalar's, bit for bit
    window = [0.0, 0.1, 0.2, 0.3, 1.0, 0.05]
    given = {"episodes_seen": 10, name: np.array(value)}
    expected = lagrange_modulation([0.25, 0.4], window, **{**given, name: value})
    got = lagrange_modulation([0.25, 0.4], window, **given)
    assert got.status == expected.status == "ok"
    assert [float(x).hex() for x in got[:4]] == [float(x).hex() for x in expected[:4]]
    with pytest.raises(ConfigError, match=f"'{name}'"):
        lagrange_modulation([0.25], window, **{name: np.array("x")})
