import dataclasses
import inspect
import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("torch")

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.safety.risk_targets import cost_to_go_targets
from gymcurric.semantics.embedders import CallableEmbedder
from gymcurric.wrappers.risk import AnnotateRisk
from tests.stubs import ScriptedCostEnv
from tests.wrappers.cost_envs import make_walk

FAST = {"risk_min_samples": 32, "risk_batch_size": 32, "train_every": 16}


def run(env, steps, seed=0):
    env.reset(seed=seed)
    infos = []
    for _ in range(steps):
        _, _, term, trunc, info = env.step(0)
        infos.append(info)
        if term or trunc:
            env.reset()
    return infos


def test_risk_every_step_and_metrics_on_hazard_nav():
    env = AnnotateRisk(gym.make("gymcurric/HazardNav-v0"), horizon=10, seed=0, **FAST)
    _, info = env.reset(seed=0)
    assert isinstance(info["risk"], float)
    env.action_space.seed(0)
    for _ in range(300):
        *_, term, trunc, info = env.step(env.action_space.sample())
        assert isinstance(info["risk"], float) and np.isfinite(info["risk"])
        assert "cost" in info
        if term or trunc:
            env.reset()
    stats = env.stats()
    assert set(stats) == {
        "risk/loss",
        "risk/corr",
        "risk/pred_mean",
        "risk/target_mean",
        "risk/train_samples",
        "risk/nan_events",
        "risk/embed_errors",
    }
    assert stats["risk/train_samples"] > 200 and np.isfinite(stats["risk/loss"])


def test_samples_pair_each_state_with_its_cost_to_go():
    """The head's buffer holds exactly the reference targets of each visited state."""
    # obs = step index in the episode (0..4), cost of the step from state t = 0.5 * (t + 1)
    env = AnnotateRisk(
        ScriptedCostEnv(episode_len=5),
        horizon=3,
        gamma=0.5,
        train_every=1,
        risk_min_samples=10_000,
    )
    run(env, 12)  # two full episodes and two steps of a third
    head = env.annotator.head
    got = sorted(
        zip(
            head._x[: head.buffer_len, 0].tolist(), head._y[: head.buffer_len].tolist(), strict=True
        )
    )
    costs = 0.5 * np.arange(1, 6)
    ref = cost_to_go_targets(costs, [False] * 4 + [True], gamma=0.5, horizon=3)
    one = sorted(zip(range(5), ref.targets.tolist(), strict=True))
    # the third episode's two states are still pending (fewer than H=3 steps seen)
    assert got == sorted(one + one)


def test_correlation_above_0_8_on_monotone_costs():
    env = AnnotateRisk(
        make_walk(),
        horizon=10,
        gamma=0.9,
        seed=0,
        train_every=32,
        risk_min_samples=256,
        risk_batch_size=64,
        risk_update_iters=8,
    )
    infos = run(env, 6000, seed=1)
    stats = env.stats()
    assert stats["risk/corr"] > 0.8, stats
    # the online predictions themselves track the realised targets
    risk = np.array([i["risk"] for i in infos[-1000:]])
    costs = np.array([i["cost"] for i in infos[-1000:]])
    # infos[-1000:] are global steps 5001..6000 of 200-step episodes; the risk written at step
    # s is for the state the cost of step s + 1 is paid from, unless s ended an episode
    step = 5001 + np.arange(999)
    ends = (step + 1) % 200 == 0  # the step paid from that state truncates the episode
    ref = cost_to_go_targets(costs[1:], np.zeros(999, bool), ends, gamma=0.9, horizon=10)
    ok = ref.ready & (step % 200 != 0)
    assert np.corrcoef(risk[:-1][ok], ref.targets[ok])[0, 1] > 0.8


def test_nan_costs_are_counted_and_do_not_poison_the_head():
    env = AnnotateRisk(make_walk(nan_cost_every=7), horizon=5, seed=0, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # sanitised silently, counted
        infos = run(env, 400)
    assert np.isnan([i["cost"] for i in infos]).sum() == 56  # info['cost'] is left as it is
    stats = env.stats()
    assert stats["risk/nan_events"] == 56
    assert np.isfinite(stats["risk/loss"])
    assert all(np.isfinite(i["risk"]) for i in infos)


def test_missing_cost_names_the_key():
    env = AnnotateRisk(make_walk(cost=False))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"info\['cost'\]") as err:
        env.step(0)
    assert err.value.key == "info['cost']" and "AnnotateCost" in str(err.value)


def test_six_tuple_env_is_a_clear_error():
    env = AnnotateRisk(ScriptedCostEnv(mode="tuple"))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="6-tuple"):
        env.step(0)


def test_existing_risk_key_is_not_overwritten():
    class HasRisk(gym.Wrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, "risk": 1.0}

    with pytest.raises(InfoKeyConflictError, match="risk"):
        AnnotateRisk(HasRisk(make_walk())).reset(seed=0)


@pytest.mark.parametrize("features", ["frames", "caption"])
def test_embedder_features(features):
    calls = []

    def images(frames):
        calls.append(len(frames))
        return np.stack([np.asarray(frames)[..., 0].mean((1, 2)) / 255.0, np.ones(len(frames))], 1)

    def texts(captions):
        calls.append(len(captions))
        return np.array([[float(c.split()[1]), 1.0] for c in captions])

    emb = CallableEmbedder(images=images, texts=texts, dim=2)
    env = AnnotateRisk(make_walk(render_mode="rgb_array"), features, emb, horizon=5, **FAST)
    run(env, 100)
    assert calls == [1] * 101  # one embedding per returned state, one forward each
    assert env.annotator.head.input_dim == 2
    assert env.stats()["risk/train_samples"] > 50


class DescribeInsteadOfCaption(gym.Wrapper):
    """A user's captioning wrapper: the env's captions come from ``describe()``, not infos."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        info.pop("caption")
        return obs, info

    def step(self, action):
        *out, info = self.env.step(action)
        info.pop("caption")
        return (*out, info)

    def describe(self):
        return f"at {self.env.unwrapped.p:.2f}"


def test_caption_features_use_the_describe_of_a_wrapper():
    captions = []

    def texts(batch):
        captions.extend(batch)
        return np.array([[float(c.split()[1]), 1.0] for c in batch])

    emb = CallableEmbedder(texts=texts, dim=2)
    env = AnnotateRisk(DescribeInsteadOfCaption(make_walk()), "caption", emb, **FAST)
    run(env, 5)
    assert len(captions) == 6 and all(c.startswith("at ") for c in captions)


def test_embedding_errors_are_fail_soft():
    state = {"n": 0}

    def flaky(frames):
        state["n"] += 1
        if state["n"] % 5 == 0:
            raise RuntimeError("boom")
        return np.ones((len(frames), 3))

    emb = CallableEmbedder(images=flaky, dim=3)
    env = AnnotateRisk(make_walk(render_mode="rgb_array"), "frames", emb, horizon=3, **FAST)
    infos = run(env, 100)
    assert env.stats()["risk/embed_errors"] == 20
    assert [i["risk"] for i in infos[3::5]] == [0.0] * 20
    assert env.stats()["risk/train_samples"] > 0


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"features": "pixels"}, "features"),
        ({"features": "frames"}, "embedder"),
        ({"embedder": CallableEmbedder(texts=lambda t: np.ones((len(t), 2)))}, "embedder"),
        ({"horizon": 0}, "horizon"),
        ({"gamma": 2.0}, "gamma"),
        ({"truncation": "maybe"}, "truncation"),
        ({"train_every": 0}, "train_every"),
        ({"risk_lr": -1.0}, "risk_lr"),
    ],
)
def test_invalid_arguments_name_the_parameter(kwargs, key):
    with pytest.raises(ConfigError) as err:
        AnnotateRisk(make_walk(), **kwargs)
    assert err.value.key == key


def test_frames_need_rgb_array_render_mode():
    emb = CallableEmbedder(images=lambda f: np.ones((len(f), 2)))
    with pytest.raises(ConfigError, match="rgb_array"):
        AnnotateRisk(make_walk(), "frames", emb)


def test_state_dict_round_trip_and_reset_mid_episode():
    a = AnnotateRisk(make_walk(), horizon=5, seed=0, **FAST)
    run(a, 150)
    b = AnnotateRisk(make_walk(), horizon=5, seed=1, **FAST)
    b.load_state_dict(a.state_dict())
    obs = np.array([[0.5, 0.0], [0.9, 0.0]], np.float32)
    np.testing.assert_array_equal(a.annotator.head.predict(obs), b.annotator.head.predict(obs))
    assert a.stats() == pytest.approx(b.stats(), nan_ok=True)
    # a reset in the middle of an episode closes its pending steps (used as truncated targets)
    before = a.stats()["risk/train_samples"]
    a.reset(seed=5)
    for _ in range(3):
        a.step(0)
    a.reset(seed=6)
    a.annotator.train_now()
    assert a.stats()["risk/train_samples"] > before


def test_importing_the_wrappers_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, gymcurric.wrappers.risk, gymcurric.wrappers.vector.risk, "
        "gymcurric.safety.risk_targets, gymcurric.safety.modulation, gymcurric.semantics.probe;"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
def test_caption_risk_with_the_offline_minilm_on_hazard_nav():
    """Real MiniLM caption embeddings carry the hazard signal (held-out corr 0.69 measured)."""
    minilm = pytest.importorskip("gymcurric.semantics.embedders").load_embedder(None)
    assert minilm.status.startswith("ok")
    cache = {}

    def texts(captions):  # HazardNav's captions come from a small set: embed each once
        missing = [c for c in captions if c not in cache]
        if missing:
            cache.update(zip(missing, minilm.embed_texts(missing), strict=True))
        return np.stack([cache[c] for c in captions])

    def hazard_env():
        return gym.make("gymcurric/HazardNav-v0", num_hazards=12, hazard_radius=0.4)

    stats = {}
    for features, emb in (("caption", CallableEmbedder(texts=texts)), ("obs", None)):
        env = AnnotateRisk(
            hazard_env(),
            features,
            emb,
            horizon=10,
            gamma=0.9,
            seed=0,
            train_every=64,
            risk_min_samples=256,
        )
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(4000):
            *_, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        stats[features] = env.stats()["risk/corr"]
    assert stats["caption"] > 0.5, stats


def test_settings_fields_are_both_twins_keyword_arguments():
    """RiskSettings reads the wrappers' ``locals()`` by field name: the lists must agree."""
    from gymcurric.wrappers.risk import RiskSettings
    from gymcurric.wrappers.vector.risk import AnnotateRisk as VectorAnnotateRisk

    fields = [field.name for field in dataclasses.fields(RiskSettings)]
    for cls in (AnnotateRisk, VectorAnnotateRisk):
        assert list(inspect.signature(cls.__init__).parameters)[2:] == fields
