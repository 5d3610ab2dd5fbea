"""Task spaces, curriculum configs and an outcome shared by the curriculum tests.

Used by ``test_curriculum.py`` (a resumed run gives the uninterrupted task sequence) and
``test_shared_backend.py`` (a shared backend gives the local sequence and resumes across
backends): :func:`resume_configs` names the curricula both run with :func:`stateless_outcome`.
``test_transport.py`` takes :func:`fixed_space` too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gymcurric.tasks import (
    BoxTaskSpace,
    BucketedTaskSpace,
    CurriculumConfig,
    DualPool,
    FixedTaskSpace,
    LearnabilityScorer,
    OpenEndedPool,
    SequentialScorer,
    Span,
    Stage,
    StopCondition,
)


def fixed_space(n: int) -> FixedTaskSpace:
    """``n`` tasks ``{"i": 0}`` to ``{"i": n - 1}``."""
    return FixedTaskSpace([{"i": i} for i in range(n)])


def bucketed_space(seed: int = 0, **kw: Any) -> BucketedTaskSpace:
    """Two fields, ``a`` in 0-100 and ``b`` in 0.0-1.0, one bucket each."""
    return BucketedTaskSpace({"a": [Span(0, 100)], "b": [Span(0.0, 1.0)]}, seed=seed, **kw)


def resume_configs() -> dict[str, tuple[Callable[[], Any], CurriculumConfig]]:
    """By name: a function making a fresh task space, and the config of its curriculum."""
    return {
        "fixed-lp": (lambda: fixed_space(40), CurriculumConfig(recompute_every=7)),
        "open-ended": (
            lambda: bucketed_space(),
            CurriculumConfig(pool=OpenEndedPool(capacity=25, min_samples=8), recompute_every=5),
        ),
        "dual": (
            lambda: bucketed_space(),
            CurriculumConfig(
                pool=DualPool(explore_size=10, exploit_size=15, min_samples=6, window=20),
                recompute_every=3,
            ),
        ),
        "box-learnability": (
            lambda: BoxTaskSpace([0.0, 0.0], [1.0, 2.0], bins=(4, 3)),
            CurriculumConfig(scorer=LearnabilityScorer()),
        ),
        "sequential": (
            lambda: fixed_space(6),
            CurriculumConfig(
                scorer=SequentialScorer(
                    (
                        Stage((0, 1), StopCondition(min_episodes=300)),
                        Stage((2, 3), StopCondition(max_episodes=400)),
                        Stage((4, 5)),
                    )
                )
            ),
        ),
    }


def stateless_outcome(tid: int, ep: int) -> bool:
    """Success of task ``tid`` at episode ``ep``: a function of the two only, for resumed runs."""
    rng = np.random.default_rng([tid % 1000, ep])
    return bool(rng.random() < (0.2 + 0.6 * ((tid % 7) / 6) * min(ep / 2000, 1.0)))
