"""Costs and risks written as text or bytes are refused by the safe agents; bools are 0 and 1.

``float()`` and ``np.array(..., float64)`` read ``"0.5"`` and ``b"1"`` as numbers, so the safe
agents trained on them without a word. They now check what they read as the cost wrappers do
(:func:`gymcurric.safety.costs.check_cost_values`): a ``ConfigError`` naming the info key, the
sub-env and the value. A bool (an indicator, ``info["cost"] = collided``) is read as 0 or 1, a
risk's too, as before.
"""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import PPOLag, PPOSimmer, VecSimmer
from gymcurric.integrations.sb3.common import constraints, risk_values
from gymcurric.integrations.sb3.common.constraints import read_costs
from gymcurric.integrations.sb3.common.risk_values import read_risks, refuse_unreadable_risks
from gymcurric.safety.costs import check_cost_values
from tests.integrations.sb3.hazard_runs import SMALL, assert_same, logged, policy_params, silent
from tests.integrations.sb3.info_values import vec_with

#: what ``float()`` reads as a number but no cost or risk is
TEXT = ["0.5", b"1", bytearray(b"1"), np.str_("2"), np.array("0.5"), np.bytes_(b"1")]
BOOLS = [True, False, np.bool_(True), np.bool_(False)]
RISK = {"min_episodes": 0, "reference_window": 20}


def _text_refused(error, key, env):
    assert error.key == key and error.source in ("PPOLag", "VecSimmer.step", "x")
    assert f"sub-env {env}: " in error.reason and "text or bytes is refused" in error.reason


@pytest.mark.parametrize("text", TEXT, ids=repr)
def test_read_costs_refuses_a_cost_written_as_text_naming_the_sub_env(text):
    with pytest.raises(ConfigError) as info:
        read_costs([{"cost": 0.5}, {"cost": text}], n_costs=1, vector=False, keys=None, source="x")
    _text_refused(info.value, "info['cost']", 1)
    assert info.value.value == text.item() if isinstance(text, np.ndarray) else text
    with pytest.raises(ConfigError) as info:  # a cost key
        read_costs([{"a": text, "b": 1.0}], n_costs=2, vector=True, keys=("a", "b"), source="x")
    _text_refused(info.value, "info['a']", 0)
    infos = [{"costs": [0.5, 1.0]}, {"costs": [0.5, text]}]  # an entry of info["costs"]
    with pytest.raises(ConfigError) as info:
        read_costs(infos, n_costs=2, vector=True, keys=None, source="x")
    _text_refused(info.value, "info['costs']", 1)
    assert "at index 1" in info.value.reason


def test_read_costs_reads_bools_as_0_and_1():
    infos = [{"cost": flag} for flag in BOOLS]
    costs = read_costs(infos, n_costs=1, vector=False, keys=None, source="x")
    assert costs.tolist() == [1.0, 0.0, 1.0, 0.0] and costs.dtype == np.float64
    infos = [{"costs": [True, 0.5]}, {"costs": np.array([False, True])}]
    costs = read_costs(infos, n_costs=2, vector=True, keys=None, source="x")
    assert costs.tolist() == [[1.0, 0.5], [0.0, 1.0]]


@pytest.mark.parametrize("text", ["0.5", b"1"], ids=repr)
def test_ppolag_stops_at_a_cost_written_as_text(text):
    model = silent(PPOLag("MlpPolicy", vec_with("cost", [0.0, text]), seed=0, **SMALL))
    with pytest.raises(ConfigError) as info:
        model.learn(SMALL["n_steps"] * 2)
    _text_refused(info.value, "info['cost']", 1)
    assert info.value.value == text


@pytest.mark.parametrize("text", TEXT, ids=repr)
def test_ppolag_stops_at_a_risk_written_as_text(text):
    model = PPOLag(
        "MlpPolicy", vec_with("risk", [0.5, text]), risk_modulation=RISK, seed=0, **SMALL
    )
    with pytest.raises(ConfigError) as info:
        silent(model).learn(SMALL["n_steps"] * 2)
    error = info.value
    assert error.key == "info['risk']" and error.source == "PPOLag"
    assert f"sub-env 1: {text!r}" in error.reason and "sub-env 0" not in error.reason
    assert "a risk written as text or bytes is refused" in error.reason


def test_a_bool_risk_is_0_or_1_as_float_reads_it():
    def run(risks):
        model = PPOLag("MlpPolicy", vec_with("risk", risks), risk_modulation=RISK, seed=0, **SMALL)
        silent(model).learn(2 * SMALL["n_steps"] * 2)
        return logged(model)["risk/modulation_scale"], policy_params(model)

    flags, numbers = run([True, np.bool_(False)]), run([1.0, 0.0])
    assert flags[0] == numbers[0] < 1.0
    assert_same(flags[1], numbers[1])


def test_vec_simmer_stops_at_a_cost_written_as_text():
    venv = VecSimmer(vec_with("cost", [0.0, "0.5"]), 4.0, max_episode_steps=50)
    venv.reset()
    with pytest.raises(ConfigError) as info:
        venv.step(np.zeros((2, 2), np.float32))
    _text_refused(info.value, "info['cost']", 1)
    model = PPOSimmer("MlpPolicy", vec_with("cost", [True, b"1"]), seed=0, max_episode_steps=50)
    with pytest.raises(ConfigError, match=r"sub-env 1: .*got bytes"):
        silent(model).learn(64)


def test_the_refusal_of_a_risk_says_a_nan_is_left_out_not_m_1():
    """Since 3bc687d a NaN risk is left out of M, which is 1 only when no finite one is left."""
    model = PPOLag(
        "MlpPolicy", vec_with("risk", [None, 0.5]), risk_modulation=RISK, seed=0, **SMALL
    )
    with pytest.raises(ConfigError) as info:
        silent(model).learn(SMALL["n_steps"] * 2)
    reason = info.value.reason
    assert "read as an anomaly (M = 1)" not in reason
    assert "infinite risk is an anomaly, left out of M (M = 1 only when no finite risk" in reason
    doc = " ".join(refuse_unreadable_risks.__doc__.split())
    assert "stays an anomaly (M = 1)" not in doc and "turn the risk hook off (M = 1)" not in doc
    assert "M = 1 for non-finite values only when no finite value is left" in doc


#: one step's costs or risks of every numeric kind a sub-env reports
NUMBERS = [0.5, np.float32(0.25), np.float64(1.5), 2, np.int64(1), True, np.False_, np.array(3.0)]


def test_a_step_of_numbers_is_read_with_no_check_per_sub_env(monkeypatch):
    # a per-step hot path: check_cost_values of each sub-env was some 6 Python calls per
    # sub-env per step (3% of a 4-env PPOLag rollout's calls); one np.asarray shows no text
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return check_cost_values(*args, **kwargs)

    monkeypatch.setattr(constraints, "check_cost_values", counted)
    monkeypatch.setattr(risk_values, "check_cost_values", counted)
    infos = [{"cost": value, "risk": value} for value in NUMBERS]
    costs = read_costs(infos, n_costs=1, vector=False, keys=None, source="x")
    assert costs.tolist() == [float(value) for value in NUMBERS]
    assert read_risks(infos, "x") == [float(value) for value in NUMBERS]
    assert calls == []
    # text among them is still looked at, and refused naming its sub-env
    with pytest.raises(ConfigError) as info:
        read_costs([*infos, {"cost": "0.5"}], n_costs=1, vector=False, keys=None, source="x")
    _text_refused(info.value, "info['cost']", len(NUMBERS))
    with pytest.raises(ConfigError, match=r"sub-env 8: '0\.5'"):
        read_risks([*infos, {"risk": "0.5"}], "x")
    # NumPy reads a bytearray as its bytes (uint8): looked at too, and refused
    with pytest.raises(ConfigError) as info:
        read_costs([{"cost": bytearray(b"1")}], n_costs=1, vector=False, keys=None, source="x")
    _text_refused(info.value, "info['cost']", 0)
