"""The episodes the vector curriculum wrapper accounts in the main process.

With a channel whose ``episodes_in_main`` is set (``make_curriculum_vec`` decides), the
sub-envs report nothing: the vector :class:`~gymcurric.wrappers.vector.SampleCurriculumTask`
sums each episode's return and cost from the vector env's own rewards and infos, and checks
the episodes that end in a step as one batch, which the next step applies. Its base class
:class:`MainEpisodes` holds that accounting; the wrapper's module keeps the task tracking, the
channel's refills and its checkpoint rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from gymcurric.safety.costs import check_vector_cost_dtype
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers._success import successes_of
from gymcurric.wrappers.episode_sums import EpisodeSums

__all__ = ["MainEpisodes"]

_F64 = np.dtype(np.float64)


class MainEpisodes:
    """Base of the vector ``SampleCurriculumTask``: per sub-env episode sums, checked batches.

    The wrapper sets the attributes below; :meth:`_account` leaves the checked batch of a step's
    ended episodes in ``_pending`` (their sub-envs in ``_pending_envs``) for the next step.
    """

    curriculum: Any
    _mode: AutoresetMode
    _channel: TaskChannel | None
    _sums: EpisodeSums
    _current: npt.NDArray[np.int64]
    _prev_dones: npt.NDArray[np.bool_]
    _prev_any: bool
    _pending: tuple[Any, ...] | None
    _pending_envs: npt.NDArray[np.intp] | None

    def _account(
        self,
        rewards: Any,
        dones: npt.NDArray[np.bool_],
        any_done: bool,
        infos: dict[str, Any],
    ) -> None:
        """Sum this step into each live episode; check the episodes that ended, in one batch.

        The sums of :class:`~gymcurric.wrappers.episode_sums.EpisodeSums`, the accumulator the
        sub-env wrapper keeps too (so the curriculum state is the same bit for bit). In
        ``NEXT_STEP`` mode the reset step (reward 0) starts the next episode; in ``SAME_STEP``
        mode the last step's info is ``info["final_info"]``. The checked batch is applied by
        the next step (:meth:`flush_curriculum`); a bad value raises here, from the step that
        ended its episode.
        """
        sums = self._sums
        if self._mode == AutoresetMode.NEXT_STEP and self._prev_any:
            sums.start(self._prev_dones)  # this step was their reset step
            step = sums.live & ~self._prev_dones
        else:
            step = sums.live
        last = infos
        if any_done and self._mode == AutoresetMode.SAME_STEP:
            last = infos.get("final_info", {})
        sums.add_rewards(np.asarray(rewards, dtype=np.float64), step)
        if "cost" in infos:
            self._add_cost(infos, step & ~dones if last is not infos else step)
        if not any_done:
            return
        ended = (dones & sums.live).nonzero()[0]
        if last is not infos:
            self._add_cost(last, dones & sums.live)
        ids = self._current[ended]  # the ended episodes' tasks (new ones are recorded after)
        keep = ids >= 0  # explicit tasks (-1) are not reported
        if False in keep:  # (a membership test on a bool array: no Python call)
            ended, ids = ended[keep], ids[keep]
        returns, costs, _ = sums.finish(ended)
        if self._mode == AutoresetMode.SAME_STEP:
            sums.start(dones)  # their next episodes started in this step
        else:
            sums.stop(dones)
        if not len(ended):
            return
        assert self._channel is not None and self._pending is None
        try:
            self._pending = self._channel.check_report(
                self.curriculum, ids, returns, successes_of(last, ended), costs
            )
        except Exception as exc:
            exc.add_note(
                f"reported by vector.SampleCurriculumTask at the end of episodes of sub-envs "
                f"{ended.tolist()} (task ids {ids.tolist()})"
            )
            raise
        self._pending_envs = ended

    def _add_step(self, rewards: Any, infos: dict[str, Any]) -> None:
        """A step that ends and starts no episode: add its rewards and costs to the live sums."""
        sums = self._sums
        sums.add_rewards(np.asarray(rewards, dtype=np.float64), sums.live)
        if "cost" in infos:
            self._add_cost(infos, sums.live)

    def _add_cost(self, infos: dict[str, Any], where: npt.NDArray[np.bool_]) -> None:
        cost = infos.get("cost")
        if cost is None:
            return
        float64 = type(cost) is np.ndarray and cost.dtype == _F64
        if not float64:
            check_vector_cost_dtype(cost, "vector.SampleCurriculumTask")
        mask = infos.get("_cost")  # None: every sub-env's info has a cost
        sums = self._sums
        if (
            float64
            and where is sums.live
            and sums.all_live
            and (mask is None or (type(mask) is np.ndarray and False not in mask))
        ):
            # the common step, with no Python call: every sub-env inside a summed episode and
            # reporting a float64 cost (EpisodeSums.add_costs' addition, bit for bit)
            sums.costs += cost
            sums.has_cost |= where
            return
        sums.add_costs(cost, where if mask is None else np.asarray(mask, dtype=bool) & where)
