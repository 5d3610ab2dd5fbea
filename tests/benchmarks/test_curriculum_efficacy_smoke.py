"""benchmarks/curriculum_efficacy.py runs end to end at a tiny budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "curriculum_efficacy.py"


def _module():
    return load_script("curriculum_efficacy")


def test_ci95_matches_student_t():
    mod = _module()
    mean, half = mod.ci95([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mean == 3.0
    assert half == pytest.approx(2.776 * 1.5811388 / 5**0.5, rel=1e-4)


def test_tasks_have_three_buckets_of_nine_valid_tasks():
    import gymnasium as gym

    import gymcurric  # noqa: F401

    mod = _module()
    tasks, ids = mod.tasks()
    assert sorted(len(v) for v in ids.values()) == [9, 9, 9]
    env = gym.make("gymcurric/HazardGrid-v0")
    for t in tasks:
        env.reset(seed=0, options={"task": t})  # the env accepts every task


def test_quick_run_writes_table_json_and_plot(tmp_path):
    mod = _module()
    out = tmp_path / "eff"
    assert (
        mod.main(
            [
                "--quick",
                "--conditions",
                "uniform",
                "manual",
                "--workers",
                "1",
                "--steps",
                "256",
                "--eval-every",
                "100000",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    results = json.loads((out / "results.json").read_text())
    assert {r["condition"] for r in results} == {"uniform", "manual"}
    assert all(r["history"] and set(r["final"]) >= {"easy", "medium", "hard"} for r in results)
    table = (out / "table.md").read_text()
    assert "| uniform | 1 |" in table and "| manual | 1 |" in table
    assert (out / "hard_success.png").stat().st_size > 1000
