"""ShapingConfig takes numpy scalars as the Python numbers of the same value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import ShapingConfig

FLOATS = ["beta_start", "beta_end_fraction", "gamma", "margin_scale", "clamp", "confidence_min"]
INTS = ["total_steps", "margin_norm_window", "capture_interval", "pool_k", "batch_max"]


@pytest.mark.parametrize("name", [*FLOATS, "probe_tolerance"])
@pytest.mark.parametrize("scalar", [np.float32, np.float16, np.float64])
def test_numpy_floats_are_taken_with_their_value(name, scalar):
    given = scalar(0.1)
    cfg = ShapingConfig(**{name: given})
    value = getattr(cfg, name)
    assert isinstance(value, float) and value == float(given)
    json.dumps(cfg.to_dict())  # still JSON-safe


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
