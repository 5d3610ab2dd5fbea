"""Smoke test of ``benchmarks/curriculum_overhead.py``: the ``--quick`` path, tiny sizes.

Runs the script in a subprocess and checks the structure of what it reports; no timing is
asserted (timings are never asserted in tests). The Syllabus side runs only where
``syllabus-rl`` is installed; the script skips it otherwise, and ``--no-syllabus`` forces that.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "curriculum_overhead.py"
HAS_SYLLABUS = importlib.util.find_spec("syllabus") is not None
OPS = ("sample", "update", "episode", "batch")
TINY = [
    "--quick",
    "--sizes", "50",
    "--repeats", "1",
    "--target-s", "0.001",
    "--min-calls", "20",
    "--max-calls", "200",
    "--warm-factor", "1",
    "--warm-min", "200",
    "--num-envs", "2",
    "--env-tasks", "20",
    "--env-steps", "30",
    "--env-repeats", "1",
    "--timeout", "20",
]  # fmt: skip


def _run(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, *extra, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(a) per-call cost" in proc.stdout
    assert "(b) AsyncVectorEnv" in proc.stdout
    return json.loads(out.read_text())


def _check_rows(calls: dict, impls: set[str]) -> None:
    assert {row["impl"] for row in calls["rows"]} == impls
    for row in calls["rows"]:
        assert row["tasks"] == 50
        assert row["calls"] >= 20
        for op in OPS:
            cell = row[f"{op}_us"]
            assert 0 < cell["best"] <= cell["median"]


def _check_gymcurric_env(configs: dict) -> None:
    for name in ("plain", "gymcurric"):
        res = configs[name]
        assert res["status"] == "ok", res["status"]
        assert len(res["steps_per_s"]) == 1
        assert res["median"] == res["best"] == res["steps_per_s"][0] > 0
    assert configs["plain"]["ratio_to_plain"] == 1.0
    assert configs["gymcurric"]["ratio_to_plain"] > 0
    assert configs["gymcurric"]["paired_ratio_to_plain"] > 0


def test_quick_run_reports_both_parts(tmp_path):
    results = _run(tmp_path)
    meta = results["meta"]
    assert meta["cpu_count"] >= 1
    assert meta["gymcurric_commit"]
    assert set(results["env"]) == {"fork", "forkserver"}
    for configs in results["env"].values():
        _check_gymcurric_env(configs)
        assert isinstance(configs["syllabus"]["status"], str)  # Syllabus may crash or hang
    calls = results["calls"]
    if HAS_SYLLABUS:
        assert meta["syllabus_rl"]
        _check_rows(calls, {"gymcurric-local", "gymcurric-shared", "syllabus"})
        assert [(r["tasks"], r["backend"]) for r in calls["ratios"]] == [
            (50, "local"),
            (50, "shared"),
        ]
        assert all(r[op] > 0 for r in calls["ratios"] for op in OPS)
        assert isinstance(calls["syllabus_unpatched_sample"], str)
    else:
        _check_rows(calls, {"gymcurric-local", "gymcurric-shared"})
        assert calls["ratios"] == []


def test_no_syllabus_runs_the_gymcurric_side_only(tmp_path):
    results = _run(
        tmp_path, "--no-syllabus", "--contexts", "fork", "--slots", "--overlap", "--control"
    )
    assert results["meta"]["syllabus_rl"] is None
    calls = results["calls"]
    _check_rows(calls, {"gymcurric-local", "gymcurric-shared"})
    assert calls["ratios"] == []
    assert "syllabus_unpatched_sample" not in calls
    configs = results["env"]["fork"]
    _check_gymcurric_env(configs)
    assert configs["syllabus"]["status"].startswith("skipped")
    assert configs["syllabus"]["steps_per_s"] == []
    slots = configs["gc-slots"]
    assert slots["status"] == "ok" and slots["paired_ratio_to_plain"] > 0
    # the A/A check (gymcurric built again, after gc-overlap) and the scheduler counts
    assert list(configs).index("gc-control") == list(configs).index("gc-overlap") + 1
    for name in ("gc-overlap", "gc-control"):
        assert configs[name]["status"] == "ok" and configs[name]["paired_ratio_to_plain"] > 0
    if sys.platform == "linux":  # context switches (all, involuntary), migrations per env step
        switches, involuntary, migrations = configs["gc-control"]["sched_median"]
        assert switches > 0 and 0 <= involuntary <= switches and migrations >= 0
