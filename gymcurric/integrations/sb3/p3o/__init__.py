"""P3O, Penalized Proximal Policy Optimization, on Stable-Baselines3 (extra ``sb3``)."""

from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3.p3o")

from gymcurric.integrations.sb3.common.policies import (  # noqa: E402
    CnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)
from gymcurric.integrations.sb3.p3o.p3o import (  # noqa: E402
    P3O,
    P3O_VARIANTS,
    kappa_schedule,
    p3o_cost_loss,
)

__all__ = [
    "P3O",
    "P3O_VARIANTS",
    "CnnPolicy",
    "CostActorCriticPolicy",
    "MlpPolicy",
    "kappa_schedule",
    "p3o_cost_loss",
]
