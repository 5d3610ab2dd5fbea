"""benchmarks/_semantic_report.py on hand-made records: the exploratory over-budget section.

No training and no MiniLM: tiny records written by hand, whose numbers are worked out below.
"""

from __future__ import annotations

import pytest

from tests.benchmarks import load_script
from tests.benchmarks.semantic_records import toy_record


@pytest.fixture(scope="module")
def report():
    return load_script("_semantic_report")


def record(condition: str, prompts: str, seed: int, costs: list[float], limit: float) -> dict:
    """A complete record with only what the summary reads: episode costs, one rollout row."""
    n = len(costs)
    episodes = {
        "t": [100 * (i + 1) // n for i in range(n)],
        "r": [1.0] * n,
        "c": costs,
        "l": [100 // n] * n,
    }
    rows = [{"t": 100, "step_cost": sum(costs), "lambda": 0.5, "mod": None}]
    return toy_record(
        "Toy", condition, prompts, seed, episodes=episodes, rows=rows, cum_cost=sum(costs),
        limit=limit, env_id="toy-v0",
    )  # fmt: skip


# Limit 2. Over budget, Σ (c - 2): ppolag 8 - 4 = 4, 12 - 6 = 6, 7 - 2 = 5 (mean 5, sd 1);
# pbrs 5 - 4 = 1, 9 - 6 = 3, 4 - 2 = 2 (mean 2, sd 1); ratio of means 2 / 5 = 0.40.
PPOLAG = {0: [3.0, 5.0], 1: [2.0, 4.0, 6.0], 2: [7.0]}
PBRS = {0: [3.0, 2.0], 1: [3.0, 3.0, 3.0], 2: [4.0]}


@pytest.fixture
def toy():
    return [record("ppolag", "none", s, c, 2.0) for s, c in PPOLAG.items()] + [
        record("pbrs", "specific", s, c, 2.0) for s, c in PBRS.items()
    ]


def test_over_budget_of_one_record_uses_its_own_limit():
    m = load_script("_semantic_metrics")
    r = {"config": {"lagrangian": {"cost_limit": 25.0}}, "episodes": {"c": [30.0, 10.0, 40.0]}}
    assert m.over_budget(r) == {"episodes": 3.0, "allowed": 75.0, "over_budget": 5.0}


def test_summary_has_the_exploratory_section_with_hand_computed_numbers(report, toy):
    m = load_script("_semantic_metrics")
    text = report.summarise(toy)
    head = "## Over-budget cost (exploratory, not pre-registered)"
    assert text.count(head) == 1
    pre_registered, exploratory = text.split(head)
    assert "Primary metrics" in pre_registered and "over-budget" not in pre_registered.lower()
    assert "### Toy: cost above the limit (cost limit 2)" in exploratory
    # t(0.975, 2 df) = 4.303: half-width 4.303 · sd / √3 = 2.48 for sd 1, 4.97 for sd 2
    assert "| ppolag | none | 3 | 2 ± 2 | 4 ± 5 | 5 ± 2 | 1 |" in exploratory
    ratio = m.paired_ratio({0: 1.0, 1: 3.0, 2: 2.0}, {0: 4.0, 1: 6.0, 2: 5.0})
    assert ratio[0] == pytest.approx(0.4) and ratio[3] == 3
    cell = f"0.40 [{ratio[1]:.2f}, {ratio[2]:.2f}]"
    assert f"| pbrs | specific | 3 | 2 ± 2 | 4 ± 5 | 2 ± 2 | {cell} |" in exploratory
    assert "| 0 | 4 | 1 |" in exploratory and "| 1 | 6 | 3 |" in exploratory
    assert "| 2 | 5 | 2 |" in exploratory


def test_the_section_adds_to_the_summary_and_changes_nothing_before_it(report, toy):
    text = report.summarise(toy)
    before = text.split("## Over-budget cost")[0]
    assert before.startswith("## Toy: toy-v0, 100 steps, cost limit 2, seeds [0, 1, 2]")
    assert "| ppolag | none | 3 | 9 ± 7 |" in before  # cumulative cost 8, 12, 7: sd √7


def test_without_ppolag_the_ratio_is_a_dash(report, toy):
    text = report.summarise([r for r in toy if r["condition"] == "pbrs"])
    assert "| pbrs | specific | 3 | 2 ± 2 | 4 ± 5 | 2 ± 2 | — |" in text
