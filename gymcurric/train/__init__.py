"""``gymcurric train``: one config composes env, wrappers and agent; runs into a directory.

Entry-point layer (see DESIGN.md): it may import every other layer. Importing this package
needs only numpy and gymnasium; SB3, torch and matplotlib are imported when a run starts, and
:func:`train` / :func:`resume` without them raise
:class:`~gymcurric.errors.DependencyNotInstalled` naming ``pip install "gymcurric[train]"``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from gymcurric._optional import missing_extra
from gymcurric.train import runner as _runner
from gymcurric.train.config import Setting, TrainConfig, apply_overrides, load_config
from gymcurric.train.runner import RunResult, default_run_name

__all__ = [
    "RunResult",
    "Setting",
    "TrainConfig",
    "apply_overrides",
    "default_run_name",
    "load_config",
    "resume",
    "train",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _needs_train_extra(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn``, raising DependencyNotInstalled naming ``[train]`` where a module is missing."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except ImportError as exc:
            err = missing_extra(exc, "train", purpose=f"by gymcurric.train.{fn.__name__}()")
            if err is None:
                raise
            raise err from exc

    return run


train = _needs_train_extra(_runner.train)
resume = _needs_train_extra(_runner.resume)
