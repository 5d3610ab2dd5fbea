"""Cost helpers shared by the wrappers, agents and samplers (numpy only)."""

from __future__ import annotations

from gymcurric.safety.costs import (
    NONFINITE_POLICIES,
    EpisodeCostTracker,
    NonFiniteGuard,
    NonFinitePolicy,
)

__all__ = ["NONFINITE_POLICIES", "EpisodeCostTracker", "NonFiniteGuard", "NonFinitePolicy"]
