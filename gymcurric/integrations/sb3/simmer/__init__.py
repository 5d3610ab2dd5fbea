"""PPO-Simmer on Stable-Baselines3 (extra ``sb3``): Sauté RL with a budget controller."""

from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3.simmer")

from gymcurric.integrations.sb3.simmer.ppo_simmer import (  # noqa: E402
    CONTROLLERS,
    PPOSimmer,
    vec_simmer_kwargs,
)
from gymcurric.integrations.sb3.simmer.vec_simmer import BUDGET_STEPS, VecSimmer  # noqa: E402
from gymcurric.safety.budget_control import (  # noqa: E402
    BudgetController,
    PIBudgetController,
    QBudgetController,
)

__all__ = [
    "BUDGET_STEPS",
    "CONTROLLERS",
    "BudgetController",
    "PIBudgetController",
    "PPOSimmer",
    "QBudgetController",
    "VecSimmer",
    "vec_simmer_kwargs",
]
