"""benchmarks/env_speed.py runs end to end (structure only; timings are never asserted)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_env_speed_quick(tmp_path):
    out = tmp_path / "speed.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "env_speed.py"),
            "--quick",
            "--no-safety",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = json.loads(out.read_text())
    for env_id in ("gymcurric/HazardNav-v0", "gymcurric/HazardGrid-v0"):
        row = results["builtin"][env_id]
        assert set(row) == {"raw", "make", "raw+render", "make+render", "make+cost"}
        assert all(v > 0 for v in row.values())
