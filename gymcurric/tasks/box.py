"""A continuous parameter box, bucketed into cells for scoring (see :mod:`.spaces`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks.spaces import (
    ID_LIMIT,
    TaskSpace,
    Validator,
    check_json_safe,
    check_max_retries,
    copy_task,
    set_path,
)

__all__ = ["BoxTaskSpace"]


class BoxTaskSpace(TaskSpace):
    """A continuous parameter box, split into ``bins`` cells per dimension for scoring.

    The curriculum scores cells (keys ``0 .. n_cells - 1``). Each sampled task id is
    ``cell + n_cells * variant`` with a random variant, and its parameters are drawn uniformly
    inside the cell with ``default_rng([seed, task_id])``: learning progress is pooled per
    neighbourhood while every episode sees fresh parameters (the regions of ALP-GMM-style
    curricula, fixed in advance).

    An *integer* dimension (``integers``) takes the integers ``low .. high`` (both included),
    split as evenly as they go into its ``bins`` cells, and draws one of its cell's integers:
    so a curriculum can pool over neighbouring goal distances or hazard counts. ``base`` holds
    the parameters every task shares; dotted names (``"agent.speed"``) write nested keys.

    Args:
        low: lower bounds, one per dimension.
        high: upper bounds (``> low``).
        bins: cells per dimension (an int for all, or one per dimension).
        names: parameter names (default ``x0, x1, ...``).
        seed: seed of the per-id generators.
        validator: optional ``validator(task) -> bool``; rejected draws are redrawn in the cell.
        max_retries: redraws allowed per task id before :class:`TaskError` is raised.
        integers: names of the integer dimensions (their ``low``/``high`` must be integers, with
            at least one integer per cell).
        base: parameters every task starts from (JSON-safe), optional.

    Examples:
        >>> space = BoxTaskSpace([0.0], [1.0], bins=4, names=["friction"])
        >>> space.size, space.key(4 * 10 + 3)
        (4, 3)
        >>> grid = BoxTaskSpace([2, 0.0], [36, 0.3], bins=(5, 2), integers=["goal_distance"],
        ...                     names=["goal_distance", "slip_prob"], base={"size": 20})
        >>> grid.cell_bounds(0)[0].tolist(), grid.cell_bounds(0)[1].tolist()
        ([2.0, 0.0], [8.0, 0.15])
        >>> task = grid.task(3)
        >>> type(task["goal_distance"]).__name__, task["size"]
        ('int', 20)
    """

    def __init__(
        self,
        low: Sequence[float] | np.ndarray,
        high: Sequence[float] | np.ndarray,
        bins: int | Sequence[int] = 10,
        *,
        names: Sequence[str] | None = None,
        seed: int = 0,
        validator: Validator | None = None,
        max_retries: int = 10,
        integers: Sequence[str] = (),
        base: Mapping[str, Any] | None = None,
    ) -> None:
        src = "BoxTaskSpace"
        lo = np.atleast_1d(np.asarray(low, dtype=np.float64))
        hi = np.atleast_1d(np.asarray(high, dtype=np.float64))
        if lo.ndim != 1 or lo.size == 0 or lo.shape != hi.shape:
            raise ConfigError(
                "low/high",
                (low, high),
                "expected two equal-length non-empty vectors (empty task space)",
                source=src,
            )
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
            raise ConfigError(
                "high", high, f"expected finite bounds with high > low={low}", source=src
            )
        b = np.broadcast_to(np.asarray(bins), lo.shape)
        if not np.issubdtype(b.dtype, np.integer) or np.any(b < 1):
            raise ConfigError("bins", bins, "expected ints >= 1", source=src)
        names = [f"x{i}" for i in range(lo.size)] if names is None else [str(n) for n in names]
        if len(names) != lo.size or len(set(names)) != len(names):
            raise ConfigError("names", names, f"expected {lo.size} distinct names", source=src)
        check_int("seed", seed, minimum=0, source=src)
        if isinstance(integers, str) or not all(n in names for n in integers):
            raise ConfigError("integers", integers, f"expected names among {names}", source=src)
        is_int = np.array([n in integers for n in names])
        for i in np.flatnonzero(is_int):
            count = hi[i] - lo[i] + 1
            if lo[i] != math.floor(lo[i]) or hi[i] != math.floor(hi[i]) or count < b[i]:
                raise ConfigError(
                    f"low/high of {names[i]!r}",
                    (float(lo[i]), float(hi[i])),
                    f"an integer dimension needs integer bounds holding at least its {int(b[i])} "
                    "bins",
                    source=src,
                )
        if base is not None and not isinstance(base, Mapping):
            raise ConfigError("base", base, "expected a mapping of fixed parameters", source=src)
        self._base = copy.deepcopy(dict(base or {}))
        check_json_safe(self._base, "base")
        self.integers = [n for n in names if n in integers]
        self._is_int = is_int
        self.low, self.high = lo, hi
        self.bins = tuple(int(x) for x in b)
        self.names = names
        self.seed = seed
        self.validator = validator
        self.max_retries = check_max_retries(max_retries, src)
        self._n = int(np.prod(self.bins))
        self.size = self._n
        self._variants = ID_LIMIT // self._n

    @classmethod
    def from_space(
        cls, space: gym.spaces.Box, bins: int | Sequence[int] = 10, **kwargs: Any
    ) -> BoxTaskSpace:
        """Build from a flat :class:`gymnasium.spaces.Box` with finite bounds."""
        return cls(space.low.ravel(), space.high.ravel(), bins, **kwargs)

    @property
    def has_variants(self) -> bool:
        """True: many task ids map to each cell."""
        return True

    @property
    def key_modulus(self) -> int:
        """The number of cells: a task id's cell is the id modulo this."""
        return self._n

    def key(self, task_id: int) -> int:
        """The cell of ``task_id``."""
        return task_id % self._n

    def expand(self, keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Attach a random variant to each sampled cell."""
        out: np.ndarray = keys + self._n * rng.integers(self._variants, size=keys.shape)
        return out

    def cell_bounds(self, cell: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(low, high)`` of a cell; an integer dimension's first and last integer."""
        idx = np.asarray(np.unravel_index(cell, self.bins), dtype=np.float64)
        bins = np.asarray(self.bins, dtype=np.float64)
        width = (self.high - self.low) / bins
        lo = self.low + idx * width
        hi = lo + width
        if self._is_int.any():
            count = self.high - self.low + 1.0  # integers per dimension
            first = self.low + np.floor(idx * count / bins)
            last = self.low + np.floor((idx + 1.0) * count / bins) - 1.0
            lo = np.where(self._is_int, first, lo)
            hi = np.where(self._is_int, last, hi)
        return lo, hi

    def generate(self, task_id: int) -> tuple[dict[str, Any], int]:
        """Draw the parameters of ``task_id`` inside its cell, redrawing rejected ones."""
        tid = self.check_id(task_id)
        lo, hi = self.cell_bounds(self.key(tid))
        rng = np.random.default_rng([self.seed, tid])
        task: dict[str, Any] = {}
        integer = self._is_int
        hi = np.where(integer, hi + 1.0, hi)  # uniform in [first, last + 1), floored
        for attempt in range(self.max_retries + 1):
            x = rng.uniform(lo, hi)
            task = copy_task(self._base)
            for n, v, whole in zip(self.names, x.tolist(), integer.tolist(), strict=True):
                set_path(task, n, math.floor(v) if whole else float(v))
            if self.validator is None or self.validator(task):
                return task, attempt
        raise TaskError(
            "task",
            task,
            f"the validator rejected {self.max_retries + 1} draws in cell {self.key(tid)} "
            f"(bounds {lo.tolist()}..{hi.tolist()}); relax the validator or report the task "
            "with Curriculum.mark_invalid",
            source="BoxTaskSpace",
        )

    def spec(self) -> dict[str, Any]:
        """Bounds, bins, names, seed, retry budget, and the integer dimensions and base if any."""
        out: dict[str, Any] = {
            "type": "BoxTaskSpace",
            "low": self.low.tolist(),
            "high": self.high.tolist(),
            "bins": list(self.bins),
            "names": self.names,
            "seed": self.seed,
            "max_retries": self.max_retries,
        }
        if self.integers:  # only when used, so that states saved before them still match
            out["integers"] = list(self.integers)
        if self._base:
            out["base"] = copy_task(self._base)
        return out
