"""Cost annotation wrappers: every step carries ``info["cost"]``.

* :class:`AnnotateCost` turns any env into one whose ``step`` returns the Gymnasium 5-tuple with
  a finite float ``info["cost"]``: it converts Safety-Gymnasium style 6-tuples
  ``(obs, reward, cost, terminated, truncated, info)``, reads an existing ``info["cost"]``, or
  computes one with a user callable; it guards against NaN/Inf and adds the episode cost to
  ``info["episode"]["c"]`` when an inner ``RecordEpisodeStatistics`` reports an episode.
* :class:`RecordEpisodeStatisticsWithCost` is Gymnasium's ``RecordEpisodeStatistics`` plus
  ``info["episode"]["c"]``, for the usual order ``RecordEpisodeStatistics(AnnotateCost(env))``.
* :class:`EmitCostTuple` goes back to the 6-tuple for code written against Safety-Gymnasium's
  native API.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields
from typing import Any, Protocol, SupportsFloat

import gymnasium as gym
from gymnasium.core import ActType, ObsType

from gymcurric.errors import ConfigError, GymcurricError, InfoKeyConflictError
from gymcurric.safety.costs import (
    NonFiniteGuard,
    NonFinitePolicy,
    check_cost_values,
    check_queue_length,
)

__all__ = [
    "AnnotateCost",
    "CostFn",
    "CostSettings",
    "EmitCostTuple",
    "RecordEpisodeStatisticsWithCost",
    "add_episode_cost",
    "cost_guard",
]


class CostFn(Protocol):
    """A user cost: ``cost_fn(observation, action, info) -> float``.

    ``observation`` is the observation *after* the step, ``info`` the step's info dict.
    """

    def __call__(self, observation: Any, action: Any, info: dict[str, Any]) -> SupportsFloat:
        """Return the cost of the step that produced ``observation`` and ``info``."""
        ...


def missing_cost_error(env: Any) -> ConfigError:
    """The error raised when an env provides no cost and no ``cost_fn`` was given."""
    return ConfigError(
        "cost_fn",
        None,
        f"{env} returned neither a 6-tuple with a cost nor info['cost']; pass "
        "cost_fn=lambda obs, action, info: ... to AnnotateCost to compute one",
    )


def cost_guard(nonfinite: NonFinitePolicy, nonfinite_value: float, owner: str) -> NonFiniteGuard:
    """A new guard for a wrapper's costs, ``nonfinite`` and ``nonfinite_value`` as in AnnotateCost.

    The guard checks both (a :class:`~gymcurric.errors.ConfigError` for a bad one) and names
    ``owner`` in its messages.
    """
    return NonFiniteGuard("cost", policy=nonfinite, replacement=nonfinite_value, source=owner)


@dataclass(frozen=True)
class CostSettings:
    """The checked arguments of :class:`AnnotateCost`, shared with its vector twin.

    The fields are the constructor arguments as given (the ``cost_fn`` itself, not a copy); a
    ``cost_fn`` that is neither callable nor ``None``, or a ``queue_length`` that is not an int
    from 0 to ``sys.maxsize``, raises :class:`~gymcurric.errors.ConfigError`.
    """

    cost_fn: Any
    nonfinite: NonFinitePolicy
    nonfinite_value: float
    queue_length: int | None

    def __post_init__(self) -> None:
        """Check ``cost_fn`` and ``queue_length`` (the guard checks the others)."""
        if self.cost_fn is not None and not callable(self.cost_fn):
            raise ConfigError(
                "cost_fn", self.cost_fn, "must be callable or None", source="AnnotateCost"
            )
        check_queue_length(self.queue_length, "AnnotateCost")

    def arguments(self) -> dict[str, Any]:
        """The constructor arguments, as the wrappers record them."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def guard(self, owner: str) -> NonFiniteGuard:
        """A new guard for the costs, with this ``nonfinite`` policy (see :func:`cost_guard`)."""
        return cost_guard(self.nonfinite, self.nonfinite_value, owner)


def add_episode_cost(info: dict[str, Any], episode_cost: Any) -> None:
    """Add ``episode_cost`` to ``info["episode"]`` as ``"c"``, when an inner wrapper put it there.

    ``info["episode"]`` is the dict of an inner ``RecordEpisodeStatistics`` (single-env: floats;
    vector: arrays); without one nothing is written. An ``episode`` that already has ``"c"``
    raises :class:`~gymcurric.errors.InfoKeyConflictError`.
    """
    episode = info.get("episode")
    if isinstance(episode, dict):
        if "c" in episode:
            raise InfoKeyConflictError(
                "info['episode'] already has key 'c'; AnnotateCost will not overwrite it"
            )
        episode["c"] = episode_cost


class AnnotateCost(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Make every step return the 5-tuple with a finite ``info["cost"]``.

    The cost comes from, in order: the third element of a 6-tuple step (Safety-Gymnasium's native
    API), ``cost_fn(obs, action, info)`` if given, or the inner env's ``info["cost"]``. Passing a
    ``cost_fn`` for an env that already reports a cost raises :class:`InfoKeyConflictError`
    rather than silently replacing it. NaN/Inf costs are replaced by ``nonfinite_value`` and
    counted in :attr:`nonfinite_count` (warned once), or raise with ``nonfinite="raise"``.

    At the end of an episode the episode cost is appended to :attr:`cost_queue`; if an inner
    ``RecordEpisodeStatistics`` put ``info["episode"]`` there, ``info["episode"]["c"]`` is added.

    Info keys written: ``cost`` (float, every step), ``episode["c"]`` (at episode end, when
    ``episode`` is present).

    Examples:
        >>> import gymnasium as gym
        >>> far = lambda obs, action, info: abs(obs[0]) > 1.0
        >>> env = AnnotateCost(gym.make("CartPole-v1"), cost_fn=far)
        >>> _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(0)
        >>> info["cost"]
        0.0
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        cost_fn: CostFn | None = None,
        *,
        nonfinite: NonFinitePolicy = "warn",
        nonfinite_value: float = 0.0,
        queue_length: int | None = 100,
    ) -> None:
        """Wrap ``env``.

        Args:
            env: the env to annotate.
            cost_fn: computes the cost for envs that report none (see :class:`CostFn`).
            nonfinite: what to do with a NaN/Inf cost: ``"warn"`` (replace, warn once),
                ``"ignore"`` (replace silently) or ``"raise"``.
            nonfinite_value: the replacement for a non-finite cost.
            queue_length: how many finished-episode costs :attr:`cost_queue` keeps (``None``: all).
        """
        settings = CostSettings(cost_fn, nonfinite, nonfinite_value, queue_length)
        gym.utils.RecordConstructorArgs.__init__(self, **settings.arguments())
        gym.Wrapper.__init__(self, env)
        self._guard = settings.guard(f"AnnotateCost({env})")
        self._cost_fn = cost_fn
        self.episode_cost = 0.0
        self.cost_queue: deque[float] = deque(maxlen=queue_length)

    @property
    def nonfinite_count(self) -> int:
        """How many non-finite costs were replaced so far."""
        return self._guard.count

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env and the running episode cost."""
        self.episode_cost = 0.0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and annotate ``info["cost"]``."""
        out = self.env.step(action)
        if len(out) == 6:
            obs, reward, cost, terminated, truncated, info = out
            if "cost" in info:
                raise InfoKeyConflictError(
                    f"{self.env} returned a 6-tuple cost ({cost!r}) and also info['cost'] "
                    f"({info['cost']!r}); AnnotateCost will not overwrite info key 'cost'"
                )
        elif len(out) == 5:
            obs, reward, terminated, truncated, info = out
            if self._cost_fn is not None:
                if "cost" in info:
                    raise InfoKeyConflictError(
                        f"{self.env} already reports info['cost'] ({info['cost']!r}); "
                        "AnnotateCost(cost_fn=...) will not overwrite info key 'cost'"
                    )
                cost = self._cost_fn(obs, action, info)
                source = f"AnnotateCost({self.env})"
                check_cost_values(cost, "cost_fn", source=source)
            elif "cost" in info:
                cost = info["cost"]
                # text is refused (the guard would also); a bool is an indicator, 0 or 1
                check_cost_values(cost, "info['cost']", source=f"AnnotateCost({self.env})")
            else:
                raise missing_cost_error(self.env)
        else:
            raise GymcurricError(
                f"{self.env}.step returned a {len(out)}-tuple; expected the Gymnasium 5-tuple or "
                "the Safety-Gymnasium 6-tuple (obs, reward, cost, terminated, truncated, info)"
            )
        cost = self._guard.scalar(cost, where="info['cost']")
        info["cost"] = cost
        self.episode_cost += cost
        if terminated or truncated:
            add_episode_cost(info, self.episode_cost)
            self.cost_queue.append(self.episode_cost)
            self.episode_cost = 0.0
        return obs, reward, terminated, truncated, info


class RecordEpisodeStatisticsWithCost(
    gym.wrappers.RecordEpisodeStatistics[ObsType, ActType],
):
    """Gymnasium's ``RecordEpisodeStatistics`` that also records the episode cost.

    Reads ``info["cost"]`` every step (put there by the env or by :class:`AnnotateCost`) and adds
    ``info["episode"]["c"]`` next to ``r``, ``l`` and ``t``; :attr:`cost_queue` holds the costs
    of the last ``buffer_length`` episodes, like ``return_queue``.

    Info keys written: ``episode`` with ``r``, ``l``, ``t`` and ``c`` (at episode end).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> env = RecordEpisodeStatisticsWithCost(gym.make("gymcurric/HazardGrid-v0"))
        >>> _ = env.reset(seed=0)
        >>> done = False
        >>> while not done:
        ...     _, _, terminated, truncated, info = env.step(env.action_space.sample())
        ...     done = terminated or truncated
        >>> sorted(info["episode"])
        ['c', 'l', 'r', 't']
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        buffer_length: int = 100,
        stats_key: str = "episode",
    ) -> None:
        """Wrap ``env``; arguments as in Gymnasium's ``RecordEpisodeStatistics``."""
        super().__init__(env, buffer_length=buffer_length, stats_key=stats_key)
        self.episode_cost = 0.0
        self.cost_queue: deque[float] = deque(maxlen=buffer_length)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env and the running statistics."""
        self.episode_cost = 0.0
        return super().reset(seed=seed, options=options)

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at episode end add ``c`` to the episode statistics."""
        obs, reward, terminated, truncated, info = super().step(action)
        if "cost" not in info:
            raise missing_cost_error(self.env)
        check_cost_values(info["cost"], "info['cost']", source="RecordEpisodeStatisticsWithCost")
        self.episode_cost += float(info["cost"])
        if terminated or truncated:
            info[self._stats_key]["c"] = self.episode_cost
            self.cost_queue.append(self.episode_cost)
            self.episode_cost = 0.0
        return obs, reward, terminated, truncated, info


class EmitCostTuple(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Return Safety-Gymnasium's 6-tuple ``(obs, reward, cost, terminated, truncated, info)``.

    For agent code written against Safety-Gymnasium's native API. The inner env must report
    ``info["cost"]`` (wrap it in :class:`AnnotateCost` first if it does not); ``info`` is passed
    through unchanged, so ``info["cost"]`` stays available. This wrapper breaks the Gymnasium
    API on purpose: put it outermost, and do not hand it to code that expects a 5-tuple.

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> env = EmitCostTuple(gym.make("gymcurric/HazardGrid-v0"))
        >>> _ = env.reset(seed=0)
        >>> len(env.step(0))
        6
    """

    def __init__(self, env: gym.Env[ObsType, ActType]) -> None:
        """Wrap ``env``, which must report ``info["cost"]``."""
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(  # type: ignore[override]
        self, action: ActType
    ) -> tuple[ObsType, SupportsFloat, float, bool, bool, dict[str, Any]]:
        """Step the env and move ``info["cost"]`` into the tuple (keeping it in ``info``)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "cost" not in info:
            raise missing_cost_error(self.env)
        check_cost_values(info["cost"], "info['cost']", source="EmitCostTuple")
        return obs, reward, float(info["cost"]), terminated, truncated, info
