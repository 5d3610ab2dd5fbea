"""Guards on the vector curriculum wrapper's Python work in a step that ends no episode.

Counted, not timed: the Python frames of gymcurric's own code and the builtin calls they make
(a ``sys.setprofile`` counter; Gymnasium's and the env's calls are left out) in the main
process, per vector step of ``make_curriculum_vec``. Most vector steps end and start no
episode (9 of 10 in the curriculum overhead benchmark), and in an ``AsyncVectorEnv`` the
workers wait while the main process runs them, so that path must stay near zero work: the
wrapper's ``step``, the two all-False tests of ``terminations`` and ``truncations``
(``tobytes``) and, for the sums of the episodes accounted in this process, one in-place
addition (no call). The ceilings are the counts of issue 24's rework (8 before it, 3 after,
without costs; 20 and 6 with): a change that adds a call there fails here and should say
why it is worth it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import gymcurric
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers.vector import make_curriculum_vec

from .vector_runs import STUB

PACKAGE = str(Path(gymcurric.__file__).parent)
LONG = FixedTaskSpace([{"level": i + 1, "len": 7 + i % 2} for i in range(4)])
N = 3


def quiet_step_calls(vectorization_mode: str, mode: AutoresetMode, **kwargs: Any) -> list[int]:
    """gymcurric's calls in each vector step that ends, starts and follows no episode end."""
    backend = "shared" if vectorization_mode == "async" else "local"
    cur = Curriculum(LONG, seed=0, backend=backend)
    vector_kwargs: dict[str, Any] = {"autoreset_mode": mode}
    if vectorization_mode == "async":
        vector_kwargs["context"] = "fork"
    envs = make_curriculum_vec(
        STUB, cur, N, vectorization_mode=vectorization_mode, vector_kwargs=vector_kwargs, **kwargs
    )
    counts = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        # a Python frame of gymcurric, or a builtin that one of its frames calls
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(PACKAGE):
            counts[0] += 1

    quiet = []
    busy = [True, True]  # whether each of the two steps before ended or started an episode
    try:
        envs.reset(seed=0)
        actions = np.zeros(N, dtype=np.int64)
        for _ in range(60):
            counts[0] = 0
            previous = sys.getprofile()
            sys.setprofile(profile)
            try:
                _, _, terminations, truncations, infos = envs.step(actions)
            finally:
                sys.setprofile(previous)
            now = bool((terminations | truncations).any()) or "_task_id" in infos
            if not (now or any(busy)):
                quiet.append(counts[0])
            busy = [busy[1], now]
    finally:
        envs.close()
        cur.close()
    assert len(quiet) >= 20  # most steps are quiet
    return quiet


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("cost", [False, True])
def test_a_step_that_ends_no_episode_makes_few_calls_in_the_main_process(mode, overlap, cost):
    # AsyncVectorEnv with the channel, episodes summed here: the wrapper's step and two
    # tobytes (8 before issue 24's rework: _bytes twice, _add_step, add_rewards, asarray); an
    # env's costs add _add_cost and its two dict.get (20 before: also the dtype check and its
    # two getattr, np.ones's mask, np.asarray twice, add_costs, ndarray.any, astype, ...)
    calls = quiet_step_calls("async", mode, overlap=overlap, cost=cost)
    assert max(calls) <= 3 + (3 if cost else 0), calls


def test_a_step_that_ends_no_episode_makes_few_calls_in_a_sync_vector_env():
    # SyncVectorEnv (no channel): the vector wrapper's step and two tobytes, and in each
    # sub-env the single-env wrapper's step, which sums its episode's reward and cost (a
    # dict.get); 11 before issue 24's rework
    calls = quiet_step_calls("sync", AutoresetMode.NEXT_STEP)
    assert max(calls) <= 3 + 2 * N, calls
