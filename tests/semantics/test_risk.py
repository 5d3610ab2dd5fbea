import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gymcurric.errors import ConfigError  # noqa: E402
from gymcurric.safety.risk_targets import cost_to_go_targets  # noqa: E402
from gymcurric.semantics.risk import RiskAnnotator, RiskHead  # noqa: E402

torch.set_num_threads(1)


def random_walk_block(rng, n_steps=400, n_envs=8, horizon=10, gamma=0.9):
    """A 1-D random walk on [0, 1] with cost p**2: the cost-to-go is monotone in p."""
    p = np.empty((n_steps, n_envs))
    p[0] = rng.random(n_envs)
    for t in range(1, n_steps):
        p[t] = np.clip(p[t - 1] + rng.normal(0, 0.05, n_envs), 0.0, 1.0)
    costs = p**2
    term = np.zeros_like(costs, bool)
    res = cost_to_go_targets(costs, term, None, gamma=gamma, horizon=horizon)
    feats = np.stack([p, rng.normal(size=p.shape)], axis=-1).astype(np.float32)  # + a noise dim
    return feats[res.ready], res.targets[res.ready]


def test_correlation_on_monotone_costs():
    rng = np.random.default_rng(0)
    head = RiskHead(2, risk_min_samples=256, risk_batch_size=64, risk_update_iters=8, seed=0)
    for _ in range(6):
        x, y = random_walk_block(rng)
        for chunk in range(0, len(y), 256):
            head.add_samples(x[chunk : chunk + 256], y[chunk : chunk + 256])
            head.train()
    x, y = random_walk_block(rng)  # fresh data, never trained on
    head.add_samples(x, y)
    stats = head.train()
    assert stats is not None
    assert stats["risk/corr"] > 0.8
    assert np.corrcoef(head.predict(x), y)[0, 1] > 0.8
    assert stats["risk/pred_mean"] == pytest.approx(stats["risk/target_mean"], abs=0.5)
    assert stats["risk/train_samples"] == head.train_samples > 0
    assert np.isfinite(stats["risk/loss"])


def test_waits_for_min_samples_and_buffer_is_bounded():
    head = RiskHead(3, risk_min_samples=50, risk_batch_size=16, buffer_size=64, seed=1)
    x = np.ones((40, 3), np.float32)
    head.add_samples(x, np.zeros(40))
    before = [p.clone() for p in head.model.parameters()]
    assert head.train() is None
    assert all(torch.equal(a, b) for a, b in zip(before, head.model.parameters(), strict=True))
    head.add_samples(np.zeros((100, 3), np.float32), np.ones(100))
    assert head.buffer_len == 64 and head.train_samples == 140
    assert head.train() is not None


def test_non_finite_inputs_are_sanitised_counted_and_never_poison_the_head():
    rng = np.random.default_rng(2)
    head = RiskHead(2, risk_min_samples=8, risk_batch_size=8, seed=0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = np.abs(x[:, 0])
    x[3, 1] = np.nan
    x[5, 0] = np.inf
    y[7] = np.nan
    y[9] = -np.inf
    kept = head.add_samples(x, y)
    assert kept == 62
    assert head.stats()["risk/nan_events"] == 4  # two bad feature rows, two bad targets
    for _ in range(5):
        head.train()
    assert all(torch.isfinite(p).all() for p in head.model.parameters())
    pred = head.predict(np.array([[np.nan, 1.0], [0.0, 0.0]], np.float32))
    assert np.isfinite(pred).all()
    assert head.nan_events == 5
    assert np.isfinite(head.stats()["risk/loss"])


def test_non_finite_loss_skips_the_update():
    head = RiskHead(1, risk_min_samples=4, risk_batch_size=4, risk_update_iters=2, seed=0)
    head.add_samples(np.ones((4, 1), np.float32), np.ones(4))
    # corrupt the stored targets behind the sanitiser's back: the update must be skipped
    head._y[:4] = np.inf
    before = [p.clone() for p in head.model.parameters()]
    head.train()
    assert head.nan_events == 2
    assert all(torch.equal(a, b) for a, b in zip(before, head.model.parameters(), strict=True))


def test_seeded_deterministic_and_global_rng_untouched():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(128, 4)).astype(np.float32)
    y = x.sum(1)
    state = torch.random.get_rng_state()
    preds = []
    for _ in range(2):
        head = RiskHead(4, risk_min_samples=32, risk_batch_size=32, seed=7)
        head.add_samples(x, y)
        head.train()
        preds.append(head.predict(x))
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_array_equal(preds[0], preds[1])
    other = RiskHead(4, seed=8).predict(x)
    assert not np.allclose(other, RiskHead(4, seed=7).predict(x))


def test_state_dict_round_trip_resumes_exactly():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(256, 3)).astype(np.float32)
    y = np.tanh(x[:, 0])
    a = RiskHead(3, risk_min_samples=32, risk_batch_size=16, buffer_size=200, seed=0)
    a.add_samples(x[:128], y[:128])
    a.train()
    b = RiskHead(3, risk_min_samples=32, risk_batch_size=16, buffer_size=200, seed=99)
    b.load_state_dict(a.state_dict())
    for head in (a, b):
        head.add_samples(x[128:], y[128:])  # wraps the ring buffer
        head.train()
        head.train()
    np.testing.assert_array_equal(a.predict(x), b.predict(x))
    assert a.stats() == pytest.approx(b.stats(), nan_ok=True)
    with pytest.raises(ConfigError, match="buffer_x"):
        RiskHead(2, buffer_size=200).load_state_dict(a.state_dict())


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"input_dim": 0}, "input_dim"),
        ({"risk_lr": 0.0}, "risk_lr"),
        ({"risk_lr": float("nan")}, "risk_lr"),
        ({"risk_min_samples": 0}, "risk_min_samples"),
        ({"risk_batch_size": 2.5}, "risk_batch_size"),
        ({"risk_update_iters": 0}, "risk_update_iters"),
        ({"hidden": (0,)}, "hidden"),
    ],
)
def test_invalid_configuration_names_the_parameter(kwargs, key):
    args = {"input_dim": 2, **kwargs}
    with pytest.raises(ConfigError) as err:
        RiskHead(**args)
    assert err.value.key == key


def test_host_forward_matches_the_torch_model():
    rng = np.random.default_rng(5)
    x = rng.normal(3.0, 2.0, size=(64, 5)).astype(np.float32)
    head = RiskHead(5, risk_min_samples=16, risk_batch_size=16, seed=0)
    head.add_samples(x, x[:, 0])
    head.train()
    with torch.no_grad():
        ref = head.model(head._normalise(x))[:, 0].numpy()
    np.testing.assert_allclose(head.predict(x), ref, rtol=1e-5, atol=1e-5)


FLOAT_ARGS = {"risk_lr": 3e-2, "smooth_l1_beta": 0.3, "grad_clip": 0.7}


@pytest.mark.parametrize("scalar", [np.float32, np.float16, np.float64, np.longdouble, np.int32])
def test_numpy_numbers_are_taken_as_the_python_float_they_equal(scalar):
    # np.float32(1e-3) (read from an array or a .npz) was refused: 'must be a finite number > 0'
    values = (
        {**FLOAT_ARGS, "gamma": 0.9}
        if scalar is not np.int32
        else dict.fromkeys([*FLOAT_ARGS, "gamma"], 1)
    )
    given = {name: scalar(value) for name, value in values.items()}
    same = {name: float(value) for name, value in given.items()}  # the Python float it equals
    rng = np.random.default_rng(6)
    x = rng.normal(size=(192, 3)).astype(np.float32)
    y = np.tanh(x[:, 0]) + x[:, 1] ** 2
    head_args = [{n: v for n, v in args.items() if n in FLOAT_ARGS} for args in (given, same)]
    heads = [RiskHead(3, risk_min_samples=32, risk_batch_size=16, seed=1, **a) for a in head_args]
    for head in heads:
        assert all(type(getattr(head, name)) is float for name in FLOAT_ARGS)
        for i in range(3):
            head.add_samples(x[64 * i : 64 * (i + 1)], y[64 * i : 64 * (i + 1)])
            head.train()
    assert [getattr(heads[0], n) for n in FLOAT_ARGS] == [getattr(heads[1], n) for n in FLOAT_ARGS]
    assert heads[0].predict(x).tobytes() == heads[1].predict(x).tobytes()
    assert heads[0].stats() == pytest.approx(heads[1].stats(), rel=0, abs=0, nan_ok=True)
    # the annotator's gamma too (PendingCostToGo's own check refuses an np.float32)
    annotators = [
        RiskAnnotator(2, horizon=4, train_every=8, risk_min_samples=8, seed=2, **args)
        for args in (given, same)
    ]
    assert annotators[0].pending.gamma == annotators[1].pending.gamma
    for t in range(64):
        risks = [a.predict(a.sanitise(x[2 * t : 2 * t + 2])) for a in annotators]
        assert risks[0].tobytes() == risks[1].tobytes()
        for a in annotators:
            a.record(a.sanitise(x[2 * t : 2 * t + 2]), [t % 3 == 0, 0.5], [t % 9 == 8] * 2, [0, 0])
    assert annotators[0].history().tobytes() == annotators[1].history().tobytes()
    assert annotators[0].stats() == pytest.approx(annotators[1].stats(), rel=0, abs=0, nan_ok=True)


@pytest.mark.parametrize("name", FLOAT_ARGS)
@pytest.mark.parametrize("bad", [np.bool_(True), np.float32("nan"), np.float32(-1.0), np.int64(0)])
def test_numpy_bools_and_numpy_numbers_out_of_range_are_refused(name, bad):
    with pytest.raises(ConfigError) as err:
        RiskHead(2, **{name: bad})
    assert (err.value.key, err.value.value, err.value.source) == (name, bad, "RiskHead")
