"""Vector twins of the gymcurric wrappers, for Gymnasium ``VectorEnv`` (Sync and Async)."""

from __future__ import annotations

from gymcurric.wrappers.vector.cost import (
    AnnotateCost,
    RecordEpisodeStatisticsWithCost,
    read_step_costs,
)

__all__ = ["AnnotateCost", "RecordEpisodeStatisticsWithCost", "read_step_costs"]
