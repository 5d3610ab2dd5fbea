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

Gate and fallbacks: ``M = 1.0`` (no modulation) until ``episodes_seen >= min_episodes`` (the
risk head has seen too little to be trusted), and on any anomaly in the data: an empty window,
a NaN/Inf value, or ``q_p <= 0`` (no risk observed yet, the relative scale is undefined). The
:attr:`Modulation.status` string says which case applied. Invalid *configuration* (``alpha < 0``,
``quantile_p`` outside ``(0, 1)``, ...) raises :class:`~gymcurric.errors.ConfigError` instead.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gymcurric.errors import ConfigError

__all__ = ["Modulation", "lagrange_modulation", "lagrange_modulation_scale"]

_CLIP = 20.0


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


def _check(name: str, value: float, ok: bool, reason: str) -> None:
    if not ok:
        raise ConfigError(name, value, reason, source="lagrange_modulation")


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

    Args:
        risk_values: the recent risk predictions; their mean is ``mean``.
        reference: the reference window of risk predictions ``q_p`` is taken from
            (``None``: ``risk_values``).
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
    _check("alpha", alpha, math.isfinite(alpha) and alpha >= 0, "must be finite and >= 0")
    _check("quantile_p", quantile_p, 0.0 < quantile_p < 1.0, "must be in (0, 1)")
    _check("slope", slope, math.isfinite(slope) and slope > 0, "must be finite and > 0")
    _check("eps", eps, math.isfinite(eps) and eps > 0, "must be finite and > 0")
    _check("min_episodes", min_episodes, min_episodes >= 0, "must be >= 0")
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
    if not (np.isfinite(recent).all() and np.isfinite(ref).all()):
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
        >>> lagrange_modulation_scale([float("nan")], episodes_seen=100)
        1.0
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
