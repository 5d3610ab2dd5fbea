"""CPU the curriculum wrapper adds inside ``AsyncVectorEnv`` workers, per reset and per step.

Three vector envs of ``--num-envs`` trivial envs (10-step episodes, ``_trivial_env.py``) run in
turns, ``--repeats`` x ``--steps`` vector steps each:

* ``plain``: the bare env;
* ``worker-side``: each sub-env in ``SampleCurriculumTask`` on a shared curriculum of ``--tasks``
  tasks, sampling and updating in the worker (the path SB3's ``SubprocVecEnv`` uses);
* ``channel``: the same, bound to a ``TaskChannel`` whose sub-envs report their episodes
  through it (what ``make_curriculum_vec`` builds with a ``success_fn`` or a ``factory``);
* ``channel-main``: bound to a ``TaskChannel(episodes_in_main=True)``, as ``make_curriculum_vec``
  builds it by default: the episodes are accounted in the main process, and the sub-env
  wrapper's ``step`` only passes the env's through.

Probes in every worker (``_worker_probe.py``) add the thread CPU time of the whole sub-env
stack and of the bare env, for ``reset`` and ``step``. Printed: per step and per reset, the
stack's time, the bare env's time, and the stack's extra over plain. Timers are read twice
per call (~0.1-0.5 us each, the same in every configuration).

    python benchmarks/curriculum_worker_cost.py --context fork
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym
import numpy as np
from _worker_probe import make_probed

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers.vector import SampleCurriculumTask


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--context", default="fork", choices=["fork", "forkserver", "spawn"])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--steps", type=int, default=2000)
    args = p.parse_args(argv)
    out = tempfile.mkdtemp(prefix="gymcurric-worker-cost-")
    n, ctx = args.num_envs, args.context
    cur = Curriculum(
        FixedTaskSpace([{"level": i} for i in range(args.tasks)]), seed=0, backend="shared"
    )
    chans = {"channel": TaskChannel(n), "channel-main": TaskChannel(n, episodes_in_main=True)}
    envs = {
        "plain": gym.vector.AsyncVectorEnv(
            [partial(make_probed, f"{out}/plain") for _ in range(n)], context=ctx
        ),
        "worker-side": SampleCurriculumTask(
            gym.vector.AsyncVectorEnv(
                [partial(make_probed, f"{out}/worker-side", cur) for _ in range(n)], context=ctx
            ),
            cur,
        ),
    }
    for name, chan in chans.items():
        bound = gym.vector.AsyncVectorEnv(
            [partial(make_probed, f"{out}/{name}", cur, chan) for _ in range(n)], context=ctx
        )
        bound.set_attr("channel_index", list(range(n)))
        envs[name] = SampleCurriculumTask(bound, cur, channel=chan)
    actions = np.zeros(n, dtype=np.int64)
    try:
        for e in envs.values():
            e.reset(seed=0)
        for _ in range(args.repeats):
            for e in envs.values():
                for _ in range(args.steps):
                    e.step(actions)
    finally:
        for e in envs.values():
            e.close()
        cur.close()
    res: dict[str, dict[str, float]] = {}
    for name in envs:
        tot: dict[str, int] = {}
        for f in Path(out).glob(f"{name}_*.json"):
            for k, v in json.loads(f.read_text()).items():
                tot[k] = tot.get(k, 0) + v
        ns, nr = tot["n_step"], tot["n_reset"]
        res[name] = {
            "step_us": tot["outer_step"] / ns / 1e3,
            "bare_step_us": tot["inner_step"] / ns / 1e3,
            "reset_us": tot["outer_reset"] / nr / 1e3,
            "bare_reset_us": tot["inner_reset"] / nr / 1e3,
        }
    print(f"thread CPU inside {n} {ctx} workers, {args.repeats} x {args.steps} vector steps each")
    print("  config        step us  (bare)  extra   reset us  (bare)  extra")
    for name, r in res.items():
        print(
            f"  {name:12s} {r['step_us']:7.2f} {r['bare_step_us']:7.2f} "
            f"{r['step_us'] - res['plain']['step_us']:+6.2f}  {r['reset_us']:8.2f} "
            f"{r['bare_reset_us']:7.2f} {r['reset_us'] - res['plain']['reset_us']:+6.2f}"
        )
    return res


if __name__ == "__main__":
    main()
