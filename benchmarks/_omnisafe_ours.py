"""The gymcurric side of ``omnisafe_side_by_side.py``: our agents with OmniSafe's defaults.

:func:`make_model` builds PPOLag, PPOPIDLag (= CPPOPID) or CPO with OmniSafe 0.5.0's default
hyperparameters (``configs/on-policy/{PPOLag,CPPOPID,CPO}.yaml``), as mapped and explained in
the docstring of ``omnisafe_side_by_side.py``; :class:`EpochRecorder` writes the common run
record (``_omnisafe_records``) after every epoch (= one SB3 rollout of ``steps_per_epoch``
steps on one env).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch as th
from _omnisafe_records import Episode, epoch_row, write_episodes, write_rows
from stable_baselines3.common.callbacks import BaseCallback

ENV = "SafetyPointGoal1-v0"
COST_LIMIT = 25.0

# OmniSafe 0.5.0 defaults (configs/on-policy/*.yaml), read from the installed package
PPO_FAMILY = {
    "steps_per_epoch": 20_000,
    "update_iters": 40,
    "batch_size": 64,
    "target_kl": 0.02,
    "clip": 0.2,
    "entropy_coef": 0.0,
    "gamma": 0.99,
    "lam": 0.95,
    "cost_gamma": 0.99,
    "lam_c": 0.95,
    "max_grad_norm": 40.0,
    "lr": 3e-4,  # actor and both critics; the actor's decays linearly to 0 (linear_lr_decay)
    "hidden_sizes": [64, 64],
    "lagrangian_multiplier_init": 0.001,
    "lambda_lr": 0.035,
}
CPPOPID = {
    "pid_kp": 0.1,
    "pid_ki": 0.01,
    "pid_kd": 0.01,
    "pid_d_delay": 10,
    "pid_delta_p_ema_alpha": 0.95,
    "pid_delta_d_ema_alpha": 0.95,
    "penalty_max": 100.0,
}
CPO = {
    "steps_per_epoch": 20_000,
    "update_iters": 10,  # critic passes
    "batch_size": 128,  # critic minibatch
    "target_kl": 0.01,
    "cg_iters": 15,
    "cg_damping": 0.1,
    "fvp_sample_freq": 1,
    "line_search_steps": 20,  # cpo.py _update_actor: _cpo_search_step(total_steps=20)
    "line_search_decay": 0.8,
    "critic_lr": 1e-3,
    "max_grad_norm": 40.0,
}
OBS_CLIP = 5.0  # omnisafe/envs/wrapper.py ObsNormalize: Normalizer(shape, clip=5)
OMNISAFE_J_C_WINDOW = 50  # policy_gradient.py: register_key('Metrics/EpCost', window_length=50)


def actor_lr_schedule(lr: float, epochs: int):
    """OmniSafe's ``LinearLR(start 1, end 0, total_iters=epochs)``, stepped after each epoch.

    Epoch ``k`` (0-based) updates with ``lr·(1 - k/epochs)``. SB3 calls the schedule before
    the update of rollout ``k`` with ``progress_remaining = 1 - (k+1)/epochs``, hence the
    ``+ 1/epochs``.
    """

    def schedule(progress_remaining: float) -> float:
        return lr * min(1.0, progress_remaining + 1.0 / epochs)

    return schedule


def make_venv(seed: int) -> Any:
    """``benchmarks/safety_gym.py``'s env (DummyVecEnv → VecCostMonitor → VecNormalize).

    One env; observations normalised, rewards and costs not (OmniSafe: ``obs_normalize``
    True, ``reward_normalize``/``cost_normalize`` False), clipped at ±5 as OmniSafe's.
    """
    import safety_gym

    venv = safety_gym.make_venv(ENV, 1, seed, norm_obs=True)
    venv.clip_obs = OBS_CLIP
    return venv


def policy_kwargs() -> dict[str, Any]:
    return {
        "net_arch": {"pi": PPO_FAMILY["hidden_sizes"], "vf": PPO_FAMILY["hidden_sizes"]},
        "activation_fn": th.nn.Tanh,
        # PyTorch's default Linear init is kaiming_uniform(a=√5), OmniSafe's
        # weight_initialization_mode; SB3's orthogonal init would differ
        "ortho_init": False,
        "log_std_init": 0.0,  # GaussianLearningActor: log_std = zeros
    }


def make_model(
    algo: str,
    venv: Any,
    seed: int,
    total_steps: int,
    steps_per_epoch: int | None,
    cpo_constraint_scale: str = "reference",
) -> Any:
    """Our agent for ``algo`` with OmniSafe's defaults mirrored (see the script docstring)."""
    if algo == "cpo":
        return _make_cpo(venv, seed, steps_per_epoch, cpo_constraint_scale)
    spe = steps_per_epoch or PPO_FAMILY["steps_per_epoch"]
    epochs = total_steps // spe
    common: dict[str, Any] = {
        "n_steps": spe,
        "batch_size": PPO_FAMILY["batch_size"],
        "n_epochs": PPO_FAMILY["update_iters"],
        # SB3 stops PPO's epochs when a minibatch's approx KL > 1.5·target_kl;
        # OmniSafe when the full-batch KL after a pass > target_kl
        "target_kl": PPO_FAMILY["target_kl"] / 1.5,
        "learning_rate": actor_lr_schedule(PPO_FAMILY["lr"], epochs),
        "clip_range": PPO_FAMILY["clip"],
        "ent_coef": PPO_FAMILY["entropy_coef"],
        "gamma": PPO_FAMILY["gamma"],
        "gae_lambda": PPO_FAMILY["lam"],
        "cost_gamma": PPO_FAMILY["cost_gamma"],
        "cost_gae_lambda": PPO_FAMILY["lam_c"],
        "max_grad_norm": PPO_FAMILY["max_grad_norm"],
        "cost_max_grad_norm": PPO_FAMILY["max_grad_norm"],
        "vf_coef": 1.0,  # OmniSafe's critic loss is the plain MSE
        "normalize_advantage": True,
        "center_cost_advantage": True,
        "cost_limit": COST_LIMIT,
        "cost_window": OMNISAFE_J_C_WINDOW,
        "cost_n_epochs": PPO_FAMILY["update_iters"],
        "lagrange_init": PPO_FAMILY["lagrangian_multiplier_init"],
        "policy_kwargs": policy_kwargs(),
        "seed": seed,
        "device": "cpu",
        "verbose": 0,
    }
    if algo == "ppolag":
        from gymcurric.integrations.sb3.ppo_lag import PPOLag

        return PPOLag(
            "MlpPolicy", venv, multiplier="adam", lagrange_lr=PPO_FAMILY["lambda_lr"], **common
        )
    if algo == "cppopid":
        from gymcurric.integrations.sb3.ppo_lag import PPOPIDLag

        return PPOPIDLag(
            "MlpPolicy",
            venv,
            kp=CPPOPID["pid_kp"],
            ki=CPPOPID["pid_ki"],
            kd=CPPOPID["pid_kd"],
            multiplier_kwargs={
                "d_delay": CPPOPID["pid_d_delay"],
                "p_ema_alpha": CPPOPID["pid_delta_p_ema_alpha"],
                "d_ema_alpha": CPPOPID["pid_delta_d_ema_alpha"],
                "penalty_max": CPPOPID["penalty_max"],
            },
            # one rollout is one OmniSafe epoch: the per-epoch constants apply as they are
            pid_epoch_steps=None,
            **common,
        )
    raise SystemExit(f"--algo: unknown algorithm {algo!r}; expected ppolag, cppopid or cpo")


def _make_cpo(venv: Any, seed: int, steps_per_epoch: int | None, constraint_scale: str) -> Any:
    try:
        from gymcurric.integrations.sb3 import CPO as OurCPO
    except ImportError as exc:
        raise SystemExit(
            "--lib gymcurric --algo cpo: gymcurric.integrations.sb3.CPO is not available in "
            f"this checkout ({exc}); it is being written for issue 25 item 1. Run ppolag or "
            "cppopid, or --lib omnisafe --algo cpo, until it lands."
        ) from exc
    return OurCPO(
        "MlpPolicy",
        venv,
        learning_rate=CPO["critic_lr"],  # the critics' (CPO's actor has no optimiser)
        n_steps=steps_per_epoch or CPO["steps_per_epoch"],
        batch_size=CPO["batch_size"],
        n_critic_updates=CPO["update_iters"],
        cost_n_epochs=CPO["update_iters"],
        target_kl=CPO["target_kl"],
        cg_max_steps=CPO["cg_iters"],
        cg_damping=CPO["cg_damping"],
        sub_sampling_factor=CPO["fvp_sample_freq"],
        line_search_max_iter=CPO["line_search_steps"],
        line_search_shrinking_factor=CPO["line_search_decay"],
        gamma=PPO_FAMILY["gamma"],
        gae_lambda=PPO_FAMILY["lam"],
        cost_gamma=PPO_FAMILY["cost_gamma"],
        cost_gae_lambda=PPO_FAMILY["lam_c"],
        normalize_advantage=True,
        center_cost_advantage=True,
        cost_max_grad_norm=CPO["max_grad_norm"],
        cost_limit=COST_LIMIT,
        cost_window=OMNISAFE_J_C_WINDOW,
        constraint_scale=constraint_scale,
        policy_kwargs=policy_kwargs(),
        seed=seed,
        device="cpu",
        verbose=0,
    )


class EpochRecorder(BaseCallback):
    """Every episode, and one common-schema row per epoch, written as the run goes.

    A row is completed at the start of the next rollout (or at the end of training), i.e.
    after the epoch's update, as OmniSafe logs its epoch: λ is then the value the update
    produced, and the wall time includes the update.
    """

    def __init__(self, rows_csv: Path, episodes_csv: Path, has_multiplier: bool = True) -> None:
        super().__init__()
        self.rows_csv, self.episodes_csv = rows_csv, episodes_csv
        self.has_multiplier = has_multiplier
        self.episodes: list[Episode] = []
        self.rows: list[dict[str, float]] = []
        self._pending: int | None = None
        self.t0 = self.c0 = 0.0

    def _on_training_start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            ep = info.get("episode")
            if ep is not None:
                self.episodes.append(
                    (
                        self.num_timesteps,
                        float(ep["r"]),
                        float(ep["c"]),
                        int(ep["l"]),
                        time.perf_counter() - self.t0,
                    )
                )
        return True

    def _on_rollout_end(self) -> None:
        self._pending = self.num_timesteps

    def _on_rollout_start(self) -> None:
        self._finish_epoch()

    def _on_training_end(self) -> None:
        self._finish_epoch()

    def _finish_epoch(self) -> None:
        if self._pending is None:
            return
        lam = math.nan
        if self.has_multiplier:
            lam = float(getattr(self.model, "lagrange_multiplier", math.nan))
        finished = [e for e in self.episodes if e[0] <= self._pending]
        wall, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        self.rows.append(epoch_row(len(self.rows), self._pending, finished, lam, wall, cpu))
        self._pending = None
        write_rows(self.rows_csv, self.rows)
        write_episodes(self.episodes_csv, self.episodes)
