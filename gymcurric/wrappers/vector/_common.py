"""Helpers shared by the vector wrappers."""

from __future__ import annotations

from gymnasium.vector import AutoresetMode, VectorEnv

from gymcurric.errors import ConfigError


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The env's autoreset mode; Gymnasium's default (``NEXT_STEP``) when it declares none."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if not isinstance(mode, AutoresetMode):
        raise ConfigError(
            "metadata['autoreset_mode']", mode, "expected a gymnasium.vector.AutoresetMode"
        )
    return mode
