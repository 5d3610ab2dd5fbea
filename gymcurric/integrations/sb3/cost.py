"""Episode cost for Stable-Baselines3: a ``VecMonitor`` that records ``c``, and its logger hook."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from gymcurric.errors import ConfigError
from gymcurric.safety.costs import EpisodeCostTracker, NonFinitePolicy
from gymcurric.wrappers.cost import cost_guard

__all__ = ["EpisodeCostCallback", "VecCostMonitor"]


class VecCostMonitor(VecMonitor):
    """SB3 ``VecMonitor`` that also records the episode cost.

    Drop-in for ``VecMonitor`` (it is one, so SB3's ``is_vecenv_wrapped(env, VecMonitor)`` checks
    pass): ``info["episode"]`` carries ``r``, ``l``, ``t`` and ``c``; the monitor CSV gets a
    ``c`` column. Each sub-env must report ``info["cost"]`` (gymcurric envs and the
    safety-gymnasium loader do; wrap others in :class:`gymcurric.wrappers.AnnotateCost`, e.g.
    through ``make_vec_env(..., wrapper_class=AnnotateCost)``). Non-finite costs are replaced
    in ``info["cost"]`` and counted (warned once), or raise with ``nonfinite="raise"``.

    If the sub-envs are already wrapped in SB3's ``Monitor`` (``make_vec_env`` does that), this
    monitor's statistics replace ``Monitor``'s, as with ``VecMonitor``, without the warning.

    Info keys written: ``cost`` (sanitised), ``episode`` with ``r``, ``l``, ``t``, ``c``.
    """

    def __init__(
        self,
        venv: VecEnv,
        filename: str | None = None,
        info_keywords: tuple[str, ...] = (),
        *,
        nonfinite: NonFinitePolicy = "warn",
        nonfinite_value: float = 0.0,
        env_id: str | None = None,
    ) -> None:
        """Wrap ``venv``.

        Args:
            venv: the SB3 vec env.
            filename: where to write the monitor CSV (``None``: no file).
            info_keywords: extra info keys copied into the episode statistics, as in SB3.
            nonfinite: ``"warn"``, ``"ignore"`` or ``"raise"`` for NaN/Inf costs.
            nonfinite_value: the replacement for a non-finite cost.
            env_id: the ``env_id`` of the CSV header (default: the first sub-env's spec id).
        """
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*already wrapped with a `Monitor`")
            super().__init__(venv, filename=None, info_keywords=info_keywords)
        if filename:
            self.results_writer = ResultsWriter(
                filename,
                header={"t_start": self.t_start, "env_id": env_id or _env_id(venv)},
                extra_keys=("c", *info_keywords),
            )
        self._guard = cost_guard(nonfinite, nonfinite_value, "VecCostMonitor")
        self._costs = EpisodeCostTracker(self.num_envs)

    @property
    def nonfinite_count(self) -> int:
        """How many non-finite costs were replaced so far."""
        return self._guard.count

    @property
    def cost_queue(self) -> Any:
        """The costs of the last 100 finished episodes."""
        return self._costs.cost_queue

    def reset(self) -> VecEnvObs:
        """Reset the envs and the running statistics."""
        obs = super().reset()
        self._costs.reset()
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        """Step the envs; record ``r``, ``l``, ``t`` and ``c`` for the episodes that ended."""
        obs, rewards, dones, infos = self.venv.step_wait()
        missing = [i for i, info in enumerate(infos) if "cost" not in info]
        if missing:
            raise ConfigError(
                "cost_fn",
                None,
                f"sub-envs {missing} reported no info['cost']; wrap them in "
                "gymcurric.wrappers.AnnotateCost(cost_fn=...) (e.g. make_vec_env(..., "
                "wrapper_class=AnnotateCost, wrapper_kwargs={'cost_fn': ...}))",
            )
        costs = self._guard.array([info["cost"] for info in infos], where="info['cost']")
        for info, cost in zip(infos, costs.tolist(), strict=True):
            info["cost"] = cost
        self.episode_returns += rewards
        self.episode_lengths += 1
        self._costs.add(costs)
        new_infos = list(infos)
        if dones.any():
            episode_costs = self._costs.finish(np.asarray(dones, dtype=bool))
            for i in np.flatnonzero(dones):
                info = dict(infos[i])
                episode = {
                    "r": float(self.episode_returns[i]),
                    "l": int(self.episode_lengths[i]),
                    "t": round(time.time() - self.t_start, 6),
                    "c": float(episode_costs[i]),
                }
                for key in self.info_keywords:
                    episode[key] = info[key]
                info["episode"] = episode
                self.episode_count += 1
                self.episode_returns[i] = 0
                self.episode_lengths[i] = 0
                if self.results_writer:
                    self.results_writer.write_row(episode)
                new_infos[i] = info
        return obs, rewards, dones, new_infos


def _env_id(venv: VecEnv) -> str:
    """The registered id of the first sub-env ("" when it has no spec)."""
    try:
        spec = venv.get_attr("spec", indices=[0])[0]
    except Exception:  # a sub-env without a spec attribute
        return ""
    return str(getattr(spec, "id", "") or "")


class EpisodeCostCallback(BaseCallback):
    """Log ``rollout/ep_cost_mean`` next to SB3's ``rollout/ep_rew_mean``.

    Reads ``c`` from the episode statistics SB3 keeps in ``model.ep_info_buffer`` (filled by
    :class:`VecCostMonitor`, or by any monitor that adds ``c``), at the end of each rollout.
    """

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer = getattr(self.model, "ep_info_buffer", None) or ()
        costs = [ep["c"] for ep in buffer if "c" in ep]
        if costs:
            self.logger.record("rollout/ep_cost_mean", float(np.mean(costs)))
