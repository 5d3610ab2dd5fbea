"""Policies of :class:`~gymcurric.integrations.sb3.ppo_lag.PPOLag`: actor-critic + cost critic."""

from gymcurric.integrations.sb3.common.policies import (
    CnnPolicy,
    CostActorCriticCnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)

__all__ = ["CnnPolicy", "CostActorCriticCnnPolicy", "CostActorCriticPolicy", "MlpPolicy"]
