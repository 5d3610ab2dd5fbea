"""Cost bookkeeping shared by every cost wrapper: non-finite guarding and episode accumulation.

:func:`read_step_costs` reads a vector env's per-step costs for every vector reader (the
vector wrappers and ``RecordToRing``). The guard and the tracker are plain state (counters
and numpy arrays) with no knowledge of an env API, so the Gymnasium wrappers, their vector
twins and the SB3 ``VecEnv`` hook all use the same code.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections import deque
from typing import Any, Literal, SupportsFloat

import numpy as np
import numpy.typing as npt

from gymcurric._checks import check_int, finite_reason, is_real, shown, too_large_int
from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError

__all__ = [
    "NONFINITE_POLICIES",
    "EpisodeCostTracker",
    "NonFiniteGuard",
    "NonFinitePolicy",
    "check_cost_values",
    "check_queue_length",
    "check_vector_cost_dtype",
    "numbers_only",
    "read_step_costs",
]

NonFinitePolicy = Literal["warn", "raise", "ignore"]
NONFINITE_POLICIES: tuple[str, ...] = ("warn", "raise", "ignore")


#: What ``float()`` and ``np.asarray(..., float64)`` read as a number but no cost is: text (a
#: number written as a string, ``"0.5"``) and bytes. A bool is a cost, an indicator read as 0 or 1
_TEXT = (str, bytes, bytearray)
#: what no cost is, looked for in a value: text, and complex numbers (float() drops the
#: imaginary part with only NumPy's ComplexWarning)
_NOT_REAL = (*_TEXT, complex, np.complexfloating)
#: scalars that are numbers by their type (no look inside): Python's and numpy's bools, ints,
#: floats
_NUMBER_TYPES = frozenset({bool, int, float, *(np.dtype(c).type for c in "?bhilqBHILQefdg")})


def _not_a_cost(value: Any) -> tuple[int | None, Any] | None:
    """``(index, item)`` of the first text, bytes, complex or too large int in ``value``.

    None when there is none. ``index`` is None for a scalar, else the item's index in ``value``
    (flattened). numpy numbers, bools and Python numbers that fit a float are costs; a numpy
    array of text or complex numbers (``U``, ``S``, ``c``) is not; an object array or a list is
    looked into, and so are the object arrays and lists in it (a vector env's info array of a
    type it does not know is an object array; Gymnasium fills the sub-envs without the key with
    None).
    """
    if isinstance(value, _NOT_REAL) or too_large_int(value):
        return None, value
    kind = getattr(getattr(value, "dtype", None), "kind", "f")
    if kind in "USc":
        array = np.asarray(value)
        if not array.size:
            return None
        return (0 if array.ndim else None), array.ravel()[0].item()
    if kind == "O" or isinstance(value, list | tuple):
        items = np.asarray(value, dtype=object).ravel() if kind == "O" else value
        for index, item in enumerate(items):
            if isinstance(item, _NOT_REAL) or too_large_int(item):
                return index, item
            kind = getattr(getattr(item, "dtype", None), "kind", "f")
            if kind in "USc":  # a numpy text (or complex) array
                array = np.asarray(item)
                if array.size:
                    return index, array.ravel()[0].item()
            # an object array or a list inside (np.array(..., float64) reads the text in it)
            if kind == "O" or isinstance(item, list | tuple):
                inner = _not_a_cost(item)
                if inner is not None:
                    return index, inner[1]
    return None


def numbers_only(values: Any) -> bool:
    """Whether ``values`` (one cost per sub-env) is a 1-D number array to NumPy: no text in it.

    The fast path of the per-step readers: one ``np.asarray`` over the sub-envs' costs, where
    :func:`check_cost_values` of each would be a few Python calls per sub-env per step. Text
    anywhere makes the array text or objects; a bytes-like ``bytearray`` is read by NumPy as
    its bytes, a row of ``uint8``, so only a 1-D array (one number per sub-env) passes. ``True``
    here needs no further check; ``False`` (text, None, a list per sub-env, a ragged list, an
    object NumPy cannot type) leaves the caller to look at each value.

    Examples:
        >>> numbers_only([0.5, np.float32(1.0), True, np.array(2)])
        True
        >>> numbers_only([0.5, "1"]), numbers_only([0.5, None]), numbers_only([bytearray(b"1")])
        (False, False, False)
    """
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError):  # ragged, or an object NumPy will not take
        return False
    return array.ndim == 1 and array.dtype.kind in "biuf"


def check_cost_values(
    values: Any, key: str, *, source: str | None = None, what: str = "cost"
) -> None:
    """Refuse a cost (or costs) given as text or bytes, which ``float()`` would read.

    ``info["cost"] = "0.5"`` read as 0.5 hides a mistake in the env (a number formatted for
    a log): it is refused, where ``float()`` and ``np.asarray(..., float64)`` would take it
    without a word. So is an int too large for a float (``10**400``, as JSON reads one), on
    which ``float()`` raises ``OverflowError``. A Python or numpy number (an array of them)
    passes, and so does a bool (Python's or numpy's): an indicator cost
    (``info["cost"] = collided``, a ``cost_fn`` returning ``abs(obs[0]) > 1.0``), read as 0 or
    1. NaN and inf are left to :class:`NonFiniteGuard`.

    Args:
        values: a cost, a list of them, or an array of them (a vector env's info array).
        key: the info key or argument, named in the error (``"info['cost']"``).
        source: who read it (a wrapper's name), named in the error.
        what: what the values are, named in the error (``"risk"`` for ``info["risk"]``, which
            the Lagrangian agents check the same way).

    Raises:
        ConfigError: naming ``key``, the first value that is no cost (cut short) and, in a
            list or array, its index: text, bytes or an int too large for a float.

    Examples:
        >>> check_cost_values(np.array([0.5, 1.0]), "info['cost']")
        >>> check_cost_values(True, "info['cost']")  # an indicator: 1
        >>> check_cost_values([0.5, "1"], "info['cost']", source="AnnotateCost")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: AnnotateCost: invalid value for "info['cost']": '1' (...
    """
    # a step's one cost (the wrappers' per-step case): an int only if a float holds it
    if type(values) in _NUMBER_TYPES and (type(values) is not int or not too_large_int(values)):
        return
    if isinstance(values, list | tuple) and numbers_only(values):  # a step's costs, a list
        return
    found = _not_a_cost(values)
    if found is not None:
        index, item = found
        at = "" if index is None else f" at index {index}"
        reason = (
            f"expected a real number (a Python or numpy int, float or bool), got "
            f"{type(item).__name__}{at}: a {what} written as text or bytes is refused rather "
            "than read as a number"
        )
        if isinstance(item, complex | np.complexfloating):
            reason = (
                f"expected a real number, got {type(item).__name__}{at}: float() would drop "
                "its imaginary part"
            )
        if too_large_int(item):  # float() raises OverflowError on it
            reason = f"expected a real number a float can hold, got an int{at} too large for one"
        raise ConfigError(key, shown(item), reason, source=source)


_DTYPE_WARNED: set[str] = set()  # the readers that warned already (once per process each)


def check_vector_cost_dtype(values: object, where: str) -> None:
    """Warn once per ``where`` if a vector env's ``info["cost"]`` came as an int or bool array.

    Gymnasium's vector envs (``VectorEnv._add_info``) give each step's info array the type of
    the first sub-env that reports the key in that step. If sub-env 0 reports ``cost=0`` (an
    ``int``) and sub-env 1 reports ``0.5``, the array is ``int`` and the 0.5 arrives as 0; a
    ``bool`` cost turns 0.5 into ``True``. The fraction is gone before any wrapper sees it, so
    the readers of vector costs call this: costs that are always whole numbers lose nothing,
    and envs that mix types should report ``float(cost)``, or have each sub-env wrapped in
    :class:`gymcurric.wrappers.AnnotateCost`, which does.

    Args:
        values: ``infos["cost"]`` (or ``infos["final_info"]["cost"]``) as the vector env gave it.
        where: the reader (named in the warning; each warns once per process).
    """
    kind = getattr(getattr(values, "dtype", None), "kind", "f")
    if kind in "biu" and where not in _DTYPE_WARNED:
        _DTYPE_WARNED.add(where)
        warnings.warn(
            f"{where}: the vector env's info['cost'] is a {np.asarray(values).dtype} array. "
            "Gymnasium types each step's info array by the first sub-env that reports the key, "
            "so a float cost of another sub-env in the same step (0.5 next to an int 0) was "
            "truncated. Harmless if the costs are always whole numbers; otherwise report "
            "float(cost), or wrap each sub-env in gymcurric.wrappers.AnnotateCost (it reports "
            "floats)",
            GymcurricWarning,
            stacklevel=3,
        )


def _check_sub_env_costs(values: Any, mask: npt.NDArray[np.bool_], key: str, source: str) -> None:
    """:func:`check_cost_values` of a vector info array's entries that ``mask`` marks.

    The error names the sub-env: Gymnasium leaves the others None (an object array) or 0.
    """
    array = np.asarray(values)
    # real numbers: nothing to look into (complex ones are looked at: float() drops a part)
    if array.dtype.kind in "biuf" or array.shape != mask.shape:
        return
    for env in np.flatnonzero(mask):
        check_cost_values(array[env], f"{key}[{env}]", source=source)


def read_step_costs(
    infos: dict[str, Any],
    num_envs: int,
    dones: npt.NDArray[np.bool_],
    reset_steps: npt.NDArray[np.bool_],
    same_step: bool,
    *,
    source: str = "read_step_costs",
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Read this step's per-env cost from vector ``infos``, aligned with the rewards.

    Args:
        infos: the vector info dict returned by ``step``.
        num_envs: number of sub-envs.
        dones: ``terminated | truncated`` of this step.
        reset_steps: sub-envs whose step was an autoreset (``NEXT_STEP`` mode); their cost is 0.
        same_step: whether the env autoresets in the same step (costs of ended sub-envs are then
            read from ``infos["final_info"]``).
        source: the reader, named in errors and in the warning of
            :func:`~gymcurric.safety.costs.check_vector_cost_dtype` (costs that came as an int
            or bool array may have lost their fractions in the vector env).

    Returns:
        ``(costs, present)``: float64 costs (0 where absent) and a mask of the sub-envs for which
        a cost was found (or is known to be 0).

    Raises:
        ConfigError: a sub-env's cost is text or bytes (:func:`check_cost_values`), naming the
            sub-env, ``info['cost'][i]`` (or ``info['final_info']['cost'][i]``). A bool array
            (Gymnasium's type when the first sub-env to report reports a bool) is read as 0 and
            1, with the warning of an int array.
    """
    costs = np.zeros(num_envs, dtype=np.float64)
    present = np.zeros(num_envs, dtype=bool)
    if "cost" in infos:
        mask = np.asarray(infos.get("_cost", np.ones(num_envs, dtype=bool)), dtype=bool)
        _check_sub_env_costs(infos["cost"], mask, "info['cost']", source)
        check_vector_cost_dtype(infos["cost"], source)
        costs[mask] = np.asarray(infos["cost"], dtype=np.float64)[mask]
        present |= mask
    if same_step and dones.any():
        costs[dones] = 0.0
        present[dones] = False
        final = infos.get("final_info")
        if isinstance(final, dict) and "cost" in final:
            fmask = np.asarray(final.get("_cost", dones), dtype=bool) & dones
            key = "info['final_info']['cost']"
            _check_sub_env_costs(final["cost"], fmask, key, source)
            check_vector_cost_dtype(final["cost"], source)
            costs[fmask] = np.asarray(final["cost"], dtype=np.float64)[fmask]
            present |= fmask
    costs[reset_steps] = 0.0
    present |= reset_steps
    return costs, present


class NonFiniteGuard:
    """Replace NaN/Inf values by a finite value, counting them; warn once or raise.

    Args:
        name: what the values are (``"cost"``), used in messages.
        policy: ``"warn"`` replaces and emits one :class:`GymcurricWarning` per guard,
            ``"ignore"`` replaces silently (still counted), ``"raise"`` raises
            :class:`NonFiniteValueError`.
        replacement: the finite value that replaces a non-finite one.
        source: who owns the guard (a wrapper/env repr), for messages.

    Examples:
        >>> guard = NonFiniteGuard("cost", policy="ignore")
        >>> guard.scalar(float("nan")), guard.count
        (0.0, 1)
    """

    def __init__(
        self,
        name: str = "cost",
        *,
        policy: NonFinitePolicy = "warn",
        replacement: float = 0.0,
        source: str = "",
    ) -> None:
        if policy not in NONFINITE_POLICIES:
            raise ConfigError(
                "nonfinite", policy, f"expected one of {NONFINITE_POLICIES}", source=source or None
            )
        # a real number first: math.isfinite raises TypeError on a string, OverflowError on
        # an int too large for a float
        if isinstance(replacement, np.ndarray) and replacement.ndim == 0:
            replacement = replacement[()]  # a 0-d array: its number, as float() reads it
        if not (is_real(replacement) and math.isfinite(replacement)):
            raise ConfigError(
                "nonfinite_value",
                shown(replacement),
                finite_reason(replacement, "the replacement must be a finite number"),
                source=source or None,
            )
        self.name = name
        self.policy = policy
        self.replacement = float(replacement)
        self.source = source
        self.count = 0
        self._warned = False

    def scalar(self, value: SupportsFloat, *, where: str = "") -> float:
        """Return ``value`` as a float, replaced if it is not finite.

        Raises:
            ConfigError: ``value`` is text or bytes (:func:`check_cost_values`; a bool is read
                as 0 or 1).
        """
        check_cost_values(value, where or self.name, source=self.source or None)
        value = float(value)
        if math.isfinite(value):
            return value
        self._handle(1, repr(value), where)
        return self.replacement

    def array(self, values: npt.ArrayLike, *, where: str = "") -> npt.NDArray[np.float64]:
        """Return ``values`` as a float64 array (a copy) with non-finite entries replaced.

        Raises:
            ConfigError: one of ``values`` is text or bytes (:func:`check_cost_values`).
        """
        where = where or self.name
        check_cost_values(values, where, source=self.source or None)
        out = np.array(values, dtype=np.float64)
        bad = ~np.isfinite(out)
        if bad.any():
            idx = np.flatnonzero(bad)
            self._handle(int(idx.size), f"{out[idx].tolist()} at index {idx.tolist()}", where)
            out[bad] = self.replacement
        return out

    def _handle(self, n: int, shown: str, where: str) -> None:
        at = f" ({where})" if where else ""
        src = f"{self.source}: " if self.source else ""
        if self.policy == "raise":
            raise NonFiniteValueError(
                f"{src}non-finite {self.name} received: {shown}{at}; pass nonfinite='warn' to "
                f"replace such values by {self.replacement} instead"
            )
        self.count += n
        if self.policy == "warn" and not self._warned:
            self._warned = True
            warnings.warn(
                f"{src}non-finite {self.name} received: {shown}{at}; replaced by "
                f"{self.replacement} (counted in .nonfinite_count, warned once; "
                "nonfinite='raise' makes this an error)",
                GymcurricWarning,
                stacklevel=4,
            )


def check_queue_length(queue_length: Any, source: str) -> None:
    """Raise :class:`~gymcurric.errors.ConfigError` unless ``queue_length`` is a deque's maxlen.

    An int (numpy's too, not a bool) from 0 to ``sys.maxsize`` (a C ``ssize_t``), or ``None``:
    no limit, as for a ``deque``.
    """
    if queue_length is None:
        return
    check_int("queue_length", queue_length, minimum=0, source=source, allow_numpy=True)
    if queue_length > sys.maxsize:
        reason = f"expected an int from 0 to {sys.maxsize}"
        raise ConfigError("queue_length", shown(queue_length), reason, source=source)


class EpisodeCostTracker:
    """Running per-env episode cost, plus a queue of the costs of finished episodes.

    Args:
        num_envs: number of parallel envs tracked.
        queue_length: how many finished-episode costs :attr:`cost_queue` keeps (``None``: all).

    Examples:
        >>> t = EpisodeCostTracker(2)
        >>> t.add(np.array([1.0, 0.5]))
        >>> t.add(np.array([1.0, 0.0]))
        >>> t.finish(np.array([True, False])).tolist()
        [2.0, 0.0]
        >>> t.running.tolist()
        [0.0, 0.5]
    """

    def __init__(self, num_envs: int, queue_length: int | None = 100) -> None:
        check_int("num_envs", num_envs, source="EpisodeCostTracker", allow_numpy=True)
        check_queue_length(queue_length, "EpisodeCostTracker")
        self.running = np.zeros(num_envs, dtype=np.float64)
        self.cost_queue: deque[float] = deque(maxlen=queue_length)

    def add(
        self, costs: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None = None
    ) -> None:
        """Add one step's costs (only where ``mask`` is True, if given)."""
        if mask is None:
            self.running += costs
        else:
            self.running[mask] += costs[mask]

    def finish(self, done: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """Close the episodes where ``done``; return the episode costs (0 elsewhere)."""
        out = np.where(done, self.running, 0.0)
        if done.any():
            self.cost_queue.extend(self.running[done].tolist())
            self.running[done] = 0.0
        return out

    def reset(self, mask: npt.NDArray[np.bool_] | None = None) -> None:
        """Zero the running cost (of the envs in ``mask``, or all)."""
        if mask is None:
            self.running[:] = 0.0
        else:
            self.running[mask] = 0.0
