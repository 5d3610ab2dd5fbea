"""gymcurric: curriculum, datapacks, semantic shaping and cost/risk annotation for Gymnasium.

``import gymcurric`` needs only numpy and gymnasium; it registers the ``gymcurric/…`` env ids.
torch, transformers, Stable-Baselines3, mujoco and ray are imported only by the parts that use
them, with an error naming the extra to install when they are missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymcurric import datapacks as datapacks
from gymcurric import envs as envs  # registers the gymcurric/… ids
from gymcurric import safety as safety
from gymcurric import tasks as tasks
from gymcurric import wrappers as wrappers
from gymcurric._deprecated import alias_getattr
from gymcurric.datapacks import DataPack, DataPackRLSampler, load_datapacks
from gymcurric.errors import (
    ConfigError,
    DataError,
    DependencyNotInstalled,
    EnvUnavailableError,
    GymcurricError,
    GymcurricWarning,
    InfoKeyConflictError,
    NonFiniteValueError,
    SubEnvCallError,
    TaskError,
    WorkerError,
)
from gymcurric.tasks import (
    BoxTaskSpace,
    BucketedTaskSpace,
    Curriculum,
    CurriculumConfig,
    FixedTaskSpace,
    Span,
)
from gymcurric.wrappers import (
    AnnotateCost,
    EmitCostTuple,
    PresentDatapack,
    RecordEpisodeStatisticsWithCost,
    SampleCurriculumTask,
    load_curriculum_state,
    save_curriculum_state,
)

__version__ = "0.1.0"

__all__ = [
    # curriculum (gymcurric.tasks)
    "BoxTaskSpace",
    "BucketedTaskSpace",
    "Curriculum",
    "CurriculumConfig",
    "FixedTaskSpace",
    "SampleCurriculumTask",
    "Span",
    "load_curriculum_state",
    "save_curriculum_state",
    # datapacks (gymcurric.datapacks)
    "DataPack",
    "DataPackRLSampler",
    "PresentDatapack",
    "load_datapacks",
    # cost annotation (gymcurric.wrappers)
    "AnnotateCost",
    "EmitCostTuple",
    "RecordEpisodeStatisticsWithCost",
    # errors
    "ConfigError",
    "DataError",
    "DependencyNotInstalled",
    "EnvUnavailableError",
    "GymcurricError",
    "GymcurricWarning",
    "InfoKeyConflictError",
    "NonFiniteValueError",
    "SubEnvCallError",
    "TaskError",
    "WorkerError",
    "__version__",
    # subpackages
    "datapacks",
    "envs",
    "safety",
    "tasks",
    "wrappers",
]


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    CurriculumTask = SampleCurriculumTask
    DatapackTask = PresentDatapack
else:
    __getattr__ = alias_getattr(__name__, "CurriculumTask", "DatapackTask")
