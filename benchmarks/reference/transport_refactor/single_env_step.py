"""Single env with ``SampleCurriculumTask``: env steps/s as a share of the bare env (paired).

HazardGrid (7x7) and the same env wrapped on a process-local curriculum of 8 tasks, 20,000
random-action steps each, 7 repeats; prints each repeat's ratio and the median. Used in
``README.md`` to compare the wrapper's per-step cost across two checkouts (switch
``PYTHONPATH``):

    python benchmarks/reference/transport_refactor/single_env_step.py
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import SampleCurriculumTask


def steps_per_second(env: gym.Env[Any, Any], n: int) -> float:
    """Random-action env steps per second over ``n`` steps (resets included)."""
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(n)]
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return n / (time.perf_counter() - start)


def main() -> None:
    space = FixedTaskSpace([{"num_hazards": k, "size": 7} for k in range(8)])
    ratios = []
    for repeat in range(7):
        plain = gym.make("gymcurric/HazardGrid-v0", size=7)
        wrapped = SampleCurriculumTask(
            gym.make("gymcurric/HazardGrid-v0", size=7), Curriculum(space, seed=repeat)
        )
        ratios.append(steps_per_second(wrapped, 20_000) / steps_per_second(plain, 20_000))
    print("wrapped/plain steps/s per repeat:", " ".join(f"{r:.3f}" for r in ratios))
    print(f"median {np.median(ratios):.3f}")


if __name__ == "__main__":
    main()
