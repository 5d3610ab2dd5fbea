"""Risk values the Lagrangian agents' risk hook cannot read: the error path of one step.

:class:`~gymcurric.integrations.sb3.common.lagrangian.LagrangianMixin` reads every step's
``info["risk"]`` with ``float()``; only when that raises does it call :func:`unreadable_risks`,
so a step of numbers does no work here.
"""

from __future__ import annotations

import warnings
from typing import Any

from gymcurric.errors import GymcurricWarning

__all__ = ["unreadable_risks"]


def unreadable_risks(
    infos: list[dict[str, Any]], source: str, *, warned: bool
) -> tuple[list[float], bool]:
    """This step's risk values with NaN for each one that is not a real number; warn once.

    A risk value ``float()`` cannot read (None, ``"high"``) is an anomaly, as a NaN one is:
    read as NaN, it makes the rollout's ``M`` 1 (and every rollout's while it is in the
    reference window), where it used to stop the rollout with a TypeError or ValueError.
    Unless ``warned``, a :class:`~gymcurric.errors.GymcurricWarning` from ``source`` (the
    agent's class name) names the sub-envs and the values.

    Returns:
        The values, and whether the warning has now been given (once per model).
    """
    out: list[float] = []
    bad: list[tuple[int, Any]] = []
    for idx, info in enumerate(infos):
        if "risk" not in info:
            continue
        try:
            out.append(float(info["risk"]))
        except (TypeError, ValueError):
            out.append(float("nan"))
            bad.append((idx, info["risk"]))
    if bad and not warned:
        warned = True
        shown = ", ".join(f"sub-env {idx}: {value!r}" for idx, value in bad)
        warnings.warn(
            f"{source}: info['risk'] is not a real number ({shown}); read as "
            "NaN, an anomaly: the risk modulation M is 1 while it is in the reference "
            "window (warned once)",
            GymcurricWarning,
            stacklevel=3,
        )
    return out, warned
