"""A hand-made, complete ``semantic_safety`` record, for the summary's tests (no training)."""

from __future__ import annotations

from typing import Any

from tests.benchmarks import load_script


def toy_record(
    env: str,
    condition: str,
    prompts: str,
    seed: int,
    *,
    episodes: dict[str, list[Any]],
    rows: list[dict[str, Any]],
    cum_cost: float,
    limit: float = 1.0,
    env_id: str | None = None,
) -> dict[str, Any]:
    """A complete record, budget 100, with its ``metrics``: only what the summary reads."""
    r: dict[str, Any] = {
        "env": env,
        "condition": condition,
        "prompts": prompts,
        "seed": seed,
        "complete": True,
        "config": {
            "env_id": env_id or f"{env}-v0",
            "budget": 100,
            "lagrangian": {"cost_limit": limit},
        },
        "episodes": episodes,
        "rows": rows,
        "cum_cost": cum_cost,
        "violation_steps": cum_cost,
        "trained_steps": 100,
        "cpu_seconds": 1.0,
        "risk_quality": None,
        "commit": "0123456789",
        "gymcurric_modified": False,
        "load_average_start": 1.0,
    }
    r["metrics"] = load_script("_semantic_metrics").run_metrics(r)
    return r
