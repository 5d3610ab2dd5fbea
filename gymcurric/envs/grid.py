"""``gymcurric/HazardGrid-v0``: a discrete hazard grid, the fast test-bed twin of HazardNav.

An agent walks an NxN grid to a goal cell; hazard cells cost 1.0 per step spent on them. Same
task mechanics and info keys as :mod:`gymcurric.envs.hazard_nav`, with integer state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from gymcurric.envs import _render
from gymcurric.envs._task_spec import TaskEnv, TaskParam, TaskSpec, TaskValue, check_number
from gymcurric.errors import ConfigError

__all__ = ["HazardGridEnv"]

_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # up, right, down, left (row, col)
_START_TRIES = 16  # random starts tried before falling back to a corner
_HAZARD, _GOAL, _WALL = 1.0, 0.5, -1.0  # codes in the local view


class HazardGridEnv(TaskEnv[np.int64]):
    """Reach the goal cell, avoid hazard cells: an NxN grid with a fixed-size observation.

    Actions, ``Discrete(4)``: 0 up, 1 right, 2 down, 3 left; a move into a wall stays put. With
    the task's ``slip_prob`` the action is replaced by a uniformly random one.

    Observation, ``Box(float32)`` of shape ``(4 + (2·view_radius + 1)²,)`` whatever the grid size:

    ======== ============================================================================
    index    meaning
    ======== ============================================================================
    0, 1     agent row, column / (size - 1), in [0, 1]
    2, 3     (goal - agent) row, column / (size - 1), in [-1, 1]
    4 …      the cells around the agent, row-major, the agent at the centre: 0 free,
             1 hazard, 0.5 goal, -1 outside the grid
    ======== ============================================================================

    Reward: ``(previous - current Manhattan goal distance) · reward_distance`` plus
    ``reward_goal`` on reaching the goal, which terminates the episode; truncation after the
    task's ``max_steps``.

    Task parameters (see :attr:`TASK_SPEC`; constructor kwargs set the default task, a partial
    task passed to ``reset`` is filled from it, ``reset()`` without a task keeps the current
    one): ``size``, ``goal_distance`` (exact Manhattan start-goal distance), ``num_hazards``,
    ``hazard_placement`` (``"random"``, or ``"between"``: inside the start-goal bounding box
    first, then as near to it as possible), ``max_steps``, ``slip_prob``.

    Inspection: :attr:`task`, :attr:`default_task`, :meth:`task_spec`, :meth:`validate_task`,
    :attr:`layout` (cells), :meth:`set_agent_cell` (for tests and probes).

    Info keys: ``cost`` and ``cost_hazards`` (1.0 on a hazard cell, step only), ``is_success``
    and ``caption`` (e.g. ``"A hazard blocks the path to the goal. The goal is far away."``,
    where blocked means every shortest path crosses a hazard), at reset and every step.

    Args:
        render_mode: ``None`` or ``"rgb_array"``.
        render_size: side of the rendered square frame in pixels (at least 32).
        view_radius: cells seen on each side of the agent (fixes the observation size).
        reward_distance: reward per cell of progress towards the goal.
        reward_goal: bonus for reaching the goal.
        **task: the default task's parameters (see above).

    Examples:
        >>> env = HazardGridEnv(size=6)
        >>> obs, info = env.reset(seed=0, options={"task": {"num_hazards": 0}})
        >>> obs.shape, env.action_space
        ((29,), Discrete(4))
        >>> _, _, _, _, info = env.step(1)
        >>> info["cost"], info["caption"]
        (0.0, 'The path to the goal is clear. The goal is far away.')
    """

    TASK_SPEC = TaskSpec(
        {
            "size": TaskParam("int", 8, 3, 32, doc="cells per side"),
            "goal_distance": TaskParam(
                "int", 6, 1, 62, doc="Manhattan start-goal distance (<= 2·(size - 1))"
            ),
            "num_hazards": TaskParam("int", 6, 0, 1022, doc="hazard cells (<= size² - 2)"),
            "hazard_placement": TaskParam(
                "choice",
                "random",
                choices=("random", "between"),
                doc="random | between (in the start-goal box first)",
            ),
            "max_steps": TaskParam("int", 100, 1, 100_000, doc="steps before truncation"),
            "slip_prob": TaskParam("float", 0.0, 0.0, 1.0, doc="chance of a random action"),
        }
    )

    def __init__(
        self,
        *,
        render_mode: str | None = None,
        render_size: int = 64,
        view_radius: int = 2,
        reward_distance: float = 0.1,
        reward_goal: float = 1.0,
        **task: Any,
    ) -> None:
        src = "HazardGridEnv(...)"
        self.view_radius = int(check_number("view_radius", view_radius, "int", 0, 8, source=src))
        self.reward_distance = check_number(
            "reward_distance", reward_distance, "float", -1e6, 1e6, source=src
        )
        self.reward_goal = check_number("reward_goal", reward_goal, "float", -1e6, 1e6, source=src)
        self._init_task(task, render_mode=render_mode, render_size=render_size, min_render_size=32)
        self._width = 2 * self.view_radius + 1
        self.action_space = gym.spaces.Discrete(4)
        dim = 4 + self._width**2
        low = np.array([0, 0, -1, -1] + [-1] * (dim - 4), dtype=np.float32)
        self.observation_space = gym.spaces.Box(low, np.ones_like(low), dtype=np.float32)
        self._row = self._col = self._goal_row = self._goal_col = self._steps = 0

    def _check_task(
        self, task: Mapping[str, TaskValue], *, error: type[ConfigError], source: str
    ) -> None:
        size = int(task["size"])
        if int(task["goal_distance"]) > 2 * (size - 1):
            raise error(
                "goal_distance",
                task["goal_distance"],
                f"must be <= 2·(size - 1) = {2 * (size - 1)} for size={size}",
                source=source,
            )
        if int(task["num_hazards"]) > size * size - 2:
            raise error(
                "num_hazards",
                task["num_hazards"],
                f"must be <= size² - 2 = {size * size - 2} (start and goal stay free) "
                f"for size={size}",
                source=source,
            )

    def _sample_layout(
        self, task: Mapping[str, TaskValue]
    ) -> tuple[int, int, int, int, NDArray[np.bool_]]:
        """Start cell, goal cell and hazard mask: exact, no rejection loop that can fail."""
        rng, n, d = self.np_random, int(task["size"]), int(task["goal_distance"])
        offsets = np.arange(-d, d + 1)
        ring = np.concatenate(
            [  # every (dr, dc) with |dr| + |dc| = d
                np.stack([offsets, d - np.abs(offsets)], 1),
                np.stack([offsets, np.abs(offsets) - d], 1),
            ]
        )
        ring = np.unique(ring, axis=0)
        for attempt in range(_START_TRIES + 1):
            if attempt < _START_TRIES:
                row, col = (int(v) for v in rng.integers(0, n, 2))
            else:  # a corner always has cells at any distance <= 2·(n - 1)
                row, col = ((n - 1) * int(v) for v in rng.integers(0, 2, 2))
            goals = ring + np.array([row, col])
            goals = goals[((goals >= 0) & (goals < n)).all(axis=1)]
            if len(goals):
                goal_row, goal_col = (int(v) for v in goals[rng.integers(len(goals))])
                break
        cells = np.arange(n * n)
        free = cells[(cells != row * n + col) & (cells != goal_row * n + goal_col)]
        k = int(task["num_hazards"])
        if task["hazard_placement"] == "between":
            r, c = np.divmod(free, n)
            gap = np.maximum(0, np.maximum(min(row, goal_row) - r, r - max(row, goal_row)))
            gap += np.maximum(0, np.maximum(min(col, goal_col) - c, c - max(col, goal_col)))
            chosen = free[np.argsort(gap + rng.uniform(0.0, 0.5, len(free)), kind="stable")[:k]]
        else:
            chosen = rng.choice(free, k, replace=False)
        hazard = np.zeros(n * n, dtype=bool)
        hazard[chosen] = True
        return row, col, goal_row, goal_col, hazard.reshape(n, n)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; ``options={"task": {...}}`` sets (part of) the task.

        Raises:
            TaskError: the task has an unknown key or a bad value; the env keeps its task.
        """
        super().reset(seed=seed)
        task = self._task_from_options(options)
        row, col, goal_row, goal_col, hazard = self._sample_layout(task)
        self._task = task
        n, v = int(task["size"]), self.view_radius
        self._n, self._max_steps = n, int(task["max_steps"])
        self._slip = float(task["slip_prob"])
        self._row, self._col, self._goal_row, self._goal_col = row, col, goal_row, goal_col
        self._hazard = hazard
        self._hazard_flat: list[bool] = hazard.ravel().tolist()
        # -1 = unknown; filled on demand by _clear_path (amortised O(cells) per episode).
        self._clear: list[int] = [-1] * (n * n)
        padded = np.full((n + 2 * v, n + 2 * v), _WALL, dtype=np.float32)
        padded[v : v + n, v : v + n] = np.where(hazard, _HAZARD, 0.0)
        padded[v + goal_row, v + goal_col] = _GOAL
        self._padded = padded
        self._inv = 1.0 / (n - 1)
        self._steps = 0
        self._background: NDArray[np.uint8] | None = None
        self._ready = True
        self._update()
        return self._observe(), {"is_success": False, "caption": self._caption}

    def step(
        self, action: np.int64 | int
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        """Move one cell; see the class docstring for reward, cost and info."""
        a = int(action)
        if not 0 <= a < 4:
            raise ValueError(f"HazardGridEnv.step: action must be in 0..3, got {action!r}")
        if self._slip and self.np_random.random() < self._slip:
            a = int(self.np_random.integers(4))
        previous = self._distance
        dr, dc = _MOVES[a]
        row, col, n = self._row + dr, self._col + dc, self._n
        if 0 <= row < n and 0 <= col < n:
            self._row, self._col = row, col
        self._update()
        reward = (previous - self._distance) * self.reward_distance
        terminated = self._distance == 0
        if terminated:
            reward += self.reward_goal
        self._steps += 1
        cost = 1.0 if self._inside else 0.0
        info = {
            "cost": cost,
            "cost_hazards": cost,
            "is_success": terminated,
            "caption": self._caption,
        }
        return self._observe(), reward, terminated, self._steps >= self._max_steps, info

    def _update(self) -> None:
        """Recompute goal distance, hazard contact and caption for the current cell."""
        row, col, n, hazard = self._row, self._col, self._n, self._hazard_flat
        dr, dc = self._goal_row - row, self._goal_col - col
        self._distance = distance = abs(dr) + abs(dc)
        self._inside = inside = hazard[row * n + col]
        if distance == 0:
            self._caption = _render.SUCCESS_CAPTION
            return
        ahead = close = False
        for mr, mc in _MOVES:
            r, c = row + mr, col + mc
            if 0 <= r < n and 0 <= c < n and hazard[r * n + c]:
                close = True
                if abs(dr - mr) + abs(dc - mc) < distance:
                    ahead = True
        if inside:
            clause = _render.INSIDE
        elif ahead:
            clause = _render.CLOSE_AHEAD
        elif close:
            clause = _render.CLOSE_BY
        else:
            clause = _render.CLEAR if self._clear_path(row, col) else _render.BLOCKED
        goal = _render.GOAL_NEAR if distance <= 2 else _render.GOAL_FAR
        self._caption = _render.CAPTIONS[clause][goal]

    def _clear_path(self, row: int, col: int) -> bool:
        """Whether a shortest path from (row, col) to the goal avoids every hazard (memoised)."""
        idx = row * self._n + col
        known = self._clear[idx]
        if known >= 0:
            return bool(known)
        gr, gc = self._goal_row, self._goal_col
        if self._hazard_flat[idx]:
            clear = False
        elif row == gr and col == gc:
            clear = True
        else:
            clear = (row != gr and self._clear_path(row + (1 if gr > row else -1), col)) or (
                col != gc and self._clear_path(row, col + (1 if gc > col else -1))
            )
        self._clear[idx] = int(clear)
        return clear

    def _observe(self) -> NDArray[np.float32]:
        row, col, inv, w = self._row, self._col, self._inv, self._width
        obs = np.empty(4 + w * w, dtype=np.float32)
        obs[:4] = (row * inv, col * inv, (self._goal_row - row) * inv, (self._goal_col - col) * inv)
        obs[4:].reshape(w, w)[...] = self._padded[row : row + w, col : col + w]
        return obs

    @property
    def layout(self) -> dict[str, Any]:
        """The episode's cells as JSON-safe data: ``agent``, ``goal``, ``hazards`` [row, col]."""
        rows, cols = np.nonzero(self._hazard)
        return {
            "agent": [self._row, self._col],
            "goal": [self._goal_row, self._goal_col],
            "hazards": [[int(r), int(c)] for r, c in zip(rows, cols, strict=True)],
        }

    def set_agent_cell(self, row: int, col: int) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Move the agent to a cell (for tests, probes and demos; not a step).

        Returns:
            The observation and the info (``is_success``, ``caption``) there, as ``reset`` does.

        Raises:
            ConfigError: the cell is outside the grid.
        """
        self._require_reset("set_agent_cell")
        src, last = "HazardGridEnv.set_agent_cell", self._n - 1
        row = int(check_number("row", row, "int", 0, last, source=src))
        col = int(check_number("col", col, "int", 0, last, source=src))
        self._row, self._col = row, col
        self._update()
        return self._observe(), {"is_success": self._distance == 0, "caption": self._caption}

    def _render_frame(self) -> NDArray[np.uint8]:
        if self._background is None:
            self._edges = edges = _render.cell_edges(self._n, self.render_size)
            cells = np.empty((self._n, self._n, 3), dtype=np.uint8)
            cells[:] = _render.BACKGROUND
            cells[self._hazard] = _render.HAZARD
            cells[self._goal_row, self._goal_col] = _render.GOAL
            counts = np.diff(edges)
            self._background = np.repeat(np.repeat(cells, counts, axis=0), counts, axis=1)
        frame, edges = self._background.copy(), self._edges
        # The agent is an inset square, so the colour of the cell under it stays visible.
        r0, r1, c0, c1 = (
            edges[self._row],
            edges[self._row + 1],
            edges[self._col],
            edges[self._col + 1],
        )
        inset = (r1 - r0) // 4
        colour = _render.AGENT_IN_HAZARD if self._inside else _render.AGENT
        frame[r0 + inset : r1 - inset, c0 + inset : c1 - inset] = colour
        return frame
