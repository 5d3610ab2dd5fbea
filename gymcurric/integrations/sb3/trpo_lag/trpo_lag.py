"""TRPO-Lagrangian on sb3-contrib's ``TRPO``, sharing PPOLag's cost and multiplier code."""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import explained_variance
from torch import nn

from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer
from gymcurric.integrations.sb3.common.critic_fit import fit_reward_critic
from gymcurric.integrations.sb3.common.lagrangian import (
    CostLimit,
    FloatOrSchedule,
    LagrangianMixin,
)
from gymcurric.integrations.sb3.common.policies import (
    CnnPolicy,
    CostActorCriticPolicy,
    MlpPolicy,
)
from gymcurric.safety.modulation import RiskModulation

__all__ = ["TRPOLag"]

SelfTRPOLag = TypeVar("SelfTRPOLag", bound="TRPOLag")


class _NonFiniteStep(Exception):
    """TRPO's surrogate, its gradient or a Fisher product was not finite: no policy step."""


def _finite(value: th.Tensor) -> bool:
    return bool(th.isfinite(value).all())


class TRPOLag(LagrangianMixin, TRPO):
    """TRPO-Lagrangian: sb3-contrib's TRPO step on the penalised advantage ``(A_r - λ·A_c)/(1+λ)``.

    The cost rollouts, cost critic, multiplier (``"adam"``, ``"sgd"`` or ``"pid"``), logs and
    save/load are :class:`~gymcurric.integrations.sb3.ppo_lag.PPOLag`'s (one shared
    :class:`~gymcurric.integrations.sb3.common.LagrangianMixin`); only the policy step is TRPO's
    (conjugate gradient, KL-constrained line search), unmodified. ``A_r`` is standardised and
    ``A_c`` centred over the whole rollout (TRPO's single batch), as OmniSafe's TRPOLag. The cost
    critic is fitted for ``n_critic_updates`` epochs of ``batch_size`` minibatches, as the reward
    critic.

    Non-finite numbers raise nothing and corrupt nothing (sb3-contrib's TRPO alone would put
    NaN into the line search's trial parameters): a non-finite surrogate or surrogate gradient,
    a non-finite Fisher-vector product, or a step whose ``sᵀHs`` is not a positive number
    leaves the policy as it was (the critics are still fitted). A critic whose targets are not
    finite skips its fit. Each skipped policy step and each skipped critic fit counts one in
    :attr:`nonfinite_skipped` (``train/nonfinite_skipped``, the same count in every safe-RL
    agent: see docs/safe_rl.md). With finite numbers the update is TRPO's to the bit.

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"`` or a :class:`CostActorCriticPolicy` subclass.
        env: the env; every sub-env must report ``info["cost"]``.
        learning_rate: as TRPO (the critics' learning rate).
        n_steps: as TRPO.
        batch_size: as TRPO (the critics' minibatch).
        gamma: as TRPO.
        cg_max_steps: as TRPO.
        cg_damping: as TRPO.
        line_search_shrinking_factor: as TRPO.
        line_search_max_iter: as TRPO.
        n_critic_updates: as TRPO (also the cost critic's epochs).
        gae_lambda: as TRPO.
        use_sde: as TRPO.
        sde_sample_freq: as TRPO.
        normalize_advantage: standardise the reward advantage (as TRPO).
        target_kl: as TRPO.
        sub_sampling_factor: as TRPO.
        stats_window_size: as TRPO.
        tensorboard_log: as TRPO.
        policy_kwargs: as TRPO; ``cost_net_arch`` sets the cost critic's hidden layers.
        verbose: as TRPO.
        seed: as TRPO.
        device: as TRPO.
        cost_limit: see :class:`~gymcurric.integrations.sb3.ppo_lag.PPOLag` (a float or
            schedule, or one per constraint).
        multiplier: see PPOLag.
        lagrange_init: see PPOLag.
        lagrange_lr: see PPOLag.
        multiplier_kwargs: see PPOLag.
        pid_epoch_steps: see PPOLag.
        cost_gamma: see PPOLag.
        cost_gae_lambda: see PPOLag.
        cost_window: see PPOLag.
        update_cost_critic: see PPOLag.
        cost_max_grad_norm: see PPOLag.
        cost_n_epochs: passes of the cost critic over each rollout (None: ``n_critic_updates``).
        center_cost_advantage: see PPOLag.
        risk_modulation: see PPOLag (off by default).
        cost_keys: see PPOLag (several constraints).
        _init_setup_model: as SB3.

    Examples:
        >>> import gymcurric
        >>> model = TRPOLag("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32,
        ...                 n_critic_updates=1, cost_limit=5.0, seed=0).learn(128)
        >>> model.lagrange_multiplier >= 0.0
        True
    """

    supports_multiple_constraints: ClassVar[bool] = True
    #: Policy steps skipped because a surrogate, gradient or Fisher product was not finite,
    #: plus critic fits skipped because their targets were (saved with the model).
    nonfinite_skipped: int = 0
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
    }

    def __init__(
        self,
        policy: str | type[CostActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 1e-3,
        n_steps: int = 2048,
        batch_size: int = 128,
        gamma: float = 0.99,
        cg_max_steps: int = 15,
        cg_damping: float = 0.1,
        line_search_shrinking_factor: float = 0.8,
        line_search_max_iter: int = 10,
        n_critic_updates: int = 10,
        gae_lambda: float = 0.95,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        normalize_advantage: bool = True,
        target_kl: float = 0.01,
        sub_sampling_factor: int = 1,
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
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            gamma=gamma,
            cg_max_steps=cg_max_steps,
            cg_damping=cg_damping,
            line_search_shrinking_factor=line_search_shrinking_factor,
            line_search_max_iter=line_search_max_iter,
            n_critic_updates=n_critic_updates,
            gae_lambda=gae_lambda,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=CostRolloutBuffer,
            rollout_buffer_kwargs={"cost_gamma": cost_gamma, "cost_gae_lambda": cost_gae_lambda},
            # The buffer standardises A_r before combining it with A_c.
            normalize_advantage=False,
            target_kl=target_kl,
            sub_sampling_factor=sub_sampling_factor,
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
        self._actor_params: list[nn.Parameter] = []
        if _init_setup_model:
            self._setup_model()

    def train(self) -> None:
        """Update λ, then TRPO's update on the penalised advantage, then the cost critic.

        TRPO's update runs unmodified; the checks in :meth:`_compute_actor_grad` and
        :meth:`hessian_vector_product` stop it before the line search when a number is not
        finite, and the step is then skipped (see the class docstring).
        """
        self._update_lagrange()
        buffer = self.rollout_buffer
        n_critic_updates = self.n_critic_updates
        skip_critic = not np.all(np.isfinite(buffer.returns))
        if skip_critic:
            self.n_critic_updates = 0  # TRPO's reward-critic fit would write NaN into V
            self.nonfinite_skipped += 1
        originals = {
            name: p.detach().clone()
            for name, p in self.policy.named_parameters()
            if "value" not in name
        }
        self._actor_params = []  # set by _compute_actor_grad for this update only
        try:
            # TRPO logs np.mean of no losses (NaN, as wanted): no warning. Only then: entering
            # catch_warnings resets the once-per-location registry (warnings shown again)
            with warnings.catch_warnings() if skip_critic else contextlib.nullcontext():
                if skip_critic:
                    warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
                    warnings.filterwarnings("ignore", "invalid value .* divide", RuntimeWarning)
                super().train()
        except _NonFiniteStep:
            with th.no_grad():
                for name, param in self.policy.named_parameters():
                    if name in originals:
                        param.data = originals[name].clone()
            self.policy.optimizer.zero_grad(set_to_none=True)
            self.nonfinite_skipped += 1
            self._skipped_step()
        finally:
            self.n_critic_updates = n_critic_updates
            self._actor_params = []  # never saved: they belong to this policy object
        self._train_cost_critic(self.cost_n_epochs or self.n_critic_updates, self.batch_size)

    def _compute_actor_grad(
        self, kl_div: th.Tensor, policy_objective: th.Tensor
    ) -> tuple[list[nn.Parameter], th.Tensor, th.Tensor, list[tuple[int, ...]]]:
        if not _finite(policy_objective):
            raise _NonFiniteStep
        out = super()._compute_actor_grad(kl_div, policy_objective)
        self._actor_params = out[0]
        if not (_finite(out[1]) and _finite(out[2])):
            raise _NonFiniteStep
        return out

    def hessian_vector_product(
        self,
        params: list[nn.Parameter],
        grad_kl: th.Tensor,
        vector: th.Tensor,
        retain_graph: bool = True,
    ) -> th.Tensor:
        """TRPO's Fisher-vector product; raises the private skip when it is not finite.

        TRPO's last product (``retain_graph=False``) gives the step length ``√(2δ/sᵀHs)``:
        there ``sᵀHs`` must also be a finite number > 0.
        """
        out = super().hessian_vector_product(params, grad_kl, vector, retain_graph)
        if not (_finite(vector) and _finite(out)):
            raise _NonFiniteStep
        if not retain_graph:
            shs = float(th.dot(vector, out))
            if not (math.isfinite(shs) and shs > 0.0):
                raise _NonFiniteStep
        return out

    def _skipped_step(self) -> None:
        """After a skipped policy step: TRPO's reward-critic fit and logs, the actor untouched."""
        actor = self._actor_params or [
            p for name, p in self.policy.named_parameters() if "value" not in name
        ]
        losses = fit_reward_critic(
            self.policy,
            self.rollout_buffer,
            n_epochs=self.n_critic_updates,
            batch_size=self.batch_size,
            frozen=actor,
        )
        self._n_updates += 1
        buffer = self.rollout_buffer
        log = self.logger.record
        log("train/policy_objective", math.nan)
        log("train/value_loss", float(np.mean(losses)) if losses else math.nan)
        log("train/kl_divergence_loss", 0.0)
        log(
            "train/explained_variance",
            float(explained_variance(buffer.values.flatten(), buffer.returns.flatten())),
        )
        log("train/is_line_search_success", 0.0)
        if hasattr(self.policy, "log_std"):
            log("train/std", th.exp(self.policy.log_std).mean().item())
        log("train/n_updates", self._n_updates, exclude="tensorboard")

    def learn(
        self: SelfTRPOLag,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "TRPOLag",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfTRPOLag:
        """Train for ``total_timesteps`` env steps (see sb3-contrib's ``TRPO.learn``)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
