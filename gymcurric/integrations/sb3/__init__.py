"""Stable-Baselines3 integration (extra ``sb3``): agents, VecEnv hooks, callbacks, replay."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymcurric._deprecated import alias_getattr
from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3")

from gymcurric.integrations.sb3.checked_vec_env import (  # noqa: E402
    CheckedDummyVecEnv,
    CheckedSubprocVecEnv,
)
from gymcurric.integrations.sb3.common import (  # noqa: E402
    CostActorCriticPolicy,
    CostRolloutBuffer,
    LagrangeMultiplier,
    PIDLagrangeMultiplier,
)
from gymcurric.integrations.sb3.cost import EpisodeCostCallback, VecCostMonitor  # noqa: E402
from gymcurric.integrations.sb3.cpo import CPO  # noqa: E402
from gymcurric.integrations.sb3.curriculum import (  # noqa: E402
    CurriculumCallback,
    load_curriculum_state,
    save_curriculum_state,
)
from gymcurric.integrations.sb3.datapack import (  # noqa: E402
    DatapackCallback,
    VecPresentDatapack,
    make_datapack_vec_env,
)
from gymcurric.integrations.sb3.p3o import P3O  # noqa: E402
from gymcurric.integrations.sb3.ppo_lag import PPOLag, PPOPIDLag  # noqa: E402
from gymcurric.integrations.sb3.regret import (  # noqa: E402
    RegretDictRolloutBuffer,
    RegretRolloutBuffer,
    RegretScoreCallback,
)
from gymcurric.integrations.sb3.replay import RingReplayBuffer  # noqa: E402
from gymcurric.integrations.sb3.risk import RiskCallback  # noqa: E402
from gymcurric.integrations.sb3.semantic import (  # noqa: E402
    SemanticShapingCallback,
    VecShapeRewardSemantic,
)
from gymcurric.integrations.sb3.simmer import PPOSimmer, VecSimmer  # noqa: E402
from gymcurric.integrations.sb3.trpo_lag import TRPOLag  # noqa: E402
from gymcurric.safety.modulation import RiskModulation  # noqa: E402

__all__ = [
    # agents
    "CPO",
    "CostActorCriticPolicy",
    "CostRolloutBuffer",
    "LagrangeMultiplier",
    "P3O",
    "PIDLagrangeMultiplier",
    "PPOLag",
    "PPOPIDLag",
    "PPOSimmer",
    "RegretDictRolloutBuffer",
    "RegretRolloutBuffer",
    "RiskModulation",
    "TRPOLag",
    # vector envs whose failing sub-envs are errors naming them
    "CheckedDummyVecEnv",
    "CheckedSubprocVecEnv",
    # hooks and callbacks
    "CurriculumCallback",
    "DatapackCallback",
    "EpisodeCostCallback",
    "RegretScoreCallback",
    "RingReplayBuffer",
    "RiskCallback",
    "SemanticShapingCallback",
    "VecCostMonitor",
    "VecPresentDatapack",
    "VecShapeRewardSemantic",
    "VecSimmer",
    "load_curriculum_state",
    "make_datapack_vec_env",
    "save_curriculum_state",
]


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    VecDatapackTask = VecPresentDatapack
    VecSemanticShaping = VecShapeRewardSemantic
else:
    __getattr__ = alias_getattr(__name__, "VecDatapackTask", "VecSemanticShaping")
