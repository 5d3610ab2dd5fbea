"""gymcurric: curriculum, datapacks, semantic shaping and cost/risk annotation for Gymnasium.

``import gymcurric`` needs only numpy and gymnasium; it registers the ``gymcurric/…`` env ids.
torch, transformers, Stable-Baselines3, mujoco and ray are imported only by the parts that use
them, with an error naming the extra to install when they are missing.
"""

from __future__ import annotations

from gymcurric import envs as envs  # registers the gymcurric/… ids
from gymcurric.errors import (
    ConfigError,
    DataError,
    DependencyNotInstalled,
    EnvUnavailableError,
    GymcurricError,
    GymcurricWarning,
    InfoKeyConflictError,
    NonFiniteValueError,
    TaskError,
    WorkerError,
)

__version__ = "0.1.0"

__all__ = [
    # errors
    "ConfigError",
    "DataError",
    "DependencyNotInstalled",
    "EnvUnavailableError",
    "GymcurricError",
    "GymcurricWarning",
    "InfoKeyConflictError",
    "NonFiniteValueError",
    "TaskError",
    "WorkerError",
    "__version__",
    "envs",
]
