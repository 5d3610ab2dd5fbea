"""Sequential (stage) curricula: train on one group of tasks until a stopping condition holds.

The stage index and the stage's running statistics live in the curriculum state
(``counters[K.STAGE]``, ``counters[K.STAGE_EPISODES]``, ``scalars[S.STAGE_SUCCESS]``,
``scalars[S.STAGE_RETURN]``), so a checkpoint resumes in the right stage. Within a stage the
``inner`` scorer (uniform by default, or learning progress) chooses among the stage's tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gymcurric._checks import check_int, is_finite_number, is_int, shown
from gymcurric.errors import ConfigError
from gymcurric.tasks.scorers import Scorer, UniformScorer
from gymcurric.tasks.signals import SignalConfig
from gymcurric.tasks.state import CurriculumState, K, S

if TYPE_CHECKING:
    from gymcurric.tasks.pools import Pool
    from gymcurric.tasks.spaces import TaskSpace

__all__ = ["SequentialScorer", "Stage", "StopCondition"]


def _opt_num(v: Any) -> bool:
    return v is None or is_finite_number(v)  # an int too large for a float is not


@dataclass(frozen=True)
class StopCondition:
    """When a stage ends.

    The stage ends once it has ``min_episodes`` episodes *and* every given threshold holds
    (success EMA >= ``success_rate``, return EMA >= ``mean_return``), or as soon as it has
    ``max_episodes`` episodes. The EMAs use rate ``2 / (window + 1)`` over the stage's episodes
    (the signal ``s`` for success, the raw return for ``mean_return``).

    Attributes:
        min_episodes: episodes required before the stage may end.
        max_episodes: episodes after which the stage ends regardless (None: no limit).
        success_rate: threshold on the success EMA, in ``[0, 1]`` (None: not required).
        mean_return: threshold on the return EMA (None: not required).
        window: EMA horizon in episodes, >= 1.
    """

    min_episodes: int = 0
    max_episodes: int | None = None
    success_rate: float | None = None
    mean_return: float | None = None
    window: int = 50

    def __post_init__(self) -> None:
        c = "StopCondition"
        for name in ("min_episodes", "window"):
            check_int(
                name,
                getattr(self, name),
                minimum=1 if name == "window" else 0,
                source=c,
                reason="expected a non-negative int (window >= 1)",
            )
        check_int("max_episodes", self.max_episodes, source=c, optional=True)
        if not _opt_num(self.success_rate) or (
            self.success_rate is not None and not 0 <= self.success_rate <= 1
        ):
            reason = "expected None or a float in [0, 1]"
            raise ConfigError("success_rate", shown(self.success_rate), reason, source=c)
        if not _opt_num(self.mean_return):
            reason = "expected None or a finite float"
            raise ConfigError("mean_return", shown(self.mean_return), reason, source=c)
        if (
            self.min_episodes == 0
            and self.max_episodes is None
            and self.success_rate is None
            and self.mean_return is None
        ):
            raise ConfigError(
                "min_episodes", 0, "a StopCondition needs at least one criterion", source=c
            )

    def met(self, episodes: int, success: float, return_: float) -> bool:
        """True when the stage should end."""
        if self.max_episodes is not None and episodes >= self.max_episodes:
            return True
        if episodes < max(self.min_episodes, 1):
            return False
        if self.success_rate is not None and success < self.success_rate:
            return False
        return self.mean_return is None or return_ >= self.mean_return


@dataclass(frozen=True)
class Stage:
    """A group of task ids trained together, and when to move on.

    Attributes:
        tasks: task ids of a finite task space (non-empty, distinct).
        until: stopping condition; ``None`` only for the last stage (train there forever).
    """

    tasks: tuple[int, ...]
    until: StopCondition | None = None

    def __post_init__(self) -> None:
        ids = self.tasks
        ok = (
            isinstance(ids, Sequence)
            and not isinstance(ids, str)
            and len(ids) > 0
            and all(is_int(i, 0) for i in ids)
        )
        if not ok or len(set(ids)) != len(ids):
            raise ConfigError(
                "tasks", ids, "expected a non-empty list of distinct task ids >= 0", source="Stage"
            )
        object.__setattr__(self, "tasks", tuple(ids))
        if self.until is not None and not isinstance(self.until, StopCondition):
            raise ConfigError(
                "until", self.until, "expected a StopCondition or None", source="Stage"
            )


@dataclass(frozen=True)
class SequentialScorer(Scorer):
    """Stage curriculum: sample only the current stage's tasks until its condition holds.

    Needs a finite task space whose every task is in a :class:`~gymcurric.tasks.ReplacementPool`
    (slot ``i`` holds task ``i``). Stages advance in order and stay on the last one.

    Attributes:
        stages: the stages, in order; all but the last need ``until``.
        inner: scorer used inside a stage (default uniform).
        cumulative: also sample tasks of earlier stages.

    Examples:
        >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
        >>> stages = (Stage((0,), StopCondition(min_episodes=2)), Stage((1, 2)))
        >>> cur = Curriculum(FixedTaskSpace([{"l": i} for i in range(3)]),
        ...                  scorer=SequentialScorer(stages))
        >>> cur.sample(4).tolist()
        [0, 0, 0, 0]
        >>> cur.update(0, 1.0, success=True); cur.update(0, 1.0, success=True)
        >>> set(cur.sample(8).tolist()) <= {1, 2}
        True
    """

    stages: tuple[Stage, ...]
    inner: Scorer = field(default_factory=UniformScorer)
    cumulative: bool = False

    def __post_init__(self) -> None:
        c = "SequentialScorer"
        st = self.stages
        if (
            isinstance(st, Stage)
            or not isinstance(st, Sequence)
            or len(st) == 0
            or not all(isinstance(s, Stage) for s in st)
        ):
            raise ConfigError("stages", st, "expected a non-empty list of Stage", source=c)
        object.__setattr__(self, "stages", tuple(st))
        for i, s in enumerate(self.stages[:-1]):
            if s.until is None:
                raise ConfigError(
                    f"stages[{i}].until",
                    None,
                    "only the last stage may have no stopping condition",
                    source=c,
                )
        if not isinstance(self.inner, Scorer) or isinstance(self.inner, SequentialScorer):
            raise ConfigError("inner", self.inner, "expected a non-sequential Scorer", source=c)
        if not isinstance(self.cumulative, bool):
            raise ConfigError("cumulative", self.cumulative, "expected a bool", source=c)
        object.__setattr__(self, "_sets", tuple(frozenset(s.tasks) for s in self.stages))

    def check(self, space: TaskSpace, capacity: int, pool: Pool) -> None:
        """Require a finite space held entirely by a replacement pool."""
        from gymcurric.tasks.pools import ReplacementPool

        if (
            space.size is None
            or space.has_variants
            or capacity != space.size
            or not isinstance(pool, ReplacementPool)
        ):
            raise ConfigError(
                "scorer",
                "SequentialScorer",
                "needs a FixedTaskSpace (every task in the pool) and a ReplacementPool",
                source="CurriculumConfig",
            )
        for i, s in enumerate(self.stages):
            bad = [t for t in s.tasks if t >= space.size]
            if bad:
                raise ConfigError(
                    f"stages[{i}].tasks",
                    bad,
                    f"not ids of the {space.size}-task space",
                    source="SequentialScorer",
                )
        self.inner.check(space, capacity, pool)

    def _stage(self, st: CurriculumState) -> int:
        return min(int(st.counters[K.STAGE]), len(self.stages) - 1)

    def raw(self, st: CurriculumState, active: np.ndarray, signal: SignalConfig) -> np.ndarray:
        """The inner scorer's values."""
        return self.inner.raw(st, active, signal)

    def weights(self, st: CurriculumState, raw: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The inner scorer's weights restricted to the current stage's tasks."""
        cur = self._stage(st)
        ids = (
            [t for s in self.stages[: cur + 1] for t in s.tasks]
            if self.cumulative
            else list(self.stages[cur].tasks)
        )
        in_stage = np.zeros(st.capacity, dtype=bool)
        in_stage[ids] = True
        return self.inner.weights(st, raw, mask & in_stage)

    def on_update(self, st: CurriculumState, slot: int, s: float, r: float) -> bool:
        """Count the episode in the current stage; advance (and recompute) when it ends."""
        cur = self._stage(st)
        until = self.stages[cur].until
        sets: tuple[frozenset[int], ...] = self._sets  # type: ignore[attr-defined]
        if until is None or cur == len(self.stages) - 1 or slot not in sets[cur]:
            return False  # the last stage never ends
        c, sc = st.counters, st.scalars
        n = int(c[K.STAGE_EPISODES]) + 1
        c[K.STAGE_EPISODES] = n
        if n == 1:
            sc[S.STAGE_SUCCESS], sc[S.STAGE_RETURN] = s, r
        else:
            a = 2.0 / (until.window + 1)
            sc[S.STAGE_SUCCESS] += a * (s - sc[S.STAGE_SUCCESS])
            sc[S.STAGE_RETURN] += a * (r - sc[S.STAGE_RETURN])
        if not until.met(n, float(sc[S.STAGE_SUCCESS]), float(sc[S.STAGE_RETURN])):
            return False
        c[K.STAGE] = cur + 1
        c[K.STAGE_EPISODES] = 0
        sc[S.STAGE_SUCCESS] = sc[S.STAGE_RETURN] = 0.0
        return True

    def stats(self, st: CurriculumState) -> dict[str, float]:
        """Stage index, its episode count and success EMA."""
        return {
            "curriculum/stage": float(self._stage(st)),
            "curriculum/stage_episodes": float(st.counters[K.STAGE_EPISODES]),
            "curriculum/stage_success": float(st.scalars[S.STAGE_SUCCESS]),
        }
