"""Helpers building datapack dicts for the tests."""

from __future__ import annotations

import copy
from typing import Any


def record(pack_id: str = "p0", **overrides: Any) -> dict[str, Any]:
    """A valid, fully specified datapack dict; ``overrides`` replace top-level keys."""
    base: dict[str, Any] = {
        "pack_id": pack_id,
        "task_type": "pick_place",
        "env_id": "gymcurric/HazardNav-v0",
        "tier": 1,
        "task_params": {"hazard_radius": 0.3, "goals": [1, 2]},
        "seed": 7,
        "trust_score": 0.9,
        "sampling_weight": 2.0,
        "objective_vector": [1.0, 0.25],
        "mpl_gain": 4.0,
        "timestamp": "2026-11-01T12:00:00Z",
        "enrichment": {
            "fragility": "high",
            "risk": 0.4,
            "affordances": [{"name": "grasp", "demonstrated": False}],
            "efficiency": {"time": 0.8, "energy": 0.3},
            "novelty": 0.7,
            "interventions": 2,
        },
        "supervision_hints": {
            "safety_critical": True,
            "curriculum_stage": "frontier",
            "prerequisite_tags": ["reach"],
        },
    }
    base.update(copy.deepcopy(overrides))
    return base


def minimal(pack_id: str, tier: int, **overrides: Any) -> dict[str, Any]:
    """A record with only the required fields (plus ``overrides``)."""
    out: dict[str, Any] = {"pack_id": pack_id, "task_type": "reach", "env_id": "E-v0", "tier": tier}
    out.update(copy.deepcopy(overrides))
    return out
