"""One OmniSafe 0.5.0 run, executed by ``.omnisafe-venv/bin/python`` (never by gymcurric's venv).

Called by ``benchmarks/omnisafe_side_by_side.py --lib omnisafe``; standalone on purpose (the
OmniSafe venv has no gymcurric, and needs none)::

    .omnisafe-venv/bin/python benchmarks/_omnisafe_runner.py --algo PPOLag \\
        --env SafetyPointGoal1-v0 --seed 0 --steps 500000 --log-dir DIR --episodes EPISODES.csv

It runs ``omnisafe.Agent(algo, env, custom_cfgs=...).learn()`` with OmniSafe's default config
for ``algo`` except: ``seed``, ``train_cfgs.total_steps``, ``device`` cpu, ``torch_threads``
1, ``vector_env_nums`` 1 and ``parallel`` 1 (both OmniSafe's defaults, set explicitly),
wandb and tensorboard off, ``logger_cfgs.log_dir`` and, only when given,
``algo_cfgs.steps_per_epoch``. OmniSafe writes its own ``progress.csv`` and ``config.json``
under ``DIR``.

It also writes every finished episode to ``EPISODES.csv`` (env steps at its end, return, cost,
length, wall seconds since ``learn()`` began): OmniSafe's logger keeps only a 50-episode
window mean (``Metrics/EpRet``), and the side-by-side table needs the same window for both
libraries. The hooks only read: ``OnPolicyAdapter.step`` is wrapped to count env steps and
``OnPolicyAdapter._log_metrics`` to copy each episode's totals before OmniSafe logs them,
and ``Logger.dump_tabular`` (once per epoch) to note the process CPU time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--algo", required=True, help="OmniSafe algorithm name, e.g. PPOLag")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--steps-per-epoch", type=int, default=None, help="default: OmniSafe's")
    p.add_argument("--log-dir", type=Path, required=True)
    p.add_argument("--episodes", type=Path, required=True)
    p.add_argument("--meta", type=Path, required=True, help="JSON: versions, config, wall time")
    args = p.parse_args(argv)

    os.environ.setdefault("WANDB_MODE", "disabled")
    t_start = time.perf_counter()
    import omnisafe
    import torch
    from omnisafe.adapter.onpolicy_adapter import OnPolicyAdapter
    from omnisafe.common.logger import Logger

    torch.set_num_threads(1)  # OmniSafe sets it again from train_cfgs.torch_threads

    episodes: list[tuple[int, float, float, int, float]] = []
    clock = {"steps": 0}
    step = OnPolicyAdapter.step
    log_metrics = OnPolicyAdapter._log_metrics

    def counting_step(self, action):
        clock["steps"] += self._env.num_envs
        return step(self, action)

    def recording_log_metrics(self, logger, idx):
        episodes.append(
            (
                clock["steps"],
                float(self._ep_ret[idx]),
                float(self._ep_cost[idx]),
                int(self._ep_len[idx]),
                time.perf_counter() - learn_t0,
            )
        )
        return log_metrics(self, logger, idx)

    epoch_cpu_s: list[float] = []
    dump_tabular = Logger.dump_tabular

    def timing_dump_tabular(self):
        epoch_cpu_s.append(time.process_time() - learn_c0)
        return dump_tabular(self)

    OnPolicyAdapter.step = counting_step
    OnPolicyAdapter._log_metrics = recording_log_metrics
    Logger.dump_tabular = timing_dump_tabular

    custom_cfgs: dict = {
        "seed": args.seed,
        "train_cfgs": {
            "total_steps": args.steps,
            "device": "cpu",
            "torch_threads": 1,
            "vector_env_nums": 1,
            "parallel": 1,
        },
        "logger_cfgs": {
            "use_wandb": False,
            "use_tensorboard": False,
            "log_dir": str(args.log_dir.resolve()),
        },
    }
    if args.steps_per_epoch is not None:
        custom_cfgs["algo_cfgs"] = {"steps_per_epoch": args.steps_per_epoch}
    agent = omnisafe.Agent(args.algo, args.env, custom_cfgs=custom_cfgs)
    t_built = time.perf_counter()
    learn_t0, learn_c0 = time.perf_counter(), time.process_time()
    ep_ret, ep_cost, ep_len = agent.learn()
    learn_s = time.perf_counter() - learn_t0

    args.episodes.parent.mkdir(parents=True, exist_ok=True)
    with args.episodes.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env_steps", "return", "cost", "length", "wall_s"])
        writer.writerows(episodes)
    cfg = agent.agent._cfgs.todict() if hasattr(agent.agent._cfgs, "todict") else {}
    meta = {
        "omnisafe": omnisafe.__version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "torch_threads": torch.get_num_threads(),
        "custom_cfgs": custom_cfgs,
        "config": cfg,
        "env_steps": clock["steps"],
        "import_and_build_s": t_built - t_start,
        "learn_s": learn_s,
        "epoch_cpu_s": epoch_cpu_s,
        "final_logger_window": {"ep_ret": ep_ret, "ep_cost": ep_cost, "ep_len": ep_len},
    }
    args.meta.write_text(json.dumps(meta, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
