"""Metadata and printed tables of ``curriculum_overhead.py`` (kept apart from the measuring)."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["load_average", "meta", "print_calls", "print_env"]


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def meta(argv: Sequence[str], syl: SimpleNamespace | None) -> dict[str, Any]:
    return {
        "command": " ".join(["python", "benchmarks/curriculum_overhead.py", *argv]),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average_start": load_average(),
        "gymcurric_commit": git_commit(),
        "gymnasium": gym.__version__,
        "numpy": np.__version__,
        "syllabus_rl": syl.version if syl is not None else None,
    }


def print_calls(res: dict[str, Any], ops: Sequence[str], titles: dict[str, str]) -> None:
    head = "".join(f"{titles[op]:>22}" for op in ops)
    print("\n(a) per-call cost in us: median of the repetitions (best)")
    print(f"{'tasks':>6}  {'implementation':<17}{'calls':>7}{head}")
    for r in res["rows"]:
        cells = "".join(
            f"{r[f'{op}_us']['median']:>12.2f} ({r[f'{op}_us']['best']:>7.2f})" for op in ops
        )
        print(f"{r['tasks']:>6}  {r['impl']:<17}{r['calls']:>7}{cells}")
    if res["ratios"]:
        print("\n    Syllabus / gymcurric, medians (> 1: gymcurric is faster)")
        titles = "".join(f"{titles[op]:>18}" for op in ops)
        print(f"{'tasks':>6}  {'gymcurric backend':<17}{titles}")
        for r in res["ratios"]:
            cells = "".join(f"{r[op]:>17.1f}x" for op in ops)
            print(f"{r['tasks']:>6}  {r['backend']:<17}{cells}")
    for backend, goals in res["goals"].items():
        text = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in goals.items())
        print(f"    goals at 1,000 tasks, gymcurric-{backend}: {text}")
    if "syllabus_unpatched_sample" in res:
        print(
            f"    unpatched Syllabus OnlineLearningProgress.sample: "
            f"{res['syllabus_unpatched_sample']}"
        )


def print_env(res: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\n(b) AsyncVectorEnv of {args.num_envs} trivial envs, {args.episode_length}-step "
        f"episodes; {args.env_repeats} x {args.env_steps} vector steps per configuration, "
        "interleaved. Ratios to plain: of the medians, and the median of each repeat's ratio"
    )
    print(
        f"  {'context':<11}{'config':<11}{'env steps/s: median (best)':>28}"
        f"{'of plain':>10}{'paired':>9}{'CPU us/env step':>17}{'over plain':>12}"
    )
    for ctx, configs in res.items():
        for name, r in configs.items():
            cells = ""
            if r.get("median") is not None:
                cells = f"{r['median']:>18.0f} ({r['best']:>7.0f})"
                for key, width in (("ratio_to_plain", 10), ("paired_ratio_to_plain", 9)):
                    cells += f"{r[key]:>{width}.1%}" if key in r else " " * width
                if r.get("cpu_us_median") is not None:
                    over = r.get("cpu_us_over_plain", 0.0)
                    cells += f"{r['cpu_us_median']:>17.1f}{over:>+12.1f}"
            note = "" if r["status"] == "ok" else f"  [{r['status']}]"
            print(f"  {ctx:<11}{name:<11}{cells}{note}")
