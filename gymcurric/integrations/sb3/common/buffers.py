"""A rollout buffer that also stores costs, cost values, cost returns and cost advantages.

:class:`CostRolloutBuffer` is SB3's ``RolloutBuffer`` plus a second GAE over the costs, with
its own discount and λ. Its samples carry the *penalised* advantage that the Lagrangian
algorithms optimise (OmniSafe ``_compute_adv_surrogate``)::

    A = (A_r - λ·A_c) / (1 + λ)

with ``A_r`` standardised and ``A_c`` centred (not scaled) over the sampled batch (OmniSafe
``vector_onpolicy_buffer.get`` does both, on the whole rollout). Doing it per sampled batch keeps
SB3's convention (PPO normalises each minibatch), so that with ``λ = 0`` the samples are exactly
what SB3's PPO computes, and an unmodified ``PPO.train``/``TRPO.train`` consumes them.

With ``n_costs = K > 1`` constraints the cost arrays have a trailing axis of size ``K`` (one GAE
per constraint, each with ``cost_gamma`` and ``cost_gae_lambda``), ``penalty`` holds the ``K``
multipliers, and the penalised advantage generalises OmniSafe's normalisation::

    A = (A_r - Σ_k λ_k·A_c^k) / (1 + Σ_k λ_k)

each ``A_c^k`` centred on its own. It keeps ``A`` on the scale of ``A_r`` however many
constraints there are, and reduces to the single-constraint formula for ``K = 1``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.vec_env import VecNormalize

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.multiplier_checks import check_count, check_finite

__all__ = ["CostRolloutBuffer", "CostRolloutBufferSamples", "discounted_gae"]


class CostRolloutBufferSamples(NamedTuple):
    """SB3's ``RolloutBufferSamples`` fields (``advantages`` penalised) plus the cost fields.

    The cost fields have shape ``(batch,)`` with one constraint, ``(batch, K)`` with ``K``.
    """

    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    cost_advantages: th.Tensor
    cost_returns: th.Tensor
    old_cost_values: th.Tensor


def discounted_gae(
    rewards: NDArray[np.floating[Any]],
    values: NDArray[np.floating[Any]],
    episode_starts: NDArray[np.floating[Any]],
    last_values: NDArray[np.floating[Any]],
    dones: NDArray[Any],
    gamma: float,
    gae_lambda: float,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """GAE(λ) advantages and TD(λ) returns over a ``(n_steps, n_envs)`` rollout, as SB3.

    ``episode_starts[t]`` is 1 where step ``t`` starts a new episode; ``dones`` marks the envs
    whose last step ended an episode. Truncations are handled by the caller, which adds
    ``gamma·V(terminal_observation)`` to the reward (or cost) of the truncated step, as SB3 does.

    Returns:
        ``(advantages, returns)`` with ``returns = advantages + values``.
    """
    n_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1:], dtype=np.float32)
    for step in reversed(range(n_steps)):
        if step == n_steps - 1:
            next_non_terminal = 1.0 - np.asarray(dones).astype(np.float32)
            next_values = last_values
        else:
            next_non_terminal = 1.0 - episode_starts[step + 1]
            next_values = values[step + 1]
        delta = rewards[step] + gamma * next_values * next_non_terminal - values[step]
        last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
        advantages[step] = last_gae
    return advantages, (advantages + values).astype(np.float32)


class CostRolloutBuffer(RolloutBuffer):
    """SB3 ``RolloutBuffer`` with costs, cost values, cost advantages and cost returns.

    Args:
        buffer_size: steps per env per rollout.
        observation_space: the observation space.
        action_space: the action space.
        device: torch device.
        gae_lambda: GAE λ of the reward.
        gamma: discount of the reward.
        n_envs: number of envs.
        cost_gamma: discount of the cost (default: ``gamma``).
        cost_gae_lambda: GAE λ of the cost (default: ``gae_lambda``).
        n_costs: the number of constraints ``K`` (1: cost arrays of shape ``(n_steps, n_envs)``,
            as before issue 25; ``K > 1``: ``(n_steps, n_envs, K)``).

    Attributes set by the algorithm before sampling: ``penalty`` (λ, default 0; with
    ``K > 1`` a sequence of the ``K`` λ_k),
    ``normalize_advantage`` (standardise ``A_r`` per batch, default True) and
    ``center_cost_advantage`` (centre ``A_c`` per batch, default True).
    """

    costs: NDArray[np.float32]
    cost_values: NDArray[np.float32]
    cost_advantages: NDArray[np.float32]
    cost_returns: NDArray[np.float32]

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        cost_gamma: float | None = None,
        cost_gae_lambda: float | None = None,
        n_costs: int = 1,
    ) -> None:
        if isinstance(observation_space, spaces.Dict):
            raise ConfigError(
                "observation_space",
                observation_space,
                "Dict observations are not supported by the Lagrangian algorithms yet; "
                "flatten them (gymnasium.wrappers.FlattenObservation)",
            )
        src = "CostRolloutBuffer"
        self.cost_gamma = (
            gamma if cost_gamma is None else check_finite("cost_gamma", cost_gamma, source=src)
        )
        self.cost_gae_lambda = (
            gae_lambda
            if cost_gae_lambda is None
            else check_finite("cost_gae_lambda", cost_gae_lambda, source=src)
        )
        for name, v in (
            ("cost_gamma", self.cost_gamma),
            ("cost_gae_lambda", self.cost_gae_lambda),
        ):
            if not 0.0 <= v <= 1.0:
                raise ConfigError(
                    name, v, "expected a number in [0, 1]", source="CostRolloutBuffer"
                )
        self.n_costs = n_costs = check_count("n_costs", n_costs, source=src)
        self.cost_shape: tuple[int, ...] = (n_costs,) if n_costs > 1 else ()
        self.penalty: Any = 0.0
        self.normalize_advantage = True
        self.center_cost_advantage = True
        super().__init__(
            buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs
        )

    def reset(self) -> None:
        """Clear the buffer (reward and cost arrays)."""
        shape = (self.buffer_size, self.n_envs, *self.cost_shape)
        self.costs = np.zeros(shape, dtype=np.float32)
        self.cost_values = np.zeros(shape, dtype=np.float32)
        self.cost_advantages = np.zeros(shape, dtype=np.float32)
        self.cost_returns = np.zeros(shape, dtype=np.float32)
        super().reset()

    def add(  # type: ignore[override]
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        episode_start: np.ndarray,
        value: th.Tensor,
        log_prob: th.Tensor,
        *,
        cost: np.ndarray,
        cost_value: th.Tensor | None,
    ) -> None:
        """Add one step of every env; ``cost`` and ``cost_value`` as ``reward`` and ``value``.

        ``cost_value=None`` leaves the cost values to be written into :attr:`cost_values`
        before :meth:`compute_returns_and_advantage` (the algorithms do it in one batch).
        """
        self.costs[self.pos] = np.asarray(cost, dtype=np.float32)
        if cost_value is not None:
            v_c = cost_value.clone().cpu().numpy()
            self.cost_values[self.pos] = v_c.reshape(self.n_envs, *self.cost_shape)
        super().add(obs, action, reward, episode_start, value, log_prob)

    def compute_returns_and_advantage(
        self,
        last_values: th.Tensor,
        dones: np.ndarray,
        last_cost_values: th.Tensor | None = None,
    ) -> None:
        """Reward GAE as SB3, then the cost GAE with ``cost_gamma`` and ``cost_gae_lambda``."""
        super().compute_returns_and_advantage(last_values, dones)
        if last_cost_values is None:
            raise ConfigError(
                "last_cost_values", None, "the cost GAE needs the cost values of the last step"
            )
        last = last_cost_values.clone().cpu().numpy().reshape(self.n_envs, *self.cost_shape)
        if self.n_costs == 1:
            self.cost_advantages, self.cost_returns = discounted_gae(
                self.costs,
                self.cost_values,
                self.episode_starts,
                last.flatten(),
                dones,
                self.cost_gamma,
                self.cost_gae_lambda,
            )
            return
        for k in range(self.n_costs):  # one GAE per constraint
            adv, ret = discounted_gae(
                np.ascontiguousarray(self.costs[..., k]),
                np.ascontiguousarray(self.cost_values[..., k]),
                self.episode_starts,
                last[:, k],
                dones,
                self.cost_gamma,
                self.cost_gae_lambda,
            )
            self.cost_advantages[..., k], self.cost_returns[..., k] = adv, ret

    _FIELDS = (
        "observations",
        "actions",
        "values",
        "log_probs",
        "advantages",
        "returns",
        "cost_advantages",
        "cost_returns",
        "cost_values",
    )

    def get(  # type: ignore[override]
        self, batch_size: int | None = None, *, rng: np.random.Generator | None = None
    ) -> Generator[CostRolloutBufferSamples, None, None]:
        """Yield shuffled batches (all at once with ``batch_size=None``), as SB3.

        Args:
            batch_size: samples per batch.
            rng: generator for the shuffle; default NumPy's global one, as SB3 (parity).
        """
        assert self.full, "the rollout buffer is not full"
        total = self.buffer_size * self.n_envs
        indices = rng.permutation(total) if rng is not None else np.random.permutation(total)  # noqa: NPY002
        if not self.generator_ready:
            for name in self._FIELDS:
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        if batch_size is None:
            batch_size = total
        start = 0
        while start < total:
            yield self._get_samples(indices[start : start + batch_size])
            start += batch_size

    def _get_samples(  # type: ignore[override]
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> CostRolloutBufferSamples:
        t = self.to_torch
        adv_r = t(self.advantages[batch_inds].flatten())
        adv_c = t(self.cost_advantages[batch_inds].reshape(len(batch_inds), *self.cost_shape))
        if len(adv_r) > 1:
            if self.normalize_advantage:
                # Same expression as SB3 PPO.train, so that λ = 0 gives PPO's numbers exactly.
                adv_r = (adv_r - adv_r.mean()) / (adv_r.std() + 1e-8)
            if self.center_cost_advantage:
                adv_c = adv_c - (adv_c.mean() if self.n_costs == 1 else adv_c.mean(dim=0))
        if self.n_costs == 1:
            lam = float(self.penalty)
            # Penalised advantage, OmniSafe PPOLag/CPPOPID `_compute_adv_surrogate`:
            # A = (A_r - λ·A_c) / (1 + λ)
            adv = (adv_r - lam * adv_c) / (1.0 + lam) if lam != 0.0 else adv_r
        else:
            lams = [float(x) for x in np.asarray(self.penalty, dtype=np.float64).reshape(-1)]
            if len(lams) != self.n_costs:
                raise ConfigError("penalty", self.penalty, f"expected {self.n_costs} multipliers")
            # K constraints: A = (A_r - Σ_k λ_k·A_c^k) / (1 + Σ_k λ_k)
            adv = adv_r
            if any(lams):
                cost_term = sum(lam * adv_c[:, k] for k, lam in enumerate(lams))
                adv = (adv_r - cost_term) / (1.0 + sum(lams))
        return CostRolloutBufferSamples(
            observations=t(self.observations[batch_inds]),
            actions=t(self.actions[batch_inds].astype(np.float32, copy=False)),
            old_values=t(self.values[batch_inds].flatten()),
            old_log_prob=t(self.log_probs[batch_inds].flatten()),
            advantages=adv,
            returns=t(self.returns[batch_inds].flatten()),
            cost_advantages=adv_c,
            cost_returns=t(
                self.cost_returns[batch_inds].reshape(len(batch_inds), *self.cost_shape)
            ),
            old_cost_values=t(
                self.cost_values[batch_inds].reshape(len(batch_inds), *self.cost_shape)
            ),
        )
