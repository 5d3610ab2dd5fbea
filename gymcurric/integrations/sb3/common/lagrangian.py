"""What PPOLag and TRPOLag share: cost rollouts, the cost critic, λ, logs and save/load.

:class:`LagrangianMixin` sits before the SB3 algorithm in the MRO
(``class PPOLag(LagrangianMixin, PPO)``). It replaces ``collect_rollouts`` (SB3's, plus the
cost of every step from ``info["cost"]`` and the cost critic's values) and wraps ``train``:

1. update λ from the mean episode cost of the last ``cost_window`` finished episodes against
   ``cost_limit`` (before the policy update, as OmniSafe's ``_update``);
2. hand λ to the buffer, whose samples then carry the penalised advantage
   ``(A_r - λ·A_c)/(1 + λ)``, and run the unmodified SB3 ``train`` (PPO's clipped surrogate,
   TRPO's natural-gradient step);
3. fit the cost critic on the cost TD(λ) returns, with its own optimiser and its own shuffle
   generator, so that SB3's random streams are untouched.

A NaN or infinite per-step cost raises; a finite one beyond ``±COST_CAP`` (1e6) is saturated
before it reaches the running episode cost and the rollout buffer (float32), and counted in
``cost_clipped`` (logged as ``train/cost_clipped``, warned once): unsaturated, a cost of 1e200
became inf in the buffer and made the policy NaN. The multiplier saturates ``J_c`` the same
way (``train/lagrange_input_clipped`` / ``train/lagrange_input_skipped``).
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer
from gymcurric.integrations.sb3.common.multipliers import (
    COST_CAP,
    Multiplier,
    make_multiplier,
    pid_kwargs_per_update,
)
from gymcurric.integrations.sb3.common.policies import CostActorCriticPolicy
from gymcurric.safety.modulation import RiskModulation

__all__ = ["LagrangianMixin", "checked_schedule"]

FloatOrSchedule = float | Callable[[float], float]


class checked_schedule:  # lower case: used like SB3's schedule helpers
    """A constant or an SB3 schedule (``progress_remaining -> float``) checked on every call.

    Args:
        name: the parameter name, for errors.
        value: a number or a callable.
        minimum: the smallest allowed value.
        source: the class name, for errors.

    Examples:
        >>> checked_schedule("cost_limit", lambda p: 10.0 * p, minimum=0.0)(0.5)
        5.0
    """

    def __init__(self, name: str, value: Any, *, minimum: float = 0.0, source: str = "") -> None:
        self.name, self.value, self.minimum, self.source = name, value, minimum, source
        if not callable(value) and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ConfigError(
                name,
                value,
                "expected a number or a schedule progress_remaining -> float",
                source=source,
            )
        self(1.0)  # validate now, not a rollout later

    def __call__(self, progress_remaining: float) -> float:
        """The value at ``progress_remaining`` (1 at the start of learning, 0 at the end)."""
        try:
            out = self.value(progress_remaining) if callable(self.value) else self.value
        except Exception as exc:
            raise ConfigError(
                self.name, self.value, f"the schedule raised {exc!r}", source=self.source
            ) from exc
        if isinstance(out, bool) or not isinstance(out, int | float | np.floating | np.integer):
            raise ConfigError(
                self.name,
                self.value,
                f"the schedule returned {out!r} at progress_remaining={progress_remaining:g}; "
                "expected a number",
                source=self.source,
            )
        out = float(out)
        if not math.isfinite(out) or out < self.minimum:
            raise ConfigError(
                self.name,
                self.value,
                f"value {out!r} at progress_remaining={progress_remaining:g}; expected a finite "
                f"number >= {self.minimum:g}",
                source=self.source,
            )
        return out


class LagrangianMixin(OnPolicyAlgorithm):
    """Cost rollouts, cost critic, Lagrange multiplier and their logs for SB3 on-policy agents.

    Not used alone: see :class:`~gymcurric.integrations.sb3.ppo_lag.PPOLag` and
    :class:`~gymcurric.integrations.sb3.trpo_lag.TRPOLag`, which document the arguments.
    """

    rollout_buffer: CostRolloutBuffer
    policy: CostActorCriticPolicy
    lagrange: Multiplier
    normalize_reward_advantage: bool  # the user's normalize_advantage, set by the subclass

    def _init_lagrangian(
        self,
        *,
        cost_limit: FloatOrSchedule,
        multiplier: str,
        lagrange_init: FloatOrSchedule,
        lagrange_lr: FloatOrSchedule,
        multiplier_kwargs: dict[str, Any] | None,
        pid_epoch_steps: int | None,
        cost_window: int,
        update_cost_critic: bool,
        cost_max_grad_norm: float | None,
        center_cost_advantage: bool,
        risk_modulation: RiskModulation | bool | dict[str, Any] | None,
        seed: int | None,
        cost_n_epochs: int | None = None,
    ) -> None:
        src = type(self).__name__
        self.cost_limit = checked_schedule("cost_limit", cost_limit, source=src)
        self.lagrange_init = checked_schedule("lagrange_init", lagrange_init, source=src)
        self.lagrange_lr = checked_schedule("lagrange_lr", lagrange_lr, source=src)
        if multiplier not in ("adam", "sgd", "pid"):
            raise ConfigError(
                "multiplier", multiplier, "expected 'adam', 'sgd' or 'pid'", source=src
            )
        self.multiplier = multiplier
        self.multiplier_kwargs = dict(multiplier_kwargs or {})
        if pid_epoch_steps is not None:
            if multiplier != "pid":
                raise ConfigError(
                    "pid_epoch_steps",
                    pid_epoch_steps,
                    f"only applies to multiplier='pid' (multiplier is {multiplier!r})",
                    source=src,
                )
            check_int(
                "pid_epoch_steps",
                pid_epoch_steps,
                source=src,
                optional=True,
                reason="expected an int >= 1 or None",
            )
        self.pid_epoch_steps = pid_epoch_steps
        # Build one now so that bad multiplier_kwargs fail in the constructor (the conversion
        # per rollout needs n_envs, known once the env is set: see _multiplier_kwargs).
        make_multiplier(
            multiplier,
            init=self.lagrange_init(1.0),
            lr=self.lagrange_lr(1.0),
            kwargs=self.multiplier_kwargs,
        )
        check_int("cost_window", cost_window, source=src)
        self.cost_window = cost_window
        self.update_cost_critic = bool(update_cost_critic)
        if cost_max_grad_norm is not None and not cost_max_grad_norm > 0:
            raise ConfigError(
                "cost_max_grad_norm", cost_max_grad_norm, "expected > 0 or None", source=src
            )
        self.cost_max_grad_norm = cost_max_grad_norm
        check_int(
            "cost_n_epochs",
            cost_n_epochs,
            source=src,
            optional=True,
            reason="expected an int >= 1 or None",
        )
        self.cost_n_epochs = cost_n_epochs
        self.center_cost_advantage = bool(center_cost_advantage)
        # The episode costs J_c is computed from (pickled with the model by SB3's save).
        self.ep_cost_buffer: deque[float] = deque(maxlen=cost_window)
        self._running_cost: np.ndarray | None = None
        # The cost critic's minibatch shuffle has its own generator: SB3's global streams stay
        # exactly as in PPO/TRPO (parity), and it is saved with the model.
        self._cost_rng = np.random.default_rng(seed)
        self._last_jc: float | None = None
        #: How many per-step costs were saturated to ``±COST_CAP`` (saved with the model).
        self.cost_clipped = 0
        self._init_risk_hook(risk_modulation, src)

    def _init_risk_hook(
        self, risk_modulation: RiskModulation | bool | dict[str, Any] | None, src: str
    ) -> None:
        self.risk_modulation = RiskModulation.coerce(risk_modulation, source=src)
        window = self.risk_modulation.reference_window if self.risk_modulation else 1
        self._risk_reference: deque[float] = deque(maxlen=window)
        self._rollout_risks: list[float] = []
        self.episodes_seen = 0

    # ------------------------------------------------------------------ set-up and save/load
    def _setup_model(self) -> None:
        super()._setup_model()  # the base algorithm's policy and rollout buffer
        self._setup_lagrangian()

    def _setup_lagrangian(self) -> None:
        if not isinstance(self.policy, CostActorCriticPolicy):
            raise ConfigError(
                "policy",
                type(self.policy).__name__,
                "the Lagrangian algorithms need a CostActorCriticPolicy (use 'MlpPolicy' or "
                "'CnnPolicy' of this algorithm, or a subclass)",
                source=type(self).__name__,
            )
        # the subclass keeps the user's normalize_advantage here (SB3's own flag is off: the
        # buffer standardises A_r before combining it with A_c)
        self.rollout_buffer.normalize_advantage = self.normalize_reward_advantage
        self.rollout_buffer.center_cost_advantage = self.center_cost_advantage
        # a model saved before RiskModulation existed holds the hook's settings as a dict
        self.risk_modulation = RiskModulation.coerce(
            self.risk_modulation, source=type(self).__name__
        )
        self.lagrange = make_multiplier(
            self.multiplier,
            init=self.lagrange_init(1.0),
            lr=self.lagrange_lr(1.0),
            kwargs=self._multiplier_kwargs(),
        )

    def _multiplier_kwargs(self) -> dict[str, Any]:
        """``multiplier_kwargs``, with PID constants converted per rollout if they are per epoch."""
        if self.pid_epoch_steps is None:
            return self.multiplier_kwargs
        return pid_kwargs_per_update(
            self.multiplier_kwargs,
            epoch_steps=self.pid_epoch_steps,
            update_steps=self.n_steps * self.n_envs,
        )

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, tensors = super()._get_torch_save_params()
        return [*state_dicts, "policy.cost_optimizer", "lagrange"], tensors

    @property
    def lagrange_multiplier(self) -> float:
        """The current λ."""
        return self.lagrange.value

    # ------------------------------------------------------------------------------ rollouts
    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        env_reset = reset_num_timesteps or self._last_obs is None
        out = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        if env_reset or self._running_cost is None:
            assert self.env is not None
            self._running_cost = np.zeros(self.env.num_envs, dtype=np.float64)
        if reset_num_timesteps:
            self.ep_cost_buffer.clear()
        return out

    def _step_costs(self, infos: list[dict[str, Any]]) -> np.ndarray:
        missing = [i for i, info in enumerate(infos) if "cost" not in info]
        if missing:
            raise ConfigError(
                "info['cost']",
                None,
                f"sub-envs {missing} reported no info['cost']: {type(self).__name__} reads the "
                "cost of every step from info['cost'] (gymcurric envs and the safety-gymnasium "
                "loader provide it; wrap other envs in gymcurric.wrappers.AnnotateCost)",
                source=type(self).__name__,
            )
        costs = np.array([info["cost"] for info in infos], dtype=np.float64)
        if not np.all(np.isfinite(costs)):
            raise NonFiniteValueError(
                f"{type(self).__name__}: non-finite info['cost'] {costs.tolist()}; wrap the env "
                "in gymcurric.wrappers.AnnotateCost(nonfinite=...) to replace them"
            )
        over = np.abs(costs) > COST_CAP
        if over.any():
            # float32 in the buffer: beyond ~3e38 a cost is inf there and the policy goes NaN
            if self.cost_clipped == 0:
                warnings.warn(
                    f"{type(self).__name__}: info['cost'] {costs[over].tolist()} saturated to "
                    f"±{COST_CAP:g} (counted in .cost_clipped, logged as train/cost_clipped; "
                    "warned once)",
                    GymcurricWarning,
                    stacklevel=2,
                )
            self.cost_clipped += int(over.sum())
            costs = np.clip(costs, -COST_CAP, COST_CAP)
        return costs

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: CostRolloutBuffer,  # type: ignore[override]
        n_rollout_steps: int,
    ) -> bool:
        """SB3's ``collect_rollouts`` plus costs, cost values and episode costs.

        Costs are read from ``info["cost"]``, which ``VecNormalize`` passes through untouched (it
        normalises rewards only), so they are never normalised. A time-limit truncation
        bootstraps the cost with ``cost_gamma·V_c(terminal_observation)``, as SB3 bootstraps the
        reward with ``gamma·V(terminal_observation)``.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        assert self._running_cost is not None
        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
        callback.on_rollout_start()
        cost_gamma = rollout_buffer.cost_gamma
        self._rollout_risks = []

        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with th.no_grad():
                obs_tensor = obs_as_tensor(self._last_obs, self.device)  # type: ignore[arg-type]
                actions, values, log_probs = self.policy(obs_tensor)
            actions = actions.cpu().numpy()
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    low, high = self.action_space.low, self.action_space.high
                    clipped_actions = np.clip(actions, low, high)

            new_obs, rewards, dones, infos = env.step(clipped_actions)
            costs = self._step_costs(infos)
            self.num_timesteps += env.num_envs

            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            self._running_cost += costs
            if self.risk_modulation is not None:
                self._rollout_risks.extend(float(i["risk"]) for i in infos if "risk" in i)
            if dones.any():
                self.episodes_seen += int(dones.sum())
                for idx in np.flatnonzero(dones).tolist():
                    self.ep_cost_buffer.append(float(self._running_cost[idx]))
                self._running_cost[dones] = 0.0
            n_steps += 1

            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)

            # Time-out bootstrap (SB3 GitHub issue #633), for the reward and the cost.
            for idx, done in enumerate(dones):
                if (
                    done
                    and infos[idx].get("terminal_observation") is not None
                    and infos[idx].get("TimeLimit.truncated", False)
                ):
                    terminal_obs = self.policy.obs_to_tensor(infos[idx]["terminal_observation"])[0]
                    with th.no_grad():
                        terminal_value = self.policy.predict_values(terminal_obs)[0]
                        terminal_cost = self.policy.predict_cost_values(terminal_obs)[0]  # type: ignore[arg-type]
                    rewards[idx] += self.gamma * terminal_value
                    costs[idx] += cost_gamma * float(terminal_cost)

            rollout_buffer.add(
                self._last_obs,  # type: ignore[arg-type]
                actions,
                rewards,
                self._last_episode_starts,  # type: ignore[arg-type]
                values,
                log_probs,
                cost=costs,
                cost_value=None,  # filled in one batched pass after the rollout
            )
            self._last_obs = new_obs  # type: ignore[assignment]
            self._last_episode_starts = dones

        with th.no_grad():
            new_obs_tensor = obs_as_tensor(new_obs, self.device)  # type: ignore[arg-type]
            values = self.policy.predict_values(new_obs_tensor)
            last_cost_values = self.policy.predict_cost_values(new_obs_tensor)  # type: ignore[arg-type]
        # V_c does not change during the rollout: evaluate it on all stored observations at once
        # instead of once per step (the same values, a fraction of the per-step overhead).
        rollout_buffer.cost_values[:] = self._batched_cost_values(rollout_buffer.observations)
        rollout_buffer.compute_returns_and_advantage(
            last_values=values, dones=dones, last_cost_values=last_cost_values
        )
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def dump_logs(self, iteration: int = 0) -> None:
        """SB3's logs plus ``rollout/ep_cost_mean`` (the episodes λ is updated from)."""
        if self.ep_cost_buffer:
            self.logger.record("rollout/ep_cost_mean", float(np.mean(self.ep_cost_buffer)))
        super().dump_logs(iteration)

    # ----------------------------------------------------------------------------- training
    def _lagrange_lr_scale(self) -> float:
        """Per-rollout scale of λ's step size: 1.0, or the risk modulation scale ``M``.

        With ``risk_modulation`` on and ``info["risk"]`` present in this rollout, ``M`` is
        :func:`gymcurric.safety.modulation.lagrange_modulation` of the rollout's risk values
        against the last ``reference_window`` ones (this rollout's included), logged as
        ``risk/modulation_scale``. Without risk values the scale is 1.0.
        """
        if self.risk_modulation is None:
            return 1.0
        recent = self._rollout_risks
        scale = 1.0
        if recent:
            self._risk_reference.extend(recent)
            mod = self.risk_modulation.modulation(
                recent, list(self._risk_reference), episodes_seen=self.episodes_seen
            )
            scale = mod.scale
        self.logger.record("risk/modulation_scale", scale)
        return scale

    def _update_lagrange(self) -> None:
        """Update λ once per rollout (before the policy update, as OmniSafe) and hand it over."""
        progress = self._current_progress_remaining
        limit = self.cost_limit(progress)
        lr_scale = self._lagrange_lr_scale()
        if self.ep_cost_buffer:
            jc = float(np.mean(self.ep_cost_buffer))
            self._last_jc = jc
            self.lagrange.update(jc, limit, lr=self.lagrange_lr(progress), lr_scale=lr_scale)
        self.rollout_buffer.penalty = self.lagrange.value
        self.logger.record("train/lagrange_multiplier", self.lagrange.value)
        self.logger.record("train/cost_limit", limit)
        # cumulative counts of the absurd costs that were saturated (or refused) on the way
        self.logger.record("train/cost_clipped", self.cost_clipped)
        for key in ("input_clipped", "input_skipped"):
            self.logger.record(f"train/lagrange_{key}", getattr(self.lagrange, key, 0))
        # A_r is standardised and A_c only centred, so the cost term's weight in the update,
        # relative to the reward term's, is about λ·std(A_c): worth seeing when tuning λ.
        self.logger.record(
            "train/cost_advantage_std", float(np.std(self.rollout_buffer.cost_advantages))
        )

    def _batched_cost_values(self, observations: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """``V_c`` of a ``(n_steps, n_envs, *obs_shape)`` array, shape ``(n_steps, n_envs)``."""
        lead = observations.shape[:2]
        flat = observations.reshape(-1, *observations.shape[2:])
        out = np.empty(len(flat), dtype=np.float32)
        with th.no_grad():
            for start in range(0, len(flat), chunk):
                obs = th.as_tensor(flat[start : start + chunk], device=self.device)
                pred = self.policy.predict_cost_values(obs).flatten()
                out[start : start + chunk] = pred.cpu().numpy()
        return out.reshape(lead)

    def _train_cost_critic(self, n_epochs: int, batch_size: int | None) -> None:
        """Fit ``V_c`` to the cost TD(λ) returns (MSE), with its own optimiser and shuffle."""
        buffer = self.rollout_buffer
        losses: list[float] = []
        if self.update_cost_critic:
            optimizer = self.policy.cost_optimizer
            self._update_learning_rate(optimizer)
            params = self.policy.cost_parameters()
            # The buffer arrays are flattened to (n_steps * n_envs, ...) by the policy update's
            # buffer.get(); convert them once and index minibatches (own generator: SB3's global
            # NumPy stream is left as PPO/TRPO would leave it).
            n = buffer.buffer_size * buffer.n_envs
            obs_all = buffer.to_torch(buffer.observations.reshape(n, *buffer.obs_shape))
            ret_all = buffer.to_torch(buffer.cost_returns.reshape(n))
            size = n if batch_size is None else batch_size
            for _ in range(n_epochs):
                perm = th.as_tensor(self._cost_rng.permutation(n), device=obs_all.device)
                for start in range(0, n, size):
                    idx = perm[start : start + size]
                    pred = self.policy.predict_cost_values(obs_all[idx]).flatten()
                    loss = F.mse_loss(ret_all[idx], pred)
                    optimizer.zero_grad()
                    loss.backward()
                    if self.cost_max_grad_norm is not None:
                        th.nn.utils.clip_grad_norm_(params, self.cost_max_grad_norm)
                    optimizer.step()
                    losses.append(loss.item())
            # No stale cost-critic gradients may reach SB3's clip_grad_norm_(policy.parameters()).
            optimizer.zero_grad(set_to_none=True)
            self.logger.record("train/cost_value_loss", float(np.mean(losses)))
        self.logger.record(
            "train/cost_explained_variance",
            float(explained_variance(buffer.cost_values.flatten(), buffer.cost_returns.flatten())),
        )
