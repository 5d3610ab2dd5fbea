"""A random policy on gymcurric/HazardNav-v0 under the cost wrappers (what `make demo` runs).

Each episode runs a task chosen per reset through ``reset(options={"task": ...})``; the cost
wrappers put the step cost in ``info["cost"]`` and the episode cost in ``info["episode"]["c"]``
next to Gymnasium's return and length.

    python examples/random_cost_rollout.py [--episodes N] [--seed S]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import gymcurric  # noqa: F401  (registers the gymcurric/… ids)
from gymcurric.wrappers import AnnotateCost, RecordEpisodeStatisticsWithCost

TASKS = {
    "easy": {"goal_distance": 0.8, "num_hazards": 2, "hazard_placement": "random"},
    "medium": {"goal_distance": 1.5, "num_hazards": 8, "hazard_placement": "between"},
    "hard": {"goal_distance": 3.0, "num_hazards": 16, "hazard_placement": "between"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5, help="episodes per task")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    env = RecordEpisodeStatisticsWithCost(AnnotateCost(gym.make("gymcurric/HazardNav-v0")))
    env.action_space.seed(args.seed)
    print(f"{'task':<8}{'episode':>8}{'return':>9}{'cost':>7}{'length':>8}  success  last caption")
    for t, (name, task) in enumerate(TASKS.items()):
        for ep in range(args.episodes):
            seed = args.seed + 1000 * t + ep
            env.reset(seed=seed, options={"task": task})
            while True:
                _, _, terminated, truncated, info = env.step(env.action_space.sample())
                if terminated or truncated:
                    break
            stats = info["episode"]
            print(
                f"{name:<8}{ep:>8}{stats['r']:>9.3f}{stats['c']:>7.0f}{stats['l']:>8}"
                f"  {info['is_success']!s:<8} {info['caption']}"
            )
    costs = list(env.cost_queue)
    print(f"\n{len(costs)} episodes, mean episode cost {sum(costs) / len(costs):.1f}")
    env.close()


if __name__ == "__main__":
    main()
