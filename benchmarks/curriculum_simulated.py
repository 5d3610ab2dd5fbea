"""Curriculum mechanics against a simulated learner (no RL): when is the learnable part mastered?

A task space in the shape of issue 23's study (``../shared/notes/curriculum-efficacy.md``), with
learners that need no env and no network, so a run takes seconds. Task families:

* **trivial** tasks always succeed;
* **learnable** tasks: see the learners below;
* **uncontrollable** tasks succeed by chance, 1 % of episodes, whatever the practice;
* **unreachable** tasks never succeed.

Learners (``--learners``):

* ``independent``: a learnable task succeeds with ``max(f, sigmoid((n - c) / 15))`` after ``n``
  episodes of practice on that task: ``f``, a random policy's success, drawn per task from
  ``U(0.004, 0.09)`` (the pilot's hard and frontier tasks), ``c`` from ``U(30, 150)``. So a
  task shows chance successes for a long while, then a rise; practice on one task does not
  transfer to another. Every learnable task needs its own practice: the worst case for a
  curriculum, whose only clue before a rise is the chance floor.
* ``chain``: the learnable tasks lie on a difficulty chain ``d ~ U(0, 1)`` (sorted), with one
  skill ``k``: a task succeeds with ``max(f, sigmoid((k - d) / 0.04))``, ``f`` falling from 0.09
  (easiest) to 0.004 (hardest), and every episode on a learnable task adds
  ``0.005 q (1 - q)`` to the skill (``q`` the sigmoid part): practice at the frontier transfers
  to every task, practice on mastered or out-of-reach tasks teaches nothing, as for an RL agent
  on HazardGrid's goal distances. Mastered: ``k`` reaches the 80 % task's ``d + 0.04 ln 4``.

Spaces (``--spaces``): ``mostly`` (4 trivial, 32 learnable, 72 uncontrollable, 207 unreachable:
89 % infeasible), ``primary`` (4, 32, 24, 48: 67 %), ``feasible`` (4, 32: the control).
Conditions (``--conditions``): ``uniform``; ``oracle`` (uniform over the feasible tasks only:
the room a curriculum has); ``lp`` (``Curriculum`` defaults); ``lp_v1`` (gymcurric 0.1's
defaults: ``LearningProgressScorer.v1()``, ``SignalConfig(alpha=0.1)``); ``lp_dual``
(``DualPool(27, 27)``, 18 + 18 on ``feasible``); ``learnability`` (``LearnabilityScorer``).

Measured per run: episodes until 80 % of the learnable tasks are mastered (success probability
>= 0.8), checked every 250 episodes (a run that never gets there counts as ``--budget``), and
the share of episodes spent on each task family until then. Printed per learner, space and
condition: the mean with a 95 % CI (Student t) over the seeds, the ratio to uniform and to the
oracle, and the family shares. ``--json`` writes every run.

This is the curriculum's mechanics only: a learner whose progress is a fixed function of
practice. Whether a curriculum helps an RL agent is the study in
``benchmarks/curriculum_infeasible.py``. ``tests/benchmarks/test_curriculum_simulated_smoke.py``
holds the defaults to the ratios of ``--quick`` (the mechanics regression test of issue 23).

    python benchmarks/curriculum_simulated.py
    python benchmarks/curriculum_simulated.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from _stats import ci95

from gymcurric.tasks import (
    Curriculum,
    DualPool,
    FixedTaskSpace,
    LearnabilityScorer,
    LearningProgressScorer,
    SignalConfig,
    UniformScorer,
)

TRIVIAL, LEARNABLE, UNCONTROLLABLE, UNREACHABLE = range(4)
FAMILIES = ("trivial", "learnable", "uncontrollable", "unreachable")
SPACES = {  # tasks per family
    "mostly": (4, 32, 72, 207),
    "primary": (4, 32, 24, 48),
    "feasible": (4, 32, 0, 0),
}
CONDITIONS = ("uniform", "oracle", "lp", "lp_v1", "lp_dual", "learnability")
LEARNERS = ("independent", "chain")
CHANCE = 0.01  # an uncontrollable task's success rate
WIDTH = 15.0  # of a learnable task's sigmoid, in episodes of practice
MASTERED = 0.8  # success probability that counts as mastered
GOAL_SHARE = 0.8  # of the learnable tasks
CHECK_EVERY = 250  # episodes


@dataclass
class Learner:
    """The simulated learner of one run: task families, practice, and its own generator."""

    kinds: np.ndarray
    centre: np.ndarray
    floor: np.ndarray
    rng: np.random.Generator

    @classmethod
    def make(cls, space: str, seed: int) -> Learner:
        counts = SPACES[space]
        kinds = np.repeat(np.arange(4), counts)
        rng = np.random.default_rng([seed, 2026])
        kinds = kinds[rng.permutation(len(kinds))]  # ids carry no hint of the family
        n = len(kinds)
        return cls(kinds, rng.uniform(30.0, 150.0, n), rng.uniform(0.004, 0.09, n), rng)

    def __post_init__(self) -> None:
        self.practice = np.zeros(len(self.kinds), dtype=np.int64)
        self.learnable = np.flatnonzero(self.kinds == LEARNABLE)
        self.needed = self.centre + WIDTH * math.log(MASTERED / (1.0 - MASTERED))

    def episode(self, task: int) -> bool:
        """Play one episode of ``task``; return its success."""
        kind = self.kinds[task]
        if kind == TRIVIAL:
            return True
        if kind == UNREACHABLE:
            return False
        if kind == UNCONTROLLABLE:
            return bool(self.rng.random() < CHANCE)
        n = self.practice[task]
        self.practice[task] = n + 1
        p = 1.0 / (1.0 + math.exp(-(n - self.centre[task]) / WIDTH))
        return bool(self.rng.random() < max(p, self.floor[task]))

    def mastered_share(self) -> float:
        """Share of the learnable tasks whose success probability is at least ``MASTERED``."""
        ids = self.learnable
        return float((self.practice[ids] >= self.needed[ids]).mean()) if len(ids) else 1.0


CHAIN_WIDTH = 0.04  # of a chain task's sigmoid, in skill units
CHAIN_RATE = 0.005  # skill gained per episode at q (1 - q) = 1


class ChainLearner(Learner):
    """Learnable tasks on a difficulty chain with one transferable skill (module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        ids = self.learnable
        d = np.sort(self.rng.uniform(0.0, 1.0, len(ids)))
        self.difficulty = np.zeros(len(self.kinds))
        self.difficulty[ids] = d
        self.floor = np.where(self.kinds == LEARNABLE, 0.09 - 0.086 * self.difficulty, 0.0)
        self.skill = 0.0
        k = max(1, math.ceil(GOAL_SHARE * len(ids)))
        self.target = float(d[k - 1]) + CHAIN_WIDTH * math.log(MASTERED / (1.0 - MASTERED))

    def episode(self, task: int) -> bool:
        """Play one episode of ``task``; a learnable one teaches at the frontier."""
        if self.kinds[task] != LEARNABLE:
            return super().episode(task)
        q = 1.0 / (1.0 + math.exp(-(self.skill - self.difficulty[task]) / CHAIN_WIDTH))
        self.skill += CHAIN_RATE * q * (1.0 - q)
        return bool(self.rng.random() < max(q, self.floor[task]))

    def mastered_share(self) -> float:
        """``GOAL_SHARE`` once the skill masters that share of the chain, else 0."""
        return GOAL_SHARE if self.skill >= self.target else 0.0


def make_curriculum(condition: str, learner: Learner, seed: int) -> tuple[Curriculum, np.ndarray]:
    """The condition's curriculum and the learner's task of each curriculum id."""
    n = len(learner.kinds)
    tasks = np.arange(n)
    kwargs: dict[str, Any] = {}
    if condition == "oracle":
        tasks = np.flatnonzero(learner.kinds <= LEARNABLE)
        kwargs["scorer"] = UniformScorer()
    elif condition == "uniform":
        kwargs["scorer"] = UniformScorer()
    elif condition == "lp_v1":
        kwargs["scorer"] = LearningProgressScorer.v1()
        kwargs["signal"] = SignalConfig(alpha=0.1)
    elif condition == "lp_dual":
        size = min(27, n // 2)
        kwargs["pool"] = DualPool(explore_size=size, exploit_size=size)
    elif condition == "learnability":
        kwargs["scorer"] = LearnabilityScorer()
    elif condition != "lp":
        raise ValueError(f"unknown condition {condition!r}; expected one of {CONDITIONS}")
    space = FixedTaskSpace([{"task": int(t)} for t in tasks])
    return Curriculum(space, seed=seed, **kwargs), tasks


def run(
    space: str, condition: str, seed: int, budget: int, learner_kind: str = "independent"
) -> dict[str, Any]:
    """One run: episodes to mastery and the episode share per family until then."""
    learner = (ChainLearner if learner_kind == "chain" else Learner).make(space, seed)
    cur, tasks = make_curriculum(condition, learner, seed)
    per_family = np.zeros(4, dtype=np.int64)
    episodes = budget
    for ep in range(1, budget + 1):
        tid = int(cur.sample()[0])
        task = int(tasks[tid])
        success = learner.episode(task)
        per_family[learner.kinds[task]] += 1
        cur.update(tid, float(success), success=success)
        if ep % CHECK_EVERY == 0 and learner.mastered_share() >= GOAL_SHARE:
            episodes = ep
            break
    shares = per_family / max(1, per_family.sum())
    return {
        "learner": learner_kind,
        "space": space,
        "condition": condition,
        "seed": seed,
        "episodes": episodes,
        "reached": episodes < budget or learner.mastered_share() >= GOAL_SHARE,
        "share": {name: float(s) for name, s in zip(FAMILIES, shares, strict=True)},
    }


def summarise(runs: list[dict[str, Any]]) -> list[str]:
    """One line per space and condition: mean ± CI, ratios, family shares."""
    lines = []
    cells = dict.fromkeys((r.get("learner", "independent"), r["space"]) for r in runs)
    for kind, space in cells:
        rows = [r for r in runs if (r.get("learner", "independent"), r["space"]) == (kind, space)]
        means = {}
        for cond in dict.fromkeys(r["condition"] for r in rows):
            means[cond] = ci95([r["episodes"] for r in rows if r["condition"] == cond])[0]
        lines.append(
            f"{kind} learner, {space}: episodes until {GOAL_SHARE:.0%} of the learnable tasks"
            " mastered"
        )
        for cond in means:
            mine = [r for r in rows if r["condition"] == cond]
            mean, half = ci95([r["episodes"] for r in mine])
            reached = sum(r["reached"] for r in mine)
            share = {f: np.mean([r["share"][f] for r in mine]) for f in FAMILIES}
            ratios = " ".join(
                f"{mean / means[ref]:.2f}x {ref}" for ref in ("uniform", "oracle") if ref in means
            )
            lines.append(
                f"  {cond:<13} {mean:9.0f} ± {half:7.0f}  reached {reached}/{len(mine)}  {ratios}"
                "  share " + " ".join(f"{f[:5]} {share[f]:.2f}" for f in FAMILIES)
            )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=LEARNERS)
    p.add_argument("--spaces", nargs="+", default=list(SPACES), choices=list(SPACES))
    p.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=100_000, help="episodes per run")
    p.add_argument("--json", help="write every run here")
    p.add_argument("--quick", action="store_true", help="2 seeds, 6,000 episodes (smoke)")
    args = p.parse_args()
    if args.quick:
        args.seeds, args.budget = 2, 6_000
    start = time.time()
    runs = [
        run(space, cond, seed, args.budget, kind)
        for kind in args.learners
        for space in args.spaces
        for cond in args.conditions
        for seed in range(args.seeds)
    ]
    print("\n".join(summarise(runs)))
    print(f"{len(runs)} runs in {time.time() - start:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": runs}, fh, indent=1)


if __name__ == "__main__":
    main()
