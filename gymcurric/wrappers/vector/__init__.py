"""Vector twins of the gymcurric wrappers, for Gymnasium ``VectorEnv`` (Sync and Async)."""

from __future__ import annotations

from gymcurric.wrappers.vector.cost import (
    AnnotateCost,
    RecordEpisodeStatisticsWithCost,
    read_step_costs,
)
from gymcurric.wrappers.vector.curriculum import CurriculumTask, make_curriculum_vec

__all__ = [
    "AnnotateCost",
    "CurriculumTask",
    "RecordEpisodeStatisticsWithCost",
    "make_curriculum_vec",
    "read_step_costs",
]
