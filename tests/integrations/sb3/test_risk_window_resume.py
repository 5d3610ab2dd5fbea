"""The Lagrangian agents' risk reference window survives save/load, NaNs and all.

A model saved with a NaN risk value in its reference window (by a run before 3bc687d, say,
when one such value held M at 1) loads with the window as it was; the modulation then leaves
the NaN out, so M comes from the finite values as in the run that saved it.
"""

from __future__ import annotations

import math
import warnings

import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.integrations.sb3 import PPOLag
from gymcurric.safety import RiskModulation, modulation
from tests.integrations.sb3.hazard_runs import SMALL, logged, silent
from tests.integrations.sb3.info_values import vec_with

RISK = {"min_episodes": 0, "reference_window": 20}


def test_a_window_with_nans_round_trips_and_the_nans_stay_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(modulation, "_NON_FINITE_WARNED", set(), raising=False)
    env = vec_with("risk", [0.5, math.nan])
    model = silent(PPOLag("MlpPolicy", env, seed=0, risk_modulation=RISK, **SMALL))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.learn(2 * SMALL["n_steps"] * 2)
    saved = list(model._risk_reference)
    assert sum(math.isnan(x) for x in saved) == len(saved) // 2  # sub-env 1's NaNs
    model.save(tmp_path / "model.zip")

    loaded = PPOLag.load(tmp_path / "model.zip", env=vec_with("risk", [0.5, 0.5]))
    window = loaded._risk_reference
    assert window.maxlen == RISK["reference_window"]
    assert [x if not math.isnan(x) else "nan" for x in window] == [
        x if not math.isnan(x) else "nan" for x in saved
    ]
    assert loaded.risk_modulation == RiskModulation(**RISK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # what the loaded agent computes from the window: the finite values only, M < 1
        mod = loaded.risk_modulation.modulation([0.5], list(window), episodes_seen=100)
    finite = [x for x in saved if not math.isnan(x)]
    assert mod == loaded.risk_modulation.modulation([0.5], finite, episodes_seen=100)
    assert mod.status == "ok" and mod.scale < 1.0
    silent(loaded).learn(2 * SMALL["n_steps"] * 2, reset_num_timesteps=False)
    assert logged(loaded)["risk/modulation_scale"] < 1.0
