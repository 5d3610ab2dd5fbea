"""Gymnasium wrappers (single env); their vector twins live in :mod:`gymcurric.wrappers.vector`."""

from __future__ import annotations

from gymcurric.wrappers.cost import (
    AnnotateCost,
    CostFn,
    EmitCostTuple,
    RecordEpisodeStatisticsWithCost,
)
from gymcurric.wrappers.curriculum import CurriculumTask, EnvFactory, SuccessFn, task_key
from gymcurric.wrappers.curriculum_state import (
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers.datapack import DatapackTask, MplFn, datapack_info
from gymcurric.wrappers.risk import AnnotateRisk
from gymcurric.wrappers.saute import SauteBudget, saute_step_budget
from gymcurric.wrappers.semantic import ShapeRewardSemantic

__all__ = [
    "AnnotateCost",
    "CostFn",
    "CurriculumTask",
    "EmitCostTuple",
    "EnvFactory",
    "RecordEpisodeStatisticsWithCost",
    "SuccessFn",
    "env_task_ids",
    "load_curriculum_state",
    "resume_env_tasks",
    "save_curriculum_state",
    "task_key",
    # datapacks
    "DatapackTask",
    "MplFn",
    "datapack_info",
    # safe RL
    "AnnotateRisk",
    "SauteBudget",
    "saute_step_budget",
    # semantic shaping
    "ShapeRewardSemantic",
]
