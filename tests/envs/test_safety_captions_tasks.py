"""Captions stay true when a curriculum changes the task between episodes (issue 26, item 1).

``reset(options={"task": {...}})`` rebuilds the MuJoCo model with other object counts, sizes
and extents; the captioner rebinds its body tables on every new model. Each caption here is
compared whole with the one ``caption_truth.expected_caption`` recomputes from the
task's arrays, episode after episode in one env, with more, fewer and no objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.envs.caption_truth import Ambiguous, expected_caption

pytestmark = [pytest.mark.safety, pytest.mark.usefixtures("safety_installed")]

# (env id, caption kind, the tasks of successive episodes; {} is the registered defaults)
CURRICULA = [
    ("SafetyPointGoal1-v0", "goal", [
        {"hazards.num": 2}, {"hazards.num": 12, "vases.num": 3, "hazards.size": 0.3},
        {"hazards.num": 0, "vases.num": 0, "goal.size": 0.6}, {},
    ]),
    ("SafetyPointButton2-v0", "button", [
        {"hazards.num": 2, "gremlins.num": 1}, {"gremlins.num": 0, "hazards.size": 0.1},
        {"placements.extents": [-1.3, -1.3, 1.3, 1.3], "hazards.num": 1, "gremlins.num": 1},
    ]),
    ("SafetyCarPush2-v0", "push", [
        {"pillars.num": 0, "hazards.num": 5}, {"pillars.num": 6, "goal.size": 0.5},
    ]),
]  # fmt: skip


def judge(env: Any, kind: str, info: dict[str, Any], steps: int, seed: int) -> tuple[int, int]:
    """Step ``steps`` times; compare every caption with the recomputed one. (judged, total)."""
    task = env.unwrapped.raw_env.task
    rng = np.random.default_rng(seed)
    judged = total = 0
    for t in range(steps + 1):
        total += 1
        try:
            assert info["caption"] == expected_caption(task, kind, bool(info.get("goal_met")))
            judged += 1
        except Ambiguous:
            pass
        if t == steps:
            break
        if t % 5 == 0:
            action = rng.uniform(env.action_space.low, env.action_space.high)
        _, _, terminated, truncated, info = env.step(action)
        assert not (terminated or truncated)
    return judged, total


@pytest.mark.parametrize(("env_id", "kind", "tasks"), CURRICULA, ids=[c[0] for c in CURRICULA])
def test_captions_follow_the_episodes_task(env_id: str, kind: str, tasks: list[dict]) -> None:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env(env_id, caption=True)
    raw = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    for episode, task in enumerate(tasks):
        _, info = env.reset(seed=episode, options={"task": task})
        # the episode really has the task's objects (so the caption is judged on them)
        for key, value in task.items():
            name, field = key.split(".")
            if name != "placements":
                assert getattr(getattr(raw, name), field) == value
        judged, total = judge(env, kind, info, steps=20, seed=episode)
        assert judged >= total // 2, "too many states on a boundary to judge"
    # a reset without a task keeps the last one: still captioned from the same model
    _, info = env.reset(seed=99)
    judged, total = judge(env, kind, info, steps=5, seed=99)
    env.close()
    assert judged >= total // 2 and judged > 0, "too many states on a boundary to judge"


def test_removing_every_hazard_removes_them_from_the_caption() -> None:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    _, crowded = env.reset(seed=0, options={"task": {"hazards.num": 20}})
    _, empty = env.reset(seed=0, options={"task": {"hazards.num": 0, "vases.num": 0}})
    env.close()
    assert "azard" in crowded["caption"]
    # no obstacles at all: not even "No obstacle is near.", only the goal
    assert empty["caption"].startswith("The goal is") or empty["caption"].startswith(
        "The agent is at the goal."
    )
    assert empty["caption"].count(".") == 1
