"""A hand-written loop on a Gymnasium vector env whose episodes are picked by a curriculum.

Each sub-env of ``gymcurric/HazardGrid-v0`` is wrapped in ``SampleCurriculumTask``: at every
autoreset it draws its next task (goal distance x hazard count) from the learning-progress
curriculum and reports the episode's return, success and cost back when it ends. The "agent" is a
heuristic that walks towards the goal and whose skill grows during the run (its random-action
rate decays), so the curriculum has learning progress to follow.

    python examples/curriculum_gymnasium_vector.py                 # SyncVectorEnv
    python examples/curriculum_gymnasium_vector.py --async         # AsyncVectorEnv, shared memory
    python examples/curriculum_gymnasium_vector.py --save cur.npz  # checkpoint the curriculum
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

import gymcurric  # noqa: F401  (registers gymcurric/HazardGrid-v0)
from gymcurric.tasks import BucketedTaskSpace, Curriculum, ReplacementPool, Span
from gymcurric.wrappers import save_curriculum_state
from gymcurric.wrappers.vector import make_curriculum_vec


def heuristic(obs: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Step along the larger of the row/column gaps to the goal; random with probability eps."""
    d_row, d_col = obs[:, 2], obs[:, 3]  # (goal - agent) / (size - 1)
    along_rows = np.abs(d_row) >= np.abs(d_col)
    actions = np.where(along_rows, np.where(d_row > 0, 2, 0), np.where(d_col > 0, 1, 3))
    explore = rng.random(len(obs)) < eps
    return np.where(explore, rng.integers(0, 4, len(obs)), actions).astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="vector steps")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument(
        "--async",
        dest="use_async",
        action="store_true",
        help="AsyncVectorEnv (the curriculum then lives in shared memory)",
    )
    parser.add_argument("--save", default=None, help="write the curriculum state here (.npz)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    space = BucketedTaskSpace(
        {"goal_distance": [Span(1, 3), Span(4, 6), Span(7, 10)], "num_hazards": [0, 4, 8, 12]},
        base={"size": 6, "max_steps": 14},
        seed=args.seed,
    )
    kwargs = {"backend": "shared"} if args.use_async else {}
    cur = Curriculum(space, pool=ReplacementPool(capacity=24), seed=args.seed, **kwargs)
    envs = make_curriculum_vec(
        "gymcurric/HazardGrid-v0",
        cur,
        num_envs=args.num_envs,
        vectorization_mode="async" if args.use_async else "sync",
    )
    rng = np.random.default_rng(args.seed)
    obs, _ = envs.reset(seed=args.seed)
    outcomes: dict[tuple[int, int], list[bool]] = defaultdict(list)
    for t in range(args.steps):
        eps = max(0.1, 1.0 - t / (0.7 * args.steps))  # the agent gets better over time
        obs, _, terminated, truncated, info = envs.step(heuristic(obs, eps, rng))
        for i in np.flatnonzero(terminated | truncated):  # the episode of envs.task_ids[i] ended
            task = cur.task(int(envs.task_ids[i]))
            bucket = (min(task["goal_distance"] // 4, 2), task["num_hazards"])
            outcomes[bucket].append(bool(info["is_success"][i]))
    if args.save:
        print("saved", save_curriculum_state(args.save, cur, env=envs))
    envs.close()

    print("(goal-distance bucket, hazards): episodes, success rate of the first/last 100")
    for bucket in sorted(outcomes):
        runs = outcomes[bucket]
        first, last = np.mean(runs[:100]), np.mean(runs[-100:])
        print(f"  {bucket}: {len(runs):5d} episodes, success {first:.2f} -> {last:.2f}")
    for key, value in sorted(cur.stats().items()):
        print(f"{key:32s} {value:.4g}")
    cur.close()


if __name__ == "__main__":
    main()
