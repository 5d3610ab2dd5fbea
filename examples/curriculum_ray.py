"""Envs on Ray workers, one curriculum on a Ray actor: ``RayCurriculum`` + ``SampleCurriculumTask``.

The driver builds a :class:`~gymcurric.integrations.ray.RayCurriculum` (its state lives on a Ray
actor) and hands the same client to ``--workers`` rollout workers (Ray actors). Each worker owns
a ``SyncVectorEnv`` of ``gymcurric/HazardGrid-v0`` whose sub-envs are wrapped in
``SampleCurriculumTask``, exactly as in ``examples/curriculum_gymnasium_vector.py``: every reset
draws its task from the worker's local snapshot of the distribution (no Ray call), every finished
episode is buffered and sent to the actor in batches. The "agent" is a heuristic whose random
action rate decays over the run, so the curriculum has learning progress to follow. Every
round the driver prints the curriculum's stats (and, with ``--save``, writes a checkpoint that
a local ``Curriculum`` or another ``RayCurriculum`` can load).

    python examples/curriculum_ray.py                       # a local Ray cluster
    python examples/curriculum_ray.py --address auto        # an existing cluster
    python examples/curriculum_ray.py --save cur.npz
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import ray

import gymcurric  # noqa: F401  (registers gymcurric/HazardGrid-v0)
from gymcurric.integrations.ray import RayCurriculum
from gymcurric.tasks import BucketedTaskSpace, ReplacementPool, Span
from gymcurric.wrappers import save_curriculum_state


def heuristic(obs: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Step along the larger of the row/column gaps to the goal; random with probability eps."""
    d_row, d_col = obs[:, 2], obs[:, 3]  # (goal - agent) / (size - 1)
    along_rows = np.abs(d_row) >= np.abs(d_col)
    actions = np.where(along_rows, np.where(d_row > 0, 2, 0), np.where(d_col > 0, 1, 3))
    explore = rng.random(len(obs)) < eps
    return np.where(explore, rng.integers(0, 4, len(obs)), actions).astype(np.int64)


@ray.remote
class RolloutWorker:
    """A Ray actor that owns curriculum-wrapped envs and the shared ``RayCurriculum`` client."""

    def __init__(self, cur: RayCurriculum, num_envs: int, seed: int) -> None:
        # imported here so that the worker process registers the env ids
        from gymcurric.wrappers.vector import make_curriculum_vec

        self.cur = cur  # this worker's copy of the client: own buffer, own snapshot
        self.envs = make_curriculum_vec("gymcurric/HazardGrid-v0", cur, num_envs=num_envs)
        self.rng = np.random.default_rng(seed)
        self.obs, _ = self.envs.reset(seed=seed)  # also reseeds this copy's task stream

    def run(self, steps: int, eps: float) -> dict[str, Any]:
        """Step the envs; return how many episodes ended and their mean success."""
        episodes, successes = 0, 0.0
        for _ in range(steps):
            action = heuristic(self.obs, eps, self.rng)
            self.obs, _, term, trunc, info = self.envs.step(action)
            done = term | trunc
            episodes += int(done.sum())
            successes += float(np.sum(done & (info.get("is_success", np.zeros_like(done)))))
        return {"episodes": episodes, "success": successes / max(episodes, 1)}

    def close(self) -> None:
        """Close the envs: each SampleCurriculumTask flushes this worker's buffered episodes."""
        self.envs.close()


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="rollout workers (Ray actors)")
    parser.add_argument("--num-envs", type=int, default=4, help="envs per worker")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=500, help="vector steps per round")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: local)")
    parser.add_argument("--save", default=None, help="write the curriculum state here (.npz)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = not ray.is_initialized()
    if started:
        ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    space = BucketedTaskSpace(
        {"goal_distance": [Span(1, 3), Span(4, 6), Span(7, 10)], "num_hazards": [0, 4, 8, 12]},
        base={"size": 6, "max_steps": 14},
        seed=args.seed,
    )
    cur = RayCurriculum(space, pool=ReplacementPool(capacity=24), seed=args.seed)
    workers = [
        RolloutWorker.remote(cur, args.num_envs, args.seed + 1000 * i) for i in range(args.workers)
    ]
    try:
        for r in range(args.rounds):
            eps = max(0.05, 0.9 * (1.0 - r / max(args.rounds - 1, 1)))
            out = ray.get([w.run.remote(args.steps, eps) for w in workers])
            stats = cur.stats()
            print(
                f"round {r:2d} eps {eps:.2f} episodes {sum(o['episodes'] for o in out):5d} "
                f"success {np.mean([o['success'] for o in out]):.2f} | curriculum: updates "
                f"{stats['curriculum/updates']:.0f}, entropy {stats['curriculum/entropy']:.2f}, "
                f"gini(probs) {stats['curriculum/gini_probs']:.2f}"
            )
        ray.get([w.close.remote() for w in workers])
        stats = cur.stats()  # every episode is in now: the workers flushed when closing
        print(f"after closing the workers: {stats['curriculum/updates']:.0f} episodes reported")
        if args.save:
            print("saved", save_curriculum_state(args.save, cur))
        keys, probs = cur.probabilities()
        top = np.argsort(probs)[::-1][:3]
        for k in top:
            print(f"  p={probs[k]:.3f}  {cur.task(int(keys[k]))}")
        return stats
    finally:
        cur.close()
        if started:
            ray.shutdown()


if __name__ == "__main__":
    main()
