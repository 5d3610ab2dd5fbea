"""The one interface every embedder implements (no torch needed to import this module).

The shaper, the risk head and the probe only ever see this protocol, so a HuggingFace CLIP or
SigLIP model, a sentence-embedding model over captions and a user callable are interchangeable.

Besides the protocol this module holds the torch-free helpers every embedder shares:
:func:`unit_rows`, :func:`embedder_modality` (does an embedder read frames or captions?) and
:class:`FailedEmbedder`, the stand-in a fail-soft wrapper uses when a model could not be loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

Modality = Literal["image", "text"]


@runtime_checkable
class Embedder(Protocol):
    """Maps frames and/or texts to unit-norm float32 vectors on the host.

    Attributes:
        dim: the embedding size ``d``.
        status: a short human-readable string saying what was loaded and how
            (e.g. ``"ok: clip /path dtype=bfloat16 device=cpu"``, or ``"failed: ..."``).

    Embedders may also define ``modality`` (``"image"``: states are embedded from rendered
    frames; ``"text"``: from captions, ``info["caption"]`` or ``env.describe()``); see
    :func:`embedder_modality`. It is not part of the protocol, so older embedders still match.
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
    if x.ndim == 2:  # the usual (n, d) case without np.linalg.norm's generic dispatch
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    else:
        norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, eps)


def stack_frames(frames: Any) -> Any:
    """Frames as one ``(n, H, W, C)`` array when they share a shape, else as a list."""
    if isinstance(frames, np.ndarray):
        return frames
    frames = list(frames)
    try:
        return np.stack(frames)
    except ValueError:  # frames of different sizes stay a list
        return frames


def embedder_modality(embedder: object) -> Modality:
    """What an embedder embeds states from: ``"image"`` (frames, the default) or ``"text"``."""
    modality = getattr(embedder, "modality", "image")
    return "text" if modality == "text" else "image"


def is_failed(embedder: object) -> bool:
    """Whether an embedder reports a failed load (its ``status`` starts with ``"failed"``)."""
    return str(getattr(embedder, "status", "")).startswith("failed")


class FailedEmbedder:
    """An embedder that could not be built: every call raises, ``status`` says why.

    Fail-soft wrappers hold one of these instead of raising at construction, so that training
    goes on without shaping while the status (and a one-time warning) tell the user. Its
    ``modality`` is the one the requested model would have had (``"text"`` for a caption model,
    ``"image"`` for CLIP/SigLIP, ``None`` when the folder could not tell), so that a caption env
    without ``render_mode`` is not mistaken for a frame source.

    Examples:
        >>> e = FailedEmbedder("failed: load '/nowhere': not a directory")
        >>> e.status.startswith("failed"), e.dim
        (True, 0)
    """

    dim = 0

    def __init__(self, status: str, modality: Modality | None = None) -> None:
        self.status = status if status.startswith("failed") else f"failed: {status}"
        #: what the model that failed would have embedded (``None``: unknown); fail-soft
        #: wrappers take the state source from it, or from the env when unknown
        self.modality: Modality | None = modality

    def embed_images(self, frames: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """Raise: there is no model."""
        raise RuntimeError(self.status)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Raise: there is no model."""
        raise RuntimeError(self.status)


def is_oom_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA (or other accelerator) out-of-memory error."""
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def empty_cuda_cache() -> None:
    """Release cached CUDA memory if torch is loaded and CUDA is available (else nothing)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


__all__ = [
    "Embedder",
    "FailedEmbedder",
    "Modality",
    "embedder_modality",
    "empty_cuda_cache",
    "is_failed",
    "is_oom_error",
    "stack_frames",
    "unit_rows",
]
