import copy
import gc
import multiprocessing as mp
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid
import weakref

import numpy as np
import pytest

from gymcurric.errors import ConfigError, TaskError, WorkerError
from gymcurric.tasks import (
    BucketedTaskSpace,
    Curriculum,
    LearnabilityScorer,
    OpenEndedPool,
    SequentialScorer,
    SharedMemoryBackend,
    Span,
    Stage,
    StopCondition,
)
from gymcurric.tasks import shared_backend as sb_module
from gymcurric.tasks._shm import FileLock
from gymcurric.tasks.shared_backend import SEGMENT_PREFIX, segment_exists
from gymcurric.tasks.state import K

from . import shared_workers as w
from .curriculum_cases import fixed_space, resume_configs, stateless_outcome
from .learners import run
from .shared_harness import shared_curriculum, start_process, worker_result

# The backend is POSIX-portable; these tests use fork and look into /dev/shm (Linux, CI).
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

METHODS = ["fork", "forkserver", "spawn"]


def _lock_left(cur):
    """A probe: True while the backend's lock (file descriptor or named semaphore) exists."""
    lock = cur.backend._lock
    if isinstance(lock, FileLock):  # Linux: no semaphore; the descriptor closes with the object
        ref = weakref.ref(lock)
        return lambda: ref() is not None
    sem = "/dev/shm/sem." + lock._semlock.name.lstrip("/")
    return lambda: os.path.exists(sem)


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("method", METHODS)
def test_four_processes_updating_concurrently_lose_no_update(method):
    n_tasks, n = 8, {"fork": 1500, "forkserver": 600, "spawn": 300}[method]
    with shared_curriculum(fixed_space(n_tasks), recompute_every=5, seed=0) as cur:
        q = mp.get_context(method).Queue()
        procs = [start_process(method, w.updates, cur, i, n, n_tasks, q) for i in range(4)]
        assert [worker_result(q) for _ in procs] == [n] * 4
        for p in procs:
            p.join(30)
        expected = np.zeros(n_tasks, dtype=np.int64)
        for i in range(4):
            np.add.at(expected, (i + np.arange(n)) % n_tasks, 1)
        assert cur.state.count.tolist() == expected.tolist()
        stats = cur.stats()
        assert stats["curriculum/updates"] == 4 * n
        assert stats["curriculum/samples"] == 4 * n * 2  # 1 or 3 ids per draw, alternately
        assert cur.state.samples.sum() == 4 * n * 2
        assert stats["curriculum/recomputes"] >= 4 * n // 5


def test_concurrent_evictions_keep_the_pool_consistent():
    space = BucketedTaskSpace({"a": [Span(0, 1000)]}, seed=0)
    with shared_curriculum(
        space, pool=OpenEndedPool(capacity=16, min_samples=2), recompute_every=3
    ) as cur:
        q, stop = mp.get_context("fork").Queue(), mp.get_context("fork").Event()
        procs = [start_process("fork", w.churn, cur, i, q, stop) for i in range(3)]
        [worker_result(q) for _ in procs]
        time.sleep(1.0)
        stop.set()
        for p in procs:
            p.join(10)
            assert p.exitcode == 0
        ids = cur.state.task_id
        assert len(set(ids.tolist())) == 16 and (ids >= 0).all()  # no duplicates, no holes
        c = cur.state.counters
        assert c[K.EVICTIONS] > 10
        run(cur, stateless_outcome, 200)  # the parent's caches follow the other processes' changes
        assert len(set(cur.state.task_id.tolist())) == 16


def test_workers_sample_the_distribution_the_parent_shapes():
    scorer = LearnabilityScorer(min_samples=1, cold_value=0.0, top_k=1)
    with shared_curriculum(fixed_space(6), scorer=scorer, recompute_every=1) as cur:
        ctx = mp.get_context("forkserver")
        q, go = ctx.Queue(), ctx.Event()
        ready = [ctx.Event() for _ in range(2)]
        procs = [
            start_process("forkserver", w.sample_after, cur, i, 50, ready[i], go, q)
            for i in range(2)
        ]
        for r in ready:
            assert r.wait(60)
        for i in range(20):  # task 3 is learnable (p = 0.5); the others are solved
            cur.update(3, 1.0, success=bool(i % 2))
            cur.update(i % 6 if i % 6 != 3 else 0, 1.0, success=True)
        assert dict(zip(*cur.probabilities(), strict=True))[3] == 1.0
        go.set()
        assert [worker_result(q) for _ in procs] == [[3] * 50] * 2
        for p in procs:
            p.join(30)


def test_a_worker_marking_a_task_invalid_disables_it_everywhere():
    pool = OpenEndedPool(capacity=3, min_samples=1, evict_quantile=1.0)
    with shared_curriculum(fixed_space(6), pool=pool, recompute_every=1, seed=1) as cur:
        bad = int(cur.state.task_id[0])
        q = mp.get_context("fork").Queue()
        start_process("fork", w.mark, cur, bad, q).join(30)
        worker_result(q)
        seq = run(cur, stateless_outcome, 300)  # one eviction + refill per episode
        assert bad not in seq and cur.stats()["curriculum/evictions"] > 100
        assert cur.state_dict()["disabled"] == [bad]


def test_lock_free_reads_never_return_a_torn_distribution():
    n = 20_000  # stage 0 samples slot 0 only, stage 1 slot n-1 only
    scorer = SequentialScorer((Stage((0,), StopCondition(min_episodes=1)), Stage((n - 1,))))
    with shared_curriculum(fixed_space(n), scorer=scorer) as cur:
        first = cur.state_dict()
        cur.update(0, 1.0, success=True)
        second = cur.state_dict()
        ctx = mp.get_context("fork")
        q, stop = ctx.Queue(), ctx.Event()
        proc = start_process("fork", w.read_forever, cur, {0, n - 1}, stop, q)
        end = time.monotonic() + 1.5
        flips = 0
        # every load rewrites the cumulative arrays: at least 1.5 s and 200 loads while the
        # reader samples, however slow the host (at most a minute)
        while (time.monotonic() < end or flips < 200) and time.monotonic() < end + 60:
            cur.load_state_dict(first if flips % 2 else second)
            flips += 1
        stop.set()
        draws, bad = worker_result(q)
        proc.join(10)
        assert bad == [] and draws > 0 and flips >= 200


# ---------------------------------------------------------------- lifetime


def test_no_segment_left_after_close_gc_context_manager_or_failed_construction(
    monkeypatch,
):
    cur = shared_curriculum(fixed_space(4))
    name, lock_left = cur.backend.name, _lock_left(cur)
    assert segment_exists(name) and lock_left()
    cur.close()
    assert not segment_exists(name) and not lock_left()
    cur.close()  # idempotent

    cur = shared_curriculum(fixed_space(4))
    name, lock_left = cur.backend.name, _lock_left(cur)
    del cur
    gc.collect()
    assert not segment_exists(name) and not lock_left()

    with shared_curriculum(fixed_space(4)) as cur:
        name = cur.backend.name
    assert not segment_exists(name)

    fixed_uuid = uuid.UUID(int=0xFA17ED)
    monkeypatch.setattr(sb_module.uuid, "uuid4", lambda: fixed_uuid)
    space = BucketedTaskSpace({"a": [Span(0, 9)]}, validator=lambda t: False, max_retries=2)
    with pytest.raises(TaskError):
        shared_curriculum(space, pool=OpenEndedPool(capacity=3))
    assert not segment_exists(SEGMENT_PREFIX + fixed_uuid.hex[:16])


def test_creator_exiting_without_close_unlinks_its_segment():
    code = (
        "from gymcurric.tasks import Curriculum, FixedTaskSpace\n"
        "cur = Curriculum(FixedTaskSpace([{'i': 0}]), backend='shared')\n"
        "print(cur.backend.name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith(SEGMENT_PREFIX)
    assert not segment_exists(out.stdout.strip())
    assert "leaked" not in out.stderr


def test_killing_a_worker_mid_run_leaks_nothing_and_closing_a_copy_does_not_unlink():
    cur = shared_curriculum(fixed_space(10), recompute_every=3)
    name, lock_left = cur.backend.name, _lock_left(cur)
    q = mp.get_context("forkserver").Queue()
    procs = [start_process("forkserver", w.churn, cur, i, q) for i in range(2)]
    [worker_result(q) for _ in procs]
    time.sleep(0.3)
    os.kill(procs[0].pid, signal.SIGKILL)
    procs[0].join(10)
    assert procs[0].exitcode == -signal.SIGKILL
    # (the other worker raises WorkerError if the kill landed while the lock was held)
    procs[1].kill()
    procs[1].join(10)
    assert segment_exists(name)
    start_process("fork", w.close_copy, cur, q).join(30)
    worker_result(q)
    assert segment_exists(name)  # an attached copy only drops its mapping
    cur.close()
    assert not segment_exists(name) and not lock_left()


def test_an_attached_copy_adds_its_sample_counts_when_it_closes():
    with shared_curriculum(fixed_space(4)) as cur:
        q = mp.get_context("fork").Queue()
        start_process("fork", w.close_copy, cur, q, 7).join(30)
        worker_result(q)
        assert cur.stats()["curriculum/samples"] == 7 == cur.state.samples.sum()


def test_a_process_dying_while_holding_the_lock_is_reported(monkeypatch):
    monkeypatch.setattr(sb_module, "POLL_S", 0.1)
    with shared_curriculum(fixed_space(3)) as cur:
        held = mp.get_context("fork").Event()
        proc = start_process("fork", w.die_holding_lock, cur, held)
        assert held.wait(30)
        pid = proc.pid
        proc.join(10)
        with pytest.raises(
            WorkerError,
            match=rf"process {pid} died while holding the lock of "
            rf"shared curriculum segment '{cur.backend.name}'",
        ):
            cur.update(0, 1.0)


@pytest.mark.parametrize("record_pid", [False, True])
def test_a_holder_killed_with_the_lock_is_detected_at_once(record_pid):
    """Killed before recording its pid, the holder wrote nothing: the lock is free again (it
    used to stall everyone for lock_timeout, 'held by process unknown'). Killed inside its
    locked section, it is named, and stays named for every later locker."""
    with Curriculum(fixed_space(3), backend=SharedMemoryBackend(lock_timeout=6.0)) as cur:
        held = mp.get_context("fork").Event()
        proc = start_process("fork", w.die_holding_lock_until_killed, cur, held, record_pid)
        assert held.wait(30)
        pid = proc.pid
        assert cur.backend.header[sb_module.HOLDER] == (pid if record_pid else 0)
        os.kill(pid, signal.SIGKILL)
        proc.join(10)
        start = time.monotonic()
        if record_pid:
            for _ in range(2):
                with pytest.raises(WorkerError, match=rf"process {pid} died while holding"):
                    cur.update(0, 1.0)
        else:
            cur.update(0, 1.0)
            assert cur.stats()["curriculum/updates"] == 1
            assert cur.backend.header[sb_module.HOLDER] == 0
        assert time.monotonic() - start < 5.0  # generous: POLL_S is 0.5 s, lock_timeout 6 s


def test_the_lock_excludes_threads_other_handles_and_fork_children():
    with shared_curriculum(fixed_space(2)) as cur:
        other = copy.deepcopy(cur.backend).lock()  # another handle in this process
        q = mp.get_context("fork").Queue()
        with cur._link.lock:
            assert not other.try_enter()
            took = []
            thread = threading.Thread(target=lambda: took.append(cur._link.lock.try_enter()))
            thread.start()
            thread.join(10)
            assert took == [False]
            start_process("fork", w.try_lock, cur, q).join(30)  # forked while the lock is held
            assert worker_result(q) is False
        assert other.try_enter()
        other.__exit__(None, None, None)
        start_process("fork", w.try_lock, cur, q).join(30)
        assert worker_result(q) is True


def test_importing_allocates_nothing():
    # Any shared memory or named semaphore made through multiprocessing starts the tracker.
    code = (
        "import multiprocessing.resource_tracker as rt\n"
        "import gymcurric, gymcurric.tasks as t\n"
        "print(rt._resource_tracker._fd is None)\n"
        "t.Curriculum(t.FixedTaskSpace([{'i': 0}])).sample()\n"
        "print(rt._resource_tracker._fd is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]  # nothing at import, nothing for local


# ---------------------------------------------------------------- determinism and equivalence


def _streams(seeds, n=40):
    with shared_curriculum(fixed_space(50), seed=0) as cur:
        ctx = mp.get_context("fork")
        q, go = ctx.Queue(), ctx.Event()
        out = []
        for seed in seeds:  # one at a time: results in seed order
            ready = ctx.Event()
            proc = start_process("fork", w.sample_after, cur, seed, n, ready, go, q)
            ready.wait(30)
            go.set()
            out.append(worker_result(q))
            proc.join(30)
        return out


def test_same_seeds_give_the_same_per_worker_streams_and_unseeded_workers_differ():
    a, b = _streams([10, 11, 12]), _streams([10, 11, 12])
    assert a == b
    assert len({tuple(s) for s in a}) == 3
    unseeded = _streams([None, None])
    assert unseeded[0] != unseeded[1]  # not the inherited generator, repeated


@pytest.mark.parametrize("lock_free", [True, False], ids=["seqlock", "locked-reads"])
@pytest.mark.parametrize("name", list(resume_configs()))
def test_shared_backend_gives_the_local_sequence_and_resumes_across_backends(
    name, lock_free, monkeypatch
):
    monkeypatch.setattr(sb_module, "LOCK_FREE_READS", lock_free)
    make_space, cfg = resume_configs()[name]
    reference = run(Curriculum(make_space(), cfg, seed=5), stateless_outcome, 1500)
    with Curriculum(make_space(), cfg, seed=5, backend="shared") as shared:
        head = run(shared, stateless_outcome, 700)
        assert head == reference[:700]
        saved = shared.state_dict()
        local = Curriculum(make_space(), cfg, seed=1)
        local.load_state_dict(pickle.loads(pickle.dumps(saved)))
        assert run(local, stateless_outcome, 800, start=700) == reference[700:]
        back = local.state_dict()
    with Curriculum(make_space(), cfg, seed=2, backend="shared") as shared:
        shared.load_state_dict(saved)
        assert run(shared, stateless_outcome, 800, start=700) == reference[700:]
        for key, arr in shared.state_dict()["arrays"].items():
            assert np.array_equal(arr, back["arrays"][key]), key


def test_reseed_gives_the_stream_of_that_seed_and_rejects_bad_seeds():
    a, b = Curriculum(fixed_space(30), seed=7), Curriculum(fixed_space(30), seed=0)
    b.reseed(7)
    assert a.sample(20).tolist() == b.sample(20).tolist()
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ConfigError, match="seed"):
            b.reseed(bad)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_local_curriculum_refuses_to_run_in_another_process(method):
    cur = Curriculum(fixed_space(3), seed=0)
    q = mp.get_context(method).Queue()
    for what in ("sample", "update"):
        start_process(method, w.use_copy, cur, what, q).join(60)
        kind, name, msg = q.get(timeout=10)
        assert (kind, name) == ("error", "ConfigError")
        assert "process-local curriculum was copied into process" in msg
        assert "backend='shared'" in msg
    copy_ = pickle.loads(pickle.dumps(cur))  # same process: an independent copy, allowed
    assert copy_.sample(5).tolist() == cur.sample(5).tolist()
    copy_.update(0, 1.0)
    assert cur.stats()["curriculum/updates"] == 0.0


def test_bad_backend_arguments_are_config_errors():
    with pytest.raises(ConfigError, match=r"'context'.*threads"):
        SharedMemoryBackend(context="threads")
    with pytest.raises(ConfigError, match="lock_timeout"):
        SharedMemoryBackend(lock_timeout=0)
    with pytest.raises(ConfigError, match="'backend'"):
        Curriculum(fixed_space(2), backend="gpu")
    backend = SharedMemoryBackend()
    with (
        Curriculum(fixed_space(2), backend=backend),
        pytest.raises(ConfigError, match="one backend per Curriculum"),
    ):
        Curriculum(fixed_space(2), backend=backend)


def test_pickling_outside_a_process_start_or_into_spawn_with_a_fork_lock_is_explained():
    with (
        shared_curriculum(fixed_space(2)) as cur,
        pytest.raises(ConfigError, match="only while a worker process is being started"),
    ):
        pickle.dumps(cur)
    with Curriculum(fixed_space(2), backend=SharedMemoryBackend(context="fork")) as cur:
        proc = mp.get_context("spawn").Process(target=w.use_copy, args=(cur, "sample", None))
        with pytest.raises(ConfigError, match="made for fork workers"):
            proc.start()


def test_closed_or_unlinked_segments_raise_worker_errors_naming_them():
    cur = shared_curriculum(fixed_space(3))
    name = cur.backend.name
    handle = copy.deepcopy(cur)  # an attached handle in this process
    assert handle.backend.name == name and not handle.backend.is_creator
    handle.update(1, 1.0)
    assert cur.state.count[1] == 1
    cur.close()
    for call in (cur.sample, handle.sample, lambda: handle.update(0, 1.0)):
        with pytest.raises(WorkerError, match=name):
            call()
    with pytest.raises(WorkerError, match=rf"segment '{name}' does not exist any more"):
        copy.deepcopy(handle.backend)
    handle.close()


@pytest.mark.parametrize("batch", [1, 1000])
def test_worker_updates_are_buffered_until_flush(batch):
    backend = SharedMemoryBackend(worker_update_batch=batch)
    with Curriculum(fixed_space(4), backend=backend, seed=0) as cur:
        ctx = mp.get_context("forkserver")
        q, go = ctx.Queue(), ctx.Event()
        p = start_process("forkserver", w.buffered, cur, 10, q, go)
        assert worker_result(q) == "updated"
        # batch 1: applied at once; a large batch: nothing visible before the worker flushes
        assert cur.stats()["curriculum/updates"] == (10 if batch == 1 else 0)
        go.set()
        assert worker_result(q) == 10
        p.join(30)
        assert cur.stats()["curriculum/updates"] == 10
        assert cur.state.count.tolist()[0] == 10
        assert cur.stats()["curriculum/stale_updates"] == 0


@pytest.mark.parametrize("batch", [16, 100])
def test_a_workers_flushed_buffer_leaves_the_state_of_one_by_one_updates(batch):
    """Buffers of 100 under a cadence of 80 take the vectorised path, 16 the one-by-one path."""
    rng = np.random.default_rng(batch)
    n = 700
    ids = rng.integers(0, 150, n).tolist()
    returns = rng.normal(size=n).tolist()
    wins = [None if x < 0.3 else bool(x < 0.6) for x in rng.random(n)]
    local = Curriculum(fixed_space(150), seed=0, recompute_every=80)
    for tid, r, s in zip(ids, returns, wins, strict=True):
        local.update(tid, r, success=s)
    backend = SharedMemoryBackend(worker_update_batch=batch)
    with Curriculum(fixed_space(150), backend=backend, seed=0, recompute_every=80) as cur:
        q = mp.get_context("fork").Queue()
        p = start_process("fork", w.stream, cur, ids, returns, wins, q)
        assert worker_result(q) == n
        p.join(30)
        want, got = local.state_dict()["arrays"], cur.state_dict()["arrays"]
        for key, arr in want.items():
            assert np.array_equal(arr, got[key], equal_nan=True), key
        assert cur.stats()["curriculum/updates"] == n


def test_creator_applies_updates_at_once_and_bad_batch_is_rejected():
    with Curriculum(
        fixed_space(4), backend=SharedMemoryBackend(worker_update_batch=50), seed=0
    ) as cur:
        cur.update(0, 1.0)
        assert cur.stats()["curriculum/updates"] == 1
    for bad in (0, 2.5, True):
        with pytest.raises(ConfigError, match="worker_update_batch"):
            SharedMemoryBackend(worker_update_batch=bad)


def test_a_slow_worker_reports_within_the_age_bound():
    backend = SharedMemoryBackend(worker_update_batch=1000)
    with Curriculum(fixed_space(4), backend=backend, seed=0) as cur:
        q = mp.get_context("fork").Queue()
        p = start_process("fork", w.slow_updates, cur, q)
        assert worker_result(q) == "done"
        assert cur.stats()["curriculum/updates"] == 2  # before the worker closes or flushes
        p.join(30)


def test_a_worker_does_not_wait_for_a_held_lock_until_its_buffer_bound():
    """A due buffer meets a taken lock: the worker keeps buffering (no wait) up to 8 batches;
    the update that reaches the bound waits; nothing is lost once the lock is free."""
    batch, hold = 4, 1.5
    backend = SharedMemoryBackend(worker_update_batch=batch)
    with Curriculum(fixed_space(4), backend=backend, seed=0) as cur:
        q = mp.get_context("fork").Queue()
        with cur.backend.lock():  # as if another process were recomputing
            p = start_process("fork", w.timed_updates, cur, 8 * batch + 2, q)
            time.sleep(hold)
        took = worker_result(q)
        p.join(30)
        bound = 8 * batch - 1  # the update that makes the buffer 8 batches long
        assert max(took[:bound]) < 0.5 * hold  # buffered, including the due ones
        assert took[bound] > 0.3 * hold  # at the bound: waits for the lock
        assert cur.stats()["curriculum/updates"] == 8 * batch + 2
        assert cur.state.count.tolist()[0] == 8 * batch + 2


def test_sampling_during_a_publish_draws_from_the_last_consistent_copy():
    n = 50  # stage 0 samples task 0 only, stage 1 task n-1 only
    scorer = SequentialScorer((Stage((0,), StopCondition(min_episodes=1)), Stage((n - 1,))))
    backend = SharedMemoryBackend(lock_timeout=0.5)
    with Curriculum(fixed_space(n), scorer=scorer, backend=backend, seed=0) as cur:
        assert set(cur.sample(20).tolist()) == {0}  # the copy is taken here
        later = Curriculum(fixed_space(n), scorer=scorer, seed=0)
        later.update(0, 1.0, success=True)
        opened = backend.publish_begin()  # a publish in progress, half-written:
        cur.state.cdf_a[:] = later.state.cdf_a
        t0 = time.monotonic()
        assert set(cur.sample(20).tolist()) == {0}  # no wait, no torn read
        assert time.monotonic() - t0 < 0.25
        backend.publish_end(opened)
        cur.update(0, 1.0, success=True)  # moves to stage 1 (a real publish)
        assert set(cur.sample(20).tolist()) == {n - 1}
        # no consistent copy yet (a fresh handle) and a publish that never ends: it waits,
        # then names the segment
        cur._link.snapshot = None
        opened = backend.publish_begin()
        with pytest.raises(WorkerError, match="mid-write"):
            cur.sample(1)
        backend.publish_end(opened)


def test_workers_hand_out_tasks_drawn_ahead_and_count_each_when_handed_out():
    backend = SharedMemoryBackend(worker_sample_batch=4)
    with Curriculum(fixed_space(6), backend=backend, seed=0) as cur:
        ctx = mp.get_context("fork")
        q, go = ctx.Queue(), ctx.Event()
        p = start_process("fork", w.tasks_ahead, cur, 6, q, go)
        first = worker_result(q)
        assert len(first) == 6
        # the parent disables every task but one: whatever the worker holds ahead (2 tasks
        # here) must not be handed out any more
        keep = 0
        for tid in range(1, 6):
            cur.mark_invalid(tid, "test")
        go.set()
        second = worker_result(q)
        p.join(30)
        assert second == [keep] * 6
        assert cur.stats()["curriculum/samples"] == 12  # counted as handed out, not as drawn
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigError, match="worker_sample_batch"):
            SharedMemoryBackend(worker_sample_batch=bad)


def test_the_creator_and_batch_one_workers_draw_at_every_call():
    one = Curriculum(fixed_space(6), backend=SharedMemoryBackend(worker_sample_batch=1), seed=0)
    ref = Curriculum(fixed_space(6), seed=0)
    with one, ref:
        assert [one.sample_task()[0] for _ in range(9)] == [ref.sample_task()[0] for _ in range(9)]
