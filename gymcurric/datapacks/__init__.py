"""Datapacks: typed records, loading, vectorised sampling strategies, a staged curriculum.

Records and curriculum configs are read in gymcurric's formats and in the datapack-sampler
specification's (Stage 1 datapacks with Stage 2.4 enrichments; stages mapped by name).

Core layer (numpy + gymnasium only). Records are immutable; strategies only choose rows of a
:class:`DatapackTable` and never change a datapack, its rewards, objective vector or economics.
"""

from __future__ import annotations

from gymcurric.datapacks.curriculum import DataPackCurriculum
from gymcurric.datapacks.loading import (
    EPISODE_KEYS,
    iter_datapack_file,
    iter_episodes,
    load_datapacks,
    load_episode,
    validate_datapacks,
)
from gymcurric.datapacks.merge import read_enrichments
from gymcurric.datapacks.sampler import LOG_FILENAME, DataPackRLSampler
from gymcurric.datapacks.schedule import (
    CONVENTIONS,
    METRICS,
    CurriculumSchedule,
    DataPackCurriculumConfig,
    FilterConstraints,
    StageSpec,
    TransitionRule,
    load_curriculum_config,
)
from gymcurric.datapacks.schema import (
    FRAGILITY_LEVELS,
    TIERS,
    Affordance,
    DataPack,
    Enrichment,
    SupervisionHints,
)
from gymcurric.datapacks.strategies import (
    STRATEGIES,
    BalancedStrategy,
    FrontierPrioritizedStrategy,
    SamplingStrategy,
    TagAwareStrategy,
    make_strategy,
)
from gymcurric.datapacks.table import STRATIFY_KEYS, TAG_FAMILIES, TAG_KINDS, DatapackTable

__all__ = [
    # records
    "Affordance",
    "DataPack",
    "Enrichment",
    "FRAGILITY_LEVELS",
    "SupervisionHints",
    "TIERS",
    # loading
    "EPISODE_KEYS",
    "iter_datapack_file",
    "iter_episodes",
    "load_datapacks",
    "load_episode",
    "validate_datapacks",
    "read_enrichments",
    # precomputed arrays
    "DatapackTable",
    "STRATIFY_KEYS",
    "TAG_FAMILIES",
    "TAG_KINDS",
    # strategies
    "BalancedStrategy",
    "FrontierPrioritizedStrategy",
    "SamplingStrategy",
    "STRATEGIES",
    "TagAwareStrategy",
    "make_strategy",
    # staged curriculum
    "CONVENTIONS",
    "CurriculumSchedule",
    "DataPackCurriculum",
    "DataPackCurriculumConfig",
    "FilterConstraints",
    "METRICS",
    "StageSpec",
    "TransitionRule",
    "load_curriculum_config",
    # sampler
    "DataPackRLSampler",
    "LOG_FILENAME",
]
