"""``gymcurric bench``: run the benchmark scripts and record each one's latest output.

The scripts live in the source checkout's ``benchmarks/`` folder (they are not installed with
the package). Each one's output is written to ``benchmarks/reference/<name>/latest.md`` with the
command, the date, the machine and the git commit. BENCHMARKS.md itself is the curated
results page (one table per area) and is never written by this command: compare a latest run
with its table, and update the table by hand when a result changes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HELP = "run benchmarks/*.py and record their output in benchmarks/reference/*/latest.md"

# name -> (script, default arguments, minutes on 2 CPU cores, in the default set)
BENCHES: dict[str, tuple[str, tuple[str, ...], float, bool]] = {
    "env_speed": ("env_speed.py", (), 2.0, True),
    "curriculum_overhead": ("curriculum_overhead.py", (), 3.0, True),
    "datapack_sampling": ("datapack_sampling.py", (), 2.0, True),
    "semantic_overhead": ("semantic_overhead.py", (), 3.0, True),
    "replay": ("replay.py", (), 3.0, True),
    "safety_gym": (
        "safety_gym.py",
        (
            "--algos",
            "ppo",
            "ppolag",
            "--envs",
            "SafetyPointGoal1-v0",
            "--steps",
            "20000",
            "--seeds",
            "0",
        ),
        15.0,
        False,
    ),
    "curriculum_efficacy": ("curriculum_efficacy.py", (), 60.0, False),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``bench`` options."""
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: the quick ones)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument("--all", action="store_true", help="also the long ones")
    parser.add_argument(
        "--root", default=None, help="the source checkout (default: found from the package)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the results, write no file")


def find_root(root: str | None) -> Path:
    """The checkout that holds ``benchmarks/`` and ``BENCHMARKS.md``."""
    from gymcurric.errors import ConfigError

    candidates = [Path(root)] if root else [Path(__file__).resolve().parents[2], Path.cwd()]
    for c in candidates:
        if (c / "benchmarks").is_dir() and (c / "BENCHMARKS.md").is_file():
            return c
    raise ConfigError(
        "--root",
        root or str(candidates[0]),
        "no benchmarks/ folder and BENCHMARKS.md here: run from a source checkout of gymcurric",
    )  # no source: the CLI's error line names the command


def latest_path(root: Path, name: str) -> Path:
    """Where the latest output of benchmark ``name`` is recorded."""
    return root / "benchmarks" / "reference" / name / "latest.md"


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _note(text: str) -> None:
    """Print ``text`` on stderr; left out where it cannot be written, or there is none.

    As the CLI's error lines: a stderr on ``/dev/full`` ends no run of the benchmarks left
    (the exit code says one failed), and without a stderr (``2>&-``) the text is not printed
    on stdout (``print(file=None)``) among the benchmarks' output.
    """
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run the chosen benchmarks; exit 1 if any failed (the others are still written)."""
    from gymcurric.errors import ConfigError

    if args.list:
        for name, (script, extra, minutes, default) in BENCHES.items():
            tag = "" if default else "  (long: --all or by name)"
            print(f"{name:<20} benchmarks/{script} {' '.join(extra)}  ~{minutes:g} min{tag}")
        return 0
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        raise ConfigError("names", unknown, f"expected some of {sorted(BENCHES)}")
    names = args.names or [n for n, b in BENCHES.items() if b[3] or args.all]
    root = find_root(args.root)
    failed = 0
    for name in names:
        script, extra, _, _ = BENCHES[name]
        path = root / "benchmarks" / script
        if not path.is_file():
            _note(f"{name}: benchmarks/{script} is missing; skipped")
            failed += 1
            continue
        cmd = [sys.executable, str(path), *extra]
        shown = " ".join(["python", f"benchmarks/{script}", *extra])
        print(f"== {name}: {shown}", flush=True)
        start = time.time()
        proc = subprocess.run(
            cmd,
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        elapsed = time.time() - start
        print(proc.stdout, end="")
        if proc.returncode != 0:
            _note(proc.stderr[-4000:])
            failed += 1
            continue
        if args.no_write:
            continue
        load = os.getloadavg()
        body = "\n".join(
            [
                f"command: `{shown}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))}, "
                f"{elapsed:.0f} s, commit `{_commit(root)}`, {platform.machine()} "
                f"{os.cpu_count()} CPUs, load average at the end {load[0]:.2f}",
                "",
                "```",
                proc.stdout.strip(),
                "```",
            ]
        )
        out = latest_path(root, name)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(
            f"# Latest `gymcurric bench` run: {name}\n\n"
            "Written by `gymcurric bench`; the curated figures are in BENCHMARKS.md.\n\n"
            f"{body}\n"
        )
        os.replace(tmp, out)
    return 1 if failed else 0
