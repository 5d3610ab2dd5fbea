"""Steps per second of the built-in envs (HazardNav, HazardGrid), raw and through ``gym.make``.

Run:  .venv/bin/python benchmarks/builtin_env_speed.py --steps 50000

Four figures per env: the raw env (``env.unwrapped``) and the ``gym.make`` stack (Gymnasium's
PassiveEnvChecker + OrderEnforcing), each stepping only and stepping + ``render()`` every step
(64x64 rgb_array). Actions are sampled beforehand so only the env is timed; episodes that end are
reset inside the timed loop, as in training. Each figure is the best of ``--repeats`` runs, which
damps noise from other processes on a shared machine.

Other benchmarks import :func:`measure` and get the numbers as a dict.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

import gymcurric  # noqa: F401  (registers the gymcurric/... ids)

ENV_IDS = ("gymcurric/HazardNav-v0", "gymcurric/HazardGrid-v0")
MODES = ("raw", "make", "raw+render", "make+render")


def _time_steps(env: gym.Env[Any, Any], actions: list[Any], render: bool, seed: int) -> float:
    env.reset(seed=seed)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if render:
            env.render()
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - start)


def measure(
    steps: int = 20_000, *, repeats: int = 3, seed: int = 0, env_ids: tuple[str, ...] = ENV_IDS
) -> dict[str, dict[str, float]]:
    """Steps per second for each env id and mode in :data:`MODES` (best of ``repeats``).

    Returns:
        ``{env_id: {"raw": ..., "make": ..., "raw+render": ..., "make+render": ...}}``.
    """
    results: dict[str, dict[str, float]] = {}
    for env_id in env_ids:
        made = gym.make(env_id, render_mode="rgb_array")
        made.action_space.seed(seed)
        actions = [made.action_space.sample() for _ in range(steps)]
        row: dict[str, float] = {}
        for mode in MODES:
            env = made.unwrapped if mode.startswith("raw") else made
            render = mode.endswith("+render")
            row[mode] = max(_time_steps(env, actions, render, seed) for _ in range(repeats))
        made.close()
        results[env_id] = row
    return results


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (best)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = measure(args.steps, repeats=args.repeats, seed=args.seed)
    print(
        f"steps/s, best of {args.repeats} x {args.steps} steps, numpy {np.__version__}, "
        f"gymnasium {gym.__version__}"
    )
    print(f"{'env':28s}" + "".join(f"{mode:>14s}" for mode in MODES))
    for env_id, row in results.items():
        print(f"{env_id:28s}" + "".join(f"{row[mode]:14,.0f}" for mode in MODES))
    return results


if __name__ == "__main__":
    main()
