"""Argument checks shared across gymcurric: the one "an int >= 1" rule, written once.

A count, a size or a seed is accepted when it is an ``int`` (``bool`` refused, although it is
an ``int`` subclass) at or above a minimum; numpy integers only where the caller says so (a
``k`` or a seed that may come out of a numpy array), None only where it means "off".

A task id has its own rule (:func:`as_task_id`, :func:`check_task_id`), the same wherever
one is given: anything but a bool whose ``__index__`` gives one int in [-1, 2**63) (-1: no
task; ids live in int64 arrays: channel slots, checkpoints).
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any, Literal, overload

import numpy as np

from gymcurric.errors import ConfigError

__all__ = [
    "MAX_TIMEOUT_S",
    "as_task_id",
    "check_int",
    "check_one_per_env",
    "check_task_id",
    "check_text",
    "check_timeout",
    "cut",
    "finite_reason",
    "is_finite_number",
    "is_int",
    "is_real",
    "no_slot_reason",
    "shown",
]

#: one more than the largest task id: ids are kept in int64 arrays (channel slots, checkpoints)
TASK_ID_END = 2**63


def is_int(value: Any, minimum: int = 1, *, allow_numpy: bool = False) -> bool:
    """Whether ``value`` is an int (not a bool) ``>= minimum``.

    Args:
        value: the value to test.
        minimum: the smallest value accepted.
        allow_numpy: accept numpy integers (``np.int64(3)``) as well.

    Examples:
        >>> is_int(3), is_int(True), is_int(0), is_int(0, minimum=0), is_int(2.0)
        (True, False, False, True, False)
        >>> is_int(np.int64(3)), is_int(np.int64(3), allow_numpy=True)
        (False, True)
    """
    kinds = (int, np.integer) if allow_numpy else int
    return not isinstance(value, bool) and isinstance(value, kinds) and bool(value >= minimum)


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int = 1,
    source: str | None = None,
    optional: bool = False,
    allow_numpy: bool = False,
    reason: str | None = None,
) -> None:
    """Raise :class:`~gymcurric.errors.ConfigError` unless ``value`` is an int ``>= minimum``.

    Args:
        name: the parameter or key named in the error.
        value: the value received.
        minimum: the smallest value accepted.
        source: where the value came from (a class name, a file), as in ``ConfigError``.
        optional: accept None as well.
        allow_numpy: accept numpy integers as well.
        reason: the error's reason; default ``"expected an int >= {minimum}"`` (with
            ``"None or "`` in front when ``optional``).

    Raises:
        ConfigError: ``value`` is a bool, not an int, or below ``minimum`` (and not None where
            ``optional``).

    Examples:
        >>> check_int("num_envs", 4)
        >>> check_int("seed", -1, minimum=0, source="Box")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: Box: invalid value for 'seed': -1 (expected an int >= 0)
        >>> check_int("capacity", None, optional=True)
    """
    if optional and value is None:
        return
    if not is_int(value, minimum, allow_numpy=allow_numpy):
        if reason is None:
            none = "None or " if optional else ""
            reason = f"expected {none}an int >= {minimum}"
        raise ConfigError(name, value, reason, source=source)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is an int or a float (a bool is not) that a float holds, finite.

    An int too large for a float (``1`` and 400 zeros, as JSON and YAML read it) is not: on it
    ``math.isfinite`` raises ``OverflowError: int too large to convert to float``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number a float holds: numpy's too, not a bool, NaN and inf too.

    ``numbers.Real`` (``int``, ``float``, numpy's ints and floats, ``Fraction``) less the bools
    (Python's; numpy's is no ``Real``) and the ints too large for a float (``10**400``, on
    which ``float()`` and ``math.isfinite`` raise ``OverflowError``).
    """
    return (
        isinstance(value, numbers.Real) and not isinstance(value, bool) and not too_large_int(value)
    )


def too_large_int(value: Any) -> bool:
    """Whether ``value`` is a Python int (not a bool) too large for a float."""
    return isinstance(value, int) and not isinstance(value, bool) and not is_finite_number(value)


def finite_reason(value: Any, reason: str) -> str:
    """``reason``, saying why when ``value`` is an int too large for a float."""
    if too_large_int(value):
        return f"{reason}; an integer this large does not fit a float"
    return reason


def shown(value: Any, width: int = 80) -> Any:
    """``value`` for a message: itself, or its ``repr`` cut when that is over ``width`` long.

    An int of more digits than Python writes (4,300, ``sys.get_int_max_str_digits``) is named
    by its number of bits, as its ``repr`` raises ``ValueError``.
    """
    try:
        text = repr(value)
    except ValueError:
        bits = value.bit_length() if isinstance(value, int) else None
        return f"<{type(value).__name__} of {bits:,} bits>" if bits else f"<{type(value).__name__}>"
    return value if len(text) <= width else cut(text, width)


def cut(text: str, width: int = 80) -> str:
    """``text`` for a message: itself, or its first 60 characters and its length past ``width``.

    For text as written (a literal, an override); :func:`shown` cuts a value's ``repr``.

    Examples:
        >>> cut("1e400"), cut("9" * 100)[58:]
        ('1e400', '99... (100 characters)')
    """
    return text if len(text) <= width else f"{text[:60]}... ({len(text):,} characters)"


#: The longest timeout :func:`check_timeout` accepts (seconds): ``select.poll`` waits at most
#: 2**31 - 1 ms; None means no limit.
MAX_TIMEOUT_S = 1e6


def check_timeout(timeout: Any, key: str = "timeout", *, source: str | None = None) -> float | None:
    """``timeout`` as a float: a positive, finite number of seconds, or None (no limit).

    Raises:
        ConfigError: anything else (a bool, a string, 0, a negative number, NaN, inf, more
            than :data:`MAX_TIMEOUT_S`), naming ``key`` and the value.
    """
    if timeout is None:
        return None
    number = isinstance(timeout, numbers.Real) and not isinstance(timeout, bool)
    # the range first: math.isfinite raises OverflowError on an int too large for a float
    if not (number and 0 < timeout <= MAX_TIMEOUT_S and math.isfinite(timeout)):
        reason = f"expected seconds > 0 and <= {MAX_TIMEOUT_S:g}, or None (no limit)"
        raise ConfigError(key, shown(timeout), reason, source=source)
    return float(timeout)


def check_text(key: str, value: str, *, source: str | None = None, path: bool = False) -> None:
    r"""Refuse a string that holds a lone UTF-16 surrogate, which is not text.

    A JSON or YAML ``"\ud800"`` escape reads as one; no UTF-8 file, log or path can hold it, so
    a run name with one ended in a raw ``UnicodeEncodeError`` once its run directory was made.
    A pair (``"\ud83d\ude00"``) is one character and reads as it. A command-line byte that is
    not UTF-8 reads as one of ``"\udc80"`` to ``"\udcff"`` (Python's ``surrogateescape``),
    which ``os`` functions write back as that byte: a POSIX file name (Latin-1, say) that an
    env opens as it did before, so accepted unless ``path``, a string that names the run
    directory, whose logs (tensorboard's) encode their paths as strict UTF-8.

    Raises:
        ConfigError: naming ``key``, the value and where the surrogate is.

    Examples:
        >>> check_text("run.name", "caf\u00e9"), check_text("env.kwargs.path", "caf\udce9")
        (None, None)
        >>> check_text("run.name", "a\ud800")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: invalid value for 'run.name': 'a\ud800' (holds a lone ...
    """
    try:
        value.encode("utf-8", "strict" if path else "surrogateescape")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        reason = (
            f"holds a lone UTF-16 surrogate, {char!r} at character {exc.start}, which no UTF-8 "
            f'file or path can hold (a "\\u{ord(char):x}" escape, or a byte that is not UTF-8); '
            "write the character itself"
        )
        raise ConfigError(key, cut(value), reason, source=source) from None


def check_one_per_env(name: str, values: Any, num_envs: int, *, source: str) -> None:
    """Raise :class:`~gymcurric.errors.ConfigError` unless ``values`` has one entry per env.

    Examples:
        >>> check_one_per_env("task_ids", [3, 4], 2, source="resume_env_tasks")
        >>> check_one_per_env("task_ids", [3], 2, source="resume")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: resume: invalid value for 'task_ids': [3] (expected 2 ...
    """
    try:
        size = len(values)
    except TypeError:  # not a list (an int, None): a ConfigError too, not a bare TypeError
        size = None
    if size != num_envs:
        raise ConfigError(name, values, f"expected {num_envs} values, one per env", source=source)


def as_task_id(value: Any) -> int | None:
    """``value`` as a task id, an int in [-1, 2**63) (-1: no task), or None where it is not one.

    A task id is whatever ``__index__`` turns into one int: an int, a numpy integer, a 0-d int
    array (an id read out of a numpy array). Not a bool or a numpy bool, a float, a string,
    or an array of one or more dimensions (``__index__`` refuses those), nor an int that no
    int64 holds (``np.uint64(2**64 - 1)``): ids are kept in int64 arrays, and such an id
    taken here failed later, in a channel's reset or a checkpoint's save.

    Examples:
        >>> as_task_id(3), as_task_id(np.int64(-1)), as_task_id(np.array(2))
        (3, -1, 2)
        >>> as_task_id(True), as_task_id(-2), as_task_id(1.0), as_task_id(np.array([3]))
        (None, None, None, None)
        >>> as_task_id(np.uint64(2**63 - 1)), as_task_id(np.uint64(2**63))
        (9223372036854775807, None)
    """
    return _task_id(value)[0]


def _task_id(value: Any) -> tuple[int | None, Exception | None]:
    """:func:`as_task_id`, and the exception ``__index__`` raised, other than a TypeError.

    An ``__index__`` of yours that raises something else (a ValueError) does not make a task
    id either; :func:`check_task_id` chains it to its ConfigError.
    """
    if isinstance(value, bool | np.bool_):
        return None, None
    try:
        task_id = operator.index(value)
    except TypeError:  # not an integer: the error says what a task id is
        return None, None
    except Exception as exc:
        return None, exc
    return (task_id if -1 <= task_id < TASK_ID_END else None), None


@overload
def check_task_id(
    name: str,
    value: Any,
    *,
    source: str,
    allow_none: Literal[False] = False,
    about: str | None = None,
    reason: str | None = None,
) -> int: ...
@overload
def check_task_id(
    name: str,
    value: Any,
    *,
    source: str,
    allow_none: bool,
    about: str | None = None,
    reason: str | None = None,
) -> int | None: ...
def check_task_id(
    name: str,
    value: Any,
    *,
    source: str,
    allow_none: bool = False,
    about: str | None = None,
    reason: str | None = None,
) -> int | None:
    """``value`` as a task id (:func:`as_task_id`), or a ConfigError naming ``name``.

    Args:
        name: the parameter named in the error (``"task_id"``, ``"task_ids[1]"``).
        value: the value received.
        source: the function or class it was given to.
        allow_none: accept None as well (returned as None).
        about: what the id is for, put in front of the error's reason (``"the task sub-env 1
            resumes"``).
        reason: the error's reason, for a value kept by the same rule (a pool slot); default
            ``"expected a task id (an int from 0 to 2**63 - 1), -1 for none"``.

    Raises:
        ConfigError: ``value`` is not a task id (nor None where ``allow_none``); where its
            ``__index__`` raised (other than a TypeError), that exception is the cause, and
            the message names it.

    Examples:
        >>> check_task_id("task_id", np.int64(4), source="f")
        4
        >>> check_task_id("task_id", True, source="f", allow_none=True)
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: f: invalid value for 'task_id': True (expected a task id ...
    """
    if allow_none and value is None:
        return None
    task_id, cause = _task_id(value)
    if task_id is None:
        none = ", or None" if allow_none else ""
        if reason is None:
            reason = f"expected a task id (an int from 0 to 2**63 - 1), -1 for none{none}"
        if cause is not None:
            reason += f"; its __index__ raised {type(cause).__name__}: {cause}"
        why = f"{about}: {reason}" if about else reason
        raise ConfigError(name, value, why, source=source) from cause
    return task_id


def no_slot_reason(task_id: int, env: int) -> str:
    """Why a channel's task (waiting, or a spare) with pool slot -1 is refused.

    The words of both a checkpoint file's ``channel_slots`` and ``resume_channel``'s
    ``slots``: -1 is the slot of no task, and a task restored without its slot was dropped
    (its env got a fresh draw instead).

    Examples:
        >>> no_slot_reason(5, 1)
        'task 5 of env 1 has slot -1, the slot of no task; a task needs its pool slot, an int >= 0'
    """
    return (
        f"task {task_id} of env {env} has slot -1, the slot of no task; a task needs its "
        "pool slot, an int >= 0"
    )
