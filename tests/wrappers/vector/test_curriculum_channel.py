"""Async vector envs from ``make_curriculum_vec``: tasks and results go through a TaskChannel."""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gymcurric.errors import ConfigError, NonFiniteValueError, TaskError
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks._shm import segment_exists
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers.vector import make_curriculum_vec
from tests.wrappers.vector.vector_runs import (
    MODES,
    SPACE,
    STUB,
    check_reports,
    level,
    run,
    run_disabled,
    task_id_stream,
)


def _make(
    cur, n=3, mode=AutoresetMode.NEXT_STEP, context="forkserver", in_main=True, **wrapper_kwargs
):
    return make_curriculum_vec(
        STUB,
        cur,
        n,
        vectorization_mode="async",
        vector_kwargs={"autoreset_mode": mode, "context": context},
        wrapper_kwargs=wrapper_kwargs or None,
        episodes_in_main=in_main,
    )


@pytest.mark.parametrize("context", ["fork", "forkserver"])
@pytest.mark.parametrize("mode", MODES)
def test_every_transition_has_its_task_and_every_episode_lands_by_the_next_step(mode, context):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _make(cur, mode=mode, context=context)
    try:
        assert isinstance(envs._channel, TaskChannel)
        starts = []
        finished = run(envs, starts=starts)
        # applied by this process during the next step (or now): no worker buffer to wait for
        envs.flush_curriculum()
        check_reports(cur, finished)
        taken = sum(starts)
        # each started episode counted once, when its sub-env took the task
        assert cur.stats()["curriculum/samples"] == float(taken)
    finally:
        envs.close()
        cur.close()


def test_the_same_seed_gives_the_same_tasks_in_every_env():
    def stream(seed):
        cur = Curriculum(SPACE, seed=0, backend="shared", recompute_every=4)
        envs = _make(cur, n=3, context="fork")
        try:
            envs.reset(seed=seed)
            out = [envs.task_ids.tolist()]
            for _ in range(60):
                envs.step(np.zeros(3, dtype=np.int64))
                out.append(envs.task_ids.tolist())
            return out, cur.state_dict()["arrays"]["samples"].tolist()
        finally:
            envs.close()
            cur.close()

    first, again, other = stream(1), stream(1), stream(2)
    assert first == again
    assert first[0] != other[0] or first != other


def test_a_refused_task_is_disabled_and_the_sub_env_runs_a_spare():
    tasks = [{"level": i + 1, "len": 2} for i in range(4)] + [{"level": 9, "reject": True}]
    cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend="shared", recompute_every=2)
    envs = _make(cur, n=2, context="fork")
    try:
        envs.reset(seed=0)
        for _ in range(80):
            _, rewards, _, _, _ = envs.step(np.zeros(2, dtype=np.int64))
            assert (rewards != 9).all()
        stats = envs.stats()
        assert stats["curriculum/invalid_reported"] >= 1.0  # once per sub-env that met it
        assert 4 not in cur.probabilities()[0].tolist()
        assert stats["curriculum/updates"] > 20
    finally:
        envs.close()
        cur.close()


def test_disabled_autoreset_with_reset_mask_through_the_channel():
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _make(cur, n=2, mode=AutoresetMode.DISABLED, context="fork")
    try:
        run_disabled(envs, cur, 30)
    finally:
        envs.close()
        cur.close()


@pytest.mark.filterwarnings("ignore:.*(Worker|exception|Traceback).*:UserWarning")
def test_a_nan_return_is_reported_from_the_step_that_ends_the_episode():
    tasks = [{"level": 1, "len": 2, "nan": True}]
    cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend="shared")
    envs = _make(cur, n=1, context="fork")
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(1, dtype=np.int64))
        with pytest.raises(NonFiniteValueError, match="task_id=0 is nan"):
            envs.step(np.zeros(1, dtype=np.int64))
        assert cur.stats()["curriculum/updates"] == 0.0
    finally:
        envs.close(terminate=True)
        cur.close()


def test_the_channel_segment_is_unlinked_on_close():
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _make(cur, n=2, context="forkserver")
    name = envs._channel._backend.name
    envs.reset(seed=0)
    assert segment_exists(name)
    envs.close()
    assert not segment_exists(name)
    cur.close()


# ---------------------------------------------------------------- the channel alone


def test_channel_counts_a_task_when_taken_and_revoked_tasks_never():
    cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(5)]), seed=0)
    chan = TaskChannel(2)
    try:
        chan.refill(cur)
        assert cur.stats()["curriculum/samples"] == 0.0  # drawn, not yet taken
        first = chan.take(0)
        assert first is not None and chan.take(0) is None  # one task waits per env
        chan.refill(cur)
        assert cur.stats()["curriculum/samples"] == 1.0
        waiting = chan._next_id[1]
        chan.refill(cur, revoke=np.array([1]))  # env 1's task is replaced, uncounted
        assert chan.take(1) is not None
        chan.refill(cur)
        assert cur.stats()["curriculum/samples"] == 2.0
        assert chan._given.tolist() == [2, 2]
        assert waiting >= 0
    finally:
        chan.close()


def test_channel_results_equal_update_batch():
    a = Curriculum(FixedTaskSpace([{"i": i} for i in range(5)]), seed=0)
    b = Curriculum(FixedTaskSpace([{"i": i} for i in range(5)]), seed=0)
    chan = TaskChannel(3)
    try:
        chan.put(0, 2, 1.5, None, 0.0)
        chan.put(2, 4, -1.0, 1.0, 2.0)
        assert chan.collect(a) == 2
        assert chan.collect(a) == 0  # each result is applied once
        b.update_batch([2, 4], [1.5, -1.0], [None, True], [0.0, 2.0])
        for key, arr in a.state_dict()["arrays"].items():
            assert np.array_equal(arr, b.state_dict()["arrays"][key]), key
    finally:
        chan.close()


def test_channel_argument_errors():
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigError, match="num_envs"):
            TaskChannel(bad)
    cur = Curriculum(SPACE, seed=0, backend="shared")
    chan = TaskChannel(5)
    try:
        from gymnasium.vector import SyncVectorEnv

        from gymcurric.wrappers.vector import SampleCurriculumTask
        from tests.curriculum_stubs import make_wrapped

        with pytest.raises(ConfigError, match="'channel'"):
            SampleCurriculumTask(SyncVectorEnv([lambda: make_wrapped(cur)]), cur, channel=chan)
    finally:
        chan.close()
        cur.close()


@pytest.mark.filterwarnings("ignore:.*(Worker|exception|Traceback).*:UserWarning")
def test_a_refused_channel_task_counts_against_max_retries():
    tasks = [{"level": 9, "reject": True}, {"level": 8, "reject": True}]
    cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend="shared")
    envs = _make(cur, n=1, context="fork", max_retries=0)
    try:
        with pytest.raises(TaskError, match=r"refused 1 curriculum tasks in a row.*'reject': True"):
            envs.reset(seed=0)
    finally:
        envs.close(terminate=True)
        cur.close()


def test_a_single_env_bound_to_a_channel_takes_its_tasks_and_leaves_its_results():
    from tests.curriculum_stubs import make_wrapped

    cur = Curriculum(SPACE, seed=0)
    chan = TaskChannel(1)
    env = make_wrapped(cur, "c", channel=chan)
    env.channel_index = 0
    try:
        chan.refill(cur)
        waiting = int(chan._next_id[0])
        _, info = env.reset()  # autoreset form: no seed, no options
        assert info["task_id"] == waiting
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(0)
            done = term or trunc
        assert cur.stats()["curriculum/updates"] == 0.0  # left in the channel
        assert chan.collect(cur) == 1
        assert cur.stats()["curriculum/updates"] == 1.0
        _, info = env.reset()  # nothing waits: the env draws from the curriculum itself
        assert info["task_id"] >= 0
    finally:
        chan.close()


@pytest.mark.parametrize("max_retries", [0, 1])
def test_an_autoreset_refusing_the_waiting_task_retries_within_max_retries(max_retries):
    from tests.curriculum_stubs import make_wrapped

    space = FixedTaskSpace([{"level": 2, "len": 2}, {"level": 9, "reject": True}])
    cur = Curriculum(space, seed=0)
    chan = TaskChannel(1)
    env = make_wrapped(cur, "r", channel=chan, max_retries=max_retries)
    env.channel_index = 0
    try:
        chan._next_id[0], chan._next_slot[0], chan._given[0] = 1, 1, 1  # the refused task waits
        if max_retries == 0:
            with pytest.raises(TaskError, match=r"refused 1 curriculum tasks.*'reject': True"):
                env.reset()
        else:
            _, info = env.reset()
            assert info["task_id"] == 0 and env.rejections == 1
        assert cur.stats()["curriculum/invalid_reported"] == 1.0
    finally:
        chan.close()


def test_waiting_tasks_are_redrawn_after_a_task_is_disabled():
    cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(2)]), seed=0, backend="shared")
    chan = TaskChannel(4)
    try:
        chan.refill(cur)
        waiting = chan._next_id.tolist()
        bad = waiting[0]
        cur.mark_invalid(bad, "refused elsewhere")
        chan.refill(cur)
        assert bad not in chan._next_id.tolist()  # every slot holds the one valid task now
        assert chan._given.tolist() == [1, 1, 1, 1] and chan._taken.tolist() == [0, 0, 0, 0]
        assert cur.stats()["curriculum/samples"] == 0.0  # withdrawn tasks are never counted
    finally:
        chan.close()
        cur.close()


def test_waiting_tasks_are_redrawn_after_an_eviction():
    from gymcurric.tasks import BucketedTaskSpace, OpenEndedPool, Span

    space = BucketedTaskSpace({"a": [Span(0, 100)]}, seed=1)
    pool = OpenEndedPool(capacity=4, min_samples=1, evictions_per_recompute=4)
    cur = Curriculum(space, seed=0, pool=pool, recompute_every=2, backend="shared")
    chan = TaskChannel(3)
    try:
        for _ in range(20):
            chan.refill(cur)
            live = set(cur.probabilities()[0].tolist())
            assert set(chan._next_id.tolist()) <= live  # never a task the pool has dropped
            for env in (1, 2):  # env 0 never resets: its waiting task would go stale
                tid = chan.take(env)
                chan.put(env, tid, float(env), None, 0.0)
            chan.collect(cur)  # evicts on the recompute cadence
        assert cur.stats()["curriculum/evictions"] > 0
    finally:
        chan.close()
        cur.close()


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_resume_of_an_async_vector_env_is_exact(tmp_path, mode):
    from gymcurric.wrappers import load_curriculum_state, save_curriculum_state

    space = FixedTaskSpace([{"level": i + 1, "len": 3} for i in range(6)])

    def make(seed):
        cur = Curriculum(space, seed=seed, recompute_every=3, backend="shared")
        return cur, _make(cur, n=2, mode=mode, context="fork")

    # episodes of 3 steps (NEXT_STEP: + the reset step): after 12 steps every env has just
    # started an episode, so the checkpoint falls on an episode boundary in both modes
    boundary = 12
    cur, envs = make(0)
    cur2, envs2 = make(7)
    try:
        envs.reset(seed=0)
        task_id_stream(envs, boundary)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        expected = task_id_stream(envs, 30)
        expected_state = cur.state_dict()["arrays"]

        load_curriculum_state(path, cur2, env=envs2)
        envs2.reset(seed=123)  # the resumed tasks and generator win over the seed
        assert task_id_stream(envs2, 30) == expected
        for key, arr in cur2.state_dict()["arrays"].items():
            assert np.array_equal(arr, expected_state[key]), key
    finally:
        for e, c in ((envs, cur), (envs2, cur2)):
            e.close()
            c.close()


# ---------------------------------------------------------------- episodes accounted in main


def _same_success(info):
    return info.get("is_success", info.get("success"))


@pytest.mark.parametrize("mode", [*MODES, AutoresetMode.DISABLED])
def test_episodes_accounted_in_main_equal_the_sub_envs_reports(mode):
    """Same tasks, same curriculum state bit for bit; and the workers left no result."""

    def state(in_main=True, **wrapper_kwargs):
        cur = Curriculum(SPACE, seed=0, backend="shared", recompute_every=3)
        envs = _make(cur, n=3, mode=mode, context="fork", in_main=in_main, **wrapper_kwargs)
        try:
            assert envs._channel.episodes_in_main == (in_main and not wrapper_kwargs)
            if mode == AutoresetMode.DISABLED:
                run_disabled(envs, cur, 40)
            else:
                finished = run(envs, steps=60)
                envs.flush_curriculum()
                check_reports(cur, finished)
            if envs._channel.episodes_in_main:  # the sub-envs' step is the env's own
                assert envs._channel._res_seq.tolist() == [0, 0, 0]
            else:
                assert envs._channel._res_seq.sum() > 0
            return cur.state_dict()["arrays"]
        finally:
            envs.close()
            cur.close()

    in_main, reported = state(), state(success_fn=_same_success)
    kept = state(in_main=False)
    assert in_main["count"].sum() > 0 and in_main["cost_ema"].any()
    for key, arr in in_main.items():
        assert np.array_equal(arr, reported[key], equal_nan=True), key
        assert np.array_equal(arr, kept[key], equal_nan=True), key


@pytest.mark.parametrize("mode", MODES)
def test_is_success_none_accounted_in_main_reads_success(mode, monkeypatch):
    # is_success None is SB3's "not reported": the episode's success is info["success"], as
    # the sub-env wrapper reads it (accounted in main, it was None: no success at all)
    cur = Curriculum(SPACE, seed=0, backend="shared")
    recorded = []
    record = cur.record
    monkeypatch.setattr(
        cur, "record", lambda ids, *rest: (recorded.append((ids, rest[1])), record(ids, *rest))
    )
    envs = make_curriculum_vec(
        STUB, cur, 2, vectorization_mode="async",
        vector_kwargs={"autoreset_mode": mode, "context": "fork"},
        success_key="success", is_success_none=True,
    )  # fmt: skip
    try:
        assert envs._channel.episodes_in_main
        finished = run(envs, steps=30)
        envs.flush_curriculum()
        check_reports(cur, finished)
    finally:
        envs.close()
        cur.close()
    pairs = [(int(t), s) for ids, succ in recorded for t, s in zip(ids, succ, strict=True)]
    assert len(pairs) == len(finished)
    assert all(s == float(level(t) % 2 == 0) for t, s in pairs), pairs


def test_explicit_task_episodes_are_not_accounted_in_main():
    cur = Curriculum(SPACE, seed=0, backend="shared")
    envs = _make(cur, n=2, context="fork")
    try:
        envs.reset(seed=0, options={"task": {"level": 7, "len": 2}})
        assert envs.task_ids.tolist() == [-1, -1]
        for _ in range(2):
            _, rewards, _, _, _ = envs.step(np.zeros(2, dtype=np.int64))
            assert (rewards == 7).all()
        assert cur.stats()["curriculum/updates"] == 0.0  # the explicit episodes ended
        finished = []
        for _ in range(12):  # then curriculum tasks, reported
            _, _, term, trunc, _ = envs.step(np.zeros(2, dtype=np.int64))
            finished += [int(envs.task_ids[i]) for i in np.flatnonzero(term | trunc)]
        assert envs.stats()["curriculum/updates"] == float(len(finished)) > 0
    finally:
        envs.close()
        cur.close()


@pytest.mark.filterwarnings("ignore:.*(Worker|exception|Traceback).*:UserWarning")
@pytest.mark.parametrize("success_key", ["is_success", "unread"])  # unread: no success
def test_a_nan_cost_accounted_in_main_is_an_error_naming_the_sub_envs(success_key):
    tasks = [{"level": 2, "len": 2, "nan_cost": True}]
    cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend="shared")
    envs = make_curriculum_vec(
        STUB, cur, 2, vectorization_mode="async", vector_kwargs={"context": "fork"},
        success_key=success_key,
    )  # fmt: skip
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(NonFiniteValueError, match="cost of task_id=0 is nan") as err:
            envs.step(np.zeros(2, dtype=np.int64))
        assert "sub-envs [0, 1]" in "".join(err.value.__notes__)
        assert cur.stats()["curriculum/updates"] == 0.0  # the batch is rejected whole
    finally:
        envs.close(terminate=True)
        cur.close()


def test_binding_a_sub_env_to_a_main_accounting_channel():
    from tests.curriculum_stubs import make_wrapped

    cur = Curriculum(SPACE, seed=0)
    chan = TaskChannel(1, episodes_in_main=True)
    try:
        env = make_wrapped(cur, "m", channel=chan)
        env.channel_index = 0
        chan.refill(cur)
        env.reset()
        env.step(0)
        assert env._sums.one_return == 0.0  # nothing summed in the sub-env
        for _ in range(30):
            env.step(0)
        assert chan.collect(cur) == 0  # and nothing reported: the main process accounts
        env.channel_index = -1
        env.reset()
        env.step(0)
        assert env._sums.one_return != 0.0  # unbound: summed again
        with pytest.raises(ConfigError, match="success_fn or a factory"):
            make_wrapped(cur, "f", channel=chan, success_fn=_same_success).channel_index = 0
        with pytest.raises(ConfigError, match="no channel"):
            make_wrapped(cur, "n").channel_index = 0
    finally:
        chan.close()
