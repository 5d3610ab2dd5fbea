"""Transports of a shared curriculum: a worker's buffer and draw-ahead, one transport per
curriculum and process, and what a transport must not keep alive or apply twice."""

import gc
import multiprocessing as mp
import pickle

import pytest

from gymcurric.tasks import (
    Curriculum,
    FixedTaskSpace,
    SharedMemoryBackend,
    SignalConfig,
    transport_for,
)
from gymcurric.tasks.shared_backend import segment_exists

from . import shared_workers as w
from .curriculum_cases import fixed_space
from .shared_harness import shared_curriculum, start_process, worker_result


def test_a_workers_buffer_is_applied_before_its_other_calls_and_dropped_by_a_load():
    backend = SharedMemoryBackend(worker_update_batch=8)
    with Curriculum(fixed_space(6), backend=backend, seed=0) as cur:
        q = mp.get_context("fork").Queue()
        start_process("fork", w.buffered_then_batch, cur, q).join(30)
        # ret_ema = 0.9 * (1.0, the buffered episode) + 0.1 * 0.0: the buffered one came first
        assert worker_result(q) == pytest.approx(1.0 - SignalConfig().alpha)
    backend = SharedMemoryBackend(worker_update_batch=8)
    with Curriculum(fixed_space(6), backend=backend, seed=0) as cur:
        saved = cur.state_dict()
        q = mp.get_context("fork").Queue()
        start_process("fork", w.buffered_then_load, cur, saved, q).join(30)
        assert worker_result(q) == 0.0
        assert cur.stats()["curriculum/updates"] == 0.0


def test_a_wrapper_forked_into_a_worker_buffers_in_its_curriculums_transport():
    import gymnasium as gym

    from gymcurric.wrappers import SampleCurriculumTask

    backend = SharedMemoryBackend(worker_update_batch=16)
    space = FixedTaskSpace([{"num_hazards": 0, "size": 5, "max_steps": 10}])
    with Curriculum(space, backend=backend, seed=0) as cur:
        env = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), cur)
        assert transport_for(cur) is env._direct  # one transport per curriculum and process
        q = mp.get_context("fork").Queue()
        start_process("fork", w.wrapper_episodes_then_stats, env, cur, 3, q).join(30)
        # the child's stats() applied the wrapper's buffered episodes
        assert worker_result(q) == 3.0
        assert cur.stats()["curriculum/updates"] == 3.0


def test_a_transport_pickles_as_its_curriculums_own():
    cur = Curriculum(fixed_space(3), seed=0)
    transport = transport_for(cur)
    cur2, transport2 = pickle.loads(pickle.dumps((cur, transport)))
    assert transport2 is transport_for(cur2) and transport2.curriculum is cur2


def test_the_creators_transport_calls_a_subclasss_own_update_and_sample_task():
    class Counting(Curriculum):
        calls = 0

        def update(self, *args, **kwargs):
            Counting.calls += 1
            super().update(*args, **kwargs)

        def sample_task(self):
            Counting.calls += 1
            return super().sample_task()

    with Counting(fixed_space(3), backend="shared", seed=0) as cur:
        transport = transport_for(cur)
        tid, _ = transport.take_task()
        transport.report_episode(tid, 1.0, True, None)
        assert Counting.calls == 2


def test_dropping_a_shared_curriculum_unlinks_its_segment_without_the_cyclic_gc():
    gc.disable()
    try:
        cur = shared_curriculum(fixed_space(4), seed=0)
        transport_for(cur).take_task()  # the curriculum now holds its transport
        name = cur.backend.name
        del cur
        assert not segment_exists(name)
    finally:
        gc.enable()


def test_an_apply_that_fails_drops_its_batch_instead_of_applying_part_twice(monkeypatch):
    backend = SharedMemoryBackend(worker_update_batch=3)
    with Curriculum(fixed_space(4), backend=backend, seed=0) as cur:
        transport = transport_for(cur)
        monkeypatch.setattr(transport, "_worker", True)  # as in a worker process
        monkeypatch.setattr(transport, "_update_batch", 3)
        real = cur._members.record_one
        calls = []

        def flaky(*args):
            calls.append(args)
            if len(calls) == 2:  # the batch's second episode: the first is applied by then
                raise RuntimeError("refill failed")
            real(*args)

        monkeypatch.setattr(cur._members, "record_one", flaky)
        transport.report_episode(0, 1.0, True, None)
        transport.report_episode(1, 1.0, True, None)
        with pytest.raises(RuntimeError, match="refill failed"):
            transport.report_episode(2, 1.0, True, None)  # due: the first episode applies, fails
        transport.flush()
        assert cur.stats()["curriculum/updates"] == 1.0  # not 1 + 3
