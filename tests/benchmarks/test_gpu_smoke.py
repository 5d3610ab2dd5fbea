"""Smoke test of ``benchmarks/gpu.py`` on CPU: its parts run and its summary reads their JSON.

No timing is asserted. The GPU run itself needs a CUDA device (issue 24).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.benchmarks import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


@pytest.mark.slow  # its replay part is benchmarks/replay.py, smoke-tested in the default suite
def test_gpu_script_quick_on_cpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--parts", "replay",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((tmp_path / "gpu.json").read_text())
    parts = summary["parts"]
    assert set(parts) == {"replay-numpy", "replay-tensor"}
    for flags in ("numpy", "tensor"):
        ratios = parts[f"replay-{flags}"]["ring_vs_min"]
        timed = {"add", "seq", "uni", "uni_graphs"}
        assert set(ratios) - {"graphs_equal"} == timed and all(ratios[p] > 0 for p in timed)
    # cuda_graphs=True draws what the eager ring draws (here its captured form runs eagerly)
    assert parts["replay-numpy"]["ring_vs_min"]["graphs_equal"] is True
    assert (tmp_path / "replay-numpy.log").read_text()
    assert "== summary" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_gpu_script_without_cuda_says_so(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "sees no CUDA device" in proc.stdout and "--device cpu --quick" in proc.stdout


def test_junit_counts_reads_passes_failures_and_skips(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.a" name="test_ok[cuda]"/>'
        '<testcase classname="tests.a" name="test_bad"><failure message="x"/></testcase>'
        '<testcase classname="tests.a" name="test_err"><error message="y"/></testcase>'
        '<testcase classname="tests.a" name="test_skip[cuda]"><skipped message="z"/></testcase>'
        "</testsuite></testsuites>"
    )
    gpu = load_script("gpu")
    got = gpu.junit_counts(xml)
    assert {k: got[k] for k in ("passed", "failed", "errors", "skipped")} == {
        "passed": 1, "failed": 1, "errors": 1, "skipped": 1,
    }  # fmt: skip
    assert got["cases_named_cuda"] == 2
    assert got["failing"] == ["tests.a::test_bad", "tests.a::test_err"]
    assert "error" in gpu.junit_counts(tmp_path / "missing.xml")


def test_semantic_fractions_give_both_anchors_of_a_graphed_run(tmp_path):
    js = tmp_path / "semantic-torch.json"
    check = {k: {"rows": 64, "min_cos": 0.9996, "max_abs": 1e-3} for k in ("full", "reversed")}
    check["padded"] = {"rows": 40, "min_cos": 0.9993, "max_abs": 2e-3}
    js.write_text(json.dumps({"models": [
        {"model": "clip (eager)", "fraction_of_forward_interleaved": {"wall": 0.62}},
        {"model": "clip (graphs)", "fraction_of_forward_interleaved": {"wall": 1.4},
         "fraction_of_graphed_forward_interleaved": {"wall": 0.45},
         "graph_check": check | {"ok": True}},
    ]}))  # fmt: skip
    assert load_script("gpu").semantic_fractions(js) == {
        "clip (eager)": 0.62,
        "clip (graphs)": 1.4,
        "clip (graphs) / graphed forward": 0.45,
        "clip (graphs) check": {"ok": True, "min_cos": 0.9993},
    }


def test_curriculum_ratios_include_the_a_a_control(tmp_path):
    js = tmp_path / "curriculum.json"
    ratios = {"plain": 1.0, "gymcurric": 0.81, "gc-overlap": 0.8, "gc-control": 0.78}
    configs = {k: {"paired_ratio_to_plain": r} for k, r in ratios.items()}
    configs["syllabus"] = {"status": "skipped"}
    js.write_text(json.dumps({"env": {"fork/8": configs}}))
    assert load_script("gpu").curriculum_ratio(js) == {
        "fork/8 gymcurric": 0.81,
        "fork/8 gc-overlap": 0.8,
        "fork/8 gc-control": 0.78,
    }
