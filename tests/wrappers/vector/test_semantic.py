"""Vector ShapeRewardSemantic: batching, autoreset modes (Sync and Async), OOM backoff, parity."""

from __future__ import annotations

import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.errors import ConfigError
from gymcurric.wrappers.semantic import ShapeRewardSemantic as SingleShape
from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic
from tests.semantics.stubs import (
    STUB_CONFIG,
    StateEnv,
    caption_embedder,
    embed_frames,
    frame_embedder,
    margin,
)

LENGTHS = (2, 3, 5)
OFFSETS = (0, 1, 3)
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def make_vec(kind, autoreset, lengths=LENGTHS, **env_kwargs):
    fns = [
        partial(StateEnv, episode_len=n, offset=o, **env_kwargs)
        for n, o in zip(lengths, OFFSETS, strict=True)
    ]
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=autoreset)
    return AsyncVectorEnv(fns, autoreset_mode=autoreset, context="spawn")


def expected_additive(mode, steps, truncate, source):
    """Reference shaping per step and env (additive, β = 1, no normalisation)."""
    out = np.zeros((steps, len(LENGTHS)))
    for i, (n, o) in enumerate(zip(LENGTHS, OFFSETS, strict=True)):
        t = 0  # steps into the current episode
        reset_next = False
        for k in range(steps):
            if mode == AutoresetMode.NEXT_STEP and reset_next:
                t, reset_next = 0, False
                continue  # reset step: 0
            t += 1
            final_known = source == "captions" or t < n or mode == AutoresetMode.NEXT_STEP
            out[k, i] = margin((o + t) % 5) if final_known else 0.0
            if t == n:
                if mode == AutoresetMode.NEXT_STEP:
                    reset_next = True
                else:
                    t = 0
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("source", ["captions", "frames"])
def test_additive_shaping_aligned_in_every_autoreset_mode(kind, mode, source):
    if kind == "async" and source == "frames" and mode == AutoresetMode.SAME_STEP:
        pytest.skip("covered by the sync variant; keeps the suite fast")
    embedder = caption_embedder() if source == "captions" else frame_embedder()
    envs = ShapeRewardSemantic(make_vec(kind, mode), embedder, STUB_CONFIG)
    try:
        envs.reset(seed=0)
        steps = 11
        ref = expected_additive(mode, steps, False, source)
        for k in range(steps):
            _, rewards, _, _, info = envs.step(np.zeros(3, np.int64))
            np.testing.assert_allclose(info["shaping"], ref[k], atol=1e-6, err_msg=f"step {k}")
            np.testing.assert_allclose(rewards, info["raw_reward"] + info["shaping"])
            assert info["_shaping"].all() and info["shaping"].dtype == np.float64
    finally:
        envs.close()


@pytest.mark.parametrize("mode", MODES)
def test_potential_telescopes_per_episode(mode):
    gamma, beta = 0.9, 0.5
    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": gamma, "beta_start": beta}
    envs = ShapeRewardSemantic(make_vec("sync", mode), caption_embedder(), cfg)
    envs.reset(seed=0)
    phi0 = envs.shaper.phi.copy()
    np.testing.assert_allclose(phi0, [margin(o) for o in OFFSETS])
    totals, t = np.zeros(3), np.zeros(3, int)
    finished: list[list[float]] = [[], [], []]
    expected: list[list[float]] = [[], [], []]
    prev_done = np.zeros(3, bool)
    for _ in range(16):
        _, _, term, trunc, info = envs.step(np.zeros(3, np.int64))
        for i in range(3):
            if mode == AutoresetMode.NEXT_STEP and prev_done[i]:
                assert info["shaping"][i] == 0.0
                phi0[i] = envs.shaper.phi[i]
                continue
            totals[i] += gamma ** t[i] * info["shaping"][i]
            t[i] += 1
            if term[i]:
                finished[i].append(totals[i])
                expected[i].append(-beta * phi0[i])  # φ_T = 0 at a true terminal
                totals[i], t[i] = 0.0, 0
                if mode == AutoresetMode.SAME_STEP:
                    phi0[i] = envs.shaper.phi[i]
        prev_done = term | trunc
    for i in range(3):
        assert finished[i] and np.allclose(finished[i], expected[i], atol=1e-9)


def test_one_batched_call_per_step_with_batch_max():
    calls = []

    def images(frames):
        calls.append(len(frames))
        return embed_frames(frames)

    envs = ShapeRewardSemantic(
        make_vec("sync", AutoresetMode.NEXT_STEP, lengths=(50,) * 3),
        frame_embedder(images),
        STUB_CONFIG,
    )
    envs.reset(seed=0)
    envs.step(np.zeros(3, np.int64))
    assert calls == [3]
    calls.clear()
    envs = ShapeRewardSemantic(
        SyncVectorEnv([partial(StateEnv, episode_len=50, offset=i % 5) for i in range(8)]),
        frame_embedder(images),
        STUB_CONFIG,
        batch_max=3,
    )
    envs.reset(seed=0)
    _, _, _, _, info = envs.step(np.zeros(8, np.int64))
    assert calls == [3, 3, 2] and envs.batch_max == 3
    np.testing.assert_allclose(
        info["shaping"], [margin((i % 5 + 1) % 5) for i in range(8)], atol=1e-6
    )


def test_cuda_oom_halves_batch_and_matches_unbatched():
    torch = pytest.importorskip("torch")
    sizes = []

    def images(frames):
        sizes.append(len(frames))
        if len(frames) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return embed_frames(frames)

    def run(embedder, batch_max):
        envs = ShapeRewardSemantic(
            SyncVectorEnv([partial(StateEnv, episode_len=4, offset=i % 5) for i in range(7)]),
            embedder,
            STUB_CONFIG,
            batch_max=batch_max,
        )
        envs.reset(seed=0)
        return envs, [envs.step(np.zeros(7, np.int64))[-1]["shaping"] for _ in range(6)]

    envs, got = run(frame_embedder(images), 16)
    _, ref = run(frame_embedder(), 1)
    np.testing.assert_array_equal(np.array(got), np.array(ref))
    assert envs.batch_max == 3 and sizes[:4] == [7, 3, 3, 1]  # 7 fails, then chunks of 3
    assert max(sizes[4:]) == 3
    stats = envs.stats()
    assert stats["semantics/oom_events"] == 1 and stats["semantics/batch_max"] == 3
    assert stats["semantics/status"].startswith("ok")


def test_disabled_is_bit_for_bit_identical():
    def run(wrap):
        envs = gym.make_vec("gymcurric/HazardNav-v0", num_envs=3, max_steps=7)
        if wrap:
            envs = ShapeRewardSemantic(envs, "/no/such/model", {"enabled": False})
        envs.action_space.seed(3)
        out = [envs.reset(seed=0)]
        for _ in range(20):
            out.append(envs.step(envs.action_space.sample()))
        return out

    a, b = run(False), run(True)
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            if isinstance(u, dict):
                assert u.keys() == v.keys()
                for key in u:
                    np.testing.assert_array_equal(u[key], v[key])
            else:
                assert np.asarray(u).dtype == np.asarray(v).dtype
                assert np.asarray(u).tobytes() == np.asarray(v).tobytes()


def test_matches_single_env_wrapper_on_hazard_nav():
    """Vector shaping == the single-env wrapper's on each sub-env (captions, MiniLM-free)."""
    words = caption_embedder()._texts  # "state v" parser; HazardNav captions map to the axes
    cfg = {
        **STUB_CONFIG,
        "safe_prompts": ["clear"],
        "unsafe_prompts": ["unsafe"],
        "margin_norm_enable": True,
        "pool_k": 2,
    }
    from gymcurric.semantics import CallableEmbedder

    def texts(t):
        return np.array([[0.0, 1.0] if "inside" in s or "unsafe" in s else [1.0, 0.2] for s in t])

    emb = CallableEmbedder(texts=texts)
    assert words is not None
    vec = ShapeRewardSemantic(
        gym.make_vec("gymcurric/HazardNav-v0", num_envs=1, max_steps=6), emb, cfg
    )
    single = SingleShape(gym.make("gymcurric/HazardNav-v0", max_steps=6), emb, cfg)
    vec.reset(seed=5)
    single.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(6):
        a = rng.uniform(-1, 1, (1, 2)).astype(np.float32)
        v = vec.step(a)
        s = single.step(a[0])
        assert v[-1]["shaping"][0] == pytest.approx(s[-1]["shaping"])
        assert v[1][0] == pytest.approx(s[1])


def test_needs_rgb_array_for_frames_and_fails_soft(tmp_path):
    with pytest.raises(ConfigError, match="render_mode"):
        ShapeRewardSemantic(
            make_vec("sync", AutoresetMode.NEXT_STEP, render_mode=None), frame_embedder()
        )
    with pytest.warns(RuntimeWarning, match="semantic shaping"):
        envs = ShapeRewardSemantic(
            make_vec("sync", AutoresetMode.NEXT_STEP), str(tmp_path / "none"), kind="clip"
        )
    envs.reset(seed=0)
    _, rewards, _, _, info = envs.step(np.zeros(3, np.int64))
    assert info["shaping"].tolist() == [0.0, 0.0, 0.0] and rewards.tolist() == [1.0, 1.0, 1.0]


def test_tiny_siglip_batched_equals_one_by_one_in_vector_env():
    pytest.importorskip("transformers")
    from gymcurric.semantics import load_embedder
    from tests.semantics.tiny_models import cached_tiny

    emb = load_embedder(cached_tiny("siglip"), dtype="float32")
    cfg = {
        "margin_norm_enable": False,
        "beta_start": 1.0,
        "beta_end_fraction": 1.0,
        "total_steps": 10**12,
    }
    envs = ShapeRewardSemantic(
        gym.make_vec("gymcurric/HazardNav-v0", num_envs=4, render_mode="rgb_array"), emb, cfg
    )
    envs.reset(seed=0)
    shaping = envs.step(np.zeros((4, 2), np.float32))[-1]["shaping"]
    frames = envs.env.render()
    alone = [envs.shaper.margins([f])[0] for f in frames]
    np.testing.assert_allclose(shaping, alone, atol=1e-5)


def test_disabled_autoreset_restarts_masked_envs():
    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": 1.0}
    envs = ShapeRewardSemantic(make_vec("sync", AutoresetMode.DISABLED), caption_embedder(), cfg)
    envs.reset(seed=0)
    np.testing.assert_allclose(envs.shaper.phi, [margin(o) for o in OFFSETS])
    envs.step(np.zeros(3, np.int64))
    envs.step(np.zeros(3, np.int64))  # env 0 (length 2) terminated: φ = 0
    assert envs.shaper.phi[0] == 0.0
    envs.reset(options={"reset_mask": np.array([True, False, False])})
    assert envs.shaper.phi[0] == pytest.approx(margin(OFFSETS[0]))
    assert envs.shaper.phi[1] == pytest.approx(margin((OFFSETS[1] + 2) % 5))
    info = envs.step(np.zeros(3, np.int64))[-1]
    assert info["shaping"][0] == pytest.approx(margin(1) - margin(0))


def test_batch_max_overrides_the_config_and_is_recorded_in_it():
    envs = ShapeRewardSemantic(
        make_vec("sync", AutoresetMode.NEXT_STEP), caption_embedder(), STUB_CONFIG, batch_max=5
    )
    assert envs.batch_max == 5 and envs._saved_kwargs["config"].batch_max == 5


def _async_fork(**env_kwargs):
    return AsyncVectorEnv([partial(StateEnv, **env_kwargs)] * 2, context="fork")


def test_async_sub_envs_without_caption_or_describe_keep_their_workers(capfd):
    # call("describe") on sub-envs without one made the AsyncVectorEnv workers exit
    envs = ShapeRewardSemantic(_async_fork(captions=False), caption_embedder(), STUB_CONFIG)
    try:
        envs.reset(seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ConfigError, match="gave no caption"):
                envs.step(np.zeros(2, np.int64))
        base = envs.unwrapped
        assert all(p.is_alive() for p in base.processes), "a worker was shut down"
        reported = [str(w.message) for w in caught] + [capfd.readouterr().err]
        assert not any("Worker" in r or "Traceback" in r for r in reported), reported
        base.reset(seed=1)
        base.step(np.zeros(2, np.int64))
    finally:
        envs.close()


def test_async_describe_stands_in_for_missing_captions():
    described = ShapeRewardSemantic(
        _async_fork(captions=False, describe=True), caption_embedder(), STUB_CONFIG
    )
    captioned = ShapeRewardSemantic(
        SyncVectorEnv([partial(StateEnv)] * 2), caption_embedder(), STUB_CONFIG
    )
    try:
        for envs in (described, captioned):
            envs.reset(seed=0)
        steps = range(6)
        want = [captioned.step(np.zeros(2, np.int64))[-1]["shaping"].tolist() for _ in steps]
        got = [described.step(np.zeros(2, np.int64))[-1]["shaping"].tolist() for _ in steps]
        assert got == want and np.any(want)
    finally:
        described.close()
        captioned.close()
