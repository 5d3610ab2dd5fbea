"""ShapingConfig takes numpy scalars as the Python numbers of the same value.

Its lists take 1-D numpy arrays (or any sequences) of str or bools, kept as the tuples a list
gives.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from gymcurric.errors import ConfigError
from gymcurric.semantics import ShapingConfig

FLOATS = ["beta_start", "beta_end_fraction", "gamma", "margin_scale", "clamp", "confidence_min"]
INTS = ["total_steps", "margin_norm_window", "capture_interval", "pool_k", "batch_max"]


@pytest.mark.parametrize("name", [*FLOATS, "probe_tolerance"])
@pytest.mark.parametrize("scalar", [np.float32, np.float16, np.float64, np.longdouble])
def test_numpy_floats_are_taken_with_their_value(name, scalar):
    given = scalar(0.1)
    cfg = ShapingConfig(**{name: given})
    value = getattr(cfg, name)
    assert type(value) is float and value == float(given)
    json.dumps(cfg.to_dict())  # still JSON-safe
    # an np.float64 was kept as given, which yaml.safe_dump of to_dict() cannot represent
    assert yaml.safe_load(yaml.safe_dump(cfg.to_dict()))[name] == value


@pytest.mark.parametrize("name", [*INTS, "caption_cache_size"])
def test_numpy_integers_are_taken_as_ints(name):
    cfg = ShapingConfig(**{name: np.int64(7)})
    assert type(getattr(cfg, name)) is int and getattr(cfg, name) == 7
    cfg = ShapingConfig(beta_start=np.int32(1))  # an integer where a number is taken
    assert type(cfg.beta_start) is int and cfg.beta_start == 1


def test_python_numbers_are_kept_as_given():
    cfg = ShapingConfig(beta_start=1, gamma=0.5, total_steps=10)
    assert type(cfg.beta_start) is int and cfg.beta_start == 1 and cfg.gamma == 0.5
    assert ShapingConfig(beta_start=np.float32(0.1)).beta_start == float(np.float32(0.1))


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("beta_start", "0.1"),
        ("beta_start", np.bool_(True)),
        ("beta_start", True),
        ("beta_start", np.float32("nan")),
        ("gamma", np.float32(1.5)),
        ("total_steps", "10"),
        ("total_steps", np.float64(10.0)),
        ("pool_k", np.bool_(True)),
        ("pool_k", np.int64(0)),
    ],
)
def test_strings_bools_and_out_of_range_numpy_values_are_refused(name, bad):
    with pytest.raises(ConfigError) as info:
        ShapingConfig(**{name: bad})
    assert info.value.key == name and info.value.value is bad


STATES = ["The agent is inside a hazard.", "The path to the goal is clear."]


@pytest.mark.parametrize(
    "unsafe",
    [
        np.array([True, False]),
        [np.True_, np.False_],
        (True, False),
        np.array([True, False], object),
    ],
)
def test_probe_unsafe_takes_any_sequence_or_array_of_bools(unsafe):
    cfg = ShapingConfig(probe_states=STATES, probe_unsafe=unsafe)
    assert cfg.probe_unsafe == (True, False)
    assert all(type(u) is bool for u in cfg.probe_unsafe)
    assert cfg.to_dict() == ShapingConfig(probe_states=STATES, probe_unsafe=[True, False]).to_dict()
    json.dumps(cfg.to_dict())


@pytest.mark.parametrize("name", ["safe_prompts", "unsafe_prompts", "probe_states"])
def test_string_lists_take_arrays_and_sequences_of_str(name):
    extra = {"probe_unsafe": [True, False]} if name == "probe_states" else {}
    for given in (np.array(STATES), tuple(STATES), STATES):
        cfg = ShapingConfig(**{name: given}, **extra)
        assert getattr(cfg, name) == tuple(STATES)
        assert all(type(s) is str for s in getattr(cfg, name))
    same = ShapingConfig(**{name: STATES}, **extra)
    assert ShapingConfig(**{name: np.array(STATES)}, **extra).to_dict() == same.to_dict()


def test_lists_given_as_lists_are_stored_as_before():
    safe, states = ["a clear path"], [*STATES]
    cfg = ShapingConfig(safe_prompts=safe, probe_states=states, probe_unsafe=[True, False])
    assert cfg.safe_prompts[0] is safe[0] and cfg.probe_states[1] is states[1]


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("safe_prompts", "The path is clear."),
        ("safe_prompts", np.str_("The path is clear.")),
        ("safe_prompts", np.array("The path is clear.")),
        ("probe_states", "The agent is inside a hazard."),
        ("probe_states", np.array([STATES])),
        ("probe_unsafe", np.array([1, 0])),
        ("probe_unsafe", np.array([[True, False]])),
        ("probe_unsafe", np.array(True)),
        ("probe_unsafe", "10"),
    ],
)
def test_bare_strings_non_bools_and_other_shapes_are_refused(name, bad):
    fields = {"probe_states": STATES, "probe_unsafe": [True, False], name: bad}
    with pytest.raises(ConfigError) as info:
        ShapingConfig(**fields)
    assert info.value.key == name and info.value.value is bad
