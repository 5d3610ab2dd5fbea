import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety.risk_targets import PendingCostToGo, cost_to_go_targets


def brute_force(costs, term, trunc, gamma, horizon, valid=None, truncation="complete"):
    """Row by row, forward: the definition, no recursion."""
    n_steps, n_envs = costs.shape
    valid = np.ones_like(term) if valid is None else valid
    targets = np.zeros_like(costs)
    ready = np.zeros(costs.shape, bool)
    pending = np.zeros(costs.shape, bool)
    for e in range(n_envs):
        for t in range(n_steps):
            total, k, ended, cut_by_trunc = 0.0, 0, False, False
            while k < horizon and t + k < n_steps:
                total += gamma**k * costs[t + k, e]
                done_here = term[t + k, e] or trunc[t + k, e]
                k += 1
                if done_here:
                    ended = True
                    cut_by_trunc = bool(trunc[t + k - 1, e] and not term[t + k - 1, e])
                    break
            targets[t, e] = total
            decided = ended or k == horizon
            pending[t, e] = not decided
            dropped = truncation == "drop" and ended and cut_by_trunc and k < horizon
            ready[t, e] = decided and valid[t, e] and not dropped
    return targets, ready, pending


def random_block(rng, n_steps, n_envs, p_term=0.08, p_trunc=0.05):
    costs = rng.exponential(1.0, (n_steps, n_envs)) * (rng.random((n_steps, n_envs)) < 0.5)
    term = rng.random((n_steps, n_envs)) < p_term
    trunc = rng.random((n_steps, n_envs)) < p_trunc
    return costs, term, trunc


@pytest.mark.parametrize("horizon", [1, 2, 5, 17, 200])
@pytest.mark.parametrize("gamma", [0.0, 0.9, 1.0])
@pytest.mark.parametrize("truncation", ["complete", "drop"])
@pytest.mark.parametrize("n_envs", [1, 4])  # one env runs a scalar loop, several a numpy one
def test_matches_brute_force(horizon, gamma, truncation, n_envs):
    rng = np.random.default_rng(horizon * 7 + int(gamma * 10))
    costs, term, trunc = random_block(rng, 60, n_envs)
    valid = rng.random(costs.shape) > 0.1
    out = cost_to_go_targets(
        costs, term, trunc, gamma=gamma, horizon=horizon, valid=valid, truncation=truncation
    )
    ref_t, ref_r, ref_p = brute_force(costs, term, trunc, gamma, horizon, valid, truncation)
    np.testing.assert_allclose(out.targets, ref_t, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(out.ready, ref_r)
    np.testing.assert_array_equal(out.pending, ref_p)


def test_pending_rows_form_a_suffix_per_env():
    rng = np.random.default_rng(3)
    costs, term, trunc = random_block(rng, 50, 6, p_term=0.02, p_trunc=0.02)
    pending = cost_to_go_targets(costs, term, trunc, gamma=0.99, horizon=10).pending
    for e in range(6):
        col = pending[:, e]
        if col.any():
            assert col[col.argmax() :].all()


def test_one_d_and_hand_example():
    # H = 3, gamma = 0.5, episode ends by truncation at t=2, then a terminal at t=4
    costs = [1.0, 2.0, 4.0, 8.0, 16.0, 1.0]
    term = [False, False, False, False, True, False]
    trunc = [False, False, True, False, False, False]
    out = cost_to_go_targets(costs, term, trunc, gamma=0.5, horizon=3)
    assert out.targets.tolist() == [1 + 1 + 1, 2 + 2, 4, 8 + 8, 16, 1]
    assert out.ready.tolist() == [True] * 5 + [False]
    assert out.pending.tolist() == [False] * 5 + [True]
    dropped = cost_to_go_targets(costs, term, trunc, gamma=0.5, horizon=3, truncation="drop")
    # t=0 saw exactly H=3 steps up to the truncation: complete; t=1, t=2 were cut short
    assert dropped.ready.tolist() == [True, False, False, True, True, False]


def test_long_horizon_is_numerically_stable():
    rng = np.random.default_rng(0)
    costs = rng.exponential(100.0, (5000, 2))
    out = cost_to_go_targets(costs, np.zeros_like(costs, bool), None, gamma=0.999, horizon=50)
    ref = sum(0.999**k * costs[k : 4951 + k] for k in range(50))
    np.testing.assert_allclose(out.targets[:4951], ref, rtol=1e-9)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gamma": 1.5, "horizon": 3},
        {"gamma": 0.9, "horizon": 0},
        {"gamma": 0.9, "horizon": 2.5},
        {"gamma": 0.9, "horizon": 3, "truncation": "bootstrap"},
    ],
)
def test_invalid_parameters_name_the_parameter(kwargs):
    with pytest.raises(ConfigError) as err:
        cost_to_go_targets([1.0], [False], **kwargs)
    assert err.value.key in kwargs


def test_non_finite_costs_and_bad_shapes_raise():
    with pytest.raises(ConfigError, match="finite"):
        cost_to_go_targets([1.0, np.nan], [False, False], gamma=0.9, horizon=2)
    with pytest.raises(ConfigError, match="terminated"):
        cost_to_go_targets([1.0, 2.0], [False], gamma=0.9, horizon=2)


@pytest.mark.parametrize("horizon", [1, 4, 30])
@pytest.mark.parametrize("truncation", ["complete", "drop"])
def test_pending_buffer_yields_every_ready_row_once(horizon, truncation):
    """Feeding steps one at a time with irregular pops gives the batch answer."""
    rng = np.random.default_rng(horizon)
    costs, term, trunc = random_block(rng, 120, 3)
    valid = rng.random(costs.shape) > 0.1
    n_steps, n_envs = costs.shape
    ids = np.arange(n_steps * n_envs, dtype=np.float32).reshape(n_steps, n_envs, 1)
    buf = PendingCostToGo(n_envs, gamma=0.95, horizon=horizon, truncation=truncation)
    got = {}
    for t in range(n_steps):
        buf.add(ids[t], costs[t], term[t], trunc[t], valid[t])
        if rng.random() < 0.3:
            feats, targets = buf.pop_ready()
            for f, y in zip(feats[:, 0], targets, strict=True):
                assert int(f) not in got
                got[int(f)] = y
        assert len(buf) <= horizon + n_steps  # trimmed as it goes
    feats, targets = buf.pop_ready()
    got.update({int(f): y for f, y in zip(feats[:, 0], targets, strict=True)})
    ref = cost_to_go_targets(
        costs, term, trunc, gamma=0.95, horizon=horizon, valid=valid, truncation=truncation
    )
    rows, envs = np.nonzero(ref.ready)
    expected = {int(ids[t, e, 0]): ref.targets[t, e] for t, e in zip(rows, envs, strict=True)}
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-12)
    assert len(buf) <= horizon


def test_pending_buffer_end_all_closes_open_episodes():
    buf = PendingCostToGo(1, gamma=1.0, horizon=10)
    for c in (1.0, 2.0):
        buf.add([[c]], [c], [False], [False])
    assert buf.pop_ready()[1].size == 0
    buf.end_all()
    assert buf.pop_ready()[1].tolist() == [3.0, 2.0]
    assert len(buf) == 0


def test_pending_buffer_skips_invalid_rows_of_another_feature_size():
    buf = PendingCostToGo(1, gamma=1.0, horizon=1)
    buf.add([[0.0]], [9.0], [False], [False], valid=[False])  # e.g. a failed embedding
    buf.add([[1.0, 1.0]], [1.0], [False], [False])
    feats, targets = buf.pop_ready()
    assert feats.tolist() == [[1.0, 1.0]] and targets.tolist() == [1.0]


@pytest.mark.parametrize("horizon", [2**40 - 1, 2**40, 2**40 + 5, 10**15, 2**62])
@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("truncation", ["complete", "drop"])
def test_a_horizon_longer_than_any_episode_leaves_open_episodes_pending(
    horizon, n_envs, truncation
):
    # the rows of an episode still open at the end of the block wait for it to end, however
    # long the horizon (10**15: "to the episode's end"); a horizon past the open-episode
    # marker (2**40) used to make them ready with the costs seen so far
    rng = np.random.default_rng(3)
    costs, term, trunc = random_block(rng, 30, n_envs)
    term[-1] = trunc[-1] = False  # every env's last episode is still open
    out = cost_to_go_targets(costs, term, trunc, gamma=0.9, horizon=horizon, truncation=truncation)
    ref_t, ref_r, ref_p = brute_force(costs, term, trunc, 0.9, horizon, truncation=truncation)
    np.testing.assert_allclose(out.targets, ref_t, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out.ready, ref_r)
    np.testing.assert_array_equal(out.pending, ref_p)
    assert out.pending[-1].all() and not out.ready[-1].any()
    pending = PendingCostToGo(n_envs, gamma=0.9, horizon=horizon)
    pending.add(np.zeros((n_envs, 1)), np.ones(n_envs), np.zeros(n_envs), np.zeros(n_envs))
    assert len(pending.pop_ready()[1]) == 0  # the episode has not ended
