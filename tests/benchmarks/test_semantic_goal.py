"""The semantic_safety summary against its pre-registration (README: Metrics, Goal), by hand.

No training and no MiniLM: tiny complete records whose numbers are worked out below. Each
test pins one thing the pre-registration asks of the summary: the secondary non-inferiority
criterion, the goal on both envs, mean λ, no interval from one seed, the cost per tenth of
training at rollout granularity, and the ``null`` parity check on the whole record.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.benchmarks import load_script
from tests.benchmarks.semantic_records import toy_record


@pytest.fixture(scope="module")
def report():
    return load_script("_semantic_report")


def record(
    env: str,
    condition: str,
    prompts: str,
    seed: int,
    *,
    cost: float,
    ret: float,
    lam: float = 0.5,
    rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A complete record, budget 100: one episode at step 10 and one at 95, both ``ret``."""
    episodes = {"t": [10, 95], "r": [ret, ret], "c": [0.0, cost], "l": [10, 85]}
    rows = rows or [{"t": 100, "step_cost": cost, "lambda": lam, "mod": None}]
    return toy_record(env, condition, prompts, seed, episodes=episodes, rows=rows, cum_cost=cost)


PPOLAG_RETURN = {0: 2.0, 1: 2.2, 2: 1.8}  # mean 2.0: the 10 % margin is -0.2


def test_the_secondary_non_inferiority_criterion_is_reported(report):
    m = load_script("_semantic_metrics")
    close = {0: 1.9, 1: 2.1, 2: 1.75}  # Δ -0.1, -0.1, -0.05: CI low ≈ -0.1 > -0.2
    worse = {0: 1.5, 1: 1.7, 2: 1.3}  # Δ -0.5 each: CI low -0.5 < -0.2
    rs = [record("Toy", "ppolag", "none", s, cost=10.0, ret=x) for s, x in PPOLAG_RETURN.items()]
    rs += [record("Toy", "pbrs", "specific", s, cost=10.0, ret=x) for s, x in close.items()]
    rs += [record("Toy", "risk", "none", s, cost=10.0, ret=x) for s, x in worse.items()]
    text = report.summarise(rs, envs=("Toy",))
    assert "Secondary criterion (pre-registered): last-10 % return non-inferior" in text
    d = m.paired_diff(close, PPOLAG_RETURN)
    assert d[1] > -0.2
    assert f"| pbrs | specific | 3 | {d[0]:.2f} [{d[1]:.2f}, {d[2]:.2f}] | -0.20 | yes |" in text
    assert "| risk | none | 3 | -0.50 [-0.50, -0.50] | -0.20 | no |" in text
    assert report.non_inferior(d, 2.0) == "yes" and report.non_inferior(None, 2.0) == "—"


def test_the_goal_must_hold_for_the_same_condition_on_both_envs(report):
    base = {0: 10.0, 1: 12.0, 2: 11.0}
    rs = []
    for env in ("A", "B"):
        rs += [record(env, "ppolag", "none", s, cost=c, ret=2.0) for s, c in base.items()]
        # additive: half the cost on both envs at the same return (CI [0.5, 0.5]: strict)
        rs += [record(env, "additive", "specific", s, cost=c / 2, ret=2.0) for s, c in base.items()]
        # pbrs: half the cost on A only
        factor = 0.5 if env == "A" else 1.0
        rs += [
            record(env, "pbrs", "specific", s, cost=c * factor, ret=2.0) for s, c in base.items()
        ]
    text = report.summarise(rs, envs=("A", "B"))
    assert "## Goal on both envs (pre-registered)" in text
    # 3 seeds of the 5 planned: each overall verdict is provisional
    assert (
        "| additive | specific | **strict** (n=3) | **strict** (n=3) | **met** (provisional) |"
        in text
    )
    assert "| pbrs | specific | **strict** (n=3) | no (n=3) | no (provisional) |" in text
    assert "| risk | none | — (n=0) | — (n=0) | — (pending) |" in text
    only_a = report.summarise([r for r in rs if r["env"] == "A"], envs=("A", "B"))
    assert "| additive | specific | **strict** (n=3) | — (n=0) | — (pending) |" in only_a


def test_the_goal_section_requires_the_study_envs_by_default(report):
    rs = [record("HazardNav", "ppolag", "none", s, cost=10.0, ret=2.0) for s in (0, 1)]
    text = report.summarise(rs)
    assert "| condition | prompts | HazardNav | SafetyPointGoal1 | goal |" in text


def test_mean_lambda_is_reported(report):
    rows = [
        {"t": 50, "step_cost": 1.0, "lambda": 1.0, "mod": None},
        {"t": 100, "step_cost": 1.0, "lambda": 3.0, "mod": None},
    ]
    rs = [record("Toy", "ppolag", "none", s, cost=2.0, ret=1.0, rows=rows) for s in (0, 1)]
    text = report.summarise(rs)
    assert "| final λ | max λ | mean λ | mean M |" in text
    assert "| ppolag | none | 3.00 ± 0.00 | 3.00 ± 0.00 | 2.00 ± 0.00 | — |" in text


def test_one_seed_gives_no_interval(report):
    text = report.summarise([record("Toy", "ppolag", "none", 0, cost=7.0, ret=1.0)])
    assert "| ppolag | none | 1 | 7 (n=1) | 1 |" in text
    assert "± 0" not in text.split("Diagnostics")[0]


def test_cost_per_tenth_splits_a_rollout_that_straddles_a_tenth(report):
    # rollout (0, 15] with cost 15: 10 of its steps lie in the first tenth, 5 in the second
    rows = [
        {"t": 15, "step_cost": 15.0, "lambda": 0.5, "mod": None},
        {"t": 100, "step_cost": 0.0, "lambda": 0.5, "mod": None},
    ]
    rs = [record("Toy", "ppolag", "none", 0, cost=15.0, ret=1.0, rows=rows)]
    text = report.summarise(rs)
    assert "| ppolag | none | 67% | 33% | 0% | 0% |" in text
    per = report.tenths([{"t": 90, "step_cost": 0.0}, {"t": 110, "step_cost": 20.0}], 100)
    assert per.tolist() == [0.0] * 9 + [20.0]  # past the budget: the last tenth


def test_null_parity_compares_the_whole_record_not_only_episodes_and_lambda(report):
    rows = [{"t": 100, "step_cost": 4.0, "cum_cost": 4.0, "lambda": 0.5, "mod": None}]
    base = record("Toy", "ppolag", "none", 0, cost=4.0, ret=1.0, rows=rows)
    same = record("Toy", "null", "none", 0, cost=4.0, ret=1.0, rows=[dict(rows[0], mod=1.0)])
    assert "seed 0: identical" in report.summarise([base, same])
    # same episodes and λ, but a different step cost in a rollout (and so a different total)
    other = record("Toy", "null", "none", 0, cost=4.0, ret=1.0, rows=[dict(rows[0], step_cost=5.0)])
    assert "seed 0: DIFFERENT" in report.summarise([base, other])


def test_tenths_and_non_inferior_on_the_docstring_examples(report):
    per = report.tenths([{"t": 8, "step_cost": 8.0}, {"t": 16, "step_cost": 8.0}], 100)
    assert per[:3].tolist() == [10.0, 6.0, 0.0]
    assert report.non_inferior((-0.1, -0.2, 0.1, 5), 2.5) == "yes"
    assert report.non_inferior((-0.1, -0.3, 0.1, 5), 2.5) == "no"
    assert report.non_inferior((-0.1, -0.2, 0.1, 1), 2.5) == "—"  # one seed: no interval


def test_a_rollout_cost_recorded_as_null_leaves_the_run_out_of_the_tenths(report):
    # records write a non-finite number as null (_json_safe); the summary read it as NaN and
    # left that run out of the cost per tenth, and tenths() raised TypeError on it
    rows = [
        {"t": 50, "step_cost": None, "lambda": 0.5, "mod": None},
        {"t": 100, "step_cost": 1.0, "lambda": 0.5, "mod": None},
    ]
    assert all(math.isnan(x) for x in report.tenths(rows, 100)[:5])
    odd = record("Toy", "ppolag", "none", 0, cost=1.0, ret=1.0, rows=rows)
    fine = record("Toy", "ppolag", "none", 1, cost=1.0, ret=1.0)  # one rollout (0, 100]
    text = report.summarise([odd, fine])
    assert "| ppolag | none |" + " 10% |" * 10 in text  # the shares of ``fine`` alone


def test_the_overall_verdict_is_final_only_on_the_planned_seeds(report):
    goal = load_script("_semantic_goal")
    assert len(load_script("semantic_safety").SEEDS) == goal.PLANNED_SEEDS
    base = {s: 10.0 + s for s in range(5)}
    rs = []
    for env, seeds in (("A", range(5)), ("B", range(2))):
        rs += [record(env, "ppolag", "none", s, cost=base[s], ret=2.0) for s in seeds]
        rs += [record(env, "pbrs", "specific", s, cost=base[s], ret=2.0) for s in seeds]
        rs += [record(env, "additive", "specific", s, cost=base[s] / 2, ret=2.0) for s in seeds]
    text = report.summarise(rs, envs=("A", "B"))
    assert "| pbrs | specific | no (n=5) | no (n=2) | no |" in text  # A's 'no' is final
    assert (
        "| additive | specific | **strict** (n=5) | **strict** (n=2) | **met** (provisional) |"
        in text
    )
    full = [r for r in rs if r["env"] == "A"]
    text_a = report.summarise(full, envs=("A",))
    assert "| additive | specific | **strict** (n=5) | **met** |" in text_a


def test_the_non_inferiority_margin_is_a_tolerance_even_for_a_negative_mean(report):
    goal = load_script("_semantic_goal")
    assert goal.ni_margin(-2.0) == pytest.approx(0.2) == goal.ni_margin(2.0)
    # ppolag's mean -2: a CI lower end of -0.1 is within the 0.2 tolerance, -0.3 is not
    assert report.non_inferior((0.0, -0.1, 0.1, 5), -2.0) == "yes"
    assert report.non_inferior((0.0, -0.3, 0.1, 5), -2.0) == "no"
