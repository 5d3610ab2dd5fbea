"""Actor-critic policies with a separate cost critic ``V_c`` for the Lagrangian algorithms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import NatureCNN, create_mlp
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

from gymcurric._checks import is_int
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common.multiplier_checks import check_count

__all__ = [
    "CnnPolicy",
    "CostActorCriticCnnPolicy",
    "CostActorCriticPolicy",
    "MlpPolicy",
    "check_cost_net_arch",
    "check_policy_kwargs",
    "limit_words",
    "policy_from_name",
]

_MIX = 0x9E3779B97F4A7C15  # odd 64-bit constant: spreads the torch seed into another stream


class CostActorCriticPolicy(ActorCriticPolicy):
    """SB3 ``ActorCriticPolicy`` plus a cost critic with its own features and its own optimiser.

    The cost critic (OmniSafe ``constraint_actor_critic``: a separate ``V_c`` MLP) has its own
    features extractor, an MLP (``cost_net_arch``, default the value ``net_arch``, with the
    policy's activation) and a linear output. It is built after the actor and reward critic,
    from a torch RNG stream forked off the seeded one, so the actor, the reward critic and the
    action noise are exactly those SB3's PPO draws for the same seed. ``policy.optimizer``
    covers the actor and reward critic only (as in SB3); ``policy.cost_optimizer`` the cost
    critic. Parameter names contain ``value`` so sb3-contrib's TRPO leaves them out of its
    natural-gradient step.

    Args:
        observation_space: the observation space.
        action_space: the action space.
        lr_schedule: learning-rate schedule (both optimisers).
        cost_net_arch: hidden layers of the cost critic, a list of positive ints as SB3's
            ``net_arch`` (``[]``: a linear cost critic; default: the value net's).
        n_costs: the number of constraints ``K``: the cost critic has ``K`` outputs on one
            shared MLP, ``V_c^k(obs)`` for each constraint (1, the default, builds exactly the
            single-output critic of before issue 25).
        **kwargs: everything SB3's ``ActorCriticPolicy`` accepts.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        *args: Any,
        cost_net_arch: list[int] | None = None,
        n_costs: int = 1,
        **kwargs: Any,
    ) -> None:
        src = type(self).__name__
        self.cost_net_arch = (
            None
            if cost_net_arch is None
            else check_cost_net_arch("cost_net_arch", cost_net_arch, source=src)
        )
        self.n_costs = check_count("n_costs", n_costs, source=src)
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)  # actor, reward critic, self.optimizer (as SB3)
        arch = self.cost_net_arch
        if arch is None:
            net_arch = self.net_arch
            arch = list(net_arch.get("vf", [])) if isinstance(net_arch, dict) else list(net_arch)
        # Only the CPU generator is forked and reseeded (the layers are built on the CPU):
        # th.manual_seed would also reseed every CUDA generator, which fork_rng(devices=[])
        # does not restore, and the actions sampled on a GPU would no longer be SB3's.
        with th.random.fork_rng(devices=[]):
            th.default_generator.manual_seed((th.initial_seed() * _MIX + 0xC057) % 2**63)
            self.cost_value_extractor = self.make_features_extractor()
            dim = self.cost_value_extractor.features_dim
            out = self.n_costs
            self.cost_value_net = nn.Sequential(*create_mlp(dim, out, arch, self.activation_fn))
            if self.ortho_init:
                self.cost_value_extractor.apply(lambda m: self.init_weights(m, gain=np.sqrt(2)))
                linears = [m for m in self.cost_value_net if isinstance(m, nn.Linear)]
                for layer in linears[:-1]:
                    self.init_weights(layer, gain=np.sqrt(2))
                self.init_weights(linears[-1], gain=1.0)
        self.cost_optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.cost_parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def cost_parameters(self) -> list[nn.Parameter]:
        """The cost critic's parameters (features extractor and MLP)."""
        return [*self.cost_value_extractor.parameters(), *self.cost_value_net.parameters()]

    def predict_cost_values(self, obs: th.Tensor) -> th.Tensor:
        """The cost critic's estimate ``V_c(obs)``, shape ``(batch, K)`` (``(batch, 1)``: one)."""
        x = preprocess_obs(obs, self.observation_space, normalize_images=self.normalize_images)
        return self.cost_value_net(self.cost_value_extractor(x))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["cost_net_arch"] = self.cost_net_arch
        if self.n_costs != 1:  # a one-constraint policy saves the arguments it always had
            data["n_costs"] = self.n_costs
        return data


class CostActorCriticCnnPolicy(CostActorCriticPolicy):
    """:class:`CostActorCriticPolicy` with SB3's ``NatureCNN`` features (image observations)."""

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("features_extractor_class", NatureCNN)
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)


MlpPolicy = CostActorCriticPolicy
CnnPolicy = CostActorCriticCnnPolicy


def check_cost_net_arch(name: str, value: Any, *, source: str) -> list[int]:
    """``value`` as a list of ints ``>= 1`` (the cost critic's hidden layers), or a ConfigError.

    SB3's convention for ``net_arch``: a list (a tuple or a 1-D array is taken too) of layer
    widths, ``[]`` for none; a bare int is not one (SB3 fails on it with a TypeError), and
    neither is a width below 1 (``[0]`` built a layer of no units).

    Examples:
        >>> check_cost_net_arch("cost_net_arch", (64, np.int64(32)), source="doc")
        [64, 32]
    """
    if isinstance(value, np.ndarray):
        ok = value.ndim == 1  # np.array(64) is a bare int
    else:
        ok = isinstance(value, Sequence) and not isinstance(value, str | bytes)
    if not ok or not all(is_int(v, allow_numpy=True) for v in value):
        raise ConfigError(name, value, "expected a list of positive ints", source=source)
    return [int(v) for v in value]


def check_policy_kwargs(policy_kwargs: Mapping[str, Any], n_costs: int, *, source: str) -> None:
    """A Lagrangian agent's ``policy_kwargs['n_costs']`` and ``['cost_net_arch']``, at set-up.

    ``n_costs`` (given or not) must be the number of limits; ``cost_net_arch`` (None: the value
    net's layers) must pass :func:`check_cost_net_arch`. A ConfigError names the key.
    """
    given = policy_kwargs.get("n_costs", n_costs)
    if not (is_int(given, allow_numpy=True) and given == n_costs):
        raise ConfigError(
            "policy_kwargs['n_costs']",
            given,
            f"cost_limit has {limit_words(n_costs)}, one per constraint, so the cost critic has "
            f"{n_costs} output{'s' if n_costs != 1 else ''}: leave n_costs out (it follows "
            f"cost_limit) or set it to {n_costs}",
            source=source,
        )
    arch = policy_kwargs.get("cost_net_arch")
    if arch is not None:
        check_cost_net_arch("policy_kwargs['cost_net_arch']", arch, source=source)


def limit_words(k: int) -> str:
    """``"1 limit"``, ``"2 limits"``: the words of the n_costs errors."""
    return f"{k} limit{'s' if k != 1 else ''}"


def policy_from_name(
    aliases: Mapping[str, type[BasePolicy]], name: str, source: str
) -> type[BasePolicy]:
    """SB3's ``_get_policy_from_name``, with a ConfigError that names the choices.

    Raises:
        ConfigError: ``name`` is not one of ``aliases`` (SB3 raised a bare ``ValueError``).
    """
    if name in aliases:
        return aliases[name]
    raise ConfigError(
        "policy",
        name,
        f"expected one of {sorted(aliases)} or a policy class",
        source=source,
    )
