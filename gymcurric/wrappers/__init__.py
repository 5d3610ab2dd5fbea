"""Gymnasium wrappers (single env); their vector twins live in :mod:`gymcurric.wrappers.vector`."""

from __future__ import annotations

from gymcurric.wrappers.cost import (
    AnnotateCost,
    CostFn,
    EmitCostTuple,
    RecordEpisodeStatisticsWithCost,
)

__all__ = ["AnnotateCost", "CostFn", "EmitCostTuple", "RecordEpisodeStatisticsWithCost"]
