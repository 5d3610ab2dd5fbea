"""Smoke tests of ``benchmarks/curriculum_worker_cost.py``, ``curriculum_main_cost.py`` and
``curriculum_update_batch.py``: tiny sizes, structure of the results only (timings are never
asserted in tests)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script, *args):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout


def test_worker_cost_reports_every_configuration():
    text = _run(
        "curriculum_worker_cost.py",
        *("--context", "fork", "--num-envs", "2", "--tasks", "20"),
        *("--repeats", "1", "--steps", "60"),
    )
    for name in ("plain", "worker-side", "channel", "channel-main"):
        row = next(line.split() for line in text.splitlines() if line.split()[:1] == [name])
        assert len(row) == 7 and all(float(v) == float(v) for v in row[1:])


def test_update_batch_reports_every_size():
    text = _run(
        "curriculum_update_batch.py",
        *("--tasks", "50", "--episodes", "256", "--repeats", "1", "--sizes", "8", "64"),
    )
    assert "50 tasks: recompute" in text
    for way in ("update ", "update_batch(8)", "update_batch(64)"):
        assert any(
            line.strip().startswith(way) and "us/episode" in line for line in text.splitlines()
        )


def test_main_cost_reports_every_configuration():
    # the script itself checks that the channel-main replay reported every ended episode once
    for mode in ("next-step", "same-step"):
        text = _run(
            "curriculum_main_cost.py",
            *("--autoreset", mode, "--num-envs", "2", "--tasks", "20"),
            *("--steps", "50", "--repeats", "2", "--async-repeats", "2"),
        )
        assert "AsyncVectorEnv.step itself (fork, median of 2 runs): plain env" in text
        for name in ("plain", "ids-only", "channel-main"):
            row = next(line.split() for line in text.splitlines() if line.split()[:1] == [name])
            assert row[1] == "extra" and float(row[2]) == float(row[2])
