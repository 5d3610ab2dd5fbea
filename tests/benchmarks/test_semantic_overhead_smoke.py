"""benchmarks/semantic_overhead.py runs end to end (structure only; timings are never asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_semantic_overhead_quick(tmp_path):
    out = tmp_path / "semantic.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "semantic_overhead.py"),
            "--quick",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads(out.read_text())
    assert results["num_envs"] == 16
    names = [m["model"] for m in results["models"]]
    # the tiny CLIP once per preprocessing path (issue 24), then MiniLM without and with cache
    assert len(names) == 4 and all(n.startswith("tiny-clip") for n in names[:2])
    for m in results["models"]:
        assert m["status"].startswith("ok")
        assert set(m["steps_per_s"]) == {"baseline", "interval_1", "interval_4", "interval_16"}
        assert all(v["wall"] > 0 and v["cpu"] > 0 for v in m["steps_per_s"].values())
        assert m["fraction_of_raw"]["cpu"] > 0
        assert m["fraction_of_raw_median"]["cpu"] > 0
        assert m["per_step_ms_cpu"]["model_raw"] > 0
    assert "render" in results["models"][0]["per_step_ms_cpu"]  # frames: render timed apart
    assert "render" not in results["models"][2]["per_step_ms_cpu"]  # captions: nothing to render


def test_semantic_overhead_tiny_only(tmp_path):
    out = tmp_path / "semantic.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "semantic_overhead.py"),
            "--quick",
            "--no-minilm",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    models = json.loads(out.read_text())["models"]
    assert [m["preprocess"] for m in models] == ["torch", "hf"]  # both paths, side by side
    for model in models:
        assert model["status"].startswith("ok: clip")
        assert model["status"].endswith(f"preprocess={model['preprocess']}")
        assert set(model["steps_per_s"]) == {"baseline", "interval_1", "interval_4", "interval_16"}
        assert model["fraction_of_forward_interleaved"]["wall"] > 0
        assert set(model["per_step_ms_wall"]) == {
            "forward",
            "preprocess",
            "raw_embed",
            "wrapper_at_interval_1",
        }
    assert models[0]["pixel_check"]["max_levels"] <= 2  # the torch path against HF's pixels
    assert "pixel_check" not in models[1]


@pytest.mark.slow
def test_semantic_overhead_graphs(tmp_path):
    out = tmp_path / "semantic.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "semantic_overhead.py"), "--quick",
         "--no-minilm", "--preprocess", "torch", "--graphs", "--json", str(out)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    eager, graphed = json.loads(out.read_text())["models"]
    assert "graphs" not in eager["model"] and "fraction_of_graphed_forward_interleaved" not in eager
    assert graphed["model"].endswith("graphs=eager)") and graphed["graph_mode"] == "eager"
    assert graphed["status"].endswith("preprocess=torch graphs=eager")
    assert graphed["fraction_of_forward_interleaved"]["wall"] > 0  # the eager anchor
    assert graphed["fraction_of_graphed_forward_interleaved"]["wall"] > 0  # the graphed one
    assert graphed["per_step_ms_wall"]["forward_graphed"] > 0
    check = graphed["graph_check"]
    assert check["ok"] and check["first_result_kept"]
    assert [check[k]["rows"] for k in ("full", "reversed", "padded")] == [16, 16, 10]
    assert min(check[k]["min_cos"] for k in ("full", "reversed", "padded")) > 0.99999
