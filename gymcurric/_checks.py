"""Argument checks shared across gymcurric: the one "an int >= 1" rule, written once.

A count, a size or a seed is accepted when it is an ``int`` (``bool`` refused, although it is
an ``int`` subclass) at or above a minimum; numpy integers only where the caller says so (a
``k`` or a seed that may come out of a numpy array), None only where it means "off".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gymcurric.errors import ConfigError

__all__ = ["check_int", "check_one_per_env", "is_int"]


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


def check_one_per_env(name: str, values: Any, num_envs: int, *, source: str) -> None:
    """Raise :class:`~gymcurric.errors.ConfigError` unless ``values`` has one entry per env.

    Examples:
        >>> check_one_per_env("task_ids", [3, 4], 2, source="resume_env_tasks")
        >>> check_one_per_env("task_ids", [3], 2, source="resume")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: resume: invalid value for 'task_ids': [3] (expected 2 ...
    """
    if len(values) != num_envs:
        raise ConfigError(name, values, f"expected {num_envs} values, one per env", source=source)
