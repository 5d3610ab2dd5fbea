"""benchmarks/curriculum_simulated.py: the simulated learner and a quick run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.benchmarks import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "curriculum_simulated.py"


def _module():
    return load_script("curriculum_simulated")


def test_the_learner_follows_its_families():
    mod = _module()
    learner = mod.Learner.make("primary", seed=0)
    kinds = learner.kinds
    assert [int((kinds == k).sum()) for k in range(4)] == list(mod.SPACES["primary"])
    trivial = int(kinds.tolist().index(mod.TRIVIAL))
    unreachable = int(kinds.tolist().index(mod.UNREACHABLE))
    learnable = int(learner.learnable[0])
    assert all(learner.episode(trivial) for _ in range(20))
    assert not any(learner.episode(unreachable) for _ in range(200))
    assert learner.mastered_share() == 0.0
    wins = [learner.episode(learnable) for _ in range(400)]  # far past its sigmoid's centre
    assert sum(wins[:20]) <= 2 and sum(wins[-50:]) >= 45
    assert learner.practice[learnable] == 400


def test_the_same_seed_gives_the_same_run():
    mod = _module()
    a = mod.run("mostly", "lp", seed=3, budget=1_000)
    b = mod.run("mostly", "lp", seed=3, budget=1_000)
    assert a == b
    assert abs(sum(a["share"].values()) - 1.0) < 1e-9


def test_the_oracle_masters_the_feasible_space_and_writes_json(tmp_path):
    out = tmp_path / "runs.json"
    text = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--spaces", "feasible", "--json", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "feasible: episodes until 80%" in text
    runs = json.loads(out.read_text())["runs"]
    assert {r["condition"] for r in runs} == set(_module().CONDITIONS)
    oracle = [r for r in runs if r["condition"] == "oracle"]
    assert all(r["reached"] and r["share"]["uncontrollable"] == 0.0 for r in oracle)
