import copy
import json

import numpy as np
import pytest

from gymcurric.datapacks import (
    BalancedStrategy,
    DataPack,
    DatapackTable,
    FrontierPrioritizedStrategy,
    TagAwareStrategy,
    make_strategy,
)
from gymcurric.errors import ConfigError

from .packs import minimal, record


def _pack(pid, tier=1, **kw):
    return DataPack.from_dict(minimal(pid, tier, **kw))


def _tiers(counts, **kw):
    """A table with ``counts[t]`` packs of tier ``t``."""
    return DatapackTable(
        [_pack(f"t{t}-{i}", t, **kw) for t, c in enumerate(counts) for i in range(c)]
    )


def _tier_means(strategy, table, batch, reps, seed=0):
    rng = np.random.default_rng(seed)
    tot = np.zeros(3)
    for _ in range(reps):
        tot += np.bincount(table.tier[strategy.sample(table, batch, rng)], minlength=3)
    return tot / reps


SAFE = {"supervision_hints": {"safety_critical": True}}
FRAG = {"enrichment": {"fragility": "critical"}}
BOTH = {"supervision_hints": {"safety_critical": True}, "enrichment": {"fragility": "high"}}


def _tagged(n_safe=0, n_frag=0, n_both=0, n_base=0):
    packs = [_pack(f"s{i}", **SAFE) for i in range(n_safe)]
    packs += [_pack(f"f{i}", **FRAG) for i in range(n_frag)]
    packs += [_pack(f"b{i}", **BOTH) for i in range(n_both)]
    packs += [_pack(f"n{i}") for i in range(n_base)]
    return DatapackTable(packs)


def _count(table, rows, prefix):
    return sum(table.records[r].pack_id.startswith(prefix) for r in rows)


ALL = [
    BalancedStrategy(),
    BalancedStrategy(stratify_by=("task_type", "fragility"), use_trust_weighting=False),
    FrontierPrioritizedStrategy(),
    TagAwareStrategy(),
    TagAwareStrategy(allow_overlap=True, fallback_to_baseline=False),
]


# ---------------------------------------------------------------- determinism


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.name)
def test_same_seed_same_batches_other_seed_differs(strategy):
    packs = [DataPack.from_dict(record(f"r{i}", tier=i % 3)) for i in range(30)]
    packs += [_pack(f"m{i}", i % 3, trust_score=0.5, mpl_gain=i) for i in range(60)]
    table = DatapackTable(packs)

    def run(seed):
        rng = np.random.default_rng(seed)
        return [strategy.sample(table, 16, rng).tolist() for _ in range(5)]

    assert run(3) == run(3)
    assert run(3) != run(4)


# ---------------------------------------------------------------- balanced


def test_balanced_tier_ratios_in_expectation():
    table = _tiers([100, 100, 100])
    means = _tier_means(BalancedStrategy(), table, 7, 4000)
    assert np.allclose(means, [1.4, 3.5, 2.1], atol=0.05)
    means = _tier_means(BalancedStrategy(tier_ratios={0: 0.6, 2: 0.4}), table, 5, 2000)
    assert np.allclose(means, [3.0, 0.0, 2.0], atol=1e-12)


def test_balanced_trust_weighting_within_a_tier():
    table = DatapackTable([_pack("lo", 1, trust_score=0.2), _pack("hi", 1, trust_score=0.8)])
    rng = np.random.default_rng(1)
    for trust, expect in ((True, 0.2), (False, 0.5)):
        s = BalancedStrategy(tier_ratios={1: 1.0}, use_trust_weighting=trust)
        picks = np.array([s.sample(table, 1, rng)[0] for _ in range(6000)])
        assert abs(np.mean(picks == 0) - expect) < 0.02


def test_balanced_empty_tier_share_is_redistributed():
    means = _tier_means(BalancedStrategy(), _tiers([50, 50, 0]), 7, 3000)
    assert np.allclose(means, [7 * 0.2 / 0.7, 7 * 0.5 / 0.7, 0.0], atol=0.06)


def test_balanced_small_tier_is_used_up_then_shortfall_redistributed():
    table = _tiers([100, 100, 1])
    rng = np.random.default_rng(2)
    tot = np.zeros(3)
    for _ in range(2000):
        rows = BalancedStrategy().sample(table, 20, rng)
        assert len(set(rows.tolist())) == 20  # no repeats while the pool is large enough
        tot += np.bincount(table.tier[rows], minlength=3)
    # tier 2 wants 6 but holds 1; the 5 missing go to tiers 0 and 1 in ratio 0.2 : 0.5
    assert np.allclose(tot / 2000, [4 + 5 * 2 / 7, 10 + 5 * 5 / 7, 1.0], atol=0.06)


def test_pool_smaller_than_batch_repeats_instead_of_failing():
    table = _tiers([1, 1, 1])
    rows = BalancedStrategy().sample(table, 10, np.random.default_rng(0))
    assert rows.shape == (10,) and set(rows.tolist()) == {0, 1, 2}


def test_balanced_stratify_by_splits_a_tier_equally_over_values():
    packs = [_pack(f"a{i}", 1) for i in range(90)]
    packs += [_pack(f"b{i}", 1, task_type="push") for i in range(10)]
    table = DatapackTable(packs)
    s = BalancedStrategy(tier_ratios={1: 1.0}, stratify_by=("task_type",))
    rng = np.random.default_rng(0)
    pushes = [_count(table, s.sample(table, 8, rng), "b") for _ in range(200)]
    assert set(pushes) == {4}
    plain = BalancedStrategy(tier_ratios={1: 1.0})
    assert np.mean([_count(table, plain.sample(table, 8, rng), "b") for _ in range(500)]) < 1.2


def test_zero_weights_exclude_rows_and_all_zero_raises():
    table = _tiers([10, 10, 10])
    w = np.ones(30)
    w[10:20] = 0.0
    rng = np.random.default_rng(0)
    for s in ALL:
        rows = np.concatenate([s.sample(table, 9, rng, weights=w) for _ in range(50)])
        assert not np.any((rows >= 10) & (rows < 20)), s.name
    with pytest.raises(ConfigError, match="no eligible datapack"):
        BalancedStrategy().sample(table, 4, rng, weights=np.zeros(30))
    with pytest.raises(ConfigError, match="'weights'"):
        BalancedStrategy().sample(table, 4, rng, weights=np.ones(3))
    with pytest.raises(ConfigError, match="'batch_size'"):
        BalancedStrategy().sample(table, 0, rng)


@pytest.mark.parametrize("seed", range(40))
def test_random_tables_never_crash_and_fill_the_batch(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    flags = [{}, SAFE, FRAG, BOTH, {"enrichment": {"interventions": 1}}]
    packs = [
        _pack(f"p{i}", int(rng.integers(0, 3)), **flags[int(rng.integers(0, 5))]) for i in range(n)
    ]
    table = DatapackTable(packs)
    w = rng.random(n) * (rng.random(n) < 0.7)
    if not w.any():
        w[0] = 1.0
    batch = int(rng.integers(1, 40))
    for s in ALL:
        rows = s.sample(table, batch, rng, weights=w)
        assert rows.shape == (batch,) and np.all(w[rows] > 0), s.name
        if batch <= np.count_nonzero(w) and s.name == "balanced":
            assert len(set(rows.tolist())) == batch


# ---------------------------------------------------------------- frontier


def test_urgency_formula_on_hand_computed_examples():
    packs = [
        _pack("a", 2, enrichment={"novelty": 0.5}, mpl_gain=5.0),  # 1.0*(0.5+0.15+0.1)
        _pack("b", 1, enrichment={"novelty": 1.0}, mpl_gain=20.0, **SAFE),  # 0.6*1.0*1.5
        _pack("c", 2, enrichment={"novelty": 1.0}, mpl_gain=10.0, **SAFE),  # 1.5 -> clipped
        _pack("d", 0),  # 0.3*0.5
        _pack("e", 1, mpl_gain=-10.0),  # 0.6*(0.5-0.2)
    ]
    table = DatapackTable(packs)
    u = FrontierPrioritizedStrategy().urgency(table)
    assert np.allclose(u, [0.75, 0.9, 1.0, 0.15, 0.18])
    custom = FrontierPrioritizedStrategy(
        tier_weights={0: 1.0, 1: 0.5, 2: 0.5}, safety_boost_factor=1.0
    )
    assert np.allclose(custom.urgency(table), [0.375, 0.5, 0.5, 0.5, 0.15])


def test_frontier_urgent_share_and_weights():
    urgent = [_pack(f"u{i}", 2, enrichment={"novelty": 1.0}) for i in range(10)]  # 0.8
    rest = [_pack(f"r{i}", 0, sampling_weight=1.0 + (i == 0) * 9) for i in range(90)]
    table = DatapackTable(urgent + rest)
    s = FrontierPrioritizedStrategy()
    rng = np.random.default_rng(0)
    assert {_count(table, s.sample(table, 10, rng), "u") for _ in range(100)} == {8}
    assert (
        abs(np.mean([_count(table, s.sample(table, 7, rng), "u") for _ in range(3000)]) - 5.6)
        < 0.05
    )
    # the rest by sampling weight: r0 has weight 10 of 99 in total
    s0 = FrontierPrioritizedStrategy(urgent_ratio=0.0)
    hits = np.mean([s0.sample(table, 1, rng)[0] == 10 for _ in range(4000)])
    assert abs(hits - 10 / 99) < 0.02
    # urgent ones by urgency: 0.75 vs 1.0
    two = DatapackTable([urgent[0], _pack("top", 2, enrichment={"novelty": 1.0}, **SAFE)])
    s1 = FrontierPrioritizedStrategy(urgent_ratio=1.0, urgency_threshold=0.75)
    hits = np.mean([s1.sample(two, 1, rng)[0] == 1 for _ in range(4000)])
    assert abs(hits - 1.0 / 1.8) < 0.025


def test_frontier_without_urgent_packs_uses_the_rest():
    table = _tiers([20, 0, 0])
    rows = FrontierPrioritizedStrategy().sample(table, 10, np.random.default_rng(0))
    assert rows.shape == (10,) and len(set(rows.tolist())) == 10


# ---------------------------------------------------------------- tag-aware


def test_tag_quotas_honoured_exactly_when_integral():
    table = _tagged(n_safe=30, n_frag=30, n_base=30)
    s = TagAwareStrategy(
        tag_quotas={"safety_critical": 0.5, "fragile_objects": 0.25, "baseline": 0.25}
    )
    rng = np.random.default_rng(0)
    for _ in range(50):
        rows = s.sample(table, 20, rng)
        assert [_count(table, rows, p) for p in "sfn"] == [10, 5, 5]


def test_tag_overlap():
    table = _tagged(n_frag=10, n_both=10)
    q = {"safety_critical": 0.5, "fragile_objects": 0.5}
    rng = np.random.default_rng(0)
    s = TagAwareStrategy(tag_quotas=q, allow_overlap=False, fallback_to_baseline=False)
    for _ in range(20):  # packs with both tags count only for safety_critical, listed first
        rows = s.sample(table, 10, rng)
        assert _count(table, rows, "f") == 5 and _count(table, rows, "b") == 5
    s = TagAwareStrategy(tag_quotas=q, allow_overlap=True, fallback_to_baseline=False)
    mean_f = np.mean([_count(table, s.sample(table, 10, rng), "f") for _ in range(2000)])
    assert abs(mean_f - 2.5) < 0.1  # fragile quota drawn from all 20 fragile packs


def test_empty_family_falls_back_to_baseline_or_redistributes():
    table = _tagged(n_frag=30, n_base=30)
    q = {"safety_critical": 0.5, "fragile_objects": 0.5}
    rng = np.random.default_rng(0)
    rows = TagAwareStrategy(tag_quotas=q).sample(table, 10, rng)
    assert _count(table, rows, "n") == 5 and _count(table, rows, "f") == 5
    rows = TagAwareStrategy(tag_quotas=q, fallback_to_baseline=False).sample(table, 10, rng)
    assert _count(table, rows, "f") == 10


def test_small_family_uses_all_then_falls_back():
    table = _tagged(n_safe=2, n_frag=30, n_base=30)
    q = {"safety_critical": 0.5, "fragile_objects": 0.5}
    rows = TagAwareStrategy(tag_quotas=q).sample(table, 10, np.random.default_rng(0))
    assert [_count(table, rows, p) for p in "sfn"] == [2, 5, 3]


# ---------------------------------------------------------------- config and immutability


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("balanced", {"tier_ratios": {0: 0.5, 1: 0.6}}, "must sum to 1"),
        ("balanced", {"tier_ratios": {3: 1.0}}, "tier_ratios\\[3\\]"),
        ("balanced", {"tier_ratios": {0: -0.5, 1: 1.5}}, ">= 0"),
        ("balanced", {"stratify_by": ["colour"]}, "'stratify_by'"),
        ("balanced", {"colour": 1}, "unknown parameter of balanced"),
        ("frontier_prioritized", {"urgent_ratio": 1.2}, "'urgent_ratio': 1.2"),
        ("frontier_prioritized", {"urgency_threshold": -1}, "'urgency_threshold'"),
        ("frontier_prioritized", {"safety_boost_factor": "x"}, "'safety_boost_factor'"),
        ("tag_aware", {"tag_quotas": {"shiny": 1.0}}, "shiny"),
        ("tag_aware", {"tag_quotas": {"baseline": 0.5}}, "must sum to 1"),
        ("random", {}, "'strategy': 'random'"),
        # a quoted "false" is a string, and truthy: it would have turned the switch on
        ("balanced", {"use_trust_weighting": "false"}, "'use_trust_weighting': 'false'"),
        ("balanced", {"shuffle": 1}, "'shuffle': 1 \\(expected true or false"),
        ("frontier_prioritized", {"shuffle": None}, "'shuffle': None"),
        ("tag_aware", {"allow_overlap": "no"}, "'allow_overlap': 'no'"),
        ("tag_aware", {"fallback_to_baseline": 0}, "'fallback_to_baseline': 0"),
        ("balanced", [("shuffle", True)], "'strategy_params'.*expected a mapping"),
    ],
)
def test_bad_config_is_a_clear_error(name, params, match):
    with pytest.raises(ConfigError, match=match) as info:
        make_strategy(name, params, source="cfg.yaml")
    assert str(info.value).startswith("cfg.yaml: ")


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.name)
def test_json_round_trip(strategy):
    d = json.loads(json.dumps(strategy.to_dict()))
    assert make_strategy(d["strategy"], d) == strategy


def test_sampling_never_mutates_datapacks_or_table():
    packs = [DataPack.from_dict(record(f"r{i}", tier=i % 3, colour=[i])) for i in range(20)]
    packs += [_pack(f"m{i}", i % 3) for i in range(20)]
    before = copy.deepcopy([p.to_dict() for p in packs])
    table = DatapackTable(packs)
    arrays = {k: v.copy() for k, v in vars(table).items() if isinstance(v, np.ndarray)}
    w = np.linspace(0.0, 2.0, 40)
    w_before = w.copy()
    rng = np.random.default_rng(0)
    for s in ALL:
        for _ in range(20):
            s.sample(table, 25, rng, weights=w)
        FrontierPrioritizedStrategy().urgency(table)
    assert [p.to_dict() for p in table.records] == before
    assert all(a is b for a, b in zip(table.records, packs, strict=True))
    for k, v in arrays.items():
        assert np.array_equal(getattr(table, k), v), k
    assert np.array_equal(w, w_before)


@pytest.mark.parametrize("n_light", [19, 3])  # 20 rows: draw-and-dedupe path; 4 rows: keys
def test_weighted_without_replacement_inclusion_probability(n_light):
    table = _tiers([0, n_light + 1, 0])
    w = np.ones(n_light + 1)
    w[0] = 10.0
    total = w.sum()
    # P(heavy row among 2 successive weighted draws without replacement)
    expect = 10 / total + n_light * (1 / total) * (10 / (total - 1))
    s = BalancedStrategy(tier_ratios={1: 1.0}, use_trust_weighting=False)
    rng = np.random.default_rng(0)
    hits = [0 in s.sample(table, 2, rng, weights=w) for _ in range(6000)]
    assert abs(np.mean(hits) - expect) < 0.02


def test_extremely_skewed_weights_still_give_distinct_rows():
    table = _tiers([0, 40, 0])
    w = np.ones(40)
    w[7] = 1e12  # draw-and-dedupe would almost only see row 7: the exponential keys take over
    s = BalancedStrategy(tier_ratios={1: 1.0}, use_trust_weighting=False)
    rows = s.sample(table, 5, np.random.default_rng(0), weights=w)
    assert len(set(rows.tolist())) == 5 and 7 in rows


@pytest.mark.parametrize("name", ["balanced", "frontier_prioritized", "tag_aware"])
def test_cached_strata_give_the_same_batches_and_follow_new_weights(name):
    packs = [DataPack.from_dict(record(f"c{i}", tier=i % 3)) for i in range(60)]
    packs += [_pack(f"b{i}", i % 3) for i in range(60)]
    table = DatapackTable(packs)
    w = np.linspace(0.5, 2.0, len(table))
    frozen = w.copy()
    frozen.setflags(write=False)
    fresh, cached = make_strategy(name), make_strategy(name)
    r1, r2 = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(5):  # writeable weights are never cached; read-only ones are
        np.testing.assert_array_equal(
            fresh.sample(table, 12, r1, w.copy()), cached.sample(table, 12, r2, frozen)
        )
    assert "_cache" in cached.__dict__ and "_cache" not in fresh.__dict__
    # new (read-only) weights replace the cached strata
    no_tier0 = np.where(table.tier == 0, 0.0, 1.0)
    no_tier0.setflags(write=False)
    rows = cached.sample(table, 30, r2, no_tier0)
    assert not (table.tier[rows] == 0).any()
    # weights changed in place between calls are seen (writeable: not cached)
    mutable = np.ones(len(table))
    cached.sample(table, 5, r2, mutable)
    mutable[table.tier != 2] = 0.0
    assert (table.tier[cached.sample(table, 20, r2, mutable)] == 2).all()
    # the cache is not part of the configuration: not compared, copied or pickled
    assert cached == make_strategy(name)
    import pickle

    assert "_cache" not in pickle.loads(pickle.dumps(cached)).__dict__
    assert "_cache" not in copy.deepcopy(cached).__dict__
