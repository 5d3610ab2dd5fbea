"""Env speed for issue 2: the built-in envs, and Safety-Gymnasium raw vs loader + cost wrappers.

Run:  .venv/bin/python benchmarks/env_speed.py [--quick] [--json PATH]

Three parts, in one run:

1. Built-in envs (``gymcurric/HazardNav-v0``, ``gymcurric/HazardGrid-v0``): steps/s of the raw
   env, through ``gym.make``, with rendering (from ``builtin_env_speed.measure``), and through
   ``gym.make`` under the cost wrappers (``RecordEpisodeStatisticsWithCost(AnnotateCost(...))``).
2. ``SafetyPointGoal1-v0`` raw (safety-gymnasium's own env) vs ``gym.make("gymcurric/…")`` vs
   that under the cost wrappers, interleaved, same seed and actions (``safety_env_speed``).
3. The goal check: loader + cost wrapper overhead ≤ 3 % of a raw step. End-to-end ratios on a
   shared 2-core machine move by ±10 % between runs, far more than the overhead, so the check
   uses the per-step cost of the wrapper stack measured with the physics stubbed out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import builtin_env_speed

import gymcurric
from gymcurric.wrappers import AnnotateCost, RecordEpisodeStatisticsWithCost

GOAL_OVERHEAD = 0.03


def builtin_with_cost(steps: int, repeats: int, seed: int = 0) -> dict[str, float]:
    """Steps/s of each built-in env through ``gym.make`` under the cost wrappers (best of runs)."""
    out = {}
    for env_id in builtin_env_speed.ENV_IDS:
        env = RecordEpisodeStatisticsWithCost(AnnotateCost(gym.make(env_id)))
        env.action_space.seed(seed)
        actions = [env.action_space.sample() for _ in range(steps)]
        out[env_id] = max(
            builtin_env_speed._time_steps(env, actions, False, seed) for _ in range(repeats)
        )
        env.close()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-safety", action="store_true", help="skip Safety-Gymnasium")
    args = parser.parse_args(argv)
    steps, repeats = (2_000, 2) if args.quick else (50_000, 3)

    print(f"gymcurric {gymcurric.__version__}, gymnasium {gym.__version__}, numpy {np.__version__}")
    builtin = builtin_env_speed.measure(steps, repeats=repeats)
    costed = builtin_with_cost(steps, repeats)
    print(f"\nBuilt-in envs, steps/s (best of {repeats} x {steps:,} steps):")
    header = "".join(f"{m:>13}" for m in (*builtin_env_speed.MODES, "make+cost"))
    print(f"  {'env':<26}{header}")
    for env_id, row in builtin.items():
        cells = "".join(f"{row[m]:>13,.0f}" for m in builtin_env_speed.MODES)
        print(f"  {env_id:<26}{cells}{costed[env_id]:>13,.0f}")
    results: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "builtin": {k: {**v, "make+cost": costed[k]} for k, v in builtin.items()},
    }

    if not args.no_safety:
        try:
            import safety_env_speed
        except ImportError as exc:  # the safety extra is not installed
            print(f"\nSafety-Gymnasium skipped: {exc}")
        else:
            sg = safety_env_speed.measure(
                steps=300 if args.quick else 900, repeats=2 if args.quick else 7
            )
            results["safety"] = sg
            raw_us = 1e6 / sg["raw"]
            share = sg["cost_wrapper_us_per_step"] / raw_us
            print(f"\n{sg['env_id']} steps/s (median of interleaved runs; resets not timed):")
            for name in safety_env_speed.VARIANTS:
                print(f"  {name:<5}{sg[name]:>10,.0f}")
            print(
                f"  end-to-end ratio raw/(loader+cost) = {sg['cost_overhead_ratio']:.3f} "
                f"(noise on a shared machine is about ±10 %)"
            )
            print(
                f"  loader + cost wrappers alone: {sg['cost_wrapper_us_per_step']:.2f} us/step "
                f"= {share:.2%} of a raw step (goal <= {GOAL_OVERHEAD:.0%}: "
                f"{'met' if share <= GOAL_OVERHEAD else 'NOT met'})"
            )
            results["safety_overhead_share"] = share
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
