"""``gymcurric/HazardNav-v0``: 2-D continuous hazard navigation in pure numpy.

A point agent in a square arena must reach a goal disc while avoiding circular hazards, a small
Safety-Gymnasium *Goal* task that steps tens of thousands of times per second. Every episode's
layout comes from a task dict passed as ``reset(options={"task": {...}})``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from gymcurric.envs import _render
from gymcurric.envs._task_spec import TaskEnv, TaskParam, TaskSpec, TaskValue, check_number
from gymcurric.errors import ConfigError, TaskError

__all__ = ["HazardNavEnv"]

_EDGE_MARGIN = 0.1  # start and goal centres keep this far from the walls
_START_CLEARANCE = 0.1  # gap between the start point and any hazard's edge
_RING_GAP = 0.05  # gap between the goal disc and a ring of hazards around it
_CLOSE = 0.3  # a hazard edge nearer than this is "close" in captions
_GOAL_CLOSE = 0.5  # a goal edge nearer than this is "close ahead" in captions
_COS_AHEAD = math.cos(math.pi / 4)  # "ahead" = within 45° of the direction to the goal
_LAYOUT_TRIES = 10  # start/goal draws per reset before a task is declared impossible
_HAZARD_BATCHES = 6  # candidate batches per hazard per layout; "between"/"ring" widen each time
_BATCH = 64  # candidates drawn at once per batch
_AGENT_DRAW_RADIUS = 0.08
_TWO_PI = 2.0 * math.pi


class HazardNavEnv(TaskEnv[NDArray[np.float32]]):
    """Reach the goal, stay out of hazards: a point agent in a square arena, pure numpy.

    Dynamics: velocity control with a little inertia. The action (``Box(-1, 1, (2,))``, clipped
    to the unit disc) is a target velocity in units of ``agent_speed`` per step;
    ``v ← inertia·v + (1 - inertia)·target``, the agent moves by ``v`` and stops at the walls.

    Observation, ``Box(float32)`` of shape ``(7 + lidar_bins,)`` whatever the hazard count, all
    in world axes (the agent has no heading):

    ======== ============================================================================
    index    meaning
    ======== ============================================================================
    0, 1     agent velocity / ``agent_speed``, in [-1, 1]
    2, 3     unit vector from the agent to the goal centre
    4        goal distance ``d`` squashed as ``d / (1 + d)``, in [0, 1)
    5, 6     agent position / (``arena_size`` / 2), in [-1, 1] (walls are at ±1)
    7 …      hazard lidar: bin ``k`` covers angles ``[2πk/N, 2π(k+1)/N)`` counter-clockwise
             from +x; value ``1 - edge_distance / lidar_range`` of the nearest hazard whose
             centre falls in the bin, clipped to [0, 1] (1 inside a hazard)
    ======== ============================================================================

    Reward, as Safety-Gymnasium's Goal task: ``(previous - current goal distance) ·
    reward_distance``, plus ``reward_goal`` on reaching the goal, which terminates the episode.
    The episode is truncated after the task's ``max_steps`` steps.

    Task parameters (see :attr:`TASK_SPEC`; constructor kwargs of the same names set the
    default task, a partial task passed to ``reset`` is filled from it, ``reset()`` without a
    task keeps the current one): ``arena_size``, ``goal_distance`` (exact start-goal distance),
    ``goal_radius``, ``num_hazards``, ``hazard_radius``, ``hazard_placement`` (``"random"``;
    ``"between"``: hazards cross the straight start-goal path, and crowd around it once it is
    full; ``"ring"``: hazards on a circle around the goal, then on wider circles),
    ``agent_speed``, ``max_steps``. A task whose hazards cannot be placed (without overlapping
    each other, the goal disc, or the start) raises :class:`~gymcurric.errors.TaskError`.

    Inspection: :attr:`task`, :attr:`default_task`, :meth:`task_spec`, :meth:`validate_task`,
    :attr:`layout` (positions), :meth:`set_agent_position` (for tests and probes).

    Info keys: ``cost`` and ``cost_hazards`` (1.0 while inside a hazard, else 0.0; step only),
    ``is_success`` (bool) and ``caption`` (a deterministic sentence describing the state, e.g.
    ``"A hazard is close ahead. The goal is far away."``, where "ahead" means towards the
    goal, "close" within 0.3 of a hazard's edge), at reset and every step.

    Args:
        render_mode: ``None`` or ``"rgb_array"``.
        render_size: side of the rendered square frame in pixels.
        lidar_bins: number of hazard-lidar bins (fixes the observation size).
        lidar_range: distance from a hazard's edge at which the lidar starts to see it.
        inertia: share of the previous velocity kept each step, in [0, 0.99].
        reward_distance: scale of the dense goal-progress reward.
        reward_goal: bonus for reaching the goal.
        **task: the default task's parameters (see above).

    Examples:
        >>> env = HazardNavEnv(num_hazards=2)
        >>> obs, info = env.reset(seed=0, options={"task": {"hazard_placement": "between"}})
        >>> obs.shape, env.task["num_hazards"], env.task["hazard_placement"]
        ((23,), 2, 'between')
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> sorted(info)
        ['caption', 'cost', 'cost_hazards', 'is_success']
    """

    TASK_SPEC = TaskSpec(
        {
            "arena_size": TaskParam("float", 4.0, 1.0, 20.0, doc="side of the square arena"),
            "goal_distance": TaskParam(
                "float", 2.0, 0.1, 20.0, doc="start-goal distance (≤ arena_size - 0.2)"
            ),
            "goal_radius": TaskParam("float", 0.3, 0.05, 2.0, doc="radius of the goal disc"),
            "num_hazards": TaskParam("int", 8, 0, 32, doc="number of hazards"),
            "hazard_radius": TaskParam("float", 0.25, 0.05, 2.0, doc="radius of every hazard"),
            "hazard_placement": TaskParam(
                "choice",
                "random",
                choices=("random", "between", "ring"),
                doc="random | between (across the start-goal path) | ring (around the goal)",
            ),
            "agent_speed": TaskParam("float", 0.1, 0.01, 1.0, doc="top speed, units per step"),
            "max_steps": TaskParam("int", 200, 1, 100_000, doc="steps before truncation"),
        }
    )

    def __init__(
        self,
        *,
        render_mode: str | None = None,
        render_size: int = 64,
        lidar_bins: int = 16,
        lidar_range: float = 1.5,
        inertia: float = 0.5,
        reward_distance: float = 1.0,
        reward_goal: float = 1.0,
        **task: Any,
    ) -> None:
        src = "HazardNavEnv(...)"
        self.lidar_bins = int(check_number("lidar_bins", lidar_bins, "int", 1, 360, source=src))
        self.lidar_range = check_number("lidar_range", lidar_range, "float", 1e-3, 1e6, source=src)
        self.inertia = check_number("inertia", inertia, "float", 0.0, 0.99, source=src)
        self.reward_distance = check_number(
            "reward_distance", reward_distance, "float", -1e6, 1e6, source=src
        )
        self.reward_goal = check_number("reward_goal", reward_goal, "float", -1e6, 1e6, source=src)
        self._init_task(task, render_mode=render_mode, render_size=render_size)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        obs_low = np.array([-1, -1, -1, -1, 0, -1, -1] + [0] * self.lidar_bins, dtype=np.float32)
        self.observation_space = gym.spaces.Box(obs_low, np.ones_like(obs_low), dtype=np.float32)
        self._bin_scale = self.lidar_bins / _TWO_PI
        # Episode state (set by reset): Python floats on the hot path.
        self._px = self._py = self._vx = self._vy = self._gx = self._gy = 0.0
        self._goal_dist = 0.0
        self._hazards: list[tuple[float, float]] = []
        self._steps = 0
        self._inside = self._success = False
        self._caption = ""
        self._background: NDArray[np.uint8] | None = None
        self._pixels: _render.PixelGrid | None = None

    # ---------------------------------------------------------------- task checks and layout
    def _check_task(
        self, task: Mapping[str, TaskValue], *, error: type[ConfigError], source: str
    ) -> None:
        arena, dist, goal_r = (
            float(task["arena_size"]),
            float(task["goal_distance"]),
            float(task["goal_radius"]),
        )
        n, r = int(task["num_hazards"]), float(task["hazard_radius"])
        if dist > arena - 2 * _EDGE_MARGIN:
            raise error(
                "goal_distance",
                task["goal_distance"],
                f"must be ≤ arena_size - {2 * _EDGE_MARGIN} = {arena - 2 * _EDGE_MARGIN:g} "
                f"for arena_size={arena:g}",
                source=source,
            )
        if dist <= goal_r:
            raise error(
                "goal_distance",
                task["goal_distance"],
                f"must be > goal_radius={goal_r:g}, or the episode starts on the goal",
                source=source,
            )
        if n and (2 * r >= arena or n * math.pi * r * r > 0.9 * arena * arena):
            raise error(
                "num_hazards",
                n,
                f"{n} hazards of hazard_radius={r:g} cannot fit without overlapping in an arena "
                f"of arena_size={arena:g}; use fewer or smaller hazards or a larger arena",
                source=source,
            )

    def _sample_layout(
        self, task: Mapping[str, TaskValue]
    ) -> tuple[float, float, float, float, NDArray[np.float64]]:
        """Start, goal and hazard centres for ``task``, by bounded rejection sampling."""
        rng = self.np_random
        half = float(task["arena_size"]) / 2
        lo, hi = -half + _EDGE_MARGIN, half - _EDGE_MARGIN
        dist = float(task["goal_distance"])
        for _ in range(_LAYOUT_TRIES):
            theta = rng.uniform(0.0, _TWO_PI)
            ex, ey = dist * math.cos(theta), dist * math.sin(theta)
            # Both ends inside [lo, hi]²; feasible for any theta as dist ≤ hi - lo (checked).
            ax = rng.uniform(max(lo, lo - ex), min(hi, hi - ex))
            ay = rng.uniform(max(lo, lo - ey), min(hi, hi - ey))
            hazards = self._place_hazards(task, ax, ay, ax + ex, ay + ey)
            if hazards is not None:
                return ax, ay, ax + ex, ay + ey, hazards
        n, r = task["num_hazards"], task["hazard_radius"]
        raise TaskError(
            "num_hazards",
            n,
            f"could not place {n} hazards of hazard_radius={r:g} with "
            f"hazard_placement={task['hazard_placement']!r} (goal_distance="
            f"{task['goal_distance']:g}, arena_size={task['arena_size']:g}) after "
            f"{_LAYOUT_TRIES} layouts; use fewer or smaller hazards, another placement or a "
            "larger arena",
            source="HazardNavEnv.reset",
        )

    def _place_hazards(
        self, task: Mapping[str, TaskValue], ax: float, ay: float, gx: float, gy: float
    ) -> NDArray[np.float64] | None:
        n, r = int(task["num_hazards"]), float(task["hazard_radius"])
        half, goal_r = float(task["arena_size"]) / 2, float(task["goal_radius"])
        placement, rng = task["hazard_placement"], self.np_random
        placed = np.empty((n, 2))
        sx, sy = gx - ax, gy - ay
        length = math.hypot(sx, sy)
        nx, ny = -sy / length, sx / length
        ring = goal_r + r + _RING_GAP
        for k in range(n):
            for spread in range(_HAZARD_BATCHES):
                if placement == "between":
                    # Centre within r of the path (the hazard crosses it); when the path is
                    # full, the band doubles in width.
                    w = r * 2**spread
                    t, u = rng.uniform(0.0, 1.0, _BATCH), rng.uniform(-w, w, _BATCH)
                    cx, cy = ax + t * sx + u * nx, ay + t * sy + u * ny
                elif placement == "ring":  # when a circle is full, the next one out
                    phi = rng.uniform(0.0, _TWO_PI, _BATCH)
                    rho = ring + 2 * r * spread
                    cx, cy = gx + rho * np.cos(phi), gy + rho * np.sin(phi)
                else:
                    cx, cy = rng.uniform(-half + r, half - r, (2, _BATCH))
                ok = (np.abs(cx) <= half - r) & (np.abs(cy) <= half - r)
                ok &= (cx - ax) ** 2 + (cy - ay) ** 2 >= (r + _START_CLEARANCE) ** 2
                ok &= (cx - gx) ** 2 + (cy - gy) ** 2 >= (r + goal_r) ** 2
                if k:
                    d2 = (cx[:, None] - placed[None, :k, 0]) ** 2 + (
                        cy[:, None] - placed[None, :k, 1]
                    ) ** 2
                    ok &= (d2 >= 4 * r * r).all(axis=1)
                hits = np.flatnonzero(ok)
                if hits.size:
                    placed[k] = cx[hits[0]], cy[hits[0]]
                    break
            else:
                return None
        return placed

    # ------------------------------------------------------------------------ Gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Start an episode; ``options={"task": {...}}`` sets (part of) the task.

        Raises:
            TaskError: the task has an unknown key, a bad value, or cannot be laid out; the env
                keeps its previous task.
        """
        super().reset(seed=seed)
        task = self._task_from_options(options)
        ax, ay, gx, gy, hazards = self._sample_layout(task)
        self._task = task
        self._half = float(task["arena_size"]) / 2
        self._speed = float(task["agent_speed"])
        self._goal_r = float(task["goal_radius"])
        self._max_steps = int(task["max_steps"])
        r = float(task["hazard_radius"])
        self._r, self._r2 = r, r * r
        self._reach2 = (r + self.lidar_range) ** 2
        self._hazard_xy = hazards
        self._hazards = [(float(x), float(y)) for x, y in hazards]
        self._px, self._py, self._gx, self._gy = ax, ay, gx, gy
        self._vx = self._vy = 0.0
        self._steps = 0
        self._success = False
        self._background = None
        self._ready = True
        obs = self._sense()
        return obs, {"is_success": False, "caption": self._caption}

    def step(
        self, action: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        """Move the agent one step; see the class docstring for reward, cost and info."""
        try:
            ax, ay = action.tolist() if isinstance(action, np.ndarray) else action
            ax, ay = float(ax), float(ay)
        except (TypeError, ValueError):
            raise ValueError(
                f"HazardNavEnv.step: expected 2 action values, got {action!r}"
            ) from None
        n2 = ax * ax + ay * ay
        if n2 != n2 or n2 == math.inf:
            raise ValueError(f"HazardNavEnv.step: action must be finite, got {action!r}")
        if n2 > 1.0:
            scale = 1.0 / math.sqrt(n2)
            ax *= scale
            ay *= scale
        keep, push = self.inertia, (1.0 - self.inertia) * self._speed
        vx = keep * self._vx + push * ax
        vy = keep * self._vy + push * ay
        px, py, half = self._px + vx, self._py + vy, self._half
        if px < -half or px > half:
            px = -half if px < 0.0 else half
            vx = 0.0
        if py < -half or py > half:
            py = -half if py < 0.0 else half
            vy = 0.0
        self._px, self._py, self._vx, self._vy = px, py, vx, vy
        previous = self._goal_dist
        obs = self._sense()
        reward = (previous - self._goal_dist) * self.reward_distance
        terminated = self._success
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
        return obs, reward, terminated, self._steps >= self._max_steps, info

    def _sense(self) -> NDArray[np.float32]:
        """Update goal distance, hazard contact, success and caption; return the observation."""
        px, py = self._px, self._py
        dx, dy = self._gx - px, self._gy - py
        d2 = dx * dx + dy * dy
        d = math.sqrt(d2)
        self._goal_dist = d
        r, r2, reach2, inv_range = self._r, self._r2, self._reach2, 1.0 / self.lidar_range
        bins, bin_scale = self.lidar_bins, self._bin_scale
        lidar = [0.0] * bins
        inside = ahead = close = blocked = False
        for hx, hy in self._hazards:
            ex, ey = hx - px, hy - py
            e2 = ex * ex + ey * ey
            if e2 < reach2:
                dist = math.sqrt(e2)
                edge = dist - r
                if edge <= 0.0:
                    inside, prox = True, 1.0
                else:
                    prox = 1.0 - edge * inv_range
                    if edge < _CLOSE:
                        close = True
                        if ex * dx + ey * dy > _COS_AHEAD * dist * d:
                            ahead = True
                b = int(math.atan2(ey, ex) * bin_scale + bins) % bins
                if prox > lidar[b]:
                    lidar[b] = prox
            if not blocked and d2 > 0.0:  # does the segment agent→goal pass within r?
                t = (ex * dx + ey * dy) / d2
                t = 0.0 if t < 0.0 else (1.0 if t > 1.0 else t)
                cx, cy = ex - t * dx, ey - t * dy
                blocked = cx * cx + cy * cy < r2
        self._inside = inside
        self._success = success = d <= self._goal_r
        if success:
            self._caption = _render.SUCCESS_CAPTION
        else:
            if inside:
                clause = _render.INSIDE
            elif ahead:
                clause = _render.CLOSE_AHEAD
            elif close:
                clause = _render.CLOSE_BY
            else:
                clause = _render.BLOCKED if blocked else _render.CLEAR
            goal = _render.GOAL_NEAR if d - self._goal_r < _GOAL_CLOSE else _render.GOAL_FAR
            self._caption = _render.CAPTIONS[clause][goal]
        inv_d = 1.0 / d if d > 0.0 else 0.0
        inv_s, inv_h = 1.0 / self._speed, 1.0 / self._half
        return np.array(
            [
                self._vx * inv_s,
                self._vy * inv_s,
                dx * inv_d,
                dy * inv_d,
                d / (1.0 + d),
                px * inv_h,
                py * inv_h,
                *lidar,
            ],
            dtype=np.float32,
        )

    # ------------------------------------------------------------------- inspection, render
    @property
    def layout(self) -> dict[str, Any]:
        """The episode's geometry as JSON-safe data: ``agent``, ``goal``, ``hazards`` (x, y)."""
        return {
            "agent": [self._px, self._py],
            "goal": [self._gx, self._gy],
            "hazards": [list(h) for h in self._hazards],
        }

    def set_agent_position(self, x: float, y: float) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Move the agent to ``(x, y)`` and stop it (for tests, probes and demos; not a step).

        Returns:
            The observation and the info (``is_success``, ``caption``) there, as ``reset`` does.

        Raises:
            ConfigError: ``(x, y)`` is not finite or lies outside the arena.
        """
        self._require_reset("set_agent_position")
        half, src = self._half, "HazardNavEnv.set_agent_position"
        x = check_number("x", x, "float", -half, half, source=src)
        y = check_number("y", y, "float", -half, half, source=src)
        self._px, self._py, self._vx, self._vy = float(x), float(y), 0.0, 0.0
        obs = self._sense()
        return obs, {"is_success": self._success, "caption": self._caption}

    def _render_frame(self) -> NDArray[np.uint8]:
        if self._background is None:
            size = self.render_size
            pixels = self._pixels
            if pixels is None or pixels.half != self._half:
                pixels = self._pixels = _render.PixelGrid(size, self._half)
            frame = np.empty((size, size, 3), dtype=np.uint8)
            frame[:] = _render.BACKGROUND
            frame[pixels.discs(self._hazard_xy, self._r)] = _render.HAZARD
            goal = np.array([[self._gx, self._gy]])
            frame[pixels.discs(goal, self._goal_r)] = _render.GOAL
            self._background = frame
        assert self._pixels is not None
        frame = self._background.copy()
        radius = max(_AGENT_DRAW_RADIUS, 1.5 * self._pixels.pixel)
        colour = _render.AGENT_IN_HAZARD if self._inside else _render.AGENT
        self._pixels.paint_disc(frame, self._px, self._py, radius, colour)
        return frame
