"""Old names kept for one release: the renames, and the module ``__getattr__`` that serves them.

The wrappers were renamed to one scheme (issue 22): single-env wrappers verb-first, Gymnasium
style; vector twins the same name in :mod:`gymcurric.wrappers.vector`; SB3 ``VecEnvWrapper`` twins
``Vec`` + that name. :data:`RENAMED` is the one list of old → new class names; the modules that
exported an old name serve it through :func:`alias_getattr` (the new class itself, so
``isinstance`` checks and pickles of the old name keep working) with a ``DeprecationWarning``,
and ``gymcurric train`` reads checkpoints that stored the old names through it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["RENAMED", "alias_getattr", "current_name"]

#: Old class name → new class name. The old names are kept for one release, then removed.
RENAMED: dict[str, str] = {
    "CurriculumTask": "SampleCurriculumTask",
    "DatapackTask": "PresentDatapack",
    "SauteBudget": "AugmentStateSaute",
    "VecDatapackTask": "VecPresentDatapack",
    "VecSemanticShaping": "VecShapeRewardSemantic",
}


def current_name(name: str) -> str:
    """Today's name of a class saved under ``name`` (which may be an old one)."""
    return RENAMED.get(name, name)


def alias_getattr(module: str, *old_names: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``old_names`` (keys of :data:`RENAMED`) with a warning.

    Args:
        module: the ``__name__`` of the module that defines the new names.
        *old_names: the old names that module used to export.

    Returns:
        The function to bind as the module's ``__getattr__``: for an old name it warns
        (``DeprecationWarning`` naming the new one) and returns the new class; any other name
        raises ``AttributeError`` as usual.
    """
    aliases = {old: RENAMED[old] for old in old_names}

    def __getattr__(name: str) -> Any:
        new = aliases.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated: it was renamed {module}.{new} (the same class); "
            "the old name is kept for one release only",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(sys.modules[module], new)

    return __getattr__
