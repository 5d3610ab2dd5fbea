"""Lazy imports of optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from gymcurric.errors import DependencyNotInstalled


def import_optional(module: str, extra: str, *, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`DependencyNotInstalled` naming ``extra``.

    Args:
        module: the module to import, e.g. ``"stable_baselines3"``.
        extra: the gymcurric extra that provides it, e.g. ``"sb3"``.
        purpose: what needs it, for the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = f" {purpose}" if purpose else ""
        raise DependencyNotInstalled(
            f"{module!r} is required{what} but could not be imported ({exc}); "
            f'install it with: pip install "gymcurric[{extra}]"'
        ) from exc
