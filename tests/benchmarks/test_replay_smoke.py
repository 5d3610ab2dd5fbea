"""Smoke test of ``benchmarks/replay.py``: the ``--quick`` path, tiny sizes, structure only.

No timing is asserted. torchrl is optional: the script skips its cases when it cannot be
imported, and the test accepts either.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "replay.py"
HAS_TORCHRL = importlib.util.find_spec("torchrl") is not None


def test_replay_benchmark_quick(tmp_path):
    out = tmp_path / "r.json"
    cases = ["ring", "minring", "sb3", "sb3_opt", "sb3_api_ring", "torchrl_seq"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--obs", "vector", "--cases", *cases,
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(out.read_text())
    got = res["vector"]["cases"]
    expect = set(cases) if HAS_TORCHRL else set(cases) - {"torchrl_seq"}
    assert set(got) == expect
    ring = got["ring"]
    for key in ("add_wall_us", "seq_wall_us", "uni_wall_us", "add_wall_vs_min", "storage_mb"):
        assert ring[key] > 0, key
    assert "seq_wall_us" not in got["sb3"] and got["sb3"]["uni_wall_us"] > 0
    # observations stored once: less than SB3's default storage
    assert ring["storage_mb"] < got["sb3"]["storage_mb"]
    assert "ring / minimal ring" in proc.stdout
