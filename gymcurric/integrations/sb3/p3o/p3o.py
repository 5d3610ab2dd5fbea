"""P3O, Penalized Proximal Policy Optimization (Zhang et al., IJCAI 2022), on Stable-Baselines3."""

from __future__ import annotations

import math
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from torch.nn import functional as F

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer, CostRolloutBufferSamples
from gymcurric.integrations.sb3.common.lagrangian import FloatOrSchedule, LagrangianMixin
from gymcurric.integrations.sb3.common.multiplier_checks import as_real
from gymcurric.integrations.sb3.common.multipliers import COST_CAP
from gymcurric.integrations.sb3.common.policies import CnnPolicy, CostActorCriticPolicy, MlpPolicy
from gymcurric.integrations.sb3.common.ppo_update import guarded_ppo_train

__all__ = ["P3O", "P3O_VARIANTS", "kappa_schedule", "p3o_cost_loss"]

SelfP3O = TypeVar("SelfP3O", bound="P3O")

#: ``variant`` values: the paper's cost loss, or OmniSafe 0.5's.
P3O_VARIANTS = ("paper", "omnisafe")
KAPPA_SCHEDULES = ("fixed", "increase")


def p3o_cost_loss(
    ratio: th.Tensor,
    cost_advantages: th.Tensor,
    *,
    gap: float,
    kappa: float,
    clip_range: float | None,
) -> tuple[th.Tensor, th.Tensor]:
    """P3O's penalty ``κ·ReLU(L_C)`` and ``L_C`` itself.

    ``L_C = mean(max(ratio·A_c, clip(ratio, 1 ± ε)·A_c)) + gap`` (Zhang et al., 2022, eq. 11:
    the pessimistic clipped cost surrogate). ``clip_range=None`` drops the clipped half, giving
    OmniSafe's ``mean(ratio·A_c) + gap``. ``gap`` is ``(1 - gamma_c)(J_c - d)`` in the paper and
    ``J_c - d`` in OmniSafe.

    Examples:
        >>> ratio, adv_c = th.tensor([1.5, 0.5]), th.tensor([1.0, 1.0])
        >>> pen, l_c = p3o_cost_loss(ratio, adv_c, gap=-0.5, kappa=2.0, clip_range=0.2)
        >>> float(l_c), float(pen)  # mean(max(1.5, 1.2), max(0.5, 0.8)) - 0.5
        (0.6499999..., 1.2999999...)
    """
    surrogate = ratio * cost_advantages
    if clip_range is not None:
        clipped = th.clamp(ratio, 1 - clip_range, 1 + clip_range) * cost_advantages
        surrogate = th.max(surrogate, clipped)
    l_c = surrogate.mean() + gap
    return kappa * F.relu(l_c), l_c


def kappa_schedule(kappa_init: float, growth: float, kappa_max: float, passes: int) -> list[float]:
    """κ of each pass ``j`` of one update when increasing: ``min(κ_init·growth^j, κ_max)``.

    Examples:
        >>> kappa_schedule(1.0, 2.0, 20.0, 6)
        [1.0, 2.0, 4.0, 8.0, 16.0, 20.0]
    """
    return [min(kappa_init * growth**j, kappa_max) for j in range(passes)]


class P3O(LagrangianMixin, PPO):
    """P3O: PPO's clipped reward surrogate plus an exact ReLU penalty on the clipped cost surrogate.

    Per minibatch the policy minimises (Zhang et al., "Penalized Proximal Policy Optimization
    for Safe Reinforcement Learning", IJCAI 2022, eq. 12)::

        L = L_clip(A_r) + κ·ReLU(L_C)
        L_C = mean(max(ratio·A_c, clip(ratio, 1 ± ε)·A_c)) + (1 - gamma_c)·(J_c - d)

    plus PPO's value and entropy terms, with ``A_r`` standardised and ``A_c`` centred per
    minibatch and ``J_c`` the mean cost of the last ``cost_window`` finished episodes (as
    PPOLag). While no episode has finished yet the penalty is off. The ReLU is exact: for κ
    above the optimal Lagrange multiplier the penalised and the constrained problems have the
    same solutions (the paper's Theorem 1), so κ need not adapt.

    ``variant="omnisafe"`` gives OmniSafe 0.5's ``p3o.py`` instead: no clipping in the cost
    surrogate and no ``(1 - gamma_c)``, i.e. ``L_C = mean(ratio·A_c) + (J_c - d)``; with the
    default fixed κ = 20 that is OmniSafe's P3O. Its gap is in episode units against a
    per-step surrogate, so the ReLU is open whenever ``J_c > d`` and then pushes with 20 times
    the raw cost advantage (bang-bang; OmniSafe's table has P3O last).

    κ: ``kappa_schedule="fixed"`` (default) keeps ``kappa`` (20, as OmniSafe). ``"increase"``
    follows the paper's Algorithm 2 ("we increase κ at every time step, and stop early when
    the distance between the solutions of two adjacent steps is small enough or the policy
    leaves the trust region"): within each update, pass ``j`` over the rollout uses
    ``min(kappa_init·kappa_growth^j, kappa)``, restarting at ``kappa_init`` each rollout; the
    passes stop early when the policy parameters moved by less than ``kappa_tol`` (relative
    L2) in a pass, or when the KL passes ``target_kl`` (SB3's stop). The constants are ours
    (the paper gives the rule, not the numbers we could verify).

    A minibatch whose loss or gradient norm is not finite takes no step, and a cost critic
    whose targets are not finite skips its fit: each counts one in ``nonfinite_skipped`` (the
    same count in every safe-RL agent: see docs/safe_rl.md). The risk hook does not apply: κ
    is not learned from ``J_c``, so there is no multiplier step for it to scale, and
    ``risk_modulation`` raises :class:`~gymcurric.errors.ConfigError`. The cost rollouts, cost
    critic, ``J_c`` window, cost saturation and save/load are PPOLag's (the shared
    :class:`~gymcurric.integrations.sb3.common.LagrangianMixin`, whose multiplier object is
    held at 0 and only travels with ``save``). So, as for CPO, ``lagrange_multiplier`` is not
    an attribute (``getattr(model, "lagrange_multiplier", None)`` is None): the penalty weight
    is :attr:`last_kappa`, logged as ``train/kappa``.

    Logs SB3's PPO keys plus ``rollout/ep_cost_mean``, ``train/kappa`` (κ of the last pass),
    ``train/cost_penalty`` (mean ``κ·ReLU(L_C)`` over minibatches), ``train/cost_surrogate``
    (mean ``L_C``), ``train/relu_open`` (share of minibatches with ``L_C > 0``),
    ``train/constraint_gap`` (the gap term), ``train/cost_limit``, ``train/cost_value_loss``,
    ``train/cost_explained_variance``, ``train/cost_advantage_std``, ``train/cost_clipped``,
    ``train/nonfinite_skipped``.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"`` or a :class:`CostActorCriticPolicy` subclass.
        env: the env; every sub-env must report ``info["cost"]``.
        learning_rate: as PPO.
        n_steps: as PPO.
        batch_size: as PPO.
        n_epochs: as PPO (also the cost critic's epochs).
        gamma: as PPO.
        gae_lambda: as PPO.
        clip_range: as PPO (also the cost surrogate's ε in the paper variant).
        clip_range_vf: as PPO.
        normalize_advantage: standardise ``A_r`` per minibatch (as PPO).
        ent_coef: as PPO.
        vf_coef: as PPO.
        max_grad_norm: as PPO.
        use_sde: as PPO.
        sde_sample_freq: as PPO.
        target_kl: as PPO (OmniSafe's P3O: 0.02).
        stats_window_size: as PPO.
        tensorboard_log: as PPO.
        policy_kwargs: as PPO; ``cost_net_arch`` sets the cost critic's hidden layers.
        verbose: as PPO.
        seed: as PPO.
        device: as PPO.
        cost_limit: ``d`` (float or schedule, ≥ 0).
        variant: ``"paper"`` (default) or ``"omnisafe"`` (see above).
        kappa: κ, or with ``kappa_schedule="increase"`` its cap (> 0; 20).
        kappa_schedule: ``"fixed"`` or ``"increase"``.
        kappa_init: κ of each update's first pass under ``"increase"`` (> 0; 1).
        kappa_growth: factor per pass under ``"increase"`` (≥ 1; 2).
        kappa_tol: under ``"increase"``, stop the passes when the relative change of the
            policy parameters in a pass falls below it (None, default: never).
        cost_gamma: discount of the cost (default ``gamma``); also the paper's gamma.
        cost_gae_lambda: GAE λ of the cost (default ``gae_lambda``).
        cost_window: finished episodes ``J_c`` averages (100, as OmniSafe).
        update_cost_critic: fit the cost critic (True).
        cost_max_grad_norm: see PPOLag.
        cost_n_epochs: see PPOLag.
        center_cost_advantage: centre ``A_c`` per minibatch (True, as OmniSafe).
        risk_modulation: must be None or False (see above).
        _init_setup_model: as SB3.

    Examples:
        >>> import gymcurric
        >>> model = P3O("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32,
        ...             n_epochs=1, cost_limit=5.0, seed=0).learn(128)
        >>> model.kappa
        20.0
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
    }
    rollout_buffer: CostRolloutBuffer

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
        cost_limit: FloatOrSchedule = 25.0,
        variant: str = "paper",
        kappa: float = 20.0,
        kappa_schedule: str = "fixed",
        kappa_init: float = 1.0,
        kappa_growth: float = 2.0,
        kappa_tol: float | None = None,
        cost_gamma: float | None = None,
        cost_gae_lambda: float | None = None,
        cost_window: int = 100,
        update_cost_critic: bool = True,
        cost_max_grad_norm: float | None = None,
        cost_n_epochs: int | None = None,
        center_cost_advantage: bool = True,
        risk_modulation: Any = None,
        _init_setup_model: bool = True,
    ) -> None:
        self._check_p3o_args(
            variant, kappa, kappa_schedule, kappa_init, kappa_growth, kappa_tol, risk_modulation
        )
        self.variant = variant
        self.kappa = float(kappa)
        self.kappa_schedule = kappa_schedule
        self.kappa_init = float(kappa_init)
        self.kappa_growth = float(kappa_growth)
        self.kappa_tol = None if kappa_tol is None else float(kappa_tol)
        #: Minibatches whose loss or gradient norm was not finite (no step taken), plus
        #: cost-critic fits skipped because their targets were not (saved with the model).
        self.nonfinite_skipped = 0
        # P3O's penalty is κ, not a Lagrange multiplier: the shared mixin's λ is pinned at 0
        # (lr 0, never updated), so the buffer's samples carry A_r unpenalised.
        self._init_lagrangian(
            cost_limit=cost_limit,
            multiplier="sgd",
            lagrange_init=0.0,
            lagrange_lr=0.0,
            multiplier_kwargs=None,
            pid_epoch_steps=None,
            cost_window=cost_window,
            update_cost_critic=update_cost_critic,
            cost_max_grad_norm=cost_max_grad_norm,
            cost_n_epochs=cost_n_epochs,
            center_cost_advantage=center_cost_advantage,
            risk_modulation=None,
            seed=seed,
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
            normalize_advantage=False,  # the buffer standardises A_r (as PPOLag)
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
        self._pass_kappa = self._used_kappa = self.kappa
        self._pass_stats: list[tuple[float, float]] = []
        if _init_setup_model:
            self._setup_model()

    @property
    def lagrange_multiplier(self) -> float:
        """Not defined for P3O (raises AttributeError): its penalty weight is ``last_kappa``."""
        raise AttributeError(
            "P3O has no Lagrange multiplier; its penalty weight κ is last_kappa (logged as "
            "train/kappa)"
        )

    @property
    def last_kappa(self) -> float:
        """κ of the last pass of the last update (``train/kappa``); ``kappa`` before any."""
        return float(self._used_kappa)

    @staticmethod
    def _check_p3o_args(
        variant: Any,
        kappa: Any,
        schedule: Any,
        kappa_init: Any,
        growth: Any,
        tol: Any,
        risk_modulation: Any,
    ) -> None:
        src = "P3O"
        if variant not in P3O_VARIANTS:
            raise ConfigError("variant", variant, "expected 'paper' or 'omnisafe'", source=src)
        if schedule not in KAPPA_SCHEDULES:
            raise ConfigError(
                "kappa_schedule", schedule, "expected 'fixed' or 'increase'", source=src
            )
        for name, value, low, strict in (
            ("kappa", kappa, 0.0, True),
            ("kappa_init", kappa_init, 0.0, True),
            ("kappa_growth", growth, 1.0, False),
            ("kappa_tol", 0.0 if tol is None else tol, 0.0, False),
        ):
            real = as_real(value)  # NumPy scalars too; not a bool or a string
            if real is None or not math.isfinite(real) or real < low or (strict and real == low):
                where = ">" if strict else ">="
                raise ConfigError(
                    name, value, f"expected a finite number {where} {low:g}", source=src
                )
        if risk_modulation not in (None, False):
            raise ConfigError(
                "risk_modulation",
                risk_modulation,
                "P3O has no Lagrange multiplier for the risk hook to scale (κ is fixed or "
                "follows a fixed schedule, not learned from J_c); use PPOLag or TRPOLag",
                source=src,
            )

    # ----------------------------------------------------------------------------- training
    def _constraint_gap(self) -> float | None:
        """``(1 - gamma_c)(J_c - d)`` (paper) or ``J_c - d`` (OmniSafe); None before any episode."""
        limit = self.cost_limit(self._current_progress_remaining)
        self.logger.record("train/cost_limit", limit)
        if not self.ep_cost_buffer:
            return None
        jc = min(max(float(np.mean(self.ep_cost_buffer)), -COST_CAP), COST_CAP)
        self._last_jc = jc
        if self.variant == "paper":
            return (1.0 - self.rollout_buffer.cost_gamma) * (jc - limit)
        return jc - limit

    def _policy_parameters(self) -> list[th.Tensor]:
        """The policy's parameters θ (actor and shared features), for Algorithm 2's stop."""
        skip = ("value_net", "vf_features_extractor", "cost_value")
        return [p for n, p in self.policy.named_parameters() if not any(s in n for s in skip)]

    def train(self) -> None:
        """The P3O update on the rollout, then the cost critic's fit."""
        gap = self._constraint_gap()
        increasing = self.kappa_schedule == "increase"
        self._pass_kappa = self.kappa_init if increasing else self.kappa
        self._used_kappa = self._pass_kappa
        self._pass_stats = []
        track = increasing and self.kappa_tol is not None
        before = [p.detach().clone() for p in self._policy_parameters()] if track else []

        def cost_term(data: CostRolloutBufferSamples, ratio: th.Tensor, clip: float) -> Any:
            if gap is None:
                return None
            self._used_kappa = self._pass_kappa
            penalty, l_c = p3o_cost_loss(
                ratio,
                data.cost_advantages,
                gap=gap,
                kappa=self._pass_kappa,
                clip_range=clip if self.variant == "paper" else None,
            )
            self._pass_stats.append((float(penalty.item()), float(l_c.item())))
            return penalty

        def after_pass(epoch: int) -> bool:
            nonlocal before
            if not increasing:
                return True
            self._pass_kappa = min(self._pass_kappa * self.kappa_growth, self.kappa)
            if not track:
                return True
            after = [p.detach().clone() for p in self._policy_parameters()]
            moved = math.sqrt(
                sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before, strict=True))
            )
            size = math.sqrt(sum(float((b**2).sum()) for b in before))
            before = after
            return moved > self.kappa_tol * max(size, 1e-12)  # type: ignore[operator]

        self._update_learning_rate(self.policy.optimizer)
        guarded_ppo_train(
            self,
            self._current_progress_remaining,
            extra_loss=cost_term,
            after_pass=after_pass,
        )
        self._record_p3o(gap)
        self._train_cost_critic(self.cost_n_epochs or self.n_epochs, self.batch_size)

    def _record_p3o(self, gap: float | None) -> None:
        self.logger.record("train/kappa", self._used_kappa)
        stats = np.array(self._pass_stats, dtype=np.float64).reshape(-1, 2)
        stats = stats[np.isfinite(stats).all(axis=1)]  # skipped (non-finite) minibatches out
        penalty, open_share = 0.0, 0.0  # no cost term yet (no finished episode)
        if len(stats):
            penalty, open_share = float(stats[:, 0].mean()), float((stats[:, 1] > 0).mean())
            self.logger.record("train/cost_surrogate", float(stats[:, 1].mean()))
        self.logger.record("train/cost_penalty", penalty)
        self.logger.record("train/relu_open", open_share)
        if gap is not None:
            self.logger.record("train/constraint_gap", gap)
        self.logger.record("train/cost_clipped", self.cost_clipped)
        self.logger.record(
            "train/cost_advantage_std", float(np.std(self.rollout_buffer.cost_advantages))
        )

    def learn(
        self: SelfP3O,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "P3O",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfP3O:
        """Train for ``total_timesteps`` env steps (see SB3's ``PPO.learn``)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
