"""Curriculum overhead next to Syllabus, side by side in one run (issue 3, "Done when").

Part (a), one process: per-call cost of ``sample`` and ``update`` at 100 / 1,000 / 10,000 tasks
for gymcurric's learning-progress curriculum (default scorer, fixed pool; local and shared-memory
backend) and for Syllabus's learning-progress curriculum (``OnlineLearningProgress``, the one that
learns from training episodes) on the same calls: the same tasks, the same warm-up stream of
episode results (uniform task ids, success ~ Bernoulli(p_task) with a random p per task, one
seed), then, repeated and interleaved, four timed blocks:

* ``sample``: ``sample()`` (gymcurric) / ``sample(k=1)`` (Syllabus: what its sync thread calls
  per reset);
* ``update``: one finished episode. gymcurric: ``update(task_id, return_, success)``. Syllabus:
  ``update_task_progress(task, success)`` + ``update_on_episode(return, length, task, success)``,
  the two hooks through which an episode's result reaches its LP (only the first counts
  successes). Syllabus defers its distribution work to the next ``sample``, so its update is
  cheap and its sample pays;
* ``episode``: ``sample`` then ``update`` with that task's outcome, interleaved: the cost of one
  episode wherever each library puts its work (the fairest single number);
* ``sample(64)/task``: one batched call of 64 draws, per task drawn.

Both recompute their distribution on the same cadence: gymcurric every ``max(32, n // 32)``
updates (its default), Syllabus with ``update_interval`` set to that number. Each block runs for
about ``--target-s`` seconds (the number of calls is calibrated per implementation and size);
medians and bests over ``--repeats`` repetitions are printed, and the ratio Syllabus / gymcurric
(``> 1``: gymcurric is faster).

Part (b), env throughput: steps/s of an ``AsyncVectorEnv`` of ``--num-envs`` (8) trivial envs
with 10-step episodes (``benchmarks/_trivial_env.py``), three ways, built with ``gym.make_vec``
in the same start-method context: ``plain``; ``gymcurric`` (``make_curriculum_vec`` with a
curriculum of ``--env-tasks`` tasks on the shared-memory backend); ``syllabus`` (its sync wrapper
``GymnasiumSyncWrapper`` around each env, a thin ``new_task`` -> ``options`` adapter, and
``make_multiprocessing_curriculum`` over its LP curriculum: its documented multiprocessing setup).
With ``--slots`` also ``gc-slots``: ``gymcurric`` with a ``success_fn`` (the default success
rule), so that each episode is summed in its worker and left in the channel, as before the
main process accounted the episodes from the vector env's outputs. With ``--overlap`` also
``gc-overlap``: ``gymcurric`` with ``overlap=True``, so that the curriculum work a vector step
leaves runs while the workers step (``make_curriculum_vec``'s default since issue 24) instead
of before the next step (``gymcurric`` here, ``overlap=False``: the same work, all of it on the
main process's critical path). ``--control`` adds ``gc-control``: ``gymcurric`` built again, last
(an A/A check of the build order). ``--num-envs`` takes several sizes, measured in turn; a last
summary gives each paired ratio to plain (and context switches and migrations per env step).
The three vector envs are built once per context and measured in turns (interleaved, the order
rotating), each for the same number of steps. Reported: env steps/s (median and best of the
repeats), the ratio to plain of the medians and the median of each repeat's ratio (measured back
to back, so less sensitive to load that drifts), and CPU us per env step of this process plus the
workers (Linux ``schedstat``; a machine shared with other jobs inflates wall-clock time more than
CPU time). A configuration that crashes or hangs (bounded by ``--timeout``) is recorded as such
and the run goes on.

Syllabus is optional: without ``syllabus-rl`` installed (or with ``--no-syllabus``) only the
gymcurric side runs. Two things are done to Syllabus so that it runs at all here, and are
reported: its import-time side effects are undone (``np.seterr(all="raise")`` for the whole
process, and a shared-memory segment it never unlinks), and its distribution is handed to its
own ``sample`` as a view on which ``dist != []`` works (that test raises under numpy >= 2;
the unpatched behaviour is checked and reported too).

    python benchmarks/curriculum_overhead.py                  # full run (a few minutes)
    python benchmarks/curriculum_overhead.py --quick          # smoke run (< 60 s)
    python benchmarks/curriculum_overhead.py --json out.json  # also write the results
    # the paired ratio to plain at 8 and 15 envs only (40 s on a loaded 2-core host)
    python benchmarks/curriculum_overhead.py --skip-calls --no-syllabus --contexts fork \
        --overlap --num-envs 8 15 --env-repeats 8 --env-steps 800

``main(argv)`` returns the results as a dict (what ``--json`` writes).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import multiprocessing as mp
import os
import re
import signal
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from gymcurric.tasks import Curriculum, FixedTaskSpace

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # workers import the env module by name (spawn / forkserver)
    sys.path.insert(0, str(_HERE))

import _trivial_env as trivial  # noqa: E402
from _overhead_envs import BUILDERS, Built  # noqa: E402
from _overhead_report import load_average, meta, print_calls, print_env  # noqa: E402
from _syllabus_anchor import (  # noqa: E402
    load_syllabus,
    syllabus_lp,
    unpatched_syllabus_sample,
)

EPISODE_LENGTH = 10
BATCH_K = 64
OPS = ("sample", "update", "episode", "batch")
OP_TITLES = {
    "sample": "sample",
    "update": "update",
    "episode": "episode",
    "batch": f"sample({BATCH_K})/task",
}


# ------------------------------------------------------------------------ (a) per-call cost
class _GymcurricCalls:
    """The timed loops on a gymcurric curriculum (fixed pool of ``n`` tasks, LP scorer)."""

    def __init__(self, n: int, backend: str) -> None:
        self.name = f"gymcurric-{backend}"
        tasks = [{"level": i} for i in range(n)]
        self.cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend=backend)

    def warm(self, ids: list[int], wins: list[bool]) -> None:
        self.cur.update_batch(ids, [float(w) for w in wins], wins)

    def sample_loop(self, calls: int) -> None:
        sample = self.cur.sample
        for _ in range(calls):
            sample()

    def update_loop(self, ids: list[int], wins: list[bool]) -> None:
        update = self.cur.update
        for tid, win in zip(ids, wins, strict=True):
            update(tid, float(win), win)

    def episode_loop(self, draws: list[float], p: list[float]) -> None:
        sample, update = self.cur.sample, self.cur.update
        for u in draws:
            tid = int(sample()[0])
            win = u < p[tid]
            update(tid, float(win), win)

    def batch_loop(self, calls: int) -> None:
        sample = self.cur.sample
        for _ in range(calls):
            sample(BATCH_K)

    def close(self) -> None:
        self.cur.close()


class _SyllabusCalls:
    """The same loops on Syllabus's ``OnlineLearningProgress`` (global numpy RNG, seeded)."""

    name = "syllabus"

    def __init__(self, syl: SimpleNamespace, n: int) -> None:
        np.random.seed(0)  # noqa: NPY002 (Syllabus samples with numpy's global generator)
        self.cur = syllabus_lp(syl, n)

    def warm(self, ids: list[int], wins: list[bool]) -> None:
        self.update_loop(ids, wins)

    def sample_loop(self, calls: int) -> None:
        sample = self.cur.sample
        for _ in range(calls):
            sample(1)

    def update_loop(self, ids: list[int], wins: list[bool]) -> None:
        progress, episode = self.cur.update_task_progress, self.cur.update_on_episode
        for tid, win in zip(ids, wins, strict=True):
            progress(tid, win)
            episode(float(win), EPISODE_LENGTH, tid, win)

    def episode_loop(self, draws: list[float], p: list[float]) -> None:
        sample = self.cur.sample
        progress, episode = self.cur.update_task_progress, self.cur.update_on_episode
        for u in draws:
            tid = int(sample(1)[0])
            win = u < p[tid]
            progress(tid, win)
            episode(float(win), EPISODE_LENGTH, tid, win)

    def batch_loop(self, calls: int) -> None:
        sample = self.cur.sample
        for _ in range(calls):
            sample(BATCH_K)

    def close(self) -> None:
        pass


def _timed(fn: Callable[..., None], *args: Any) -> float:
    """Seconds for ``fn(*args)``, with the garbage collector off (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t0
    finally:
        gc.enable()


def _stream(rng: np.random.Generator, n: int, length: int, p: np.ndarray) -> tuple[list, list]:
    """Episode results: uniform task ids, success ~ Bernoulli(p[id])."""
    ids = rng.integers(0, n, length)
    return ids.tolist(), (rng.random(length) < p[ids]).tolist()


def _summary(values: Sequence[float], higher_is_better: bool = False) -> dict[str, float]:
    return {"median": statistics.median(values), "best": (max if higher_is_better else min)(values)}


def measure_calls(args: argparse.Namespace, syl: SimpleNamespace | None) -> dict[str, Any]:
    """Part (a): per-call cost per size and implementation; rows, ratios and goals."""
    rows: list[dict[str, Any]] = []
    for n in args.sizes:
        rng = np.random.default_rng(args.seed)
        p = rng.random(n)  # each task's success probability
        warm_ids, warm_wins = _stream(rng, n, max(args.warm_factor * n, args.warm_min), p)
        impls: list[Any] = [_GymcurricCalls(n, "local"), _GymcurricCalls(n, "shared")]
        if syl is not None:
            impls.append(_SyllabusCalls(syl, n))
        try:
            calls = {}
            for impl in impls:
                impl.warm(warm_ids, warm_wins)
                probe = 100
                per = _timed(impl.episode_loop, rng.random(probe).tolist(), p.tolist()) / probe
                calls[impl.name] = int(np.clip(args.target_s / per, args.min_calls, args.max_calls))
            times: dict[str, dict[str, list[float]]] = {
                i.name: {op: [] for op in OPS} for i in impls
            }
            plist = p.tolist()
            for rep in range(args.repeats):
                ids, wins = _stream(rng, n, args.max_calls, p)
                draws = rng.random(args.max_calls).tolist()
                shift = rep % len(impls)  # rotate the order: no implementation always goes first
                for impl in impls[shift:] + impls[:shift]:
                    c, t = calls[impl.name], times[impl.name]
                    batches = max(20, c // BATCH_K)
                    t["sample"].append(_timed(impl.sample_loop, c) / c)
                    t["update"].append(_timed(impl.update_loop, ids[:c], wins[:c]) / c)
                    t["episode"].append(_timed(impl.episode_loop, draws[:c], plist) / c)
                    t["batch"].append(_timed(impl.batch_loop, batches) / (batches * BATCH_K))
            for impl in impls:
                row: dict[str, Any] = {"tasks": n, "impl": impl.name, "calls": calls[impl.name]}
                for op in OPS:
                    row[f"{op}_us"] = _summary([v * 1e6 for v in times[impl.name][op]])
                rows.append(row)
        finally:
            for impl in impls:
                impl.close()
    ratios = []
    by_key = {(r["tasks"], r["impl"]): r for r in rows}
    for n in args.sizes:
        syl_row = by_key.get((n, "syllabus"))
        for backend in ("local", "shared"):
            mine = by_key[(n, f"gymcurric-{backend}")]
            if syl_row is not None:
                ratios.append(
                    {
                        "tasks": n,
                        "backend": backend,
                        **{
                            op: syl_row[f"{op}_us"]["median"] / mine[f"{op}_us"]["median"]
                            for op in OPS
                        },
                    }
                )
    out: dict[str, Any] = {"rows": rows, "ratios": ratios, "goals": _call_goals(by_key, ratios)}
    if syl is not None:
        out["syllabus_unpatched_sample"] = unpatched_syllabus_sample(syl, EPISODE_LENGTH)
    return out


def _call_goals(by_key: dict[tuple[int, str], dict[str, Any]], ratios: list[dict]) -> dict:
    """Issue 3 at 1,000 tasks: <= 20 us/sample, <= 10 us/update, >= 10x faster than Syllabus."""
    goals: dict[str, Any] = {}
    for backend in ("local", "shared"):
        row = by_key.get((1000, f"gymcurric-{backend}"))
        if row is None:
            continue
        g = {
            "sample_le_20us": row["sample_us"]["median"] <= 20.0,
            "update_le_10us": row["update_us"]["median"] <= 10.0,
        }
        for r in ratios:
            if r["tasks"] == 1000 and r["backend"] == backend:
                g.update({f"{op}_ge_10x_syllabus": r[op] >= 10.0 for op in OPS[:3]})
        goals[backend] = g
    return goals


# ------------------------------------------------------------------------ (b) env throughput
class _TimedOut(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`_TimedOut` in the main thread after ``seconds`` (POSIX; else no limit)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _alarm(signum: int, frame: Any) -> None:
        raise _TimedOut(f"no result after {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _stop(procs: Sequence[Any]) -> None:
    """Terminate (then kill) worker processes that this benchmark started and that still run."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(2)
        if proc.is_alive():
            proc.kill()
            proc.join(2)


def _cpu_s(pids: Sequence[int]) -> float | None:
    """CPU seconds used so far by all threads of ``pids`` (Linux ``schedstat``; else None)."""
    total = 0
    try:
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def _sched_counts(pids: Sequence[int]) -> np.ndarray | None:
    """Context switches (all; involuntary) and CPU migrations of all threads of ``pids``."""
    total = np.zeros(3)
    try:
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                status = (task / "status").read_text()
                vol, inv = (int(n) for n in re.findall(r"ctxt_switches:\s*(\d+)", status))
                found = re.search(r"se\.nr_migrations\s*:\s*(\d+)", (task / "sched").read_text())
                total += (vol + inv, inv, int(found.group(1)) if found else 0)
    except (OSError, ValueError):
        return None
    return total


def _run_steps(envs: Any, steps: int, warmup: int) -> tuple[float, float | None, Any]:
    """``(env steps/s, CPU us, switches/involuntary/migrations)``, per env step, all processes."""
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    for _ in range(warmup):
        envs.step(actions)
    pids = [os.getpid()] + [p.pid for p in getattr(envs.unwrapped, "processes", [])]
    counts0 = _sched_counts(pids)  # read outside the timed window
    cpu0, t0 = _cpu_s(pids), time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    cpu1, elapsed = _cpu_s(pids), time.perf_counter() - t0
    counts1, env_steps = _sched_counts(pids), steps * envs.num_envs
    cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / env_steps * 1e6
    diff = None if counts0 is None or counts1 is None else counts1 - counts0
    return env_steps / elapsed, cpu, None if diff is None else (diff / env_steps).tolist()


def measure_env(args: argparse.Namespace, syl: SimpleNamespace | None) -> dict[str, Any]:
    """Part (b): steps/s per start-method context and configuration, with ratios to plain."""
    trivial.register()
    out: dict[str, Any] = {}
    warmup = 2 * (args.episode_length + 1)
    for ctx in args.contexts:
        configs: dict[str, dict[str, Any]] = {}
        live: dict[str, Built] = {}
        builders = dict(BUILDERS)  # Syllabus last: under fork, its threads come last
        if args.control:  # the A/A check, built right after gc-overlap
            items, at = list(builders.items()), list(builders).index("gc-overlap") + 1
            builders = dict([*items[:at], ("gc-control", BUILDERS["gymcurric"]), *items[at:]])
        for name, build in builders.items():
            if (name == "gc-slots" and not args.slots) or (
                name == "gc-overlap" and not args.overlap
            ):
                continue
            res: dict[str, Any] = {"status": "ok", "steps_per_s": [], "cpu_us_per_step": []}
            configs[name] = res
            if name == "syllabus" and syl is None:
                res["status"] = "skipped (syllabus-rl not installed or --no-syllabus)"
                continue
            t0 = time.perf_counter()
            known = {p.pid for p in mp.active_children()}
            try:
                with _deadline(args.timeout), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    envs, cleanup = build(ctx, args, syl)
                    live[name] = (envs, cleanup)
                    envs.reset(seed=args.seed)
            except Exception as exc:
                res["status"] = _failure("build", exc)
                if name in live:
                    _close(live.pop(name))
                _stop([p for p in mp.active_children() if p.pid not in known])
            res["build_s"] = time.perf_counter() - t0
        rounds: list[dict[str, float]] = []  # per repeat: config -> steps/s
        for rep in range(args.env_repeats):
            rounds.append({})
            names = list(live)
            shift = rep % max(len(names), 1)
            for name in names[shift:] + names[:shift]:
                if name not in live:
                    continue
                try:
                    with _deadline(args.timeout):
                        rate, cpu, sched = _run_steps(live[name][0], args.env_steps, warmup)
                    configs[name]["steps_per_s"].append(rate)
                    if sched is not None:
                        configs[name].setdefault("sched_per_step", []).append(sched)
                    rounds[-1][name] = rate
                    if cpu is not None:
                        configs[name]["cpu_us_per_step"].append(cpu)
                except Exception as exc:
                    configs[name]["status"] = _failure(f"step (repeat {rep})", exc)
                    _close(live.pop(name))
        for name in list(live):
            _close(live.pop(name), terminate=False)
        _summarise_env(configs, rounds)
        out[ctx] = configs
    return out


def _summarise_env(configs: dict[str, dict[str, Any]], rounds: list[dict[str, float]]) -> None:
    """Medians, bests and ratios to ``plain`` (of medians, and per repeat) into each result."""
    plain = configs["plain"]
    for name, res in configs.items():
        if res["steps_per_s"]:
            res.update(_summary(res["steps_per_s"], higher_is_better=True))
            if plain["steps_per_s"]:
                res["ratio_to_plain"] = res["median"] / statistics.median(plain["steps_per_s"])
        # the ratio within each repeat (configurations measured back to back), then the median:
        # more robust than the ratio of medians to a load that drifts between repeats
        paired = [r[name] / r["plain"] for r in rounds if name in r and "plain" in r]
        if paired:
            res["paired_ratio_to_plain"] = statistics.median(paired)
        if res["cpu_us_per_step"]:
            res["cpu_us_median"] = statistics.median(res["cpu_us_per_step"])
            if plain["cpu_us_per_step"]:
                base = statistics.median(plain["cpu_us_per_step"])
                res["cpu_us_over_plain"] = res["cpu_us_median"] - base
        if res.get("sched_per_step"):  # [switches, involuntary, migrations]: per column
            res["sched_median"] = np.median(res["sched_per_step"], axis=0).tolist()


def _failure(where: str, exc: BaseException) -> str:
    if isinstance(exc, _TimedOut):
        return f"hung during {where}: {exc}"
    return f"crashed during {where}: {type(exc).__name__}: {exc}"


def _close(built: Built, terminate: bool = True) -> None:
    envs, cleanup = built
    procs = list(getattr(envs.unwrapped, "processes", []))
    with contextlib.suppress(Exception), _deadline(30):
        envs.close(terminate=terminate)
    with contextlib.suppress(Exception), _deadline(30):
        cleanup()
    _stop(procs)


# ---------------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run (< 60 s)")
    ap.add_argument("--json", metavar="PATH", help="also write the results here")
    ap.add_argument("--no-syllabus", action="store_true", help="gymcurric side only")
    ap.add_argument("--skip-calls", action="store_true", help="skip part (a)")
    ap.add_argument("--skip-env", action="store_true", help="skip part (b)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.add_argument_group("(a) per-call cost (defaults: full run / --quick)")
    a.add_argument("--sizes", type=int, nargs="+", help="task counts [100 1000 10000 / 100 1000]")
    a.add_argument("--repeats", type=int, help="repetitions per block [5 / 2]")
    a.add_argument("--target-s", type=float, help="seconds per timed block [0.2 / 0.02]")
    a.add_argument("--min-calls", type=int, help="fewest calls per block [300 / 50]")
    a.add_argument("--max-calls", type=int, help="most calls per block [20000 / 2000]")
    a.add_argument("--warm-factor", type=int, help="warm-up episodes per task [10 / 2]")
    a.add_argument("--warm-min", type=int, help="fewest warm-up episodes [10000 / 1000]")
    b = ap.add_argument_group("(b) env throughput (defaults: full run / --quick)")
    b.add_argument("--num-envs", type=int, nargs="+", default=[8], help="sizes, in turn [8]")
    b.add_argument("--episode-length", type=int, default=EPISODE_LENGTH)
    b.add_argument("--env-tasks", type=int, default=1000, help="tasks in both curricula")
    b.add_argument("--env-steps", type=int, help="vector steps per measurement [1500 / 200]")
    b.add_argument("--env-repeats", type=int, help="measurements per configuration [12 / 2]")
    b.add_argument(
        "--slots",
        action="store_true",
        help="also gc-slots: gymcurric with the episodes summed in the workers (a success_fn)",
    )
    b.add_argument(
        "--overlap",
        action="store_true",
        help="also gc-overlap: gymcurric with overlap=True (curriculum work while workers step)",
    )
    b.add_argument(
        "--control", action="store_true", help="also gc-control: gymcurric again, built last"
    )
    b.add_argument(
        "--contexts",
        nargs="+",
        choices=["fork", "forkserver", "spawn"],
        help="start methods, measured in this order [fork forkserver]",
    )
    b.add_argument(
        "--timeout",
        type=float,
        help="seconds before a build or a measurement counts as hung [120 / 60]",
    )
    return ap


_DEFAULTS = {  # name: (full run, --quick)
    "sizes": ([100, 1_000, 10_000], [100, 1_000]),
    "repeats": (5, 2),
    "target_s": (0.2, 0.02),
    "min_calls": (300, 50),
    "max_calls": (20_000, 2_000),
    "warm_factor": (10, 2),
    "warm_min": (10_000, 1_000),
    "env_steps": (1_500, 200),
    "env_repeats": (12, 2),
    "contexts": (["fork", "forkserver"], ["fork", "forkserver"]),
    "timeout": (120.0, 60.0),
}


def _measure_sizes(args: argparse.Namespace, syl: SimpleNamespace | None) -> dict[str, Any]:
    """Part (b) at each ``--num-envs`` size; keys ``ctx`` (one size) or ``ctx/N`` (several)."""
    out: dict[str, Any] = {}
    for n in args.num_envs:
        sized = argparse.Namespace(**{**vars(args), "num_envs": n})
        res = measure_env(sized, syl)
        print_env(res, sized)
        print("  per env step, medians: context switches (all, involuntary), CPU migrations")
        for ctx, name, r in [(c, n, r) for c, cf in res.items() for n, r in cf.items()]:
            if r.get("sched_median"):
                print(f"  {ctx:<11}{name:<11}" + "".join(f"{v:>10.3f}" for v in r["sched_median"]))
        out.update(res if len(args.num_envs) == 1 else {f"{k}/{n}": v for k, v in res.items()})
    print("\npaired env steps/s, ratio to plain (goal of issue 24: gymcurric >= 90 %)")
    for key, configs in out.items():
        cells = "  ".join(
            f"{name} {r['paired_ratio_to_plain']:6.1%}"
            for name, r in configs.items()
            if name != "plain" and "paired_ratio_to_plain" in r
        )
        size = key if "/" in key else f"{key}/{args.num_envs[0]}"
        print(f"  {size.replace('/', ', ')} envs: {cells}")
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables and return the results (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    for name, (full, quick) in _DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    syl = None if args.no_syllabus else load_syllabus()
    results: dict[str, Any] = {"meta": meta(argv, syl), "params": dict(vars(args))}
    info = results["meta"]
    print(
        f"python {info['python']}, numpy {info['numpy']}, gymnasium {info['gymnasium']}, "
        f"syllabus-rl {info['syllabus_rl']}, gymcurric {info['gymcurric_commit']}; "
        f"{info['cpu_count']} CPUs, load average {info['load_average_start']}"
    )
    with warnings.catch_warnings():
        # Syllabus warns from inside its LP updates (e.g. about tasks that its random baseline
        # already solves): printing those would cost it time in the timed loops.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"syllabus(\.|$)")
        if not args.skip_calls:
            results["calls"] = measure_calls(args, syl)
            print_calls(results["calls"], OPS, OP_TITLES)
        if not args.skip_env:
            results["env"] = _measure_sizes(args, syl)
    info["load_average_end"] = load_average()
    print(f"\nload average at the end: {info['load_average_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return results


if __name__ == "__main__":
    main()
