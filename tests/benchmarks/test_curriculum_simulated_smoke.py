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
    args = ["--quick", "--spaces", "feasible", "--learners", "independent", "--json", str(out)]
    text = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "independent learner, feasible: episodes until 80%" in text
    runs = json.loads(out.read_text())["runs"]
    assert {r["condition"] for r in runs} == set(_module().CONDITIONS)
    oracle = [r for r in runs if r["condition"] == "oracle"]
    assert all(r["reached"] and r["share"]["uncontrollable"] == 0.0 for r in oracle)


def _mean_episodes(mod, learner, space, condition, budget, seeds=range(6)):
    return sum(mod.run(space, condition, s, budget, learner)["episodes"] for s in seeds) / len(
        seeds
    )


# The mechanics regression test of issue 23: default LP keeps the effect the simulated study
# measured (benchmarks/reference/curriculum_simulated), paired by seed with uniform sampling.
# Bounds sit between what the defaults measure and what gymcurric 0.1's scorer measured there
# (written as "defaults / 0.1" in the comments), so a change that loses the effect fails.
REGRESSION = [
    # learner, space, budget, bound on mean(lp) / mean(uniform)
    ("independent", "primary", 30_000, 0.8),  # 0.64 / 0.90
    ("independent", "feasible", 30_000, 1.3),  # 1.1 / 3.5
    ("chain", "primary", 30_000, 0.35),  # 0.24 / 0.46
]


def test_default_lp_keeps_its_lead_over_uniform_on_simulated_learners():
    mod = _module()
    for learner, space, budget, bound in REGRESSION:
        lp = _mean_episodes(mod, learner, space, "lp", budget)
        uniform = _mean_episodes(mod, learner, space, "uniform", budget)
        assert lp <= bound * uniform, (learner, space, lp, uniform)


def test_the_regression_bounds_catch_the_old_defaults():
    # the test above can fail: gymcurric 0.1's LP breaks the control's bound
    mod = _module()
    v1 = _mean_episodes(mod, "independent", "feasible", "lp_v1", 30_000)
    uniform = _mean_episodes(mod, "independent", "feasible", "uniform", 30_000)
    assert v1 > REGRESSION[1][3] * uniform
