"""A progress bar over env steps (tqdm), spanning every ``learn()`` chunk of a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def run_with_progress(
    enabled: bool, total: int, initial: int, job: Callable[[Callable[[int], None] | None], T]
) -> T:
    """Run ``job(update)`` with a tqdm bar that ``update(n)`` advances (no bar: ``None``)."""
    if not enabled:
        return job(None)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the sb3 extra
        return job(None)
    bar: Any = tqdm(
        total=total,
        initial=initial,
        unit="step",
        unit_scale=True,
        dynamic_ncols=True,
        desc="training",
    )

    def update(n: int) -> None:
        if bar.n + n > bar.total:  # on-policy agents finish their last rollout
            bar.total = bar.n + n
        bar.update(n)

    try:
        return job(update)
    finally:
        bar.close()
