"""Integer arguments of the semantic layer refuse bools (``True`` is an ``int`` subclass)."""

from __future__ import annotations

import pytest

from gymcurric.errors import ConfigError
from gymcurric.semantics import CallableEmbedder, Shaper, ShapingConfig

from .stubs import caption_embedder, embed_texts


@pytest.mark.parametrize("bad", [True, 0, -3, 2.0, "8"])
def test_callable_embedder_dim_must_be_a_positive_int(bad):
    with pytest.raises(ConfigError, match=r"'dim': .*must be a positive int or None"):
        CallableEmbedder(texts=embed_texts, dim=bad)
    assert CallableEmbedder(texts=embed_texts, dim=8).dim == 8


@pytest.mark.parametrize("bad", [True, False, 0, 1.5])
def test_shaper_num_envs_must_be_an_int_of_at_least_one(bad):
    with pytest.raises(ConfigError, match=r"Shaper: invalid value for 'num_envs'"):
        Shaper(ShapingConfig(), caption_embedder(), num_envs=bad)
    assert Shaper(ShapingConfig(), caption_embedder(), num_envs=3).num_envs == 3


@pytest.mark.parametrize("bad", [True, 0, 64.0])
def test_caption_embedder_max_length_must_be_a_positive_int(bad):
    pytest.importorskip("transformers")
    from gymcurric.semantics.caption import CaptionEmbedder

    # checked before any model is looked up, so no model is needed to see the error
    with pytest.raises(ConfigError, match=r"'max_length': .*must be a positive int"):
        CaptionEmbedder("/nonexistent/model", max_length=bad)
