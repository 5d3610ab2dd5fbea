"""The specification's own examples and reference functions, verbatim where it gives them.

``compute_urgency`` (§2.2.2), ``filter_by_tag`` (§2.2.3) and ``filter_by_prerequisites`` (§3.4)
are copied from /work/shared/spec/datapack-sampler-spec.md (``get_max_novelty_score`` written
out as the max, 0 without tags), so the tests compare gymcurric with the document itself.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

# §4.4, the config file as printed (its comment line included)
SPEC_YAML = """\
stages:
  warmup:
    strategy: balanced
    strategy_params:
      tier_ratios: {0: 0.5, 1: 0.5, 2: 0.0}
      use_trust_weighting: true
    weight_multipliers:
      safety_critical: 2.0
      fragile_high: 0.5
      fragile_critical: 0.0
    filter_constraints:
      max_tier: 1
      exclude_tags: ["fragile_critical", "novel_affordance"]
      curriculum_stage: "early"
    transition_rule:
      type: rolling_error_rate
      threshold: 0.05
      window: 100
    fallback_episode: 1000

  skill_building:
    strategy: tag_aware
    strategy_params:
      tag_quotas:
        demonstrated_affordance: 0.3
        novel_affordance: 0.2
        efficiency_time: 0.2
        efficiency_energy: 0.1
        baseline: 0.2
    # ... (similar structure for other stages)
"""

# §2.2.3, the tag quotas in the comment of tag_aware_sample
SPEC_TAG_QUOTAS = {
    "safety_critical": 0.2,  # 20% safety-critical
    "fragile_objects": 0.15,  # 15% fragile objects
    "high_energy_cost": 0.1,  # 10% high-energy
    "novel_affordance": 0.15,  # 15% novel affordances
    "intervention": 0.1,  # 10% human interventions
    "baseline": 0.3,  # 30% unconstrained
}

# §3.4, the supervision hints (the "..." of the document left out)
SPEC_HINTS = {
    "curriculum_stage": "late",
    "prerequisite_tags": ["basic_drawer_open", "fragile_object_awareness"],
}


def get_max_novelty_score(tags: list[dict[str, Any]]) -> float:
    return max((t["novelty_score"] for t in tags), default=0.0)


def compute_urgency(ep: dict[str, Any]) -> float:  # §2.2.2
    tier_weight = {0: 0.2, 1: 0.5, 2: 1.0}[ep["tier"]]

    novelty = get_max_novelty_score(ep["enrichment"]["novelty_tags"])
    expected_mpl = sum(tag["expected_mpl_gain"] for tag in ep["enrichment"]["novelty_tags"])

    safety_boost = 1.5 if ep["enrichment"]["supervision_hints"]["safety_critical"] else 1.0

    urgency = (
        tier_weight * (0.5 + 0.3 * novelty + 0.2 * min(expected_mpl / 10.0, 1.0)) * safety_boost
    )

    return min(urgency, 1.0)  # Clip to [0, 1]


def filter_by_tag(episodes: list[dict[str, Any]], tag_key: str) -> list[dict[str, Any]]:  # §2.2.3
    if tag_key == "safety_critical":
        return [ep for ep in episodes if ep["enrichment"]["supervision_hints"]["safety_critical"]]

    elif tag_key == "fragile_objects":
        return [
            ep
            for ep in episodes
            if len(ep["enrichment"]["fragility_tags"]) > 0
            and any(
                tag["fragility_level"] in {"high", "critical"}
                for tag in ep["enrichment"]["fragility_tags"]
            )
        ]

    elif tag_key == "high_energy_cost":
        return [
            ep
            for ep in episodes
            if any(
                tag["metric"] == "energy" and tag["score"] < 0.5
                for tag in ep["enrichment"]["efficiency_tags"]
            )
        ]

    elif tag_key == "novel_affordance":
        return [
            ep
            for ep in episodes
            if any(not tag["demonstrated"] for tag in ep["enrichment"]["affordance_tags"])
        ]

    elif tag_key == "intervention":
        return [ep for ep in episodes if len(ep["enrichment"]["intervention_tags"]) > 0]

    else:
        return episodes  # Unknown tag → no filter


def filter_by_prerequisites(episodes, satisfied_prerequisites):  # §3.4
    filtered = []
    for ep in episodes:
        prereqs = ep["enrichment"]["supervision_hints"]["prerequisite_tags"]
        if all(prereq in satisfied_prerequisites for prereq in prereqs):
            filtered.append(ep)

    return filtered


def spec_record(pack_id: str, rng: np.random.Generator, **overrides: Any) -> dict[str, Any]:
    """A datapack in the specification's form (Stage 1 fields, Stage 2.4 enrichment), random."""
    n_nov = int(rng.integers(0, 3))
    levels = ["none", "low", "medium", "high", "critical"]
    enrichment = {
        "novelty_tags": [
            {
                "novelty_score": round(float(rng.random()), 3),
                "expected_mpl_gain": round(float(rng.uniform(0, 8)), 2),
                "source": "stage2.4",
            }
            for _ in range(n_nov)
        ],
        "fragility_tags": [
            {"object": "cup", "fragility_level": levels[int(rng.integers(0, 5))]}
            for _ in range(int(rng.integers(0, 3)))
        ],
        "efficiency_tags": [
            {
                "metric": ["energy", "time", "precision"][int(rng.integers(0, 3))],
                "score": round(float(rng.random()), 3),
            }
            for _ in range(int(rng.integers(0, 3)))
        ],
        "affordance_tags": [
            {"affordance": "grasp", "demonstrated": bool(rng.random() < 0.6)}
            for _ in range(int(rng.integers(0, 3)))
        ],
        "intervention_tags": [{"kind": "human_correction"}] * int(rng.integers(0, 2)),
        "risk_tags": [{"risk": "collision"}] * int(rng.integers(0, 2)),
        "coherence_score": 0.93,
        "validation_status": "validated",
        "supervision_hints": {
            "safety_critical": bool(rng.random() < 0.3),
            "curriculum_stage": ["early", "mid", "late"][int(rng.integers(0, 3))],
            "prerequisite_tags": [],
        },
    }
    rec: dict[str, Any] = {
        "pack_id": pack_id,
        "task_type": "dishwashing",
        "engine_type": "mujoco",
        "tier": int(rng.integers(0, 3)),
        "trust_score": round(float(rng.uniform(0.5, 1.0)), 3),
        "sampling_weight": round(float(rng.uniform(0.5, 2.0)), 3),
        "objective_vector": [1.0, 1.0, 0.5, 3.0, 0.0],
        "mpl_value": 12.5,
        "wage_parity": 0.8,
        "timestamp": "2025-11-17T12:34:56Z",
        "enrichment": enrichment,
    }
    rec.update(copy.deepcopy(overrides))
    return rec
