"""PPO-Lagrangian (and PID-Lagrangian) on Stable-Baselines3."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer
from gymcurric.integrations.sb3.common.lagrangian import (
    CostLimit,
    FloatOrSchedule,
    LagrangianMixin,
)
from gymcurric.integrations.sb3.common.multiplier_checks import check_multiplier_kwargs
from gymcurric.integrations.sb3.common.ppo_update import guarded_ppo_train
from gymcurric.integrations.sb3.ppo_lag.policies import CnnPolicy, CostActorCriticPolicy, MlpPolicy
from gymcurric.safety.modulation import RiskModulation

__all__ = ["PPOLag", "PPOPIDLag"]

SelfPPOLag = TypeVar("SelfPPOLag", bound="PPOLag")


class PPOLag(LagrangianMixin, PPO):
    """PPO-Lagrangian: PPO's clipped surrogate on the penalised advantage, λ learned per rollout.

    Reads the cost of every step from ``info["cost"]`` (a :class:`~gymcurric.errors.ConfigError`
    names the sub-envs that do not report it). Costs get their own GAE (``cost_gamma``,
    ``cost_gae_lambda``) and their own critic (:class:`CostActorCriticPolicy`). Once per rollout,
    before the policy update, λ is updated from ``J_c``, the mean cost of the last
    ``cost_window`` finished episodes, against ``cost_limit`` — by default as OmniSafe's PPOLag
    (a parameter trained with Adam on ``-λ·(J_c - d)``, init 0.001, lr 0.035, λ ≥ 0). The policy
    then maximises PPO's clipped surrogate of ``A = (A_r - λ·A_c)/(1 + λ)`` with ``A_r``
    standardised and ``A_c`` centred per minibatch. With ``lagrange_init=0``,
    ``lagrange_lr=0`` and ``update_cost_critic=False`` the policy's parameters after ``learn()``
    are exactly SB3 PPO's for the same seed.

    Absurd costs cannot make λ or the policy non-finite: a NaN/Inf ``info["cost"]`` raises
    :class:`~gymcurric.errors.NonFiniteValueError`, and per-step costs and ``J_c`` beyond
    ``±COST_CAP`` (1e6, :data:`gymcurric.integrations.sb3.common.COST_CAP`) are saturated to
    it, counted and warned about once. The update is SB3's PPO step for step
    (:func:`~gymcurric.integrations.sb3.common.ppo_update.guarded_ppo_train`) with a guard: a
    minibatch whose loss or gradient norm is not finite (NaN advantages or returns) takes no
    optimiser step; a cost critic whose targets are not finite skips its fit. Each skipped
    step and skipped fit counts one in :attr:`nonfinite_skipped` (``train/nonfinite_skipped``,
    the same count in every safe-RL agent: see docs/safe_rl.md).

    Logs SB3's PPO keys plus ``rollout/ep_cost_mean``, ``train/lagrange_multiplier``,
    ``train/cost_limit``, ``train/cost_value_loss``, ``train/cost_explained_variance``,
    ``train/cost_advantage_std`` (the spread of ``A_c``), ``train/cost_clipped`` (per-step
    costs saturated so far), ``train/lagrange_input_clipped`` and
    ``train/lagrange_input_skipped`` (``J_c`` saturated, NaN ``J_c`` refused). With ``K > 1``
    constraints the first six are also logged per constraint with a suffix ``_k``
    (``train/lagrange_multiplier_0``, ``rollout/ep_cost_mean_1``,
    ``train/cost_advantage_std_0``, ...) and the unsuffixed key is their total (the sum; for
    the explained variance and the advantage std, that of the summed cost). ``save``/``load``
    keep λ (each λ_k), its optimiser state, the cost critic and its optimiser, and the window
    of episode costs. :attr:`lagrange_multiplier` is a float with one constraint and an array
    of the ``K`` λ_k with several; :attr:`lagrange_multipliers` is always an array.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"`` or a :class:`CostActorCriticPolicy` subclass.
        env: the env (or its registered id); every sub-env must report ``info["cost"]``.
        learning_rate: as PPO (also the cost critic's).
        n_steps: as PPO.
        batch_size: as PPO.
        n_epochs: as PPO (also the cost critic's epochs).
        gamma: as PPO.
        gae_lambda: as PPO.
        clip_range: as PPO.
        clip_range_vf: as PPO.
        normalize_advantage: standardise the reward advantage per minibatch (as PPO).
        ent_coef: as PPO.
        vf_coef: as PPO.
        max_grad_norm: as PPO.
        use_sde: as PPO.
        sde_sample_freq: as PPO.
        target_kl: as PPO.
        stats_window_size: as PPO.
        tensorboard_log: as PPO.
        policy_kwargs: as PPO; ``cost_net_arch`` sets the cost critic's hidden layers.
        verbose: as PPO.
        seed: as PPO (also seeds the cost critic's minibatch shuffle).
        device: as PPO.
        cost_limit: ``d``, the limit on the expected episode cost (≥ 0; float or schedule).
            λ holds the long-run ``J_c`` near ``d``, above it about as often as below, so
            for a hard budget set ``d`` under it (docs/safe_rl.md, Limits). A sequence of ``K``
            limits (each a float or schedule) sets ``K`` constraints, read from
            ``info["costs"]`` (a length-``K`` float array per step) or from ``cost_keys``; each
            gets its own cost-critic output, cost GAE, window ``J_c^k`` and multiplier ``λ_k``,
            and the policy optimises ``(A_r - Σ_k λ_k·A_c^k)/(1 + Σ_k λ_k)`` (docs/safe_rl.md,
            Several constraints). A sequence of one is the scalar path read from the vector.
        multiplier: ``"adam"`` (OmniSafe), ``"sgd"`` (plain gradient ascent) or ``"pid"``
            (CPPOPID-style PID Lagrangian, see :class:`PPOPIDLag`).
        lagrange_init: initial λ (float or schedule, evaluated at the start), 0.001.
        lagrange_lr: λ's step size (float or schedule), 0.035; unused by ``"pid"``.
        multiplier_kwargs: extra multiplier arguments (``upper_bound``; PID ``kp``, ``ki``,
            ``kd``, ``d_delay``, ``p_ema_alpha``, ``d_ema_alpha``, ``penalty_max``).
        pid_epoch_steps: with ``multiplier="pid"``, read the PID constants as given per epoch
            of this many env steps (OmniSafe's: 20,000) and convert them to this model's
            rollouts of ``n_steps * n_envs`` steps (see
            :func:`~gymcurric.integrations.sb3.common.multipliers.pid_kwargs_per_update`). None
            (default): the constants apply per rollout.
        cost_gamma: discount of the cost (default ``gamma``).
        cost_gae_lambda: GAE λ of the cost (default ``gae_lambda``).
        cost_window: how many finished episodes ``J_c`` averages (100, as OmniSafe).
        update_cost_critic: fit the cost critic (True).
        cost_n_epochs: passes of the cost critic over each rollout (None: ``n_epochs``).
            OmniSafe fits its critics for up to 40 passes of minibatches of 64 per epoch.
        cost_max_grad_norm: gradient-norm clip of the cost critic (OmniSafe: 40). Off by
            default: it rarely binds for an MSE on per-step costs, and on CPU
            ``clip_grad_norm_`` costs about a third of a small cost-critic step.
        center_cost_advantage: centre ``A_c`` per minibatch (True, as OmniSafe).
        risk_modulation: the semantic risk hook: a
            :class:`~gymcurric.safety.modulation.RiskModulation` (``alpha``, ``quantile_p``,
            ``slope``, ``eps``, ``min_episodes``, ``reference_window``), ``True`` for its
            defaults, or a dict of some of its fields; ``None`` (default) or ``False``: off.
            When the envs report ``info["risk"]``, λ's step size of each rollout is scaled by
            the modulation scale ``M`` of that rollout's risk values (logged as
            ``risk/modulation_scale``; 1.0 when no risk value was reported).
        cost_keys: the info keys of the costs, one per limit (e.g. Safety-Gymnasium's
            ``("cost_hazards", "cost_vases_contact")``), read instead of ``info["costs"]``
            (or, with one float limit and one key, instead of ``info["cost"]``). None: default.
        _init_setup_model: as SB3.

    Examples:
        >>> import gymnasium as gym, gymcurric
        >>> model = PPOLag("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32,
        ...                n_epochs=1, cost_limit=5.0, seed=0)
        >>> model = model.learn(128)
        >>> model.lagrange_multiplier >= 0.0
        True
    """

    supports_multiple_constraints: ClassVar[bool] = True
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
    }
    #: Minibatches whose loss or gradient norm was not finite (no step taken), plus cost-critic
    #: fits skipped because their targets were not (saved with the model).
    nonfinite_skipped: int = 0

    def __init__(
        self,
        policy: str | type[CostActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule = 0.2,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        target_kl: float | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        *,
        cost_limit: CostLimit = 25.0,
        multiplier: str = "adam",
        lagrange_init: FloatOrSchedule = 0.001,
        lagrange_lr: FloatOrSchedule = 0.035,
        multiplier_kwargs: dict[str, Any] | None = None,
        pid_epoch_steps: int | None = None,
        cost_gamma: float | None = None,
        cost_gae_lambda: float | None = None,
        cost_window: int = 100,
        update_cost_critic: bool = True,
        cost_max_grad_norm: float | None = None,
        cost_n_epochs: int | None = None,
        center_cost_advantage: bool = True,
        risk_modulation: RiskModulation | bool | dict[str, Any] | None = None,
        cost_keys: tuple[str, ...] | list[str] | None = None,
        _init_setup_model: bool = True,
    ) -> None:
        self._init_lagrangian(
            cost_limit=cost_limit,
            multiplier=multiplier,
            lagrange_init=lagrange_init,
            lagrange_lr=lagrange_lr,
            multiplier_kwargs=multiplier_kwargs,
            pid_epoch_steps=pid_epoch_steps,
            cost_window=cost_window,
            update_cost_critic=update_cost_critic,
            cost_max_grad_norm=cost_max_grad_norm,
            cost_n_epochs=cost_n_epochs,
            center_cost_advantage=center_cost_advantage,
            risk_modulation=risk_modulation,
            seed=seed,
            cost_keys=cost_keys,
        )
        if normalize_advantage and batch_size <= 1:
            raise ConfigError(
                "batch_size",
                batch_size,
                "must be > 1 to normalise advantages (SB3 #440)",
                source=type(self).__name__,
            )
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            clip_range=clip_range,
            clip_range_vf=clip_range_vf,
            # The buffer standardises A_r (before combining it with A_c); PPO.train must not
            # normalise the penalised advantage again.
            normalize_advantage=False,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=CostRolloutBuffer,
            rollout_buffer_kwargs={"cost_gamma": cost_gamma, "cost_gae_lambda": cost_gae_lambda},
            target_kl=target_kl,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self.normalize_reward_advantage = bool(normalize_advantage)
        self.nonfinite_skipped = 0
        if _init_setup_model:
            self._setup_model()

    def train(self) -> None:
        """Update λ, then PPO's update on the penalised advantage, then the cost critic."""
        self._update_lagrange()
        # SB3's PPO.train, with minibatches of non-finite loss skipped instead of stepped
        self._update_learning_rate(self.policy.optimizer)
        guarded_ppo_train(self, self._current_progress_remaining)
        self._train_cost_critic(self.cost_n_epochs or self.n_epochs, self.batch_size)

    def learn(
        self: SelfPPOLag,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "PPOLag",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfPPOLag:
        """Train for ``total_timesteps`` env steps (see SB3's ``PPO.learn``)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )


class PPOPIDLag(PPOLag):
    """PPO with the PID Lagrangian multiplier (OmniSafe ``CPPOPID``; Stooke et al., 2020).

    :class:`PPOLag` with ``multiplier="pid"``: λ = max(0, Kp·P + I + Kd·D) with P an EMA of
    ``J_c - d``, I the clamped integral, D the rise of an EMA of ``J_c`` over ``d_delay``
    rollouts (see :class:`~gymcurric.integrations.sb3.common.multipliers.PIDLagrangeMultiplier`).

    Args:
        policy: as :class:`PPOLag`.
        env: as :class:`PPOLag`.
        kp: proportional gain (0.1).
        ki: integral gain (0.01).
        kd: derivative gain (0.01).
        **kwargs: every other :class:`PPOLag` argument; ``multiplier_kwargs`` may set
            ``d_delay``, ``p_ema_alpha``, ``d_ema_alpha``, ``penalty_max``; ``multiplier``,
            if given, must be ``"pid"`` (a ``ConfigError`` otherwise).

    The defaults are OmniSafe's constants, which it applies once per 20,000-step epoch. Here
    λ is updated once per rollout (2,048 steps with SB3's defaults), so the integral builds
    about 10 times as fast per env step; ``pid_epoch_steps=20_000`` keeps OmniSafe's time
    constants per env step instead.

    Examples:
        >>> model = PPOPIDLag("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=500, batch_size=50,
        ...                   pid_epoch_steps=20_000, seed=0)
        >>> model.lagrange.ki, model.lagrange.d_delay  # 0.01 * 500 / 20,000; 10 * 40
        (0.00025, 400)
    """

    def __init__(
        self,
        policy: str | type[CostActorCriticPolicy],
        env: GymEnv | str,
        *,
        kp: float = 0.1,
        ki: float = 0.01,
        kd: float = 0.01,
        **kwargs: Any,
    ) -> None:
        multiplier = kwargs.pop("multiplier", "pid")
        if multiplier != "pid":
            raise ConfigError(
                "multiplier",
                multiplier,
                "PPOPIDLag's multiplier is 'pid' (use PPOLag for 'adam' or 'sgd')",
                source=type(self).__name__,
            )
        # the user's own multiplier_kwargs are checked (and shown by the ConfigError), not
        # the dict merged with the gains below
        extra = check_multiplier_kwargs(
            "pid", kwargs.pop("multiplier_kwargs", None), source=type(self).__name__
        )
        multiplier_kwargs = {"kp": kp, "ki": ki, "kd": kd, **extra}
        try:
            super().__init__(
                policy, env, multiplier="pid", multiplier_kwargs=multiplier_kwargs, **kwargs
            )
        except ConfigError as exc:
            # The gains are this class's own arguments: a bad one is named as the user passed
            # it, not as multiplier_kwargs['kp'] (as_caller_error's name; one that
            # multiplier_kwargs overrides is not used). They are checked where PPOLag checks
            # multiplier_kwargs, so that of two bad arguments the same one is reported first.
            own = {f"multiplier_kwargs[{n!r}]": n for n in ("kp", "ki", "kd") if n not in extra}
            if exc.source != type(self).__name__ or exc.key not in own:
                raise
            raise ConfigError(own[exc.key], exc.value, exc.reason, source=exc.source) from None
