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
    stack_frames,
    unit_rows,
)
from gymcurric.semantics.embedders import (
    CallableEmbedder,
    detect_kind,
    load_embedder,
    load_embedder_soft,
)
from gymcurric.semantics.shaper import (
    HAZARD_NAV_SAFE_PROMPTS,
    HAZARD_NAV_UNSAFE_PROMPTS,
    Shaper,
    ShapingConfig,
    build_shaper,
    is_oom_error,
)
from gymcurric.semantics.walk import ProbeWalk, probe_states_from_walk

__all__ = [
    "Embedder",
    "FailedEmbedder",
    "Modality",
    "embedder_modality",
    "is_failed",
    "stack_frames",
    "unit_rows",
    "CallableEmbedder",
    "detect_kind",
    "load_embedder",
    "load_embedder_soft",
    "HAZARD_NAV_SAFE_PROMPTS",
    "HAZARD_NAV_UNSAFE_PROMPTS",
    "Shaper",
    "ShapingConfig",
    "build_shaper",
    "is_oom_error",
    "ProbeWalk",
    "probe_states_from_walk",
]
