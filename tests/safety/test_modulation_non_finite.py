"""A NaN or infinite risk value is left out of the modulation's mean and quantile, with one
warning per process, rather than making M = 1 for as long as it stays in the window."""

import warnings
from collections import deque

import numpy as np
import pytest

from gymcurric.errors import GymcurricWarning
from gymcurric.safety import modulation
from gymcurric.safety.modulation import RiskModulation, lagrange_modulation


@pytest.fixture(autouse=True)
def fresh_warning(monkeypatch):
    """Each test starts with no warning given (it is given once per process)."""
    monkeypatch.setattr(modulation, "_NON_FINITE_WARNED", set(), raising=False)


def test_non_finite_values_are_left_out_and_warned_of_once():
    rng = np.random.default_rng(0)
    ref = rng.exponential(1.0, 500)
    recent = ref[-40:] * 1.5
    bad_ref = np.concatenate([ref[:100], [np.nan], ref[100:], [np.inf, -np.inf]])
    bad_recent = np.concatenate([[np.nan], recent])
    with pytest.warns(GymcurricWarning, match=r"1 of 41 recent .* 3 of 503 in the reference"):
        out = lagrange_modulation(bad_recent, bad_ref, episodes_seen=100)
    assert out == lagrange_modulation(recent, ref, episodes_seen=100)  # bit for bit
    assert out.status == "ok" and out.scale < 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        again = lagrange_modulation(bad_recent, bad_ref, episodes_seen=100)
    assert again == out
    # no reference given: the recent values' own finite ones
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = lagrange_modulation(bad_recent, episodes_seen=100)
    assert own == lagrange_modulation(recent, episodes_seen=100)


def test_with_no_finite_value_left_m_is_one():
    # the warning does not send one to AnnotateRisk's head: it reports a non-finite prediction
    # as 0 (docs/risk.md, Fail-soft), so these came from another source
    with pytest.warns(GymcurricWarning, match=r"not from AnnotateRisk, .* as 0\); .* left out"):
        out = lagrange_modulation([np.nan], [np.inf, np.nan], episodes_seen=100)
    assert out.scale == 1.0 and out.status == "fallback: non-finite risk value"


def test_one_nan_in_the_window_does_not_switch_the_modulation_off():
    """As the Lagrangian agents keep the window: a deque of the last reference_window values."""
    settings = RiskModulation(min_episodes=0, reference_window=10_000)
    window: deque[float] = deque(maxlen=settings.reference_window)
    rng = np.random.default_rng(1)
    scales = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rollout in range(20):
            recent = list(rng.exponential(1.0 + rollout / 10, 256))
            if rollout == 2:
                recent[7] = float("nan")  # one bad prediction
            window.extend(recent)
            scales.append(settings.modulation(recent, list(window), episodes_seen=rollout).scale)
    assert all(scale < 1.0 for scale in scales)
