"""The risk values of the Lagrangian agents' risk hook: every step's ``info["risk"]``, checked.

:class:`~gymcurric.integrations.sb3.common.lagrangian.LagrangianMixin` reads every step's
``info["risk"]`` with :func:`read_risks`: a number as ``float()`` reads it (a bool is 0 or 1),
text or bytes refused, as :func:`gymcurric.safety.costs.check_cost_values` refuses a cost
written so. A step whose risks NumPy reads as a number array
(:func:`gymcurric.safety.costs.numbers_only`) is read with ``float()`` alone, no check per
sub-env. Only when a value is refused does :func:`refuse_unreadable_risks` look at the step
again, to name every sub-env at fault, so a step of numbers does no work there.
"""

from __future__ import annotations

from typing import Any

from gymcurric._checks import shown
from gymcurric.errors import ConfigError
from gymcurric.safety.costs import check_cost_values, numbers_only

__all__ = ["read_risks", "refuse_unreadable_risks"]


def _risk(value: Any) -> float:
    """``float(value)``, after text or bytes (``"0.5"``, which ``float()`` reads) is refused."""
    check_cost_values(value, "info['risk']", what="risk")
    return float(value)


def _unreadable(value: Any) -> bool:
    try:
        _risk(value)
    except (TypeError, ValueError):  # a ConfigError is a ValueError
        return True
    return False


def read_risks(infos: list[dict[str, Any]], source: str) -> list[float]:
    """The ``info["risk"]`` of every sub-env that reports one, as floats.

    Args:
        infos: SB3's per-sub-env info dicts of one step.
        source: the agent's class name, for errors.

    Raises:
        ConfigError: from :func:`refuse_unreadable_risks`.

    Examples:
        >>> import numpy as np
        >>> read_risks([{"risk": np.float32(0.5)}, {}, {"risk": 2}], "PPOLag")
        [0.5, 2.0]
        >>> read_risks([{"risk": 0.5}, {"risk": "0.5"}], "PPOLag")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: PPOLag: invalid value for "info['risk']": '0.5' (...
    """
    values = [info["risk"] for info in infos if "risk" in info]
    try:  # the list is complete before the caller adds it
        if numbers_only(values):  # no text: one np.asarray, no check per sub-env
            return [float(value) for value in values]
        return [_risk(value) for value in values]
    except (TypeError, ValueError):
        refuse_unreadable_risks(infos, source)
        raise  # refused a value that refuse_unreadable_risks passes: not expected


def refuse_unreadable_risks(infos: list[dict[str, Any]], source: str) -> None:
    """Raise a ``ConfigError`` naming each sub-env whose ``info["risk"]`` is not a real number.

    A value ``float()`` cannot read (None, ``"high"``, a list) is a wiring mistake in the
    annotation, not a numerical anomaly. Read as NaN it would be left out of M, as a NaN risk
    is, under a warning given once per process (one that says nothing of the annotation): the
    sub-envs at fault would never count, and with every sub-env's risk unreadable M would stay
    1 and a run meant to modulate λ would quietly train as plain PPOLag. So is a
    risk written as text or bytes (``"0.5"``), which ``float()`` reads without a word. A NaN or
    infinite value stays an anomaly: :func:`gymcurric.safety.modulation.lagrange_modulation`
    leaves it out of the mean and of the reference quantile, and falls back to M = 1 for
    non-finite values only when no finite value is left among the rollout's risks or in the
    reference window.

    Raises:
        ConfigError: from ``source`` (the agent's class name), keyed ``info['risk']``.
    """
    bad = [(idx, info["risk"]) for idx, info in enumerate(infos) if "risk" in info]
    bad = [(idx, value) for idx, value in bad if _unreadable(value)]
    if bad:
        listed = ", ".join(f"sub-env {idx}: {shown(value)!r}" for idx, value in bad)
        raise ConfigError(
            "info['risk']",
            shown(bad[0][1]),
            f"expected a real number, a Python or numpy int, float or bool ({listed}); a risk "
            "written as text or bytes is refused rather than read as a number, an int too "
            "large for a float as well; a NaN or infinite risk is an anomaly, left out of M "
            "(M = 1 only when no finite risk is left), anything else is a mistake in the "
            "annotation",
            source=source,
        )
