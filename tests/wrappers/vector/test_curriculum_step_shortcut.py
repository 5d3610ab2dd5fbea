"""The single-env wrapper's step shortcut under a channel with ``episodes_in_main``.

A sub-env wrapper bound to such a channel reports nothing, so its ``step`` is the inner env's
own (an instance attribute; d3ffeb9). That shortcut must not change what a user sees: a
subclass that overrides ``step`` still runs, and a new inner env (``wrapper.env = other``) is
the one stepped, as it is the one reset.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gymcurric.tasks import Curriculum
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers.vector import SampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv

from .vector_runs import SPACE, STUB


class CountingTask(SingleSampleCurriculumTask):
    """A user's subclass that overrides ``step`` (and calls the wrapper's)."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        info["counted"] = 1.0
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("in_main", [True, False])
def test_a_subclass_step_runs_in_the_workers_of_an_async_vector_env(in_main):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    chan = TaskChannel(2, episodes_in_main=in_main, spares=10, key_modulus=SPACE.key_modulus)
    base = gym.make_vec(
        STUB,
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"context": "fork"},
        wrappers=[partial(CountingTask, curriculum=cur, channel=chan)],
    )
    base.set_attr("channel_index", [0, 1])
    envs = SampleCurriculumTask(base, cur, channel=chan)
    try:
        envs.reset(seed=0)
        stepped = np.ones(2, dtype=bool)  # NEXT_STEP: a sub-env done before resets instead
        for _ in range(12):
            _, _, terminated, truncated, infos = envs.step(np.zeros(2, dtype=np.int64))
            # the subclass's step ran in every sub-env that stepped
            assert infos.get("_counted", np.zeros(2, bool)).tolist() == stepped.tolist()
            stepped = ~(terminated | truncated)
        assert envs.stats()["curriculum/updates"] > 0
    finally:
        envs.close()
        cur.close()


def test_a_bound_wrapper_steps_the_env_it_resets_after_the_env_is_replaced():
    cur = Curriculum(SPACE, seed=0)
    chan = TaskChannel(1, episodes_in_main=True)
    try:
        env = SingleSampleCurriculumTask(TaskStubEnv("old"), cur, channel=chan)
        env.channel_index = 0
        new = TaskStubEnv("new")
        env.env = new  # after binding
        chan.refill(cur)
        env.reset()
        env.step(0)
        assert new.t == 1  # stepped the env it reset, not the old one
        assert env.get_wrapper_attr("env") is new
        env.channel_index = -1  # unbound: the wrapper's own step again
        env.reset()
        _, reward, *_ = env.step(0)
        assert new.t == 1 and env._sums.one_return == reward
    finally:
        chan.close()
