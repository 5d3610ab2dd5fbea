"""A checkpoint asks gymcurric's vector curriculum wrapper, not a vector wrapper of yours above it.

``save_curriculum_state`` / ``load_curriculum_state`` call the vector
:class:`~gymcurric.wrappers.vector.SampleCurriculumTask`'s ``flush_curriculum()``,
``awaiting_reset()``, ``channel_*()`` and ``resume_channel()``. They used to take the first
layer with the name, outer wrappers included: a vector wrapper of yours above it with a method
of that name for its own purposes was called instead. Its ``awaiting_reset()`` (``[True, True]``)
saved every running task as -1, its ``channel_waiting()`` was saved as the channel's waiting
tasks, its ``resume_channel()`` took the loaded rows (the channel restored nothing), and its
``flush_curriculum()`` ran. Now gymcurric walks ``.env`` down to its own wrapper (the first
instance of the class, a subclass of yours included) and calls that one's methods; a subclass
that overrides one, or one set on the instance, is still called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv, VectorWrapper

from gymcurric.errors import GymcurricWarning
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv
from tests.sub_env_faults import SPACE, RecordsCurriculumCalls, channel_envs, step_and_flush

NAMES = (
    "flush_curriculum",
    "awaiting_reset",
    "channel_waiting",
    "channel_spares",
    "channel_slots",
    "channel_stale",
    "channel_refill_due",
    "resume_channel",
)


class Mine(RecordsCurriculumCalls, VectorWrapper):
    """A user's vector wrapper whose methods are named like the curriculum wrapper's.

    Each records its call in :attr:`calls` and answers something else than the curriculum
    wrapper would: every sub-env awaiting its reset, task 0 waiting everywhere, no channel.
    """

    def channel_waiting(self) -> list[int]:
        self.calls.append("channel_waiting")
        return [0] * self.num_envs

    def channel_spares(self) -> list[list[int]]:
        self.calls.append("channel_spares")
        return [[0]] * self.num_envs

    def channel_slots(self) -> list[list[int]]:
        self.calls.append("channel_slots")
        return [[0]] * self.num_envs

    def channel_stale(self) -> list[bool]:
        self.calls.append("channel_stale")
        return [True] * self.num_envs

    def channel_refill_due(self) -> bool:
        self.calls.append("channel_refill_due")
        return True

    def resume_channel(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("resume_channel")


def _members(path: Any) -> dict[str, Any]:
    with np.load(path) as f:
        return {k: f[k].tolist() for k in f.files}


@contextlib.contextmanager
def _mid_episode(user: Callable[[Any], Any]) -> Iterator[tuple[Any, Any, Any]]:
    """A curriculum, its channel's vector env ``ours`` and ``user(ours)`` above it (closed after).

    ``ours`` is reset, then stepped until no sub-env awaits its reset (its tasks are saved as
    they run).
    """
    cur = Curriculum(SPACE, seed=0)
    ours = channel_envs(cur)
    envs = user(ours)
    try:
        ours.reset(seed=0)
        step_and_flush(ours, 6)
        while any(ours.awaiting_reset()):
            step_and_flush(ours, 1)
        yield cur, ours, envs
    finally:
        envs.close()


def _mine_over_gymnasiums(ours: Any) -> Mine:
    """:class:`Mine` above Gymnasium's own vector wrapper above ours."""
    return Mine(gym.wrappers.vector.RecordEpisodeStatistics(ours))


def test_a_save_through_a_user_vector_wrapper_writes_what_the_curriculum_wrapper_says(tmp_path):
    # the user's methods were taken: env_task_ids [-1, -1], channel_waiting [0, 0], ...
    with _mid_episode(_mine_over_gymnasiums) as (cur, ours, envs):
        direct = _members(save_curriculum_state(tmp_path / "ours.npz", cur, env=ours))
        assert min(direct["env_task_ids"]) >= 0  # else the test would show nothing
        assert {"channel_waiting", "channel_slots", "channel_refill_due"} <= set(direct)
        outer = _members(save_curriculum_state(tmp_path / "outer.npz", cur, env=envs))
        assert outer == direct
        assert envs.calls == []


def test_a_load_through_a_user_vector_wrapper_restores_the_channel(tmp_path):
    # the user's resume_channel() took the file's rows: the channel restored nothing
    with _mid_episode(Mine) as (cur, ours, envs):
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=ours)
        saved = _members(path)
        step_and_flush(ours, 5)
        assert ours.channel_waiting() != saved["channel_waiting"]  # else it shows nothing
        load_curriculum_state(path, cur, env=envs)
        assert ours.channel_waiting() == saved["channel_waiting"]
        assert envs.calls == []
        _, info = envs.reset()
        assert info["task_id"].tolist() == saved["env_task_ids"]


class Refuses(Mine):
    """A user's vector wrapper whose ``resume_channel`` refuses every file (not called)."""

    def resume_channel(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the user's resume_channel was called")


def test_an_override_on_the_curriculum_wrapper_is_called_under_a_user_vector_wrapper(tmp_path):
    # what a user may still override: the curriculum wrapper's own methods (a subclass, or set
    # on its instance as tests/wrappers/vector/test_curriculum_resume_refused.py does)
    with _mid_episode(Refuses) as (cur, ours, envs):
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        got: list[Any] = []
        resume = ours.resume_channel

        def resume_channel(waiting, *args, **kwargs):
            got.append(waiting)
            return resume(waiting, *args, **kwargs)

        ours.resume_channel = resume_channel
        load_curriculum_state(path, cur, env=envs)
        assert got == [_members(path)["channel_waiting"]]
        assert envs.calls == []


def test_a_vector_env_without_the_curriculum_wrapper_asks_no_user_vector_wrapper(tmp_path):
    # a bare vector env cannot tell which sub-envs await their reset: the user's
    # awaiting_reset() ([True, True]) saved the running tasks as -1. Its channel_*() and
    # resume_channel() are not called either, and (with no gymcurric vector wrapper in the
    # chain) a warning names it (tests/wrappers/vector/test_curriculum_channel_look_alikes.py)
    cur = Curriculum(SPACE, seed=0)
    bare = SyncVectorEnv([lambda: SingleSampleCurriculumTask(TaskStubEnv("stub"), cur)] * 2)
    envs = Mine(bare)
    try:
        _, info = envs.reset(seed=0)
        with pytest.warns(GymcurricWarning, match=Mine.__qualname__):
            members = _members(save_curriculum_state(tmp_path / "c.npz", cur, env=envs))
        assert members["env_task_ids"] == info["task_id"].tolist()
        assert "channel_waiting" not in members
        with pytest.warns(GymcurricWarning, match=Mine.__qualname__):
            load_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert envs.calls == []
    finally:
        envs.close()


class MineSingle(gym.Wrapper):
    """A user's single-env wrapper with a ``channel_waiting()`` and ``resume_channel()``."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.calls: list[str] = []

    def channel_waiting(self) -> list[int]:
        self.calls.append("channel_waiting")
        return [0]

    def resume_channel(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("resume_channel")


@pytest.mark.parametrize("where", ["outer", "under"])
def test_a_single_env_has_no_channel_whatever_its_wrappers_define(tmp_path, where):
    # a single env's channel_waiting() of the user's was saved as a channel's waiting tasks
    cur = Curriculum(SPACE, seed=0)
    if where == "outer":
        env: Any = MineSingle(SingleSampleCurriculumTask(TaskStubEnv("stub"), cur))
    else:
        env = SingleSampleCurriculumTask(MineSingle(TaskStubEnv("stub")), cur)
    _, info = env.reset(seed=0)
    members = _members(save_curriculum_state(tmp_path / "c.npz", cur, env=env))
    assert members["env_task_ids"] == [info["task_id"]]
    assert "channel_waiting" not in members
    load_curriculum_state(tmp_path / "c.npz", cur, env=env)
    user = env if where == "outer" else env.env
    assert user.calls == []


def test_names_checked_here_are_the_curriculum_wrappers():
    from gymcurric.wrappers.vector import SampleCurriculumTask

    assert all(callable(getattr(SampleCurriculumTask, n, None)) for n in NAMES)


def _wrapped_again(ours: Any) -> Any:
    """``ours`` (with the channel) in another vector ``SampleCurriculumTask`` (without one)."""
    from gymcurric.wrappers.vector import SampleCurriculumTask

    return SampleCurriculumTask(ours, ours.curriculum)


def test_a_vector_env_wrapped_twice_saves_and_restores_the_channel_wrapper(tmp_path):
    # SampleCurriculumTask(make_curriculum_vec(...), cur): the outer one (no channel) was the
    # first with the names; its flush_curriculum() is a no-op, so the last step's episodes were
    # missing from the file, its channel_waiting() None (no channel rows saved), and a load's
    # resume_channel() went to it (the channel restored nothing)
    with _mid_episode(_wrapped_again) as (cur, ours, twice):
        for _ in range(4):  # episodes end: the channel wrapper holds their work for later
            twice.step(np.zeros(2, np.int64))
        outer = _members(save_curriculum_state(tmp_path / "twice.npz", cur, env=twice))
        direct = _members(save_curriculum_state(tmp_path / "ours.npz", cur, env=ours))
        assert "channel_waiting" in direct  # else the test would show nothing
        assert outer == direct
        step_and_flush(ours, 5)
        assert ours.channel_waiting() != direct["channel_waiting"]
        load_curriculum_state(tmp_path / "twice.npz", cur, env=twice)
        assert ours.channel_waiting() == direct["channel_waiting"]
