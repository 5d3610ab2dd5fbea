"""Simulated learners for curriculum tests: deterministic, stateless where resume is tested."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gymcurric.tasks import Curriculum

Outcome = Callable[[int, int], bool]


def coin(seed: int, p: float = 0.5) -> Outcome:
    """Every task succeeds with probability ``p``: scores carry no signal."""

    def outcome(task_id: int, episode: int) -> bool:
        return bool(np.random.default_rng([seed, task_id, episode]).random() < p)

    return outcome


class PracticeLearner:
    """Task kinds: 0 learnable (success rises with practice), 1 mastered, 2 impossible.

    A learnable task's success is ``sigmoid((n - c) / width)`` after ``n`` episodes on it, or,
    with ``linear=True``, ``min(1, n / c)`` (progress visible from the first episodes); ``c`` is
    drawn per task from ``centre``.
    """

    def __init__(
        self,
        kinds: dict[int, int] | np.ndarray,
        seed: int,
        width: float = 15.0,
        centre: tuple[float, float] = (30.0, 150.0),
        linear: bool = False,
    ) -> None:
        self.linear = linear
        self.kinds = kinds
        self.rng = np.random.default_rng(seed)
        self.practice: dict[int, int] = {}
        self.centre: dict[int, float] = {}
        self.width = width
        self.range = centre

    def kind(self, task_id: int) -> int:
        return int(self.kinds[task_id])

    def __call__(self, task_id: int, episode: int) -> bool:
        kind = self.kind(task_id)
        n = self.practice.get(task_id, 0)
        self.practice[task_id] = n + 1
        if kind == 1:
            return True
        if kind == 2:
            return False
        c = self.centre.setdefault(task_id, float(self.rng.uniform(*self.range)))
        p = min(1.0, n / c) if self.linear else 1.0 / (1.0 + np.exp(-(n - c) / self.width))
        return bool(self.rng.random() < p)


def run(cur: Curriculum, outcome: Outcome, episodes: int, start: int = 0) -> list[int]:
    """Sample one task per episode, report its success; return the sampled ids."""
    seq = []
    for ep in range(start, start + episodes):
        tid = int(cur.sample()[0])
        seq.append(tid)
        s = outcome(tid, ep)
        cur.update(tid, float(s), success=s)
    return seq
