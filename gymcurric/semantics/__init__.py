"""Semantic reward shaping: embedders, the shaper (torch-free to import).

The embedders that need torch/transformers (:mod:`gymcurric.semantics.hf`,
:mod:`gymcurric.semantics.caption`) are imported only when :func:`load_embedder` builds one.
"""

from gymcurric.semantics.base import (
    Embedder,
    FailedEmbedder,
    Modality,
    embedder_modality,
    is_failed,
    unit_rows,
)
from gymcurric.semantics.embedders import CallableEmbedder, detect_kind, load_embedder

__all__ = [
    "Embedder",
    "FailedEmbedder",
    "Modality",
    "embedder_modality",
    "is_failed",
    "unit_rows",
    "CallableEmbedder",
    "detect_kind",
    "load_embedder",
]
