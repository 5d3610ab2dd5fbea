"""Task spaces: where tasks come from, and how a task regenerates from its integer id.

A task is a JSON-safe dict of env parameters. A task space maps an integer ``task_id`` to one
task, deterministically: the same space (same parameters and seed) gives the same dict for the
same id in every process and after a restart. Per-id randomness comes from
``np.random.default_rng([seed, task_id])``, never from Python's ``hash()`` (salted per process).

The curriculum scores *keys*. For most spaces a key is the task id itself; a
:class:`~gymcurric.tasks.box.BoxTaskSpace` scores cells of a continuous box, and its task ids
encode a cell plus a variant (``task_id = cell + n_cells * variant``) so that every episode of a
cell can draw fresh parameters inside it while learning progress is kept per cell.

Validation: a user ``validator(task) -> bool`` rejects tasks the env cannot run. A
:class:`FixedTaskSpace` checks every task at construction; a :class:`BucketedTaskSpace` retries
rejected draws with a new id (up to ``max_retries``, counted in the curriculum's
``curriculum/invalid_generated``); a box space redraws inside the cell. When retries
are exhausted a :class:`~gymcurric.errors.TaskError` says what was rejected.
"""

from __future__ import annotations

import copy
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gymcurric._checks import check_int, finite_reason, is_finite_number, shown
from gymcurric.errors import ConfigError, TaskError

__all__ = [
    "ID_LIMIT",
    "BucketedTaskSpace",
    "FixedTaskSpace",
    "Span",
    "TaskSpace",
    "Validator",
    "copy_task",
]

#: Task ids stay below 2**53 so that they are exact in float64 and JSON.
ID_LIMIT = 2**53

Validator = Callable[[dict[str, Any]], bool]


_SCALARS = frozenset((int, float, str, bool, type(None)))


def copy_task(task: Any) -> Any:
    """Copy JSON-safe data (dicts, lists, scalars) ~10x faster than ``copy.deepcopy``.

    Tasks are copied on every reset (the env and ``info["task"]`` each get their own), so this
    sits on the hot path; scalars are immutable and shared, containers are rebuilt.

    Examples:
        >>> t = {"num_hazards": 3, "extents": [0, 1]}
        >>> c = copy_task(t)
        >>> c == t, c["extents"] is t["extents"]
        (True, False)
    """
    if type(task) is dict:  # the common case: copy the dict, then rebuild nested containers
        out = task.copy()
        for k, v in out.items():
            if type(v) not in _SCALARS:
                out[k] = copy_task(v)  # replacing a key's value is safe while iterating
        return out
    if type(task) is list:  # likewise: scalar items are shared, with no call each
        items = task.copy()
        for i, v in enumerate(items):
            if type(v) not in _SCALARS:
                items[i] = copy_task(v)
        return items
    if isinstance(task, dict):
        return {k: copy_task(v) for k, v in task.items()}
    if isinstance(task, list):
        return [copy_task(v) for v in task]
    if isinstance(task, tuple):
        return tuple(copy_task(v) for v in task)
    return task


def check_json_safe(task: Any, where: str) -> None:
    """Raise :class:`TaskError` naming ``where`` if ``task`` does not survive ``json.dumps``."""
    try:
        json.dumps(task, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TaskError("task", task, f"{where} is not JSON-safe ({exc})") from exc


def check_max_retries(max_retries: int, source: str) -> int:
    """``max_retries`` checked to be an int ``>= 0`` (``ConfigError`` naming ``source``)."""
    check_int("max_retries", max_retries, minimum=0, source=source)
    return max_retries


@dataclass(frozen=True)
class Span:
    """A range of parameter values, sampled uniformly once per task id.

    Integer bounds give integers (both ends included); otherwise floats in ``[min, max)``.

    Examples:
        >>> space = BucketedTaskSpace({"hazards": [Span(1, 8)], "speed": [0.5, 1.0]}, seed=0)
        >>> space.task(7) == space.task(7)
        True
    """

    min: float
    max: float

    def __post_init__(self) -> None:
        for name in ("min", "max"):
            v = getattr(self, name)
            if not is_finite_number(v):  # an int too large for a float included
                reason = finite_reason(v, "expected a finite number")
                raise ConfigError(name, shown(v), reason, source="Span")
        if self.min > self.max:
            raise ConfigError("max", self.max, f"must be >= min ({self.min})", source="Span")

    @property
    def is_int(self) -> bool:
        """True when both bounds are ints (integer draws)."""
        return isinstance(self.min, int) and isinstance(self.max, int)

    def draw(self, rng: np.random.Generator) -> int | float:
        """Draw one value from the span."""
        if self.is_int:
            return int(rng.integers(int(self.min), int(self.max) + 1))
        return float(rng.uniform(self.min, self.max))


class TaskSpace(ABC):
    """Base class: a deterministic map from integer task ids to task dicts."""

    #: Number of keys of a finite space; ``None`` for an open-ended generator.
    size: int | None = None
    #: Validator applied to tasks (see the module docstring), or ``None``.
    validator: Validator | None = None

    @abstractmethod
    def generate(self, task_id: int) -> tuple[dict[str, Any], int]:
        """Return ``(task, n_rejected)``: the task of ``task_id`` and how many draws were refused.

        Raises:
            TaskError: the validator refused every draw.
        """

    @abstractmethod
    def spec(self) -> dict[str, Any]:
        """JSON-safe description used to check that a state dict belongs to this space."""

    def task(self, task_id: int) -> dict[str, Any]:
        """Return the task dict of ``task_id`` (a fresh dict each call)."""
        return self.generate(task_id)[0]

    def key(self, task_id: int) -> int:
        """Return the scoring key of ``task_id`` (the id itself unless the space has variants)."""
        return task_id

    def expand(self, keys: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Turn sampled keys into task ids (identity unless the space has variants)."""
        return keys

    @property
    def id_limit(self) -> int:
        """Task ids are the ints in ``[0, id_limit)``."""
        return self.size if self.size is not None and not self.has_variants else ID_LIMIT

    @property
    def key_modulus(self) -> int:
        """Scoring keys are task ids modulo this; 0 when the ids are the keys."""
        return 0

    def check_id(self, task_id: Any) -> int:
        """Return ``task_id`` as an int, or raise :class:`ConfigError` if it is not an id here."""
        ok = isinstance(task_id, int | np.integer) and not isinstance(task_id, bool | np.bool_)
        limit = self.id_limit
        if not ok or not 0 <= int(task_id) < limit:
            raise ConfigError(
                "task_id", task_id, f"expected an int in [0, {limit})", source=type(self).__name__
            )
        return int(task_id)

    def keys(self, ids: Any) -> np.ndarray:
        """Task ids as an int64 array of scoring keys (:meth:`check_id` and :meth:`key`, batched).

        Raises:
            ConfigError: naming the first id that is not an id here.
        """
        limit, arr = self.id_limit, None
        if isinstance(ids, np.ndarray):
            if ids.ndim == 1 and ids.dtype.kind in "iu":
                arr = ids.astype(np.int64, copy=False)
        elif all(type(t) is int for t in ids):
            arr = np.asarray(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
        if arr is not None and len(arr):
            if len(arr) <= 16:  # a vector step's episodes: Python's min/max are cheaper
                few = arr.tolist()
                lo, hi = min(few), max(few)
            else:
                lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= limit:
                arr = None
        if arr is None:
            arr = np.array([self.check_id(t) for t in ids], dtype=np.int64)  # raises
        modulus = self.key_modulus
        return arr % modulus if modulus else arr

    @property
    def has_variants(self) -> bool:
        """True when several task ids share one scoring key."""
        return False

    def draw_key(self, rng: np.random.Generator, taken: Collection[int]) -> tuple[int, int] | None:
        """Draw a key not in ``taken``: ``(key, n_rejected)``, or ``None`` if none is left.

        Raises:
            TaskError: an open-ended space's validator rejected ``max_retries + 1`` draws.
        """
        assert self.size is not None  # open-ended spaces override this
        n = self.size
        if len(taken) >= n:
            return None
        for _ in range(32):  # rejection sampling is O(1) while the pool is not nearly full
            k = int(rng.integers(n))
            if k not in taken:
                return k, 0
        free = np.setdiff1d(np.arange(n), np.fromiter(taken, dtype=np.int64, count=len(taken)))
        if free.size == 0:
            return None
        return int(free[rng.integers(free.size)]), 0


class FixedTaskSpace(TaskSpace):
    """A fixed list of tasks; the task id is the index in the list.

    Args:
        tasks: the task dicts (JSON-safe). Must not be empty.
        validator: optional ``validator(task) -> bool``; every task is checked here, once.

    Raises:
        ConfigError: the list is empty.
        TaskError: a task is not a JSON-safe dict, or the validator rejects it.

    Examples:
        >>> space = FixedTaskSpace([{"level": 1}, {"level": 2}])
        >>> space.size, space.task(1)
        (2, {'level': 2})
    """

    def __init__(
        self, tasks: Sequence[Mapping[str, Any]], *, validator: Validator | None = None
    ) -> None:
        if isinstance(tasks, Mapping | str) or len(tasks) == 0:
            raise ConfigError(
                "tasks",
                tasks,
                "empty task space: give at least one task dict",
                source="FixedTaskSpace",
            )
        self._tasks: list[dict[str, Any]] = []
        for i, t in enumerate(tasks):
            if not isinstance(t, Mapping):
                raise TaskError("tasks", t, f"task {i} is not a dict", source="FixedTaskSpace")
            task = copy.deepcopy(dict(t))
            check_json_safe(task, f"task {i}")
            if validator is not None and not validator(task):
                raise TaskError(
                    "tasks", task, f"the validator rejected task {i}", source="FixedTaskSpace"
                )
            self._tasks.append(task)
        self.size = len(self._tasks)
        self.validator = validator
        blob = json.dumps(self._tasks, sort_keys=True).encode()
        self._digest = hashlib.sha256(blob).hexdigest()[:16]

    def generate(self, task_id: int) -> tuple[dict[str, Any], int]:
        """Return a deep copy of task ``task_id`` and 0 rejections."""
        tasks = self._tasks
        # a plain id in range (every reset's) skips the general check and its three calls
        if type(task_id) is not int or not 0 <= task_id < len(tasks):
            task_id = self.check_id(task_id)
        return copy_task(tasks[task_id]), 0

    def spec(self) -> dict[str, Any]:
        """Size and content digest of the list."""
        return {"type": "FixedTaskSpace", "size": self.size, "digest": self._digest}


def set_path(task: dict[str, Any], path: str, value: Any) -> None:
    """``set_path(d, "agent.speed", 1)`` sets ``d["agent"]["speed"] = 1``."""
    *parents, leaf = path.split(".")
    node = task
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


class BucketedTaskSpace(TaskSpace):
    """An open-ended generator: per parameter, a list of values or :class:`Span` ranges.

    For task id ``i`` each parameter picks one entry of its list uniformly (with
    ``default_rng([seed, i])``); a :class:`Span` entry is then sampled inside its range. Ids are
    drawn at random from ``[0, 2**53)``, so the pool needs a ``capacity``. Dotted names
    (``"agent.speed"``) write nested keys into ``base``.

    Args:
        params: parameter name -> non-empty list of values / :class:`Span`.
        base: fixed parameters every task starts from (JSON-safe), optional.
        seed: seed of the per-id generators.
        validator: optional ``validator(task) -> bool`` applied when a task enters the pool.
        max_retries: rejected draws tolerated in a row before :class:`TaskError` is raised.

    Examples:
        >>> space = BucketedTaskSpace({"goal": [Span(1.0, 3.0)], "hazards": [0, 2, 4]}, seed=1)
        >>> sorted(space.task(123)) == ["goal", "hazards"]
        True
    """

    def __init__(
        self,
        params: Mapping[str, Sequence[Any]],
        *,
        base: Mapping[str, Any] | None = None,
        seed: int = 0,
        validator: Validator | None = None,
        max_retries: int = 10,
    ) -> None:
        src = "BucketedTaskSpace"
        if not isinstance(params, Mapping) or len(params) == 0:
            raise ConfigError(
                "params", params, "empty task space: give at least one parameter", source=src
            )
        self._params: dict[str, tuple[Any, ...]] = {}
        for name, values in params.items():
            if isinstance(values, str | Span) or not isinstance(values, Sequence) or not values:
                raise ConfigError(
                    f"params.{name}",
                    values,
                    "expected a non-empty list of values / Span",
                    source=src,
                )
            for v in values:
                if not isinstance(v, Span):
                    check_json_safe(v, f"value {v!r} of parameter {name!r}")
            self._params[str(name)] = tuple(values)
        self._base = copy.deepcopy(dict(base or {}))
        check_json_safe(self._base, "base")
        check_int("seed", seed, minimum=0, source=src)
        self.seed = seed
        self.validator = validator
        self.max_retries = check_max_retries(max_retries, src)
        self.size = None

    def generate(self, task_id: int) -> tuple[dict[str, Any], int]:
        """Return the task of ``task_id`` (unvalidated: ids enter the pool via ``draw_key``)."""
        rng = np.random.default_rng([self.seed, self.check_id(task_id)])
        task = copy_task(self._base)
        for name, values in self._params.items():
            v = values[int(rng.integers(len(values)))] if len(values) > 1 else values[0]
            set_path(task, name, v.draw(rng) if isinstance(v, Span) else copy_task(v))
        return task, 0

    def draw_key(self, rng: np.random.Generator, taken: Collection[int]) -> tuple[int, int] | None:
        """Draw a fresh random id whose task the validator accepts, retrying rejected ones."""
        rejected = 0
        task: dict[str, Any] = {}
        while rejected <= self.max_retries:
            k = int(rng.integers(ID_LIMIT))
            if k in taken:
                continue
            if self.validator is None:
                return k, rejected
            task = self.generate(k)[0]
            if self.validator(task):
                return k, rejected
            rejected += 1
        raise TaskError(
            "task",
            task,
            f"the validator rejected {rejected} generated tasks in a row (max_retries="
            f"{self.max_retries}); widen the parameter lists or relax the validator",
            source="BucketedTaskSpace",
        )

    def spec(self) -> dict[str, Any]:
        """Parameters, base, seed and retry budget."""
        params = {
            k: [{"span": [v.min, v.max]} if isinstance(v, Span) else v for v in vs]
            for k, vs in self._params.items()
        }
        return {
            "type": "BucketedTaskSpace",
            "params": params,
            "base": self._base,
            "seed": self.seed,
            "max_retries": self.max_retries,
        }
