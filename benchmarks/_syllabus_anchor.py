"""The Syllabus side of ``curriculum_overhead.py``: import it cleanly, and make it run on numpy 2.

Kept apart from the benchmark so the adapter (and what it works around) is easy to audit.
Nothing here is imported unless Syllabus is installed (``make bench`` installs syllabus-rl).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
from types import SimpleNamespace
from typing import Any

import numpy as np

from gymcurric.tasks import CurriculumConfig

__all__ = ["cadence", "load_syllabus", "syllabus_lp", "unpatched_syllabus_sample"]


class _NumpyTwoDist(np.ndarray):
    """A probability vector on which Syllabus's ``sample`` can run under numpy >= 2.

    ``Curriculum.sample`` tests ``if task_dist != []:``; numpy >= 2 raises on that comparison
    (shapes ``(n,)`` and ``(0,)`` do not broadcast). This view answers that one test as numpy 1
    effectively did and behaves as a plain array everywhere else.
    """

    def __ne__(self, other: object) -> Any:
        if isinstance(other, list) and not other:
            return True
        return super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]


@functools.cache
def load_syllabus() -> SimpleNamespace | None:
    """Import Syllabus with its import-time side effects undone; ``None`` if not installed.

    ``import syllabus.curricula`` runs ``np.seterr(all="raise")`` for the whole process (it would
    turn underflows in gymcurric's numpy code, and in Syllabus's own EMAs, into exceptions), and
    ``import syllabus.core`` allocates a shared-memory segment that nothing unlinks
    (``GymnasiumEvaluationWrapper.env_count``). The error state is restored and the segment
    unlinked.
    """
    saved = np.geterr()
    try:
        import syllabus.core as core
        import syllabus.curricula as curricula
        import syllabus.task_space as task_space
    except ImportError:
        return None
    finally:
        np.seterr(**saved)
    with contextlib.suppress(Exception):
        core.GymnasiumEvaluationWrapper.env_count.shm.unlink()

    class PatchedOnlineLearningProgress(curricula.OnlineLearningProgress):  # type: ignore[misc]
        """``OnlineLearningProgress`` whose distribution passes ``sample``'s ``!= []`` test."""

        def _sample_distribution(self) -> Any:
            return np.asarray(super()._sample_distribution()).view(_NumpyTwoDist)

    return SimpleNamespace(
        core=core,
        curricula=curricula,
        task_space=task_space,
        LP=PatchedOnlineLearningProgress,
        version=importlib.metadata.version("syllabus-rl"),
    )


def syllabus_lp(syl: SimpleNamespace, n: int, patched: bool = True) -> Any:
    cls = syl.LP if patched else syl.curricula.OnlineLearningProgress
    return cls(syl.task_space.DiscreteTaskSpace(n), update_interval=cadence(n))


def cadence(n: int) -> int:
    """gymcurric's default recompute cadence for a pool of ``n`` tasks (used for both)."""
    return CurriculumConfig().cadence(n)


def unpatched_syllabus_sample(syl: SimpleNamespace, episode_length: int) -> str:
    """What plain ``OnlineLearningProgress.sample`` does on this numpy: ``"ok"`` or the error."""
    cur = syllabus_lp(syl, 100, patched=False)
    try:
        for tid in range(2 * cadence(100)):
            cur.update_task_progress(tid % 100, tid % 2 == 0)
            cur.update_on_episode(1.0, episode_length, tid % 100, tid % 2 == 0)
        cur.sample(k=1)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"
