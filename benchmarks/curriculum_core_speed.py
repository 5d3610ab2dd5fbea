"""Per-call cost of the curriculum core: ``sample`` and ``update`` at 100 / 1,000 / 10,000 tasks.

Single process, local backend, default learning-progress scorer. For each pool size and pool
kind it times ``calls`` consecutive ``sample()`` calls and ``calls`` consecutive ``update()``
calls (the update figure includes the amortised cadence recompute, every ``recompute_every``
updates), after a warm-up that takes the pool out of its cold start. It also times one forced
recompute. Targets from issue 3: <= 20 us per sample and <= 10 us per update at 1,000 tasks.

    python benchmarks/curriculum_core_speed.py            # full run
    python benchmarks/curriculum_core_speed.py --calls 5000   # quicker
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np

from gymcurric.tasks import (
    BucketedTaskSpace,
    Curriculum,
    DualPool,
    FixedTaskSpace,
    OpenEndedPool,
    ReplacementPool,
    Span,
)


def _setups(n: int) -> dict[str, Callable[[], Curriculum]]:
    def fixed() -> Curriculum:
        return Curriculum(FixedTaskSpace([{"level": i} for i in range(n)]),
                          pool=ReplacementPool(), seed=0)

    def open_ended() -> Curriculum:
        space = BucketedTaskSpace({"hazards": [Span(0, 8)], "goal": [Span(0.5, 3.0)]}, seed=0)
        return Curriculum(space, pool=OpenEndedPool(capacity=n), seed=0)

    def dual() -> Curriculum:
        space = BucketedTaskSpace({"hazards": [Span(0, 8)], "goal": [Span(0.5, 3.0)]}, seed=0)
        return Curriculum(space, pool=DualPool(explore_size=n // 4, exploit_size=n - n // 4),
                          seed=0)

    return {"fixed+replacement": fixed, "generator+open-ended": open_ended,
            "generator+dual": dual}


def _time(cur: Curriculum, calls: int, rng: np.random.Generator) -> tuple[float, float, float]:
    succ = (rng.random(calls) < 0.5).tolist()
    sample = cur.sample
    t0 = time.perf_counter()
    for _ in range(calls):
        sample()
    t_sample = (time.perf_counter() - t0) / calls
    ids = cur.sample(calls).tolist()  # ids the pool holds now
    update = cur.update
    t0 = time.perf_counter()
    for tid, s in zip(ids, succ, strict=True):
        update(tid, 1.0 if s else 0.0, s)
    t_update = (time.perf_counter() - t0) / calls
    reps = 50
    t0 = time.perf_counter()
    for _ in range(reps):
        cur.recompute()
    t_recompute = (time.perf_counter() - t0) / reps
    return t_sample * 1e6, t_update * 1e6, t_recompute * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="timed calls per measurement")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, load average {load:.2f}; best of {args.repeats} x "
          f"{args.calls} calls")
    print(f"{'tasks':>7} {'setup':<22} {'sample us':>10} {'update us':>10} {'recompute us':>13}")
    for n in args.sizes:
        for name, make in _setups(n).items():
            best = [np.inf, np.inf, np.inf]
            for rep in range(args.repeats):
                cur = make()
                rng = np.random.default_rng(rep)
                warm = cur.sample(max(20 * n, 20_000)).tolist()  # leave the cold start
                cur.update_batch(warm, np.zeros(len(warm)), (rng.random(len(warm)) < 0.5))
                best = [min(b, t) for b, t in zip(best, _time(cur, args.calls, rng), strict=True)]
            print(f"{n:>7} {name:<22} {best[0]:>10.2f} {best[1]:>10.2f} {best[2]:>13.1f}")


if __name__ == "__main__":
    main()
