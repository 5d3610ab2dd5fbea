"""Budget controllers for Simmer: the Sauté budget moved between epochs (numpy only).

Simmer (Sootla et al., "Enhancing Safe Exploration Using Safety State Augmentation", NeurIPS
2022) runs Sauté RL with a safety budget that a controller changes once per epoch from the
episode costs it observed in that epoch. Two controllers of the original code
(``HEBO/SIMMER/tf_algos/simmer_agents``) are here, each a small object whose whole state
(including its random generator) is in :meth:`state_dict`.

:class:`PIBudgetController` (``pid_simmer_agent.py``), once per epoch, with ``y`` the observed
cost and ``ref`` the reference budget of the epoch::

    e     = polyak·(ref - y) + (1 - polyak)·e_prev        # low-pass filtered error
    I     = sum of the last `window` values of e          # integral window (100)
    raw   = kp·e + ki·I + kaw·(a_prev - raw_prev)          # kaw: anti-windup
    a     = clip(raw, -action_bound, action_bound)
    b     = clip(ref + a, *budget_bounds)                  # the next budget
    a     = b - ref                                        # the action actually applied

The reference follows a schedule over training (``"increase"``: a staircase up through the
budget levels, as the original's ``reference_generator``).

:class:`QBudgetController` (``q_simmer_agent.py``) is tabular Q-learning over the discrete
budget levels, with actions ``-1, 0, +1`` (one level down, stay, one level up)::

    y_f   = polyak·y + (1 - polyak)·y_f                    # filtered observation (y_f starts at 0)
    a     = argmax Q[s] with probability epsilon_greedy, else uniform over the 3 actions
    r     = table[(y_f - level[s]) vs ±reward_thresh][a]   # see QBudgetController
    s'    = clip(s + a, 0, n_levels - 1)
    Q[s,a] = (1 - lr)·Q[s,a] + lr·(r + gamma·max Q[s'])
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from gymcurric._checks import check_int, finite_reason, shown, too_large_int
from gymcurric.errors import ConfigError

__all__ = [
    "BudgetController",
    "PIBudgetController",
    "QBudgetController",
    "budget_levels",
    "reference_schedule",
]

Reference = Literal["increase", "decrease"] | Callable[[float], float]


def _number(name: str, value: Any, source: str, *, low: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ConfigError(name, shown(value), "expected a finite number", source=source)
    if too_large_int(value):  # float() raises OverflowError on it
        reason = finite_reason(value, "expected a finite number")
        raise ConfigError(name, shown(value), reason, source=source)
    out = float(value)
    if not math.isfinite(out) or (low is not None and out < low):
        where = "" if low is None else f" >= {low:g}"
        raise ConfigError(name, value, f"expected a finite number{where}", source=source)
    return out


def budget_levels(
    levels: Sequence[float] | np.ndarray | None, safety_budget: float | None, source: str
) -> np.ndarray:
    """The sorted budget levels: ``levels``, or 6 levels evenly from ``d/2`` to ``d``.

    Args:
        levels: the levels, or None for the default ones.
        safety_budget: ``d``, for the default levels (None: levels are required).
        source: the class name, for errors.

    Examples:
        >>> budget_levels(None, 25.0, "doc").tolist()
        [12.5, 15.0, 17.5, 20.0, 22.5, 25.0]
    """
    if levels is None:
        if safety_budget is None:
            raise ConfigError("levels", None, "expected the budget levels", source=source)
        return np.linspace(0.5 * safety_budget, safety_budget, 6)
    try:
        out = np.sort(np.asarray(levels, dtype=np.float64).ravel())
    except (TypeError, ValueError, OverflowError):  # Overflow: an int too large for a float
        reason = "expected numbers a float holds"
        raise ConfigError("budget_levels", shown(levels), reason, source=source) from None
    if out.size == 0 or not np.all(np.isfinite(out)) or out[0] < 0:
        raise ConfigError(
            "budget_levels", levels, "expected one or more finite numbers >= 0", source=source
        )
    if len(np.unique(out)) != len(out):
        raise ConfigError("budget_levels", levels, "expected distinct levels", source=source)
    return out


def reference_schedule(levels: np.ndarray, kind: str, progress_remaining: float) -> float:
    """The reference budget at ``progress_remaining`` (1 at the start of training, 0 at the end).

    ``"increase"`` steps up through the sorted levels in about equal parts of training, as the
    original's ``reference_generator`` with ``n_epochs`` a multiple of the number of levels:
    level ``clip(n - 1 - floor(p·n), 0, n - 1)``. ``"decrease"`` walks the levels downwards.

    Examples:
        >>> levels = np.array([10.0, 20.0, 30.0])
        >>> [reference_schedule(levels, "increase", p) for p in (1.0, 0.7, 0.5, 0.2, 0.0)]
        [10.0, 10.0, 20.0, 30.0, 30.0]
        >>> reference_schedule(levels, "decrease", 1.0)
        30.0
    """
    n = len(levels)
    idx = int(np.clip(n - 1 - math.floor(progress_remaining * n), 0, n - 1))
    ordered = levels if kind == "increase" else levels[::-1]
    return float(ordered[idx])


@runtime_checkable
class BudgetController(Protocol):
    """What :class:`~gymcurric.integrations.sb3.PPOSimmer` needs from a budget controller."""

    @property
    def budget(self) -> float:
        """The budget in force now."""
        ...

    def step(self, observed_cost: float, progress_remaining: float) -> float:
        """Take one epoch's observed cost, return (and keep) the next budget."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The whole state, for checkpoints."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        ...


class PIBudgetController:
    """The Simmer PI controller with anti-windup (``pid_simmer_agent.py``).

    Args:
        levels: the budget levels the reference steps through (sorted here).
        reference: ``"increase"`` (default, the original's Pendulum setting), ``"decrease"`` or
            a function ``progress_remaining -> reference budget``.
        kp: proportional gain (≥ 0).
        ki: integral gain (≥ 0), on the sum of the last ``window`` filtered errors.
        kaw: anti-windup gain (≥ 0) on ``a_prev - raw_prev``, the part of the last action that
            the clipping removed; the original requires ``ki > 0`` when ``kaw > 0``.
        polyak: weight of the new error in the low-pass filter, in (0, 1]; 1 = no filtering.
        window: how many filtered errors the integral sums (the original: 100).
        action_bound: ``|a|`` limit; default ``2·(max - min)/n_levels`` as the original's
            Pendulum setting (the whole level range for a single level: no bound then).
        budget_bounds: ``(low, high)`` of the budget; default ``(0, max level)`` as the
            original's default.

    Examples:
        >>> pi = PIBudgetController([10.0, 20.0], kp=0.1, ki=0.01, kaw=0.05)
        >>> pi.budget  # the reference at the start
        10.0
        >>> round(pi.step(6.0, progress_remaining=1.0), 4)  # cost under the reference: more
        10.44
    """

    def __init__(
        self,
        levels: Sequence[float] | np.ndarray,
        *,
        reference: Reference = "increase",
        kp: float = 0.005,
        ki: float = 0.01,
        kaw: float = 0.01,
        polyak: float = 1.0,
        window: int = 100,
        action_bound: float | None = None,
        budget_bounds: tuple[float, float] | None = None,
    ) -> None:
        src = "PIBudgetController"
        self.levels = budget_levels(levels, None, src)
        if not callable(reference) and reference not in ("increase", "decrease"):
            raise ConfigError(
                "reference",
                reference,
                "expected 'increase', 'decrease' or a function progress_remaining -> budget",
                source=src,
            )
        self.reference = reference
        self.kp = _number("kp", kp, src, low=0.0)
        self.ki = _number("ki", ki, src, low=0.0)
        self.kaw = _number("kaw", kaw, src, low=0.0)
        self.polyak = _number("polyak", polyak, src)
        if not 0.0 < self.polyak <= 1.0:
            raise ConfigError("polyak", polyak, "expected a number in (0, 1]", source=src)
        check_int("window", window, source=src, allow_numpy=True)
        if window > sys.maxsize:  # a deque's maxlen is a C ssize_t
            raise ConfigError(
                "window", shown(window), f"expected an int <= {sys.maxsize}", source=src
            )
        self.window = window = int(window)
        span = float(self.levels[-1] - self.levels[0])
        if action_bound is None:
            action_bound = 2.0 * span / len(self.levels) if span > 0 else float(self.levels[-1])
        self.action_bound = _number("action_bound", action_bound, src, low=0.0)
        if budget_bounds is None:
            budget_bounds = (0.0, float(self.levels[-1]))
        try:
            if isinstance(budget_bounds, str | bytes | bytearray | Mapping | Set):
                raise TypeError  # unpacking reads its characters, keys or an unordered pair
            low, high = budget_bounds
        except (TypeError, ValueError):  # a number, or not two of them
            reason = "expected a (low, high) pair of numbers"
            raise ConfigError("budget_bounds", shown(budget_bounds), reason, source=src) from None
        low = _number("budget_bounds[0]", low, src, low=0.0)
        high = _number("budget_bounds[1]", high, src, low=low)
        self.budget_bounds = (low, high)
        self.prev_error = 0.0
        self.prev_action = 0.0
        self.prev_raw_action = 0.0
        self.errors: deque[float] = deque(maxlen=window)
        self.last_reference = self.reference_at(1.0)
        self._budget = float(np.clip(self.last_reference, low, high))

    @property
    def budget(self) -> float:
        """The budget in force now (before any step: the clipped reference at the start)."""
        return self._budget

    def reference_at(self, progress_remaining: float) -> float:
        """The reference budget at ``progress_remaining``."""
        if callable(self.reference):
            return _number("reference(progress)", self.reference(progress_remaining), "PI")
        return reference_schedule(self.levels, self.reference, progress_remaining)

    def step(self, observed_cost: float, progress_remaining: float) -> float:
        """One epoch: the observed cost (mean or max episode cost) in, the next budget out."""
        ref = self.reference_at(progress_remaining)
        error = self.polyak * (ref - float(observed_cost)) + (1.0 - self.polyak) * self.prev_error
        self.errors.append(error)
        raw = (
            self.kp * error
            + self.ki * sum(self.errors)
            + self.kaw * (self.prev_action - self.prev_raw_action)
        )
        action = float(np.clip(raw, -self.action_bound, self.action_bound))
        budget = float(np.clip(ref + action, *self.budget_bounds))
        # the action actually applied once the budget is clipped (what anti-windup compares)
        self.prev_action, self.prev_raw_action, self.prev_error = budget - ref, raw, error
        self.last_reference = ref
        self._budget = budget
        return budget

    def state_dict(self) -> dict[str, Any]:
        """The controller's state (the settings are constructor arguments)."""
        return {
            "budget": self._budget,
            "prev_error": self.prev_error,
            "prev_action": self.prev_action,
            "prev_raw_action": self.prev_raw_action,
            "errors": list(self.errors),
            "last_reference": self.last_reference,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._budget = float(state["budget"])
        self.prev_error = float(state["prev_error"])
        self.prev_action = float(state["prev_action"])
        self.prev_raw_action = float(state["prev_raw_action"])
        self.errors = deque((float(e) for e in state["errors"]), maxlen=self.window)
        self.last_reference = float(state["last_reference"])


class QBudgetController:
    """The Simmer Q-learning controller over discrete budget levels (``q_simmer_agent.py``).

    The state is the index of the current level, the actions ``-1, 0, +1`` move one level (at
    the ends, clipped). The reward of an action depends on ``y_f - level``, the filtered
    observed cost minus the current level:

    * within ``±reward_thresh``: rewards (-1, 1, 0.5) for the actions (-1, 0, +1);
    * ``≤ -reward_thresh`` (under budget): (-1, 0.5, 2);
    * ``≥ reward_thresh`` (over budget): (2, -1, -1);

    so the budget goes up while the agent spends less than it, down while it spends more.

    Args:
        levels: the budget levels (sorted here).
        lr: Q-learning rate (the original: 0.01).
        gamma: discount of the controller's return (0.99).
        epsilon_greedy: probability of the greedy action (0.95); otherwise uniform.
        polyak: weight of the new observation in its low-pass filter (0.01), in (0, 1].
        reward_thresh: half-width of the "on budget" band; default half the spacing of the
            levels (the original's Pendulum setting: 2 for levels 4 apart).
        initial_level: index of the starting level (0, the lowest, as the original).
        seed: seed of the controller's own generator (exploration).

    Examples:
        >>> q = QBudgetController([10.0, 20.0, 30.0], seed=0)
        >>> q.budget
        10.0
        >>> q.step(0.0, progress_remaining=1.0) in (10.0, 20.0)
        True
    """

    ACTIONS = (-1, 0, 1)
    #: rewards of the actions (-1, 0, +1): within the band, under budget, over budget
    REWARDS = np.array([[-1.0, 1.0, 0.5], [-1.0, 0.5, 2.0], [2.0, -1.0, -1.0]])

    def __init__(
        self,
        levels: Sequence[float] | np.ndarray,
        *,
        lr: float = 0.01,
        gamma: float = 0.99,
        epsilon_greedy: float = 0.95,
        polyak: float = 0.01,
        reward_thresh: float | None = None,
        initial_level: int = 0,
        seed: int | None = None,
    ) -> None:
        src = "QBudgetController"
        self.levels = budget_levels(levels, None, src)
        self.lr = _number("lr", lr, src, low=0.0)
        self.gamma = _number("gamma", gamma, src, low=0.0)
        self.epsilon_greedy = _number("epsilon_greedy", epsilon_greedy, src, low=0.0)
        self.polyak = _number("polyak", polyak, src)
        for name, v, ok in (
            ("lr", self.lr, self.lr <= 1.0),
            ("gamma", self.gamma, self.gamma <= 1.0),
            ("epsilon_greedy", self.epsilon_greedy, self.epsilon_greedy <= 1.0),
            ("polyak", self.polyak, 0.0 < self.polyak <= 1.0),
        ):
            if not ok:
                raise ConfigError(
                    name, v, "expected a number in [0, 1] ((0, 1] for polyak)", source=src
                )
        if reward_thresh is None:
            spacing = np.diff(self.levels)
            reward_thresh = 0.5 * float(spacing.min()) if spacing.size else 1.0
        self.reward_thresh = _number("reward_thresh", reward_thresh, src, low=0.0)
        check_int("initial_level", initial_level, minimum=0, source=src, allow_numpy=True)
        initial_level = int(initial_level)
        if initial_level >= len(self.levels):
            raise ConfigError(
                "initial_level", initial_level, f"expected < {len(self.levels)}", source=src
            )
        self.q_table = np.zeros((len(self.levels), 3))
        self.level = initial_level
        self.filtered_cost = 0.0
        self.last_action = 0
        try:
            self.rng = np.random.default_rng(seed)
        except (TypeError, ValueError) as exc:  # -1: 'expected non-negative integer'
            reason = f"expected None or an int >= 0 (numpy: {exc})"
            raise ConfigError("seed", shown(seed), reason, source=src) from None

    @property
    def budget(self) -> float:
        """The budget in force now: the current level."""
        return float(self.levels[self.level])

    def reward(self, level: int, action: int, observed: float) -> float:
        """The controller's reward of ``action`` at ``level`` given the filtered observation."""
        gap = observed - float(self.levels[level])
        row = 0 if -self.reward_thresh < gap < self.reward_thresh else (1 if gap < 0 else 2)
        return float(self.REWARDS[row, self.ACTIONS.index(action)])

    def choose(self, level: int) -> int:
        """ε-greedy action at ``level`` (greedy ties go to the first action, as ``argmax``)."""
        if self.rng.random() < self.epsilon_greedy:
            return self.ACTIONS[int(np.argmax(self.q_table[level]))]
        return self.ACTIONS[int(self.rng.integers(len(self.ACTIONS)))]

    def step(self, observed_cost: float, progress_remaining: float = 1.0) -> float:
        """One epoch: filter the observation, act, learn; returns the next budget."""
        del progress_remaining  # the Q controller has no schedule
        y = self.polyak * float(observed_cost) + (1.0 - self.polyak) * self.filtered_cost
        self.filtered_cost = y
        level = self.level
        action = self.choose(level)
        reward = self.reward(level, action, y)
        nxt = int(np.clip(level + action, 0, len(self.levels) - 1))
        a = self.ACTIONS.index(action)
        target = reward + self.gamma * float(np.max(self.q_table[nxt]))
        self.q_table[level, a] = (1.0 - self.lr) * self.q_table[level, a] + self.lr * target
        self.level, self.last_action = nxt, action
        return self.budget

    def state_dict(self) -> dict[str, Any]:
        """The controller's state, its generator's included."""
        return {
            "q_table": self.q_table.copy(),
            "level": self.level,
            "filtered_cost": self.filtered_cost,
            "last_action": self.last_action,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.q_table = np.array(state["q_table"], dtype=np.float64)
        self.level = int(state["level"])
        self.filtered_cost = float(state["filtered_cost"])
        self.last_action = int(state["last_action"])
        self.rng.bit_generator.state = state["rng"]
