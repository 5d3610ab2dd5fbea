"""SB3 PPO's update, with an extra policy-loss term and a guard against non-finite losses.

:func:`guarded_ppo_train` is ``stable_baselines3.PPO.train`` (2.x) step for step: the same
minibatches from the same global NumPy stream, the same clipped surrogate, value and entropy
terms, KL early stop, gradient clipping and logs. Two additions:

* ``extra_loss(rollout_data, ratio, clip_range)`` may add a term to each minibatch's loss (P3O's
  cost penalty). A term of exactly zero leaves the gradients, hence the parameters, bit for bit
  as PPO's.
* A minibatch whose loss, or whose gradient norm, is NaN or infinite takes no optimiser step:
  its gradients are dropped and ``model.nonfinite_skipped`` is incremented (logged as
  ``train/nonfinite_skipped``; one skipped update of the definition in docs/safe_rl.md, where
  the agents' skipped cost-critic fits also count). Parameters and the optimiser's moments
  stay as they were, where SB3 would have written NaN into them.

``after_pass(epoch)`` runs after each pass over the rollout; returning False ends the update
(P3O's κ schedule and its early stop).

The logs follow SB3's PPO (and so PPOLag's, which runs SB3's update):
``train/policy_gradient_loss``, ``train/value_loss``, ``train/entropy_loss``,
``train/clip_fraction`` and ``train/approx_kl`` are means over the minibatches evaluated, the
one that tripped the KL early stop (and takes no step) included; ``train/loss`` is the loss of
the last minibatch evaluated, so after a KL stop that minibatch's. Minibatches with a
non-finite loss are left out of both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.utils import explained_variance
from torch.nn import functional as F

__all__ = ["ExtraLoss", "guarded_ppo_train"]

#: ``(rollout_data, ratio, clip_range) -> extra loss term or None``
ExtraLoss = Callable[[Any, th.Tensor, float], "th.Tensor | None"]


def _finite(value: th.Tensor) -> bool:
    return bool(th.isfinite(value).all())


def guarded_ppo_train(
    model: PPO,
    progress_remaining: float,
    *,
    extra_loss: ExtraLoss | None = None,
    after_pass: Callable[[int], bool] | None = None,
) -> None:
    """Run one PPO update of ``model`` on its rollout buffer (see the module docstring).

    Args:
        model: an SB3 ``PPO`` (or subclass) with a filled rollout buffer, whose learning rate
            the caller has updated (SB3's ``_update_learning_rate``); it must have an int
            attribute ``nonfinite_skipped``.
        progress_remaining: the model's ``_current_progress_remaining`` (for the clip ranges).
        extra_loss: adds a term to each minibatch's loss; None: plain PPO.
        after_pass: called with the pass index after each pass; False stops the update.
    """
    model.policy.set_training_mode(True)
    progress = progress_remaining
    clip_range = float(model.clip_range(progress))  # type: ignore[operator]
    clip_range_vf = None
    if model.clip_range_vf is not None:
        clip_range_vf = float(model.clip_range_vf(progress))  # type: ignore[operator]

    entropy_losses: list[float] = []
    pg_losses: list[float] = []
    value_losses: list[float] = []
    clip_fractions: list[float] = []
    approx_kl_divs: list[Any] = []
    last_loss = math.nan
    continue_training = True
    for epoch in range(model.n_epochs):
        approx_kl_divs = []
        for rollout_data in model.rollout_buffer.get(model.batch_size):
            actions = rollout_data.actions
            if isinstance(model.action_space, spaces.Discrete):
                actions = rollout_data.actions.long().flatten()
            values, log_prob, entropy = model.policy.evaluate_actions(
                rollout_data.observations, actions
            )
            values = values.flatten()
            advantages = rollout_data.advantages
            if model.normalize_advantage and len(advantages) > 1:
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

            ratio = th.exp(log_prob - rollout_data.old_log_prob)
            # PPO's clipped surrogate (Schulman et al., 2017, eq. 7)
            policy_loss_1 = advantages * ratio
            policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
            policy_loss = -th.min(policy_loss_1, policy_loss_2).mean()

            if clip_range_vf is None:
                values_pred = values
            else:
                values_pred = rollout_data.old_values + th.clamp(
                    values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                )
            value_loss = F.mse_loss(rollout_data.returns, values_pred)
            entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)
            loss = policy_loss + model.ent_coef * entropy_loss + model.vf_coef * value_loss
            if extra_loss is not None:
                extra = extra_loss(rollout_data, ratio, clip_range)
                if extra is not None:
                    loss = loss + extra

            with th.no_grad():
                log_ratio = log_prob - rollout_data.old_log_prob
                approx_kl_div = th.mean((th.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
            if not _finite(loss):
                model.nonfinite_skipped += 1  # type: ignore[attr-defined]
                continue
            # SB3 logs the last minibatch evaluated, stepped or not (the KL stop's included)
            last_loss = loss.item()
            pg_losses.append(policy_loss.item())
            clip_fractions.append(th.mean((th.abs(ratio - 1) > clip_range).float()).item())
            value_losses.append(value_loss.item())
            entropy_losses.append(entropy_loss.item())
            approx_kl_divs.append(approx_kl_div)
            if model.target_kl is not None and approx_kl_div > 1.5 * model.target_kl:
                continue_training = False
                if model.verbose >= 1:
                    print(f"Early stopping at step {epoch}: max kl reached ({approx_kl_div:.2f})")
                break

            model.policy.optimizer.zero_grad()
            loss.backward()
            grad_norm = th.nn.utils.clip_grad_norm_(model.policy.parameters(), model.max_grad_norm)
            if not _finite(grad_norm):
                model.policy.optimizer.zero_grad()
                model.nonfinite_skipped += 1  # type: ignore[attr-defined]
                continue
            model.policy.optimizer.step()

        model._n_updates += 1
        if not continue_training:
            break
        if after_pass is not None and not after_pass(epoch):
            break

    buffer = model.rollout_buffer
    explained_var = explained_variance(buffer.values.flatten(), buffer.returns.flatten())
    for key, values_list in (
        ("train/entropy_loss", entropy_losses),
        ("train/policy_gradient_loss", pg_losses),
        ("train/value_loss", value_losses),
        ("train/approx_kl", approx_kl_divs),
        ("train/clip_fraction", clip_fractions),
    ):
        if values_list:
            model.logger.record(key, float(np.mean(values_list)))
    model.logger.record("train/loss", last_loss)
    model.logger.record("train/explained_variance", explained_var)
    if hasattr(model.policy, "log_std"):
        model.logger.record("train/std", th.exp(model.policy.log_std).mean().item())
    model.logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    model.logger.record("train/clip_range", clip_range)
    if clip_range_vf is not None:
        model.logger.record("train/clip_range_vf", clip_range_vf)
    model.logger.record("train/nonfinite_skipped", model.nonfinite_skipped)  # type: ignore[attr-defined]
