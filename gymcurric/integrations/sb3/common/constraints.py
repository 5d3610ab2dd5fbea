"""The constraints of the Lagrangian agents: their limits, where each cost is read, checks.

One constraint (``cost_limit=25.0``, as before issue 25) reads the cost of every step from
``info["cost"]``. Several (``cost_limit=[25.0, 10.0]``) read a vector of ``K`` costs per step,
from ``info["costs"]`` (a 1-D float array of length ``K``, one entry per constraint, beside
``info["cost"]``, their sum) or from the named info keys ``cost_keys`` (e.g.
``("cost_hazards", "cost_vases_contact")``, the per-source costs Safety-Gymnasium reports).

With one constraint every array keeps the scalar layout (costs of shape ``(n_envs,)``, a float
limit), whether the limit came as a number or as a sequence of one; with ``K > 1`` costs have a
trailing axis of size ``K`` and the limit is an array.

A step whose cost is missing, of the wrong length or not a real number (None included, which
NumPy would read as NaN; text or bytes, ``"0.5"``, which NumPy would read as a number:
:func:`gymcurric.safety.costs.check_cost_values`) raises :class:`~gymcurric.errors.ConfigError`;
a NaN or infinite one raises :class:`~gymcurric.errors.NonFiniteValueError`, as a scalar
``info["cost"]`` always has. Both name the info key, the sub-envs and the values received. A
bool (an indicator cost, ``info["cost"] = collided``) is read as 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from gymcurric.errors import ConfigError, NonFiniteValueError
from gymcurric.integrations.sb3.common.multiplier_checks import as_real
from gymcurric.safety.costs import check_cost_values, numbers_only

__all__ = [
    "CostLimits",
    "check_sub_env_costs",
    "checked_schedule",
    "mean_episode_cost",
    "parse_constraints",
    "read_costs",
    "record_per_constraint",
]


class checked_schedule:  # lower case: used like SB3's schedule helpers
    """A constant or an SB3 schedule (``progress_remaining -> float``) checked on every call.

    Args:
        name: the parameter name, for errors.
        value: a real number (a NumPy scalar is kept as the Python float of the same value;
            a bool or a string is refused) or a callable.
        minimum: the smallest allowed value.
        source: the class name, for errors.

    Examples:
        >>> checked_schedule("cost_limit", lambda p: 10.0 * p, minimum=0.0)(0.5)
        5.0
    """

    def __init__(self, name: str, value: Any, *, minimum: float = 0.0, source: str = "") -> None:
        if not callable(value):
            real = as_real(value)
            if real is None:
                raise ConfigError(
                    name,
                    value,
                    "expected a number or a schedule progress_remaining -> float",
                    source=source,
                )
            if type(value) is not int and type(value) is not float:
                value = real  # a NumPy scalar (np.float32(5)): its Python float
        self.name, self.value, self.minimum, self.source = name, value, minimum, source
        self(1.0)  # validate now, not a rollout later

    def __call__(self, progress_remaining: float) -> float:
        """The value at ``progress_remaining`` (1 at the start of learning, 0 at the end)."""
        try:
            out = self.value(progress_remaining) if callable(self.value) else self.value
        except Exception as exc:
            raise ConfigError(
                self.name, self.value, f"the schedule raised {exc!r}", source=self.source
            ) from exc
        if isinstance(out, bool) or not isinstance(out, int | float | np.floating | np.integer):
            raise ConfigError(
                self.name,
                self.value,
                f"the schedule returned {out!r} at progress_remaining={progress_remaining:g}; "
                "expected a number",
                source=self.source,
            )
        out = float(out)
        if not math.isfinite(out) or out < self.minimum:
            raise ConfigError(
                self.name,
                self.value,
                f"value {out!r} at progress_remaining={progress_remaining:g}; expected a finite "
                f"number >= {self.minimum:g}",
                source=self.source,
            )
        return out


class CostLimits:
    """``K > 1`` cost limits, each a number or a schedule; called, an array of shape ``(K,)``.

    Args:
        limits: the checked limit of each constraint.

    Examples:
        >>> limits = CostLimits([checked_schedule("d0", 25.0), checked_schedule("d1", 5.0)])
        >>> limits(1.0).tolist(), len(limits)
        ([25.0, 5.0], 2)
    """

    def __init__(self, limits: Iterable[checked_schedule]) -> None:
        self.limits = tuple(limits)

    def __len__(self) -> int:
        """``K``."""
        return len(self.limits)

    def __call__(self, progress_remaining: float) -> np.ndarray:
        """Every limit at ``progress_remaining``, float64."""
        return np.array([d(progress_remaining) for d in self.limits], dtype=np.float64)


def _is_sequence(value: Any) -> bool:
    """A list, tuple or array of one or more dimensions (a 0-d array is one number)."""
    if isinstance(value, np.ndarray):
        return value.ndim > 0
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def parse_constraints(
    cost_limit: Any, cost_keys: Any, *, source: str
) -> tuple[checked_schedule | CostLimits, tuple[str, ...] | None, int, bool]:
    """Check ``cost_limit`` and ``cost_keys``; return ``(limit, keys, K, vector)``.

    Args:
        cost_limit: a number or schedule (one constraint, read from ``info["cost"]``), or a
            sequence of ``K`` of them (``K`` constraints, read from ``info["costs"]``).
        cost_keys: None, or the ``K`` info keys to read the costs from instead.
        source: the class name, for errors.

    Returns:
        ``limit`` (a :class:`checked_schedule` for ``K = 1``, else :class:`CostLimits`),
        ``keys``, ``K``, and ``vector``: whether the costs are read from ``info["costs"]`` or
        ``keys`` rather than from ``info["cost"]``.

    Examples:
        >>> _, keys, k, vector = parse_constraints([25.0, 5.0], None, source="doc")
        >>> keys, k, vector
        (None, 2, True)
        >>> parse_constraints(25.0, None, source="doc")[1:]
        (None, 1, False)
    """
    keys: tuple[str, ...] | None = None
    if cost_keys is not None:
        if not _is_sequence(cost_keys) or not cost_keys:
            raise ConfigError(
                "cost_keys",
                cost_keys,
                "expected a non-empty sequence of info keys, "
                "e.g. ('cost_hazards', 'cost_vases_contact')",
                source=source,
            )
        keys = tuple(cost_keys)
        bad = [k for k in keys if not isinstance(k, str) or not k]
        if bad or len(set(keys)) != len(keys):
            raise ConfigError(
                "cost_keys", cost_keys, "expected distinct non-empty strings", source=source
            )
    if not _is_sequence(cost_limit):
        limit = checked_schedule("cost_limit", cost_limit, source=source)
        if keys is not None and len(keys) != 1:
            raise ConfigError(
                "cost_limit",
                cost_limit,
                f"one limit for {len(keys)} cost_keys {list(keys)}: give one limit per key "
                f"(a sequence of {len(keys)})",
                source=source,
            )
        return limit, keys, 1, keys is not None
    if len(cost_limit) == 0:
        raise ConfigError("cost_limit", cost_limit, "expected at least one limit", source=source)
    limits = [
        checked_schedule(f"cost_limit[{k}]", d, source=source) for k, d in enumerate(cost_limit)
    ]
    if keys is not None and len(keys) != len(limits):
        raise ConfigError(
            "cost_keys",
            cost_keys,
            f"{len(keys)} cost_keys for {len(limits)} cost limits; give one key per limit",
            source=source,
        )
    if len(limits) == 1:
        return limits[0], keys, 1, True
    return CostLimits(limits), keys, len(limits), True


def read_costs(
    infos: Sequence[dict[str, Any]],
    *,
    n_costs: int,
    vector: bool,
    keys: tuple[str, ...] | None,
    source: str,
) -> np.ndarray:
    """This step's costs per sub-env, float64: ``(n_envs,)`` if ``K = 1``, else ``(n_envs, K)``.

    Args:
        infos: SB3's per-sub-env info dicts.
        n_costs: ``K``.
        vector: read ``info["costs"]`` (or ``keys``) rather than ``info["cost"]``.
        keys: the info keys of the ``K`` costs, or None.
        source: the class name, for errors.

    Raises:
        ConfigError: a cost is missing, not a real number (text or bytes included), or
            ``info["costs"]`` has not ``K`` entries.
        NonFiniteValueError: a cost is NaN or infinite.
    """
    if not vector:
        return _read_key(infos, "cost", source)
    if keys is not None:
        costs = np.stack([_read_key(infos, key, source) for key in keys], axis=1)
    else:
        costs = _read_vectors(infos, n_costs, source)
    return costs[:, 0] if n_costs == 1 else costs


def _missing(infos: Sequence[dict[str, Any]], key: str, source: str) -> None:
    missing = [i for i, info in enumerate(infos) if key not in info]
    if not missing:
        return
    hint = (
        "gymcurric envs and the safety-gymnasium loader provide it; wrap other envs in "
        "gymcurric.wrappers.AnnotateCost"
        if key == "cost"
        else "check the env's info keys (cost_keys) or the number of cost limits"
    )
    raise ConfigError(
        f"info[{key!r}]",
        None,
        f"sub-envs {missing} reported no info[{key!r}]: {source} reads the cost of every step "
        f"from it ({hint})",
        source=source,
    )


def check_sub_env_costs(values: Sequence[Any], key: str, source: str) -> None:
    """:func:`~gymcurric.safety.costs.check_cost_values` of each sub-env's cost (or costs).

    Text or bytes (``"0.5"``, ``b"1"``), which NumPy and ``float()`` read as a number, is a
    ``ConfigError`` naming ``key``, the sub-env and the value; a bool is an indicator (0 or 1).
    A step whose values NumPy reads as a number array is passed at once
    (:func:`~gymcurric.safety.costs.numbers_only`).

    Args:
        values: one entry per sub-env (SB3's ``infos``, read at ``key``).
        key: the info key, as named in errors (``"info['cost']"``).
        source: the class name, for errors.

    Examples:
        >>> check_sub_env_costs([0.5, True], "info['cost']", "PPOLag")
        >>> check_sub_env_costs([0.5, "1"], "info['cost']", "PPOLag")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: PPOLag: invalid value for "info['cost']": '1' (sub-env 1: ...
    """
    if numbers_only(values):  # a step of numbers: one np.asarray, no call per sub-env
        return
    for env, value in enumerate(values):
        try:
            check_cost_values(value, key, source=source)
        except ConfigError as exc:
            reason = f"sub-env {env}: {exc.reason}"
            raise ConfigError(key, exc.value, reason, source=source) from None


def _read_key(infos: Sequence[dict[str, Any]], key: str, source: str) -> np.ndarray:
    _missing(infos, key, source)
    values = [info[key] for info in infos]
    check_sub_env_costs(values, f"info[{key!r}]", source)
    try:
        costs = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        costs = np.empty(0)
    if costs.shape != (len(infos),):
        raise ConfigError(
            f"info[{key!r}]", values, "expected one real number per sub-env", source=source
        )
    if not np.all(np.isfinite(costs)):
        # only here, off the path of finite costs: NumPy reads None as NaN
        _refuse_none(values, f"info[{key!r}]", values, "sub-envs {} reported None", source)
        bad = np.flatnonzero(~np.isfinite(costs)).tolist()
        hint = (
            "; wrap the env in gymcurric.wrappers.AnnotateCost(nonfinite=...) to replace them"
            if key == "cost"
            else ""
        )
        raise NonFiniteValueError(
            f"{source}: non-finite info[{key!r}] {costs.tolist()} (sub-envs {bad}){hint}"
        )
    return costs


def _refuse_none(entries: Any, key: str, value: Any, what: str, source: str) -> None:
    """A ``ConfigError`` if an entry is None (NumPy reads it as NaN): it is not a real number.

    ``what`` is formatted with the indices of the None entries.
    """
    flat = np.asarray(entries, dtype=object).ravel().tolist()
    nones = [i for i, v in enumerate(flat) if v is None]
    if nones:
        raise ConfigError(key, value, f"{what.format(nones)}, not a real number", source=source)


def _read_vectors(infos: Sequence[dict[str, Any]], n_costs: int, source: str) -> np.ndarray:
    _missing(infos, "costs", source)
    check_sub_env_costs([info["costs"] for info in infos], "info['costs']", source)
    out = np.empty((len(infos), n_costs), dtype=np.float64)
    for i, info in enumerate(infos):
        value = info["costs"]
        try:
            row = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError(
                "info['costs']",
                value,
                f"sub-env {i}: expected a 1-D array of {n_costs} real numbers",
                source=source,
            ) from None
        if row.shape != (n_costs,):
            got = f"{row.shape[0]} costs" if row.ndim == 1 else f"an array of shape {row.shape}"
            raise ConfigError(
                "info['costs']",
                value,
                f"sub-env {i} reported {got}, but cost_limit has {n_costs} limits (one per "
                "constraint): the two lengths must match",
                source=source,
            )
        if not np.all(np.isfinite(row)):
            _refuse_none(
                value, "info['costs']", value, f"sub-env {i}: entries {{}} are None", source
            )
            raise NonFiniteValueError(
                f"{source}: non-finite info['costs'] {row.tolist()} from sub-env {i} (entries "
                f"{np.flatnonzero(~np.isfinite(row)).tolist()})"
            )
        out[i] = row
    return out


def mean_episode_cost(episodes: Iterable[Any], n_costs: int) -> float | np.ndarray:
    """``J_c``: the mean of a window of episode costs (floats, or ``K``-tuples if ``K > 1``).

    Examples:
        >>> mean_episode_cost([1.0, 2.0], 1), mean_episode_cost([(1.0, 0.0), (3.0, 2.0)], 2)
        (1.5, array([2., 1.]))
    """
    if n_costs == 1:
        return float(np.mean(list(episodes)))  # as before issue 25: same float, same order
    return np.mean(np.asarray(list(episodes), dtype=np.float64).reshape(-1, n_costs), axis=0)


def record_per_constraint(record: Any, key: str, value: Any, n_costs: int) -> None:
    """Log ``key`` and, with ``K > 1`` constraints, ``key_0`` ... ``key_{K-1}``.

    With one constraint ``value`` is logged as it is. With several, ``key`` gets their sum (the
    total over constraints: episode cost, limit, Σλ_k, cost-critic loss) and ``key_k`` each one.

    Args:
        record: the logger's ``record``.
        key: the aggregate key, e.g. ``"train/lagrange_multiplier"``.
        value: a float (``K = 1``) or ``K`` numbers.
        n_costs: ``K``.
    """
    if n_costs == 1:
        record(key, float(value))
        return
    values = np.asarray(value, dtype=np.float64).reshape(n_costs)
    record(key, float(values.sum()))
    for k, v in enumerate(values.tolist()):
        record(f"{key}_{k}", v)
