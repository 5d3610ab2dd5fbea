"""Replay benchmark: ReplayRing against SB3's ReplayBuffer, torchrl and a minimal ring, one run.

Workload (issue 7): 16 envs, action 6 float32, synthetic episodes of 500 steps (half truncated);
``pixel`` observations 64x64x3 uint8 and ``vector`` observations 60 float32. Every case is
filled to full plus 10 % through its own add API (the first pass is "add cold"), then, in
interleaved rounds (every case once per round, order rotated), measured on:

* add warm: one vector step (16 transitions) per call, overwriting the oldest rows;
* seq: 16 sequences x 64 steps (ring, minimal ring, torchrl ``SliceSampler``);
* uni: 256 uniform transitions with their next observation.

Figures are medians over rounds of per-call wall time and process CPU time (the host is shared,
so CPU time is the steadier figure); ratios to the minimal ring are medians of per-round
ratios (paired). torch runs with one intra-op thread (``--threads``), as all cases do.

Each case's kernels and host syncs per call (``gymcurric.replay.opcount.count_ops``, one
counted call after the timed ones) are reported beside the timings.

    python benchmarks/replay.py                      # full run (~2-4 min, ~4 GB RAM)
    python benchmarks/replay.py --quick --json out.json

On a GPU (issue 24: the ring within 1.5x of the minimal ring for push, seq and uni), with
observations, actions and rewards already on the device, and numpy or device flags:

    python benchmarks/replay.py --device cuda --obs pixel --flags numpy --json cuda-numpy.json
    python benchmarks/replay.py --device cuda --obs pixel --flags tensor --json cuda-tensor.json

``--cases ring_graphs`` adds the ring with ``cuda_graphs=True`` (uniform draws replayed from a
CUDA graph) and ``--check-graphs`` checks that it draws exactly what the eager ring does.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _replay_cases
from _replay_cases import ALL_CASES, DEVICE_CASES, EXTRA_CASES, Stream, make_case

from gymcurric.replay.opcount import count_ops

OBS = {"pixel": ((64, 64, 3), np.uint8), "vector": ((60,), np.float32)}


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def available(cases: list[str]) -> tuple[list[str], dict[str, str]]:
    skipped: dict[str, str] = {}
    out = []
    for c in cases:
        if c.startswith("torchrl"):
            try:
                import tensordict  # noqa: F401
                import torchrl  # noqa: F401
            except Exception as exc:
                skipped[c] = f"torchrl not importable: {exc}"
                continue
        out.append(c)
    return out, skipped


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(fn: Any, calls: int, device: str = "cpu") -> tuple[float, float]:
    synchronize(device)
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - w0) / calls, (time.process_time() - c0) / calls


def counted(fn: Any) -> tuple[int, int]:
    """Kernels and host syncs of one call (``count_ops``; host reads of tensors included)."""
    with count_ops(host_reads=True) as ops:
        fn()
    return ops.kernels, len(ops.syncs)


def run_kind(kind: str, args: argparse.Namespace, cases: list[str]) -> dict[str, Any]:
    shape, dtype = OBS[kind]
    rows = args.pixel_rows if kind == "pixel" else args.vector_rows
    E = args.num_envs
    built: dict[str, Any] = {}
    streams: dict[str, Stream] = {}
    res: dict[str, dict[str, Any]] = {}
    for name in cases:
        gc.collect()
        r0 = rss_mb()
        case = make_case(name, rows, E, shape, dtype, args.device)
        stream = Stream(E, shape, dtype, seed=0, device=args.device, flags=args.flags)
        steps = [stream.next() for _ in range(min(rows, 256))]
        # cold: the first pass over fresh memory (steps cycled from a small pool)
        w0, c0 = time.perf_counter(), time.process_time()
        for k in range(rows):
            case.add(steps[k % len(steps)] if k < len(steps) else stream.next())
        cold_wall, cold_cpu = time.perf_counter() - w0, time.process_time() - c0
        for _ in range(rows // 10):
            case.add(stream.next())
        built[name] = case
        streams[name] = stream
        res[name] = {
            "storage_mb": case.nbytes / 2**20,
            "rss_delta_mb": rss_mb() - r0,
            "add_cold_steps_per_s": rows / cold_wall,
            "add_cold_cpu_us": 1e6 * cold_cpu / rows,
        }
        print(f"  [{kind}] built {name}: {res[name]['storage_mb']:.0f} MB", flush=True)

    on_device = args.device != "cpu" or args.flags == "tensor"
    phases: dict[str, tuple[int, Any]] = {
        "add": (
            args.add_calls,
            lambda c, g, s: (
                (lambda: c.add(s.next_device())) if on_device else (lambda: c.add(s.next()))
            ),
        ),
        "seq": (args.seq_calls, lambda c, g, s: lambda: c.seq(g)),
        "uni": (args.uni_calls, lambda c, g, s: lambda: c.uni(g)),
    }
    per_round: dict[str, dict[str, list[tuple[float, float]]]] = {
        p: {n: [] for n in cases} for p in phases
    }
    gens = {n: torch.Generator(device=args.device).manual_seed(1) for n in cases}
    for r in range(args.rounds):
        order = cases[r % len(cases) :] + cases[: r % len(cases)]
        for phase, (calls, make_fn) in phases.items():
            for name in order:
                case = built[name]
                if getattr(case, phase) is None:
                    continue
                fn = make_fn(case, gens[name], streams[name])
                fn()  # warm-up call
                per_round[phase][name].append(timed(fn, calls, args.device))
                if r == 0:
                    kernels, syncs = counted(fn)
                    res[name][f"{phase}_kernels"] = kernels
                    res[name][f"{phase}_syncs"] = syncs
    for phase in phases:
        for name in cases:
            runs = per_round[phase][name]
            if not runs:
                continue
            res[name][f"{phase}_wall_us"] = 1e6 * statistics.median(w for w, _ in runs)
            res[name][f"{phase}_cpu_us"] = 1e6 * statistics.median(c for _, c in runs)
            if "minring" in cases and per_round[phase]["minring"]:
                base = per_round[phase]["minring"]
                res[name][f"{phase}_wall_vs_min"] = statistics.median(
                    w / bw for (w, _), (bw, _) in zip(runs, base, strict=True)
                )
                res[name][f"{phase}_cpu_vs_min"] = (
                    statistics.median(
                        c / bc for (_, c), (_, bc) in zip(runs, base, strict=True) if bc > 0
                    )
                    if any(bc > 0 for _, bc in base)
                    else float("nan")
                )
    del built
    gc.collect()
    return {
        "rows": rows,
        "num_envs": E,
        "obs_shape": list(shape),
        "obs_dtype": str(np.dtype(dtype)),
        "cases": res,
    }


def fmt(v: Any, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "n/a"
    return format(v, spec)


def report(kind: str, out: dict[str, Any]) -> None:
    res = out["cases"]
    E = out["num_envs"]
    print(
        f"\n## {kind}: obs {tuple(out['obs_shape'])} {out['obs_dtype']}, "
        f"{out['rows']} rows x {E} envs = {out['rows'] * E:,} steps"
    )
    hdr = (
        "case",
        "add warm vec-steps/s",
        "add CPU us",
        "add cold vec-steps/s",
        "seq 16x64 ms",
        "seq CPU ms",
        "uni 256 ms",
        "uni CPU ms",
        "storage MB",
        "RSS MB",
        "kernels add/seq/uni",
        "syncs add/seq/uni",
    )
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name, r in res.items():
        row = (
            name,
            fmt(1e6 / r["add_wall_us"], ",.0f"),
            fmt(r.get("add_cpu_us")),
            fmt(r["add_cold_steps_per_s"], ",.0f"),
            fmt(r["seq_wall_us"] / 1e3, ".2f") if "seq_wall_us" in r else "n/a",
            fmt(r["seq_cpu_us"] / 1e3, ".2f") if "seq_cpu_us" in r else "n/a",
            fmt(r["uni_wall_us"] / 1e3, ".3f") if "uni_wall_us" in r else "n/a",
            fmt(r["uni_cpu_us"] / 1e3, ".3f") if "uni_cpu_us" in r else "n/a",
            fmt(r["storage_mb"], ",.0f"),
            fmt(r["rss_delta_mb"], ",.0f"),
            "/".join(str(r.get(f"{p}_kernels", "-")) for p in ("add", "seq", "uni")),
            "/".join(str(r.get(f"{p}_syncs", "-")) for p in ("add", "seq", "uni")),
        )
        print("| " + " | ".join(row) + " |")
    ring = res.get("ring")
    if ring and "minring" in res:
        print("\nring / minimal ring (median of paired per-round ratios; goal <= 1.2):")
        for p in ("add", "seq", "uni"):
            if f"{p}_wall_vs_min" in ring:
                w, c = ring[f"{p}_wall_vs_min"], ring[f"{p}_cpu_vs_min"]
                print(f"  {p}: wall {w:.2f}x, CPU {c:.2f}x")
    graphed = res.get("ring_graphs")
    if graphed and "minring" in res and "uni_wall_vs_min" in graphed:
        print(
            f"  uni with cuda_graphs=True: wall {graphed['uni_wall_vs_min']:.2f}x, "
            f"CPU {graphed['uni_cpu_vs_min']:.2f}x"
        )
    if ring and "sb3" in res:
        frac = ring["storage_mb"] / res["sb3"]["storage_mb"]
        print(f"ring storage / SB3 default storage: {frac:.3f} (goal ~0.5)")
    if ring and "torchrl_seq" in res and "seq_wall_us" in res["torchrl_seq"]:
        tr = res["torchrl_seq"]
        w = tr["seq_wall_us"] / ring["seq_wall_us"]
        c = tr["seq_cpu_us"] / ring["seq_cpu_us"]
        print(f"torchrl SliceSampler / ring, seq: wall {w:.1f}x, CPU {c:.1f}x (goal >= 10)")
    if ring and "sb3" in res and "uni_wall_us" in res["sb3"]:
        print(
            f"SB3 sample(256) / ring sample_transitions(256): "
            f"{res['sb3']['uni_wall_us'] / ring['uni_wall_us']:.1f}x wall"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--obs", nargs="+", default=["pixel", "vector"], choices=sorted(OBS))
    ap.add_argument("--cases", nargs="+", default=list(ALL_CASES), choices=ALL_CASES + EXTRA_CASES)
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--pixel-rows", type=int, default=2048)
    ap.add_argument("--vector-rows", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--add-calls", type=int, default=300)
    ap.add_argument("--seq-calls", type=int, default=10)
    ap.add_argument("--uni-calls", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--device",
        default="cpu",
        help="where the ring and the minimal ring live (other than cpu: only those two run)",
    )
    ap.add_argument(
        "--index-strategy",
        choices=("host", "device"),
        default=None,
        help="the ring's index strategy (default: host on CPU, device elsewhere)",
    )
    ap.add_argument(
        "--flags",
        choices=("numpy", "tensor"),
        default="numpy",
        help="per-env flags as numpy arrays or as bool tensors on --device",
    )
    ap.add_argument(
        "--check-graphs",
        action="store_true",
        help="also check that cuda_graphs=True draws exactly what the eager ring does",
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.pixel_rows, args.vector_rows = 96, 128
        args.rounds, args.add_calls, args.seq_calls, args.uni_calls = 2, 5, 2, 2
    torch.set_num_threads(args.threads)
    _replay_cases.INDEX_STRATEGY = args.index_strategy
    if "minring" not in args.cases:
        args.cases.append("minring")
    if args.device != "cpu":
        args.cases = [c for c in args.cases if c in DEVICE_CASES]
    cases, skipped = available(args.cases)
    for c, why in skipped.items():
        print(f"skipping {c}: {why}")
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }
    for mod in ("stable_baselines3", "torchrl", "tensordict", "gymnasium"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            versions[mod] = None
    if args.device.startswith("cuda"):
        versions["cuda_device"] = torch.cuda.get_device_name(args.device)
    print("versions:", versions, "threads:", args.threads, "device:", args.device)
    results: dict[str, Any] = {
        "versions": versions,
        "skipped": skipped,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    if args.check_graphs:
        from _replay_graphs import check

        results["graphs_check"] = check(args.device)
        print("cuda_graphs=True against the eager ring:", json.dumps(results["graphs_check"]))
    for kind in args.obs:
        results[kind] = run_kind(kind, args, cases)
        report(kind, results[kind])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
