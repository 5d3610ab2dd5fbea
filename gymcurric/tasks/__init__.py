"""Curriculum engine core: task spaces, scorers, pools and the :class:`Curriculum` facade.

numpy + gymnasium only. The state is a small set of named numpy arrays
(:mod:`gymcurric.tasks.state`) held by a backend (:mod:`gymcurric.tasks.backends`), so the same
code can run on process-local arrays, on shared memory (``backend="shared"``,
:mod:`gymcurric.tasks.shared_backend`: one state for every worker process) or behind a Ray
actor.

Example:
    >>> from gymcurric.tasks import BucketedTaskSpace, Curriculum, DualPool, Span
    >>> space = BucketedTaskSpace({"hazards": [Span(0, 8)], "goal": [1.0, 2.0]}, seed=0)
    >>> cur = Curriculum(space, pool=DualPool(explore_size=8, exploit_size=16), seed=0)
    >>> tid, task = cur.sample_task()
    >>> sorted(task)
    ['goal', 'hazards']
    >>> cur.update(tid, return_=3.0, success=False)
"""

from gymcurric.tasks.backends import LocalBackend, StateBackend
from gymcurric.tasks.box import BoxTaskSpace
from gymcurric.tasks.config import CurriculumConfig
from gymcurric.tasks.curriculum import Curriculum
from gymcurric.tasks.diagnostics import entropy, gini
from gymcurric.tasks.dual_pool import DualPool
from gymcurric.tasks.pools import OpenEndedPool, Pool, ReplacementPool
from gymcurric.tasks.regret import PLRScorer, RobustPLRScorer
from gymcurric.tasks.scorers import (
    LearnabilityScorer,
    LearningProgressScorer,
    Scorer,
    UniformScorer,
    reweight,
)
from gymcurric.tasks.shared_backend import SharedMemoryBackend
from gymcurric.tasks.signals import SignalConfig
from gymcurric.tasks.spaces import (
    BucketedTaskSpace,
    FixedTaskSpace,
    Span,
    TaskSpace,
)
from gymcurric.tasks.stages import SequentialScorer, Stage, StopCondition
from gymcurric.tasks.state import CurriculumState, FieldSpec, state_layout
from gymcurric.tasks.transport import (
    LocalTransport,
    SharedMemoryTransport,
    TaskTransport,
    transport_for,
)

__all__ = [
    "BoxTaskSpace",
    "BucketedTaskSpace",
    "Curriculum",
    "CurriculumConfig",
    "CurriculumState",
    "DualPool",
    "FieldSpec",
    "FixedTaskSpace",
    "LearnabilityScorer",
    "LearningProgressScorer",
    "LocalBackend",
    "LocalTransport",
    "OpenEndedPool",
    "PLRScorer",
    "Pool",
    "ReplacementPool",
    "RobustPLRScorer",
    "Scorer",
    "SequentialScorer",
    "SharedMemoryBackend",
    "SharedMemoryTransport",
    "SignalConfig",
    "Span",
    "Stage",
    "StateBackend",
    "StopCondition",
    "TaskSpace",
    "TaskTransport",
    "UniformScorer",
    "entropy",
    "gini",
    "reweight",
    "state_layout",
    "transport_for",
]
