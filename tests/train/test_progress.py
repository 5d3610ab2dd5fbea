"""The progress bar of ``gymcurric train | resume | demo``: cosmetic, it never ends a run."""

from __future__ import annotations

import errno
import io
import sys
from typing import Any

import pytest

from gymcurric.errors import GymcurricWarning
from gymcurric.train._progress import run_with_progress


class _FullStream(io.StringIO):
    """stderr on a full disk: every write and flush after the first ``good`` writes fails."""

    def __init__(self, good: int) -> None:
        super().__init__()
        self.good = good

    def write(self, text: str) -> int:
        if self.good <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.good -= 1
        return super().write(text)

    def flush(self) -> None:
        if self.good <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")


def _job(update: Any) -> str:
    for _ in range(50):
        update(2)
    return "trained"


@pytest.mark.parametrize("good", [0, 1], ids=["from-the-start", "part-way"])
def test_a_bar_that_cannot_be_written_is_switched_off_and_the_job_goes_on(monkeypatch, good):
    # tqdm's OSError (2>/dev/full) ended the run with exit 1: from its first drawing, or
    # part way (here at its close)
    monkeypatch.setattr(sys, "stderr", _FullStream(good))
    with pytest.warns(GymcurricWarning, match="progress bar is switched off") as caught:
        assert run_with_progress(True, 100, 0, _job) == "trained"
    said = [w for w in caught if "progress bar" in str(w.message)]
    assert len(said) == 1 and "No space left on device" in str(said[0].message)


def test_a_bar_that_can_be_written_is_drawn(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    assert run_with_progress(True, 100, 0, _job) == "trained"
    assert "training: 100%" in stream.getvalue()


def test_no_stderr_at_all_runs_the_job_without_a_bar(monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)  # started with 2>&-
    assert run_with_progress(True, 100, 0, lambda update: update) is None
