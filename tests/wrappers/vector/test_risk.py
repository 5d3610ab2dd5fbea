from collections import Counter
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("torch")

from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.semantics.embedders import CallableEmbedder
from gymcurric.wrappers.vector.risk import AnnotateRisk
from tests.stubs import make_scripted
from tests.wrappers.cost_envs import make_walk

LENGTHS = (2, 3, 5)
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def make_vec(kind, mode, fns):
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    return AsyncVectorEnv(fns, autoreset_mode=mode, context="spawn")


def expected_samples(lengths, steps, mode, horizon, gamma):
    """(state, target) pairs that must have reached the head: by hand, per sub-env."""
    out = Counter()
    for n in lengths:
        period = n + 1 if mode == AutoresetMode.NEXT_STEP else n
        for k in range(steps):
            t, episode_step = k % period, k % period + 1  # transitions seen in this episode
            if t >= n:
                continue  # the NEXT_STEP reset step: not a transition
            last = (k // period) * period + n - 1  # vector step that ends this episode
            window = min(horizon, n - t)
            if k + window - 1 > steps - 1 and last > steps - 1:
                continue  # still pending
            del episode_step
            target = sum(gamma**j * 0.5 * (t + 1 + j) for j in range(window))
            out[(float(t), round(target, 6))] += 1
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_samples_and_risk_in_every_autoreset_mode(kind, mode):
    fns = [partial(make_scripted, n) for n in LENGTHS]
    envs = AnnotateRisk(
        make_vec(kind, mode, fns), horizon=2, gamma=0.5, train_every=1, risk_min_samples=10_000
    )
    try:
        _, info = envs.reset(seed=0)
        assert info["risk"].shape == (3,) and info["_risk"].all()
        for _ in range(13):
            *_, info = envs.step(np.zeros(3, dtype=np.int64))
            assert info["risk"].shape == (3,) and info["risk"].dtype == np.float32
            assert info["_risk"].all() and np.isfinite(info["risk"]).all()
        head = envs.annotator.head
        got = Counter(
            (float(x), round(float(y), 6))
            for x, y in zip(head._x[: head.buffer_len, 0], head._y[: head.buffer_len], strict=True)
        )
        assert got == expected_samples(LENGTHS, 13, mode, 2, 0.5)
        ends = sum(13 // (n + (mode == AutoresetMode.NEXT_STEP)) for n in LENGTHS)
        assert envs.annotator.episodes >= ends
    finally:
        envs.close()


def test_learns_monotone_risk_with_one_batched_forward_per_step():
    envs = AnnotateRisk(
        SyncVectorEnv([partial(make_walk, episode_len=100) for _ in range(4)]),
        horizon=10,
        gamma=0.9,
        train_every=8,
        risk_min_samples=256,
        risk_batch_size=64,
        risk_update_iters=8,
    )
    calls = []
    original = envs.annotator.predict

    def counting(features):
        calls.append(features.shape)
        return original(features)

    envs.annotator.predict = counting
    envs.reset(seed=0)
    for _ in range(1200):
        envs.step(np.zeros(4, dtype=np.int64))
    assert calls == [(4, 2)] * 1201
    assert envs.stats()["risk/corr"] > 0.8, envs.stats()
    assert envs.modulation(min_episodes=1).status == "ok"


@pytest.mark.parametrize("features", ["frames", "caption"])
def test_embedder_features_are_batched(features):
    batches = []

    def images(frames):
        batches.append(len(frames))
        return np.stack([np.asarray(frames)[..., 0].mean((1, 2)), np.ones(len(frames))], 1)

    def texts(captions):
        batches.append(len(captions))
        return np.array([[float(c.split()[1]), 1.0] for c in captions])

    emb = CallableEmbedder(images=images, texts=texts, dim=2)
    fns = [partial(make_walk, render_mode="rgb_array") for _ in range(3)]
    envs = AnnotateRisk(
        SyncVectorEnv(fns),
        features,
        emb,
        horizon=3,
        train_every=4,
        risk_min_samples=16,
        risk_batch_size=16,
    )
    envs.reset(seed=0)
    for _ in range(20):
        envs.step(np.zeros(3, dtype=np.int64))
    assert batches == [3] * 21
    assert envs.stats()["risk/train_samples"] > 0


def test_caption_features_on_hazard_nav():
    emb = CallableEmbedder(texts=lambda caps: np.array([[("close" in c) * 1.0, 1.0] for c in caps]))
    envs = AnnotateRisk(gym.make_vec("gymcurric/HazardNav-v0", num_envs=2), "caption", emb)
    _, info = envs.reset(seed=0)
    assert info["risk"].shape == (2,)
    envs.step(envs.action_space.sample())


def test_missing_cost_and_key_conflict():
    envs = AnnotateRisk(SyncVectorEnv([partial(make_walk, cost=False)] * 2))
    envs.reset(seed=0)
    with pytest.raises(ConfigError, match=r"info\['cost'\]"):
        envs.step(np.zeros(2, dtype=np.int64))

    class HasRisk(gym.vector.VectorWrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, "risk": np.zeros(2)}

    with pytest.raises(InfoKeyConflictError, match="risk"):
        AnnotateRisk(HasRisk(SyncVectorEnv([make_walk] * 2))).reset(seed=0)


def test_partial_reset_closes_only_those_episodes():
    envs = AnnotateRisk(
        SyncVectorEnv([make_walk] * 2, autoreset_mode=AutoresetMode.DISABLED),
        horizon=50,
        train_every=1000,
        risk_min_samples=10_000,
    )
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.reset(options={"reset_mask": np.array([True, False])})
    envs.annotator.train_now()
    assert envs.stats()["risk/train_samples"] == 3  # env 0's three steps; env 1 still running
