"""The channel's curriculum work runs during the next vector step: same results, any path.

``make_curriculum_vec`` defers what a vector step leaves for the curriculum (the ended episodes,
the tasks its resets took) to the next step, where an ``AsyncVectorEnv`` runs it between
``step_async`` and ``step_wait``, while the workers step. These tests pin what must not change
with that: the task stream and the curriculum state, bit for bit, whether the work overlaps
the workers or runs before the step, and whenever a flush (``stats()``, a checkpoint) comes.
"""

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorWrapper

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers.vector import SampleCurriculumTask, make_curriculum_vec

from .vector_runs import SPACE, STUB

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
# episodes of one step: a sub-env resets in every step (SAME_STEP) or every other one
SHORT = FixedTaskSpace([{"level": i + 1, "len": 1} for i in range(5)])


def _default(cur, n, mode, **kwargs):
    return make_curriculum_vec(
        STUB,
        cur,
        n,
        vectorization_mode="async",
        vector_kwargs={"autoreset_mode": mode, "context": "fork"},
        **kwargs,
    )


def _overlapped(cur, n, mode):
    return _default(cur, n, mode, overlap=True)


def _before_the_step(cur, n, mode):
    return _default(cur, n, mode, overlap=False)


def _serial(cur, n, mode):
    """What make_curriculum_vec builds, with a pass-through wrapper hiding step_async."""
    chan = TaskChannel(n, episodes_in_main=True, spares=10)  # as make_curriculum_vec's
    inner = gym.make_vec(
        STUB,
        num_envs=n,
        vectorization_mode="async",
        vector_kwargs={"autoreset_mode": mode, "context": "fork"},
        wrappers=[partial(SingleSampleCurriculumTask, curriculum=cur, channel=chan)],
    )
    inner.set_attr("channel_index", list(range(n)))
    return SampleCurriculumTask(VectorWrapper(inner), cur, channel=chan)


def _trace(build, mode, space=SPACE, steps=50, n=3, flush_every_step=False):
    """Per step the task ids (and updates seen), then the state arrays and the taken count."""
    cur = Curriculum(space, seed=0, backend="shared", recompute_every=3)
    envs = build(cur, n, mode)
    try:
        envs.reset(seed=5)
        out = [envs.task_ids.tolist()]
        for _ in range(steps):
            _, _, term, trunc, _ = envs.step(np.zeros(n, dtype=np.int64))
            out.append(envs.task_ids.tolist())
            if flush_every_step:
                envs.flush_curriculum()
            dones = term | trunc
            if mode == AutoresetMode.DISABLED and dones.any():
                envs.reset(options={"reset_mask": dones})
                out.append(envs.task_ids.tolist())
        envs.flush_curriculum()
        taken = int(envs._channel._taken.sum())
        return out, cur.state_dict()["arrays"], taken, envs._async is envs.env
    finally:
        envs.close()
        cur.close()


def _same_state(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key], equal_nan=True), key


@pytest.mark.parametrize("space", [SPACE, SHORT], ids=["lengths 2-4", "length 1"])
@pytest.mark.parametrize("mode", MODES)
def test_overlapped_and_serial_steps_give_the_same_tasks_and_state(mode, space):
    over = _trace(_overlapped, mode, space)
    serial = _trace(_serial, mode, space)
    before = _trace(_before_the_step, mode, space)
    # the overlap is used with overlap=True only, and needs Gymnasium's step_async
    assert over[3] and not serial[3] and not before[3]
    assert over[0] == serial[0] == before[0]
    _same_state(over[1], serial[1])
    _same_state(over[1], before[1])
    assert over[1]["count"].sum() > 0


def test_overlap_is_the_default():
    assert _trace(_default, AutoresetMode.NEXT_STEP, steps=2)[3]


@pytest.mark.parametrize("mode", MODES)
def test_flushing_after_every_step_changes_nothing(mode):
    lazy = _trace(_overlapped, mode)
    eager = _trace(_overlapped, mode, flush_every_step=True)
    assert lazy[0] == eager[0]
    _same_state(lazy[1], eager[1])


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_every_reset_takes_a_task_the_main_process_drew(mode):
    """One-step episodes: the slots are refilled before any sub-env needs its next task."""
    cur = Curriculum(SHORT, seed=0, backend="shared")
    envs = _overlapped(cur, 3, mode)
    try:
        envs.reset(seed=0)
        starts = 3
        for _ in range(40):
            _, _, _, _, info = envs.step(np.zeros(3, dtype=np.int64))
            starts += int(info.get("_task_id", np.zeros(3, bool)).sum())
        # every episode start took its task from the channel, none drew it in its worker
        assert int(envs._channel._taken.sum()) == starts > 40
        assert envs.stats()["curriculum/samples"] == float(starts)
    finally:
        envs.close()
        cur.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_steps_episodes_reach_the_curriculum_during_the_next_step(mode):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _overlapped(cur, 3, mode)
    try:
        envs.reset(seed=0)
        ended = 0
        for _ in range(30):
            _, _, term, trunc, _ = envs.step(np.zeros(3, dtype=np.int64))
            assert cur.stats()["curriculum/updates"] == float(ended)  # up to the last step
            dones = term | trunc
            ended += int(dones.sum())
            if mode == AutoresetMode.DISABLED and dones.any():
                envs.reset(options={"reset_mask": dones})  # applies them first
                assert cur.stats()["curriculum/updates"] == float(ended)
        assert envs.stats()["curriculum/updates"] == float(ended) > 0  # stats() flushes
    finally:
        envs.close()
        cur.close()


def test_a_failure_while_the_workers_step_leaves_the_vector_env_usable():
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _overlapped(cur, 2, AutoresetMode.NEXT_STEP)
    record = cur.record

    def failing(*args, **kwargs):
        raise RuntimeError("record failed")

    try:
        envs.reset(seed=0)
        while True:  # step until an episode ended: its record runs in the next step
            _, _, term, trunc, _ = envs.step(np.zeros(2, dtype=np.int64))
            if (term | trunc).any():
                break
        cur.record = failing
        with pytest.raises(RuntimeError, match="record failed") as err:
            envs.step(np.zeros(2, dtype=np.int64))
        assert "after the step that ended episodes of sub-envs" in "".join(err.value.__notes__)
        cur.record = record
        envs.step(np.zeros(2, dtype=np.int64))  # the step's replies were read: no call pending
    finally:
        envs.close()
        cur.close()


# ---------------------------------------------------------------- the channel alone


def test_refill_leaves_busy_slots_alone_and_catches_up_later():
    cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(4)]), seed=0, backend="shared")
    chan = TaskChannel(3)
    try:
        chan.refill(cur)
        assert [chan.take(env) is not None for env in (0, 1)] == [True, True]
        busy = np.array([False, True, False])
        waiting = chan._next_id.tolist()
        chan.refill(cur, busy=busy)  # env 1 is taking right now: neither counted nor refilled
        assert chan._given.tolist() == [2, 1, 1] and chan._next_id[1] == waiting[1]
        assert cur.stats()["curriculum/samples"] == 1.0
        chan.refill(cur)
        assert chan._given.tolist() == [2, 2, 1]
        assert cur.stats()["curriculum/samples"] == 2.0

        # a pool change while env 2 is busy: its waiting task is withdrawn once it is free
        stale = int(chan._next_id[2])
        cur.mark_invalid(stale, "refused elsewhere")
        chan.refill(cur, busy=np.array([False, False, True]))
        assert chan._next_id[2] == stale and chan._given[2] == 1  # untouched while busy
        assert stale not in chan._next_id[:2].tolist()  # the others were withdrawn, redrawn
        assert chan._given.tolist()[:2] == [2, 2] and chan._taken.tolist() == [1, 1, 0]
        chan.refill(cur)  # env 2 did not take it: withdrawn now (uncounted), redrawn
        assert chan._next_id[2] != stale and chan._given[2] == 1 and chan._taken[2] == 0
        assert cur.stats()["curriculum/samples"] == 2.0
    finally:
        chan.close()
        cur.close()


def test_take_results_reads_each_result_once_in_env_order():
    chan = TaskChannel(3)
    try:
        assert chan.take_results() is None
        chan.put(2, 4, -1.0, 1.0, 2.0)
        chan.put(0, 1, 3.0, None, 0.0)
        ids, returns, successes, costs = chan.take_results()
        assert ids.tolist() == [1, 4] and returns.tolist() == [3.0, -1.0]
        assert np.isnan(successes[0]) and successes[1] == 1.0 and costs.tolist() == [0.0, 2.0]
        assert chan.take_results() is None
    finally:
        chan.close()


def test_a_checkpoint_through_an_outer_vector_wrapper_holds_the_last_steps_episodes(tmp_path):
    from gymcurric.wrappers.curriculum_state import save_curriculum_state

    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _default(cur, 3, AutoresetMode.NEXT_STEP)
    try:
        envs.reset(seed=5)
        for _ in range(12):
            _, _, term, trunc, _ = envs.step(np.zeros(3, dtype=np.int64))
            if (term | trunc).any():
                break
        assert (term | trunc).any()
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=VectorWrapper(envs))
        saved = np.load(path)
        counts = [saved[k] for k in saved.files if k.endswith("count")]
        envs.flush_curriculum()
        assert counts and int(counts[0].sum()) == int(cur.state_dict()["arrays"]["count"].sum())
        assert int(counts[0].sum()) > 0
    finally:
        envs.close()
        cur.close()
