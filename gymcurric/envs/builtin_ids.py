"""Registration of the built-in pure-numpy envs."""

from __future__ import annotations

__all__ = ["register_builtin_envs"]


def register_builtin_envs() -> None:
    """Register ``gymcurric/HazardNav-v0`` and ``gymcurric/HazardGrid-v0`` (idempotent)."""
