"""Stable-Baselines3 integration (extra ``sb3``): VecEnv hooks and callbacks."""

from __future__ import annotations

from gymcurric._optional import import_optional

import_optional("stable_baselines3", "sb3", purpose="by gymcurric.integrations.sb3")

from gymcurric.integrations.sb3.cost import EpisodeCostCallback, VecCostMonitor  # noqa: E402

__all__ = ["EpisodeCostCallback", "VecCostMonitor"]
