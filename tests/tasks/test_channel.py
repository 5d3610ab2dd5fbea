"""TaskChannel pickled into a worker (the channel's other tests drive it through vector envs:
tests/wrappers/vector/test_curriculum_channel.py)."""

import pickle
from multiprocessing import context

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
