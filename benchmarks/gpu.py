"""Issue 24 on a GPU machine, in one command: the CUDA tests, then the GPU benchmarks, with ratios.

Run on a machine with a CUDA device (about 4 minutes; nothing is downloaded):

    python benchmarks/gpu.py --out /tmp/gpu

Parts, each a subprocess with its own time limit, so that one that fails or hangs is recorded
and the others still run:

1. ``tests``: pytest over the suites that hold CUDA cases (``tests/replay``,
   ``tests/semantics``, ``tests/wrappers/vector/test_semantic.py``,
   ``tests/integrations/test_sb3_replay_cuda.py``), CPU and CUDA cases alike;
   a junit XML gives the counts and the failures.
2. ``replay-numpy`` / ``replay-tensor``: ``benchmarks/replay.py --device cuda --obs pixel``,
   the ring against the minimal ring, per-env flags as numpy arrays / as device tensors. Goal:
   ring / minimal ring ≤ 1.5 for push, sequence draws and uniform draws. The ring with
   ``cuda_graphs=True`` (uniform draws replayed from CUDA graphs) runs beside them
   (``uni_graphs``), and the numpy run checks that it draws exactly what the eager ring does
   (``graphs_equal``).
3. ``semantic-torch`` / ``semantic-hf``: ``benchmarks/semantic_overhead.py --model clip-b32
   --num-envs 64``, a ViT-B/32-sized CLIP in bf16, frames preprocessed by torch on the device /
   by the HF processor on the CPU (the slow baseline, at half the steps). Goal: the vector
   wrapper at ≥ 80 % of the model's forward throughput. ``semantic-torch`` also measures the
   torch path with ``graphs=True`` (preprocessing and forward replayed as CUDA graphs), against
   the eager forward and against the forward replayed as a CUDA graph, and checks its
   embeddings against the eager path's on the device (``graph_check``: cosine ≥ 0.999).
4. ``curriculum``: ``benchmarks/curriculum_overhead.py``'s env part, ``make_curriculum_vec``
   against a plain ``AsyncVectorEnv`` of 8 and 15 trivial envs (fork), paired, with the
   wrapper's per-step work before each step (``overlap=False``) and overlapped with the
   workers (``gc-overlap``, ``overlap=True``, the default since the spare-task channel).
   Goal: ≥ 90 % of plain.

Each part writes its log and JSON into ``--out``; ``gpu.json`` collects the versions, the
device, each part's exit status and duration, and the ratios; the summary printed last gives
them beside their goals.

Packages the GPU image lacks (gymnasium, Farama-Notifications) travel as wheels; see
``/work/.library/device/README.md`` in this workplace, or install them with pip elsewhere.
``--device cpu --quick`` runs every part at smoke size on a machine without a GPU (the test of
this script does that; the tests part then runs only the replay ring's index tests).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

TEST_PATHS = [
    "tests/replay",
    "tests/semantics",
    "tests/wrappers/vector/test_semantic.py",
    "tests/integrations/test_sb3_replay_cuda.py",
]
QUICK_TEST_PATHS = ["tests/replay/test_ring_ops.py"]
GOALS = {"replay": 1.5, "semantic": 0.8, "curriculum": 0.9}


def run_part(
    name: str, cmd: list[str], out: Path, timeout: float, env: dict[str, str]
) -> dict[str, Any]:
    """Run one part; its output goes to ``<out>/<name>.log``; never raises."""
    log = out / f"{name}.log"
    started = time.perf_counter()
    print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
    try:
        with log.open("w") as fh:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout
            )
        rc: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    seconds = time.perf_counter() - started
    tail = log.read_text(errors="replace").splitlines()[-25:]
    print("\n".join(tail), flush=True)
    print(f"=== {name}: rc {rc}, {seconds:.0f} s", flush=True)
    return {"cmd": cmd, "rc": rc, "seconds": round(seconds, 1)}


def junit_counts(path: Path) -> dict[str, Any]:
    """Passed / failed / skipped counts and the failing test ids from a pytest junit XML."""
    if not path.exists():
        return {"error": f"no junit file {path}"}
    root = ET.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing: list[str] = []
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        test_id = f"{case.get('classname')}::{case.get('name')}"
        if "failure" in kinds:
            counts["failed"] += 1
            failing.append(test_id)
        elif "error" in kinds:
            counts["errors"] += 1
            failing.append(test_id)
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    cuda = sum(1 for c in root.iter("testcase") if "cuda" in (c.get("name") or ""))
    return counts | {"cases_named_cuda": cuda, "failing": failing}


def replay_ratios(path: Path) -> dict[str, Any]:
    """ring / minimal ring, wall clock, for add / seq / uni (medians of paired rounds); uni with
    ``cuda_graphs=True`` as ``uni_graphs``; the graphs' equality check as ``graphs_equal``."""
    if not path.exists():
        return {}
    results = json.loads(path.read_text())
    cases = results["pixel"]["cases"]
    ring = cases.get("ring", {})
    ratios: dict[str, Any] = {
        p: ring[f"{p}_wall_vs_min"] for p in ("add", "seq", "uni") if f"{p}_wall_vs_min" in ring
    }
    graphed = cases.get("ring_graphs", {})
    if "uni_wall_vs_min" in graphed:
        ratios["uni_graphs"] = graphed["uni_wall_vs_min"]
    if "graphs_check" in results:
        ratios["graphs_equal"] = results["graphs_check"]["equal"]
    return ratios


def semantic_fractions(path: Path) -> dict[str, Any]:
    """The wrapper's throughput / the model's forward throughput, per preprocessing path.

    A graphed run (``graphs=True``) gives two figures, against the eager forward pass and
    against the forward pass replayed as a CUDA graph (``"<model> / graphed forward"``), and
    its check against the eager embeddings (``"<model> check"``: ok and the smallest cosine).
    """
    if not path.exists():
        return {}
    fractions: dict[str, Any] = {}
    for m in json.loads(path.read_text())["models"]:
        if "fraction_of_forward_interleaved" in m:
            fractions[m["model"]] = m["fraction_of_forward_interleaved"]["wall"]
        if "fraction_of_graphed_forward_interleaved" in m:
            graphed = m["fraction_of_graphed_forward_interleaved"]["wall"]
            fractions[f"{m['model']} / graphed forward"] = graphed
        if "graph_check" in m:
            check = m["graph_check"]
            cos = min(check[k]["min_cos"] for k in ("full", "reversed", "padded"))
            fractions[f"{m['model']} check"] = {"ok": check["ok"], "min_cos": round(cos, 6)}
    return fractions


def curriculum_ratio(path: Path) -> dict[str, Any]:
    """Paired ratio to plain per ``<start method>/<envs>``: serial, overlapped, A/A control."""
    if not path.exists():
        return {}
    found: dict[str, Any] = {}
    for key, configs in json.loads(path.read_text()).get("env", {}).items():
        for name in ("gymcurric", "gc-overlap", "gc-control"):
            res = configs.get(name, {})
            if res:
                found[f"{key} {name}"] = res.get("paired_ratio_to_plain", res.get("status"))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu-results"), help="logs and JSON here")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (smoke run)")
    ap.add_argument("--quick", action="store_true", help="smoke sizes")
    ap.add_argument(
        "--parts",
        nargs="+",
        default=["tests", "replay", "semantic", "curriculum"],
        choices=["tests", "replay", "semantic", "curriculum"],
    )
    ap.add_argument("--workers", type=int, default=8, help="pytest-xdist workers, if installed")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    import numpy as np
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            f"--device {args.device}: torch {torch.__version__} sees no CUDA device; "
            "use --device cpu --quick for a smoke run"
        )
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    py = sys.executable
    summary: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": args.device,
        "quick": args.quick,
        "host": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
        "parts": {},
    }
    for mod in ("gymnasium", "transformers"):
        try:
            summary["versions"][mod] = __import__(mod).__version__
        except ImportError:
            summary["versions"][mod] = None
    if args.device.startswith("cuda"):
        summary["versions"]["cuda_device"] = torch.cuda.get_device_name(args.device)
        summary["versions"]["cuda"] = torch.version.cuda
    print(json.dumps(summary["versions"]), flush=True)
    parts = summary["parts"]
    quick = ["--quick"] if args.quick else []

    if "tests" in args.parts:
        xml = out / "tests.xml"
        cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
        try:
            import xdist  # noqa: F401

            cmd += ["-n", str(args.workers)]
        except ImportError:
            pass
        cmd += QUICK_TEST_PATHS if args.quick else TEST_PATHS
        parts["tests"] = run_part("tests", cmd, out, 150, env) | junit_counts(xml)

    if "replay" in args.parts:
        for flags in ("numpy", "tensor"):
            js = out / f"replay-{flags}.json"
            cmd = [
                py,
                str(HERE / "replay.py"),
                "--device",
                args.device,
                "--obs",
                "pixel",
                "--cases",
                "ring",
                "ring_graphs",
                "minring",
                "--flags",
                flags,
                *(["--check-graphs"] if flags == "numpy" else []),
                "--json",
                str(js),
                *(quick or ["--rounds", "5"]),
            ]
            parts[f"replay-{flags}"] = run_part(f"replay-{flags}", cmd, out, 90, env) | {
                "ring_vs_min": replay_ratios(js)
            }

    if "semantic" in args.parts:  # one process per preprocessing path: a timeout loses one
        # the HF processor (100 ms per step) is the slow baseline: half the steps, two rounds
        for path, limit, steps, rounds, extra in (
            ("torch", 130, "32", "3", ["--graphs"]),
            ("hf", 80, "16", "2", []),
        ):
            js = out / f"semantic-{path}.json"
            full = ["--model", "clip-b32", "--num-envs", "64", "--steps", steps, "--rounds", rounds]
            sizes = ["--quick"] if args.quick else full
            cmd = [
                py,
                str(HERE / "semantic_overhead.py"),
                "--device",
                args.device,
                "--no-minilm",
                "--preprocess",
                path,
                *extra,
                *sizes,
                "--json",
                str(js),
            ]
            parts[f"semantic-{path}"] = run_part(f"semantic-{path}", cmd, out, limit, env) | {
                "fraction_of_forward": semantic_fractions(js)
            }

    if "curriculum" in args.parts:  # overlap=False and True, and overlap=False again (A/A)
        js = out / "curriculum.json"
        sizes = ["--quick"] if args.quick else ["--env-steps", "800", "--env-repeats", "8"]
        cmd = [py, str(HERE / "curriculum_overhead.py"), "--skip-calls", "--no-syllabus",
               "--contexts", "fork", "--overlap", "--control", "--num-envs", "8", "15",
               "--timeout", "30",
               *sizes, "--json", str(js)]  # fmt: skip
        parts["curriculum"] = run_part("curriculum", cmd, out, 120, env) | {
            "ratio_to_plain": curriculum_ratio(js)
        }

    (out / "gpu.json").write_text(json.dumps(summary, indent=2))
    print("\n== summary (goals: replay ring / minimal ≤ 1.5, semantic ≥ 0.8, curriculum ≥ 0.9)")
    for name, part in parts.items():
        figures = {k: v for k, v in part.items() if k not in ("cmd", "failing")}
        print(f"{name}: {json.dumps(figures)}")
        for test_id in part.get("failing", []):
            print(f"  FAILED {test_id}")
    ok = all(p["rc"] == 0 for p in parts.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
