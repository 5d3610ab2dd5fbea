"""benchmarks/safety_gym.py runs end to end on the built-in env (structure only, no timings)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
ALGOS = ["ppo", "ppolag", "pidlag", "trpolag"]


def test_safety_gym_benchmark_quick(tmp_path):
    """Two runs at a time (--jobs 2); then --summarize-only rebuilds the same summary."""
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "safety_gym.py"),
            "--algos",
            *ALGOS,
            "--envs",
            "gymcurric/HazardNav-v0",
            "--steps",
            "128",
            "--seeds",
            "0",
            "--n-steps",
            "64",
            "--speed-steps",
            "64",
            "--speed-repeats",
            "1",
            "--jobs",
            "2",
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for algo in ALGOS:
        for seed in (0,):
            with open(tmp_path / "runs" / f"{algo}__HazardNav-v0__s{seed}.csv") as f:
                rows = list(csv.DictReader(f))
            assert [int(r["timesteps"]) for r in rows] == [64, 128]
            assert {"ep_return", "ep_cost", "lagrange_multiplier", "wall_s"} <= set(rows[0])
    with open(tmp_path / "summary.csv") as f:
        summary = list(csv.DictReader(f))
    assert [r["algo"] for r in summary] == ALGOS
    # no episode of 200 steps ends within 128 steps: "n/a", else "mean ± std"
    assert all(r["cost"] == "n/a" or "±" in r["cost"] for r in summary)
    assert (tmp_path / "curves_HazardNav-v0.png").stat().st_size > 1000
    speed = json.loads((tmp_path / "speed.json").read_text())
    assert speed["ratio_wall"] > 0 and speed["ratio_cpu"] > 0
    with open(tmp_path / "runs" / "ppolag__HazardNav-v0__s0_episodes.csv") as f:
        assert next(csv.reader(f)) == ["timesteps", "return", "cost"]
    before = (tmp_path / "summary.csv").read_text()
    (tmp_path / "summary.csv").unlink()
    subprocess.run(
        [
            *(sys.executable, str(ROOT / "benchmarks" / "safety_gym.py"), "--algos", *ALGOS),
            *("--envs", "gymcurric/HazardNav-v0", "--steps", "128", "--seeds", "0"),
            *("--summarize-only", "--out", str(tmp_path)),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (tmp_path / "summary.csv").read_text() == before
