"""``update_batch`` (vectorised for 8+ episodes) leaves the state that one-by-one updates leave."""

import math

import numpy as np
import pytest

import gymcurric.tasks.membership as membership_module
from gymcurric.errors import ConfigError, NonFiniteValueError
from gymcurric.tasks import (
    BoxTaskSpace,
    BucketedTaskSpace,
    Curriculum,
    DualPool,
    FixedTaskSpace,
    LearnabilityScorer,
    OpenEndedPool,
    SequentialScorer,
    SignalConfig,
    Span,
    Stage,
    StopCondition,
)
from gymcurric.tasks.signals import check_episode_arrays

_SPAN = {"a": [Span(0, 100)], "b": [Span(0.0, 1.0)]}

CONFIGS = {
    "fixed-lp": lambda: Curriculum(FixedTaskSpace([{"i": i} for i in range(12)]), seed=3),
    "long-cadence": lambda: Curriculum(  # vectorised under the default threshold too
        FixedTaskSpace([{"i": i} for i in range(200)]), seed=3, recompute_every=80
    ),
    "fixed-few": lambda: Curriculum(  # many episodes per slot in one batch
        FixedTaskSpace([{"i": i} for i in range(3)]), seed=3, recompute_every=5
    ),
    "learnability-return": lambda: Curriculum(
        FixedTaskSpace([{"i": i} for i in range(20)]),
        seed=3,
        scorer=LearnabilityScorer(),
        signal=SignalConfig(source="return"),
        recompute_every=7,
    ),
    "return-range": lambda: Curriculum(
        FixedTaskSpace([{"i": i} for i in range(20)]),
        seed=3,
        signal=SignalConfig(return_range=(-1.0, 2.0), baseline_episodes=0, alpha=0.3),
        recompute_every=6,
    ),
    "open-ended": lambda: Curriculum(  # evictions mid-batch make later ids stale
        BucketedTaskSpace(_SPAN, seed=1),
        seed=3,
        pool=OpenEndedPool(capacity=10, min_samples=2, evictions_per_recompute=3),
        recompute_every=4,
    ),
    "dual-pool": lambda: Curriculum(
        BucketedTaskSpace(_SPAN, seed=1),
        seed=3,
        pool=DualPool(explore_size=4, exploit_size=6, min_samples=3, window=10),
        recompute_every=5,
    ),
    "box-variants": lambda: Curriculum(
        BoxTaskSpace([0.0], [1.0], bins=4, seed=2), seed=3, recompute_every=6
    ),
    "sequential-hook": lambda: Curriculum(
        FixedTaskSpace([{"i": i} for i in range(6)]),
        seed=3,
        scorer=SequentialScorer(
            [
                Stage([0, 1, 2], until=StopCondition(min_episodes=15)),
                Stage([3, 4, 5]),
            ]
        ),
    ),
}


def _arrays_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    for key, arr in sa["arrays"].items():
        assert np.array_equal(arr, sb["arrays"][key], equal_nan=True), key
    assert a.stats() == b.stats()


@pytest.fixture(params=["every-batch-vectorised", "default-threshold"])
def vector_min(request, monkeypatch):
    if request.param == "every-batch-vectorised":
        monkeypatch.setattr(membership_module, "VECTOR_MIN", 1)
    return membership_module.VECTOR_MIN


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_update_batch_is_bit_identical_to_one_by_one_updates(name, seed, vector_min):
    one, many = CONFIGS[name](), CONFIGS[name]()
    rng = np.random.default_rng(seed)
    for _ in range(12):
        k = int(rng.integers(1, 300))
        ids = one.sample(k)
        assert np.array_equal(ids, many.sample(k))
        returns = rng.normal(size=k) * rng.choice([0.1, 1.0, 5.0])
        succ = [None if rng.random() < 0.3 else bool(rng.random() < 0.5) for _ in range(k)]
        if "return" in name:
            succ = [None] * k
        costs = np.where(rng.random(k) < 0.4, 0.0, rng.exponential(2.0, k))
        for i in range(k):
            one.update(int(ids[i]), float(returns[i]), succ[i], float(costs[i]))
        start = 0
        while start < k:  # random chunks: some one by one, some vectorised
            end = min(k, start + int(rng.integers(1, 150)))
            many.update_batch(ids[start:end], returns[start:end], succ[start:end], costs[start:end])
            start = end
        _arrays_equal(one, many)
    assert one.stats()["curriculum/updates"] > 0


def test_open_ended_batches_do_see_stale_ids(vector_min):
    """The property test above covers stale ids only if evictions happen mid-batch."""
    cur = CONFIGS["open-ended"]()
    for _ in range(10):
        ids = cur.sample(40)
        cur.update_batch(ids, np.zeros(40), np.arange(40) % 2 == 0)
    assert cur.stats()["curriculum/stale_updates"] > 0


def test_numpy_and_list_inputs_give_the_same_state():
    a, b = CONFIGS["fixed-lp"](), CONFIGS["fixed-lp"]()
    ids = a.sample(30)
    b.sample(30)
    r = np.linspace(-1, 1, 30)
    s = np.arange(30) % 3 == 0
    a.update_batch(ids, r, s, np.ones(30))
    b.update_batch(ids.tolist(), r.tolist(), s.tolist(), [1] * 30)
    _arrays_equal(a, b)


@pytest.mark.parametrize(
    "ids,returns,successes,costs,error,match",
    [
        ([0] * 9 + [1.5], [0.0] * 10, None, None, ConfigError, "task_id"),
        ([0] * 9 + [True], [0.0] * 10, None, None, ConfigError, "task_id"),
        ([0] * 9 + [12], [0.0] * 10, None, None, ConfigError, "task_id"),
        (np.array([0] * 9 + [-1]), np.zeros(10), None, None, ConfigError, "task_id"),
        ([0] * 10, [0.0] * 9 + [math.inf], None, None, NonFiniteValueError, "task_id=0"),
        ([0] * 10, [0.0] * 9 + [True], None, None, ConfigError, "return_"),
        ([0] * 10, np.zeros(10), [0.5] * 9 + [1.5], None, ConfigError, "0, 1"),
        ([0] * 10, np.zeros(10), [0.5] * 9 + [math.nan], None, NonFiniteValueError, "NaN"),
        ([0] * 10, np.zeros(10), None, [0.0] * 9 + [math.nan], NonFiniteValueError, "cost"),
        ([0] * 10, np.zeros(9), None, None, ConfigError, "differ in length"),
    ],
)
def test_a_bad_entry_anywhere_changes_nothing(ids, returns, successes, costs, error, match):
    cur = CONFIGS["fixed-lp"]()
    before = cur.state_dict()["arrays"]
    with pytest.raises(error, match=match):
        cur.update_batch(ids, returns, successes, costs)
    for key, arr in cur.state_dict()["arrays"].items():
        assert np.array_equal(arr, before[key]), key


def test_success_source_needs_every_success_and_changes_nothing():
    cur = Curriculum(
        FixedTaskSpace([{"i": i} for i in range(4)]), signal=SignalConfig(source="success")
    )
    before = cur.state_dict()["arrays"]
    with pytest.raises(ConfigError, match="entry 9 has none"):
        cur.update_batch([0] * 10, np.zeros(10), [True] * 9 + [None])
    with pytest.raises(ConfigError, match="needs success"):
        cur.update(0, 1.0)
    for key, arr in cur.state_dict()["arrays"].items():
        assert np.array_equal(arr, before[key]), key


def test_check_episode_arrays_fills_missing_values():
    ids, r, s, c = check_episode_arrays([1, 2], [1, 2.5], [None, True], None)
    assert ids == [1, 2]
    assert r.tolist() == [1.0, 2.5] and c.tolist() == [0.0, 0.0]
    assert math.isnan(s[0]) and s[1] == 1.0
    _, _, s, c = check_episode_arrays(
        np.arange(3), np.zeros(3), np.array([0.0, 0.5, 1.0]), [1, 2, 3]
    )
    assert s.tolist() == [0.0, 0.5, 1.0] and c.tolist() == [1.0, 2.0, 3.0]
