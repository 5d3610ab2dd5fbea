"""The ring of recent raw margins that the shaper normalises against, with exact running sums."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class MarginWindow:
    """The last ``size`` raw margins (all envs) and their running Σx and Σx².

    The sums are kept up to date on every push and re-summed exactly once per turn of the
    ring, so rounding never accumulates. :meth:`state_dict` holds the sums too: a restored
    window normalises exactly as the saved one would have.
    """

    def __init__(self, size: int) -> None:
        self.values = np.zeros(size, dtype=np.float64)
        self.count = 0
        self.pos = 0
        self.total = self.total_sq = 0.0

    def push(self, raw: FloatArray) -> None:
        """Write ``raw`` into the ring (a batch larger than it keeps only its last values)."""
        w, size, k = self.values, self.values.size, raw.size
        vals = raw[-size:]
        start = (self.pos + k - vals.size) % size
        end = start + vals.size
        if end <= size:
            old = w[start:end]
            self.total += float(vals.sum() - old.sum())
            self.total_sq += float(vals @ vals - old @ old)
            w[start:end] = vals
        else:  # wraps: two slices
            cut = size - start
            w[start:] = vals[:cut]
            w[: end - size] = vals[cut:]
        self.pos = int((self.pos + k) % size)
        self.count = min(self.count + k, size)
        if end >= size:  # once per turn: re-sum exactly
            self.resum()

    def resum(self) -> None:
        """Recompute Σx and Σx² from the values."""
        self.total = float(self.values.sum())
        self.total_sq = float(self.values @ self.values)

    def mean_std(self) -> tuple[float, float]:
        """Mean and (population) standard deviation of the values in the window."""
        mean = self.total / self.count
        return mean, math.sqrt(max(self.total_sq / self.count - mean * mean, 0.0))

    def state_dict(self) -> dict[str, Any]:
        """The values, the fill, the position and the running sums."""
        return {
            "window": self.values.copy(),
            "window_count": self.count,
            "window_pos": self.pos,
            "window_sum": self.total,
            "window_sumsq": self.total_sq,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (a state without the sums is re-summed)."""
        self.values[:] = state["window"]
        self.count = int(state["window_count"])
        self.pos = int(state["window_pos"])
        if "window_sum" in state and "window_sumsq" in state:
            self.total, self.total_sq = float(state["window_sum"]), float(state["window_sumsq"])
        else:
            self.resum()
