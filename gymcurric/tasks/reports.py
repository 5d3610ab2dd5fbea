"""What a curriculum is told, checked and written into its state: episodes, scores, refusals.

A :class:`~gymcurric.tasks.Curriculum` owns one :class:`Reports`. Its public methods that take
reports (``check_update``, ``apply_update``, ``record``, ``update_scores``, ``record_scores``,
``scores``, ``mark_invalid``) keep their signatures and docstrings on the curriculum and pass
the work here: the checks a report passes before anything is applied (so that a bad one
changes nothing), then the locked section that writes it through the
:class:`~gymcurric.tasks.membership.Membership`. What stays on the curriculum is what belongs
to the process: flushing a worker's transport first, and the per-episode fast path of
:meth:`Curriculum.update <gymcurric.tasks.Curriculum.update>` (the same checks inlined).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks.backends import PROCESS_ID
from gymcurric.tasks.regret import ScoreBatch, ScoreChecks, latest_scores
from gymcurric.tasks.signals import check_episode
from gymcurric.tasks.state import EMPTY, EXPLOIT, EXPLORE, K

if TYPE_CHECKING:
    from gymcurric.tasks.links import StateLink
    from gymcurric.tasks.membership import Membership
    from gymcurric.tasks.spaces import TaskSpace

__all__ = ["Reports"]


class Reports:
    """Checks a curriculum's reports and writes them into its state, under the link's lock.

    Args:
        space: the curriculum's task space (ids are checked against it).
        link: how this process reaches the state arrays (their lock).
        members: the pool's slots, which record what passed the checks.
        owner: the class the score hook's NaN/inf warning names.
    """

    def __init__(self, space: TaskSpace, link: StateLink, members: Membership, owner: str) -> None:
        self.space, self.link, self.members = space, link, members
        #: every episode must carry a success (``SignalConfig(source='success')``)
        self.needs_success = members.signal.source == "success"
        self.id_limit = space.id_limit
        #: the score hook's checks (they warn once per curriculum about NaN/inf scores)
        self.score_checks = ScoreChecks(space, "Curriculum", owner)

    # ---------------------------------------------------------------- episodes
    def key(self, task_id: Any, success: float | None) -> int:
        """The checked id of an episode report (numpy ints accepted; the rest named)."""
        if type(task_id) is not int or not 0 <= task_id < self.id_limit:
            task_id = self.space.check_id(task_id)
        if success is None and self.needs_success:
            raise ConfigError(
                "success", None, "SignalConfig(source='success') needs success= in every update"
            )
        return int(task_id)

    def check(
        self, task_id: Any, return_: Any, success: Any, cost: Any
    ) -> tuple[int, float, float | None, float]:
        """Validate one episode report: ``(task id, return, success or None, cost)``."""
        return_, success, cost = check_episode(task_id, return_, success, cost)
        link = self.link
        if PROCESS_ID[0] != link.pid:
            link.check("update")
        return self.key(task_id, success), return_, success, cost

    def apply(self, task_id: int, return_: float, success: float | None, cost: float) -> None:
        """Apply one episode :meth:`check` returned, now, under the lock."""
        link = self.link
        with link.lock:
            link.enter("update")
            self.members.record_one(task_id, return_, success, cost)

    def record(
        self,
        task_ids: Sequence[int] | np.ndarray,
        returns: Sequence[float] | np.ndarray,
        successes: Sequence[float] | np.ndarray,
        costs: Sequence[float] | np.ndarray,
        *,
        wait: bool,
        checked: bool,
    ) -> bool:
        """Apply episodes in order; whether they were (see :meth:`Curriculum.record`)."""
        if not checked:  # before taking the lock: a bad entry raises, nothing is applied
            task_ids = self.space.keys(task_ids)
            if self.needs_success:
                self.check_successes(np.asarray(successes, dtype=np.float64))
        link = self.link
        if wait:
            link.lock.__enter__()
        elif not link.try_lock():
            return False  # a worker keeps its buffer and tries again at its next episode end
        try:
            link.enter("record")
            self.members.record(task_ids, returns, successes, costs)
        finally:
            link.unlock()
        return True

    def check_successes(self, successes: np.ndarray) -> None:
        """Refuse a batch with an episode without success when the signal needs one."""
        if np.isnan(successes).any():
            raise ConfigError(
                "success",
                None,
                "SignalConfig(source='success') needs a success for every episode; entry "
                f"{int(np.flatnonzero(np.isnan(successes))[0])} has none",
                source="Curriculum.update_batch",
            )

    # ---------------------------------------------------------------- regret scores
    def record_scores(self, batch: ScoreBatch) -> None:
        """Write a checked score batch into the slots of its tasks."""
        link = self.link
        with link.lock:
            link.enter("update_scores")
            self.members.record_scores(batch.keys, batch.scores, batch.nonfinite)

    def scores(self, keys: np.ndarray) -> np.ndarray:
        """The latest score of the tasks of checked ``keys`` (NaN where a task has none)."""
        link = self.link
        with link.lock:
            link.enter("scores")
            return latest_scores(self.members.state, self.members.slots(keys))

    # ---------------------------------------------------------------- refused tasks
    def disable(self, key: int, task_id: Any, reason: str) -> None:
        """Remove the task of checked ``key`` from the pool for good; refill its slot.

        Raises:
            TaskError: no valid task is left (naming ``task_id`` and the refusal's ``reason``).
        """
        link, members = self.link, self.members
        with link.lock:
            link.enter("mark_invalid")
            with link.publish():
                st = members.state
                st.counters[K.INVALID_REPORTED] += 1
                if key not in members.disabled:
                    members.disabled.add(key)
                    link.share_disabled(key)
                slot = members.slot_of.get(key)
                if slot is not None and (
                    st.pool[slot] == EXPLOIT or not members.draw_into(slot, EXPLORE)
                ):
                    del members.slot_of[key]
                    members.put(slot, -1, EMPTY)
                try:
                    members.recompute()
                except TaskError as exc:
                    raise TaskError(
                        "task_id",
                        task_id,
                        f"{exc.reason}; last refusal: {reason!r}",
                        source="Curriculum.mark_invalid",
                    ) from exc
