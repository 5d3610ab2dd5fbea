"""Counts given as numpy integers (``np.int64(2)``, as read out of an array) are accepted
wherever a plain int is, and kept as the Python int; a bool of either kind is not a count."""

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import Shaper, ShapingConfig

from .stubs import caption_embedder


def _is_plain(value, expected):
    return type(value) is int and value == expected


def test_shaper_num_envs():
    shaper = Shaper(ShapingConfig(), caption_embedder(), num_envs=np.int64(2))
    assert _is_plain(shaper.num_envs, 2)
    for bad in (np.bool_(True), True, np.int64(0)):
        with pytest.raises(ConfigError, match="'num_envs'"):
            Shaper(ShapingConfig(), caption_embedder(), num_envs=bad)


def test_risk_annotator_num_envs():
    pytest.importorskip("torch")
    from gymcurric.semantics.risk import RiskAnnotator

    ann = RiskAnnotator(np.int32(3))
    assert _is_plain(ann.num_envs, 3) and _is_plain(ann.pending.num_envs, 3)
    for bad in (np.bool_(True), 0, 2.0):
        with pytest.raises(ConfigError, match="RiskAnnotator: invalid value for 'num_envs'"):
            RiskAnnotator(bad)
