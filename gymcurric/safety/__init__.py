"""Cost helpers shared by the wrappers, agents and samplers (numpy only)."""

from __future__ import annotations

from gymcurric.safety.costs import (
    NONFINITE_POLICIES,
    EpisodeCostTracker,
    NonFiniteGuard,
    NonFinitePolicy,
)
from gymcurric.safety.modulation import (
    Modulation,
    RiskModulation,
    lagrange_modulation,
    lagrange_modulation_scale,
)
from gymcurric.safety.risk_targets import (
    CostToGoTargets,
    PendingCostToGo,
    TruncationPolicy,
    cost_to_go_targets,
)

__all__ = [
    "NONFINITE_POLICIES",
    "CostToGoTargets",
    "EpisodeCostTracker",
    "Modulation",
    "NonFiniteGuard",
    "NonFinitePolicy",
    "PendingCostToGo",
    "RiskModulation",
    "TruncationPolicy",
    "cost_to_go_targets",
    "lagrange_modulation",
    "lagrange_modulation_scale",
]
