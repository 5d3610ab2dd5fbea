"""Training runs for the runner, resume, checkpoint and CLI tests: configs, data, processes.

Shared by ``test_runner.py``, ``test_resume.py``, ``test_checkpoint.py``, ``test_cli.py``,
``test_cli_shaping.py`` and ``test_spec_flags.py``: :func:`run_config` is a small HazardGrid
run, :func:`write_packs` writes datapacks for it, :func:`run_cli` and :func:`run_script` run
gymcurric in a new interpreter, and :func:`progress_rows`, :func:`monitor_rows` and
:func:`same_params` compare what two runs wrote.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import torch

from gymcurric.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]

SPACE = {
    "type": "bucketed",
    "params": {
        "goal_distance": [{"min": 1, "max": 3}, {"min": 4, "max": 7}],
        "num_hazards": [0, 5],
    },
    "base": {"size": 8, "max_steps": 40},
}
POOL = {"pool": {"type": "DualPool", "explore_size": 4, "exploit_size": 4, "min_samples": 4}}


def run_config(total: int = 512, **sections: Any) -> TrainConfig:
    """A curriculum run of ``total`` steps on 2 HazardGrid envs; ``sections`` update its parts."""
    data: dict[str, Any] = {
        "env": {"id": "gymcurric/HazardGrid-v0", "num_envs": 2},
        "curriculum": {"enabled": True, "space": SPACE, "config": POOL},
        "agent": {"kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 2}},
        "run": {
            "total_steps": total,
            "checkpoint_every": 256,
            "plots": False,
            "progress_bar": False,
        },
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return TrainConfig.from_dict(data)


def write_packs(tmp_path: Path, n: int = 12) -> Path:
    """``n`` HazardGrid datapacks in ``tmp_path / "packs"``, over tiers 0-2."""
    from tests.datapacks.packs import record

    folder = tmp_path / "packs"
    folder.mkdir(exist_ok=True)
    lines = []
    for i in range(n):
        rec = record(
            f"p{i}",
            env_id="gymcurric/HazardGrid-v0",
            tier=i % 3,
            seed=i,
            task_params={
                "goal_distance": 1 + i % 5,
                "num_hazards": i % 4,
                "size": 8,
                "max_steps": 40,
            },
        )
        rec["supervision_hints"]["prerequisite_tags"] = []
        lines.append(json.dumps(rec))
    (folder / "packs.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def run_cli(*args: str, check: bool = True, timeout: float = 300) -> Any:
    """``python -m gymcurric *args`` in a new interpreter; a failure raises unless not ``check``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"exit {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out


def run_script(code: str, *, check: bool = True, timeout: float = 300) -> Any:
    """``code`` (dedented) run by ``python -c`` in a new interpreter, its output captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=check,
    )


def progress_rows(path: Path, drop: tuple[str, ...] = ("time/",)) -> list[dict[str, str]]:
    """progress.csv without wall-clock measures (times, latencies)."""
    with open(path) as f:
        return [
            {k: v for k, v in r.items() if not k.startswith(drop) and "latency" not in k}
            for r in csv.DictReader(f)
        ]


def monitor_rows(run: Path) -> list[dict[str, str]]:
    """Every episode row of a run (monitor.csv and the resumed parts), without wall times."""
    rows = []
    for p in sorted(run.glob("*monitor.csv"), key=lambda p: (p.name != "monitor.csv", p.name)):
        lines = p.read_text().splitlines()[1:]  # the JSON header line
        rows += [{k: v for k, v in r.items() if k != "t"} for r in csv.DictReader(lines)]
    return rows


def same_params(a: Path, b: Path) -> bool:
    """The same weights, optimiser states and extra torch variables (any algorithm)."""
    from stable_baselines3.common.save_util import load_from_zip_file

    _, pa, va = load_from_zip_file(a, device="cpu")
    _, pb, vb = load_from_zip_file(b, device="cpu")

    def flat(x: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(x, dict):
            return {k2: v2 for k, v in x.items() for k2, v2 in flat(v, f"{prefix}/{k}").items()}
        if isinstance(x, list | tuple):
            return {k2: v2 for i, v in enumerate(x) for k2, v2 in flat(v, f"{prefix}/{i}").items()}
        return {prefix: x}

    fa, fb = flat({"p": pa, "v": va}), flat({"p": pb, "v": vb})
    assert fa.keys() == fb.keys()
    return all(
        torch.equal(fa[k], fb[k]) if isinstance(fa[k], torch.Tensor) else fa[k] == fb[k] for k in fa
    )
