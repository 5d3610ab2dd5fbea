"""The skip every Safety-Gymnasium test shares (fixture: ``safety_installed`` in conftest)."""

from __future__ import annotations

import importlib.util

import pytest


def needs_safety() -> None:
    """Skip the calling test unless mujoco and safety-gymnasium are installed."""
    pytest.importorskip("mujoco")
    # Not importorskip: importing safety_gymnasium runs its __init__, which fails on
    # Gymnasium 1.x with ModuleNotFoundError, and importorskip would then always skip.
    if importlib.util.find_spec("safety_gymnasium") is None:
        pytest.skip("safety-gymnasium is not installed")
