"""A vector env of yours with channel methods, and no gymcurric vector wrapper, is named.

A checkpoint saves and restores a task channel's rows through gymcurric's vector
``SampleCurriculumTask``, found by its class. A vector env of yours that offers the same
methods (``channel_waiting()``, ``resume_channel()``, ...) without subclassing it was skipped
without a word: the file held none of its rows, and a load restored none. Now a save or load
through a chain without gymcurric's vector wrapper warns (``GymcurricWarning``) naming each
such class. A warning, not an error: a vector wrapper of yours may use these names for its own
purposes (tests/wrappers/vector/test_curriculum_outer_names.py), and the sub-envs' tasks are
saved and resumed all the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv, VectorWrapper

from gymcurric.errors import GymcurricWarning
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import SampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv
from tests.sub_env_faults import SPACE


class ChannelRows:
    """A channel of a user's own: the task each sub-env takes next, saved and restored.

    Offers the vector curriculum wrapper's ``channel_waiting()`` and ``resume_channel()``
    without subclassing it.
    """

    num_envs: int

    def channel_waiting(self) -> list[int]:
        return list(getattr(self, "waiting", [3] * self.num_envs))

    def resume_channel(self, waiting: Any, *args: Any, **kwargs: Any) -> None:
        self.waiting = waiting


class MyChannelWrapper(ChannelRows, VectorWrapper):
    """The look-alike as a vector wrapper over a ``SyncVectorEnv``."""


class MyChannelVectorEnv(ChannelRows, SyncVectorEnv):
    """The look-alike as a ``SyncVectorEnv`` of its own."""


def _sub_envs(cur: Curriculum) -> list[Any]:
    return [lambda: SingleSampleCurriculumTask(TaskStubEnv("stub"), cur)] * 2


def _build(kind: str, cur: Curriculum) -> Any:
    if kind == "wrapper":
        return MyChannelWrapper(SyncVectorEnv(_sub_envs(cur)))
    if kind == "vector env":
        return MyChannelVectorEnv(_sub_envs(cur))
    if kind == "under ours":  # gymcurric's wrapper holds the (no) channel: nothing to say
        return SampleCurriculumTask(MyChannelWrapper(SyncVectorEnv(_sub_envs(cur))), cur)
    if kind == "subclass of ours":

        class Mine(SampleCurriculumTask):
            def channel_waiting(self) -> Any:
                return super().channel_waiting()

        return Mine(SyncVectorEnv(_sub_envs(cur)), cur)
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "cls"),
    [("wrapper", MyChannelWrapper), ("vector env", MyChannelVectorEnv)],
)
def test_a_look_alike_channel_is_named_by_a_save_and_a_load(tmp_path, kind, cls):
    # its rows were left out of the file, and not restored, without a word
    cur = Curriculum(SPACE, seed=0)
    envs = _build(kind, cur)
    try:
        _, info = envs.reset(seed=0)
        name = f"{cls.__module__}.{cls.__qualname__}"
        with pytest.warns(GymcurricWarning, match="save_curriculum_state") as saved:
            path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        message = str(saved[0].message)
        assert name in message and "channel_waiting(), resume_channel()" in message
        assert "subclass gymcurric.wrappers.vector.SampleCurriculumTask" in message
        assert "saves no task channel's rows" in message
        with np.load(path) as f:
            assert "channel_waiting" not in f.files  # as the warning says
            assert f["env_task_ids"].tolist() == info["task_id"].tolist()
        with pytest.warns(GymcurricWarning, match="restores no task channel's rows") as loaded:
            load_curriculum_state(path, cur, env=envs)
        assert name in str(loaded[0].message)
        assert not hasattr(envs, "waiting")  # its resume_channel() was not called
        _, info = envs.reset()
        assert info["task_id"].tolist() == np.load(path)["env_task_ids"].tolist()
    finally:
        envs.close()


def _save_and_load(path: Any, cur: Curriculum, envs: Any) -> None:
    """Reset ``envs`` (seed 0), save a checkpoint through them and load it back; close them."""
    try:
        envs.reset(seed=0)
        load_curriculum_state(save_curriculum_state(path, cur, env=envs), cur, env=envs)
    finally:
        envs.close()


@pytest.mark.parametrize("kind", ["under ours", "subclass of ours"])
def test_a_chain_with_gymcurrics_vector_wrapper_does_not_warn(tmp_path, kind):
    # pyproject's filterwarnings makes a GymcurricWarning fail the test
    cur = Curriculum(SPACE, seed=0)
    _save_and_load(tmp_path / "c.npz", cur, _build(kind, cur))


def test_a_single_env_and_a_plain_vector_env_do_not_warn(tmp_path):
    cur = Curriculum(SPACE, seed=0)
    env = SingleSampleCurriculumTask(TaskStubEnv("stub"), cur)
    env.reset(seed=0)
    load_curriculum_state(save_curriculum_state(tmp_path / "a.npz", cur, env=env), cur, env=env)
    _save_and_load(tmp_path / "b.npz", cur, SyncVectorEnv(_sub_envs(cur)))
