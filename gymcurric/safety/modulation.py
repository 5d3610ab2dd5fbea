"""The risk-based Lagrange modulation scale ``M`` for a PPO-Lagrangian agent (numpy only).

Formula::

    z = clip((mean - q_p) / (q_p / slope + eps), -20, 20)
    M = 1 / (1 + alpha * sigmoid(z))

* ``mean``: the mean of the **recent** risk predictions (``risk_values``, e.g. the
  ``info["risk"]`` values of the last rollout).
* ``q_p``: the ``p``-quantile (``quantile_p``, numpy's default linear interpolation) of the
  risk predictions over a longer **reference window** (``reference``, e.g. the last 10,000
  predictions); when no reference is given, the quantile of ``risk_values`` itself. ``q_p`` is
  "what a high-risk state has looked like lately", so ``z`` measures how far the recent mean
  risk sits above that level, relative to it: ``slope`` sets the steepness (``z = 1`` when the
  mean exceeds ``q_p`` by ``q_p / slope``).
* ``M`` lies in ``[1 / (1 + alpha), 1]``: close to 1 while the recent risk is well below the
  quantile, ``1 / (1 + alpha / 2)`` at ``mean = q_p``, and ``1 / (1 + alpha)`` far above it.

Non-finite values: a NaN or infinite risk value (from a risk source of one's own:
:class:`~gymcurric.wrappers.risk.AnnotateRisk` reports a non-finite prediction as 0) is left
out of ``mean`` and of ``q_p``, which are computed from the finite values; a
:class:`~gymcurric.errors.GymcurricWarning` says so, once per process. Counting it in would
make ``M = 1`` for as long as it stayed in the reference window (10,000 values by default):
the modulation switched off, without a word, for many rollouts after one bad prediction.

Gate and fallbacks: ``M = 1.0`` (no modulation) until ``episodes_seen >= min_episodes`` (the
risk head has seen too little to be trusted), and on any anomaly in the data: an empty window,
no finite value among the recent values or in the window, or ``q_p <= 0`` (no risk observed
yet, the relative scale is undefined). The :attr:`Modulation.status` string says which case
applied. Invalid *configuration* (``alpha < 0``,
``quantile_p`` outside ``(0, 1)``, ...) raises :class:`~gymcurric.errors.ConfigError` instead.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from gymcurric._checks import check_int, finite_reason, is_real, shown
from gymcurric.errors import ConfigError, GymcurricWarning

__all__ = ["Modulation", "RiskModulation", "lagrange_modulation", "lagrange_modulation_scale"]

_CLIP = 20.0
#: whether :func:`lagrange_modulation` warned of non-finite risk values yet (once per process)
_NON_FINITE_WARNED: set[str] = set()


class Modulation(NamedTuple):
    """The scale and how it was obtained.

    Attributes:
        scale: ``M`` (1.0 on the gate or a fallback).
        mean: mean of the recent risk values (NaN when not computed).
        quantile: ``q_p`` (NaN when not computed).
        z: the clipped standardised excess (NaN when not computed).
        status: ``"ok"``, ``"gated"`` (too few episodes) or ``"fallback: <reason>"``.
    """

    scale: float
    mean: float
    quantile: float
    z: float
    status: str


def _scalar(value: Any) -> Any:
    """A 0-d numpy array's scalar (``np.array(2.0)`` -> ``np.float64(2.0)``); else ``value``."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _count(value: Any) -> bool:
    """Whether ``value`` is a real number (numpy's too, not a bool), of any size."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _check(name: str, value: Any, ok: bool, reason: str) -> None:
    if not ok:
        reason = finite_reason(value, reason)
        raise ConfigError(name, shown(value), reason, source="lagrange_modulation")


def lagrange_modulation(
    risk_values: npt.ArrayLike,
    reference: npt.ArrayLike | None = None,
    *,
    alpha: float = 1.0,
    quantile_p: float = 0.9,
    slope: float = 4.0,
    eps: float = 1e-6,
    min_episodes: int = 10,
    episodes_seen: int = 0,
) -> Modulation:
    """Compute ``M = 1 / (1 + alpha * sigmoid(clip((mean - q_p) / (q_p / slope + eps), ±20)))``.

    NaN and infinite values in either are left out (a warning says so, once per process).

    Args:
        risk_values: the recent risk predictions; the mean of the finite ones is ``mean``.
        reference: the reference window of risk predictions ``q_p`` is taken from (its finite
            values; ``None``: ``risk_values``).
        alpha: strength, ``>= 0`` (``M >= 1 / (1 + alpha)``).
        quantile_p: ``p`` in ``(0, 1)``.
        slope: steepness, ``> 0``.
        eps: keeps the denominator positive, ``> 0``.
        min_episodes: episodes the agent must have finished before ``M`` departs from 1.
        episodes_seen: episodes finished so far.

    Returns:
        :class:`Modulation`.

    Examples:
        >>> window = [0.0, 0.1, 0.2, 0.3, 1.0]
        >>> round(lagrange_modulation([2.0], window, episodes_seen=10).scale, 3)
        0.5
        >>> lagrange_modulation([2.0], window, episodes_seen=3).status
        'gated'
    """
    # a 0-d array (np.load) is its number, as before these checks
    alpha, quantile_p, slope, eps = map(_scalar, (alpha, quantile_p, slope, eps))
    min_episodes, episodes_seen = _scalar(min_episodes), _scalar(episodes_seen)
    # is_real first: the comparisons raise on a string, math.isfinite on an int too large for a
    # float
    finite = {
        name: is_real(v) and math.isfinite(v)
        for name, v in (("alpha", alpha), ("slope", slope), ("eps", eps))
    }
    _check("alpha", alpha, finite["alpha"] and alpha >= 0, "must be finite and >= 0")
    _check(
        "quantile_p", quantile_p, is_real(quantile_p) and 0 < quantile_p < 1, "must be in (0, 1)"
    )
    _check("slope", slope, finite["slope"] and slope > 0, "must be finite and > 0")
    _check("eps", eps, finite["eps"] and eps > 0, "must be finite and > 0")
    _check("min_episodes", min_episodes, _count(min_episodes) and min_episodes >= 0, "must be >= 0")
    _check("episodes_seen", episodes_seen, _count(episodes_seen), "must be a number")
    nan = float("nan")
    if episodes_seen < min_episodes:
        return Modulation(1.0, nan, nan, nan, "gated")
    try:
        recent = np.asarray(risk_values, dtype=np.float64).ravel()
        ref = recent if reference is None else np.asarray(reference, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        return Modulation(1.0, nan, nan, nan, f"fallback: unreadable risk values ({exc})")
    if recent.size == 0 or ref.size == 0:
        return Modulation(1.0, nan, nan, nan, "fallback: empty window")
    recent_ok, ref_ok = np.isfinite(recent), np.isfinite(ref)
    if not (recent_ok.all() and ref_ok.all()):  # all finite: the arrays as given, untouched
        _warn_non_finite(int((~recent_ok).sum()), recent.size, int((~ref_ok).sum()), ref.size)
        recent, ref = recent[recent_ok], ref[ref_ok]
        if recent.size == 0 or ref.size == 0:
            return Modulation(1.0, nan, nan, nan, "fallback: non-finite risk value")
    mean = float(recent.mean())
    q_p = float(np.quantile(ref, quantile_p))
    if not q_p > 0.0:
        return Modulation(1.0, mean, q_p, nan, "fallback: non-positive quantile")
    z = (mean - q_p) / (q_p / slope + eps)
    if not math.isfinite(z):
        return Modulation(1.0, mean, q_p, nan, "fallback: non-finite z")
    z = min(max(z, -_CLIP), _CLIP)
    sigma = 1.0 / (1.0 + math.exp(-z))
    scale = 1.0 / (1.0 + alpha * sigma)
    return Modulation(scale, mean, q_p, z, "ok")


def _warn_non_finite(recent_bad: int, recent_n: int, ref_bad: int, ref_n: int) -> None:
    if "lagrange_modulation" in _NON_FINITE_WARNED:
        return
    _NON_FINITE_WARNED.add("lagrange_modulation")
    warnings.warn(
        f"lagrange_modulation: {recent_bad} of {recent_n} recent risk values and {ref_bad} of "
        f"{ref_n} in the reference window are NaN or infinite (not from AnnotateRisk, which "
        "reports a non-finite prediction as 0); they are left out of the mean and the "
        "quantile, and M is computed from the finite ones (1 when none is left). Warned once "
        "per process",
        GymcurricWarning,
        stacklevel=3,
    )


def lagrange_modulation_scale(
    risk_values: npt.ArrayLike,
    reference: npt.ArrayLike | None = None,
    *,
    alpha: float = 1.0,
    quantile_p: float = 0.9,
    slope: float = 4.0,
    eps: float = 1e-6,
    min_episodes: int = 10,
    episodes_seen: int = 0,
) -> float:
    """Just the scale ``M`` of :func:`lagrange_modulation` (same arguments).

    Examples:
        >>> import warnings
        >>> window = [0.0, 0.1, 0.2, 0.3, 1.0]
        >>> with warnings.catch_warnings():  # NaN left out, once-per-process warning muted
        ...     warnings.simplefilter("ignore")
        ...     no_finite = lagrange_modulation_scale([float("nan")], episodes_seen=100)
        ...     with_nan = lagrange_modulation_scale([2.0, float("nan")], window + [float("nan")],
        ...                                          episodes_seen=10)
        >>> no_finite  # no finite value left
        1.0
        >>> with_nan == lagrange_modulation_scale([2.0], window, episodes_seen=10)
        True
    """
    return lagrange_modulation(
        risk_values,
        reference,
        alpha=alpha,
        quantile_p=quantile_p,
        slope=slope,
        eps=eps,
        min_episodes=min_episodes,
        episodes_seen=episodes_seen,
    ).scale


@dataclass(frozen=True)
class RiskModulation:
    """The settings of the Lagrangian agents' risk hook (``PPOLag(risk_modulation=...)``).

    With the hook on, the risk values the envs report in ``info["risk"]`` during a rollout scale
    λ's step of that rollout by :func:`lagrange_modulation`'s ``M``, the last
    ``reference_window`` values serving as the reference window. ``risk_modulation=None`` (or
    ``False``) leaves the hook off; ``True`` is ``RiskModulation()``; a dict of these fields is
    ``RiskModulation(**dict)``.

    Attributes:
        alpha: strength, ``>= 0`` (``M >= 1 / (1 + alpha)``).
        quantile_p: ``p`` of the reference quantile ``q_p``, in ``(0, 1)``.
        slope: steepness, ``> 0``.
        eps: keeps the denominator positive, ``> 0``.
        min_episodes: episodes the agent must have finished before ``M`` departs from 1 (``>= 0``).
        reference_window: how many recent risk values ``q_p`` is taken from (``>= 1``).

    Examples:
        >>> settings = RiskModulation.coerce({"alpha": 2.0})
        >>> settings.alpha, settings.reference_window
        (2.0, 10000)
        >>> RiskModulation.coerce(True) == RiskModulation(), RiskModulation.coerce(False)
        (True, None)
        >>> mod = RiskModulation(min_episodes=0).modulation([2.0], [0.0, 0.1, 0.2, 0.3, 1.0])
        >>> round(mod.scale, 3), mod.status
        (0.5, 'ok')
    """

    alpha: float = 1.0
    quantile_p: float = 0.9
    slope: float = 4.0
    eps: float = 1e-6
    min_episodes: int = 10
    reference_window: int = 10_000

    def __post_init__(self) -> None:
        src = "RiskModulation"
        for name in ("alpha", "quantile_p", "slope", "eps"):
            value = getattr(self, name)
            # is_real first: math.isfinite raises OverflowError on 10**400
            if not (is_real(value) and math.isfinite(value)):
                reason = finite_reason(value, "expected a finite number")
                raise ConfigError(name, shown(value), reason, source=src)
        if self.alpha < 0:
            raise ConfigError("alpha", self.alpha, "expected a number >= 0", source=src)
        if not 0.0 < self.quantile_p < 1.0:
            raise ConfigError(
                "quantile_p", self.quantile_p, "expected a number in (0, 1)", source=src
            )
        for name in ("slope", "eps"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "expected a number > 0", source=src)
        # numpy integers count, kept as the Python int of the same value
        check_int("min_episodes", self.min_episodes, minimum=0, source=src, allow_numpy=True)
        check_int("reference_window", self.reference_window, source=src, allow_numpy=True)
        for name in ("min_episodes", "reference_window"):
            object.__setattr__(self, name, int(getattr(self, name)))

    @classmethod
    def coerce(
        cls, value: RiskModulation | bool | dict[str, Any] | None, *, source: str | None = None
    ) -> RiskModulation | None:
        """The settings ``value`` stands for, or None for "off".

        Args:
            value: a :class:`RiskModulation`; ``True`` (the defaults); a dict of some of its
                fields; ``None`` or ``False`` (off).
            source: named in errors (the agent's class name).

        Raises:
            ConfigError: an unknown key (named, with the known ones), a bad value (keyed
                ``risk_modulation.<field>``) or a value of another type.
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ConfigError(
                "risk_modulation",
                value,
                "expected a RiskModulation, a bool, a dict of its fields or None",
                source=source,
            )
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(value) - set(known), key=str)
        if unknown:
            raise ConfigError(
                "risk_modulation",
                value,
                f"unknown keys {unknown}; expected some of {known}",
                source=source,
            )
        try:
            return cls(**value)
        except ConfigError as exc:
            raise ConfigError(
                f"risk_modulation.{exc.key}", exc.value, exc.reason, source=source
            ) from exc

    def modulation(
        self,
        risk_values: npt.ArrayLike,
        reference: npt.ArrayLike | None = None,
        *,
        episodes_seen: int = 0,
    ) -> Modulation:
        """:func:`lagrange_modulation` of ``risk_values`` with these settings."""
        return lagrange_modulation(
            risk_values,
            reference,
            alpha=self.alpha,
            quantile_p=self.quantile_p,
            slope=self.slope,
            eps=self.eps,
            min_episodes=self.min_episodes,
            episodes_seen=episodes_seen,
        )
