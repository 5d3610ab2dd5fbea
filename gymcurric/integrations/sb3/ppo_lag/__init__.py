"""PPO-Lagrangian and PID-Lagrangian on Stable-Baselines3 (extra ``sb3``)."""

from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3.ppo_lag")

from gymcurric.integrations.sb3.ppo_lag.policies import (  # noqa: E402
    CnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)
from gymcurric.integrations.sb3.ppo_lag.ppo_lag import PPOLag, PPOPIDLag  # noqa: E402

__all__ = ["CnnPolicy", "CostActorCriticPolicy", "MlpPolicy", "PPOLag", "PPOPIDLag"]
