"""PPO (Stable-Baselines3) on a family of HazardGrid tasks chosen by a learning-progress curriculum.

Tasks vary the start-goal distance and the number of hazards. Every sub-env is wrapped in
``SampleCurriculumTask``: it picks its next task inside each (auto-)reset and reports the episode's
return, success and cost when it ends; nothing in PPO changes. The curriculum lives in shared
memory, so the SubprocVecEnv workers all sample from and update one state; ``--dummy`` runs the
envs in this process instead. ``CurriculumCallback`` logs ``curriculum/*`` next to SB3's values
and, with ``--save-dir``, saves the curriculum state next to each model checkpoint.

    python examples/curriculum_sb3.py                    # 30k steps, well under a minute
    python examples/curriculum_sb3.py --steps 200000 --save-dir runs/grid
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import gymcurric  # noqa: F401  (registers gymcurric/HazardGrid-v0)
from gymcurric.tasks import BucketedTaskSpace, Curriculum, DualPool, Span
from gymcurric.wrappers import SampleCurriculumTask


def main() -> None:
    # SubprocVecEnv workers re-import this file (forkserver/spawn): importing SB3 (and so
    # torch) here rather than at the top keeps their start-up to gymcurric + gymnasium.
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from gymcurric.integrations.sb3 import (
        CurriculumCallback,
        EpisodeCostCallback,
        VecCostMonitor,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30_000, help="total env steps")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--dummy", action="store_true", help="DummyVecEnv, one process")
    parser.add_argument("--save-dir", default=None, help="save model + curriculum here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    space = BucketedTaskSpace(
        {
            "goal_distance": [Span(1, 3), Span(4, 7), Span(8, 12)],
            "num_hazards": [0, 5, 10],
            "slip_prob": [0.0, 0.2],
        },
        base={"size": 8, "max_steps": 40},
        seed=args.seed,
    )
    pool = DualPool(explore_size=8, exploit_size=8, min_samples=10)
    backend = {} if args.dummy else {"backend": "shared"}
    cur = Curriculum(space, pool=pool, seed=args.seed, **backend)
    venv = VecCostMonitor(
        make_vec_env(
            "gymcurric/HazardGrid-v0",
            n_envs=args.num_envs,
            seed=args.seed,
            vec_env_cls=DummyVecEnv if args.dummy else SubprocVecEnv,
            wrapper_class=SampleCurriculumTask,
            wrapper_kwargs={"curriculum": cur},
        )
    )
    callbacks = [CurriculumCallback(cur), EpisodeCostCallback()]
    if args.save_dir:
        freq = max(args.steps // (5 * args.num_envs), 1)  # five checkpoints per run
        callbacks += [
            CheckpointCallback(freq, args.save_dir),
            CurriculumCallback(cur, save_path=args.save_dir, save_freq=freq),
        ]
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=256, seed=args.seed, device="cpu")
    start = time.perf_counter()
    model.learn(args.steps, callback=callbacks)
    elapsed = time.perf_counter() - start
    venv.close()

    success = np.mean(model.ep_success_buffer) if model.ep_success_buffer else float("nan")
    print(
        f"{args.steps} steps in {elapsed:.1f} s; success rate of the last 100 episodes: "
        f"{success:.2f}"
    )
    for key, value in sorted(cur.stats().items()):
        print(f"{key:32s} {value:.4g}")
    cur.close()


if __name__ == "__main__":
    main()
