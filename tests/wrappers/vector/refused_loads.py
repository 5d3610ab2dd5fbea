"""Refused checkpoint loads into vector envs: a curriculum that refuses every file, and more.

Shared by ``test_curriculum_resume_refused.py``, ``test_curriculum_resume_overrides.py`` and
``test_sub_env_names.py``: :class:`RefusesTheFile`, :func:`save_without_channel_rows` (a file
with no task channel's rows) and :func:`refuse_a_load_that_cannot_be_put_back`.
"""

from __future__ import annotations

from typing import Any

import pytest
from gymnasium.vector import SyncVectorEnv

from gymcurric.errors import DataError
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import SampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv
from tests.sub_env_faults import step_and_flush


class RefusesTheFile:
    """A curriculum whose ``load_state_dict`` refuses every file (another configuration's)."""

    def load_state_dict(self, state: Any) -> None:
        raise DataError("from another configuration")


def save_without_channel_rows(path: Any, cur: Any) -> Any:
    """A checkpoint of the curriculum ``cur`` that holds no task channel's rows; its path.

    Saved through gymcurric's vector ``SampleCurriculumTask`` over two stub sub-envs, without
    a channel, reset (seed 1) and stepped three times; closed once saved.
    """
    plain = SampleCurriculumTask(
        SyncVectorEnv([lambda: SingleSampleCurriculumTask(TaskStubEnv("stub"), cur)] * 2), cur
    )
    try:
        plain.reset(seed=1)
        step_and_flush(plain, 3)
        return save_curriculum_state(path, cur, env=plain)
    finally:
        plain.close()


def refuse_a_load_that_cannot_be_put_back(tmp_path: Any, curriculum: Any, envs: Any) -> None:
    """Save through ``envs`` (reset, seed 0), then load the file with :class:`RefusesTheFile`.

    For envs of which a sub-env refuses to be put back: asserts that the curriculum's
    ``DataError`` is raised (not the error of putting the sub-envs back), with that failure
    noted on its cause.
    """
    envs.reset(seed=0)
    path = save_curriculum_state(tmp_path / "c.npz", curriculum, env=envs)
    with pytest.raises(DataError, match="from another configuration") as err:
        load_curriculum_state(path, RefusesTheFile(), env=envs)
    notes = getattr(err.value.__cause__, "__notes__", [])
    assert any("putting the envs back failed too" in n for n in notes), notes
