import math

import numpy as np
import pytest

from gymcurric.errors import ConfigError, DataError, NonFiniteValueError
from gymcurric.tasks import (
    Curriculum,
    CurriculumState,
    FixedTaskSpace,
    LearnabilityScorer,
    LearningProgressScorer,
    LocalBackend,
    OpenEndedPool,
    ReplacementPool,
    SequentialScorer,
    SignalConfig,
    Stage,
    StopCondition,
    UniformScorer,
    reweight,
    state_layout,
)
from gymcurric.tasks.scorers import WEIGHTINGS, zscore_sigmoid
from gymcurric.tasks.signals import check_episode, normalised_cost, record_episode
from gymcurric.tasks.state import EXPLORE, S


def make_state(n: int) -> CurriculumState:
    st = CurriculumState(LocalBackend().allocate(state_layout(n, 1)))
    st.initialise()
    st.pool[:] = EXPLORE
    st.task_id[:] = np.arange(n)
    return st


DEFAULT = SignalConfig()


def feed(st, slot, signals, cfg=DEFAULT, cost=0.0):
    for s in signals:
        record_episode(st, cfg, slot, float(s), float(s), cost)


ALL = np.ones(4, dtype=bool)
A01 = SignalConfig(alpha=0.1)  # gymcurric 0.1's default rate

# ---------------------------------------------------------------- signals


def test_emas_are_running_means_until_their_horizon_then_emas():
    st = make_state(1)
    cfg = SignalConfig(alpha=0.25, slow_factor=0.5)
    seq = [1, 0, 0, 1, 1, 1, 0, 1, 1, 1]
    feed(st, 0, seq, cfg)
    # fast: rate max(0.25, 1/n): exact mean of the first 4, then EMA
    f = float(np.mean(seq[:4]))
    for s in seq[4:]:
        f += 0.25 * (s - f)
    assert st.fast[0] == pytest.approx(f)
    # slow: horizon 1/(0.125) = 8 episodes
    w = float(np.mean(seq[:8]))
    for s in seq[8:]:
        w += 0.125 * (s - w)
    assert st.slow[0] == pytest.approx(w)
    assert st.count[0] == 10 and st.base[0] == pytest.approx(np.mean(seq[:5]))


def test_w2_is_the_variance_factor_of_fast():
    st = make_state(1)
    feed(st, 0, [1, 0, 1], SignalConfig(alpha=0.1))
    assert st.w2[0] == pytest.approx(1 / 3)  # mean of 3 samples


def test_return_normalisation_fixed_and_running():
    st = make_state(2)
    s = record_episode(st, SignalConfig(return_range=(0.0, 10.0)), 0, 15.0, None, 0.0)
    assert s == 1.0
    cfg = SignalConfig()
    assert record_episode(st, cfg, 1, 5.0, None, 0.0) == 0.5  # one return seen: no range yet
    assert record_episode(st, cfg, 1, 1.0, None, 0.0) == 0.0
    assert record_episode(st, cfg, 1, 3.0, None, 0.0) == 0.5
    assert (st.scalars[S.RET_LO], st.scalars[S.RET_HI]) == (1.0, 5.0)


def test_success_is_preferred_unless_source_is_return():
    st = make_state(1)
    assert record_episode(st, SignalConfig(), 0, 100.0, 0.25, 0.0) == 0.25
    cfg = SignalConfig(source="return", return_range=(0.0, 200.0))
    assert record_episode(st, cfg, 0, 100.0, 1.0, 0.0) == 0.5
    with pytest.raises(ConfigError, match="needs success"):
        record_episode(st, SignalConfig(source="success"), 0, 1.0, None, 0.0)


def test_cost_is_normalised_by_limit_or_largest_seen():
    st = make_state(2)
    feed(st, 0, [1.0], cost=2.0)
    feed(st, 1, [1.0], cost=8.0)
    assert normalised_cost(st, SignalConfig()).tolist() == [0.25, 1.0]
    assert normalised_cost(st, SignalConfig(cost_limit=4.0)).tolist() == [0.5, 1.0]


@pytest.mark.parametrize(
    "ret,succ,cost,err",
    [
        (math.nan, None, None, NonFiniteValueError),
        (math.inf, None, None, NonFiniteValueError),
        (1.0, math.nan, None, NonFiniteValueError),
        (1.0, None, math.inf, NonFiniteValueError),
        (1.0, 1.5, None, ConfigError),
        ("1", None, None, ConfigError),
        (np.float32(np.nan), None, None, NonFiniteValueError),
    ],
)
def test_episode_values_are_checked(ret, succ, cost, err):
    with pytest.raises(err, match="task_id=7"):
        check_episode(7, ret, succ, cost)


@pytest.mark.parametrize(
    "kw",
    [
        dict(source="x"),
        dict(alpha=0.0),
        dict(alpha=1.5),
        dict(slow_factor=1.0),
        dict(return_range=(1.0, 1.0)),
        dict(baseline_episodes=-1),
        dict(cost_limit=0.0),
    ],
)
def test_signal_config_errors_name_field_and_value(kw):
    ((key, value),) = kw.items()
    with pytest.raises(ConfigError) as exc:
        SignalConfig(**kw)
    assert exc.value.key == key and repr(value) in str(exc.value)


# ---------------------------------------------------------------- learning progress


def test_reweight_endpoints_identity_and_stretch():
    p = np.linspace(0, 1, 11)
    assert np.allclose(reweight(p, 0.5), p)
    r = reweight(p, 0.1)
    assert r[0] == 0 and r[-1] == pytest.approx(1.0)
    assert np.all(np.diff(r) > 0)
    assert r[1] > 0.4  # 0.1 -> 0.5: differences near 0 are stretched


def test_lp_is_bidirectional_and_zero_for_flat_tasks():
    st = make_state(4)
    sc = LearningProgressScorer(baseline=False)
    feed(st, 0, [0] * 30 + [1] * 15)  # improving
    feed(st, 1, [1] * 30 + [0] * 15)  # forgetting
    feed(st, 2, [1] * 45)  # mastered
    feed(st, 3, [0] * 45)  # impossible
    raw = sc.raw(st, ALL, SignalConfig())
    assert raw[0] > 0.1 and raw[1] > 0.1
    assert raw[2] == 0.0 and raw[3] == 0.0


def test_lp_baseline_normalisation_uses_the_first_episodes():
    st = make_state(2)
    feed(st, 0, [1, 1, 1, 1, 1] + [0] * 40)  # started high then dropped below its baseline
    feed(st, 1, [0, 0, 0, 0, 0] + [1] * 40)  # started at 0 and improved
    with_b = LearningProgressScorer().raw(st, np.ones(2, bool), SignalConfig())
    without = LearningProgressScorer(baseline=False).raw(st, np.ones(2, bool), SignalConfig())
    assert st.base.tolist() == [1.0, 0.0]
    assert with_b[0] == 0.0 and without[0] > 0.0  # x clipped to 0 below the baseline
    assert with_b[1] == pytest.approx(without[1])


def test_lp_performance_and_cost_terms():
    st = make_state(2)
    feed(st, 0, [1] * 20, cost=0.0)
    feed(st, 1, [1] * 20, cost=5.0)
    active = np.ones(2, bool)
    perf = LearningProgressScorer(performance_weight=0.5, baseline=False)
    assert perf.raw(st, active, SignalConfig()).tolist() == pytest.approx([0.5, 0.5])
    cost = LearningProgressScorer(performance_weight=0.5, cost_weight=0.2, baseline=False)
    assert cost.raw(st, active, SignalConfig()).tolist() == pytest.approx([0.5, 0.3])


def test_lp_noise_z_discounts_chance_successes_and_keeps_a_sustained_rise():
    st = make_state(4)  # fed with the slower EMAs of gymcurric 0.1 (alpha 0.1)
    rng = np.random.default_rng(0)
    chance = [float(x < 0.01) for x in rng.random(200)]
    chance[-1] = 1.0  # a chance success just now: the fast EMA jumps
    feed(st, 0, chance, A01)  # uncontrollable: 1 % successes whatever the practice
    feed(st, 1, [0] * 40 + [1] * 15, A01)  # a sustained rise
    feed(st, 2, [1] * 45, A01)  # mastered
    feed(st, 3, [0] * 45, A01)  # impossible
    plain = LearningProgressScorer(baseline=False, noise_z=0.0).raw(st, ALL, SignalConfig())
    noisy = LearningProgressScorer(baseline=False, noise_z=2.0).raw(st, ALL, SignalConfig())
    assert plain[0] > 0.05  # the chance success looks like progress...
    assert noisy[0] < 0.25 * plain[0]  # ...and within its noise counts (almost) as none
    assert noisy[1] > 0.6 * plain[1] > 0.0  # the rise keeps most of its score
    assert noisy[2] == plain[2] == 0.0 and noisy[3] == plain[3] == 0.0
    # the share k is exactly 1 - z * sd / |x_f - x_s| (clipped), on the raw scale (theta 0.5)
    flat = LearningProgressScorer(baseline=False, noise_z=1.5, theta=0.5)
    p = np.clip(st.slow, 0.01, 0.99)
    sd = np.sqrt(p * (1 - p) * st.w2)
    diff = np.abs(st.fast - st.slow)
    want = diff * np.clip(1 - 1.5 * np.divide(sd, diff, where=diff > 0, out=np.ones(4)), 0, 1)
    assert flat.raw(st, ALL, SignalConfig()) == pytest.approx(want)


def test_lp_noise_z_zero_is_the_scorer_without_it():
    st = make_state(4)
    rng = np.random.default_rng(1)
    for slot in range(4):
        feed(st, slot, (rng.random(30) < 0.2 * slot).astype(float))
    sc = LearningProgressScorer(noise_z=0.0)
    xf, xs = sc.normalised(st, st.fast, st.slow)
    off = np.abs(reweight(xf, sc.theta) - reweight(xs, sc.theta))  # the LP formula, no gate
    assert np.array_equal(sc.raw(st, ALL, SignalConfig()), off)
    for bad in (-1.0, float("nan"), float("inf"), "2"):
        with pytest.raises(ConfigError, match="noise_z"):
            LearningProgressScorer(noise_z=bad)


def test_a_state_saved_before_noise_z_and_weighting_existed_loads_into_v1():
    space = FixedTaskSpace([{"level": i} for i in range(3)])
    v1 = {"scorer": LearningProgressScorer.v1(), "signal": A01}  # gymcurric 0.1's defaults
    cur = Curriculum(space, seed=0, **v1)
    cur.update(0, 1.0, success=True)
    old = cur.state_dict()
    del old["config"]["scorer"]["noise_z"]  # as written before the options
    del old["config"]["scorer"]["weighting"]
    del old["config"]["scorer"]["fallback"]
    fresh = Curriculum(space, seed=0, **v1)
    fresh.load_state_dict(old)
    assert fresh.stats() == cur.stats()
    noisy = Curriculum(space, seed=0, scorer=LearningProgressScorer.v1(noise_z=2.0), signal=A01)
    with pytest.raises(DataError, match="noise_z"):  # but not into a curriculum that uses them
        noisy.load_state_dict(old)
    with pytest.raises(DataError, match="weighting") as exc:  # nor into today's defaults
        Curriculum(space, seed=0).load_state_dict(old)
    assert "LearningProgressScorer.v1()" in str(exc.value)  # the message says what loads it


def test_a_state_saved_before_fallback_existed_loads_as_uniform_fallback():
    space = FixedTaskSpace([{"level": i} for i in range(3)])
    cur = Curriculum(space, seed=0)
    cur.update(0, 1.0, success=True)
    old = cur.state_dict()
    del old["config"]["scorer"]["fallback"]
    fresh = Curriculum(space, seed=0)
    fresh.load_state_dict(old)
    assert fresh.stats() == cur.stats()
    with pytest.raises(DataError, match="fallback"):
        Curriculum(
            space, seed=0, scorer=LearningProgressScorer(fallback="progress")
        ).load_state_dict(old)


def test_zscore_sigmoid_puts_cold_tasks_on_the_same_scale():
    y = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    warm = np.array([True, True, True, False, False])
    cold = np.array([False, False, False, True, False])
    w = zscore_sigmoid(y, warm, cold, temperature=1.0, cold_z=0.0)
    z = (y[:3] - y[:3].mean()) / y[:3].std()
    assert w[:3] == pytest.approx(1 / (1 + np.exp(-z)))
    assert w[3] == 0.5 and w[4] == 0.0  # cold at z=0: like the average warm task
    assert np.all(zscore_sigmoid(np.zeros(3), np.ones(3, bool), np.zeros(3, bool), 0.1, 0) == 0.5)


def test_lp_weights_sum_to_one_over_the_mask_and_respect_uniform_mix():
    st = make_state(4)
    for i in range(3):
        feed(st, i, [0] * 20 + [1] * (5 * i), A01)
    for weighting in WEIGHTINGS:
        sc = LearningProgressScorer(uniform_mix=0.2, theta=0.5, noise_z=0.0, weighting=weighting)
        raw = sc.raw(st, ALL, SignalConfig())
        mask = np.array([True, True, True, False])
        p = sc.weights(st, raw, mask)
        assert p.sum() == pytest.approx(1.0) and p[3] == 0.0
        assert p[:3].min() >= 0.2 / 3 - 1e-12
        assert p[2] > p[1] > p[0]


def test_proportional_weights_by_hand():
    st = make_state(4)
    st.count[:] = [5, 5, 5, 1]  # slot 3 is cold (min_samples 3)
    raw = np.array([0.0, 0.1, 0.3, 0.0])
    mask = np.array([True, True, True, True])
    sc = LearningProgressScorer(uniform_mix=0.1)
    # warm: w = raw; cold: the best warm task's w (0.3); then (1 - u) w / sum(w) + u / n
    want = 0.9 * np.array([0.0, 0.1, 0.3, 0.3]) / 0.7 + 0.1 / 4
    assert sc.weights(st, raw, mask) == pytest.approx(want)
    # no warm task has progress: cold tasks weigh 1, warm ones get the exploration share only
    assert sc.weights(st, np.zeros(4), mask) == pytest.approx([0.025, 0.025, 0.025, 0.925])
    # nothing cold and nothing progressing: uniform
    st.count[3] = 5
    assert sc.weights(st, np.zeros(4), mask) == pytest.approx([0.25] * 4)
    # a negative value (cost above progress) weighs 0, not less than 0
    assert sc.weights(st, np.array([-1.0, 0.0, 1.0, 0.0]), mask)[0] == pytest.approx(0.025)
    with pytest.raises(ConfigError, match="weighting"):
        LearningProgressScorer(weighting="softmax")
    for name, value in (("temperature", 0.05), ("explore_z", 0.0)):  # sigmoid-only knobs
        with pytest.raises(ConfigError, match="weighting='sigmoid' only") as exc:
            LearningProgressScorer(**{name: value})
        assert exc.value.key == name
        assert getattr(LearningProgressScorer(weighting="sigmoid", **{name: value}), name) == value


def test_progress_fallback_keeps_sub_noise_progress_and_ignores_tasks_that_never_moved():
    st = make_state(4)
    feed(st, 0, [0] * 12 + [1] * 3, A01)  # rising, but within its noise for a strict gate
    feed(st, 1, [0] * 15, A01)  # never succeeded: no progress at all
    feed(st, 2, [1] * 15, A01)  # mastered
    feed(st, 3, [0, 1] * 7 + [0], A01)  # noise around 0.5
    mask = np.ones(4, bool)
    strict = dict(noise_z=50.0, uniform_mix=0.1)  # a gate nothing clears
    uniform = LearningProgressScorer(**strict)
    progress = LearningProgressScorer(**strict, fallback="progress")
    for sc in (uniform, progress):
        assert not sc.raw(st, ALL, A01).any()  # nothing beyond the gate
    assert uniform.weights(st, np.zeros(4), mask) == pytest.approx([0.25] * 4)
    ungated = progress.ungated(st)
    assert ungated[0] > 0 and ungated[1] == 0 and ungated[2] == 0
    want = 0.9 * ungated / ungated.sum() + 0.1 / 4  # proportional to the ungated progress
    got = progress.weights(st, np.zeros(4), mask)
    assert got == pytest.approx(want)
    assert got[1] == pytest.approx(0.025) and got[0] > 0.5
    # where something clears the gate, the fallback changes nothing
    raw = np.array([0.0, 0.0, 0.0, 0.2])
    assert progress.weights(st, raw, mask) == pytest.approx(uniform.weights(st, raw, mask))
    # nothing moved anywhere: uniform after all
    flat = make_state(2)
    feed(flat, 0, [0] * 15, A01)
    feed(flat, 1, [0] * 15, A01)
    assert progress.weights(flat, np.zeros(2), np.ones(2, bool)) == pytest.approx([0.5, 0.5])
    with pytest.raises(ConfigError, match="fallback") as exc:
        LearningProgressScorer(fallback="hold")
    assert "uniform" in str(exc.value) and "'hold'" in str(exc.value)
    with pytest.raises(ConfigError, match="proportional"):
        LearningProgressScorer(weighting="sigmoid", fallback="progress")
    with pytest.raises(ConfigError, match=r"cost_weight=0\.5"):  # it would ignore the penalty
        LearningProgressScorer(fallback="progress", cost_weight=0.5)


def test_v1_is_gymcurric_0_1s_scorer():
    old = LearningProgressScorer.v1()
    assert (old.theta, old.min_samples, old.uniform_mix, old.noise_z, old.weighting) == (
        0.1,
        10,
        0.0,
        0.0,
        "sigmoid",
    )
    assert LearningProgressScorer.v1(theta=0.2).theta == 0.2


@pytest.mark.parametrize(
    "kw",
    [
        dict(theta=0.0),
        dict(temperature=0.0, weighting="sigmoid"),
        dict(min_samples=0),
        dict(uniform_mix=1.1),
        dict(cost_weight=-1.0),
        dict(baseline_max=1.0),
        dict(explore_z=math.nan, weighting="sigmoid"),
    ],
)
def test_lp_config_errors_name_field_and_value(kw):
    key, value = next(iter(kw.items()))
    with pytest.raises(ConfigError) as exc:
        LearningProgressScorer(**kw)
    assert exc.value.key == key and exc.value.source == "LearningProgressScorer"
    assert repr(value) in str(exc.value)


# ---------------------------------------------------------------- learnability / uniform


def test_learnability_peaks_at_half_and_is_unbiased_for_young_tasks():
    st = make_state(4)
    feed(st, 0, [0, 1] * 20, A01)
    feed(st, 1, [1] * 40, A01)
    feed(st, 2, [0] * 40, A01)
    feed(st, 3, [0, 0, 0, 0, 1], A01)  # p = 0.2 from 5 samples (alpha 0.1: a running mean)
    raw = LearnabilityScorer().raw(st, ALL, SignalConfig())
    assert raw[0] > 0.2 and raw[1] == 0.0 and raw[2] == 0.0
    assert raw[3] == pytest.approx(0.2 * 0.8 / (1 - 1 / 5))


def test_learnability_top_k_and_cold_value():
    st = make_state(4)
    for i, p in enumerate([0.5, 0.1, 0.3]):
        feed(st, i, [1] * int(100 * p) + [0] * int(100 * (1 - p)))
    sc = LearnabilityScorer(top_k=2)
    p = sc.weights(st, sc.raw(st, ALL, SignalConfig()), ALL)
    assert np.count_nonzero(p) == 2 and p[3] == 0.5  # slot 3 is cold: cold_value 0.25 = top
    sc = LearnabilityScorer(cold_value=0.0)
    p = sc.weights(st, sc.raw(st, ALL, SignalConfig()), ALL)
    assert p[3] == 0.0 and p[0] > p[2] > p[1]


def test_uniform_scorer():
    st = make_state(4)
    mask = np.array([True, False, True, True])
    assert UniformScorer().weights(st, np.zeros(4), mask).tolist() == [1 / 3, 0, 1 / 3, 1 / 3]


# ---------------------------------------------------------------- sequential


def _seq_curriculum(stages, **kw):
    space = FixedTaskSpace([{"level": i} for i in range(6)])
    return Curriculum(space, scorer=SequentialScorer(stages, **kw), recompute_every=1000, seed=0)


def test_sequential_advances_on_success_and_stays_on_the_last_stage():
    stages = (
        Stage((0, 1), StopCondition(min_episodes=5, success_rate=0.8, window=4)),
        Stage((2,), StopCondition(max_episodes=3)),
        Stage((3, 4, 5)),
    )
    cur = _seq_curriculum(stages)
    assert set(cur.sample(50).tolist()) <= {0, 1}
    for _ in range(5):
        cur.update(0, 0.0, success=False)
    assert cur.stats()["curriculum/stage"] == 0.0  # min_episodes met, success not
    for _ in range(6):
        cur.update(1, 1.0, success=True)
    assert cur.stats()["curriculum/stage"] == 1.0
    assert set(cur.sample(20).tolist()) == {2}
    cur.update(5, 1.0, success=True)  # not a task of this stage: not counted
    for _ in range(3):
        cur.update(2, 0.0, success=False)
    assert cur.stats()["curriculum/stage"] == 2.0
    for _ in range(50):
        cur.update(3, 1.0, success=True)
    assert set(cur.sample(100).tolist()) == {3, 4, 5}


def test_sequential_mean_return_and_cumulative():
    stages = (Stage((0,), StopCondition(mean_return=10.0, window=1)), Stage((1,)))
    cur = _seq_curriculum(stages, cumulative=True)
    cur.update(0, 9.0)
    assert cur.stats()["curriculum/stage"] == 0.0
    cur.update(0, 11.0)
    assert set(cur.sample(100).tolist()) == {0, 1}


def test_sequential_config_errors():
    with pytest.raises(ConfigError, match="stages"):
        SequentialScorer(())
    with pytest.raises(ConfigError, match=r"stages\[0\].until"):
        SequentialScorer((Stage((0,)), Stage((1,))))
    with pytest.raises(ConfigError, match="at least one criterion"):
        StopCondition()
    with pytest.raises(ConfigError, match="tasks"):
        Stage((1, 1))
    with pytest.raises(ConfigError, match=r"stages\[0\].tasks"):
        _seq_curriculum((Stage((0, 9)),))
    space = FixedTaskSpace([{"level": i} for i in range(6)])
    with pytest.raises(ConfigError, match="ReplacementPool"):
        Curriculum(space, scorer=SequentialScorer((Stage((0,)),)), pool=OpenEndedPool())
    with pytest.raises(ConfigError, match="ReplacementPool"):
        Curriculum(space, scorer=SequentialScorer((Stage((0,)),)), pool=ReplacementPool(capacity=3))
