"""Gymnasium wrappers (single env); their vector twins live in :mod:`gymcurric.wrappers.vector`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymcurric._deprecated import alias_getattr
from gymcurric.wrappers.cost import (
    AnnotateCost,
    CostFn,
    EmitCostTuple,
    RecordEpisodeStatisticsWithCost,
)
from gymcurric.wrappers.curriculum import EnvFactory, SampleCurriculumTask, SuccessFn, task_key
from gymcurric.wrappers.curriculum_state import (
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers.datapack import MplFn, PresentDatapack, datapack_info
from gymcurric.wrappers.risk import AnnotateRisk
from gymcurric.wrappers.saute import AugmentStateSaute, saute_step_budget
from gymcurric.wrappers.semantic import ShapeRewardSemantic

__all__ = [
    "AnnotateCost",
    "CostFn",
    "EmitCostTuple",
    "EnvFactory",
    "RecordEpisodeStatisticsWithCost",
    "SampleCurriculumTask",
    "SuccessFn",
    "env_task_ids",
    "load_curriculum_state",
    "resume_env_tasks",
    "save_curriculum_state",
    "task_key",
    # datapacks
    "MplFn",
    "PresentDatapack",
    "datapack_info",
    # safe RL
    "AnnotateRisk",
    "AugmentStateSaute",
    "saute_step_budget",
    # semantic shaping
    "ShapeRewardSemantic",
]


# The old names, deprecated (issue 22): type checkers see the aliases of the modules that
# define them; at run time an access warns and returns the renamed class
# (gymcurric._deprecated).
if TYPE_CHECKING:
    from gymcurric.wrappers.curriculum import CurriculumTask as CurriculumTask
    from gymcurric.wrappers.datapack import DatapackTask as DatapackTask
    from gymcurric.wrappers.saute import SauteBudget as SauteBudget
else:
    __getattr__ = alias_getattr(__name__, "CurriculumTask", "DatapackTask", "SauteBudget")
