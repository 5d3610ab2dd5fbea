"""A callback that writes NaN into a rollout-buffer array, for the non-finite update tests."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback


class Poison(BaseCallback):
    """At the end of every rollout, NaN into ``rollout_buffer.<field>[index]`` (all by default)."""

    def __init__(self, field: str, index: Any = slice(None)):
        super().__init__()
        self.field = field
        self.index = index

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        getattr(self.model.rollout_buffer, self.field)[self.index] = np.nan
