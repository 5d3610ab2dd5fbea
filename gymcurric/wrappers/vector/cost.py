"""Vector twins of the cost wrappers for Gymnasium ``VectorEnv`` (Sync and Async).

Gymnasium vector infos are dicts of arrays with ``_key`` masks; where the step's own info ends up
depends on the autoreset mode (``env.metadata["autoreset_mode"]``):

* ``NEXT_STEP`` (default): the step after an episode ends is a reset step whose reward is 0; its
  cost is 0 too and it does not count towards the next episode.
* ``SAME_STEP``: a sub-env that ends resets within the same step; the top-level info then holds
  the *reset* info and the final step's info sits in ``info["final_info"]``. We read the cost from
  there, so ``info["cost"][i]`` always belongs to the same transition as ``reward[i]``.
* ``DISABLED``: the user resets sub-envs with ``reset(options={"reset_mask": ...})``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.safety.costs import (
    EpisodeCostTracker,
    NonFinitePolicy,
    check_cost_values,
    read_step_costs,
)
from gymcurric.wrappers.cost import CostSettings, add_episode_cost
from gymcurric.wrappers.vector._common import autoreset_mode

__all__ = ["AnnotateCost", "AutoresetSteps", "RecordEpisodeStatisticsWithCost", "read_step_costs"]

VectorCostFn = Callable[[Any, Any, dict[str, Any]], npt.ArrayLike]

BoolArray = npt.NDArray[np.bool_]


def _missing_cost_error(env: VectorEnv, missing: BoolArray) -> ConfigError:
    return ConfigError(
        "cost_fn",
        None,
        f"sub-envs {np.flatnonzero(missing).tolist()} of {env} reported no info['cost'] this "
        "step; wrap the sub-envs in gymcurric.wrappers.AnnotateCost(cost_fn=...) or pass a "
        "vector cost_fn to this wrapper",
    )


class AutoresetSteps:
    """Where each sub-env's episodes begin and end, by ``env.metadata["autoreset_mode"]``.

    The bookkeeping the vector twins share to line a step's costs and rewards up with episodes
    (see the module docstring for the modes): :meth:`begin` gives a step's ``dones`` and its
    ``reset_steps`` (under ``NEXT_STEP``, the sub-envs whose previous step ended an episode:
    this step is their reset step), :meth:`end` records the step, :meth:`reset` a
    ``reset(options={"reset_mask": ...})``.

    Args:
        env: the vector env (its autoreset mode is read with ``autoreset_mode``).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> envs = gym.make_vec("gymcurric/HazardGrid-v0", num_envs=2)
        >>> steps = AutoresetSteps(envs)
        >>> dones, reset_steps = steps.begin(np.array([True, False]), np.array([False, False]))
        >>> steps.end(dones)
        >>> steps.begin(np.array([False, False]), np.array([False, False]))[1].tolist()
        [True, False]
        >>> envs.close()
    """

    def __init__(self, env: VectorEnv) -> None:
        self.mode = autoreset_mode(env)
        #: Whether a sub-env that ends resets within the same step.
        self.same_step = self.mode == AutoresetMode.SAME_STEP
        self.num_envs = env.num_envs
        #: The sub-envs whose last step ended an episode.
        self.prev_dones = np.zeros(env.num_envs, dtype=bool)

    def reset(self, mask: npt.ArrayLike | None = None) -> None:
        """The sub-envs in ``mask`` (all: ``None``) were reset: none of them ended a step."""
        if mask is None:
            self.prev_dones[:] = False
        else:
            self.prev_dones[np.asarray(mask, dtype=bool)] = False

    def begin(self, terminations: Any, truncations: Any) -> tuple[BoolArray, BoolArray]:
        """``(dones, reset_steps)`` of a step: the episodes that end, the autoreset steps."""
        dones = np.logical_or(terminations, truncations)
        if self.mode == AutoresetMode.NEXT_STEP:
            return dones, self.prev_dones
        return dones, np.zeros(self.num_envs, dtype=bool)

    def end(self, dones: BoolArray) -> None:
        """The step with these ``dones`` is done (the next :meth:`begin` reads them)."""
        self.prev_dones = dones

    def costs(
        self, infos: dict[str, Any], dones: BoolArray, reset_steps: BoolArray, source: str
    ) -> tuple[npt.NDArray[np.float64], BoolArray]:
        """``(costs, present)`` of the step: :func:`read_step_costs` in this autoreset mode."""
        return read_step_costs(
            infos, self.num_envs, dones, reset_steps, self.same_step, source=source
        )


class AnnotateCost(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Vector twin of :class:`gymcurric.wrappers.AnnotateCost`.

    Every step, ``info["cost"]`` is a float64 array of shape ``(num_envs,)`` with an all-True
    ``info["_cost"]`` mask, aligned with the rewards in every autoreset mode (0 on ``NEXT_STEP``
    reset steps; the final step's cost for sub-envs that ended under ``SAME_STEP``). Costs come
    from the sub-envs' own ``info["cost"]`` or from ``cost_fn(observations, actions, infos)``,
    which returns one cost per sub-env. NaN/Inf costs are replaced and counted, or raise.
    When an inner vector ``RecordEpisodeStatistics`` reports episodes, ``info["episode"]["c"]``
    is added.

    Info keys written: ``cost``/``_cost`` (every step), ``episode["c"]`` (when ``episode`` is
    present).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> envs = AnnotateCost(gym.make_vec("gymcurric/HazardGrid-v0", num_envs=2))
        >>> _ = envs.reset(seed=0)
        >>> envs.step(envs.action_space.sample())[-1]["cost"].shape
        (2,)
    """

    def __init__(
        self,
        env: VectorEnv,
        cost_fn: VectorCostFn | None = None,
        *,
        nonfinite: NonFinitePolicy = "warn",
        nonfinite_value: float = 0.0,
        queue_length: int | None = 100,
    ) -> None:
        """Wrap ``env``; arguments as in :class:`gymcurric.wrappers.AnnotateCost`.

        ``cost_fn(observations, actions, infos)`` sees the vector-level step results and returns
        one cost per sub-env; under ``SAME_STEP`` autoreset the observation of a sub-env that
        ended is the reset one (the final one is in ``infos["final_obs"]``).
        """
        settings = CostSettings(cost_fn, nonfinite, nonfinite_value, queue_length)
        gym.utils.RecordConstructorArgs.__init__(self, **settings.arguments())
        VectorWrapper.__init__(self, env)
        self._steps = AutoresetSteps(env)
        self._cost_fn = cost_fn
        self._guard = settings.guard(f"AnnotateCost({env})")
        self._tracker = EpisodeCostTracker(self.num_envs, queue_length)
        self._all = np.ones(self.num_envs, dtype=bool)

    @property
    def nonfinite_count(self) -> int:
        """How many non-finite costs were replaced so far."""
        return self._guard.count

    @property
    def episode_cost(self) -> npt.NDArray[np.float64]:
        """The running cost of each sub-env's current episode."""
        return self._tracker.running

    @property
    def cost_queue(self) -> Any:
        """The costs of the last ``queue_length`` finished episodes, all sub-envs together."""
        return self._tracker.cost_queue

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs (or those in ``options["reset_mask"]``) and their episode costs."""
        mask = None if options is None else options.get("reset_mask")
        obs, infos = self.env.reset(seed=seed, options=options)
        self._tracker.reset(mask)
        self._steps.reset(mask)
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the envs and annotate ``info["cost"]``."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        dones, reset_steps = self._steps.begin(terminations, truncations)
        if self._cost_fn is not None:
            if "cost" in infos:
                raise InfoKeyConflictError(
                    f"{self.env} already reports info['cost']; AnnotateCost(cost_fn=...) will "
                    "not overwrite info key 'cost'"
                )
            raw = self._cost_fn(obs, actions, infos)
            # a bool is an indicator cost, as documented; text is no cost
            check_cost_values(raw, "cost_fn", source="vector.AnnotateCost")
            costs = np.array(raw, dtype=np.float64)
            if costs.shape != (self.num_envs,):
                raise ConfigError(
                    "cost_fn",
                    self._cost_fn,
                    f"returned shape {costs.shape}, expected ({self.num_envs},)",
                    source="AnnotateCost",
                )
            costs[reset_steps] = 0.0
        else:
            costs, present = self._steps.costs(infos, dones, reset_steps, "vector.AnnotateCost")
            if not present.all():
                raise _missing_cost_error(self.env, ~present)
        costs = self._guard.array(costs, where="info['cost']")
        self._tracker.add(costs, ~reset_steps)
        infos["cost"] = costs
        infos["_cost"] = self._all.copy()
        if dones.any():
            add_episode_cost(infos, self._tracker.finish(dones))
        self._steps.end(dones)
        return obs, rewards, terminations, truncations, infos


class RecordEpisodeStatisticsWithCost(RecordEpisodeStatistics, gym.utils.RecordConstructorArgs):
    """Gymnasium's vector ``RecordEpisodeStatistics`` that also records episode cost ``c``.

    Reads each step's cost like :class:`AnnotateCost` does (aligned in every autoreset mode) and
    adds ``info["episode"]["c"]`` (an array, 0 where ``info["_episode"]`` is False);
    :attr:`cost_queue` holds the costs of the last ``buffer_length`` episodes. Under ``DISABLED``
    autoreset, ``reset(options={"reset_mask": mask})`` restarts the statistics of the masked
    sub-envs only (Gymnasium 1.x's vector wrapper restarts them all, as the vector env removes
    the mask from ``options`` before it is read), so ``r``, ``l``, ``t`` and ``c`` are those of
    the single-env wrapper in every mode.

    Info keys written: ``episode`` with ``r``, ``l``, ``t``, ``c`` and ``_episode``.
    """

    def __init__(
        self, env: VectorEnv, buffer_length: int = 100, stats_key: str = "episode"
    ) -> None:
        """Wrap ``env``; arguments as in Gymnasium's vector ``RecordEpisodeStatistics``."""
        # Gymnasium's vector RecordEpisodeStatistics records nothing; the convention here is
        # that every wrapper records its arguments, as the single-env ones do
        gym.utils.RecordConstructorArgs.__init__(
            self, buffer_length=buffer_length, stats_key=stats_key
        )
        super().__init__(env, buffer_length=buffer_length, stats_key=stats_key)
        self._cost_tracker = EpisodeCostTracker(self.num_envs, buffer_length)
        self._steps = AutoresetSteps(env)

    @property
    def cost_queue(self) -> Any:
        """The costs of the last ``buffer_length`` finished episodes."""
        return self._cost_tracker.cost_queue

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs (or those in ``options["reset_mask"]``) and their running statistics."""
        mask = None if options is None else options.get("reset_mask")
        kept = None if mask is None else self._running_stats()
        out = super().reset(seed=seed, options=options)
        if kept is not None:
            # Gymnasium's vector envs pop options["reset_mask"] before its
            # RecordEpisodeStatistics (1.x) looks for it, so that restarts every sub-env's
            # return, length and start time: give the sub-envs that were not reset theirs back.
            keep = ~np.asarray(mask, dtype=bool)
            for name, values in kept.items():
                getattr(self, name)[keep] = values[keep]
        self._cost_tracker.reset(mask)
        self._steps.reset(mask)
        return out

    def _running_stats(self) -> dict[str, np.ndarray]:
        names = ("episode_returns", "episode_lengths", "episode_start_times", "prev_dones")
        return {name: np.array(getattr(self, name), copy=True) for name in names}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the envs; add ``c`` to the episode statistics of the sub-envs that ended."""
        obs, rewards, terminations, truncations, infos = super().step(actions)
        dones, reset_steps = self._steps.begin(terminations, truncations)
        self._steps.end(dones)  # as the statistics, which super().step() already moved on
        source = "vector.RecordEpisodeStatisticsWithCost"
        costs, present = self._steps.costs(infos, dones, reset_steps, source)
        if not present.all():
            raise _missing_cost_error(self.env, ~present)
        self._cost_tracker.add(costs, ~reset_steps)
        if dones.any():
            infos[self._stats_key]["c"] = self._cost_tracker.finish(dones)
        return obs, rewards, terminations, truncations, infos
