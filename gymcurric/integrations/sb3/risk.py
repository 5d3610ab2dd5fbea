"""Risk metrics for Stable-Baselines3: log ``risk/*`` and the Lagrange modulation scale."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from gymcurric.errors import ConfigError
from gymcurric.safety.modulation import lagrange_modulation
from gymcurric.wrappers._sub_envs import call_sub_envs
from gymcurric.wrappers.risk import AnnotateRisk

__all__ = ["RiskCallback"]

_SUMMED = ("risk/train_samples", "risk/nan_events", "risk/embed_errors")


class RiskCallback(BaseCallback):
    """Log the ``risk/*`` metrics of the :class:`~gymcurric.wrappers.risk.AnnotateRisk` wrappers.

    At the end of each rollout, finds the sub-envs of the training ``VecEnv`` wrapped in
    :class:`~gymcurric.wrappers.risk.AnnotateRisk` (through any SB3 ``VecEnvWrapper``; works with
    ``DummyVecEnv`` and ``SubprocVecEnv``), and records the mean over them of ``risk/loss``,
    ``risk/corr``, ``risk/pred_mean``, ``risk/target_mean`` (NaNs ignored), the sums of
    ``risk/train_samples``, ``risk/nan_events`` and ``risk/embed_errors``, and
    ``risk/modulation_scale``: the mean over sub-envs of
    :func:`~gymcurric.safety.modulation.lagrange_modulation` of each one's predictions since the
    previous rollout (``mean``) against its prediction history (``q_p``), gated by the episodes
    it finished. The latest scale is also kept in :attr:`modulation_scale` for an agent to read.
    Each sub-env is asked through ``AnnotateRisk.risk_stats()`` and ``risk_modulation()``, names
    no other wrapper has, so a wrapper above it with a ``stats()`` of its own (such as
    :class:`~gymcurric.wrappers.semantic.ShapeRewardSemantic`) is not read in its place.

    Args:
        alpha: modulation strength.
        quantile_p: ``p`` of ``q_p``.
        slope: modulation steepness.
        eps: keeps the denominator positive.
        min_episodes: episodes a sub-env must finish before its scale departs from 1.
        verbose: SB3 verbosity.

    Raises:
        ConfigError: at the start of training, if no sub-env is wrapped in ``AnnotateRisk``.
    """

    def __init__(
        self,
        alpha: float = 1.0,
        quantile_p: float = 0.9,
        slope: float = 4.0,
        eps: float = 1e-6,
        min_episodes: int = 10,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.modulation_kwargs: dict[str, Any] = {
            "alpha": alpha,
            "quantile_p": quantile_p,
            "slope": slope,
            "eps": eps,
            "min_episodes": min_episodes,
        }
        lagrange_modulation([1.0], **self.modulation_kwargs)  # validate now
        self.modulation_scale = 1.0
        self._indices: list[int] = []

    def _on_training_start(self) -> None:
        wrapped = self.training_env.env_is_wrapped(AnnotateRisk)
        self._indices = [i for i, w in enumerate(wrapped) if w]
        if not self._indices:
            raise ConfigError(
                "env",
                self.training_env,
                "no sub-env is wrapped in gymcurric.wrappers.risk.AnnotateRisk (e.g. "
                "make_vec_env(..., wrapper_class=AnnotateRisk))",
                source="RiskCallback",
            )

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        env = self.training_env
        # not stats()/modulation(): env_method takes the outermost wrapper with the name, and
        # a wrapper over AnnotateRisk (ShapeRewardSemantic) may have a stats() of its own
        # (call_sub_envs: an error in a sub-env is raised here, and its worker goes on)
        stats = call_sub_envs(env, "risk_stats", indices=self._indices)
        mods = call_sub_envs(
            env, "risk_modulation", indices=self._indices, **self.modulation_kwargs
        )
        assert stats is not None and mods is not None  # training_env is an SB3 VecEnv
        for key in stats[0]:
            values = np.array([s[key] for s in stats], dtype=np.float64)
            if key in _SUMMED:
                self.logger.record(key, float(values.sum()))
            elif np.isfinite(values).any():
                self.logger.record(key, float(np.nanmean(values)))
        scale = float(np.mean([m.scale for m in mods]))
        self.modulation_scale = scale if math.isfinite(scale) else 1.0
        self.logger.record("risk/modulation_scale", self.modulation_scale)
