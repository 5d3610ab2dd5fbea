"""Per-episode CPU of ``Curriculum.update`` against ``update_batch`` of several sizes.

One process, process-local curriculum over ``--tasks`` fixed tasks (default scorer and cadence),
the same stream of ``--episodes`` episodes (uniform task ids, success ~ Bernoulli(0.5), return =
success) fed ``--repeats`` times to each way, interleaved; median and best CPU us per episode.
Also the CPU of one ``recompute()``, which every update amortises.

    python benchmarks/curriculum_update_batch.py --tasks 1000 10000
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gymcurric.tasks import Curriculum, FixedTaskSpace


def run(n_tasks: int, episodes: int, repeats: int, sizes: list[int]) -> dict[str, float]:
    cur = Curriculum(FixedTaskSpace([{"i": i} for i in range(n_tasks)]), seed=0)
    t = time.process_time()
    for _ in range(50):
        cur.recompute()
    out = {"recompute_us": (time.process_time() - t) / 50 * 1e6}
    rng = np.random.default_rng(0)
    ids = rng.integers(0, n_tasks, episodes)
    wins = rng.random(episodes) < 0.5
    rets = wins.astype(float)
    idl, wl, rl = ids.tolist(), wins.tolist(), rets.tolist()

    def one() -> None:
        update = cur.update
        for i in range(episodes):
            update(idl[i], rl[i], wl[i])

    def batched(b: int):
        def f() -> None:
            for s in range(0, episodes, b):
                cur.update_batch(ids[s : s + b], rets[s : s + b], wins[s : s + b])

        return f

    ways = {"update": one, **{f"update_batch({b})": batched(b) for b in sizes}}
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(repeats):
        for k, f in ways.items():
            t = time.process_time()
            f()
            times[k].append((time.process_time() - t) / episodes * 1e6)
    print(f"{n_tasks} tasks: recompute {out['recompute_us']:.1f} us")
    for k, v in times.items():
        out[k] = statistics.median(v)
        print(f"  {k:20s} {out[k]:6.2f} us/episode (best {min(v):.2f})")
    return out


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--episodes", type=int, default=20480)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256, 1024])
    args = p.parse_args(argv)
    return {n: run(n, args.episodes, args.repeats, args.sizes) for n in args.tasks}


if __name__ == "__main__":
    main()
