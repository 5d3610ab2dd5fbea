"""load_embedder / load_embedder_soft / detect_kind on bad input: a ConfigError naming it.

A missing folder (a name that no hub id can be), a ``model_name`` of the wrong type, a caption
model asked of a CLIP/SigLIP folder and a keyword the model's kind does not take used to raise
transformers' OSError, a TypeError or an AttributeError from inside transformers. The soft
loader fails soft only where the model cannot be had (the missing folder); the rest are
programming mistakes and raise there too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import detect_kind, is_failed, load_embedder, load_embedder_soft

MISSING = ["/nonexistent", "./no/such/model", "../nowhere", "~/no-such-model", "a/b/c", "a\\b"]


@pytest.mark.parametrize("name", MISSING)
@pytest.mark.parametrize("kind", ["auto", "clip", "caption"])
def test_a_missing_folder_is_a_config_error(name, kind):
    with pytest.raises(ConfigError, match="no such folder") as info:
        load_embedder(name, kind)
    assert info.value.key == "model_name" and info.value.value == name
    soft = load_embedder_soft(name, kind)  # an unavailable model: fails soft, as before
    assert is_failed(soft) and "no such folder" in soft.status


def test_a_missing_path_object_and_detect_kind(tmp_path):
    with pytest.raises(ConfigError, match="no such folder"):
        load_embedder(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="no such folder"):
        detect_kind(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="not expanded"):
        load_embedder("~/no-such-model")


def test_a_hub_id_still_goes_to_the_hub_loader(monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("gymcurric-test/definitely-not-cached", Path("gymcurric-test/not-cached")):
        with pytest.raises(OSError) as info:  # transformers' own: not cached here
            load_embedder(name)
        assert not isinstance(info.value, ConfigError)
        assert "Repo id must" not in str(info.value)


@pytest.mark.parametrize("bad", [42, 4.2, b"/models/clip", ["/models/clip"], ""])
def test_a_model_name_of_the_wrong_type_is_refused_soft_too(bad):
    for load in (load_embedder, load_embedder_soft):
        with pytest.raises(ConfigError, match="model_name") as info:
            load(bad)
        assert info.value.key == "model_name" and info.value.value == bad
        assert "callable" in info.value.reason


@pytest.mark.parametrize(
    ("keyword", "value"), [("preprocess", "hf"), ("graphs", True), ("text_max_length", 8)]
)
def test_clip_keywords_with_a_caption_model_are_refused(keyword, value):
    for load in (load_embedder, load_embedder_soft):
        for kind in ("auto", "caption"):
            with pytest.raises(ConfigError, match="CLIP/SigLIP models only") as info:
                load(None, kind, **{keyword: value})
            assert info.value.key == keyword and info.value.value == value


def test_an_unknown_keyword_is_refused():
    with pytest.raises(ConfigError, match="not a load_embedder keyword") as info:
        load_embedder(None, colour="red")
    assert info.value.key == "colour"


@pytest.mark.parametrize("vlm", ["clip", "siglip"])
def test_kind_caption_on_a_clip_or_siglip_folder(vlm):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.semantics.tiny_models import cached_tiny

    for load in (load_embedder, load_embedder_soft):
        with pytest.raises(ConfigError, match=f"holds a {vlm} model") as info:
            load(cached_tiny(vlm), "caption")
        assert info.value.key == "kind" and info.value.value == "caption"
    with pytest.raises(ConfigError, match="caption models only") as info:
        load_embedder(cached_tiny(vlm), max_length=16)
    assert info.value.key == "max_length"
