"""Render sizes given as numpy integers (``np.int64(32)``) are accepted as plain ints are."""

import numpy as np
import pytest

from gymcurric.envs.safety_gymnasium import build_raw_safety_env
from gymcurric.errors import ConfigError, EnvUnavailableError


def test_safety_render_sizes_may_be_numpy_ints(monkeypatch):
    """Checked before Safety-Gymnasium loads: a numpy width/height passes on to the next check."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    size = {"width": np.int64(32), "height": np.int32(24)}
    with pytest.raises(EnvUnavailableError, match="display"):
        build_raw_safety_env("SafetyPointGoal0-v0", render_mode="human", **size)
    with pytest.raises(ConfigError, match="'width'"):
        build_raw_safety_env("SafetyPointGoal0-v0", width=np.bool_(True))
