"""Stable-Baselines3 integration (extra ``sb3``): VecEnv hooks and callbacks."""

from __future__ import annotations

from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3")

from gymcurric.integrations.sb3.cost import EpisodeCostCallback, VecCostMonitor  # noqa: E402
from gymcurric.integrations.sb3.curriculum import (  # noqa: E402
    CurriculumCallback,
    load_curriculum_state,
    save_curriculum_state,
)
from gymcurric.integrations.sb3.datapack import (  # noqa: E402
    DatapackCallback,
    VecDatapackTask,
    make_datapack_vec_env,
)
from gymcurric.integrations.sb3.replay import RingReplayBuffer  # noqa: E402
from gymcurric.integrations.sb3.risk import RiskCallback  # noqa: E402
from gymcurric.integrations.sb3.semantic import (  # noqa: E402
    SemanticShapingCallback,
    VecSemanticShaping,
)

__all__ = [
    "CurriculumCallback",
    "DatapackCallback",
    "EpisodeCostCallback",
    "RingReplayBuffer",
    "RiskCallback",
    "SemanticShapingCallback",
    "VecSemanticShaping",
    "VecCostMonitor",
    "VecDatapackTask",
    "load_curriculum_state",
    "make_datapack_vec_env",
    "save_curriculum_state",
]
