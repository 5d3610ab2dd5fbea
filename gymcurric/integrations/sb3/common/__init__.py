"""Shared parts of the Lagrangian SB3 agents: cost rollout buffer, critic fits, multipliers."""

from gymcurric._optional import import_optional

import_optional("torch", "sb3", purpose="by gymcurric.integrations.sb3.common")

from gymcurric.integrations.sb3.common.buffers import (  # noqa: E402
    CostRolloutBuffer,
    CostRolloutBufferSamples,
    discounted_gae,
)
from gymcurric.integrations.sb3.common.constraints import (  # noqa: E402
    CostLimits,
    checked_schedule,
    parse_constraints,
    read_costs,
)
from gymcurric.integrations.sb3.common.critic_fit import fit_reward_critic  # noqa: E402
from gymcurric.integrations.sb3.common.lagrangian import LagrangianMixin  # noqa: E402
from gymcurric.integrations.sb3.common.multipliers import (  # noqa: E402
    COST_CAP,
    LagrangeMultiplier,
    Multiplier,
    MultiplierSet,
    PIDLagrangeMultiplier,
    make_multiplier,
    pid_kwargs_per_update,
)
from gymcurric.integrations.sb3.common.policies import CostActorCriticPolicy  # noqa: E402

__all__ = [
    "COST_CAP",
    "CostActorCriticPolicy",
    "CostLimits",
    "CostRolloutBuffer",
    "CostRolloutBufferSamples",
    "LagrangeMultiplier",
    "LagrangianMixin",
    "Multiplier",
    "MultiplierSet",
    "PIDLagrangeMultiplier",
    "checked_schedule",
    "discounted_gae",
    "fit_reward_critic",
    "make_multiplier",
    "parse_constraints",
    "pid_kwargs_per_update",
    "read_costs",
]
