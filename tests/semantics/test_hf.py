"""HF CLIP/SigLIP embedders on tiny random checkpoints, through the real loading path."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from gymcurric.errors import ConfigError
from gymcurric.semantics import (
    Embedder,
    Shaper,
    ShapingConfig,
    load_embedder,
    load_embedder_soft,
)
from gymcurric.semantics.hf import HFVisionLanguageEmbedder, dtype_chain, pooled
from tests.semantics.tiny_models import CLIP_DIM, SIGLIP_DIM, cached_tiny

DIMS = {"clip": CLIP_DIM, "siglip": SIGLIP_DIM}


def frames(n: int, seed: int = 0, size: int = 48) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (n, size, size, 3), dtype=np.uint8)


@pytest.fixture(scope="module", params=["clip", "siglip"])
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def fp32(kind):
    return load_embedder(cached_tiny(kind), dtype="float32")


def test_loads_with_status_dim_and_protocol(kind, fp32):
    assert isinstance(fp32, Embedder) and isinstance(fp32, HFVisionLanguageEmbedder)
    assert fp32.kind == kind and fp32.dim == DIMS[kind]
    assert fp32.status.startswith(f"ok: {kind} ") and "dtype=float32 device=cpu" in fp32.status
    assert fp32.model_device == torch.device("cpu")


def test_auto_dtype_is_bf16_on_cpu_and_outputs_float32(kind):
    e = load_embedder(cached_tiny(kind))
    assert e.dtype == torch.bfloat16 and "dtype=bfloat16" in e.status
    out = e.embed_images(frames(3))
    assert out.dtype == np.float32 and out.shape == (3, DIMS[kind])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_images_and_texts_are_unit_float32(fp32, kind):
    img = fp32.embed_images(frames(4))
    txt = fp32.embed_texts(["a safe road", "a hazard"])
    for out, n in ((img, 4), (txt, 2)):
        assert out.dtype == np.float32 and out.shape == (n, DIMS[kind])
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert fp32.embed_images(list(frames(2))).shape == (2, DIMS[kind])  # a list of frames
    assert fp32.embed_images(frames(1)[0]).shape == (1, DIMS[kind])  # one (H, W, 3) frame
    assert fp32.embed_texts([]).shape == (0, DIMS[kind])


def test_batched_equals_one_by_one(fp32):
    batch = frames(6, seed=1)
    together = fp32.embed_images(batch)
    alone = np.concatenate([fp32.embed_images(batch[i : i + 1]) for i in range(6)])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    texts = ["clear", "a much longer prompt about a hazard ahead", "goal"]
    np.testing.assert_allclose(
        fp32.embed_texts(texts),
        np.concatenate([fp32.embed_texts([t]) for t in texts]),
        atol=1e-5,
    )


def test_matches_model_forward_embeds(fp32, kind):
    # get_*_features + our normalisation == the model's own normalised forward outputs
    proc, model = fp32.processor, fp32.model
    padding = "max_length" if kind == "siglip" else True
    text = proc(text=["clear"], padding=padding, truncation=True, return_tensors="pt")
    pixels = fp32.pixel_values(frames(2))  # the embedder's own (torch) preprocessing
    with torch.inference_mode():
        out = model(**text, pixel_values=pixels)
    np.testing.assert_allclose(fp32.embed_images(frames(2)), out.image_embeds.numpy(), atol=1e-5)
    np.testing.assert_allclose(fp32.embed_texts(["clear"]), out.text_embeds.numpy(), atol=1e-5)


def test_siglip_pads_text_to_max_length():
    e = load_embedder(cached_tiny("siglip"), dtype="float32")
    calls = []
    original = e.processor.__call__

    class Spy:
        def __call__(self, *args, **kwargs):
            calls.append(kwargs)
            return original(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(original.__self__, name)

    e.processor = Spy()
    e.embed_texts(["x" * 500])  # longer than max_length: truncated, no error
    assert calls[0]["padding"] == "max_length" and calls[0]["truncation"] is True
    assert calls[0]["max_length"] == e.text_max_length == 64


def test_pooled_handles_tensor_tuple_and_output_object():
    t = torch.ones(2, 3)
    assert pooled(t) is t
    assert pooled((torch.zeros(1), t)) is t

    class Out:
        pooler_output = t

    assert pooled(Out()) is t


def test_dtype_chain():
    cpu = torch.device("cpu")
    assert dtype_chain("auto", cpu) == [torch.bfloat16, torch.float32]
    assert dtype_chain("fp16", cpu) == [torch.float16]
    with pytest.raises(ConfigError, match="dtype"):
        dtype_chain("int8", cpu)


def test_kind_mismatch_and_bad_kind(kind):
    other = "siglip" if kind == "clip" else "clip"
    with pytest.raises(ConfigError, match=f"holds a {kind} model"):
        load_embedder(cached_tiny(kind), kind=other)
    with pytest.raises(ConfigError, match="kind"):
        load_embedder(cached_tiny(kind), kind="vit")


def test_shaper_with_real_tiny_model_batched_parity(kind):
    cfg = ShapingConfig(
        safe_prompts=("a clear path",),
        unsafe_prompts=("a red hazard",),
        margin_norm_enable=False,
        beta_start=1.0,
        batch_max=3,
    )
    e = load_embedder(cached_tiny(kind), dtype="float32")
    batch = list(frames(7, seed=3))
    shaper = Shaper(cfg, e, num_envs=7)
    together = shaper.margins(batch)
    alone = np.concatenate([shaper.margins([f]) for f in batch])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert np.all(np.abs(together) <= 2)


# ---------------------------------------------------------------------------- failures
def test_missing_folder_fails_soft(tmp_path):
    e = load_embedder_soft(str(tmp_path / "nowhere"), kind="clip")
    assert e.status.startswith("failed: load")
    with pytest.raises(RuntimeError):
        e.embed_images(frames(1))


def test_uncached_hub_id_fails_soft_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = load_embedder_soft("gymcurric-test/definitely-not-cached-clip", kind="clip")
    assert e.status.startswith("failed: load")


def test_corrupt_checkpoint_fails_soft(tmp_path, kind):
    path = tmp_path / kind
    shutil.copytree(cached_tiny(kind), path)
    (path / "model.safetensors").write_bytes(b"not a safetensors file" * 10)
    e = load_embedder_soft(str(path))
    assert e.status.startswith("failed: load"), e.status


def test_pickle_weights_are_refused(tmp_path):
    # safetensors only: a folder holding only pytorch_model.bin does not load
    path = tmp_path / "bin"
    shutil.copytree(cached_tiny("clip"), path)
    model = load_embedder(str(path), dtype="float32").model
    os.remove(path / "model.safetensors")
    torch.save(model.state_dict(), path / "pytorch_model.bin")
    e = load_embedder_soft(str(path))
    assert e.status.startswith("failed: load"), e.status


def test_dtype_chain_falls_back_and_says_so(monkeypatch):
    import gymcurric.semantics.hf as hf

    real = hf.load_pretrained

    def no_bf16(loader, path, dtype, **kw):
        if dtype == torch.bfloat16:
            raise RuntimeError("bf16 kernels unavailable")
        return real(loader, path, dtype, **kw)

    monkeypatch.setattr(hf, "load_pretrained", no_bf16)
    e = load_embedder(cached_tiny("clip"))
    assert e.dtype == torch.float32
    assert "dtype=float32" in e.status and "fell back from bfloat16" in e.status


def test_cuda_device_without_cuda_is_a_config_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        load_embedder(cached_tiny("clip"), device="cuda")
    with pytest.raises(ConfigError, match="device"):
        load_embedder(cached_tiny("clip"), device="tpu:x")
