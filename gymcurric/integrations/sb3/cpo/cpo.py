"""Constrained Policy Optimization (Achiam et al. 2017) on sb3-contrib's TRPO and the cost code."""

from __future__ import annotations

import copy
import math
from collections import deque
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO
from sb3_contrib.common.utils import conjugate_gradient_solver
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import explained_variance
from torch import nn

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.buffers import CostRolloutBuffer
from gymcurric.integrations.sb3.common.critic_fit import fit_reward_critic
from gymcurric.integrations.sb3.common.lagrangian import FloatOrSchedule, LagrangianMixin
from gymcurric.integrations.sb3.common.multiplier_checks import as_real, check_count
from gymcurric.integrations.sb3.cpo.policies import CnnPolicy, CostActorCriticPolicy, MlpPolicy
from gymcurric.integrations.sb3.cpo.step import CPOStep, LineSearchResult, cpo_step, line_search
from gymcurric.safety.modulation import RiskModulation

__all__ = ["CONSTRAINT_SCALES", "CPO"]

SelfCPO = TypeVar("SelfCPO", bound="CPO")

#: The accepted values of ``constraint_scale``.
CONSTRAINT_SCALES = ("reference", "omnisafe")


class CPO(LagrangianMixin, TRPO):
    """Constrained Policy Optimization: a trust-region step that keeps ``J_c ≤ d`` to first order.

    Each update linearises the reward and cost surrogates at the current policy and solves
    ``max gᵀΔθ s.t. c + bᵀΔθ ≤ 0, ½ΔθᵀHΔθ ≤ δ`` in closed form (Achiam et al. 2017; the five
    cases and the formulas are in :mod:`gymcurric.integrations.sb3.cpo.step`), then runs a
    backtracking line search (fractions ``0.8^k``) that accepts a fraction when the reward
    surrogate did not get worse (cases 2 to 4), the cost surrogate rose by at most
    ``max(0, -c)`` and the mean KL is at most ``target_kl``. When no fraction passes, the policy
    is left as it was (counted in :attr:`line_search_failures`). The reward critic is then
    fitted as sb3-contrib's TRPO fits it, and the cost critic as PPOLag's.

    - ``g = ∇ mean(ratio·A_r)`` with ``A_r`` standardised, ``b = ∇ mean(ratio·A_c)`` with
      ``A_c`` centred, both over the whole rollout at the current policy. ``H`` is the Fisher
      matrix (the Hessian of the mean KL on all observations, plus ``cg_damping``); ``x = H⁻¹g``
      is sb3-contrib's conjugate-gradient solution (so the torch random stream moves as in
      TRPO), ``p = H⁻¹b`` a deterministic one from zero.
    - ``c`` is the constraint gap from the last ``cost_window`` finished episodes: with
      ``constraint_scale="reference"`` (default) ``c = (J_c - d)/L``, ``L`` their mean length,
      as the reference code (safety-starter-agents): ``b`` is the gradient of a *per-step* mean,
      so the episode constraint ``c + L·bᵀΔθ ≤ 0`` reads ``c/L + bᵀΔθ ≤ 0``. With
      ``"omnisafe"``, ``c = J_c - d`` as OmniSafe and SafePO, which makes ``c`` ``L`` times too
      large against ``b`` (in practice only cases 0 and 3: cost descent or TRPO).
    - Until an episode has finished there is no ``J_c``: the policy step is skipped (logged as
      case -1); the critics are fitted.
    - A non-finite surrogate, gradient, Fisher product or step skips the policy step without
      raising or changing anything; a line-search trial with a non-finite surrogate or KL is
      rejected. Non-finite critic targets skip that critic's fit. Each skipped step and each
      skipped fit counts one in :attr:`nonfinite_skipped` (``train/nonfinite_skipped``, the
      same count in every safe-RL agent: see docs/safe_rl.md).

    Where this differs from OmniSafe's CPO, on purpose: the ``c`` scaling (above, optional);
    the signs of ``r`` in cases 1 and 2 (OmniSafe's solve another problem, see the ``step``
    module); the KL is ``KL(π_new‖π_old)`` as the reference code and sb3-contrib (OmniSafe's
    line search measures ``KL(π_old‖π_new)``; the two agree to second order); the Fisher
    products use every observation (OmniSafe ``fvp_sample_freq`` 1, here
    ``sub_sampling_factor`` subsamples the whole step, as TRPO's).

    With the constraint inactive (case 3 or 4) the step, the line search and the critics are
    sb3-contrib TRPO's (``normalize_advantage=True``, the same ``line_search_max_iter``), and
    after ``learn()`` the actor and reward critic are exactly TRPO's for the same seed; the
    line search's acceptance differs only at equality (TRPO: strictly better surrogate and KL
    strictly below ``target_kl``; CPO: not worse and at most ``target_kl``).

    There is no Lagrange multiplier to learn: ``nu*`` and ``λ*`` are solved anew in each update
    (logged as ``train/cpo_nu``, ``train/cpo_lambda``), so ``risk_modulation``, which scales a
    multiplier's step size in PPOLag and TRPOLag, is refused with a ``ConfigError``, and
    ``lagrange_multiplier`` is not an attribute. (The shared cost code's multiplier object
    exists, held at 0 and never updated; it only travels with ``save``.)

    Logs sb3-contrib TRPO's keys (``train/policy_objective``, ``train/value_loss``,
    ``train/kl_divergence_loss``, ``train/explained_variance``, ``train/is_line_search_success``,
    ``train/std``, ``train/n_updates``), PPOLag's cost keys (``rollout/ep_cost_mean``,
    ``train/cost_limit``, ``train/cost_value_loss``, ``train/cost_explained_variance``,
    ``train/cost_clipped``, ``train/cost_advantage_std``) and CPO's: ``train/cpo_case`` (0-4,
    -1 no step), ``train/cpo_c``, ``train/cpo_q``, ``train/cpo_r``, ``train/cpo_s``,
    ``train/cpo_A``, ``train/cpo_B``, ``train/cpo_lambda``, ``train/cpo_nu``,
    ``train/cpo_step_fraction`` (0 when rejected), ``train/cpo_line_search_steps`` (fractions
    tried), ``train/cpo_cost_objective_change``, ``train/cpo_ep_len_mean`` and the running counts
    ``train/cpo_line_search_failures`` and ``train/cpo_nonfinite_skipped`` (the same count as
    ``train/nonfinite_skipped``, the key every safe-RL agent logs; kept for existing logs).

    Args:
        policy: ``"MlpPolicy"``, ``"CnnPolicy"`` or a :class:`CostActorCriticPolicy` subclass.
        env: the env (or its registered id); every sub-env must report ``info["cost"]``.
        learning_rate: the critics' learning rate, 1e-3 (OmniSafe's critic lr; the actor has no
            optimiser).
        n_steps: steps per env per update, 2048 (OmniSafe: 20,000 per epoch over all envs).
        batch_size: the critics' minibatch, 128 (OmniSafe).
        gamma: as TRPO, 0.99.
        cg_max_steps: conjugate-gradient iterations, 15 (OmniSafe ``cg_iters``).
        cg_damping: the Fisher damping, 0.1 (OmniSafe).
        line_search_shrinking_factor: the factor between line-search fractions, 0.8 (OmniSafe).
        line_search_max_iter: fractions tried at most, 20 (OmniSafe; SafePO 15, the reference
            10; sb3-contrib TRPO's default is 10).
        n_critic_updates: passes of the reward critic over each rollout, 10 (OmniSafe).
        gae_lambda: 0.95 (OmniSafe; the reference 0.97).
        use_sde: as TRPO.
        sde_sample_freq: as TRPO.
        normalize_advantage: standardise ``A_r`` over the rollout (True, as OmniSafe).
        target_kl: ``δ``, the trust-region radius in mean KL, 0.01 (OmniSafe).
        sub_sampling_factor: use every k-th sample for the step (as TRPO), 1.
        stats_window_size: as TRPO.
        tensorboard_log: as TRPO.
        policy_kwargs: as TRPO; ``cost_net_arch`` sets the cost critic's hidden layers.
        verbose: as TRPO.
        seed: as TRPO (also seeds the cost critic's minibatch shuffle).
        device: as TRPO.
        cost_limit: ``d``, the limit on the expected episode cost (≥ 0; float or schedule), 25.
        constraint_scale: ``"reference"`` (``c = (J_c - d)/L``, default) or ``"omnisafe"``
            (``c = J_c - d``, for parity with OmniSafe and SafePO).
        cost_gamma: the cost discount (default ``gamma``).
        cost_gae_lambda: the cost GAE λ (default ``gae_lambda``).
        cost_window: how many finished episodes ``J_c`` and ``L`` average, 100 (OmniSafe).
        update_cost_critic: fit the cost critic (True).
        cost_max_grad_norm: gradient-norm clip of the cost critic, None (off).
        cost_n_epochs: passes of the cost critic over each rollout (None: ``n_critic_updates``).
        center_cost_advantage: centre ``A_c`` over the rollout (True, as OmniSafe).
        risk_modulation: must be None or False (see above).
        _init_setup_model: as SB3.

    Raises:
        ConfigError: an unknown ``constraint_scale``, a ``risk_modulation``, or a bad value of
            the other parameters (``cost_limit < 0``, ``target_kl ≤ 0``, ...).

    Examples:
        >>> import gymcurric
        >>> model = CPO("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32,
        ...             n_critic_updates=1, cost_limit=5.0, seed=0).learn(128)
        >>> model.nonfinite_skipped
        0
    """

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
        line_search_max_iter: int = 20,
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
        cost_limit: FloatOrSchedule = 25.0,
        constraint_scale: str = "reference",
        cost_gamma: float | None = None,
        cost_gae_lambda: float | None = None,
        cost_window: int = 100,
        update_cost_critic: bool = True,
        cost_max_grad_norm: float | None = None,
        cost_n_epochs: int | None = None,
        center_cost_advantage: bool = True,
        risk_modulation: RiskModulation | bool | dict[str, Any] | None = None,
        _init_setup_model: bool = True,
    ) -> None:
        src = type(self).__name__
        if constraint_scale not in CONSTRAINT_SCALES:
            raise ConfigError(
                "constraint_scale",
                constraint_scale,
                "expected 'reference' or 'omnisafe'",
                source=src,
            )
        if RiskModulation.coerce(risk_modulation, source=src) is not None:
            raise ConfigError(
                "risk_modulation",
                risk_modulation,
                "CPO has no Lagrange multiplier whose step the risk hook could scale (its nu* is "
                "solved in closed form each update); use PPOLag or TRPOLag for the risk hook",
                source=src,
            )
        target_kl = _check_positive("target_kl", target_kl, src)
        cg_damping = _check_positive("cg_damping", cg_damping, src, allow_zero=True)
        shrink = as_real(line_search_shrinking_factor)
        if shrink is None or not 0.0 < shrink < 1.0:
            raise ConfigError(
                "line_search_shrinking_factor",
                line_search_shrinking_factor,
                "expected a number in (0, 1)",
                source=src,
            )
        if type(line_search_shrinking_factor) is not float:  # NumPy's: its Python float
            line_search_shrinking_factor = shrink
        line_search_max_iter = check_count("line_search_max_iter", line_search_max_iter, source=src)
        cg_max_steps = check_count("cg_max_steps", cg_max_steps, source=src)
        self.constraint_scale = constraint_scale
        # The shared cost code (rollouts, cost critic, J_c window, save/load). Its multiplier is
        # held at 0: CPO solves for its own multipliers in every update.
        self._init_lagrangian(
            cost_limit=cost_limit,
            multiplier="adam",
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
        #: Lengths of the episodes in ``ep_cost_buffer`` (the ``L`` of ``c = (J_c - d)/L``).
        self.ep_len_buffer: deque[int] = deque(maxlen=cost_window)
        self._running_len: np.ndarray | None = None
        #: Updates whose line search accepted no fraction (policy left unchanged).
        self.line_search_failures = 0
        #: Policy steps skipped because a surrogate, gradient, Fisher product or step was
        #: non-finite, plus critic fits skipped because their targets were (saved with the model).
        self.nonfinite_skipped = 0
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
            # The buffer standardises A_r and centres A_c over the rollout.
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
        if _init_setup_model:
            self._setup_model()

    @property
    def lagrange_multiplier(self) -> float:
        """Not defined for CPO (raises AttributeError): see ``train/cpo_nu``."""
        raise AttributeError(
            "CPO has no Lagrange multiplier; its per-update multipliers are logged as "
            "train/cpo_nu and train/cpo_lambda"
        )

    # --------------------------------------------------------------------- episode lengths
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
        if env_reset or self._running_len is None:
            assert self.env is not None
            self._running_len = np.zeros(self.env.num_envs, dtype=np.int64)
        if reset_num_timesteps:
            self.ep_len_buffer.clear()
        return out

    def _update_info_buffer(
        self, infos: list[dict[str, Any]], dones: np.ndarray | None = None
    ) -> None:
        # Called once per env step by the shared collect_rollouts, right before it adds the
        # finished episodes' costs to ep_cost_buffer: the two windows hold the same episodes.
        super()._update_info_buffer(infos, dones)
        if dones is None or self._running_len is None:
            return
        self._running_len += 1
        for idx in np.flatnonzero(dones).tolist():
            self.ep_len_buffer.append(int(self._running_len[idx]))
        self._running_len[dones] = 0

    def constraint_gap(self, cost_limit: float) -> tuple[float, float, float] | None:
        """``(c, J_c, L)`` from the episode window, or None before the first finished episode.

        Args:
            cost_limit: ``d``.

        Returns:
            ``c`` in the units of ``constraint_scale``, the mean episode cost ``J_c`` and the
            mean episode length ``L``.
        """
        if not self.ep_cost_buffer or not self.ep_len_buffer:
            return None
        jc = float(np.mean(self.ep_cost_buffer))
        length = float(np.mean(self.ep_len_buffer))
        gap = jc - cost_limit
        if self.constraint_scale == "reference":
            gap /= length
        return gap, jc, length

    # ----------------------------------------------------------------------------- training
    def train(self) -> None:
        """One CPO step on the rollout, then the reward critic (as TRPO) and the cost critic."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        limit = self.cost_limit(self._current_progress_remaining)
        actor_params = self._policy_step(limit)

        buffer = self.rollout_buffer
        value_losses: list[float] = []
        if np.all(np.isfinite(buffer.returns)):
            value_losses = fit_reward_critic(
                self.policy,
                buffer,
                n_epochs=self.n_critic_updates,
                batch_size=self.batch_size,
                frozen=actor_params,
            )
        else:  # NaN targets would write NaN into V: the fit is skipped, and counted
            self.nonfinite_skipped += 1
        # the cost critic's fit, skipped (and counted) there when its targets are not finite
        self._train_cost_critic(self.cost_n_epochs or self.n_critic_updates, self.batch_size)
        self._n_updates += 1

        log = self.logger.record
        log("train/value_loss", float(np.mean(value_losses)) if value_losses else math.nan)
        log(
            "train/explained_variance",
            float(explained_variance(buffer.values.flatten(), buffer.returns.flatten())),
        )
        if hasattr(self.policy, "log_std"):
            log("train/std", th.exp(self.policy.log_std).mean().item())
        log("train/cost_limit", limit)
        log("train/cost_clipped", self.cost_clipped)
        log("train/cost_advantage_std", float(np.std(buffer.cost_advantages)))
        log("train/cpo_line_search_failures", self.line_search_failures)
        log("train/cpo_nonfinite_skipped", self.nonfinite_skipped)
        log("train/nonfinite_skipped", self.nonfinite_skipped)  # every agent's key
        log("train/n_updates", self._n_updates, exclude="tensorboard")

    def _policy_step(self, cost_limit: float) -> list[nn.Parameter]:
        """The CPO step and its line search; returns the actor's parameters."""
        # One batch, shuffled by SB3's global generator exactly as TRPO.train draws it.
        data = next(self.rollout_buffer.get(batch_size=None))
        k = self.sub_sampling_factor
        obs, old_log_prob = data.observations[::k], data.old_log_prob[::k]
        adv_r, adv_c = data.advantages[::k], data.cost_advantages[::k]
        actions = data.actions[::k]
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()

        with th.no_grad():
            # a shallow copy, as TRPO: the policy reuses its distribution object
            old_distribution = copy.copy(self.policy.get_distribution(obs))
        distribution = self.policy.get_distribution(obs)
        ratio = th.exp(distribution.log_prob(actions) - old_log_prob)
        reward_objective = (adv_r * ratio).mean()
        cost_objective = (adv_c * ratio).mean()
        kl_div = kl_divergence(distribution, old_distribution).mean()
        self.policy.optimizer.zero_grad()
        actor_params, g, grad_kl, shapes = self._compute_actor_grad(kl_div, reward_objective)
        cost_grads = th.autograd.grad(
            cost_objective, actor_params, retain_graph=True, allow_unused=True
        )
        b = th.cat(
            [
                th.zeros(p.numel(), device=p.device, dtype=p.dtype)
                if grad is None
                else grad.reshape(-1)
                for p, grad in zip(actor_params, cost_grads, strict=True)
            ]
        )

        reward_before, cost_before = reward_objective.item(), cost_objective.item()
        gap = self.constraint_gap(cost_limit)
        step: CPOStep | None = None
        result: LineSearchResult | None = None
        finite = math.isfinite(reward_before) and math.isfinite(cost_before)
        finite = finite and bool(th.isfinite(g).all()) and bool(th.isfinite(b).all())
        if finite and gap is not None:

            def fvp(vector: th.Tensor) -> th.Tensor:
                return self.hessian_vector_product(actor_params, grad_kl, vector)

            # x by sb3-contrib's solver, as TRPO: the same random start, the same torch stream
            x = conjugate_gradient_solver(fvp, g, max_iter=self.cg_max_steps)
            step = cpo_step(g, b, gap[0], self.target_kl, fvp, x=x, cg_max_steps=self.cg_max_steps)
            finite = step.case >= 0
        if not finite:
            self.nonfinite_skipped += 1
        elif step is not None and gap is not None:
            originals = [param.detach().clone() for param in actor_params]
            result = self._line_search(
                step, actor_params, originals, shapes, obs, actions, old_log_prob, adv_r, adv_c,
                old_distribution, reward_before, cost_before, gap[0],
            )  # fmt: skip
            if not result.accepted:
                self.line_search_failures += 1
                with th.no_grad():
                    for param, original in zip(actor_params, originals, strict=True):
                        param.data = original.data.clone()
        self._log_step(step, result, gap, reward_before, cost_before)
        return actor_params

    def _line_search(
        self,
        step: CPOStep,
        actor_params: list[nn.Parameter],
        originals: list[th.Tensor],
        shapes: list[tuple[int, ...]],
        obs: th.Tensor,
        actions: th.Tensor,
        old_log_prob: th.Tensor,
        adv_r: th.Tensor,
        adv_c: th.Tensor,
        old_distribution: Any,
        reward_before: float,
        cost_before: float,
        c: float,
    ) -> LineSearchResult:
        def evaluate(fraction: float) -> tuple[float, float, float]:
            with th.no_grad():
                start = 0
                for param, original, shape in zip(actor_params, originals, shapes, strict=True):
                    n = param.numel()
                    # (fraction·scale)·direction, grouped as TRPO groups its step
                    param.data = original.data + fraction * step.scale * step.direction[
                        start : start + n
                    ].view(shape)
                    start += n
                distribution = self.policy.get_distribution(obs)
                ratio = th.exp(distribution.log_prob(actions) - old_log_prob)
                reward = float((adv_r * ratio).mean())
                cost = float((adv_c * ratio).mean())
                kl = float(kl_divergence(distribution, old_distribution).mean())
            return reward, cost, kl

        return line_search(
            evaluate,
            case=step.case,
            c=c,
            target_kl=self.target_kl,
            reward_before=reward_before,
            cost_before=cost_before,
            shrink=self.line_search_shrinking_factor,
            max_iter=self.line_search_max_iter,
        )

    def _log_step(
        self,
        step: CPOStep | None,
        result: LineSearchResult | None,
        gap: tuple[float, float, float] | None,
        reward_before: float,
        cost_before: float,
    ) -> None:
        log = self.logger.record
        nan = math.nan
        accepted = result.accepted if result is not None else False
        log("train/policy_objective", result.reward if result is not None else reward_before)
        log("train/kl_divergence_loss", result.kl if result is not None else 0.0)
        log("train/is_line_search_success", float(accepted))
        log("train/cpo_case", -1 if step is None else step.case)
        log("train/cpo_c", gap[0] if gap else nan)
        log("train/cpo_ep_len_mean", gap[2] if gap else nan)
        for name in ("q", "r", "s", "A", "B"):
            log(f"train/cpo_{name}", getattr(step, name) if step else nan)
        log("train/cpo_lambda", step.lam if step else nan)
        log("train/cpo_nu", step.nu if step else nan)
        log("train/cpo_step_fraction", result.fraction if result else 0.0)
        log("train/cpo_line_search_steps", result.tries if result else 0)
        change = result.cost - cost_before if result is not None else 0.0
        log("train/cpo_cost_objective_change", change)

    def learn(
        self: SelfCPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "CPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfCPO:
        """Train for ``total_timesteps`` env steps (see sb3-contrib's ``TRPO.learn``)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )


def _check_positive(name: str, value: Any, source: str, *, allow_zero: bool = False) -> Any:
    """``value`` (a Python int or float as given, a NumPy number as its Python float)."""
    real = as_real(value)  # NumPy scalars too; not a bool or a string
    ok = real is not None and math.isfinite(real) and (real >= 0 if allow_zero else real > 0)
    if not ok:
        reason = "expected a finite number >= 0" if allow_zero else "expected a finite number > 0"
        raise ConfigError(name, value, reason, source=source)
    return value if type(value) is int or type(value) is float else real
