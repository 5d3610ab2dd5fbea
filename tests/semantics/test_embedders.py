"""load_embedder dispatch and CallableEmbedder (no model needed except where marked)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import (
    CallableEmbedder,
    Embedder,
    FailedEmbedder,
    detect_kind,
    embedder_modality,
    is_failed,
    load_embedder,
    load_embedder_soft,
    unit_rows,
)


def test_importing_semantics_and_wrappers_does_not_import_torch():
    code = (
        "import sys, gymcurric, gymcurric.semantics, gymcurric.semantics.shaper, "
        "gymcurric.wrappers.semantic, gymcurric.wrappers.vector.semantic; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_callable_embedder_normalises_and_infers_dim():
    e = CallableEmbedder(
        images=lambda f: np.ones((len(f), 3)), texts=lambda t: [[3.0, 4.0]] * len(t)
    )
    assert isinstance(e, Embedder) and e.modality == "image"
    out = e.embed_images(np.zeros((2, 4, 4, 3), np.uint8))
    assert out.dtype == np.float32 and e.dim == 3
    np.testing.assert_allclose(out, 3**-0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="d=2, expected 3"):
        e.embed_texts(["a"])


def test_callable_embedder_checks_shapes_and_arguments():
    e = CallableEmbedder(texts=lambda t: np.ones((1, 2)))
    assert e.modality == "text"
    with pytest.raises(ValueError, match=r"expected \(2, d\)"):
        e.embed_texts(["a", "b"])
    with pytest.raises(TypeError, match="no images callable"):
        e.embed_images(np.zeros((1, 2, 2, 3)))
    with pytest.raises(ConfigError, match="images"):
        CallableEmbedder()
    with pytest.raises(ConfigError, match="modality"):
        CallableEmbedder(texts=len, modality="audio")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="texts"):
        CallableEmbedder(texts="not callable")  # type: ignore[arg-type]


def test_load_embedder_wraps_callables_and_passes_embedders_through():
    fn = lambda x: np.ones((len(x), 2))  # noqa: E731
    e = load_embedder(fn)
    assert isinstance(e, CallableEmbedder) and embedder_modality(e) == "image"
    assert embedder_modality(load_embedder(fn, kind="caption")) == "text"
    assert load_embedder(e) is e
    with pytest.raises(ConfigError, match="kind"):
        load_embedder(fn, kind="audio")
    with pytest.raises(ConfigError, match="needs a model folder"):
        load_embedder(None, kind="clip")


def test_detect_kind_from_config(tmp_path):
    for model_type, kind in (("clip", "clip"), ("siglip", "siglip"), ("bert", "caption")):
        folder = tmp_path / model_type
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
        assert detect_kind(folder) == kind
    with pytest.raises(ConfigError, match=r"config\.json"):
        detect_kind(tmp_path)


def test_failed_embedder_and_soft_loading(tmp_path):
    e = FailedEmbedder("boom")
    assert e.status == "failed: boom" and is_failed(e)
    with pytest.raises(RuntimeError, match="boom"):
        e.embed_texts(["x"])
    empty = tmp_path / "empty"
    empty.mkdir()
    soft = load_embedder_soft(empty)  # a folder without config.json fails soft (issue 21)
    assert is_failed(soft) and "config.json" in soft.status
    with pytest.raises(ConfigError):  # bad arguments still raise
        load_embedder_soft(empty, kind="audio")


def test_unit_rows_keeps_zero_rows():
    out = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
