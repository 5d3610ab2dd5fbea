"""One episode accumulator for the curriculum wrappers: each env's return and cost so far.

The single-env :class:`~gymcurric.wrappers.SampleCurriculumTask` keeps one (``num_envs=1``) and
feeds it step by step; the vector twin keeps one for all sub-envs when it accounts the episodes
in the main process (``episodes_in_main``) and feeds it a vector step at a time. Both then
report the same sums, in float64, added in the same order, so the curriculum state is the same
bit for bit either way. What counts: the reward of every step of the episode, ``info["cost"]``
where a step's info has it (the episode has no cost when none has), and the success of the
last step, ``info["is_success"]``, else ``info["success"]`` (read by
``gymcurric/wrappers/_success.py``, with a ``None`` value counted as absent).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EpisodeSums"]


class EpisodeSums:
    """Per env: the running return and cost of its live episode.

    Args:
        num_envs: how many envs (1 for a single env).

    Attributes:
        returns, costs: float64 sums so far, per env.
        has_cost: whether any step of the episode reported a cost.
        live: whether the env is inside an episode that is summed.

    A single env (the single-env wrapper) keeps Python floats instead, in ``one_return``,
    ``one_cost`` and ``one_has_cost``: per step, a numpy item update costs about three times a
    float addition. :meth:`start_one` and :meth:`finish_one` begin and end its episode; the
    wrapper's ``step`` adds to the fields itself (``one_return += float(reward)``; where the
    step's cost is not None, ``one_cost += float(cost)`` and ``one_has_cost = True``), so that
    its step makes no Python call of its own. The arithmetic is the same float64 addition
    either way.

    Examples:
        >>> sums = EpisodeSums(2)
        >>> sums.start(np.array([True, True]))
        >>> sums.add_rewards(np.array([1.0, 2.0]), sums.live)
        >>> sums.add_costs(np.array([0.5, 0.0]), np.array([True, False]))
        >>> sums.finish(np.array([0, 1]))
        (array([1., 2.]), array([0.5, 0. ]), array([ True, False]))
    """

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.costs = np.zeros(num_envs, dtype=np.float64)
        self.has_cost = np.zeros(num_envs, dtype=bool)
        self.live = np.zeros(num_envs, dtype=bool)
        self.all_live = False
        self.one_return = 0.0  # the single-env path's sums
        self.one_cost = 0.0
        self.one_has_cost = False

    def start(self, envs: Any) -> None:
        """Episodes start in ``envs`` (a mask or indices): their sums restart from zero."""
        self.returns[envs] = 0.0
        self.costs[envs] = 0.0
        self.has_cost[envs] = False
        self.live[envs] = True
        self.all_live = False not in self.live  # (no Python call)

    def stop(self, envs: Any) -> None:
        """The episodes of ``envs`` are no longer summed."""
        self.live[envs] = False
        self.all_live = False

    def add_rewards(self, rewards: np.ndarray, where: npt.NDArray[np.bool_]) -> None:
        """Add one step's rewards to the envs in ``where``."""
        if where is self.live and self.all_live:  # the common vector step: every env inside
            self.returns += rewards
        else:
            self.returns[where] += rewards[where]

    def add_costs(self, costs: Any, where: npt.NDArray[np.bool_]) -> None:
        """Add one step's costs to the envs in ``where`` (those whose info has a cost)."""
        if where.any():
            self.costs[where] += np.asarray(costs)[where].astype(np.float64)
            self.has_cost |= where

    def start_one(self) -> None:
        """A single env's episode starts: its sums restart from zero."""
        self.one_return = self.one_cost = 0.0
        self.one_has_cost = False

    def finish(self, envs: npt.NDArray[np.intp]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(returns, costs, has_cost)`` of ``envs``' episodes (cost 0 where none)."""
        has = self.has_cost[envs]
        costs = self.costs[envs]  # a copy (fancy indexing)
        costs[~has] = 0.0
        return self.returns[envs], costs, has

    def finish_one(self) -> tuple[float, float | None]:
        """A single env's ``(return, cost or None)``."""
        return self.one_return, (self.one_cost if self.one_has_cost else None)
