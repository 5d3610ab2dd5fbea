"""The Ray backend: RayCurriculum client, CurriculumActor, envs on Ray workers."""

from __future__ import annotations

import copy
import pickle
import runpy
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from gymcurric.errors import (
    ConfigError,
    DataError,
    DependencyNotInstalled,
    GymcurricWarning,
    TaskError,
    WorkerError,
)
from gymcurric.integrations.ray import CurriculumActor, RayCurriculum, UpdateBatch
from gymcurric.tasks import (
    BoxTaskSpace,
    Curriculum,
    FixedTaskSpace,
    LearningProgressScorer,
    OpenEndedPool,
    PLRScorer,
    ReplacementPool,
    SignalConfig,
)
from gymcurric.tasks.transport import TaskTransport, transport_for
from gymcurric.wrappers import SampleCurriculumTask, load_curriculum_state, save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv, levels
from tests.tasks.learners import PracticeLearner, run

ROOT = Path(__file__).resolve().parents[2]
EXACT = {"flush_every": 1, "max_pending": 0, "refresh_seconds": None}  # a local run, remotely


def _fixed(n):
    return FixedTaskSpace([{"i": i} for i in range(n)])


def _same_state(a, b):
    assert a["config"] == b["config"]
    assert a["rng"] == b["rng"]
    assert a["disabled"] == b["disabled"]
    for name, arr in a["arrays"].items():
        assert np.array_equal(arr, b["arrays"][name]), name


# ---------------------------------------------------------------- without a Ray cluster


def test_import_does_not_import_ray():
    code = "import sys, gymcurric.integrations.ray; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(DependencyNotInstalled, match=r'pip install "gymcurric\[ray\]"'):
        RayCurriculum(_fixed(3), seed=0)


def test_actor_batches_apply_in_order_like_update():
    space = _fixed(6)
    actor, local = CurriculumActor(space, seed=0), Curriculum(space, seed=0)
    snap = actor.snapshot()
    assert actor.snapshot(snap.gen) is None  # current: nothing to ship
    ids = local.sample(200).tolist()
    succ = [i % 2 == 0 for i in ids]
    for tid, s in zip(ids, succ, strict=True):
        local.update(tid, float(s), s)
    batch = UpdateBatch(ids, [float(s) for s in succ], succ, [0.0] * 200, [0, 0, 5], [0, 0, 5], 2)
    new = actor.apply(batch, snap.gen)
    assert new is not None and new.gen != snap.gen  # 200 updates crossed the cadence
    np.testing.assert_array_equal(actor.probabilities()[1], local.probabilities()[1])
    st = actor.curriculum.state
    assert st.samples[0] == 2 and st.samples[5] == 1
    stats = actor.stats()
    assert stats["curriculum/samples"] == 3 and stats["curriculum/invalid_generated"] == 2


def test_actor_skips_sample_counts_of_a_replaced_task():
    actor = CurriculumActor(_fixed(4), pool=OpenEndedPool(capacity=2), seed=0)
    key = int(actor.curriculum.state.task_id[0])
    actor.apply(UpdateBatch([], [], [], [], [0, 1], [key + 1 if key < 3 else 0, -5]))
    assert actor.curriculum.state.samples.sum() == 0  # neither slot holds those keys
    assert actor.stats()["curriculum/samples"] == 2


def test_actor_applies_scores_and_answers_with_the_recomputed_snapshot():
    space = _fixed(4)
    actor = CurriculumActor(space, scorer=PLRScorer(), seed=0)
    local = Curriculum(space, scorer=PLRScorer(), seed=0)
    snap = actor.snapshot()
    new = actor.record_scores([1, 2, 3], [0.5, 2.0, 1.0], 2)
    assert new is not None and new.gen != snap.gen  # new scores: a recompute, a new snapshot
    local.record_scores([1, 2, 3], [0.5, 2.0, 1.0], nonfinite=2)
    local.recompute()
    np.testing.assert_array_equal(actor.probabilities()[1], local.probabilities()[1])
    np.testing.assert_array_equal(actor.scores([0, 2]), [np.nan, 2.0])
    assert actor.stats()["curriculum/nonfinite_scores"] == 2
    # sample counts arriving in a batch set the staleness clock as drawn, in order
    actor.apply(UpdateBatch([], [], [], [], [2, 0, 2], [2, 0, 2]))
    assert actor.curriculum.state.last_sampled.tolist() == [2, 0, 3, 0]


# ---------------------------------------------------------------- on a Ray cluster

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def make(cluster):
    made = []

    def _make(space, **kwargs):
        cur = RayCurriculum(space, **kwargs)
        made.append(cur)
        return cur

    yield _make
    for cur in made:
        cur.close()


def test_argument_errors(cluster):
    with pytest.raises(ConfigError, match="flush_every"):
        RayCurriculum(_fixed(3), flush_every=0)
    with pytest.raises(ConfigError, match="max_restarts"):
        RayCurriculum(_fixed(3), actor_options={"max_restarts": 2})
    with pytest.raises(ConfigError, match="unknown keyword"):
        RayCurriculum(_fixed(3), sead=0)
    with pytest.raises(ConfigError, match="exceeds"):  # raised by Curriculum on the actor
        RayCurriculum(_fixed(3), pool=ReplacementPool(capacity=10))


def test_matches_a_local_curriculum_exactly(make):
    # one client, every update sent and answered at once: the same run as a local curriculum
    kinds = np.arange(12) % 3  # learnable, mastered, impossible
    cur = make(_fixed(12), seed=3, **EXACT)
    local = Curriculum(_fixed(12), seed=3)
    seq = run(cur, PracticeLearner(kinds, seed=1), 1500)
    assert seq == run(local, PracticeLearner(kinds, seed=1), 1500)
    _same_state(cur.state_dict(), local.state_dict())
    share = np.bincount(kinds[np.array(seq[500:])], minlength=3) / 1000
    assert share[0] > 0.5, share  # LP concentrates on the learnable third


def test_batched_updates_give_the_local_distribution(make):
    # default batching and pipelining: the sampled stream differs from a local run, but the
    # actor applies it in order, so the local curriculum fed the same stream ends up equal
    kinds = np.arange(30) % 3
    v1 = {"scorer": LearningProgressScorer.v1(), "signal": SignalConfig(alpha=0.1)}  # sharp LP
    cur = make(_fixed(30), seed=0, refresh_seconds=None, **v1)
    local = Curriculum(_fixed(30), seed=0, **v1)
    learner, stream = PracticeLearner(kinds, seed=5), []
    for ep in range(3000):
        tid = int(cur.sample()[0])
        s = learner(tid, ep)
        cur.update(tid, float(s), s)
        stream.append((tid, s))
    for tid, s in stream:
        local.update(tid, float(s), s)
    keys, probs = cur.probabilities()
    lkeys, lprobs = local.probabilities()
    np.testing.assert_array_equal(keys, lkeys)
    np.testing.assert_array_equal(probs, lprobs)
    assert probs[kinds[keys] == 0].sum() > 0.55, probs  # uniform would give 1/3
    seq = np.array([t for t, _ in stream[1000:]])
    assert np.mean(kinds[seq] == 0) > 0.5
    stats = cur.stats()
    assert stats["curriculum/updates"] == stats["curriculum/samples"] == 3000
    assert stats["curriculum/ray_flushes"] < 3000 / 32 + 3


def test_seeded_sampling_is_deterministic(make):
    space = BoxTaskSpace([0.0, 0.0], [1.0, 2.0], bins=3)  # variants: ids carry a random part
    cur = make(space, seed=0, **EXACT)
    local = Curriculum(space, seed=0)
    for _ in range(50):  # the creator draws what a local curriculum would
        tid, task = cur.sample_task()
        assert (tid, task) == local.sample_task()
        cur.update(tid, 1.0, tid % 2 == 0)
        local.update(tid, 1.0, tid % 2 == 0)
    _same_state(cur.state_dict(), local.state_dict())
    a, b = copy.deepcopy(cur), pickle.loads(pickle.dumps(cur))
    assert a.backend.is_creator is False and a.actor == cur.actor
    assert a.sample(20).tolist() != b.sample(20).tolist()  # copies start unseeded
    a.reseed(7), b.reseed(7), cur.reseed(7)
    assert a.sample(20).tolist() == b.sample(20).tolist() == cur.sample(20).tolist()


def test_snapshot_staleness_is_bounded(make):
    cur = make(_fixed(40), seed=0, flush_every=8, max_pending=0, refresh_seconds=None)
    other = copy.deepcopy(cur)  # another client of the same actor
    gen = cur.snapshot.gen
    other.update_batch(list(range(40)) * 3, [1.0] * 120)  # crosses the recompute cadence
    other.flush()
    actor_gen = ray.get(cur.actor.generation.remote())
    assert actor_gen != gen
    for i in range(7):  # below flush_every: still sampling from the old snapshot, no call
        cur.update(i, 0.0)
        assert cur.snapshot.gen == gen and cur.staleness[0] == i + 1
    cur.update(7, 0.0)  # the 8th update flushes and brings the current distribution
    assert cur.snapshot.gen == ray.get(cur.actor.generation.remote()) and cur.staleness[0] == 0

    piped = make(_fixed(40), seed=0, flush_every=8, max_pending=1, refresh_seconds=None)
    for i in range(8):
        piped.update(i, 0.0)
    assert piped.staleness[0] == 8  # the answer to the first flush is collected at the next
    for i in range(8):
        piped.update(i, 0.0)
        assert piped.staleness[0] <= 2 * 8 - 1

    timed = make(_fixed(40), seed=0, refresh_seconds=1.0)
    timed.sample()
    if timed.staleness[1] < 0.9:  # (a loaded machine may take longer to get here)
        assert timed.flushes == 0  # sampling alone calls nothing while the snapshot is young
    time.sleep(1.05)
    timed.sample()  # older than refresh_seconds: one blocking refresh
    assert timed.flushes >= 1 and timed.staleness == (0, pytest.approx(0.0, abs=0.9))


def test_state_dict_round_trips_between_actor_and_local(make, tmp_path):
    space = _fixed(10)
    local = Curriculum(space, seed=1)
    run(local, PracticeLearner(np.arange(10) % 3, seed=2), 300)
    cur = make(space, seed=99, **EXACT)
    cur.load_state_dict(local.state_dict())  # local -> actor: continues the local run exactly
    _same_state(cur.state_dict(), local.state_dict())
    assert run(cur, PracticeLearner(np.arange(10) % 3, seed=3), 200, start=300) == run(
        local, PracticeLearner(np.arange(10) % 3, seed=3), 200, start=300
    )
    back = Curriculum(space, seed=5)  # actor -> local, through a checkpoint file
    load_curriculum_state(save_curriculum_state(tmp_path / "c.npz", cur), back)
    _same_state(back.state_dict(), cur.state_dict())
    assert back.sample(30).tolist() == cur.sample(30).tolist()
    with pytest.raises(DataError, match="another configuration"):  # unwrapped from Ray
        cur.load_state_dict(Curriculum(_fixed(11), seed=0).state_dict())


@ray.remote
def _episodes(cur, seed, n):
    cur.reseed(seed)
    seq = []
    for i in range(n):
        tid, task = cur.sample_task()
        assert task["level"] == tid
        cur.update(tid, float(i % 3), success=i % 2 == 0)
        seq.append(tid)
    cur.flush()  # a task must flush before it returns: its copy of the client goes away
    return seq


@ray.remote
class _EnvWorker:
    """Owns a SampleCurriculumTask-wrapped stub env and its copy of the client."""

    def __init__(self, cur, name):
        self.env = SampleCurriculumTask(TaskStubEnv(name), cur)

    def run(self, episodes, seed):
        out = []
        self.env.reset(seed=seed)
        for _ in range(episodes):
            done, ret = False, 0.0
            while not done:
                _, r, term, trunc, _ = self.env.step(0)
                ret += r
                done = term or trunc
            out.append((self.env.task_id, self.env.task, ret))
            self.env.reset()
        return out

    def close(self):
        self.env.close()  # closes (flushes) the worker's copy of the client


def test_updates_from_ray_tasks_and_actors_are_all_applied(make):
    space = levels(6, length=2)
    cur = make(space, seed=0, flush_every=16)
    tasks = [_episodes.remote(cur, s, 250) for s in range(3)]
    workers = [_EnvWorker.remote(cur, f"w{i}") for i in range(2)]
    runs = ray.get([w.run.remote(70, 10 + i) for i, w in enumerate(workers)])
    ray.get([w.close.remote() for w in workers])
    seqs = ray.get(tasks)
    for out in runs:  # the wrapper works unchanged on a Ray worker
        for tid, task, ret in out:
            assert task == space.task(tid) and ret == 2 * task["level"]
    ids = [t for seq in seqs for t in seq] + [t for out in runs for t, _, _ in out]
    state = cur.state_dict()
    counts = np.zeros(6, np.int64)
    counts[state["arrays"]["task_id"]] = state["arrays"]["count"]
    np.testing.assert_array_equal(counts, np.bincount(ids, minlength=6))  # none lost
    stats = cur.stats()
    assert stats["curriculum/updates"] == len(ids) == 3 * 250 + 2 * 70
    # every reset was counted (the wrapper's last reset drew one more task per worker)
    assert stats["curriculum/samples"] == len(ids) + 2
    assert len({tuple(s[:20]) for s in seqs}) == 3  # reseeded copies draw their own streams


def test_mark_invalid_and_errors_of_the_curriculum(make):
    cur = make(_fixed(3), seed=0, flush_every=4)
    cur.update(0, 1.0)
    cur.mark_invalid(1, "refused")  # blocking: the new snapshot never draws it
    assert 1 not in cur.sample(200).tolist()
    stats = cur.stats()
    assert stats["curriculum/invalid_reported"] == 1 and stats["curriculum/updates"] == 1
    cur.mark_invalid(0)
    with pytest.raises(TaskError, match="no valid task left"):
        cur.mark_invalid(2)
    with pytest.raises(ConfigError, match="task_id"):
        cur.update(7, 1.0)  # validated locally, nothing buffered
    with pytest.raises(Exception, match="finite"):
        cur.update(2, float("nan"))


def _kill_and_wait(actor, limit=10.0):
    # ray.kill is asynchronous: wait until the actor stops answering, or the test races it
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=limit)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.01)
    raise AssertionError("the killed actor still answers")


def test_dead_actor_raises_worker_error(make):
    cur = make(_fixed(5), seed=0, flush_every=4, refresh_seconds=None)
    worker_copy = copy.deepcopy(cur)
    cur.sample()
    _kill_and_wait(cur.actor)
    for i in range(3):
        cur.update(i, 1.0)  # buffered: nothing notices yet
    with pytest.raises(WorkerError, match=r"is gone .*3 episode report\(s\)"):
        cur.flush()
    with pytest.raises(WorkerError, match="is gone"):
        cur.sample()  # every later call raises too
    with pytest.raises(WorkerError, match="is gone"):
        worker_copy.stats()
    cur.close()  # closing a client of a dead actor does not raise


def test_creator_close_kills_the_actor_copy_close_only_flushes(make):
    cur = make(_fixed(4), seed=0)
    worker_copy = copy.deepcopy(cur)
    worker_copy.update(1, 1.0)
    worker_copy.close()
    assert worker_copy.backend.closed
    with pytest.raises(WorkerError, match="closed"):
        worker_copy.sample()
    with pytest.raises(WorkerError, match="cannot be copied"):
        pickle.dumps(worker_copy)
    assert cur.stats()["curriculum/updates"] == 1  # the copy flushed; the actor lives on
    other = copy.deepcopy(cur)
    cur.close()
    with pytest.raises(WorkerError, match="is gone"):
        other.stats()


def _episode(env):
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(0)
        done = term or trunc


def test_the_client_is_the_transport_a_wrapper_flushes_the_creator_never_closes_it(make):
    space = levels(4, length=2)
    cur = make(space, seed=0)  # flush_every=32: the episodes below stay buffered
    assert isinstance(cur, TaskTransport) and transport_for(cur) is cur
    env = SampleCurriculumTask(TaskStubEnv("driver"), cur)
    env.reset(seed=0)
    for _ in range(5):
        _episode(env)
        env.reset()
    assert ray.get(cur.actor.stats.remote())["curriculum/updates"] == 0  # still buffered
    env.flush_curriculum()
    assert ray.get(cur.actor.stats.remote())["curriculum/updates"] == 5  # reached the actor
    _episode(env)
    env.close()  # releases the creating client: it flushes, and is not closed
    assert not cur.backend.closed
    assert cur.stats()["curriculum/updates"] == 6  # the creator answers; the actor lives

    built = SampleCurriculumTask(None, cur, factory=lambda task: TaskStubEnv("f", task))
    assert built.env.fixed_task == space.task(int(cur.probabilities()[0][0]))  # any_task
    built.close()

    worker_copy = copy.deepcopy(cur)
    worker_copy.report_episode(1, 1.0, True, None)
    worker_copy.release()  # a copy's end: flushes and closes the copy
    assert worker_copy.backend.closed
    with pytest.raises(WorkerError, match="closed"):
        worker_copy.sample()
    worker_copy.release()  # released twice: nothing happens
    assert cur.stats()["curriculum/updates"] == 7
    assert not cur.backend.closed


def test_example_runs(cluster, monkeypatch, capsys):
    argv = ["curriculum_ray.py", "--workers", "2", "--num-envs", "2", "--rounds", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--steps", "60"])
    # run as __main__ so that Ray ships the example's worker class by value
    runpy.run_path(str(ROOT / "examples" / "curriculum_ray.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "round  1" in out and "episodes reported" in out


def _use_in_child(cur, q):
    try:
        cur.flush()
        q.put("no error")
    except ConfigError as exc:
        q.put(str(exc))


def test_a_forked_copy_is_refused_at_once(make):
    import multiprocessing as mp

    cur = make(_fixed(3), seed=0)
    ctx = mp.get_context("fork")  # inherits Ray's (dead in the child) connection
    q = ctx.Queue()
    p = ctx.Process(target=_use_in_child, args=(cur, q))
    p.start()
    msg = q.get(timeout=30)
    p.join(30)
    assert "does not survive a fork" in msg


@ray.remote
def _sleep(seconds):
    time.sleep(seconds)


def test_an_actor_that_does_not_answer_raises_worker_error(make):
    cur = make(_fixed(3), seed=0, timeout=0.3)
    with pytest.raises(WorkerError, match=r"did not answer within 0.3 s"):
        cur.link.get(_sleep.remote(3.0))  # stands in for a hung actor
    cur.flush()  # the client itself is still usable


def test_scores_reach_the_actor_as_a_local_curriculums_do(make):
    cur = make(_fixed(6), scorer=PLRScorer(staleness_coef=0.3), seed=2, **EXACT)
    local = Curriculum(_fixed(6), scorer=PLRScorer(staleness_coef=0.3), seed=2)
    ids = []
    for c in (cur, local):
        drawn = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(60):
                tid = int(c.sample()[0])
                drawn.append(tid)
                c.update(tid, return_=1.0, success=bool(i % 2))
                if i % 6 == 5:  # each batch of scores holds one NaN
                    scores = [float(t % 4) for t in drawn[-6:]]
                    c.update_scores([*drawn[-6:], 0], [*scores, np.nan])
        assert [w.category for w in caught] == [GymcurricWarning]  # once
        ids.append(drawn)
    assert ids[0] == ids[1]
    local.recompute()  # the actor recomputed for the last scores at once, the local one lazily
    _same_state(cur.state_dict(), local.state_dict())
    np.testing.assert_array_equal(cur.scores([0, 1, 2]), local.scores([0, 1, 2]))
    assert cur.stats()["curriculum/nonfinite_scores"] == 10
    with pytest.raises(ConfigError, match="scores"):
        cur.update_scores([1, 2], [1.0])
    with pytest.raises(ConfigError, match="task_id"):
        cur.update_scores([99], [1.0])
