"""TRPO-Lagrangian on sb3-contrib's TRPO (extra ``sb3``)."""

from gymcurric._optional import import_optional

import_optional("sb3_contrib", "sb3", purpose="by gymcurric.integrations.sb3.trpo_lag")

from gymcurric.integrations.sb3.trpo_lag.policies import (  # noqa: E402
    CnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)
from gymcurric.integrations.sb3.trpo_lag.trpo_lag import TRPOLag  # noqa: E402

__all__ = ["CnnPolicy", "CostActorCriticPolicy", "MlpPolicy", "TRPOLag"]
