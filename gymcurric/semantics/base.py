"""The one interface every embedder implements (no torch needed to import this module).

The shaper, the risk head and the probe only ever see this protocol, so a HuggingFace CLIP or
SigLIP model, a sentence-embedding model over captions and a user callable are interchangeable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Maps frames and/or texts to unit-norm float32 vectors on the host.

    Attributes:
        dim: the embedding size ``d``.
        status: a short human-readable string saying what was loaded and how
            (e.g. ``"ok: clip /path dtype=bfloat16 device=cpu"``, or ``"failed: ..."``).
    """

    dim: int
    status: str

    def embed_images(self, frames: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """Embed ``n`` RGB frames (``uint8``, ``(n, H, W, 3)`` or a list of ``(H, W, 3)``).

        Returns:
            ``(n, dim)`` float32, each row of unit L2 norm.
        """
        ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``n`` strings (prompts or captions).

        Returns:
            ``(n, dim)`` float32, each row of unit L2 norm.
        """
        ...


def unit_rows(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Return ``x`` as float32 with every row scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, eps)


__all__ = ["Embedder", "unit_rows"]
