"""Vector twins of the gymcurric wrappers, for Gymnasium ``VectorEnv`` (Sync and Async)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymcurric._deprecated import alias_getattr
from gymcurric.wrappers.vector.cost import (
    AnnotateCost,
    RecordEpisodeStatisticsWithCost,
    read_step_costs,
)
from gymcurric.wrappers.vector.curriculum import SampleCurriculumTask
from gymcurric.wrappers.vector.curriculum_vec import make_curriculum_vec
from gymcurric.wrappers.vector.datapack import PresentDatapack, make_datapack_vec
from gymcurric.wrappers.vector.risk import AnnotateRisk
from gymcurric.wrappers.vector.saute import AugmentStateSaute
from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic

__all__ = [
    "AnnotateCost",
    "AnnotateRisk",
    "AugmentStateSaute",
    "PresentDatapack",
    "RecordEpisodeStatisticsWithCost",
    "SampleCurriculumTask",
    "ShapeRewardSemantic",
    "make_curriculum_vec",
    "make_datapack_vec",
    "read_step_costs",
]


# The old names, deprecated (issue 22): type checkers see the aliases of the modules that
# define them; at run time an access warns and returns the renamed class
# (gymcurric._deprecated).
if TYPE_CHECKING:
    from gymcurric.wrappers.vector.curriculum import CurriculumTask as CurriculumTask
    from gymcurric.wrappers.vector.datapack import DatapackTask as DatapackTask
    from gymcurric.wrappers.vector.saute import SauteBudget as SauteBudget
else:
    __getattr__ = alias_getattr(__name__, "CurriculumTask", "DatapackTask", "SauteBudget")
