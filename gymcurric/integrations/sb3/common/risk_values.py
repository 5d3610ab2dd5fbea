"""Risk values the Lagrangian agents' risk hook cannot read: the error path of one step.

:class:`~gymcurric.integrations.sb3.common.lagrangian.LagrangianMixin` reads every step's
``info["risk"]`` with ``float()``; only when that raises does it call
:func:`refuse_unreadable_risks`, so a step of numbers does no work here.
"""

from __future__ import annotations

from typing import Any

from gymcurric.errors import ConfigError

__all__ = ["refuse_unreadable_risks"]


def refuse_unreadable_risks(infos: list[dict[str, Any]], source: str) -> None:
    """Raise a ``ConfigError`` naming each sub-env whose ``info["risk"]`` is not a real number.

    A value ``float()`` cannot read (None, ``"high"``, a list) is a wiring mistake in the
    annotation, not a numerical anomaly: read as NaN it would turn the risk hook off (M = 1)
    for as long as it stays in the reference window, and a run meant to modulate λ would
    quietly train as plain PPOLag. A NaN or infinite value stays an anomaly (M = 1).

    Raises:
        ConfigError: from ``source`` (the agent's class name), keyed ``info['risk']``.
    """
    bad: list[tuple[int, Any]] = []
    for idx, info in enumerate(infos):
        if "risk" not in info:
            continue
        try:
            float(info["risk"])
        except (TypeError, ValueError):
            bad.append((idx, info["risk"]))
    if bad:  # float() raised for one of them; the caller saw it
        shown = ", ".join(f"sub-env {idx}: {value!r}" for idx, value in bad)
        raise ConfigError(
            "info['risk']",
            bad[0][1],
            f"expected a real number ({shown}); a NaN or infinite risk is read as an anomaly "
            "(M = 1), anything else is a mistake in the annotation",
            source=source,
        )
