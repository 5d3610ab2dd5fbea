"""Sauté state augmentation with a budget set between episodes, for SB3 VecEnvs (Simmer)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from gymcurric.errors import ConfigError, NonFiniteValueError
from gymcurric.integrations.sb3.common.constraints import check_sub_env_costs
from gymcurric.integrations.sb3.common.multiplier_checks import as_real
from gymcurric.wrappers.saute import (
    SAUTE_OBS_KEY,
    SauteSettings,
    augment_space,
    check_saute_key_free,
    saute_step_budget,
)

__all__ = ["BUDGET_STEPS", "VecSimmer"]

#: ``budget_step`` values: divide the cost by the maximum budget (the original) or the current.
BUDGET_STEPS = ("max", "current")
#: OmniSafe's floor on the current budget (``simmer_adapter``), used by ``budget_step="current"``.
MIN_BUDGET = 1e-6


def _horizon(venv: VecEnv) -> int | None:
    try:
        spec = venv.get_attr("spec", indices=[0])[0]
    except Exception:  # an env without a spec attribute
        return None
    return getattr(spec, "max_episode_steps", None)


class VecSimmer(VecEnvWrapper):
    """The Sauté safety state ``z`` on every sub-env, with a budget that can change per episode.

    Simmer's env wrapper (``HEBO/SIMMER/envs/wrappers/simmer_env.py``) for SB3 vec envs: as
    :class:`~gymcurric.wrappers.AugmentStateSaute`, but each episode starts at
    ``z₀ = b / B`` where ``b`` is the budget in force at that sub-env's reset and ``B`` the
    maximum budget ``safety_budget``; :meth:`set_budget` changes ``b`` from each sub-env's next
    reset on (episodes under way keep theirs). With ``T`` the horizon and ``gamma_s`` =
    ``saute_gamma``, both budgets are scaled as Sauté's
    (:func:`~gymcurric.wrappers.saute_step_budget`), and each step::

        z ← (z - c / B') / gamma_s         budget_step="max" (the original; B' = scaled B)
        z ← (z - c / b') / gamma_s         budget_step="current" (OmniSafe 0.5; b' = scaled b)
        r ← r if z > 0 else unsafe_reward

    With ``"max"`` the effective episode budget is ``b``; with OmniSafe's ``"current"`` it is
    ``b²/B`` whenever ``b < B`` (the note's inconsistency), kept only for parity.

    The observation gets ``z`` (clipped to ``[-1, gamma_s^-T]``) as a last coordinate (1-D ``Box``)
    or a ``"saute_state"`` key (``Dict``); so does ``info["terminal_observation"]``, with the
    episode's final ``z``, so that SB3's time-out bootstrap sees the state it would have seen.
    Costs come from ``info["cost"]``, never altered (a missing one, or one written as text or
    bytes, raises :class:`~gymcurric.errors.ConfigError`, a NaN/Inf one
    :class:`~gymcurric.errors.NonFiniteValueError`; a bool is 0 or 1). Rewards and
    observations may be normalised by a ``VecNormalize`` below or above this wrapper; costs are
    not normalised either way.

    Info keys written: ``saute_state`` (``z`` after the step).

    Args:
        venv: the vec env; its steps report ``info["cost"]``.
        safety_budget: ``B``, the maximum episode budget (> 0).
        budget: the starting budget ``b`` (default ``B``), in ``[0, B]``.
        saute_gamma: ``gamma_s`` in (0, 1] (0.999).
        max_episode_steps: the horizon ``T``; default the sub-envs' spec.
        unsafe_reward: the reward once ``z ≤ 0`` (-1.0).
        budget_step: ``"max"`` (default) or ``"current"``.

    Examples:
        >>> import gymnasium as gym, gymcurric
        >>> from stable_baselines3.common.vec_env import DummyVecEnv
        >>> make = lambda: gym.make("gymcurric/HazardNav-v0", max_steps=50)
        >>> venv = VecSimmer(DummyVecEnv([make]), 20.0, budget=10.0, max_episode_steps=50)
        >>> float(venv.reset()[0, -1])  # z₀ = b / B
        0.5
    """

    def __init__(
        self,
        venv: VecEnv,
        safety_budget: float,
        *,
        budget: float | None = None,
        saute_gamma: float = 0.999,
        max_episode_steps: int | None = None,
        unsafe_reward: float = -1.0,
        budget_step: str = "max",
    ) -> None:
        if max_episode_steps is None:
            max_episode_steps = _horizon(venv)
        self.saute = SauteSettings.checked(
            None, safety_budget, saute_gamma, max_episode_steps, unsafe_reward, source="VecSimmer"
        )
        if budget_step not in BUDGET_STEPS:
            raise ConfigError(
                "budget_step", budget_step, "expected 'max' or 'current'", source="VecSimmer"
            )
        self.budget_step = budget_step
        space = augment_space(venv.observation_space, self.saute.z_bounds, "VecSimmer")
        super().__init__(venv, observation_space=space)
        self.budget = self._checked_budget(self.saute.safety_budget if budget is None else budget)
        self.z = np.full(self.num_envs, self.budget / self.saute.safety_budget)
        #: the budget each sub-env's current episode started with
        self.episode_budget = np.full(self.num_envs, self.budget)

    @property
    def safety_budget(self) -> float:
        """``B``, the maximum budget."""
        return self.saute.safety_budget

    def _checked_budget(self, budget: Any) -> float:
        real = as_real(budget)  # NumPy scalars too; not a bool or a string
        if real is None or not math.isfinite(real) or not 0.0 <= real <= self.safety_budget:
            raise ConfigError(
                "budget",
                budget,
                f"expected a number in [0, safety_budget={self.safety_budget:g}]",
                source="VecSimmer",
            )
        return float(budget)

    def set_budget(self, budget: float) -> None:
        """Use ``budget`` for every episode that starts from now on."""
        self.budget = self._checked_budget(budget)

    def _normaliser(self) -> np.ndarray | float:
        s = self.saute
        if self.budget_step == "max":
            return s.step_budget
        scaled = [
            saute_step_budget(b, s.saute_gamma, s.max_episode_steps) for b in self.episode_budget
        ]
        return np.maximum(np.asarray(scaled), MIN_BUDGET)

    def _augment(self, obs: Any, z: np.ndarray) -> Any:
        low, high = self.saute.z_bounds
        zz = np.clip(z, low, high).astype(np.float32)[:, None]
        if isinstance(self.observation_space, spaces.Dict):
            return {**obs, SAUTE_OBS_KEY: zz}
        dtype = self.observation_space.dtype
        flat = np.asarray(obs).reshape(self.num_envs, -1)
        return np.concatenate([flat, zz], axis=1).astype(dtype, copy=False)

    def _start(self, idx: np.ndarray | slice) -> None:
        self.episode_budget[idx] = self.budget
        self.z[idx] = self.budget / self.safety_budget

    def reset(self) -> VecEnvObs:
        """Reset every sub-env; each episode starts with the budget in force."""
        obs = self.venv.reset()
        self._start(slice(None))
        return self._augment(obs, self.z)

    def step_wait(self) -> VecEnvStepReturn:
        """Step; spend each sub-env's cost from its budget; unsafe reward once it is spent."""
        obs, rewards, dones, infos = self.venv.step_wait()
        missing = [i for i, info in enumerate(infos) if "cost" not in info]
        if missing:
            raise ConfigError(
                "info['cost']",
                None,
                f"sub-envs {missing} reported no cost this step; wrap them in "
                "gymcurric.wrappers.AnnotateCost(env, cost_fn=...) first",
                source="VecSimmer.step",
            )
        values = [info["cost"] for info in infos]
        check_sub_env_costs(values, "info['cost']", "VecSimmer.step")  # float() reads "0.5"
        costs = np.array([float(value) for value in values], dtype=np.float64)
        if not np.all(np.isfinite(costs)):
            raise NonFiniteValueError(
                f"VecSimmer: non-finite info['cost'] {costs.tolist()}; wrap the env in "
                "gymcurric.wrappers.AnnotateCost(nonfinite=...) to replace them"
            )
        z = (self.z - costs / self._normaliser()) / self.saute.saute_gamma
        rewards = np.where(z > 0.0, rewards, self.saute.unsafe_reward).astype(rewards.dtype)
        for i, info in enumerate(infos):
            check_saute_key_free(info, self.venv, "VecSimmer", "step")
            info[SAUTE_OBS_KEY] = float(z[i])
            if dones[i] and info.get("terminal_observation") is not None:
                terminal = info["terminal_observation"]
                if isinstance(terminal, dict):
                    batch = {k: np.asarray(v)[None] for k, v in terminal.items()}
                    aug = self._augment(batch, z[i : i + 1])
                    info["terminal_observation"] = {k: v[0] for k, v in aug.items()}
                else:
                    info["terminal_observation"] = self._augment_one(terminal, z[i])
        self.z = z
        done = np.flatnonzero(dones)
        if done.size:
            self._start(done)  # the sub-envs that ended were reset by the VecEnv
        return self._augment(obs, self.z), rewards, dones, infos

    def _augment_one(self, obs: Any, z: float) -> np.ndarray:
        low, high = self.saute.z_bounds
        zz = np.array([min(max(z, low), high)], dtype=self.observation_space.dtype)
        return np.concatenate([np.asarray(obs, dtype=self.observation_space.dtype).ravel(), zz])
