"""Interval statistics of a :class:`~gymcurric.semantics.Shaper` (its ``semantics/…`` means)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class ShapingTelemetry:
    """Sums since the last :meth:`means` call; a mean with no new data keeps its last value."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {
            "raw_margin": 0.0,
            "norm_margin": 0.0,
            "clamp_frac": 0.0,
            "embed_latency_ms": 0.0,
            "shaping_reward_ratio": 0.0,
            "shaping_std": 0.0,
        }
        self.reset()

    def reset(self) -> None:
        """Start a new averaging interval."""
        self.raw = self.norm = 0.0
        self.clamped = self.margins = 0
        self.latency_ms, self.calls = 0.0, 0
        self.abs_shaping = self.abs_reward = 0.0
        self.shaping = self.shaping2 = 0.0
        self.steps = 0

    def add_margins(self, raw: FloatArray, norm: FloatArray, clamped: BoolArray) -> None:
        """Raw and normalised margins of captured states, and which hit the clamp."""
        self.raw += float(raw.sum())
        self.norm += float(norm.sum())
        self.clamped += int(clamped.sum())
        self.margins += raw.size

    def add_call(self, latency_ms: float) -> None:
        """One embedding call."""
        self.latency_ms += latency_ms
        self.calls += 1

    def add_steps(self, rewards: FloatArray, shaping: FloatArray) -> None:
        """Raw rewards and shaping terms of the valid steps."""
        self.abs_shaping += float(np.abs(shaping).sum())
        self.abs_reward += float(np.abs(rewards).sum())
        self.shaping += float(shaping.sum())
        self.shaping2 += float(shaping @ shaping)
        self.steps += shaping.size

    def means(self) -> dict[str, float]:
        """The interval's means (last values where the interval has no data)."""
        last = self.last
        if self.margins:
            last["raw_margin"] = self.raw / self.margins
            last["norm_margin"] = self.norm / self.margins
            last["clamp_frac"] = self.clamped / self.margins
        if self.calls:
            last["embed_latency_ms"] = self.latency_ms / self.calls
        if self.steps:
            mean = self.shaping / self.steps
            last["shaping_std"] = math.sqrt(max(0.0, self.shaping2 / self.steps - mean * mean))
            last["shaping_reward_ratio"] = self.abs_shaping / max(self.abs_reward, 1e-12)
        return last
