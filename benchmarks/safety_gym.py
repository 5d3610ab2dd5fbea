"""Safe-RL baselines on Safety-Gymnasium tasks, next to OmniSafe's published figures.

Run (smoke scale; the full run is in BENCHMARKS.md):

    .venv/bin/python benchmarks/safety_gym.py --algos ppo ppolag pidlag trpolag \\
        --envs SafetyPointGoal1-v0 --steps 50000 --seeds 0 --speed-steps 8192

``--algos nine`` runs the nine baselines of the design (OmniSafe's names in brackets): ``ppo``
[PPO] and ``trpo`` [TRPO] (SB3 / sb3-contrib), ``ppolag`` [PPOLag], ``trpolag`` [TRPOLag],
``cpo`` [CPO], ``p3o`` [P3O], ``pidlag`` [CPPOPID], ``pposaute`` [PPOSaute] and ``pposimmer``
[PPOSimmerPID: gymcurric's ``PPOSimmer`` with the original Simmer's PI controller].

For every (algo, env, seed) it trains with SB3 (the gymcurric agents for the Lagrangian ones),
reads episode return and cost from :class:`~gymcurric.integrations.sb3.cost.VecCostMonitor`, and
writes ``<out>/runs/<algo>__<env>__s<seed>.csv`` (one row per rollout: timesteps, mean return and
cost of the episodes finished in that rollout, λ (NaN for the agents without one: all but
``ppolag``, ``trpolag`` and ``pidlag``), wall time, the policy's action std, and the
diagnostics SB3 logged for the update that used that rollout: ``explained_variance``,
``cost_explained_variance``, ``cost_value_loss``, ``cost_advantage_std``, ``approx_kl``,
``clip_fraction``, ``entropy_loss``, ``kappa`` (P3O's penalty weight); NaN where the
algorithm does not log one).
``summary.md``/``summary.csv`` give the final return and cost (mean over the episodes that ended in
the last 10 % of training; mean ± std over seeds) beside OmniSafe's published numbers (1e7 steps, 5
seeds, cost limit 25; ``benchmarks/on-policy/README.md`` at omnisafe 15603dd), and
``curves_<env>.png`` the learning curves (mean ± std over seeds, cost limit dashed).

``--speed-steps N`` also times SB3 PPO and PPOLag with identical settings on the first env:
``--speed-repeats`` interleaved pairs (the order alternates), steps/s measured from the end of
the first reset to the end of ``learn`` (training included), wall and process-CPU time; the
ratio PPOLag/PPO is printed (goal: >= 0.85).

``--algos pposaute`` is SB3 PPO on ``AugmentStateSaute(env, safety_budget=--cost-limit)`` with
OmniSafe's PPOSaute settings for the Goal1 tasks (``--saute-gamma 0.9999``, ``--unsafe-reward
-0.2``); its recorded return is the env's own reward, not the Saute one.

``--algos ppo-costonly`` is a diagnostic, not a baseline: SB3 PPO trained on reward := -cost
(it shows how fast PPO lowers the cost when the cost is all it optimises); ``--lagrange-init X
--lagrange-lr 0`` holds λ fixed at X.

``--jobs N`` trains N (algo, seed) runs at once in separate processes (one core each). Every
run rewrites its CSVs after each rollout (``runs/<algo>__<env>__s<seed>.csv`` and
``..._episodes.csv``), so an interrupted run keeps its curve so far; ``--summarize-only``
rebuilds ``summary.*`` and the plots from those files without training.

torch runs on one thread (``torch.set_num_threads(1)``): on this 2-core machine two threads
made small-MLP training about 8x slower.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnvWrapper, VecNormalize

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.integrations.sb3.cost import VecCostMonitor
from gymcurric.wrappers import AugmentStateSaute, RecordEpisodeStatisticsWithCost

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # the --jobs workers import this module's siblings by name
    sys.path.insert(0, str(_HERE))

from _safety_runs import (  # noqa: E402
    Recorder,
    exit_with_parent,
    load_run,
    run_path,
    short,
    write_run_csv,
)

# ppo-costonly: SB3 PPO trained on reward := -info["cost"] (a diagnostic: how fast PPO lowers
# the cost when the cost is all it optimises); its recorded return is still the env's own.
# pposaute: SB3 PPO on the env wrapped in gymcurric.wrappers.AugmentStateSaute (budget = the cost
# limit); its recorded return is the env's own, not the Saute reward.
ALGOS = (
    "ppo", "ppolag", "pidlag", "trpolag", "trpo", "cpo", "p3o", "pposimmer", "ppo-costonly",
    "pposaute",
)  # fmt: skip
#: OmniSafe's nine baselines as named here (PPOLag's PID variant, CPPOPID, is ``pidlag``)
NINE = ("ppo", "trpo", "ppolag", "trpolag", "cpo", "p3o", "pidlag", "pposaute", "pposimmer")

# OmniSafe, benchmarks/on-policy/README.md Table 2 (1e7 steps, cost_limit 25): return, cost.
OMNISAFE: dict[tuple[str, str], tuple[str, str]] = {
    ("ppo", "SafetyPointGoal1-v0"): ("25.44 ± 5.43", "55.72 ± 35.55"),
    ("ppolag", "SafetyPointGoal1-v0"): ("12.96 ± 6.95", "25.80 ± 34.99"),
    ("pidlag", "SafetyPointGoal1-v0"): ("8.43 ± 3.43", "25.74 ± 7.83"),
    ("trpolag", "SafetyPointGoal1-v0"): ("18.51 ± 3.83", "22.98 ± 8.45"),
    ("pposaute", "SafetyPointGoal1-v0"): ("7.06 ± 5.85", "20.04 ± 21.91"),
    ("trpo", "SafetyPointGoal1-v0"): ("27.20 ± 0.44", "45.88 ± 11.27"),
    ("cpo", "SafetyPointGoal1-v0"): ("20.46 ± 1.38", "28.84 ± 7.76"),
    ("p3o", "SafetyPointGoal1-v0"): ("1.6 ± 3.01", "31.1 ± 80.03"),
    ("pposimmer", "SafetyPointGoal1-v0"): ("8.30 ± 6.03", "25.32 ± 31.91"),
    ("ppo", "SafetyCarGoal1-v0"): ("33.41 ± 2.89", "58.06 ± 42.06"),
    ("ppolag", "SafetyCarGoal1-v0"): ("13.27 ± 9.26", "21.72 ± 32.06"),
    ("pidlag", "SafetyCarGoal1-v0"): ("10.60 ± 2.51", "30.66 ± 7.53"),
    ("trpolag", "SafetyCarGoal1-v0"): ("27.04 ± 1.82", "26.80 ± 5.64"),
    ("pposaute", "SafetyCarGoal1-v0"): ("7.12 ± 5.41", "21.68 ± 29.11"),
    ("trpo", "SafetyCarGoal1-v0"): ("36.60 ± 0.22", "55.58 ± 12.68"),
    ("cpo", "SafetyCarGoal1-v0"): ("25.52 ± 2.65", "43.32 ± 14.35"),
    ("p3o", "SafetyCarGoal1-v0"): ("-1.10 ± 6.85", "50.58 ± 99.24"),
    ("pposimmer", "SafetyCarGoal1-v0"): ("8.45 ± 7.16", "18.98 ± 25.63"),
}


def env_id(name: str) -> str:
    return name if "/" in name else f"gymcurric/{name}"


def make_venv(
    name: str, n_envs: int, seed: int, norm_obs: bool = False, saute: dict[str, Any] | None = None
) -> Any:
    """``DummyVecEnv`` -> ``VecCostMonitor`` (raw return and cost) -> optional ``VecNormalize``.

    ``norm_obs`` normalises observations only (``norm_reward=False``), as OmniSafe's
    ``obs_normalize=True, reward_normalize=False, cost_normalize=False``. The monitor sits below
    it, so the recorded returns and ``info["cost"]`` are the env's own.

    With ``saute`` (``AugmentStateSaute`` keyword arguments) every sub-env is
    ``AugmentStateSaute(RecordEpisodeStatisticsWithCost(env))``: the episode statistics are taken
    below the Saute wrapper, so they hold the env's own return (as OmniSafe's Saute adapter
    logs the original reward), and there is no vec-level monitor above, which would record
    the Saute reward instead.
    """

    def make() -> gym.Env[Any, Any]:
        env = gym.make(env_id(name))
        if saute is None:
            return env
        return AugmentStateSaute(RecordEpisodeStatisticsWithCost(env), **saute)

    venv = DummyVecEnv([make] * n_envs)
    venv.seed(seed)
    monitored = venv if saute is not None else VecCostMonitor(venv)
    if norm_obs:
        return VecNormalize(monitored, norm_obs=True, norm_reward=False)
    return monitored


def linear_decay(start: float):
    """SB3 schedule from ``start`` at the first update to 0 at the end (OmniSafe's LinearLR)."""

    def schedule(progress_remaining: float) -> float:
        return start * progress_remaining

    return schedule


def annealed_limit(start: float, end: float, fraction: float):
    """SB3 schedule: the cost limit from ``start`` down to ``end`` linearly over ``fraction``.

    ``fraction`` is the share of training (0 < fraction ≤ 1); the limit stays at ``end`` after.
    """

    def schedule(progress_remaining: float) -> float:
        done = min(1.0, (1.0 - progress_remaining) / fraction)
        return start + (end - start) * done

    return schedule


class CostAsReward(VecEnvWrapper):
    """Reward replaced by ``-info["cost"]``, above the monitor (which keeps the env return)."""

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        obs, _, dones, infos = self.venv.step_wait()
        costs = np.array([info["cost"] for info in infos], dtype=np.float32)
        return obs, -costs, dones, infos


def make_model(algo: str, venv: Any, seed: int, args: argparse.Namespace) -> Any:
    common: dict[str, Any] = {"seed": seed, "device": "cpu", "verbose": 0, "n_steps": args.n_steps}
    lag: dict[str, Any] = {"cost_limit": args.cost_limit, "cost_window": args.cost_window}
    if args.cost_limit_start is not None:
        lag["cost_limit"] = annealed_limit(
            args.cost_limit_start, args.cost_limit, args.cost_limit_anneal
        )
    if args.cost_n_epochs is not None:
        lag["cost_n_epochs"] = args.cost_n_epochs
    if algo in ("ppolag", "trpolag"):
        lag["lagrange_lr"] = args.lagrange_lr
        lag["lagrange_init"] = args.lagrange_init
        if args.lagrange_max is not None:
            lag["multiplier_kwargs"] = {"upper_bound": args.lagrange_max}
    if algo in ("ppo", "ppolag", "pidlag", "p3o", "pposimmer", "ppo-costonly", "pposaute"):
        common.update(batch_size=args.batch_size, n_epochs=args.n_epochs)
        common.update(target_kl=args.target_kl)
        if args.lr_decay:
            common["learning_rate"] = linear_decay(3e-4)
    if algo in ("ppo", "pposaute"):  # pposaute: the Saute wrapper is in the env (make_venv)
        from stable_baselines3 import PPO

        return PPO("MlpPolicy", venv, **common)
    if algo == "ppo-costonly":
        from stable_baselines3 import PPO

        return PPO("MlpPolicy", CostAsReward(venv), **common)
    if algo == "ppolag":
        from gymcurric.integrations.sb3.ppo_lag import PPOLag

        return PPOLag("MlpPolicy", venv, **common, **lag)
    if algo == "pidlag":
        from gymcurric.integrations.sb3.ppo_lag import PPOPIDLag

        kp, ki, kd = args.pid_gains
        return PPOPIDLag(
            "MlpPolicy", venv, **common, **lag, kp=kp, ki=ki, kd=kd,
            pid_epoch_steps=args.pid_epoch_steps,
        )  # fmt: skip
    if algo == "trpo":
        from sb3_contrib import TRPO

        return TRPO("MlpPolicy", venv, **common)
    if algo == "trpolag":
        from gymcurric.integrations.sb3.trpo_lag import TRPOLag

        return TRPOLag("MlpPolicy", venv, **common, **lag)
    if algo == "cpo":
        from gymcurric.integrations.sb3.cpo import CPO

        return CPO("MlpPolicy", venv, **common, **lag)
    if algo == "p3o":
        from gymcurric.integrations.sb3.p3o import P3O

        return P3O("MlpPolicy", venv, **common, **lag)
    if algo == "pposimmer":  # wraps the env in VecSimmer itself (budget moved per rollout)
        from gymcurric.integrations.sb3.simmer import PPOSimmer

        simmer = {"safety_budget": args.cost_limit, "saute_gamma": args.saute_gamma}
        simmer.update(unsafe_reward=args.unsafe_reward, max_episode_steps=args.saute_horizon)
        return PPOSimmer("MlpPolicy", venv, **common, **simmer, cost_window=args.cost_window)
    raise SystemExit(f"unknown algo {algo!r}; expected one of {ALGOS}")


def train(
    algo: str,
    name: str,
    seed: int,
    args: argparse.Namespace,
    steps: int,
    flush_to: Path | None = None,
) -> Recorder:
    saute = None
    if algo == "pposaute":
        saute = {
            "safety_budget": args.cost_limit,
            "saute_gamma": args.saute_gamma,
            "unsafe_reward": args.unsafe_reward,
            "max_episode_steps": args.saute_horizon,  # None: the env spec's time limit
        }
    venv = make_venv(name, args.n_envs, seed, args.norm_obs, saute)
    model = make_model(algo, venv, seed, args)
    rec = Recorder(flush_to)
    model.learn(steps, callback=rec)
    venv.close()
    return rec


def train_job(algo: str, name: str, seed: int, args: argparse.Namespace) -> SimpleNamespace:
    """One (algo, env, seed) run in a worker process; returns what the summary needs."""
    th.set_num_threads(1)
    t = time.perf_counter()
    rec = train(algo, name, seed, args, args.steps, run_path(args.out, algo, name, seed))
    write_run_csv(run_path(args.out, algo, name, seed), rec)
    return SimpleNamespace(
        rows=rec.rows,
        episodes=rec.episodes,
        wall=rec.wall,
        cpu=rec.cpu,
        elapsed=time.perf_counter() - t,
    )


def final_stats(rec: Any, steps: int) -> tuple[float, float]:
    """Mean return and cost of the episodes that ended in the last 10 % of training."""
    last = [e for e in rec.episodes if e[0] > 0.9 * steps] or rec.episodes[-1:]
    if not last:
        return float("nan"), float("nan")
    return float(np.mean([e[1] for e in last])), float(np.mean([e[2] for e in last]))


def first_stats(rec: Any, steps: int) -> tuple[float, float]:
    """Mean return and cost of the episodes that ended in the first 10 % of training."""
    first = [e for e in rec.episodes if e[0] <= 0.1 * steps] or rec.episodes[:1]
    if not first:
        return float("nan"), float("nan")
    return float(np.mean([e[1] for e in first])), float(np.mean([e[2] for e in first]))


def mean_std(values: list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return "n/a"
    std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{statistics.fmean(vals):.2f} ± {std:.2f}"


def plot(out: Path, name: str, runs: dict[tuple[str, int], Any], args: argparse.Namespace):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for algo in args.algos:
        recs = [runs[(algo, s)] for s in args.seeds if (algo, s) in runs]
        if not recs or not recs[0].rows:
            continue
        n = min(len(r.rows) for r in recs)
        x = np.array([r["timesteps"] for r in recs[0].rows[:n]])
        for ax, key in zip(axes, ("ep_return", "ep_cost"), strict=True):
            ys = np.array([[row[key] for row in r.rows[:n]] for r in recs], dtype=float)
            with warnings.catch_warnings():  # rollouts in which no episode ended are NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(ys, axis=0)
                std = np.nanstd(ys, axis=0)
            ax.plot(x, mean, label=algo)
            ax.fill_between(x, mean - std, mean + std, alpha=0.2)
    axes[0].set_title(f"{short(name)}: episode return")
    axes[1].set_title(f"{short(name)}: episode cost")
    axes[1].axhline(args.cost_limit, ls="--", c="k", lw=1, label=f"limit {args.cost_limit:g}")
    for ax in axes:
        ax.set_xlabel("env steps")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / f"curves_{short(name)}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def speed(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Interleaved PPO vs PPOLag steps/s (wall and CPU) on the first env, same settings."""
    name = args.envs[0]
    res: dict[str, list[tuple[float, float]]] = {"ppo": [], "ppolag": []}
    for r in range(args.speed_repeats):
        order = ("ppo", "ppolag") if r % 2 == 0 else ("ppolag", "ppo")
        for algo in order:
            rec = train(algo, name, 100 + r, args, args.speed_steps)
            steps = rec.rows[-1]["timesteps"] if rec.rows else args.speed_steps
            res[algo].append((steps / rec.wall, steps / rec.cpu))
            print(
                f"  speed {algo:7s} rep {r}: {steps / rec.wall:8.1f} steps/s wall, "
                f"{steps / rec.cpu:8.1f} steps/s cpu",
                flush=True,
            )
    summary = {
        algo: {
            "wall_steps_per_s_median": statistics.median(v[0] for v in vals),
            "cpu_steps_per_s_median": statistics.median(v[1] for v in vals),
        }
        for algo, vals in res.items()
    }
    summary["ratio_wall"] = (
        summary["ppolag"]["wall_steps_per_s_median"] / summary["ppo"]["wall_steps_per_s_median"]
    )
    summary["ratio_cpu"] = (
        summary["ppolag"]["cpu_steps_per_s_median"] / summary["ppo"]["cpu_steps_per_s_median"]
    )
    summary["env"] = name
    summary["steps"] = args.speed_steps
    summary["repeats"] = args.speed_repeats
    (out / "speed.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--algos",
        nargs="+",
        default=["ppo", "ppolag", "pidlag", "trpolag"],
        choices=(*ALGOS, "nine"),
        help="'nine': OmniSafe's nine baselines (ppo trpo ppolag trpolag cpo p3o pidlag "
        "pposaute pposimmer)",
    )
    p.add_argument("--envs", nargs="+", default=["SafetyPointGoal1-v0"])
    p.add_argument("--steps", type=int, default=1_000_000, help="0: speed comparison only")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--n-envs", type=int, default=1)
    p.add_argument("--n-steps", type=int, default=2048, help="rollout length per env")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--n-epochs", type=int, default=10)
    p.add_argument("--cost-limit", type=float, default=25.0)
    p.add_argument(
        "--cost-limit-start",
        type=float,
        default=None,
        help="Lagrangian algos: anneal the limit linearly from this value to --cost-limit over "
        "the first --cost-limit-anneal of training (a curriculum on the constraint)",
    )
    p.add_argument("--cost-limit-anneal", type=float, default=0.4)
    p.add_argument("--cost-window", type=int, default=100, help="episodes J_c averages")
    p.add_argument(
        "--norm-obs", action="store_true", help="VecNormalize(norm_obs=True, norm_reward=False)"
    )
    p.add_argument(
        "--lr-decay", action="store_true", help="PPO family: lr 3e-4 decayed linearly to 0"
    )
    p.add_argument(
        "--target-kl", type=float, default=None, help="PPO family: SB3 early stop (None: off)"
    )
    p.add_argument(
        "--lagrange-lr",
        type=float,
        default=0.035,
        help="ppolag/trpolag: the multiplier's Adam lr per rollout (OmniSafe: 0.035 per epoch)",
    )
    p.add_argument(
        "--lagrange-init",
        type=float,
        default=0.001,
        help="ppolag/trpolag: initial λ (OmniSafe: 0.001); with --lagrange-lr 0, λ stays fixed",
    )
    p.add_argument(
        "--lagrange-max",
        type=float,
        default=None,
        help="ppolag/trpolag: cap on λ (multiplier_kwargs upper_bound; default: none)",
    )
    p.add_argument(
        "--cost-n-epochs",
        type=int,
        default=None,
        help="Lagrangian algos: passes of the cost critic over each rollout (default: the "
        "policy's n_epochs / n_critic_updates)",
    )
    p.add_argument(
        "--pid-gains",
        nargs=3,
        type=float,
        default=[0.1, 0.01, 0.01],
        metavar=("KP", "KI", "KD"),
        help="pidlag gains, applied once per rollout (OmniSafe's per-epoch defaults)",
    )
    p.add_argument(
        "--pid-epoch-steps",
        type=int,
        default=None,
        help="pidlag: PPOPIDLag(pid_epoch_steps=N): the PID constants are per epoch of N steps "
        "(OmniSafe: 20000); Ki, the EMA factors and the D delay are converted to rollouts",
    )
    p.add_argument(
        "--saute-gamma",
        type=float,
        default=0.9999,
        help="pposaute: AugmentStateSaute saute_gamma "
        "(OmniSafe's PPOSaute setting for Point/Car Goal1)",
    )
    p.add_argument(
        "--unsafe-reward",
        type=float,
        default=-0.2,
        help="pposaute: reward once the budget (--cost-limit) is spent (OmniSafe Goal1: -0.2)",
    )
    p.add_argument(
        "--saute-horizon",
        type=int,
        default=None,
        help="pposaute: AugmentStateSaute max_episode_steps T (default: the env spec's time limit)",
    )
    p.add_argument("--speed-steps", type=int, default=0, help="0: skip the speed comparison")
    p.add_argument("--speed-repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/safety_gym"))
    p.add_argument("--jobs", type=int, default=1, help="runs trained at once, one process each")
    p.add_argument(
        "--summarize-only", action="store_true", help="rebuild summary and plots from runs/*.csv"
    )
    args = p.parse_args(argv)
    if "nine" in args.algos:
        i = args.algos.index("nine")
        args.algos[i : i + 1] = [a for a in NINE if a not in args.algos]
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    if not 0.0 < args.cost_limit_anneal <= 1.0:
        p.error(f"--cost-limit-anneal must be in (0, 1], got {args.cost_limit_anneal}")
    th.set_num_threads(1)
    out: Path = args.out
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if not args.summarize_only:
        (out / "config.json").write_text(json.dumps({k: str(v) for k, v in vars(args).items()}))

    rows = []
    if args.steps > 0:
        rows = run_all(args, out)
    if rows:
        write_summary(out, rows)
    if args.speed_steps:
        s = speed(args, out)
        print(
            f"speed on {s['env']} ({s['steps']} steps x {s['repeats']} interleaved pairs): "
            f"PPOLag/PPO = {s['ratio_wall']:.3f} (wall), {s['ratio_cpu']:.3f} (cpu)"
        )
    return 0


def run_all(args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """Train (or, with --summarize-only, load) every run; the summary rows, one per algo x env."""
    keys = [(name, algo, seed) for name in args.envs for algo in args.algos for seed in args.seeds]
    results: dict[tuple[str, str, int], Any] = {}
    if args.summarize_only:
        for key in keys:
            run = load_run(out, key[1], key[0], key[2])
            if run is not None:
                results[key] = run
    else:
        ctx = multiprocessing.get_context("forkserver")
        with concurrent.futures.ProcessPoolExecutor(
            args.jobs, mp_context=ctx, initializer=exit_with_parent, initargs=(os.getpid(),)
        ) as pool:
            futures = {
                pool.submit(train_job, algo, name, seed, args): (name, algo, seed)
                for name, algo, seed in keys
            }
            for fut in concurrent.futures.as_completed(futures):
                name, algo, seed = futures[fut]
                run = results[(name, algo, seed)] = fut.result()
                ret, cost = final_stats(run, args.steps)
                print(
                    f"{algo:8s} {short(name)} seed {seed}: return {ret:.2f} cost {cost:.2f} "
                    f"({run.elapsed:.0f} s)",
                    flush=True,
                )
    rows = []
    for name in args.envs:
        runs = {(a, s): r for (n, a, s), r in results.items() if n == name}
        for algo in args.algos:
            finals = [
                final_stats(runs[(algo, s)], args.steps) for s in args.seeds if (algo, s) in runs
            ]
            firsts = [
                first_stats(runs[(algo, s)], args.steps) for s in args.seeds if (algo, s) in runs
            ]
            pub = OMNISAFE.get((algo, short(name)), ("-", "-"))
            rows.append(
                {
                    "algo": algo,
                    "env": short(name),
                    "steps": args.steps,
                    "seeds": len(finals),
                    "return_first": mean_std([f[0] for f in firsts]),
                    "cost_first": mean_std([f[1] for f in firsts]),
                    "return": mean_std([f[0] for f in finals]),
                    "cost": mean_std([f[1] for f in finals]),
                    "omnisafe_return_1e7": pub[0],
                    "omnisafe_cost_1e7": pub[1],
                }
            )
        print("plot:", plot(out, name, runs, args))
    return rows


def write_summary(out: Path, rows: list[dict[str, Any]]) -> None:
    with (out / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    head = (
        "| algo | env | steps | seeds | return (first 10 %) | cost (first 10 %) | "
        "return (last 10 %) | cost (last 10 %) | OmniSafe return @1e7 | OmniSafe cost @1e7 |"
    )
    lines = [head, "|" + "---|" * 10]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    table = "\n".join(lines)
    (out / "summary.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    sys.exit(main())
