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

Several constraints (issue 25): ``cost_limit`` as a sequence of ``K`` limits reads ``K`` costs
per step from ``info["costs"]`` (or from the info keys ``cost_keys``), with ``K`` cost-critic
outputs, ``K`` cost GAEs, ``K`` windows ``J_c^k`` and ``K`` multipliers ``λ_k``; the advantage
becomes ``(A_r - Σ_k λ_k·A_c^k)/(1 + Σ_k λ_k)`` (see
:mod:`~gymcurric.integrations.sb3.common.constraints`). With one constraint nothing changes.

A NaN or infinite per-step cost raises; a finite one beyond ``±COST_CAP`` (1e6) is saturated
before it reaches the running episode cost and the rollout buffer (float32), and counted in
``cost_clipped`` (logged as ``train/cost_clipped``, warned once): unsaturated, a cost of 1e200
became inf in the buffer and made the policy NaN. The multiplier saturates ``J_c`` the same
way (``train/lagrange_input_clipped`` / ``train/lagrange_input_skipped``).
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer
from gymcurric.integrations.sb3.common.constraints import (
    checked_schedule,
    mean_episode_cost,
    parse_constraints,
    read_costs,
    record_per_constraint,
)
from gymcurric.integrations.sb3.common.multiplier_checks import (
    check_count,
    check_finite,
    check_flag,
)
from gymcurric.integrations.sb3.common.multipliers import (
    COST_CAP,
    Multiplier,
    MultiplierSet,
    make_multiplier,
    pid_kwargs_per_update,
)
from gymcurric.integrations.sb3.common.policies import (
    CostActorCriticPolicy,
    check_policy_kwargs,
    limit_words,
    policy_from_name,
)
from gymcurric.integrations.sb3.common.risk_values import read_risks
from gymcurric.safety.modulation import RiskModulation

__all__ = ["LagrangianMixin", "checked_schedule"]

FloatOrSchedule = float | Callable[[float], float]
#: ``cost_limit``: one limit (float or schedule), or a sequence of them (one per constraint).
CostLimit = FloatOrSchedule | list[FloatOrSchedule] | tuple[FloatOrSchedule, ...]


class LagrangianMixin(OnPolicyAlgorithm):
    """Cost rollouts, cost critic, Lagrange multiplier and their logs for SB3 on-policy agents.

    Not used alone: see :class:`~gymcurric.integrations.sb3.ppo_lag.PPOLag` and
    :class:`~gymcurric.integrations.sb3.trpo_lag.TRPOLag`, which document the arguments.
    """

    rollout_buffer: CostRolloutBuffer
    policy: CostActorCriticPolicy
    lagrange: Multiplier | MultiplierSet
    normalize_reward_advantage: bool  # the user's normalize_advantage, set by the subclass
    #: ``d`` at a ``progress_remaining``: a float with one constraint, an array of ``K`` with
    #: several (:class:`~gymcurric.integrations.sb3.common.constraints.CostLimits`).
    cost_limit: Callable[[float], Any]
    #: Whether the algorithm takes ``K > 1`` constraints (PPOLag, TRPOLag; not CPO or P3O).
    supports_multiple_constraints: ClassVar[bool] = False
    #: ``K`` (1 unless ``cost_limit`` is a sequence); saved with the model.
    n_costs: int = 1
    #: Whether the costs come from ``info["costs"]`` / ``cost_keys`` (not ``info["cost"]``).
    vector_costs: bool = False
    #: The info keys of the ``K`` costs, or None.
    cost_keys: tuple[str, ...] | None = None
    #: Updates of any network skipped because a number was not finite, the cost critic's
    #: included (``train/nonfinite_skipped``; the definition is in docs/safe_rl.md).
    nonfinite_skipped: int = 0

    def _init_lagrangian(
        self,
        *,
        cost_limit: CostLimit,
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
        cost_keys: tuple[str, ...] | list[str] | None = None,
    ) -> None:
        src = type(self).__name__
        self.cost_limit, self.cost_keys, self.n_costs, self.vector_costs = parse_constraints(
            cost_limit, cost_keys, source=src
        )
        if self.n_costs > 1 and not self.supports_multiple_constraints:
            raise ConfigError(
                "cost_limit",
                cost_limit,
                f"{src} takes one constraint; {self.n_costs} limits were given (PPOLag, "
                "PPOPIDLag and TRPOLag take one per constraint)",
                source=src,
            )
        self.lagrange_init = checked_schedule("lagrange_init", lagrange_init, source=src)
        self.lagrange_lr = checked_schedule("lagrange_lr", lagrange_lr, source=src)
        if multiplier not in ("adam", "sgd", "pid"):
            raise ConfigError(
                "multiplier", multiplier, "expected 'adam', 'sgd' or 'pid'", source=src
            )
        self.multiplier = multiplier
        # Build one now so that bad multiplier_kwargs (not a dict included) fail in the
        # constructor (the conversion per rollout needs n_envs, known once the env is set:
        # see _multiplier_kwargs).
        make_multiplier(
            multiplier,
            init=self.lagrange_init(1.0),
            lr=self.lagrange_lr(1.0),
            kwargs=multiplier_kwargs,
            source=src,
        )
        self.multiplier_kwargs = dict(multiplier_kwargs or {})
        if pid_epoch_steps is not None:
            if multiplier != "pid":
                raise ConfigError(
                    "pid_epoch_steps",
                    pid_epoch_steps,
                    f"only applies to multiplier='pid' (multiplier is {multiplier!r})",
                    source=src,
                )
            pid_epoch_steps = check_count(
                "pid_epoch_steps",
                pid_epoch_steps,
                source=src,
                reason="expected an int >= 1 or None",
            )
        self.pid_epoch_steps = pid_epoch_steps
        cost_window = check_count("cost_window", cost_window, source=src)
        self.cost_window = cost_window
        self.update_cost_critic = check_flag("update_cost_critic", update_cost_critic, source=src)
        if cost_max_grad_norm is not None:
            norm = check_finite("cost_max_grad_norm", cost_max_grad_norm, source=src)
            if not norm > 0:
                raise ConfigError(
                    "cost_max_grad_norm", cost_max_grad_norm, "expected > 0 or None", source=src
                )
            if type(cost_max_grad_norm) is not int:  # a Python int stays as it was saved
                cost_max_grad_norm = norm
        self.cost_max_grad_norm = cost_max_grad_norm
        self.cost_n_epochs = check_count(
            "cost_n_epochs",
            cost_n_epochs,
            source=src,
            optional=True,
            reason="expected an int >= 1 or None",
        )
        self.center_cost_advantage = check_flag(
            "center_cost_advantage", center_cost_advantage, source=src
        )
        # The episode costs J_c is computed from (pickled with the model by SB3's save): floats,
        # or K-tuples of floats with K > 1 constraints.
        self.ep_cost_buffer: deque[Any] = deque(maxlen=cost_window)
        self._running_cost: np.ndarray | None = None
        # The cost critic's minibatch shuffle has its own generator: SB3's global streams stay
        # exactly as in PPO/TRPO (parity), and it is saved with the model.
        self._cost_rng = np.random.default_rng(seed)
        self._last_jc: float | np.ndarray | None = None
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
        check_policy_kwargs(self.policy_kwargs, self.n_costs, source=type(self).__name__)
        if self.n_costs > 1:  # K cost-critic outputs, K cost GAEs (K = 1: as before)
            self.policy_kwargs = {**self.policy_kwargs, "n_costs": self.n_costs}
            self.rollout_buffer_kwargs = {**self.rollout_buffer_kwargs, "n_costs": self.n_costs}
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
        if getattr(self.policy, "n_costs", 1) != self.n_costs:
            raise ConfigError(
                "policy",
                type(self.policy).__name__,
                f"its cost critic has {getattr(self.policy, 'n_costs', 1)} outputs, but "
                f"cost_limit has {limit_words(self.n_costs)}",
                source=type(self).__name__,
            )
        init, lr = self.lagrange_init(1.0), self.lagrange_lr(1.0)
        kwargs = self._multiplier_kwargs()
        # a bad kind or kwargs was refused, naming the class, when the model was built
        src = type(self).__name__
        if self.n_costs > 1:
            self.lagrange = MultiplierSet(
                self.n_costs, self.multiplier, init=init, lr=lr, kwargs=kwargs, source=src
            )
        else:
            self.lagrange = make_multiplier(
                self.multiplier, init=init, lr=lr, kwargs=kwargs, source=src
            )

    def _get_policy_from_name(self, policy_name: str) -> type[BasePolicy]:
        return policy_from_name(self.policy_aliases, policy_name, type(self).__name__)

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
    def lagrange_multiplier(self) -> Any:
        """The current λ: a float with one constraint, an array of the ``K`` λ_k with several."""
        return self.lagrange.value

    @property
    def lagrange_multipliers(self) -> np.ndarray:
        """The current λ_k of every constraint, always an array of shape ``(K,)``."""
        return np.atleast_1d(np.asarray(self.lagrange_multiplier, dtype=np.float64))

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
            shape = (self.env.num_envs,) + ((self.n_costs,) if self.n_costs > 1 else ())
            self._running_cost = np.zeros(shape, dtype=np.float64)
        if reset_num_timesteps:
            self.ep_cost_buffer.clear()
        return out

    def _step_costs(self, infos: list[dict[str, Any]]) -> np.ndarray:
        costs = read_costs(
            infos,
            n_costs=self.n_costs,
            vector=self.vector_costs,
            keys=self.cost_keys,
            source=type(self).__name__,
        )
        over = np.abs(costs) > COST_CAP
        if over.any():
            # float32 in the buffer: beyond ~3e38 a cost is inf there and the policy goes NaN
            if self.cost_clipped == 0:
                warnings.warn(
                    f"{type(self).__name__}: costs {costs[over].tolist()} saturated to "
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

        Costs are read from ``info["cost"]`` (or ``info["costs"]`` / ``cost_keys``), which
        ``VecNormalize`` passes through untouched (it normalises rewards only), so they are never
        normalised. A time-limit truncation bootstraps the cost with
        ``cost_gamma·V_c(terminal_observation)``, as SB3 bootstraps the reward with
        ``gamma·V(terminal_observation)``.
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
                self._rollout_risks.extend(read_risks(infos, type(self).__name__))
            if dones.any():
                self.episodes_seen += int(dones.sum())
                for idx in np.flatnonzero(dones).tolist():
                    ep_cost = self._running_cost[idx]
                    self.ep_cost_buffer.append(
                        float(ep_cost) if self.n_costs == 1 else tuple(ep_cost.tolist())
                    )
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
                    if self.n_costs == 1:
                        costs[idx] += cost_gamma * float(terminal_cost)
                    else:
                        costs[idx] += cost_gamma * terminal_cost.cpu().numpy().astype(np.float64)

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
        """SB3's logs plus ``rollout/ep_cost_mean`` (the episodes λ is updated from).

        With ``K > 1`` constraints also ``rollout/ep_cost_mean_k`` per constraint; the aggregate
        is the mean of the episodes' total cost.
        """
        if self.ep_cost_buffer:
            jc = mean_episode_cost(self.ep_cost_buffer, self.n_costs)
            record_per_constraint(self.logger.record, "rollout/ep_cost_mean", jc, self.n_costs)
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
        """Update λ once per rollout (before the policy update, as OmniSafe) and hand it over.

        With ``K > 1`` constraints each λ_k is updated from its own ``J_c^k`` and ``d_k``.
        """
        progress = self._current_progress_remaining
        limit = self.cost_limit(progress)
        lr_scale = self._lagrange_lr_scale()
        if self.ep_cost_buffer:
            jc = mean_episode_cost(self.ep_cost_buffer, self.n_costs)
            self._last_jc = jc
            self.lagrange.update(jc, limit, lr=self.lagrange_lr(progress), lr_scale=lr_scale)  # type: ignore[arg-type]
        self.rollout_buffer.penalty = self.lagrange.value
        k = self.n_costs
        record = self.logger.record
        record_per_constraint(record, "train/lagrange_multiplier", self.lagrange.value, k)
        record_per_constraint(record, "train/cost_limit", limit, k)
        # cumulative counts of the absurd costs that were saturated (or refused) on the way
        self.logger.record("train/cost_clipped", self.cost_clipped)
        for key in ("input_clipped", "input_skipped"):
            self.logger.record(f"train/lagrange_{key}", getattr(self.lagrange, key, 0))
        # A_r is standardised and A_c only centred, so the cost term's weight in the update,
        # relative to the reward term's, is about λ·std(A_c): worth seeing when tuning λ.
        adv_c = self.rollout_buffer.cost_advantages
        if k == 1:
            record("train/cost_advantage_std", float(np.std(adv_c)))
        else:  # the std of the total Σ_k A_c^k, and of each A_c^k
            record("train/cost_advantage_std", float(np.std(adv_c.sum(axis=-1))))
            for i in range(k):
                record(f"train/cost_advantage_std_{i}", float(np.std(adv_c[..., i])))

    def _batched_cost_values(self, observations: np.ndarray, chunk: int = 4096) -> np.ndarray:
        """``V_c`` of a ``(n_steps, n_envs, *obs_shape)`` array, shape ``(n_steps, n_envs)``.

        With ``K > 1`` constraints, shape ``(n_steps, n_envs, K)``.
        """
        lead = observations.shape[:2]
        tail = (self.n_costs,) if self.n_costs > 1 else ()
        flat = observations.reshape(-1, *observations.shape[2:])
        out = np.empty((len(flat), *tail), dtype=np.float32)
        with th.no_grad():
            for start in range(0, len(flat), chunk):
                obs = th.as_tensor(flat[start : start + chunk], device=self.device)
                pred = self.policy.predict_cost_values(obs).reshape(-1, *tail)
                out[start : start + chunk] = pred.cpu().numpy()
        return out.reshape(*lead, *tail)

    def _train_cost_critic(self, n_epochs: int, batch_size: int | None) -> None:
        """Fit ``V_c`` to the cost TD(λ) returns (MSE), with its own optimiser and shuffle.

        Non-finite returns skip the fit (the cost critic is left as it was), counted as one
        skipped update in :attr:`nonfinite_skipped`; ``train/nonfinite_skipped`` is recorded
        here, after the policy update's own count.

        With ``K > 1`` constraints the loss is the sum of the ``K`` outputs' MSEs (each output
        learns as a single cost critic would), logged in total and per constraint.
        """
        buffer = self.rollout_buffer
        k = self.n_costs
        tail = (k,) if k > 1 else ()
        losses: list[Any] = []
        fit = self.update_cost_critic
        # NaN targets would write NaN into the cost critic: that fit is skipped, and counted
        if fit and not np.all(np.isfinite(buffer.cost_returns)):
            fit = False
            self.nonfinite_skipped += 1
        self.logger.record("train/nonfinite_skipped", self.nonfinite_skipped)
        if fit:
            optimizer = self.policy.cost_optimizer
            self._update_learning_rate(optimizer)
            params = self.policy.cost_parameters()
            # The buffer arrays are flattened to (n_steps * n_envs, ...) by the policy update's
            # buffer.get(); convert them once and index minibatches (own generator: SB3's global
            # NumPy stream is left as PPO/TRPO would leave it).
            n = buffer.buffer_size * buffer.n_envs
            obs_all = buffer.to_torch(buffer.observations.reshape(n, *buffer.obs_shape))
            ret_all = buffer.to_torch(buffer.cost_returns.reshape(n, *tail))
            size = n if batch_size is None else batch_size
            for _ in range(n_epochs):
                perm = th.as_tensor(self._cost_rng.permutation(n), device=obs_all.device)
                for start in range(0, n, size):
                    idx = perm[start : start + size]
                    pred = self.policy.predict_cost_values(obs_all[idx]).reshape(-1, *tail)
                    if k == 1:
                        loss = F.mse_loss(ret_all[idx], pred)
                    else:  # Σ_k MSE_k: each output learns as one cost critic would
                        per_cost = ((ret_all[idx] - pred) ** 2).mean(dim=0)
                        loss = per_cost.sum()
                    optimizer.zero_grad()
                    loss.backward()
                    if self.cost_max_grad_norm is not None:
                        th.nn.utils.clip_grad_norm_(params, self.cost_max_grad_norm)
                    optimizer.step()
                    losses.append(loss.item() if k == 1 else per_cost.detach().cpu().numpy())
            # No stale cost-critic gradients may reach SB3's clip_grad_norm_(policy.parameters()).
            optimizer.zero_grad(set_to_none=True)
            mean_loss = np.mean(np.asarray(losses, dtype=np.float64), axis=0)
            record_per_constraint(self.logger.record, "train/cost_value_loss", mean_loss, k)
        # explained variance of the total cost's values (with K = 1, the one cost's), and per k
        values, returns = buffer.cost_values, buffer.cost_returns
        total_v, total_r = (values, returns) if k == 1 else (values.sum(-1), returns.sum(-1))
        record = self.logger.record
        record(
            "train/cost_explained_variance",
            float(explained_variance(total_v.ravel(), total_r.ravel())),
        )
        for i in range(k if k > 1 else 0):
            ev = explained_variance(values[..., i].ravel(), returns[..., i].ravel())
            record(f"train/cost_explained_variance_{i}", float(ev))
