"""A load through an override of the vector wrapper's ``resume_channel`` that breaks its contract.

``load_curriculum_state`` calls gymcurric's vector ``SampleCurriculumTask.resume_channel`` (a
subclass's override included) before it arms a sub-env or loads the curriculum, and calls the
function it returns where they refuse the file. An override that returns None (it calls
``super()`` and drops its return) left the channel restoring the refused file's rows without a
word: the wrapper's own put-back, taken before the call, now puts them back, and the refusal
gets a note saying so. So does an override whose returned function raises (the note was
added, but the rows stayed).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

from gymcurric.errors import ConfigError, DataError, SubEnvCallError
from gymcurric.tasks import Curriculum
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import SampleCurriculumTask
from tests.sub_env_faults import SPACE, channel_resume_refuses, step_and_flush
from tests.wrappers.vector.refused_loads import RefusesTheFile, save_without_channel_rows


class ReturnsNone(SampleCurriculumTask):
    """A user's subclass whose ``resume_channel`` calls ``super()`` and returns None."""

    def resume_channel(self, *args: Any, **kwargs: Any) -> None:
        super().resume_channel(*args, **kwargs)


def channel_envs(cls: type, cur: Curriculum, refused: Any = ()) -> Any:
    """``cls`` over two sub-envs of a channel (sub-env 1 refuses to resume ``refused``)."""
    chan = TaskChannel(2)
    fns = [
        partial(channel_resume_refuses, cur, chan, 0),
        partial(channel_resume_refuses, cur, chan, 1, refused),
    ]
    return cls(SyncVectorEnv(fns), cur, channel=chan)


def _armed(envs: Any) -> list[Any]:
    return [r for _, r in envs.env.call("curriculum_task_ids")]


def _waiting_of(path: Any) -> list[int]:
    with np.load(path) as f:
        return f["channel_waiting"].tolist()


def _refused_load(tmp_path: Any, cls: type, refuses: str) -> list[str]:
    """A load through ``cls`` that the curriculum or sub-env 1 refuses; the refusal's notes.

    Asserts that the channel's waiting rows and the sub-envs' armed tasks are as before it.
    """
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cls, cur, refused=range(8) if refuses == "sub-env" else ())
    try:
        envs.reset(seed=0)
        first = save_curriculum_state(tmp_path / "first.npz", cur, env=envs)
        step_and_flush(envs, 6)
        later = save_curriculum_state(tmp_path / "later.npz", cur, env=envs)
        if refuses == "curriculum":  # an earlier load's rows wait, and must still wait
            load_curriculum_state(first, cur, env=envs)
            refused, loader = later, RefusesTheFile()
        else:  # the channel's own rows wait (sub-env 1 refuses every task of the pool)
            refused, loader = first, cur
        waiting, armed = envs.channel_waiting(), _armed(envs)
        assert _waiting_of(refused) != waiting  # else the test would show nothing
        if refuses == "curriculum":
            with pytest.raises(DataError, match="from another configuration") as err:
                load_curriculum_state(refused, loader, env=envs)
            notes = getattr(err.value.__cause__, "__notes__", [])
        else:
            with pytest.raises(SubEnvCallError, match="sub-env 1: resume_curriculum_task") as err:
                load_curriculum_state(refused, loader, env=envs)
            notes = getattr(err.value, "__notes__", [])
        assert envs.channel_waiting() == waiting  # was the refused file's
        assert _armed(envs) == armed
        return list(notes)
    finally:
        envs.close()


@pytest.mark.parametrize("refuses", ["curriculum", "sub-env"])
def test_a_resume_channel_that_returns_none_is_put_back_with_a_note(tmp_path, refuses):
    # the refusal was raised and the channel kept the refused file's rows, silently
    notes = _refused_load(tmp_path, ReturnsNone, refuses)
    name = f"{ReturnsNone.__module__}.{ReturnsNone.__qualname__}.resume_channel"
    assert any(f"{name} returned None" in n and "put back" in n for n in notes), notes


class UndoRaises(SampleCurriculumTask):
    """A user's subclass whose ``resume_channel`` returns a function that raises."""

    def resume_channel(self, *args: Any, **kwargs: Any) -> Any:
        super().resume_channel(*args, **kwargs)

        def undo() -> None:
            raise RuntimeError("cannot undo")

        return undo


@pytest.mark.parametrize("refuses", ["curriculum", "sub-env"])
def test_a_resume_channel_whose_put_back_raises_is_put_back_with_a_note(tmp_path, refuses):
    # the note was added, but the channel kept restoring the refused file's rows
    notes = _refused_load(tmp_path, UndoRaises, refuses)
    assert any(
        "RuntimeError: cannot undo" in n and "gymcurric put back the rows" in n for n in notes
    ), notes


def test_a_resume_channel_that_returns_none_still_loads(tmp_path):
    # the put-back is only for a refused load: an accepted one restores the file's rows
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(ReturnsNone, cur)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        step_and_flush(envs, 6)
        load_curriculum_state(path, cur, env=envs)
        assert envs.channel_waiting() == _waiting_of(path)
    finally:
        envs.close()


class TakesAList(SampleCurriculumTask):
    """An override written for ``resume_channel(waiting: list[int], ...)``: None fails it."""

    def resume_channel(self, waiting: Any, *args: Any, **kwargs: Any) -> Any:
        return super().resume_channel([int(t) for t in waiting], *args, **kwargs)


class NoKeywords(SampleCurriculumTask):
    """An override from before the ``slots``, ``stale`` and ``refill_due`` keywords."""

    def resume_channel(self, waiting: Any, spares: Any = None) -> Any:  # type: ignore[override]
        return super().resume_channel(waiting, spares)


class CountsAfter(SampleCurriculumTask):
    """An override that calls ``super()`` first, then fails on None: the rows are changed."""

    def resume_channel(self, waiting: Any, *args: Any, **kwargs: Any) -> Any:
        undo = super().resume_channel(waiting, *args, **kwargs)
        self.loaded = len(waiting)
        return undo


def _state(cur: Curriculum) -> Any:
    state = dict(cur.state_dict())
    arrays = state.pop("arrays")
    return state, {k: np.asarray(a).tolist() for k, a in arrays.items()}


@pytest.mark.parametrize("cls", [TakesAList, NoKeywords, CountsAfter])
def test_an_older_resume_channel_override_is_named_and_nothing_is_lost(tmp_path, cls):
    # a file without a channel's rows (resume_channel(None, ...)), or any file (the keywords),
    # raised the override's raw TypeError
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cls, cur)
    try:
        path = save_without_channel_rows(tmp_path / "no_rows.npz", cur)
        envs.reset(seed=0)
        step_and_flush(envs, 6)
        rows = [envs.channel_waiting(), envs.channel_spares()]
        marks = {"slots": envs.channel_slots(), "stale": envs.channel_stale(), "refill_due": True}
        step_and_flush(envs, 5)
        SampleCurriculumTask.resume_channel(envs, *rows, **marks)  # an earlier load's rows
        before, armed = _state(cur), _armed(envs)
        assert envs.channel_waiting() == rows[0]
        with pytest.raises(ConfigError) as err:
            load_curriculum_state(path, cur, env=envs)
        message = str(err.value)
        assert f"{cls.__module__}.{cls.__qualname__}.resume_channel" in message
        assert message.startswith(f"{path}: ") and "it raised TypeError" in message
        assert "waiting=None (this file holds no channel rows)" in message
        assert isinstance(err.value.__cause__, TypeError)
        assert _state(cur) == before and _armed(envs) == armed  # nothing loaded or armed
        assert envs.channel_waiting() == rows[0]  # the earlier load's rows still wait
        envs.reset()
        assert envs.task_ids.tolist() == rows[0]  # and are restored
    finally:
        envs.close()


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_an_override_is_raised_as_itself(tmp_path, raised):
    # only an Exception of an override is a ConfigError: an interrupt is not the override's bug
    class Interrupted(SampleCurriculumTask):
        def resume_channel(self, *args: Any, **kwargs: Any) -> Any:
            raise raised

    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(Interrupted, cur)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        with pytest.raises(raised):
            load_curriculum_state(path, cur, env=envs)
    finally:
        envs.close()
