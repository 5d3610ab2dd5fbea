"""A progress bar over env steps (tqdm), spanning every ``learn()`` chunk of a run."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from gymcurric.errors import GymcurricWarning

T = TypeVar("T")


class _BarStream:
    """stderr for the bar: a write or flush that fails is recorded, not raised into training."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                return self.stream.write(text)
            except OSError as exc:  # 2>/dev/full (ENOSPC), a closed pipe, an I/O error
                self.failed = exc
        return len(text)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self.failed = exc

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno: tqdm's layout
        return getattr(self.stream, name)


def run_with_progress(
    enabled: bool, total: int, initial: int, job: Callable[[Callable[[int], None] | None], T]
) -> T:
    """Run ``job(update)`` with a tqdm bar that ``update(n)`` advances (no bar: ``None``).

    The bar is cosmetic: where stderr cannot be written (``2>/dev/full``, a closed pipe) it is
    switched off with one warning (which may not be seen either) and the job goes on.
    """
    if not enabled or sys.stderr is None:  # started with stderr closed (2>&-)
        return job(None)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the sb3 extra
        return job(None)
    stream = _BarStream(sys.stderr)
    bar: Any = tqdm(
        total=total,
        initial=initial,
        unit="step",
        unit_scale=True,
        dynamic_ncols=True,
        desc="training",
        file=stream,
    )
    on = True

    def check() -> None:
        nonlocal on
        if on and stream.failed is not None:
            on = False
            bar.disable = True  # no more drawing (its close() then writes nothing either)
            warnings.warn(
                f"the progress bar is switched off: cannot write to stderr ({stream.failed}); "
                "training goes on",
                GymcurricWarning,
                stacklevel=3,
            )

    def update(n: int) -> None:
        if not on:
            return
        if bar.n + n > bar.total:  # on-policy agents finish their last rollout
            bar.total = bar.n + n
        bar.update(n)
        check()

    check()  # the bar's first drawing
    try:
        return job(update)
    finally:
        bar.close()
        check()
