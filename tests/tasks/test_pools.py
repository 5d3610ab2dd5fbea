from dataclasses import dataclass, field

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.tasks import (
    BucketedTaskSpace,
    Curriculum,
    DualPool,
    FixedTaskSpace,
    LearningProgressScorer,
    OpenEndedPool,
    ReplacementPool,
    SignalConfig,
    Span,
    UniformScorer,
    gini,
)
from gymcurric.tasks.state import EXPLOIT, EXPLORE

from .learners import PracticeLearner, coin, run


def _fixed(n):
    return FixedTaskSpace([{"i": i} for i in range(n)])


def _open(seed=0):
    return BucketedTaskSpace({"kind": [0, 1, 2], "c": [Span(5.0, 40.0)]}, seed=seed)


# ---------------------------------------------------------------- sampling


def test_sampling_follows_the_cached_distribution_with_replacement():
    cur = Curriculum(_fixed(5), seed=0)
    st = cur.state
    p = np.array([0.5, 0.25, 0.125, 0.125, 0.0])
    st.prob[:] = p
    np.cumsum(p, out=st.cdf_a)  # inject a distribution directly into the state arrays
    st.scalars[7], st.counters[18] = 1.0, 3  # TOTAL_A, LAST_A
    ids = cur.sample(40_000)
    assert ids.dtype == np.int64 and ids.shape == (40_000,)
    freq = np.bincount(ids, minlength=5) / ids.size
    assert np.allclose(freq, p, atol=0.01)
    singles = [int(cur.sample()[0]) for _ in range(4000)]
    assert 4 not in singles
    assert np.allclose(np.bincount(singles, minlength=5) / 4000, p, atol=0.03)


def test_sample_bad_k():
    cur = Curriculum(_fixed(3))
    for k in (0, -1, 1.5):
        with pytest.raises(ConfigError, match="'k'"):
            cur.sample(k)


@pytest.mark.parametrize(
    "space,pool,match",
    [
        (_open(), ReplacementPool(), "needs a pool capacity"),
        (_fixed(3), ReplacementPool(capacity=4), "exceeds the 3 tasks"),
        (_fixed(10), DualPool(explore_size=5, exploit_size=6), "exceeds the 10 tasks"),
        (_open(), OpenEndedPool(), "needs a pool capacity"),
    ],
)
def test_capacity_errors(space, pool, match):
    with pytest.raises(ConfigError, match=match):
        Curriculum(space, pool=pool)


@pytest.mark.parametrize(
    "make,key",
    [
        (lambda: DualPool(explore_size=0), "explore_size"),
        (lambda: DualPool(rho_min=0.6, rho_max=0.5), "rho_max"),
        (lambda: DualPool(rho_init=0.99), "rho_init"),
        (lambda: DualPool(promotion_quantile=1.0), "promotion_quantile"),
        (lambda: OpenEndedPool(evict_quantile=-0.1), "evict_quantile"),
        (lambda: ReplacementPool(capacity=0), "capacity"),
    ],
)
def test_pool_config_errors_name_the_field(make, key):
    with pytest.raises(ConfigError) as exc:
        make()
    assert exc.value.key == key


# ---------------------------------------------------------------- open-ended pool


def test_open_ended_pool_evicts_low_progress_tasks_and_refills():
    space = _open(seed=1)
    kinds = {}

    def kind(tid):
        return kinds.setdefault(tid, space.task(tid)["kind"])

    learner = PracticeLearner({}, seed=2, centre=(15.0, 60.0), linear=True)
    learner.kind = kind  # type: ignore[method-assign]
    scorer = LearningProgressScorer.v1()  # the pool's mechanics, as designed with 0.1's LP
    cur = Curriculum(
        space,
        pool=OpenEndedPool(capacity=30),
        scorer=scorer,
        signal=SignalConfig(alpha=0.1),
        recompute_every=16,
        seed=0,
    )
    live = set(cur.state.task_id.tolist())
    first, premature, evicted = set(live), 0, 0
    for ep in range(5000):
        run(cur, learner, 1, start=ep)
        now = set(cur.state.task_id.tolist())
        for t in live - now:  # evicted since the last episode
            evicted += 1
            premature += kind(t) == 0 and learner.practice[t] < learner.centre[t]
        live = now
    s = cur.stats()
    assert s["curriculum/evictions"] == evicted > 30
    assert s["curriculum/num_tasks"] == 30 and len(live) == 30 and not live <= first
    # evicted: impossible, trivial or already mastered tasks, hardly ever one still improving
    assert premature / evicted < 0.15
    assert sum(kind(t) == 0 for t in live) / 30 > 0.45  # a third of generated tasks learnable


def test_open_ended_pool_never_evicts_before_min_samples():
    cur = Curriculum(
        _open(),
        pool=OpenEndedPool(capacity=20, min_samples=10**6),
        scorer=UniformScorer(),
        recompute_every=1,
        seed=0,
    )
    run(cur, coin(0), 500)
    assert cur.stats()["curriculum/evictions"] == 0


# ---------------------------------------------------------------- dual pool


def _dual(space, scorer=None, **kw):
    pool = DualPool(**{"explore_size": 20, "exploit_size": 40, "window": 100, **kw})
    # the pool's mechanics, as designed with gymcurric 0.1's LP (the defaults' effect on the
    # dual pool is measured in benchmarks/curriculum_simulated.py)
    scorer = scorer or LearningProgressScorer.v1()
    return Curriculum(space, pool=pool, scorer=scorer, signal=SignalConfig(alpha=0.1), seed=0)


@dataclass(frozen=True)
class NoiseScorer(UniformScorer):
    """Fresh i.i.d. random values at every recompute: scores that carry no signal at all."""

    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def raw(self, st, active, signal):
        return self.rng.random(st.capacity) * active


@pytest.mark.parametrize(
    "scorer",
    [
        LearningProgressScorer.v1(),
        LearningProgressScorer.v1(baseline=False),
        UniformScorer(),
        NoiseScorer(),
    ],
    ids=["lp", "lp-no-baseline", "uniform", "noise"],
)
@pytest.mark.parametrize("space", [_open(), _fixed(100)], ids=["open", "fixed"])
def test_dual_pool_does_not_saturate_without_signal(scorer, space):
    cur = _dual(space, scorer)
    rhos = []
    for chunk in range(10):
        run(cur, coin(1), 1500, start=chunk * 1500)
        rhos.append(cur.stats()["curriculum/rho"])
    st = cur.stats()
    assert st["curriculum/phase"] == 1.0  # left bootstrap
    assert st["curriculum/exploit_size"] == 40 and st["curriculum/explore_size"] == 20
    assert st["curriculum/promotion_attempts"] > 100
    tail = rhos[3:]
    assert min(tail) > 0.15 and max(tail) < 0.85, rhos  # neither bound (0.05 / 0.95) pinned
    assert 0.15 < st["curriculum/promotion_rate"] < 0.85


def test_beating_the_weakest_saturates_on_noise_which_the_default_quantile_avoids():
    # The failure mode the default promotion_quantile guards against (see DualPool).
    cur = _dual(_open(), NoiseScorer(), promotion_quantile=0.0)
    run(cur, coin(1), 6000)
    assert cur.stats()["curriculum/rho"] > 0.9


def test_dual_pool_exploit_ends_up_holding_the_learnable_subset():
    space = _open(seed=3)
    kinds = {}

    def kind(tid):
        return kinds.setdefault(tid, space.task(tid)["kind"])

    learner = PracticeLearner({}, seed=4, width=5.0, centre=(5.0, 40.0))
    learner.kind = kind  # type: ignore[method-assign]
    cur = _dual(space, explore_size=20, exploit_size=30)
    run(cur, learner, 1000)
    assert cur.stats()["curriculum/rho"] != 0.5  # rho moved from rho_init
    run(cur, learner, 7000, start=1000)
    st = cur.state
    exploit = st.task_id[st.pool == EXPLOIT].tolist()
    assert len(exploit) == 30
    frac = sum(kind(t) == 0 for t in exploit) / len(exploit)
    assert frac > 0.8  # a third of generated tasks are learnable


def test_dual_pool_bootstrap_samples_explore_only_and_fills_exploit():
    cur = _dual(_fixed(100), explore_size=10, exploit_size=5, min_samples=3)
    st = cur.state
    assert cur.stats()["curriculum/phase"] == 0.0
    assert np.count_nonzero(st.pool == EXPLORE) == 10 and np.count_nonzero(st.pool == EXPLOIT) == 0
    explore_ids = set(st.task_id[st.pool == EXPLORE].tolist())
    assert set(cur.sample(200).tolist()) <= explore_ids
    run(cur, coin(0), 400)
    s = cur.stats()
    assert s["curriculum/phase"] == 1.0 and s["curriculum/bootstrap_promotions"] == 5
    assert s["curriculum/explore_size"] == 10 and s["curriculum/exploit_size"] == 5


def test_dual_pool_diagnostics():
    cur = _dual(_fixed(100))
    run(cur, coin(0), 3000)
    s = cur.stats()
    for key in (
        "rho",
        "promotion_rate",
        "phase",
        "explore_size",
        "exploit_size",
        "explore_mean_lp",
        "exploit_mean_lp",
        "gini_occupancy",
        "gini_raw_lp",
        "gini_probs",
        "selectivity_loss",
        "explore_ratio",
        "entropy",
    ):
        assert f"curriculum/{key}" in s
    assert s["curriculum/selectivity_loss"] == pytest.approx(
        s["curriculum/gini_raw_lp"] - s["curriculum/gini_probs"]
    )
    assert 0.05 <= s["curriculum/rho"] <= 0.95
    _, probs = cur.probabilities()
    assert probs.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------- gini


def test_gini_known_values():
    assert gini(np.ones(10)) == 0.0
    assert gini(np.array([0.0, 0.0, 0.0, 1.0])) == pytest.approx(0.75)
    assert gini(np.zeros(5)) == 0.0 and gini(np.array([])) == 0.0
    x = np.random.default_rng(0).random(50)
    # mean-absolute-difference definition
    ref = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())
    assert gini(x) == pytest.approx(ref)


@pytest.mark.parametrize("backend", ["local", "shared"])
def test_dual_pool_draws_from_exploit_when_explore_has_nothing_left(backend):
    """12 tasks, explore 4 / exploit 8: after 4 mark_invalid every live task is in exploit."""
    from gymcurric.tasks import Curriculum, DualPool, FixedTaskSpace

    space = FixedTaskSpace([{"x": i} for i in range(12)])
    rng = np.random.default_rng(0)
    with Curriculum(
        space, pool=DualPool(explore_size=4, exploit_size=8), seed=0, backend=backend
    ) as cur:
        invalid = set()
        for episode in range(4000):
            tid, _ = cur.sample_task()
            assert tid not in invalid
            cur.update(tid, float(rng.random()), bool(rng.random() < 0.5))
            if episode % 500 == 499 and len(invalid) < 4:
                cur.mark_invalid(tid, "refused")
                invalid.add(tid)
        stats = cur.stats()
        assert stats["curriculum/explore_size"] == 0 and stats["curriculum/explore_ratio"] == 0
        keys, probs = cur.probabilities()
        assert abs(float(np.sum(probs)) - 1.0) < 1e-9 and not set(keys.tolist()) & invalid
