"""Regret scores (``Curriculum.update_scores``) and the PLR scorers (gymcurric/tasks/regret.py)."""

from __future__ import annotations

import multiprocessing as mp
import warnings
from pathlib import Path

import numpy as np
import pytest

from gymcurric.errors import ConfigError, DataError, GymcurricWarning
from gymcurric.tasks import (
    Curriculum,
    CurriculumConfig,
    CurriculumState,
    FixedTaskSpace,
    LearningProgressScorer,
    LocalBackend,
    OpenEndedPool,
    PLRScorer,
    RobustPLRScorer,
    SequentialScorer,
    Stage,
    state_layout,
)
from gymcurric.tasks.checkpoint import ADDED_KEYS, STATE_FORMAT
from gymcurric.tasks.regret import check_scores, mean_ranks, uses_scores
from gymcurric.tasks.state import EXPLORE, K
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

DATA = Path(__file__).resolve().parent / "data"


def _space(n=6):
    return FixedTaskSpace([{"level": i} for i in range(n)])


def _state(scores, scored, last_sampled, samples):
    n = len(scores)
    st = CurriculumState(LocalBackend().allocate(state_layout(n, 1)))
    st.initialise()
    st.pool[:] = EXPLORE
    st.task_id[:] = np.arange(n)
    st.score[:] = scores
    st.scored[:] = scored
    st.last_sampled[:] = last_sampled
    st.counters[K.SAMPLES] = samples
    return st


def _weights(scorer, st):
    mask = st.pool >= 0
    return scorer.weights(st, scorer.raw(st, mask, None), mask)


# Five tasks: four seen with scores 2, 1, 1, 0.5 (a tie), one unseen; 10 draws so far.
SCORES, SCORED, LAST = [2.0, 1.0, 1.0, 0.5, 9.0], [1, 3, 1, 2, 0], [10, 8, 4, 0, 0]


# ---------------------------------------------------------------- the formulas, by hand


def test_mean_ranks_share_ties():
    assert mean_ranks(np.array([2.0, 1.0, 1.0, 0.5])).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert mean_ranks(np.array([3.0, 3.0, 3.0])).tolist() == [2.0, 2.0, 2.0]
    assert mean_ranks(np.array([-1.0, 5.0])).tolist() == [2.0, 1.0]


def test_rank_prioritisation_with_ties_temperature_staleness_and_the_unseen_mixture():
    st = _state(SCORES, SCORED, LAST, samples=10)
    p = _weights(PLRScorer(temperature=0.5, staleness_coef=0.2, replay_prob=0.6), st)
    # P_S: ranks 1, 2.5, 2.5, 4 -> rank^(-1/0.5) = 1, 0.16, 0.16, 0.0625
    h = [1.0, 0.16, 0.16, 0.0625]
    ps = [x / sum(h) for x in h]
    # P_C: draws since each was last handed out: 10-10, 10-8, 10-4, 10-0
    pc = [0 / 18, 2 / 18, 6 / 18, 10 / 18]
    replay = [0.8 * a + 0.2 * b for a, b in zip(ps, pc, strict=True)]
    expected = [0.6 * r for r in replay] + [0.4]  # the unseen task gets 1 - replay_prob
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    assert p[2] - p[1] == pytest.approx(0.6 * 0.2 * (pc[2] - pc[1]))  # tie: equal P_S
    # the score of an unseen task is never read
    st.score[4] = -50.0
    np.testing.assert_array_equal(
        _weights(PLRScorer(temperature=0.5, staleness_coef=0.2, replay_prob=0.6), st), p
    )


def test_temperature_sharpens_and_staleness_zero_is_pure_rank():
    st = _state(SCORES, [1, 1, 1, 1, 1], LAST, samples=10)
    st.score[4] = 0.1  # now seen, ranked last (5)
    sharp = _weights(PLRScorer(temperature=0.1, staleness_coef=0.0), st)
    w = np.array([1.0, 2.5, 2.5, 4.0, 5.0]) ** -10.0
    np.testing.assert_allclose(sharp, w / w.sum(), rtol=1e-12)  # every task seen: all replay
    flat = _weights(PLRScorer(temperature=10.0, staleness_coef=0.0), st)
    w = np.array([1.0, 2.5, 2.5, 4.0, 5.0]) ** -0.1
    np.testing.assert_allclose(flat, w / w.sum(), rtol=1e-12)
    assert flat.max() - flat.min() < sharp.max() - sharp.min()


def test_power_prioritisation_and_uniform_mix():
    st = _state(SCORES, [1, 1, 1, 1, 0], LAST, samples=10)
    p = _weights(PLRScorer(prioritization="power", temperature=0.5, staleness_coef=0.0), st)
    w = [1.0, 0.25, 0.25, 0.0625]  # (score / max)^(1 / 0.5)
    expected = [0.5 * x / sum(w) for x in w] + [0.5]
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    mixed = _weights(
        PLRScorer(prioritization="power", temperature=0.5, staleness_coef=0.0, uniform_mix=0.1),
        st,
    )
    np.testing.assert_allclose(mixed, 0.9 * np.array(expected) + 0.02, rtol=1e-12)
    st.score[:4] = [-1.0, 0.0, -3.0, 0.0]  # no positive score: uniform over the seen tasks
    p = _weights(PLRScorer(prioritization="power", staleness_coef=0.0), st)
    np.testing.assert_allclose(p, [0.125] * 4 + [0.5])


@pytest.mark.parametrize(
    ("scorer", "unseen_share"),
    [
        (PLRScorer(replay_prob=0.6), 0.4),  # fixed: 1 - replay_prob
        (PLRScorer(replay_schedule="proportionate"), 0.2),  # 4 of 5 seen: replay 0.8
        (PLRScorer(min_seen=0.9), 1.0),  # 4 of 5 < 0.9: no replay yet
        (PLRScorer(min_seen=0.8), 0.5),  # 4 of 5 >= 0.8: replays start
    ],
)
def test_replay_schedules(scorer, unseen_share):
    p = _weights(scorer, _state(SCORES, SCORED, LAST, samples=10))
    assert p[4] == pytest.approx(unseen_share)
    assert p.sum() == pytest.approx(1.0)


def test_no_seen_task_is_uniform_and_all_seen_always_replays():
    p = _weights(PLRScorer(), _state(SCORES, [0] * 5, LAST, samples=10))
    np.testing.assert_allclose(p, [0.2] * 5)
    st = _state(SCORES, [1] * 5, [10] * 5, samples=10)  # all seen, none stale: P_C uniform
    p = _weights(PLRScorer(temperature=1.0, staleness_coef=0.5), st)
    h = np.array([1 / 2, 1 / 3.5, 1 / 3.5, 1 / 5, 1.0])  # slot 4's 9.0 is now rank 1
    np.testing.assert_allclose(p, 0.5 * h / h.sum() + 0.5 * 0.2, rtol=1e-12)


def test_raw_is_the_score_of_seen_tasks():
    st = _state(SCORES, SCORED, LAST, samples=10)
    mask = np.array([True, True, False, True, True])
    np.testing.assert_array_equal(PLRScorer().raw(st, mask, None), [2.0, 1.0, 0.0, 0.5, 0.0])


def test_scorer_arguments_are_checked():
    for kwargs, key in [
        ({"prioritization": "softmax"}, "prioritization"),
        ({"replay_schedule": "sometimes"}, "replay_schedule"),
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"staleness_coef": 1.5}, "staleness_coef"),
        ({"replay_prob": True}, "replay_prob"),
        ({"min_seen": -0.1}, "min_seen"),
        ({"uniform_mix": "0.1"}, "uniform_mix"),
    ]:
        with pytest.raises(ConfigError, match=key):
            PLRScorer(**kwargs)


# ---------------------------------------------------------------- the score hook


def test_update_scores_stores_the_latest_and_counts():
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    cur.update_scores([2, 0, 2], [1.0, 0.5, 3.0])  # task 2 twice: the last wins
    st = cur.state
    assert st.score.tolist() == [0.5, 0.0, 3.0, 0.0]
    assert st.scored.tolist() == [1, 0, 2, 0]
    np.testing.assert_array_equal(cur.scores([0, 1, 2, 3]), [0.5, np.nan, 3.0, np.nan])
    stats = cur.stats()
    assert stats["curriculum/scores"] == 3 and stats["curriculum/seen_frac"] == 0.5
    cur.update_scores(np.array([], np.int64), np.array([]))  # nothing: fine
    assert cur.stats()["curriculum/scores"] == 3


def test_new_scores_recompute_before_the_next_draw_only_for_a_scorer_that_reads_them():
    plr = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    before = plr.stats()["curriculum/recomputes"]
    plr.update_scores([1], [1.0])
    plr.sample()
    assert plr.stats()["curriculum/recomputes"] == before + 1
    assert plr.probabilities()[1][1] > 0.25
    lp = Curriculum(_space(4), seed=0)
    before = lp.stats()["curriculum/recomputes"]
    lp.update_scores([1], [1.0])
    lp.sample()
    assert lp.stats()["curriculum/recomputes"] == before
    assert uses_scores(SequentialScorer(stages=(Stage(tasks=(0, 1)),), inner=PLRScorer()))
    assert not uses_scores(LearningProgressScorer())


def test_the_lp_scorer_ignores_scores_bit_for_bit():
    def run(with_scores):
        cur = Curriculum(_space(6), seed=4, recompute_every=4)
        ids = []
        for i in range(120):
            tid = int(cur.sample()[0])
            ids.append(tid)
            cur.update(tid, return_=float(tid), success=(tid + i) % 3 == 0)
            if with_scores and i % 7 == 0:
                cur.update_scores([tid, (tid + 1) % 6], [float(i), np.nan])
        return ids, cur.probabilities()[1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GymcurricWarning)
        scored = run(True)
    plain = run(False)
    assert scored[0] == plain[0]
    np.testing.assert_array_equal(scored[1], plain[1])


def test_nonfinite_scores_are_counted_skipped_and_warned_about_once():
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    clean = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    with pytest.warns(GymcurricWarning, match=r"skipped 2 non-finite.*task_id=1, score=nan"):
        cur.update_scores([0, 1, 2, 3], [1.0, np.nan, np.inf, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise here
        cur.update_scores([1], [-np.inf])
    clean.update_scores([0, 3], [1.0, 2.0])
    assert cur.stats()["curriculum/nonfinite_scores"] == 3
    assert cur.stats()["curriculum/scores"] == 2
    cur.recompute()
    clean.recompute()
    np.testing.assert_array_equal(cur.probabilities()[1], clean.probabilities()[1])
    assert np.isfinite(cur.state.score).all()
    assert [int(cur.sample()[0]) for _ in range(50)] == [int(clean.sample()[0]) for _ in range(50)]


def test_scores_of_tasks_that_left_the_pool_are_stale():
    cur = Curriculum(_space(6), scorer=PLRScorer(), pool=OpenEndedPool(capacity=2), seed=0)
    live = set(cur.state.task_id.tolist())
    gone = [t for t in range(6) if t not in live]
    before = cur.state.score.copy()
    cur.update_scores(gone, [5.0] * len(gone))
    stats = cur.stats()
    assert stats["curriculum/stale_scores"] == len(gone) and stats["curriculum/scores"] == 0
    np.testing.assert_array_equal(cur.state.score, before)
    assert np.isnan(cur.scores(gone)).all()


@pytest.mark.parametrize(
    ("ids", "scores", "key"),
    [
        (3, [1.0], "task_ids"),
        ([[0, 1]], [1.0], "task_ids"),
        ([0.0, 1.0], [1.0, 2.0], "task_ids"),
        ([True], [1.0], "task_ids"),
        (np.array([0, 1]), np.array([[1.0, 2.0]]), "scores"),
        ([0, 1], [1.0, "2"], "scores"),
        ([0], [False], "scores"),
        ([0, 1], [1.0], "scores"),
        ([0, 9], [1.0, 1.0], "task_id"),  # outside the space
        ([0, -1], [1.0, 1.0], "task_id"),
    ],
)
def test_malformed_scores_raise_naming_the_parameter_and_change_nothing(ids, scores, key):
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    before = {k: v.copy() for k, v in cur.state.arrays().items()}
    with pytest.raises(ConfigError, match=rf"'{key}'"):
        cur.update_scores(ids, scores)
    for name, arr in cur.state.arrays().items():
        np.testing.assert_array_equal(arr, before[name], err_msg=name)


def test_check_scores_accepts_lists_tuples_and_arrays():
    ids, values = check_scores((np.int64(1), 2), np.array([1, 2], np.int32), source="t")
    assert ids.dtype == np.int64 and values.dtype == np.float64
    assert values.tolist() == [1.0, 2.0]


def test_record_scores_takes_finite_scores_and_a_count_of_the_skipped():
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    cur.record_scores([1], [2.0], nonfinite=3)
    assert cur.stats()["curriculum/nonfinite_scores"] == 3 and cur.state.score[1] == 2.0
    with pytest.raises(ConfigError, match="scores"):
        cur.record_scores([1], [np.nan])
    with pytest.raises(ConfigError, match="nonfinite"):
        cur.record_scores([1], [1.0], nonfinite=-1)


# ---------------------------------------------------------------- staleness in the state


def test_last_sampled_is_the_sample_counter_at_each_tasks_last_draw():
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    drawn = [int(cur.sample()[0]) for _ in range(5)] + cur.sample(6).tolist()
    expected = [0] * 4
    for n, tid in enumerate(drawn, start=1):
        expected[tid] = n
    assert cur.state.last_sampled.tolist() == expected
    draw = cur.draw(3)  # drawn ahead (transports): stale until counted
    assert cur.state.last_sampled.tolist() == expected
    cur.count(draw.slots, draw.ids.tolist())
    for n, tid in enumerate(draw.ids.tolist(), start=12):
        expected[tid] = n
    assert cur.state.last_sampled.tolist() == expected
    assert cur.state.counters[K.SAMPLES] == 14


def test_a_refilled_slot_starts_its_staleness_clock_when_its_task_enters():
    cur = Curriculum(
        _space(40),
        scorer=PLRScorer(),
        pool=OpenEndedPool(capacity=4, min_samples=2),
        recompute_every=1,  # maintained at every update
        seed=0,
    )
    for _ in range(300):
        held = cur.state.task_id.copy()
        tid = int(cur.sample()[0])
        evictions = cur.stats()["curriculum/evictions"]
        cur.update(tid, return_=0.0, success=False)
        if cur.stats()["curriculum/evictions"] > evictions:
            break
        cur.update_scores([tid], [0.0])  # all scores 0: warm tasks are evicted
    else:
        pytest.fail("no eviction")
    st = cur.state
    (new,) = np.flatnonzero(st.task_id != held)
    assert st.samples[new] == 0 and st.scored[new] == 0 and st.score[new] == 0.0
    assert st.last_sampled[new] == st.counters[K.SAMPLES] > 0  # stale since it entered


def test_same_seed_same_samples():
    def run():
        cur = Curriculum(_space(8), scorer=PLRScorer(), seed=7, recompute_every=5)
        ids = []
        for i in range(200):
            tid = int(cur.sample()[0])
            ids.append(tid)
            cur.update(tid, return_=1.0, success=True)
            if i % 10 == 9:
                cur.update_scores(ids[-10:], [(t * 7 + i) % 5 / 4 for t in ids[-10:]])
        return ids

    a, b = run(), run()
    assert a == b
    assert len(set(a[100:])) > 1  # not a degenerate stream


# ---------------------------------------------------------------- backends


def _play(cur, n, seed=0):
    """Sample, report an episode, and every 8 draws the tasks' scores; the drawn ids."""
    ids = []
    for i in range(n):
        tid = int(cur.sample()[0])
        ids.append(tid)
        cur.update(tid, return_=float(tid % 3), success=bool((tid + i + seed) % 2))
        if i % 8 == 7:
            cur.update_scores(ids[-8:], [float((t * 5 + i) % 7) for t in ids[-8:]])
    return ids


def test_the_shared_backend_gets_the_same_distribution_and_samples_as_local():
    cfg = CurriculumConfig(scorer=PLRScorer(staleness_coef=0.3), seed=2, recompute_every=6)
    local = Curriculum(_space(10), cfg)
    with Curriculum(_space(10), cfg, backend="shared") as shared:
        assert _play(local, 300) == _play(shared, 300)
        np.testing.assert_array_equal(local.probabilities()[1], shared.probabilities()[1])
        for name, arr in local.state.arrays().items():
            np.testing.assert_array_equal(arr, shared.state.arrays()[name], err_msg=name)


def _score_in_worker(cur, q):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cur.update_scores([3, 4], [2.0, np.nan])
        assert [w.category for w in caught] == [GymcurricWarning]
        for _ in range(5):
            cur.sample()
        cur.flush()
        q.put("ok")
    except Exception as exc:  # sent back to the test
        q.put(f"{type(exc).__name__}: {exc}")


def test_a_worker_process_scores_a_shared_curriculum():
    ctx = mp.get_context("fork")
    with Curriculum(_space(6), scorer=PLRScorer(), seed=0, backend="shared") as cur:
        q = ctx.Queue()
        p = ctx.Process(target=_score_in_worker, args=(cur, q), daemon=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (py3.12+)
            p.start()
        assert q.get(timeout=60) == "ok"
        p.join(30)
        np.testing.assert_array_equal(cur.scores([3, 4]), [2.0, np.nan])
        stats = cur.stats()
        assert stats["curriculum/nonfinite_scores"] == 1 and stats["curriculum/samples"] == 5
        assert cur.state.last_sampled.max() == 5


# ---------------------------------------------------------------- checkpoints


def test_state_dict_round_trip_continues_exactly():
    cfg = CurriculumConfig(scorer=RobustPLRScorer(), seed=1, recompute_every=5)
    cur = Curriculum(_space(8), cfg)
    _play(cur, 100)
    state = cur.state_dict()
    assert state["format"] == STATE_FORMAT
    assert {"score", "scored", "last_sampled"} <= set(state["arrays"])
    other = Curriculum(_space(8), cfg)
    other.load_state_dict(state)
    assert _play(other, 100, seed=1) == _play(cur, 100, seed=1)


def resume_and_play(path):
    """Load the checkpoint ``path`` into a new curriculum and play on (new process)."""
    cfg = CurriculumConfig(
        scorer=PLRScorer(replay_schedule="proportionate"), seed=9, recompute_every=5
    )
    cur = Curriculum(_space(8), cfg)
    load_curriculum_state(path, cur)
    return _play(cur, 80, seed=1)


def test_a_checkpoint_file_resumes_in_a_new_interpreter(tmp_path):
    cfg = CurriculumConfig(
        scorer=PLRScorer(replay_schedule="proportionate"), seed=9, recompute_every=5
    )
    cur = Curriculum(_space(8), cfg)
    _play(cur, 60)
    path = save_curriculum_state(tmp_path / "plr.npz", cur)
    resumed = call_in_new_interpreter("tests.tasks.test_regret", "resume_and_play", str(path))
    assert resumed == _play(cur, 80, seed=1)


def _play_v1(cur, n):
    """What the v1 checkpoint's author ran (see test_a_checkpoint_saved_before_scores_loads)."""
    ids = []
    for _ in range(n):
        tid = int(cur.sample()[0])
        ids.append(tid)
        cur.update(tid, return_=float(tid), success=(tid + len(ids)) % 3 == 0)
    return ids


def test_a_checkpoint_saved_before_scores_existed_loads_and_continues_as_it_did():
    """``data/curriculum_state_v1.npz`` was written by the code before this change.

    It holds ``Curriculum(FixedTaskSpace([{"level": i} for i in range(6)]), seed=3,
    recompute_every=4)`` after ``_play_v1(cur, 40)`` (format ``gymcurric.curriculum/1``, no
    score arrays, 21 counters); that code then drew the ids below with ``_play_v1(cur, 30)``.
    """
    then = [4, 3, 4, 4, 2, 4, 5, 0, 5, 2, 2, 0, 3, 1, 5, 1, 3, 2, 4, 0]
    then += [4, 5, 5, 5, 4, 4, 4, 4, 5, 4]
    path = DATA / "curriculum_state_v1.npz"
    saved = load_curriculum_state(path)["config"]  # the configuration it was saved with,
    saved.pop("space")
    for dotted, value in ADDED_KEYS.items():  # with the values of the keys added since
        *parts, key = dotted.split(".")
        part = saved
        for name in parts:
            part = part[name]
        part.setdefault(key, value)
    cur = Curriculum(_space(6), CurriculumConfig.from_dict(saved))
    state = load_curriculum_state(path, cur)
    assert state["format"] == "gymcurric.curriculum/1" and "score" not in state["arrays"]
    assert cur.state.scored.sum() == 0 and cur.stats()["curriculum/scores"] == 0
    assert _play_v1(cur, 30) == then
    resaved = cur.state_dict()  # saved again: the current format
    assert resaved["format"] == STATE_FORMAT and resaved["arrays"]["counters"].size == K.N


def test_an_old_state_dict_loads_but_a_half_upgraded_one_is_refused():
    cur = Curriculum(_space(6), seed=0)
    _play_v1(cur, 20)
    old = cur.state_dict()
    old["format"] = "gymcurric.curriculum/1"
    for name in ("score", "scored", "last_sampled"):
        del old["arrays"][name]
    old["arrays"]["counters"] = old["arrays"]["counters"][:21]
    fresh = Curriculum(_space(6), seed=5)
    fresh.load_state_dict(old)
    assert _play_v1(fresh, 20) == _play_v1(cur, 20)
    half = cur.state_dict()
    del half["arrays"]["scored"]  # the current format without an array
    with pytest.raises(DataError, match="arrays"):
        fresh.load_state_dict(half)
    half["format"] = "gymcurric.curriculum/0"
    with pytest.raises(DataError, match="format"):
        fresh.load_state_dict(half)


def test_a_state_with_broken_score_arrays_is_refused():
    cur = Curriculum(_space(4), scorer=PLRScorer(), seed=0)
    cur.sample(3)
    for name, value, match in [
        ("last_sampled", 99, "last_sampled"),
        ("scored", -1, "scored"),
        ("score", np.nan, "score"),
    ]:
        state = cur.state_dict()
        state["arrays"][name][0] = value
        with pytest.raises(DataError, match=match):
            cur.load_state_dict(state)


# ---------------------------------------------------------------- config


def test_config_round_trip_and_unknown_scorer_names_the_choices():
    cfg = CurriculumConfig(scorer=PLRScorer(temperature=0.3, replay_schedule="proportionate"))
    assert CurriculumConfig.from_dict(cfg.to_dict()) == cfg
    robust = CurriculumConfig.from_dict({"scorer": {"type": "RobustPLRScorer"}})
    assert robust.scorer == RobustPLRScorer() and robust.scorer.staleness_coef == 0.3
    with pytest.raises(ConfigError, match=r"scorer.type.*'PLRScorer', 'RobustPLRScorer'"):
        CurriculumConfig.from_dict({"scorer": {"type": "PLR"}})
    with pytest.raises(ConfigError, match=r"scorer.prioritization"):
        CurriculumConfig.from_dict({"scorer": {"type": "PLRScorer", "prioritization": "top"}})
    with pytest.raises(DataError, match="temperature"):  # a state of another configuration
        Curriculum(_space(4), scorer=PLRScorer(temperature=0.2)).load_state_dict(
            Curriculum(_space(4), scorer=PLRScorer()).state_dict()
        )
