"""Tasks the env refuses go through the channel: seeded runs repeat exactly, overlapped or not.

``make_curriculum_vec`` gives each sub-env's slot ``max_retries`` spare tasks, drawn ahead by
the main process. A sub-env whose env refuses a task leaves the refusal in its slot and takes
the next spare; the main process applies the refusals (``mark_invalid``, in env order) and
redraws the spares at its next refill. No sub-env reads or writes the shared curriculum state,
so whether the main process's work overlaps the workers' step (``overlap=True``, the default)
or runs before it, the task stream, the episodes and the curriculum state are the same, bit for
bit, in every run, with fork, forkserver or spawn workers. Before, a sub-env drew its retry from
the shared curriculum while the main process updated it, and overlapped runs with refusals
differed in 4 of 6 tries.
"""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorWrapper

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.tasks.transport import SharedMemoryTransport
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import SampleCurriculumTask, make_curriculum_vec

from .vector_runs import STUB

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
# every third task is refused (reward = level names the task; lengths 1-3 desync the envs)
REFUSING = FixedTaskSpace(
    [
        {"reject": True, "n": i} if i % 3 == 1 else {"level": i + 1, "len": 1 + i % 3}
        for i in range(24)
    ]
)
N = 4


def _build(cur, mode, overlap=True, vectorization="async", context="fork", hide=False):
    vector_kwargs = {"autoreset_mode": mode}
    if vectorization == "async":
        vector_kwargs["context"] = context
    envs = make_curriculum_vec(
        STUB,
        cur,
        N,
        vectorization_mode=vectorization,
        vector_kwargs=vector_kwargs,
        overlap=overlap,
    )
    if hide:  # a pass-through vector wrapper under the curriculum wrapper hides step_async
        envs.env = VectorWrapper(envs.env)
    return envs


def _run(mode, steps=60, **build_kwargs):
    """Everything a run shows: per step the task ids, rewards and dones; then the state."""
    cur = Curriculum(REFUSING, seed=0, backend="shared", recompute_every=3)
    envs = _build(cur, mode, **build_kwargs)
    try:
        _, info = envs.reset(seed=5)
        trace = [("reset", envs.task_ids.tolist())]
        for _ in range(steps):
            _, rewards, term, trunc, info = envs.step(np.zeros(N, dtype=np.int64))
            dones = term | trunc
            trace.append((envs.task_ids.tolist(), rewards.tolist(), dones.tolist()))
            if mode == AutoresetMode.DISABLED and dones.any():
                envs.reset(options={"reset_mask": dones})
                trace.append(("reset", envs.task_ids.tolist()))
        rejections = sum(envs.unwrapped.get_attr("rejections"))
        stats = envs.stats()  # applies the last step's work
        chan = envs._channel
        spares = None if chan is None else chan.waiting_spares()
        return {
            "trace": trace,
            "state": cur.state_dict(),
            "stats": stats,
            "rejections": rejections,
            "spares": spares,
            "overlapped": envs._async is not None and envs._async is envs.env,
        }
    finally:
        envs.close()
        cur.close()


def _same(a, b):
    """Equal runs: trace, stats, rejections, spares, and the state dict bit for bit."""
    assert a["trace"] == b["trace"]
    assert a["stats"].keys() == b["stats"].keys()
    for key, value in a["stats"].items():
        assert value == b["stats"][key] or (value != value and b["stats"][key] != value), key
    assert (a["rejections"], a["spares"]) == (b["rejections"], b["spares"])
    sa, sb = dict(a["state"]), dict(b["state"])
    arrays_a, arrays_b = sa.pop("arrays"), sb.pop("arrays")
    assert sa == sb  # generator state, disabled keys, config
    assert arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        assert np.array_equal(arrays_a[key], arrays_b[key], equal_nan=True), key


@pytest.fixture
def no_worker_draws(monkeypatch):
    """Fail a run in which a (forked) sub-env draws or refuses through the shared curriculum."""

    def fail(self, *args, **kwargs):
        raise AssertionError("a sub-env reached the shared curriculum itself")

    monkeypatch.setattr(SharedMemoryTransport, "take_task", fail)
    monkeypatch.setattr(SharedMemoryTransport, "refuse_task", fail)


@pytest.mark.parametrize("repeats", [3, pytest.param(12, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", MODES)
def test_overlapped_runs_with_refused_tasks_repeat_exactly(mode, repeats, no_worker_draws):
    # races show as runs that differ: more repeats in the slow suite (the default's three, and
    # the overlapped-vs-serial test below, catch an ordering that is not fixed)
    runs = [_run(mode) for _ in range(repeats)]
    first = runs[0]
    assert first["overlapped"]  # the default
    assert first["rejections"] >= 3 and first["stats"]["curriculum/invalid_reported"] >= 3
    assert first["stats"]["curriculum/updates"] > 40
    for other in runs[1:]:
        _same(first, other)


@pytest.mark.parametrize("mode", MODES)
def test_overlapped_and_serial_runs_with_refused_tasks_agree_exactly(mode, no_worker_draws):
    """The same operations on the curriculum, in the same order: only their timing differs."""
    over = _run(mode)
    serial = _run(mode, overlap=False)
    hidden = _run(mode, hide=True)  # overlap asked for, but no step_async to split the step
    assert over["overlapped"] and not serial["overlapped"] and not hidden["overlapped"]
    assert over["rejections"] >= 3
    _same(over, serial)
    _same(over, hidden)


@pytest.mark.parametrize("context", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_fork_forkserver_and_spawn_workers_give_the_same_run(context):
    fork = _run(AutoresetMode.NEXT_STEP, steps=40)
    other = [_run(AutoresetMode.NEXT_STEP, steps=40, context=context) for _ in range(2)]
    assert fork["rejections"] >= 3
    for run in other:
        _same(fork, run)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_sync_vector_envs_with_refused_tasks_repeat_exactly(mode):
    """No channel (one process): ``overlap`` changes nothing."""
    runs = [_run(mode, vectorization="sync", overlap=overlap) for overlap in (True, True, False)]
    assert runs[0]["rejections"] >= 3 and runs[0]["spares"] is None
    for other in runs[1:]:
        _same(runs[0], other)


def test_a_run_without_refusals_draws_spares_once(monkeypatch):
    """Per refill one draw, of the tasks taken; the spares are drawn at the first reset only."""
    space = FixedTaskSpace([{"level": i + 1, "len": 1 + i % 3} for i in range(6)])
    cur = Curriculum(space, seed=0, backend="shared")
    sizes, invalid = [], []
    draw = cur.draw
    monkeypatch.setattr(cur, "draw", lambda k=1: sizes.append(k) or draw(k))
    monkeypatch.setattr(cur, "mark_invalid", lambda *a: invalid.append(a))
    envs = _build(cur, AutoresetMode.NEXT_STEP)
    try:
        envs.reset(seed=0)
        for _ in range(40):
            envs.step(np.zeros(N, dtype=np.int64))
        envs.flush_curriculum()
        assert sizes[0] == N * (1 + 10)  # every env's next task and its max_retries=10 spares
        assert all(k <= N for k in sizes[1:]) and sum(sizes[1:]) > 20
        assert not invalid
        assert all(t >= 0 for row in envs._channel.waiting_spares() for t in row)
    finally:
        envs.close()
        cur.close()


def test_checkpoint_resume_with_refused_tasks_is_exact(tmp_path):
    """The spares are saved with the waiting tasks: the resumed run draws what the other did."""
    space = FixedTaskSpace(
        [{"reject": True} if i % 4 == 1 else {"level": i + 1, "len": 3} for i in range(12)]
    )

    def make(seed):
        cur = Curriculum(space, seed=seed, recompute_every=3, backend="shared")
        return cur, _build(cur, AutoresetMode.NEXT_STEP)

    def stream(envs, n):
        out = []
        for _ in range(n):
            _, rewards, _, _, _ = envs.step(np.zeros(N, dtype=np.int64))
            out.append((envs.task_ids.tolist(), rewards.tolist()))
        return out

    cur, envs = make(0)
    cur2, envs2 = make(7)
    try:
        envs.reset(seed=0)
        stream(envs, 12)  # episodes of 3 steps + the reset step: an episode boundary
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert np.load(path)["channel_spares"].shape == (N, 10)
        expected = stream(envs, 40)
        rejected = sum(envs.unwrapped.get_attr("rejections"))
        expected_state = cur.state_dict()["arrays"]

        load_curriculum_state(path, cur2, env=envs2)
        envs2.reset(seed=123)  # the resumed tasks, spares and generator win over the seed
        assert stream(envs2, 40) == expected
        assert rejected > 0 and sum(envs2.unwrapped.get_attr("rejections")) > 0
        for key, arr in cur2.state_dict()["arrays"].items():
            assert np.array_equal(arr, expected_state[key]), key
    finally:
        for e, c in ((envs, cur), (envs2, cur2)):
            e.close()
            c.close()


# ---------------------------------------------------------------- the channel alone


def test_a_refusal_and_the_spares_taken_are_applied_at_the_next_refill():
    space = FixedTaskSpace([{"i": i} for i in range(6)])
    cur = Curriculum(space, seed=0, backend="shared")
    chan = TaskChannel(3, spares=2)
    try:
        chan.refill(cur)
        assert all(t >= 0 for row in chan.waiting_spares() for t in row)
        waiting, spares = chan.waiting(), chan.waiting_spares()
        # env 1 refuses its waiting task and its first spare, and runs its second spare
        assert chan.take(1) == waiting[1]
        assert chan.refuse(1, waiting[1], "no room for the hazards")
        assert chan.take(1) is None and chan.take_spare(1) == spares[1][0]
        assert chan.refuse(1, spares[1][0], "again")
        assert chan.take_spare(1) == spares[1][1]
        assert chan.take_spare(1) is None  # used up
        assert chan.waiting_spares()[1] == [-1, -1]
        # env 2 refuses too, but is busy: its refusal waits for a refill that leaves it alone
        assert chan.take(2) == waiting[2] and chan.refuse(2, waiting[2], "busy")
        assert cur.stats()["curriculum/invalid_reported"] == 0.0  # nothing applied yet
        chan.refill(cur, busy=np.array([False, False, True]))
        disabled = {waiting[1], spares[1][0]}
        assert cur.stats()["curriculum/invalid_reported"] == 2.0
        live = set(cur.probabilities()[0].tolist())
        assert not disabled & live
        # the pool changed: every idle env's waiting task and spares are drawn again
        assert all(t in live for t in chan.waiting()[:2])
        assert all(t in live for row in chan.waiting_spares()[:2] for t in row)
        assert cur.stats()["curriculum/samples"] == 3.0  # env 1's task and its two spares
        chan.refill(cur)
        assert cur.stats()["curriculum/invalid_reported"] == 3.0
        assert cur.stats()["curriculum/samples"] == 4.0
        assert all(t >= 0 for row in chan.waiting_spares() for t in row)
    finally:
        chan.close()
        cur.close()


def test_a_channel_without_spares_leaves_refusals_to_the_sub_env():
    chan = TaskChannel(2)
    try:
        assert chan.spares == 0
        assert not chan.refuse(0, 3, "no room")  # the sub-env reports through the curriculum
        assert chan.take_spare(0) is None
        assert chan.waiting_spares() == [[], []]
    finally:
        chan.close()


def test_a_long_reason_is_cut_and_still_named():
    from gymcurric.errors import TaskError

    cur = Curriculum(FixedTaskSpace([{"i": 0}, {"i": 1}]), seed=0, backend="shared")
    chan = TaskChannel(1, spares=1)
    try:
        chan.refill(cur)
        tid = chan.take(0)
        other = 1 - tid
        cur.mark_invalid(other, "first")
        chan.refill(cur)
        tid = chan.take(0)
        assert chan.refuse(0, tid, "a" + "é" * 500)  # a two-byte character cut in two
        with pytest.raises(TaskError, match=r"no valid task left.*éé"):
            chan.refill(cur)
    finally:
        chan.close()
        cur.close()


def test_vector_wrapper_resume_channel_checks_the_spares():
    from gymcurric.errors import ConfigError

    cur = Curriculum(REFUSING, seed=0, backend="shared")
    envs = _build(cur, AutoresetMode.NEXT_STEP)
    try:
        assert isinstance(envs, SampleCurriculumTask)
        with pytest.raises(ConfigError, match="'spares'"):
            envs.resume_channel([-1] * N, [[-1]])
    finally:
        envs.close()
        cur.close()


def test_a_retry_passes_over_spares_of_a_task_the_env_just_refused():
    """A spare drawn before the refusal may be the refused task: the retry skips it.

    Without a channel the refusal removes the task before the next draw, so a pool of one
    refused and one valid task never fails a reset with ``max_retries=1``; the spares once
    made that reset fail whenever the waiting task and the spare were both the refused one.
    """
    space = FixedTaskSpace([{"reject": True}, {"level": 1, "len": 2}])
    for seed in range(6):
        cur = Curriculum(space, seed=seed, backend="shared")
        envs = make_curriculum_vec(
            STUB,
            cur,
            N,
            vectorization_mode="async",
            vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP, "context": "fork"},
            wrapper_kwargs={"max_retries": 1},
        )
        try:
            envs.reset(seed=seed)
            assert envs.task_ids.tolist() == [1] * N, seed
        finally:
            envs.close()
            cur.close()


def test_take_spare_skips_the_keys_refused_since_the_last_refill():
    space = FixedTaskSpace([{"i": i} for i in range(4)])
    cur = Curriculum(space, seed=0, backend="shared")
    chan = TaskChannel(1, spares=3, key_modulus=2)  # keys: the ids modulo 2
    try:
        # task 0 waits; the spares were drawn before the env refused it (key 0)
        chan.restore_waiting(cur, [0], [[2, 0, 3]])
        assert chan.take(0) == 0 and chan.refuse(0, 0, "no")
        assert chan.refused_keys(0) == {0}
        assert chan.take_spare(0) == 3  # 2 and 0 share the refused key
        assert chan.take_spare(0) is None
        before = cur.stats()["curriculum/samples"]
        chan.refill(cur)  # the refusal applied: the slot is read, nothing is skipped now
        assert chan.refused_keys(0) == set()
        # the waiting task and the spare run are counted; the two passed over are not
        assert cur.stats()["curriculum/samples"] == before + 2
    finally:
        chan.close()
        cur.close()
