"""PPO-Simmer: PPO on the Sauté-augmented env whose budget a PI or Q controller moves per epoch."""

from __future__ import annotations

import inspect
import io
import pathlib
from collections import deque
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import maybe_make_env
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.vec_env import VecEnv, unwrap_vec_wrapper

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.multiplier_checks import as_real, check_count
from gymcurric.integrations.sb3.common.policies import policy_from_name
from gymcurric.integrations.sb3.common.ppo_update import guarded_ppo_train
from gymcurric.integrations.sb3.simmer.vec_simmer import VecSimmer
from gymcurric.safety.budget_control import (
    BudgetController,
    PIBudgetController,
    QBudgetController,
)
from gymcurric.safety.budget_control import budget_levels as levels_or_default

__all__ = ["CONTROLLERS", "PPOSimmer", "vec_simmer_kwargs"]

SelfPPOSimmer = TypeVar("SelfPPOSimmer", bound="PPOSimmer")

#: ``controller`` names: the PI controller with anti-windup, or tabular Q-learning.
CONTROLLERS = ("pi", "q")
COST_OBSERVATIONS = ("max", "mean")
_PI_KEYS = ("kp", "ki", "kaw", "polyak", "window", "action_bound", "budget_bounds")
_Q_KEYS = ("lr", "gamma", "epsilon_greedy", "polyak", "reward_thresh", "initial_level")
#: PPOSimmer's keywords that are :class:`VecSimmer`'s settings
SIMMER_ENV_KEYS = (
    "safety_budget",
    "saute_gamma",
    "max_episode_steps",
    "unsafe_reward",
    "budget_step",
)


def make_budget_controller(
    controller: str | BudgetController,
    levels: np.ndarray,
    reference: Any,
    kwargs: dict[str, Any],
    seed: int | None,
) -> BudgetController:
    """Build the named controller (``"pi"`` or ``"q"``), or check a given one."""
    src = "PPOSimmer"
    if not isinstance(controller, str):
        if not isinstance(controller, BudgetController):
            raise ConfigError(
                "controller",
                controller,
                "expected 'pi', 'q' or an object with budget, step, state_dict and "
                "load_state_dict (gymcurric.safety.budget_control.BudgetController)",
                source=src,
            )
        return controller
    if controller not in CONTROLLERS:
        raise ConfigError("controller", controller, "expected 'pi' or 'q'", source=src)
    known = _PI_KEYS if controller == "pi" else _Q_KEYS
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise ConfigError(
            "controller_kwargs",
            kwargs,
            f"unknown keys {unknown} for controller={controller!r}; known: {list(known)}",
            source=src,
        )
    if controller == "pi":
        return PIBudgetController(levels, reference=reference, **kwargs)
    if reference != "increase":
        raise ConfigError(
            "reference", reference, "only the 'pi' controller follows a reference", source=src
        )
    return QBudgetController(levels, seed=seed, **kwargs)


def vec_simmer_kwargs(agent_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`VecSimmer` keywords that a ``PPOSimmer(**agent_kwargs)`` wraps its env with.

    For a caller that builds the ``VecSimmer`` itself (``gymcurric train`` does, so that its
    safety states are part of the run's saved env state): the settings in ``agent_kwargs``,
    PPOSimmer's defaults for the others.

    Examples:
        >>> vec_simmer_kwargs({"safety_budget": 10.0, "n_steps": 64})["safety_budget"]
        10.0
    """
    params = inspect.signature(PPOSimmer.__init__).parameters
    return {key: agent_kwargs.get(key, params[key].default) for key in SIMMER_ENV_KEYS}


class PPOSimmer(PPO):
    """PPO-Simmer (PPOSimmerPID and its Q-learning twin): Sauté RL with a budget controller.

    The env is wrapped in :class:`VecSimmer` (unless it already contains one): the observation
    carries the safety state ``z``, and the reward turns to ``unsafe_reward`` once the episode's
    budget is spent (Sauté RL). Once per rollout ("epoch"), before the PPO update, the episode
    costs of the episodes that ended in that rollout (``info["cost"]``, raw even under
    ``VecNormalize``) go to a controller, which sets the budget of the episodes that start
    afterwards (Sootla et al., NeurIPS 2022; ``HEBO/SIMMER``):

    * ``controller="pi"``: :class:`~gymcurric.safety.budget_control.PIBudgetController`, the
      original PI controller with anti-windup, tracking a reference that steps up through
      ``budget_levels`` over training (``reference="increase"``);
    * ``controller="q"``: :class:`~gymcurric.safety.budget_control.QBudgetController`,
      tabular Q-learning over ``budget_levels`` with actions -1/0/+1, seeded from ``seed``.

    "Training", for the reference, is ``reference_steps`` env steps from the start of the run:
    by default the ``total_timesteps`` of the ``learn()`` call that started it (the one that
    reset the timestep count), kept by later ``learn(..., reset_num_timesteps=False)`` calls;
    past it the reference stays at its end value. With ``reference_steps=2 * N``,
    ``learn(2 * N)`` equals ``learn(N)`` then ``learn(N, reset_num_timesteps=False)``
    (``gymcurric train`` sets it to ``run.total_steps``).

    The controller observes the **max** episode cost of the epoch by default (the original's
    Simmer-Sauté, an almost-sure constraint), or the mean (``cost_observation="mean"``).
    A rollout in which no episode ended takes no controller step (counted). The budget is in
    ``[0, safety_budget]``; ``budget_levels`` default to 6 levels from ``safety_budget / 2``
    to ``safety_budget``, and the first rollouts run at the controller's initial budget (the
    lowest level) where the original ran its first epoch at the full budget.

    Differences from OmniSafe 0.5's PPOSimmerPID, on purpose: the step spends ``c / B`` (the
    maximum budget, as the original) where OmniSafe spends ``c / b`` (``budget_step="current"``
    gives OmniSafe's); OmniSafe's controller integrates the budget with gains (5e-4, 1e-5)
    under which it barely moves, where the original's PI tracks a reference schedule.

    The update is SB3's PPO with a guard: a minibatch whose loss or gradient norm is not
    finite takes no step (counted in ``nonfinite_skipped``, as in every safe-RL agent: see
    docs/safe_rl.md; PPOSimmer has no cost critic to skip). The risk hook does not apply
    (there is no Lagrange multiplier); ``risk_modulation`` raises
    :class:`~gymcurric.errors.ConfigError`. ``save``/``load`` keep the controller (its Q table
    or PI memory and its generator), the cost windows and the counters; ``load``/``set_env``
    wrap a plain env in ``VecSimmer`` with the saved settings and set its budget from the
    controller.

    Logs SB3's PPO keys (``rollout/ep_rew_mean`` is the env's own return, recorded below the
    Sauté reward) plus ``rollout/ep_cost_mean`` (last ``cost_window`` episodes),
    ``simmer/budget``, ``simmer/observed_cost``, ``simmer/reference`` (PI) or
    ``simmer/level`` (Q), ``simmer/controller_skipped`` and ``train/nonfinite_skipped``.

    Args:
        policy: as PPO (``"MlpPolicy"``, ``"MultiInputPolicy"`` for Dict observations, ...).
        env: the env (or id); every sub-env must report ``info["cost"]``.
        learning_rate: as PPO.
        n_steps: as PPO (one epoch of the controller per rollout).
        batch_size: as PPO.
        n_epochs: as PPO.
        gamma: as PPO.
        gae_lambda: as PPO.
        clip_range: as PPO.
        clip_range_vf: as PPO.
        normalize_advantage: as PPO.
        ent_coef: as PPO.
        vf_coef: as PPO.
        max_grad_norm: as PPO.
        use_sde: as PPO.
        sde_sample_freq: as PPO.
        target_kl: as PPO.
        stats_window_size: as PPO.
        tensorboard_log: as PPO.
        policy_kwargs: as PPO.
        verbose: as PPO.
        seed: as PPO (also the Q controller's generator).
        device: as PPO.
        safety_budget: ``B``, the maximum episode cost budget (25).
        controller: ``"pi"`` (default), ``"q"`` or a controller object.
        budget_levels: the budget levels (see above).
        reference: the PI reference: ``"increase"``, ``"decrease"`` or a function
            ``progress_remaining -> budget``.
        reference_steps: the env steps the reference schedule spans, from the start of the
            run (an int ≥ 1); None: the ``total_timesteps`` of the ``learn()`` call that
            started the run.
        controller_kwargs: the controller's settings (PI: ``kp``, ``ki``, ``kaw``, ``polyak``,
            ``window``, ``action_bound``, ``budget_bounds``; Q: ``lr``, ``gamma``,
            ``epsilon_greedy``, ``polyak``, ``reward_thresh``, ``initial_level``).
        cost_observation: ``"max"`` (default) or ``"mean"`` episode cost of the epoch.
        saute_gamma: ``gamma_s`` (0.999, OmniSafe's; its Goal1 setting is 0.9999).
        max_episode_steps: the horizon ``T`` (default: the env spec's).
        unsafe_reward: the reward once the budget is spent (-1.0; OmniSafe Goal1: -0.2).
        budget_step: ``"max"`` (default, the original) or ``"current"`` (OmniSafe).
        cost_window: finished episodes ``rollout/ep_cost_mean`` averages (100).
        risk_modulation: must be None or False.
        _init_setup_model: as SB3.

    Examples:
        >>> import gymcurric
        >>> model = PPOSimmer("MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32,
        ...                   n_epochs=1, safety_budget=10.0, max_episode_steps=200, seed=0)
        >>> model.budget  # the lowest of the default levels 5, 6, ..., 10
        5.0
    """

    def __init__(
        self,
        policy: str | type[Any],
        env: GymEnv | str | None,
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
        safety_budget: float = 25.0,
        controller: str | BudgetController = "pi",
        budget_levels: Any = None,
        reference: Any = "increase",
        reference_steps: int | None = None,
        controller_kwargs: dict[str, Any] | None = None,
        cost_observation: str = "max",
        saute_gamma: float = 0.999,
        max_episode_steps: int | None = None,
        unsafe_reward: float = -1.0,
        budget_step: str = "max",
        cost_window: int = 100,
        risk_modulation: Any = None,
        _init_setup_model: bool = True,
    ) -> None:
        src = "PPOSimmer"
        if risk_modulation not in (None, False):
            raise ConfigError(
                "risk_modulation",
                risk_modulation,
                "PPOSimmer has no Lagrange multiplier for the risk hook to scale (the budget "
                "follows its controller); use PPOLag or TRPOLag",
                source=src,
            )
        if cost_observation not in COST_OBSERVATIONS:
            raise ConfigError(
                "cost_observation", cost_observation, "expected 'max' or 'mean'", source=src
            )
        cost_window = check_count("cost_window", cost_window, source=src)
        budget = as_real(safety_budget)  # NumPy scalars too; not a bool or a string
        if budget is None or not 0 < budget < float("inf"):
            raise ConfigError("safety_budget", safety_budget, "expected a number > 0", source=src)
        if type(safety_budget) is not int:
            safety_budget = budget  # a Python int is kept as given
        levels = levels_or_default(budget_levels, float(safety_budget), src)
        if levels[-1] > safety_budget:
            raise ConfigError(
                "budget_levels",
                budget_levels,
                f"expected levels <= safety_budget={safety_budget:g}",
                source=src,
            )
        self.budget_controller = make_budget_controller(
            controller, levels, reference, dict(controller_kwargs or {}), seed
        )
        bounds = getattr(self.budget_controller, "budget_bounds", (0.0, 0.0))
        if bounds[1] > safety_budget:
            raise ConfigError(
                "controller_kwargs",
                controller_kwargs,
                f"budget_bounds {bounds} reach above safety_budget={safety_budget:g}",
                source=src,
            )
        if reference_steps is not None:
            reference_steps = check_count("reference_steps", reference_steps, source=src)
        #: the env steps the reference schedule spans (None: see ``reference_horizon``)
        self.reference_steps = reference_steps
        #: the span in use: ``reference_steps``, or the total of the learn() that started the run
        self.reference_horizon: int | None = None
        self.controller_name = controller if isinstance(controller, str) else "custom"
        self.cost_observation = cost_observation
        #: VecSimmer's settings (kept with the model to wrap the env of ``load``/``set_env``).
        self.simmer_kwargs: dict[str, Any] = {
            "safety_budget": float(safety_budget),
            "saute_gamma": saute_gamma,
            "max_episode_steps": max_episode_steps,
            "unsafe_reward": unsafe_reward,
            "budget_step": budget_step,
        }
        self.cost_window = cost_window
        self.ep_cost_buffer: deque[float] = deque(maxlen=cost_window)
        self.epoch_costs: list[float] = []
        self.controller_skipped = 0
        self.nonfinite_skipped = 0
        self._running_cost: np.ndarray | None = None
        if env is not None:
            env = self._with_simmer(env, self.simmer_kwargs, verbose, self.budget)
        super().__init__(
            policy,
            env,  # type: ignore[arg-type]
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            clip_range=clip_range,
            clip_range_vf=clip_range_vf,
            normalize_advantage=normalize_advantage,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            target_kl=target_kl,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        if _init_setup_model:
            self._setup_model()

    def _get_policy_from_name(self, policy_name: str) -> type[BasePolicy]:
        return policy_from_name(self.policy_aliases, policy_name, type(self).__name__)

    # ------------------------------------------------------------------ env and save/load
    @classmethod
    def _with_simmer(
        cls, env: GymEnv | str, settings: dict[str, Any], verbose: int, budget: float
    ) -> VecEnv:
        """``env`` as a VecEnv with a :class:`VecSimmer` in it (added on top if missing)."""
        made = maybe_make_env(env, verbose)
        assert made is not None
        env = cls._wrap_env(made, verbose)
        if unwrap_vec_wrapper(env, VecSimmer) is None:
            env = VecSimmer(env, budget=budget, **settings)
        return env

    @property
    def budget(self) -> float:
        """The budget of the episodes that start now."""
        return float(self.budget_controller.budget)

    def simmer_env(self) -> VecSimmer | None:
        """The :class:`VecSimmer` in this model's env (None without an env)."""
        if self.env is None:
            return None
        found = unwrap_vec_wrapper(self.env, VecSimmer)
        return found if isinstance(found, VecSimmer) else None

    def _setup_model(self) -> None:
        super()._setup_model()
        simmer = self.simmer_env()
        if simmer is not None:  # after load: the env starts with the controller's budget
            simmer.set_budget(self.budget)

    def set_env(self, env: GymEnv, force_reset: bool = True) -> None:
        """SB3's ``set_env``, wrapping ``env`` in ``VecSimmer`` (the saved settings) if needed."""
        env = self._with_simmer(env, self.simmer_kwargs, self.verbose, self.budget)
        super().set_env(env, force_reset=force_reset)
        simmer = self.simmer_env()
        assert simmer is not None
        simmer.set_budget(self.budget)

    @classmethod
    def load(
        cls: type[SelfPPOSimmer],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfPPOSimmer:
        """SB3's ``load``; an ``env`` without ``VecSimmer`` is wrapped with the saved settings."""
        if env is not None:
            data, _, _ = load_from_zip_file(path, device=device, custom_objects=custom_objects)
            if isinstance(path, io.BufferedIOBase):
                path.seek(0)  # SB3's load reads the file again
            assert data is not None
            budget = float(data["budget_controller"].budget)
            env = cls._with_simmer(env, data["simmer_kwargs"], data.get("verbose", 0), budget)
        return super().load(
            path,
            env=env,
            device=device,
            custom_objects=custom_objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )

    # ------------------------------------------------------------------------ rollouts
    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> Any:
        env_reset = reset_num_timesteps or self._last_obs is None
        out = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        if env_reset or self._running_cost is None:
            assert self.env is not None
            self._running_cost = np.zeros(self.env.num_envs, dtype=np.float64)
            self.epoch_costs = []
        if reset_num_timesteps:
            self.ep_cost_buffer.clear()
        if reset_num_timesteps or self.reference_horizon is None:
            # fixed for the run: a later learn(..., reset_num_timesteps=False) continues it
            self.reference_horizon = self.reference_steps or self._total_timesteps
        return out

    def _update_info_buffer(
        self, infos: list[dict[str, Any]], dones: np.ndarray | None = None
    ) -> None:
        """SB3's episode statistics, plus each finished episode's cost (from ``info["cost"]``)."""
        super()._update_info_buffer(infos, dones)
        if dones is None or self._running_cost is None:
            return
        # VecSimmer has checked that every sub-env reports a finite info["cost"]
        self._running_cost += np.array([float(info["cost"]) for info in infos])
        for idx in np.flatnonzero(dones).tolist():
            cost = float(self._running_cost[idx])
            self.ep_cost_buffer.append(cost)
            self.epoch_costs.append(cost)
            self._running_cost[idx] = 0.0

    def dump_logs(self, iteration: int = 0) -> None:
        """SB3's logs plus ``rollout/ep_cost_mean``."""
        if self.ep_cost_buffer:
            self.logger.record("rollout/ep_cost_mean", float(np.mean(self.ep_cost_buffer)))
        super().dump_logs(iteration)

    # ----------------------------------------------------------------------------- training
    def _control_budget(self) -> None:
        """One controller step from this epoch's episode costs; the env gets the new budget."""
        costs, self.epoch_costs = self.epoch_costs, []
        if costs:
            observed = max(costs) if self.cost_observation == "max" else float(np.mean(costs))
            # the reference of the epoch just observed: the progress at the rollout's start
            assert self.env is not None
            start = self.num_timesteps - self.n_steps * self.env.num_envs
            horizon = self.reference_horizon or self._total_timesteps
            progress = min(max(1.0 - start / max(horizon, 1), 0.0), 1.0)
            self.budget_controller.step(observed, progress)
            simmer = self.simmer_env()
            if simmer is not None:
                simmer.set_budget(self.budget)
            self.logger.record("simmer/observed_cost", observed)
        else:
            self.controller_skipped += 1
        self.logger.record("simmer/budget", self.budget)
        self.logger.record("simmer/controller_skipped", self.controller_skipped)
        if isinstance(self.budget_controller, PIBudgetController):
            self.logger.record("simmer/reference", self.budget_controller.last_reference)
        elif isinstance(self.budget_controller, QBudgetController):
            self.logger.record("simmer/level", self.budget_controller.level)

    def train(self) -> None:
        """Move the budget from this epoch's costs, then SB3's PPO update (guarded)."""
        self._control_budget()
        self._update_learning_rate(self.policy.optimizer)
        guarded_ppo_train(self, self._current_progress_remaining)

    def learn(
        self: SelfPPOSimmer,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "PPOSimmer",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfPPOSimmer:
        """Train for ``total_timesteps`` env steps (see SB3's ``PPO.learn``)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
