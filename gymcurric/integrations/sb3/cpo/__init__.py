"""Constrained Policy Optimization (Achiam et al. 2017) on sb3-contrib's TRPO (extra ``sb3``)."""

from gymcurric._optional import import_optional

import_optional("sb3_contrib", "sb3", purpose="by gymcurric.integrations.sb3.cpo")

from gymcurric.integrations.sb3.cpo.cpo import CONSTRAINT_SCALES, CPO  # noqa: E402
from gymcurric.integrations.sb3.cpo.policies import (  # noqa: E402
    CnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)
from gymcurric.integrations.sb3.cpo.step import (  # noqa: E402
    CPOStep,
    LineSearchResult,
    conjugate_gradient,
    cpo_step,
    line_search,
)

__all__ = [
    "CONSTRAINT_SCALES",
    "CPO",
    "CPOStep",
    "CnnPolicy",
    "CostActorCriticPolicy",
    "LineSearchResult",
    "MlpPolicy",
    "conjugate_gradient",
    "cpo_step",
    "line_search",
]
