"""Per-call cost of ``sample`` / ``update`` on the shared-memory backend, next to the local one.

Part 1, one process: for 100 / 1,000 / 10,000 tasks and two pool kinds, times ``calls``
consecutive ``sample()`` and ``update()`` calls on a local and on a shared curriculum built
the same way (the update figure includes the amortised cadence recompute), after a warm-up
that takes the pool out of its cold start; prints both and the ratio shared / local.

Part 2, several processes: ``--workers`` forked processes each loop over one shared curriculum
for ``--seconds``, two ways: ``transport`` takes a task and reports an episode through
``transport_for(cur)``, as the env wrappers do (a worker's transport buffers its episodes and
draws tasks ahead); ``direct`` calls ``sample(); update()`` on the curriculum (applied at once,
under the lock). Prints the mean cost of one pair per process and the total pairs per second
(on a machine with fewer cores than workers this measures CPU sharing as much as lock
contention; the core count is printed). Run against a gymcurric without transports (before
issue 22's refactor), ``transport`` falls back to ``sample_task(); update()``, which is what its
wrappers called and what its curriculum buffered in a worker.

    python benchmarks/curriculum_shared_speed.py
    python benchmarks/curriculum_shared_speed.py --calls 5000 --sizes 1000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gymcurric.tasks import (
    BucketedTaskSpace,
    Curriculum,
    DualPool,
    FixedTaskSpace,
    ReplacementPool,
    Span,
)

try:
    from gymcurric.tasks import transport_for
except ImportError:  # a gymcurric from before transports: the curriculum batched itself
    transport_for = None


def _setups(n: int) -> dict[str, Callable[[str], Curriculum]]:
    def fixed(backend: str) -> Curriculum:
        space = FixedTaskSpace([{"level": i} for i in range(n)])
        return Curriculum(space, pool=ReplacementPool(), seed=0, backend=backend)

    def dual(backend: str) -> Curriculum:
        space = BucketedTaskSpace({"hazards": [Span(0, 8)], "goal": [Span(0.5, 3.0)]}, seed=0)
        pool = DualPool(explore_size=n // 4, exploit_size=n - n // 4)
        return Curriculum(space, pool=pool, seed=0, backend=backend)

    return {"fixed+replacement": fixed, "generator+dual": dual}


def _warm(cur: Curriculum, n: int, rng: np.random.Generator) -> None:
    warm = cur.sample(max(20 * n, 20_000)).tolist()
    cur.update_batch(warm, np.zeros(len(warm)), (rng.random(len(warm)) < 0.5))


def _time(cur: Curriculum, calls: int, rng: np.random.Generator) -> tuple[float, float]:
    succ = (rng.random(calls) < 0.5).tolist()
    sample = cur.sample
    t0 = time.perf_counter()
    for _ in range(calls):
        sample()
    t_sample = (time.perf_counter() - t0) / calls
    ids = cur.sample(calls).tolist()
    update = cur.update
    t0 = time.perf_counter()
    for tid, s in zip(ids, succ, strict=True):
        update(tid, 1.0 if s else 0.0, s)
    t_update = (time.perf_counter() - t0) / calls
    return t_sample * 1e6, t_update * 1e6


def _single(args: argparse.Namespace) -> None:
    print(
        f"{'tasks':>7} {'setup':<18} {'sample us local':>16} {'shared':>7} {'ratio':>6}"
        f" {'update us local':>16} {'shared':>7} {'ratio':>6}"
    )
    for n in args.sizes:
        for name, make in _setups(n).items():
            best: dict[str, list[float]] = {}
            for backend in ("local", "shared"):
                best[backend] = [np.inf, np.inf]
                for rep in range(args.repeats):
                    rng = np.random.default_rng(rep)
                    cur = make(backend)
                    _warm(cur, n, rng)
                    got = _time(cur, args.calls, rng)
                    best[backend] = [min(b, t) for b, t in zip(best[backend], got, strict=True)]
                    cur.close()
            (ls, lu), (ss, su) = best["local"], best["shared"]
            print(
                f"{n:>7} {name:<18} {ls:>16.2f} {ss:>7.2f} {ss / ls:>6.2f}"
                f" {lu:>16.2f} {su:>7.2f} {su / lu:>6.2f}"
            )


def _loop(cur: Curriculum, seed: int, seconds: float, via: str, start: Any, q: Any) -> None:
    rng = np.random.default_rng(seed)
    if via == "transport" and transport_for is not None:
        transport = transport_for(cur)
        transport.reseed(seed)
        take, report, flush = transport.take_task, transport.report_episode, transport.flush
    else:
        cur.reseed(seed)
        take = cur.sample_task if via == "transport" else (lambda: (int(cur.sample()[0]), None))
        report, flush = cur.update, cur.flush
    start.wait()
    pairs = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        for _ in range(100):
            tid = take()[0]
            s = bool(rng.random() < 0.5)
            report(tid, float(s), s, None)
        pairs += 100
    elapsed = time.perf_counter() - t0
    flush()  # a worker's buffered episodes (worker_update_batch) and sample counts
    q.put((pairs, elapsed))


def _multi(args: argparse.Namespace) -> None:
    ctx = mp.get_context("fork")
    n = 1_000
    print(
        f"\n{args.workers} forked workers x {args.seconds:.1f} s on one shared curriculum "
        f"({n} tasks, fixed+replacement), {os.cpu_count()} CPUs"
    )
    for via in ("transport", "direct"):
        for workers in sorted({1, args.workers}):
            cur = _setups(n)["fixed+replacement"]("shared")
            _warm(cur, n, np.random.default_rng(0))
            q, start = ctx.Queue(), ctx.Event()
            procs = [
                ctx.Process(target=_loop, args=(cur, i, args.seconds, via, start, q))
                for i in range(workers)
            ]
            for p in procs:
                p.start()
            start.set()
            res = [q.get() for _ in procs]
            for p in procs:
                p.join()
            per = np.mean([dt / pairs for pairs, dt in res]) * 1e6
            total = sum(pairs / dt for pairs, dt in res)
            updates = cur.stats()["curriculum/updates"] - 20 * n
            assert updates == sum(pairs for pairs, _ in res), "lost updates"
            print(
                f"  {via:<9} {workers} process(es): {per:7.2f} us per pair per process, "
                f"{total:10.0f} pairs/s in total (no update lost: {int(updates)} counted)"
            )
            cur.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="timed calls per measurement")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}; best of {args.repeats} x {args.calls} calls"
    )
    _single(args)
    _multi(args)


if __name__ == "__main__":
    main()
