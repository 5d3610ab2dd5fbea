"""Shared parts of the Lagrangian SB3 agents: cost rollout buffer, cost critic, multipliers."""

from gymcurric._optional import import_optional

import_optional("torch", "sb3", purpose="by gymcurric.integrations.sb3.common")

from gymcurric.integrations.sb3.common.buffers import (  # noqa: E402
    CostRolloutBuffer,
    CostRolloutBufferSamples,
    discounted_gae,
)
from gymcurric.integrations.sb3.common.lagrangian import LagrangianMixin, checked_schedule  # noqa: E402
from gymcurric.integrations.sb3.common.multipliers import (  # noqa: E402
    COST_CAP,
    LagrangeMultiplier,
    Multiplier,
    PIDLagrangeMultiplier,
    make_multiplier,
    pid_kwargs_per_update,
)
from gymcurric.integrations.sb3.common.policies import CostActorCriticPolicy  # noqa: E402

__all__ = [
    "COST_CAP",
    "CostActorCriticPolicy",
    "CostRolloutBuffer",
    "CostRolloutBufferSamples",
    "LagrangeMultiplier",
    "LagrangianMixin",
    "Multiplier",
    "PIDLagrangeMultiplier",
    "checked_schedule",
    "discounted_gae",
    "make_multiplier",
    "pid_kwargs_per_update",
]
