"""Does the curriculum help? Steps to master the hardest tasks, five ways of choosing tasks.

The task family is the built-in ``gymcurric/HazardGrid-v0`` (a 20x20 grid, start-goal distance
and hazard count per task) with a sparse reward (1 for reaching the goal, nothing for getting
closer), so a far goal is rarely reached by chance. 27 fixed tasks in three buckets:

* ``easy``: goal distance 2-4, 0-4 hazards;
* ``medium``: goal distance 10-16, 8-20 hazards;
* ``hard``: goal distance 26-34, 30-60 hazards;

hazards are placed between start and goal, and an episode lasts at most 120 steps.

A PPO agent (Stable-Baselines3, 4 envs, the same hyperparameters everywhere) trains for the
same budget under each condition:

* ``uniform``: every task equally often;
* ``hardest``: only the hard bucket;
* ``lp``: learning progress (gymcurric's default scorer) over a replacement pool;
* ``lp_dual``: learning progress over a dual explore/exploit pool;
* ``manual``: a hand-written easy -> medium -> hard schedule (stage change at 80 % success
  or after a fixed number of episodes, earlier buckets still mixed in).

Every ``--eval-every`` steps the deterministic policy plays ``--eval-episodes`` fixed-seed
episodes of every hard task, and at the end of every task (the same episodes for every
condition and seed); the hard bucket's success rate decides "steps until >= 80 % success
on the hardest bucket". Reported per condition, over seeds: mean and 95 % confidence
interval (Student t) of those steps (a run that never gets there counts as the budget, and
the number that got there is shown), of the final success per bucket and of the training
episode cost.

    python benchmarks/curriculum_efficacy.py --steps 200000 --seeds 0 1 2 3 4 --workers 2 \
        --out runs/efficacy
    python benchmarks/curriculum_efficacy.py --quick     # a smoke run, well under a minute
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from _stats import ci95

CONDITIONS = ("uniform", "hardest", "lp", "lp_dual", "manual")
BUCKETS = {
    "easy": {"goal_distance": (2, 3, 4), "num_hazards": (0, 2, 4)},
    "medium": {"goal_distance": (10, 13, 16), "num_hazards": (8, 14, 20)},
    "hard": {"goal_distance": (26, 30, 34), "num_hazards": (30, 45, 60)},
}
BASE = {"size": 20, "max_steps": 120, "hazard_placement": "between"}
# sparse reward: only reaching the goal pays, so a far goal is rarely found by chance
ENV_KWARGS = {"reward_distance": 0.0, "reward_goal": 1.0}
THRESHOLD = 0.8


def tasks() -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """The 27 tasks and the ids of each bucket."""
    out: list[dict[str, Any]] = []
    ids: dict[str, list[int]] = {}
    for name, grid in BUCKETS.items():
        ids[name] = []
        for d in grid["goal_distance"]:
            for h in grid["num_hazards"]:
                ids[name].append(len(out))
                out.append({**BASE, "goal_distance": d, "num_hazards": h})
    return out, ids


def make_curriculum(condition: str, seed: int, episodes_per_stage: int) -> Any:
    """The curriculum of one condition."""
    from gymcurric.tasks import (
        Curriculum,
        DualPool,
        FixedTaskSpace,
        LearningProgressScorer,
        ReplacementPool,
        SequentialScorer,
        Stage,
        StopCondition,
        UniformScorer,
    )

    all_tasks, ids = tasks()
    if condition == "hardest":
        space = FixedTaskSpace([all_tasks[i] for i in ids["hard"]])
        return Curriculum(space, scorer=UniformScorer(), seed=seed)
    space = FixedTaskSpace(all_tasks)
    if condition == "uniform":
        return Curriculum(space, scorer=UniformScorer(), seed=seed)
    if condition == "lp":
        return Curriculum(space, scorer=LearningProgressScorer(), pool=ReplacementPool(), seed=seed)
    if condition == "lp_dual":
        return Curriculum(
            space,
            scorer=LearningProgressScorer(),
            pool=DualPool(explore_size=9, exploit_size=9, min_samples=5),
            seed=seed,
        )
    if condition == "manual":
        until = StopCondition(
            min_episodes=50, success_rate=THRESHOLD, max_episodes=episodes_per_stage, window=50
        )
        stages = [
            Stage(tuple(ids["easy"]), until),
            Stage(tuple(ids["medium"]), until),
            Stage(tuple(ids["hard"])),
        ]
        return Curriculum(space, scorer=SequentialScorer(stages, cumulative=True), seed=seed)
    raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")


def evaluate(
    model: Any, episodes: int, buckets: Sequence[str] = tuple(BUCKETS)
) -> dict[str, dict[str, float]]:
    """Deterministic policy, fixed seeds: success and cost per bucket."""
    import gymnasium as gym

    import gymcurric  # noqa: F401

    all_tasks, ids = tasks()
    env = gym.make("gymcurric/HazardGrid-v0", **ENV_KWARGS)
    out: dict[str, dict[str, float]] = {}
    for bucket in buckets:
        members = ids[bucket]
        succ, cost = [], []
        for tid in members:
            for ep in range(episodes):
                obs, _ = env.reset(seed=10_000 + 100 * tid + ep, options={"task": all_tasks[tid]})
                c, done, info = 0.0, False, {}
                while not done:
                    action, _ = model.predict(obs, deterministic=True)
                    obs, _, term, trunc, info = env.step(int(action))
                    c += info["cost"]
                    done = term or trunc
                succ.append(float(info["is_success"]))
                cost.append(c)
        out[bucket] = {"success": float(np.mean(succ)), "cost": float(np.mean(cost))}
    env.close()
    return out


def run_one(
    condition: str,
    seed: int,
    steps: int,
    eval_every: int,
    eval_episodes: int,
    episodes_per_stage: int,
) -> dict[str, Any]:
    """Train one (condition, seed); returns the evaluation history and training costs."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    import gymcurric  # noqa: F401
    from gymcurric.integrations.sb3 import VecCostMonitor
    from gymcurric.wrappers import SampleCurriculumTask

    torch.set_num_threads(1)
    cur = make_curriculum(condition, seed, episodes_per_stage)
    venv = VecCostMonitor(
        make_vec_env(
            "gymcurric/HazardGrid-v0",
            n_envs=4,
            seed=seed,
            env_kwargs=ENV_KWARGS,
            wrapper_class=SampleCurriculumTask,
            wrapper_kwargs={"curriculum": cur},
        )
    )
    history: list[dict[str, Any]] = []
    costs: list[float] = []

    class Eval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = 0

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    costs.append(float(info["episode"]["c"]))
            if self.num_timesteps >= self.next:
                self.next += eval_every
                history.append(
                    {
                        "steps": int(self.num_timesteps),  # the hard bucket only
                        **evaluate(self.model, eval_episodes, ("hard",)),
                    }
                )
            return True

    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=256,
        batch_size=256,
        n_epochs=5,
        learning_rate=5e-4,
        ent_coef=0.01,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(steps, callback=Eval())
    history.append({"steps": int(model.num_timesteps), **evaluate(model, eval_episodes)})
    venv.close()
    cur.close()
    reached = next((h["steps"] for h in history if h["hard"]["success"] >= THRESHOLD), None)
    return {
        "condition": condition,
        "seed": seed,
        "steps": steps,
        "seconds": time.perf_counter() - start,
        "history": history,
        "steps_to_threshold": reached,
        "final": history[-1],
        "train_episode_cost": float(np.mean(costs)) if costs else math.nan,
        "train_episodes": len(costs),
    }


def summarise(results: list[dict[str, Any]], steps: int) -> str:
    """The table printed and written into BENCHMARKS.md."""
    lines = [
        "| condition | runs | reached 80 % on hard | steps to 80 % on hard (budget if never) "
        "| final success easy / medium / hard | train episode cost |",
        "|---|---|---|---|---|---|",
    ]
    for cond in CONDITIONS:
        rs = [r for r in results if r["condition"] == cond]
        if not rs:
            continue
        to = [r["steps_to_threshold"] if r["steps_to_threshold"] is not None else steps for r in rs]
        m, h = ci95(to)
        fin = []
        for b in BUCKETS:
            fm, fh = ci95([r["final"][b]["success"] for r in rs])
            fin.append(f"{fm:.2f} ± {fh:.2f}")
        cm, chh = ci95([r["train_episode_cost"] for r in rs])
        reached = sum(r["steps_to_threshold"] is not None for r in rs)
        lines.append(
            f"| {cond} | {len(rs)} | {reached}/{len(rs)} | {m:,.0f} ± {h:,.0f} | "
            f"{' / '.join(fin)} | {cm:.2f} ± {chh:.2f} |"
        )
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Hard-bucket success against steps, mean and 95 % CI band per condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for cond in CONDITIONS:
        rs = [r for r in results if r["condition"] == cond]
        if not rs:
            continue
        n = min(len(r["history"]) for r in rs)
        x = np.array([rs[0]["history"][i]["steps"] for i in range(n)])
        ys = np.array([[r["history"][i]["hard"]["success"] for i in range(n)] for r in rs])
        stats_ = [ci95(ys[:, i]) for i in range(n)]
        mean = np.array([s[0] for s in stats_])
        half = np.array([s[1] for s in stats_])
        ax.plot(x, mean, lw=2, label=f"{cond} (n={len(rs)})")
        ax.fill_between(x, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1), alpha=0.15)
    ax.axhline(THRESHOLD, color="black", ls="--", lw=1, label="80 % threshold")
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate on the hard bucket (deterministic policy)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("HazardGrid: hard-bucket success by task-selection method (mean ± 95 % CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study; print and write the table, the JSON results and the plot."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200_000, help="training budget per run")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    p.add_argument("--eval-every", type=int, default=10_000)
    p.add_argument("--eval-episodes", type=int, default=4, help="per task (9 tasks a bucket)")
    p.add_argument(
        "--episodes-per-stage",
        type=int,
        default=600,
        help="manual schedule: most episodes in the easy and medium stages",
    )
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    p.add_argument("--out", default="runs/curriculum_efficacy")
    p.add_argument("--quick", action="store_true", help="tiny budget, 1 seed: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.eval_episodes = [0], 1
        args.steps, args.eval_every = min(args.steps, 2048), min(args.eval_every, 1024)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(c, s) for s in args.seeds for c in args.conditions]
    start = time.perf_counter()
    results: list[dict[str, Any]] = []

    def report(r: dict[str, Any]) -> None:
        results.append(r)
        print(
            f"{r['condition']:>8} seed {r['seed']}: steps to 80 % on hard "
            f"{r['steps_to_threshold']}, final hard success "
            f"{r['final']['hard']['success']:.2f} ({r['seconds']:.0f} s)",
            flush=True,
        )

    extra = (args.steps, args.eval_every, args.eval_episodes, args.episodes_per_stage)
    if args.workers == 1:
        for c, s in jobs:
            report(run_one(c, s, *extra))
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            for f in [pool.submit(run_one, c, s, *extra) for c, s in jobs]:
                report(f.result())
    table = summarise(results, args.steps)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "table.md").write_text(table + "\n")
    plot(results, out / "hard_success.png")
    print(f"\n{len(jobs)} runs, {args.steps} steps each, in {time.perf_counter() - start:.0f} s")
    print(table)
    print(f"\nwritten: {out / 'results.json'}, {out / 'table.md'}, {out / 'hard_success.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
