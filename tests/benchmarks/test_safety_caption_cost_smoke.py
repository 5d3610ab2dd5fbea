"""benchmarks/safety_caption_cost.py measures what ``caption=True`` adds (timings never asserted).

The figure in docs/safety_gymnasium.md (a caption's share of a step, why captions are opt-in)
comes from this script. Here, by counting calls: it makes one caption per step, with the step's
``goal_met``, and those captions are the ones ``caption=True`` writes for the same actions.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.benchmarks import load_script

pytestmark = pytest.mark.safety

STEPS = 12


def test_one_caption_per_step_and_the_same_captions_as_caption_true(monkeypatch) -> None:
    pytest.importorskip("mujoco")
    if importlib.util.find_spec("safety_gymnasium") is None:
        pytest.skip("safety-gymnasium is not installed")
    from gymcurric.envs.safety_gymnasium import make_safety_env

    bench = load_script("safety_caption_cost")
    made: list[str] = []
    flags: list[bool] = []
    original = bench.SafetyTaskCaptioner.caption

    def counted(self, *, goal_met: bool = False) -> str:
        flags.append(goal_met)
        made.append(original(self, goal_met=goal_met))
        return made[-1]

    monkeypatch.setattr(bench.SafetyTaskCaptioner, "caption", counted)
    result = bench.measure("SafetyPointGoal1-v0", STEPS, seed=0)
    monkeypatch.undo()  # count no more: the env below captions through the same class
    assert len(made) == STEPS  # one caption per step, none for the reset (resets not timed)
    assert {"step_cpu_us", "caption_cpu_us", "ratio_cpu", "ratio_wall_median"} <= set(result)
    # the captions the benchmark times are those caption=True writes: same seed, same actions
    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    env.reset(seed=0)
    space = env.action_space
    actions = np.random.default_rng(0).uniform(space.low, space.high, size=(STEPS, *space.shape))
    written, met = [], []
    for action in actions:
        _, _, _, _, info = env.step(action)
        written.append(info["caption"])
        met.append(bool(info.get("goal_met", False)))
    env.close()
    assert made == written and flags == met
