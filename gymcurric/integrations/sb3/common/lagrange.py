"""Deprecated: renamed :mod:`gymcurric.integrations.sb3.common.multipliers` (issue 22).

The module sat beside ``lagrangian.py`` (the SB3 mixin) under a near-identical name. It is kept
for one release: every name read from it (``from ...common.lagrange import LagrangeMultiplier``)
warns and comes from ``multipliers``, private ones too, so old pickles still load.
"""

from __future__ import annotations

import warnings
from typing import Any

from gymcurric.integrations.sb3.common import multipliers as _multipliers

__all__ = list(_multipliers.__all__)  # each read through __getattr__ below


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # module protocol lookups (__path__, ...) are not old names
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_multipliers, name)  # AttributeError for names multipliers lacks
    warnings.warn(
        f"gymcurric.integrations.sb3.common.lagrange.{name} is deprecated: the module was "
        "renamed gymcurric.integrations.sb3.common.multipliers (same contents); the old module "
        "is kept for one release only",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
