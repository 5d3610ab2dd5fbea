"""Shaper arithmetic with a transparent stub embedder: states are 2-D vectors, prompts map to axes.

A state ``(a, b)`` embeds to ``unit((a, b))``; "safe" prompts embed to ``(1, 0)``, "unsafe" ones
to ``(0, 1)``, so the raw margin of ``(cos t, sin t)`` is ``cos t - sin t``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import CallableEmbedder, FailedEmbedder, Shaper, ShapingConfig


def _texts(texts: list[str]) -> np.ndarray:
    return np.array([[0.0, 1.0] if "unsafe" in t else [1.0, 0.0] for t in texts])


def stub_embedder(images=None) -> CallableEmbedder:
    return CallableEmbedder(images=images or (lambda x: np.asarray(x, float)), texts=_texts)


def state(theta: float) -> np.ndarray:
    return np.array([math.cos(theta), math.sin(theta)], dtype=np.float32)


def cfg(**kw) -> ShapingConfig:
    base = dict(
        safe_prompts=("safe",),
        unsafe_prompts=("unsafe",),
        margin_norm_enable=False,
        beta_start=1.0,
        beta_end_fraction=1.0,
        total_steps=10**9,
    )
    base.update(kw)
    return ShapingConfig(**base)


def run(shaper: Shaper, states, terminated=None, truncated=None, rewards=None):
    n = shaper.num_envs
    return shaper.step(
        np.zeros(n) if rewards is None else rewards,
        np.zeros(n, bool) if terminated is None else terminated,
        np.zeros(n, bool) if truncated is None else truncated,
        lambda: states,
    )


def test_margin_sign_flips_when_prompt_sets_are_swapped():
    states = [state(0.1), state(1.4)]
    a = Shaper(cfg(), stub_embedder(), 2).margins(states)
    b = Shaper(cfg(safe_prompts=("unsafe",), unsafe_prompts=("safe",)), stub_embedder(), 2)
    np.testing.assert_allclose(a, [math.cos(0.1) - math.sin(0.1), math.cos(1.4) - math.sin(1.4)])
    np.testing.assert_allclose(b.margins(states), -a)
    assert a[0] > 0 > a[1]


def test_centroids_are_unit_means_of_prompt_embeddings():
    shaper = Shaper(cfg(safe_prompts=("safe", "unsafe x")), stub_embedder(), 1)
    np.testing.assert_allclose(shaper.centroids[0], [2**-0.5, 2**-0.5], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(shaper.centroids, axis=1), 1.0, atol=1e-6)


def test_additive_shaping_is_beta_times_margin_and_float64():
    shaper = Shaper(cfg(beta_start=0.5), stub_embedder(), 2)
    out = run(shaper, [state(0.0), state(math.pi / 2)])
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [0.5, -0.5], atol=1e-6)


def test_normalisation_over_window():
    shaper = Shaper(
        cfg(margin_norm_enable=True, margin_norm_window=4, clamp=100.0), stub_embedder()
    )
    thetas = [0.0, 0.3, 0.6, 0.9, 1.2, 1.5]
    got, raws = [], []
    for t in thetas:
        got.append(run(shaper, [state(t)])[0])
        raws.append(math.cos(t) - math.sin(t))
    for i in range(1, len(thetas)):
        window = np.array(raws[max(0, i - 3) : i + 1])
        expected = (raws[i] - window.mean()) / window.std()
        assert got[i] == pytest.approx(expected, rel=1e-5)
    assert got[0] == 0.0  # one sample: centred to 0
    assert shaper.window_count == 4


def test_clamp_and_scale_and_clamp_frac():
    shaper = Shaper(cfg(margin_scale=10.0, clamp=2.0), stub_embedder(), 3)
    out = run(shaper, [state(0.0), state(math.pi / 2), state(math.pi / 4)])
    np.testing.assert_allclose(out, [2.0, -2.0, 0.0], atol=1e-5)
    stats = shaper.stats()
    assert stats["semantics/clamp_frac"] == pytest.approx(2 / 3)
    assert stats["semantics/capture_count"] == 3


def test_confidence_gating_zeroes_small_margins():
    shaper = Shaper(cfg(confidence_min=0.5), stub_embedder(), 2)
    out = run(shaper, [state(0.0), state(math.pi / 4 - 0.1)])
    assert out[0] == pytest.approx(1.0) and out[1] == 0.0


def test_beta_cosine_endpoints():
    shaper = Shaper(cfg(beta_start=0.3, beta_end_fraction=0.5, total_steps=1000), stub_embedder())
    assert shaper.beta(0) == pytest.approx(0.3)
    assert shaper.beta(250) == pytest.approx(0.15)
    assert shaper.beta(500) == 0.0
    assert shaper.beta(10_000) == 0.0
    assert 0 < shaper.beta(499) < 1e-5
    # β advances with env steps: 2 envs → 2 steps per vector step
    two = Shaper(cfg(beta_start=1.0, beta_end_fraction=1.0, total_steps=8), stub_embedder(), 2)
    for _ in range(4):
        run(two, [state(0.0), state(0.0)])
    assert two.env_steps == 8 and two.beta() == 0.0
    assert run(two, [state(0.0), state(0.0)]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("gamma", [0.9, 1.0])
@pytest.mark.parametrize("terminal", [True, False])
def test_potential_shaping_telescopes(gamma, terminal):
    rng = np.random.default_rng(0)
    beta = 0.7
    shaper = Shaper(cfg(mode="potential", gamma=gamma, beta_start=beta), stub_embedder())
    thetas = rng.uniform(0, math.pi / 2, 8)
    shaper.begin(np.ones(1, bool), lambda: [state(thetas[0])])
    phi0 = shaper.phi[0]
    assert phi0 == pytest.approx(math.cos(thetas[0]) - math.sin(thetas[0]), rel=1e-5)
    total, T = 0.0, len(thetas) - 1
    for t in range(1, T + 1):
        last = t == T
        f = run(
            shaper,
            [state(thetas[t])],
            terminated=np.array([last and terminal]),
            truncated=np.array([last and not terminal]),
        )[0]
        total += gamma ** (t - 1) * f
    phi_T = 0.0 if terminal else math.cos(thetas[T]) - math.sin(thetas[T])
    assert total == pytest.approx(beta * (gamma**T * phi_T - phi0), rel=1e-5, abs=1e-7)
    assert shaper.phi[0] == 0.0  # cleared at the boundary


def test_potential_with_capture_interval_telescopes_undiscounted():
    shaper = Shaper(cfg(mode="potential", gamma=1.0, capture_interval=3), stub_embedder())
    thetas = np.linspace(0.1, 1.4, 11)
    shaper.begin(np.ones(1, bool), lambda: [state(thetas[0])])
    phi0, total = shaper.phi[0], 0.0
    captured = []
    for t in range(1, 11):
        f = run(shaper, [state(thetas[t])], terminated=np.array([t == 10]))[0]
        captured.append(bool(shaper.last_captured[0]))
        if not captured[-1] and t != 10:
            assert f == 0.0
        total += f
    # the terminal step needs no embedding (φ = 0 there)
    assert captured == [i % 3 == 0 and i != 9 for i in range(10)]
    assert total == pytest.approx(-phi0, rel=1e-6)


def test_capture_interval_embeds_every_kth_step_and_zero_otherwise():
    calls = []

    def images(x):
        calls.append(len(x))
        return np.asarray(x, float)

    shaper = Shaper(cfg(capture_interval=4), stub_embedder(images), 2)
    outs = [run(shaper, [state(0.0), state(0.0)]) for _ in range(9)]
    assert calls == [2, 2, 2]
    assert [float(o[0]) for o in outs] == pytest.approx([1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0])
    assert shaper.capture_count == 6


def test_pooling_over_last_k_and_reset_at_episode_end():
    shaper = Shaper(cfg(pool_k=2), stub_embedder(), 1)
    a = run(shaper, [state(0.0)])[0]
    b = run(shaper, [state(math.pi / 2)])[0]  # pooled with the previous: 45° → margin 0
    assert a == pytest.approx(1.0) and b == pytest.approx(0.0, abs=1e-6)
    c = run(shaper, [state(math.pi / 2)])[0]  # window now holds two 90° states
    assert c == pytest.approx(-1.0)
    # episode ends (truncated): the pool is cleared, the next state stands alone
    run(shaper, [state(math.pi / 2)], truncated=np.array([True]))
    assert shaper.pool_len[0] == 0
    d = run(shaper, [state(0.0)])[0]
    assert d == pytest.approx(1.0)


def test_pooling_is_per_env():
    shaper = Shaper(cfg(pool_k=3), stub_embedder(), 2)
    run(shaper, [state(0.0), state(math.pi / 2)])
    out = run(shaper, [state(0.0), state(math.pi / 2)])
    np.testing.assert_allclose(out, [1.0, -1.0], atol=1e-6)
    shaper.begin(np.array([True, False]))
    assert shaper.pool_len.tolist() == [0, 2]


def test_next_step_reset_steps_get_zero_and_start_new_potential():
    shaper = Shaper(cfg(mode="potential", gamma=1.0), stub_embedder(), 2)
    shaper.begin(np.ones(2, bool), lambda: [state(0.0), state(0.0)])
    out = shaper.step(
        np.zeros(2),
        np.zeros(2, bool),
        np.zeros(2, bool),
        lambda: [state(math.pi / 2), state(math.pi / 2)],
        valid=np.array([False, True]),
        starts=np.array([True, False]),
    )
    assert out[0] == 0.0 and out[1] == pytest.approx(-2.0)
    assert shaper.phi.tolist() == pytest.approx([-1.0, -1.0])


def test_same_step_final_inputs_are_used_for_the_transition():
    shaper = Shaper(cfg(mode="potential", gamma=1.0), stub_embedder(), 1)
    shaper.begin(np.ones(1, bool), lambda: [state(0.0)])
    out = shaper.step(
        np.zeros(1),
        np.zeros(1, bool),
        np.array([True]),
        lambda: [state(0.0)],  # the reset state of the next episode
        starts=np.array([True]),
        get_final_inputs=lambda: [state(math.pi / 2)],
    )
    assert out[0] == pytest.approx(-2.0)  # φ: 1 → -1 at the final (truncated) state
    assert shaper.phi[0] == pytest.approx(1.0)  # φ(s_0) of the new episode


def test_oom_halves_batch_and_results_match():
    class OOM(RuntimeError):
        pass

    OOM.__name__ = "OutOfMemoryError"
    sizes = []

    def images(x):
        sizes.append(len(x))
        if len(x) > 3:
            raise OOM("CUDA out of memory")
        return np.asarray(x, float)

    thetas = np.linspace(0, 1.5, 10)
    shaper = Shaper(cfg(batch_max=16), stub_embedder(images), 10)
    out = run(shaper, [state(t) for t in thetas])
    np.testing.assert_allclose(out, np.cos(thetas) - np.sin(thetas), atol=1e-6)
    assert shaper.batch_max == 2 and shaper.oom_events == 2
    assert sizes == [10, 5, 2, 2, 2, 2, 2]
    assert shaper.status.startswith("ok")


def test_failed_embedder_gives_zero_shaping_and_status():
    with pytest.warns(RuntimeWarning, match="semantic shaping"):
        shaper = Shaper(cfg(), FailedEmbedder("failed: load: no such folder"), 2)
    assert not shaper.ok and shaper.status.startswith("failed")
    assert run(shaper, [state(0), state(0)]).tolist() == [0.0, 0.0]
    assert shaper.stats()["semantics/status"].startswith("failed")


def test_embedding_failure_is_soft_and_warned_once():
    fail = {"on": True}

    def images(x):
        if fail["on"]:
            raise ValueError("boom")
        return np.asarray(x, float)

    shaper = Shaper(cfg(), stub_embedder(images), 1)
    with pytest.warns(RuntimeWarning, match="boom"):
        assert run(shaper, [state(0.0)])[0] == 0.0
    assert run(shaper, [state(0.0)])[0] == 0.0  # no second warning (pytest would not mind)
    assert shaper.embed_failures == 2 and shaper.status.startswith("error")
    fail["on"] = False
    assert run(shaper, [state(0.0)])[0] == pytest.approx(1.0)


def test_stats_keys_and_ratio():
    shaper = Shaper(cfg(beta_start=0.5), stub_embedder(), 2)
    run(shaper, [state(0.0), state(math.pi / 2)], rewards=np.array([1.0, 1.0]))
    s = shaper.stats()
    for key in (
        "beta",
        "raw_margin",
        "norm_margin",
        "clamp_frac",
        "capture_count",
        "embed_latency_ms",
        "shaping_reward_ratio",
        "shaping_std",
        "status",
    ):
        assert f"semantics/{key}" in s
    assert s["semantics/shaping_reward_ratio"] == pytest.approx(0.5)
    assert s["semantics/shaping_std"] == pytest.approx(0.5)
    assert s["semantics/raw_margin"] == pytest.approx(0.0, abs=1e-6)


def test_state_dict_roundtrip():
    a = Shaper(cfg(pool_k=2, margin_norm_enable=True), stub_embedder(), 2)
    for t in (0.1, 0.5, 0.9):
        run(a, [state(t), state(t + 0.2)])
    b = Shaper(cfg(pool_k=2, margin_norm_enable=True), stub_embedder(), 2)
    b.load_state_dict(a.state_dict())
    nxt = [state(1.1), state(0.3)]
    np.testing.assert_array_equal(run(a, nxt), run(b, nxt))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mode", "multiplicative"),
        ("beta_start", -1.0),
        ("beta_end_fraction", 0.0),
        ("beta_end_fraction", 1.5),
        ("gamma", 1.1),
        ("clamp", 0.0),
        ("capture_interval", 0),
        ("pool_k", 1.5),
        ("safe_prompts", "safe"),
        ("unsafe_prompts", ()),
        ("source", "pixels"),
        ("enabled", 1),
        ("margin_scale", float("nan")),
    ],
)
def test_config_validation_names_key_and_value(key, value):
    with pytest.raises(ConfigError) as err:
        ShapingConfig(**{key: value})
    assert err.value.key == key and key in str(err.value)


def test_config_to_dict_roundtrip():
    c = cfg(mode="potential", pool_k=3)
    assert ShapingConfig(**c.to_dict()) == c


def test_caption_cache_embeds_each_distinct_caption_once():
    calls = []

    def texts(t):
        calls.append(list(t))
        return np.array([[0.0, 1.0] if "unsafe" in s else [1.0, 0.2] for s in t])

    emb = CallableEmbedder(texts=texts)
    shaper = Shaper(cfg(caption_cache_size=2), emb, 3)
    calls.clear()
    a = run(shaper, ["ok", "ok", "unsafe here"])
    b = run(shaper, ["unsafe here", "ok", "ok"])
    assert calls == [["ok", "unsafe here"]]
    np.testing.assert_allclose(b, a[::-1])
    run(shaper, ["new", "ok", "ok"])  # caching "new" evicts the oldest entry, "ok"
    run(shaper, ["ok", "new", "new"])
    assert calls[1:] == [["new"], ["ok"]] and len(shaper._caption_cache) == 2
    nocache = Shaper(cfg(caption_cache_size=0), emb, 3)
    calls.clear()
    np.testing.assert_allclose(run(nocache, ["ok", "ok", "unsafe here"]), a)
    assert calls == [["ok", "ok", "unsafe here"]]


def test_a_restored_shaper_normalises_exactly_as_the_saved_one():
    """The window's running sums travel in state_dict (a re-sum would round differently)."""
    rng = np.random.default_rng(0)
    shaper = Shaper(cfg(margin_norm_window=50), stub_embedder(), 2)
    for t in rng.uniform(0, 2 * math.pi, size=(37, 2)):
        run(shaper, [state(t[0]), state(t[1])])
    twin = Shaper(cfg(margin_norm_window=50), stub_embedder(), 2)
    twin.load_state_dict(shaper.state_dict())
    assert (twin.window.total, twin.window.total_sq) == (
        shaper.window.total,
        shaper.window.total_sq,
    )
    for t in rng.uniform(0, 2 * math.pi, size=(5, 2)):
        assert np.array_equal(
            run(shaper, [state(t[0]), state(t[1])]), run(twin, [state(t[0]), state(t[1])])
        )
