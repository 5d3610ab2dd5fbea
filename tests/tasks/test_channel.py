"""TaskChannel copies: pickled into a worker, copy.deepcopy, copy.copy (the channel's other
tests drive it through vector envs: tests/wrappers/vector/test_curriculum_channel.py)."""

import copy
import pickle
from multiprocessing import context

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel


def _worker_copy(chan: TaskChannel) -> TaskChannel:
    """``chan`` as a spawn or forkserver worker gets it: pickled while a process starts."""
    context.set_spawning_popen(object())  # what Process.start sets while it pickles its args
    try:
        blob = pickle.dumps(chan)
    finally:
        context.set_spawning_popen(None)
    return pickle.loads(blob)


def test_a_worker_copy_has_every_attribute_of_a_new_channel_and_refills_like_one():
    # the copy lacked _no_retries (and _pool_seen): refill with spares raised AttributeError
    chan = TaskChannel(2, spares=1)
    copy = _worker_copy(chan)
    try:
        assert not copy.is_creator
        assert sorted(vars(copy)) == sorted(vars(chan))
        assert copy._no_retries == chan._no_retries
        cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(5)]), seed=0)
        copy.refill(cur)  # compares the retries row with _no_retries
        task = copy.take(0)
        assert task is not None and copy.refuse(0, task, "refused in the copy")
        copy.refill(cur)
        assert cur.stats()["curriculum/invalid_reported"] == 1.0
        assert cur.stats()["curriculum/samples"] == 1.0
        assert chan._refused.tolist() == [0, 0]  # the same memory: the refusal was read once
    finally:
        copy.close()
        chan.close()


def _used(spares: int) -> tuple[TaskChannel, Curriculum]:
    """A channel after some traffic; env 0 then took a task and left a result, not read yet."""
    chan = TaskChannel(2, spares=spares)
    cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(8)]), seed=0)
    chan.refill(cur)
    first = chan.take(0)
    assert first is not None
    chan.put(0, first, 1.0, True, 0.0)
    second = chan.take(1)
    assert second is not None
    chan.put(1, second, 0.0, None, 0.0)
    if spares:
        assert chan.refuse(1, second, "refused before the copy")
        assert chan.take_spare(1) is not None
    chan.refill(cur)
    assert chan.collect(cur) == 2
    third = chan.take(0)  # taken, counted by the next refill
    assert third is not None
    chan.put(0, third, 2.0, False, 0.5)  # written, applied by the next collect
    return chan, cur


def _next_round(chan: TaskChannel, cur: Curriculum) -> dict:
    applied = chan.collect(cur)
    chan.refill(cur)
    stats = cur.stats()
    return {
        "applied": applied,
        "samples": stats["curriculum/samples"],
        "updates": stats["curriculum/updates"],
        "invalid": stats["curriculum/invalid_reported"],
        "waiting": chan.waiting(),
        "spares": chan.waiting_spares(),
    }


@pytest.mark.parametrize("spares", [0, 1])
@pytest.mark.parametrize("how", ["worker", "deepcopy", "copy"])
def test_a_copy_of_a_used_channel_goes_on_where_the_original_stood(how, spares):
    # the copy got a new channel's main-process side over the used slots: its refill counted
    # every env's last take again and its collect applied every env's last result again
    chan, cur = _used(spares)
    expected = _next_round(chan, cur)
    assert expected["applied"] == 1 and expected["samples"] == 3 + spares
    chan.close()
    chan, cur = _used(spares)
    made = {"worker": _worker_copy, "deepcopy": copy.deepcopy, "copy": copy.copy}[how]
    twin = made(chan)
    try:
        assert _next_round(twin, cur) == expected
    finally:
        if twin._backend is not chan._backend:
            twin.close()
        chan.close()


@pytest.mark.parametrize("spares", [0, 1])
@pytest.mark.parametrize("how", ["worker", "deepcopy", "copy"])
def test_a_copy_carries_the_stale_marks_of_a_pool_change_while_an_env_was_busy(how, spares):
    # the test above leaves no stale mark at the copy: a copy without the channel's _stale
    # and _any_stale would keep env 1's task, which left the pool, waiting at its next refill
    copies = {"worker": _worker_copy, "deepcopy": copy.deepcopy, "copy": copy.copy}
    rounds = []
    for made in (None, copies[how]):  # the channel itself, then a copy
        chan, cur = _used(spares)
        gone = chan.waiting()[1]
        cur.mark_invalid(gone, "left the pool while env 1 stepped")
        chan.refill(cur, busy=np.array([False, True]))
        assert chan.stale(cur) == [False, True]
        twin = chan if made is None else made(chan)
        try:
            rounds.append(_next_round(twin, cur))
        finally:
            if twin._backend is not chan._backend:
                twin.close()
            chan.close()
    assert rounds[0]["waiting"][1] not in (gone, -1)  # withdrawn, and a new task drawn
    assert rounds[1] == rounds[0]


def test_a_channel_is_pickled_only_while_a_worker_process_starts():
    chan = TaskChannel(1)
    try:
        with pytest.raises(ConfigError, match="pickled only while a worker process"):
            pickle.dumps(chan)
    finally:
        chan.close()
