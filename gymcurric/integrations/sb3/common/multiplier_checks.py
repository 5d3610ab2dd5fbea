"""The argument checks of the Lagrange multipliers (:mod:`.multipliers`) and their callers.

Numbers (:func:`check_finite`, :func:`check_count`), flags (:func:`check_flag`) and
``multiplier_kwargs`` (:func:`check_multiplier_kwargs`, against :data:`MULTIPLIER_KWARGS`).
A number is a :class:`numbers.Real` (a count a :class:`numbers.Integral`), NumPy scalars
(and 0-d arrays, for a real number) included and returned as the Python float or int of the
same value; a bool or a string is not
one (``"0.1"`` was read by ``float()`` before, ``np.float32(5)`` refused by some callers).
Each ``ConfigError`` names the parameter, the value the caller received and the caller
(``source``: an algorithm's class name, ``"MultiplierSet"``); :func:`as_caller_error` turns a
multiplier constructor's refusal of a value into the caller's.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError

__all__ = [
    "MULTIPLIER_KWARGS",
    "as_caller_error",
    "as_real",
    "check_count",
    "check_finite",
    "check_flag",
    "check_multiplier_kwargs",
]

#: The ``multiplier_kwargs`` each multiplier kind takes (``init`` and ``lr`` have their own
#: arguments: ``lagrange_init``, ``lagrange_lr``).
MULTIPLIER_KWARGS: dict[str, tuple[str, ...]] = {
    "adam": ("upper_bound",),
    "sgd": ("upper_bound",),
    "pid": ("d_delay", "d_ema_alpha", "kd", "ki", "kp", "p_ema_alpha", "penalty_max"),
}


def as_real(value: Any) -> float | None:
    """``value`` as a Python float if it is a real number (NumPy's included), else None.

    A 0-d int or float array (``np.load(...)["x"]``) is one too, as ``float()`` read it.

    Examples:
        >>> as_real(3), as_real(np.float32(0.5)), as_real(np.int64(2)), as_real(np.array(0.5))
        (3.0, 0.5, 2.0, 0.5)
        >>> as_real(True), as_real("0.1"), as_real(None), as_real(np.bool_(True))
        (None, None, None, None)
    """
    if type(value) is float:  # the common case, as cheap as before
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return float(value)  # a 0-d array (np.load(...)["x"]), as float() read it before
    return None


def check_finite(name: str, value: Any, *, minimum: float | None = None, source: str) -> float:
    """``value`` as a finite float (``>= minimum`` when given), else a ``ConfigError``.

    A real number (:func:`as_real`: NumPy scalars included, bools and strings not).
    """
    # a float (every call of a multiplier's update) takes no more work than float() did
    out = value if type(value) is float else as_real(value)
    if out is None:
        raise ConfigError(name, value, "expected a real number", source=source)
    if not math.isfinite(out):
        raise ConfigError(name, value, "expected a finite number", source=source)
    if minimum is not None and out < minimum:
        raise ConfigError(name, value, f"expected a number >= {minimum:g}", source=source)
    return out


def check_count(
    name: str,
    value: Any,
    *,
    minimum: int = 1,
    source: str,
    optional: bool = False,
    reason: str | None = None,
) -> Any:
    """``value`` as a Python int ``>= minimum``, else :func:`~gymcurric._checks.check_int`'s error.

    NumPy integers are taken (returned as the int of the same value), None where ``optional``.

    Examples:
        >>> check_count("cost_window", np.int64(20), source="doc")
        20
    """
    check_int(
        name,
        value,
        minimum=minimum,
        source=source,
        optional=optional,
        allow_numpy=True,
        reason=reason,
    )
    return None if value is None else int(value)


def check_flag(name: str, value: Any, *, source: str) -> bool:
    """``value`` as a bool (a NumPy bool included), else a ``ConfigError``.

    ``bool("no")`` is True: a string or a number is refused rather than read that way.

    Examples:
        >>> check_flag("update_cost_critic", np.bool_(False), source="doc")
        False
    """
    if not isinstance(value, bool | np.bool_):
        raise ConfigError(name, value, "expected True or False", source=source)
    return bool(value)


def check_multiplier_kwargs(kind: Any, kwargs: Any, *, source: str | None) -> dict[str, Any]:
    """``kwargs`` (a dict or None) as a new dict, refusing keys that ``kind`` does not take.

    An unknown ``kind`` is left to the caller (its keys are not checked).

    Args:
        kind: the multiplier kind, ``"adam"``, ``"sgd"`` or ``"pid"``.
        kwargs: ``multiplier_kwargs`` as the user gave it (the ``ConfigError`` shows it).
        source: the caller the ``ConfigError`` names; None: none.

    Raises:
        ConfigError: ``kwargs`` not a dict or None, or with a key ``kind`` does not take
            (named with the known ones).

    Examples:
        >>> check_multiplier_kwargs("pid", {"kp": 0.5}, source="doc")
        {'kp': 0.5}
        >>> check_multiplier_kwargs("adam", {"kp": 0.5}, source="doc")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: doc: invalid value for 'multiplier_kwargs': {'kp': 0.5} \
(unknown keys ['kp'] for multiplier='adam'; known: ['upper_bound'])
    """
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError("multiplier_kwargs", kwargs, "expected a dict or None", source=source)
    known = MULTIPLIER_KWARGS.get(kind) if isinstance(kind, str) else None
    unknown = sorted(set(kwargs or ()) - set(known or ()), key=str)
    if known is not None and unknown:
        raise ConfigError(
            "multiplier_kwargs",
            kwargs,
            f"unknown keys {unknown} for multiplier={kind!r}; known: {list(known)}",
            source=source,
        )
    return dict(kwargs or {})


def as_caller_error(error: ConfigError, kwargs: Mapping[str, Any], *, source: str) -> ConfigError:
    """A multiplier constructor's ``error`` as its caller's: ``source`` named, its own key shown.

    A value from ``kwargs`` (``multiplier_kwargs``) is named ``multiplier_kwargs['key']``;
    any other key (``lagrange_init``, ``lagrange_lr``) is kept. Value and reason are kept.

    Examples:
        >>> error = ConfigError("kp", -1, "expected a number >= 0", source="PID(...)")
        >>> print(as_caller_error(error, {"kp": -1}, source="PPOLag"))
        PPOLag: invalid value for "multiplier_kwargs['kp']": -1 (expected a number >= 0)
    """
    key = error.key
    if isinstance(key, str) and key in kwargs:
        key = f"multiplier_kwargs[{key!r}]"
    return ConfigError(key, error.value, error.reason, source=source)
