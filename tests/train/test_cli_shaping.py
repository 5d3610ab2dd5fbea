"""``gymcurric train shaping.enabled=true`` when the shaping model cannot be loaded."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("stable_baselines3")

from gymcurric import cli
from tests.train.run_harness import run_config


def test_train_with_shaping_and_a_missing_model_runs_unshaped(tmp_path, capsys):
    # HazardGrid writes captions and has no render_mode: shaping degrades, training goes on
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_config(128).to_dict()))
    run_dir = tmp_path / "run"
    args = ["train", "--config", str(path), "--run-dir", str(run_dir), "shaping.enabled=true"]
    args.append(f"shaping.params.embedder={tmp_path / 'no-such-model'}")
    with pytest.warns(RuntimeWarning, match=r"semantic shaping: failed: load"):
        code = cli.main(args)
    assert code == 0, capsys.readouterr().err
    with open(run_dir / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and rows[-1]["semantics/status"].startswith("failed: load")
