"""Policies of :class:`~gymcurric.integrations.sb3.cpo.CPO` (shared with PPOLag and TRPOLag)."""

from gymcurric.integrations.sb3.common.policies import (
    CnnPolicy,
    CostActorCriticCnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)

__all__ = ["CnnPolicy", "CostActorCriticCnnPolicy", "CostActorCriticPolicy", "MlpPolicy"]
