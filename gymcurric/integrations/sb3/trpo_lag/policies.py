"""Policies of :class:`~gymcurric.integrations.sb3.trpo_lag.TRPOLag` (shared with PPOLag)."""

from gymcurric.integrations.sb3.common.policies import (
    CnnPolicy,
    CostActorCriticCnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)

__all__ = ["CnnPolicy", "CostActorCriticCnnPolicy", "CostActorCriticPolicy", "MlpPolicy"]
