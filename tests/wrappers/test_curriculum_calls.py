"""Guards on the per-episode Python work of ``SampleCurriculumTask`` in a vector env's worker.

Counted, not timed: the number of Python function calls made in gymcurric's own code (a
``sys.setprofile`` counter; the env's and Gymnasium's frames are left out) per reset and per
step of a sub-env bound to a task channel, the path that runs once per episode in every worker
of ``make_curriculum_vec``. The ceilings are the counts of issue 24's rework; a change that adds
a call there fails here and should say why it is worth it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gymcurric
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import SampleCurriculumTask

PACKAGE = str(Path(gymcurric.__file__).parent)
LENGTH = 10  # steps per episode


class TenSteps(gym.Env[np.ndarray, int]):
    """Episodes of ``LENGTH`` steps with a cost every step and a success at the last."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int):
        self.t += 1
        info: dict[str, Any] = {"cost": 0.5}
        if self.t == LENGTH:
            info["is_success"] = True
        return np.zeros(1, np.float32), 1.0, self.t == LENGTH, False, info


def count_calls(episodes_in_main: bool, episodes: int = 20) -> tuple[float, float]:
    """gymcurric's Python calls per reset and per episode's steps, bound to a channel."""
    cur = Curriculum(FixedTaskSpace([{"level": i, "size": [i, i]} for i in range(50)]), seed=0)
    chan = TaskChannel(1, episodes_in_main=episodes_in_main)
    counts = {"reset": 0, "step": 0}
    phase = "reset"

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            counts[phase] += 1

    try:
        env = SampleCurriculumTask(TenSteps(), cur, channel=chan)
        env.channel_index = 0
        for _ in range(episodes):
            chan.collect(cur)  # the main process's side, between two vector steps
            chan.refill(cur)
            phase = "reset"
            previous = sys.getprofile()
            sys.setprofile(profile)
            try:
                env.reset()
                phase = "step"
                for _ in range(LENGTH):
                    env.step(0)
            finally:
                sys.setprofile(previous)
        assert chan.collect(cur) == (0 if episodes_in_main else 1)  # the episodes got through
    finally:
        chan.close()
    return counts["reset"] / episodes, counts["step"] / episodes


@pytest.mark.parametrize(
    ("episodes_in_main", "reset_ceiling", "steps_ceiling"),
    [
        # reset (13; 26 before issue 24): reset, the channel's take_task and take, the task
        # (transport, curriculum, space), three copies of it (the space's, the env's, the
        # info's), each also copying the task's list, and _begin. Steps: one call each.
        (True, 13, LENGTH),
        # the sub-env also starts its sums at reset (14; 27 before) and at the last step
        # reports the episode: _report, success_of, finish_one, and the channel's
        # report_episode, check_episode and put (16; 26 before, with a call per step to sum)
        (False, 14, LENGTH + 6),
    ],
)
def test_python_calls_per_episode_in_a_channel_bound_sub_env(
    episodes_in_main, reset_ceiling, steps_ceiling
):
    per_reset, per_episode_steps = count_calls(episodes_in_main)
    assert per_reset <= reset_ceiling
    assert per_episode_steps <= steps_ceiling
