"""Vector twins of the gymcurric wrappers, for Gymnasium ``VectorEnv`` (Sync and Async)."""

from __future__ import annotations

from gymcurric.wrappers.vector.cost import (
    AnnotateCost,
    RecordEpisodeStatisticsWithCost,
    read_step_costs,
)
from gymcurric.wrappers.vector.curriculum import CurriculumTask, make_curriculum_vec
from gymcurric.wrappers.vector.datapack import DatapackTask, make_datapack_vec
from gymcurric.wrappers.vector.risk import AnnotateRisk
from gymcurric.wrappers.vector.saute import SauteBudget
from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic

__all__ = [
    "AnnotateCost",
    "AnnotateRisk",
    "CurriculumTask",
    "DatapackTask",
    "RecordEpisodeStatisticsWithCost",
    "SauteBudget",
    "ShapeRewardSemantic",
    "make_curriculum_vec",
    "make_datapack_vec",
    "read_step_costs",
]
