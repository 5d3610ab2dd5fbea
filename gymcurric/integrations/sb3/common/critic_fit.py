"""sb3-contrib TRPO's reward-critic fit, as one function for TRPOLag's skipped step and CPO.

sb3-contrib's ``TRPO.train`` fits the critic inline after its trust-region step. TRPOLag runs
that ``train`` unmodified whenever the policy step is finite (parity with TRPO), so the loop
there stays sb3-contrib's; :func:`fit_reward_critic` is the same loop for the two places that
cannot call it: TRPOLag after a skipped policy step, and CPO, whose policy step is its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch as th
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from torch.nn import functional as F

__all__ = ["fit_reward_critic"]


def fit_reward_critic(
    policy: ActorCriticPolicy,
    buffer: RolloutBuffer,
    *,
    n_epochs: int,
    batch_size: int | None,
    frozen: Iterable[th.nn.Parameter],
) -> list[float]:
    """Fit ``V`` to the rollout's TD(λ) returns (MSE), as sb3-contrib's ``TRPO.train``.

    ``n_epochs`` passes of ``batch_size`` minibatches from ``buffer.get`` (SB3's global NumPy
    shuffle, so the random stream moves as in TRPO), one ``policy.optimizer`` step each. The
    gradients of ``frozen`` (the actor's parameters) are dropped before each step: they move
    only by the trust-region step, and a critic sharing layers with the actor cannot undo it.

    Args:
        policy: the actor-critic whose ``predict_values`` is fitted.
        buffer: a filled rollout buffer (its ``returns`` are the targets).
        n_epochs: passes over the rollout (TRPO's ``n_critic_updates``).
        batch_size: the minibatch size (None: the whole rollout).
        frozen: parameters the fit must leave as they are.

    Returns:
        The loss of every minibatch, in order (empty when ``n_epochs`` is 0).
    """
    frozen = list(frozen)
    losses: list[float] = []
    for _ in range(n_epochs):
        for data in buffer.get(batch_size):
            values_pred = policy.predict_values(data.observations)
            loss = F.mse_loss(data.returns, values_pred.flatten())
            losses.append(loss.item())
            policy.optimizer.zero_grad()
            loss.backward()
            for param in frozen:
                param.grad = None
            policy.optimizer.step()
    return losses
