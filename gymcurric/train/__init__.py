"""``gymcurric train``: one config composes env, wrappers and agent; runs into a directory.

Entry-point layer (see DESIGN.md): it may import every other layer. Importing this package
needs only numpy and gymnasium; SB3, torch and matplotlib are imported when a run starts.
"""

from __future__ import annotations

from gymcurric.train.config import TrainConfig, apply_overrides, load_config
from gymcurric.train.runner import RunResult, default_run_name, resume, train

__all__ = [
    "RunResult",
    "TrainConfig",
    "apply_overrides",
    "default_run_name",
    "load_config",
    "resume",
    "train",
]
