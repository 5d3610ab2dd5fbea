"""The safety-gymnasium task ids gymcurric serves, and their registration (no mujoco import)."""

from __future__ import annotations

__all__ = ["SAFETY_GYMNASIUM_IDS", "register_safety_envs"]

SAFETY_GYMNASIUM_IDS: tuple[str, ...] = ()


def register_safety_envs() -> None:
    """Register ``gymcurric/<safety id>`` for every id in :data:`SAFETY_GYMNASIUM_IDS`."""
