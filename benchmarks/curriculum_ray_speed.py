"""Per-call cost of ``sample`` / ``update`` on the Ray backend, next to the local curriculum.

Part 1, one client in the driver: for 100 / 1,000 / 10,000 tasks and two pool kinds, times
``calls`` consecutive ``sample_task()`` calls (a draw plus the task dict) and ``update()``
calls on a local :class:`~gymcurric.tasks.Curriculum` and on :class:`RayCurriculum` clients
built the same way, after a warm-up that takes the pool out of its cold start. The Ray update
figure is amortised: it includes the flush every ``flush_every`` updates and the snapshots
received. Clients: the default (``flush_every=32, max_pending=1``: pipelined), synchronous
flushes (``max_pending=0``) and no batching (``flush_every=1, max_pending=0``: one round trip
per update, what a curriculum without batching pays). Prints microseconds and the ratio
Ray / local.

Part 2, several Ray tasks: ``--workers`` Ray tasks each loop ``sample_task(); update()`` on
copies of one client for ``--seconds``; prints the cost of one pair per worker and the total
pairs per second (on a machine with fewer cores than workers this measures CPU sharing as much
as the actor), and checks that no update was lost.

    python benchmarks/curriculum_ray_speed.py
    python benchmarks/curriculum_ray_speed.py --calls 5000 --sizes 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np
import ray

from gymcurric.integrations.ray import RayCurriculum
from gymcurric.tasks import (
    BucketedTaskSpace,
    Curriculum,
    CurriculumConfig,
    DualPool,
    FixedTaskSpace,
    ReplacementPool,
    Span,
    TaskSpace,
)

CLIENTS = {
    "ray default (32, 1)": {"flush_every": 32, "max_pending": 1},
    "ray big batches (128, 1)": {"flush_every": 128, "max_pending": 1},
    "ray sync flush (32, 0)": {"flush_every": 32, "max_pending": 0},
    "ray no batching (1, 0)": {"flush_every": 1, "max_pending": 0},
}


def _setups(n: int) -> dict[str, tuple[TaskSpace, CurriculumConfig]]:
    fixed = FixedTaskSpace([{"level": i} for i in range(n)])
    gen = BucketedTaskSpace({"hazards": [Span(0, 8)], "goal": [Span(0.5, 3.0)]}, seed=0)
    dual = DualPool(explore_size=n // 4, exploit_size=n - n // 4)
    return {
        "fixed+replacement": (fixed, CurriculumConfig(pool=ReplacementPool(), seed=0)),
        "generator+dual": (gen, CurriculumConfig(pool=dual, seed=0)),
    }


def _make(name: str, space: TaskSpace, cfg: CurriculumConfig) -> Any:
    if name == "local":
        return Curriculum(space, cfg)
    return RayCurriculum(space, cfg, refresh_seconds=None, **CLIENTS[name])


def _warm(cur: Any, n: int, rng: np.random.Generator) -> None:
    warm = cur.sample(max(20 * n, 20_000)).tolist()
    cur.update_batch(warm, np.zeros(len(warm)), (rng.random(len(warm)) < 0.5))
    if isinstance(cur, RayCurriculum):
        cur.flush()


def _time(cur: Any, calls: int, rng: np.random.Generator) -> list[float]:
    """Wall and process-CPU microseconds per sample_task() and per update()."""
    succ = (rng.random(calls) < 0.5).tolist()
    sample_task = cur.sample_task
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        sample_task()
    out = [time.perf_counter() - t0, time.process_time() - c0]
    ids = cur.sample(calls).tolist()
    update = cur.update
    t0, c0 = time.perf_counter(), time.process_time()
    for tid, s in zip(ids, succ, strict=True):
        update(tid, 1.0 if s else 0.0, s)
    if isinstance(cur, RayCurriculum):
        cur.flush()  # the last batch is part of the cost
    out += [time.perf_counter() - t0, time.process_time() - c0]
    return [x / calls * 1e6 for x in out]


def _single(args: argparse.Namespace) -> None:
    print(
        "\nus per call in one process (wall; CPU of the calling process, which includes Ray's "
        "threads there)\n(flush_every, max_pending) of each Ray client; ratio = wall / local wall"
    )
    head = ("sample_task", "CPU", "update", "CPU", "ratio s/u")
    print(f"{'tasks':>6} {'setup':<18} {'curriculum':<25} " + " ".join(f"{h:>11}" for h in head))
    for n in args.sizes:
        for name, (space, cfg) in _setups(n).items():
            local: list[float] = []
            for cname in ["local", *CLIENTS]:
                calls = args.calls if "(1, 0)" not in cname else min(args.calls, 2000)
                best = [np.inf] * 4
                for rep in range(args.repeats):
                    rng = np.random.default_rng(rep)
                    cur = _make(cname, space, cfg)
                    _warm(cur, n, rng)
                    got = _time(cur, calls, rng)
                    best = [min(b, t) for b, t in zip(best, got, strict=True)]
                    if isinstance(cur, RayCurriculum):
                        cur.close()
                local = local or best
                ratio = f"{best[0] / local[0]:.1f}/{best[2] / local[2]:.1f}"
                cells = [f"{x:11.2f}" for x in best] + [f"{ratio:>11}"]
                print(f"{n:>6} {name:<18} {cname:<25} " + " ".join(cells))


@ray.remote
def _loop(cur: RayCurriculum, seed: int, seconds: float, start_at: float) -> tuple[int, float]:
    cur.reseed(seed)
    rng = np.random.default_rng(seed)
    cur.sample()  # first snapshot, outside the timed part
    while time.time() < start_at:
        time.sleep(0.001)
    pairs = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        for _ in range(100):
            tid, _task = cur.sample_task()
            s = bool(rng.random() < 0.5)
            cur.update(tid, float(s), s)
        pairs += 100
    cur.flush()
    return pairs, time.perf_counter() - t0


def _multi(args: argparse.Namespace) -> None:
    n = 1_000
    space, cfg = _setups(n)["fixed+replacement"]
    print(
        f"\nRay tasks x {args.seconds:.1f} s of sample_task()+update() on one RayCurriculum "
        f"({n} tasks, fixed+replacement, default client), {os.cpu_count()} CPUs"
    )
    for workers in sorted({1, args.workers}):
        cur = RayCurriculum(space, cfg, refresh_seconds=None)
        _warm(cur, n, np.random.default_rng(0))
        before = cur.stats()["curriculum/updates"]
        start_at = time.time() + 3.0  # let every worker start and fetch its snapshot
        res = ray.get([_loop.remote(cur, i, args.seconds, start_at) for i in range(workers)])
        per = np.mean([dt / pairs for pairs, dt in res]) * 1e6
        total = sum(pairs / dt for pairs, dt in res)
        updates = cur.stats()["curriculum/updates"] - before
        assert updates == sum(pairs for pairs, _ in res), "lost updates"
        print(
            f"  {workers} Ray task(s): {per:7.2f} us per sample_task+update pair per task, "
            f"{total:10.0f} pairs/s in total (no update lost: {int(updates)} counted)"
        )
        cur.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="timed calls per measurement")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--address", default=None, help="Ray cluster address (default: local)")
    args = parser.parse_args()
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, ray {ray.__version__}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f}; best of {args.repeats} x "
        f"{args.calls} calls (2,000 without batching)"
    )
    try:
        _single(args)
        _multi(args)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
