"""An SB3 VecEnv of yours with channel methods, under SB3's own wrappers, is named.

A checkpoint saves and restores a task channel's rows through gymcurric's vector
``SampleCurriculumTask`` only; where the env has none, a save or load warns
(``GymcurricWarning``) naming each vector env whose class has the channel's methods. An SB3
``VecEnv`` of yours was named only as the env given: under ``VecMonitor`` (as SB3 runs are
wrapped) it was skipped without a word, its rows neither saved nor restored.
"""

from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

from gymcurric.errors import GymcurricWarning
from gymcurric.integrations.sb3 import load_curriculum_state, save_curriculum_state
from gymcurric.tasks import Curriculum
from tests.curriculum_stubs import levels, make_wrapped

pytestmark = pytest.mark.sb3


class ChannelDummyVecEnv(DummyVecEnv):
    """A user's ``DummyVecEnv`` with a channel of its own (not gymcurric's vector wrapper)."""

    def channel_waiting(self) -> list[int]:
        return [0] * self.num_envs

    def resume_channel(self, waiting: Any, *args: Any, **kwargs: Any) -> None:
        self.resumed = waiting


def _venv(cls: type, cur: Curriculum) -> Any:
    return VecMonitor(cls([lambda: make_wrapped(cur, "a"), lambda: make_wrapped(cur, "b")]))


def test_a_look_alike_under_sb3_wrappers_is_named_by_a_save_and_a_load(tmp_path):
    cur = Curriculum(levels(3), seed=0)
    venv = _venv(ChannelDummyVecEnv, cur)
    try:
        venv.reset()
        name = f"{ChannelDummyVecEnv.__module__}.{ChannelDummyVecEnv.__qualname__}"
        with pytest.warns(GymcurricWarning, match="saves no task channel's rows") as saved:
            path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        assert name in str(saved[0].message)
        assert "channel_waiting(), resume_channel()" in str(saved[0].message)
        with np.load(path) as f:
            assert "channel_waiting" not in f.files  # as the warning says
        with pytest.warns(GymcurricWarning, match="restores no task channel's rows") as loaded:
            load_curriculum_state(path, cur, env=venv)
        assert name in str(loaded[0].message)
        assert not hasattr(venv.venv, "resumed")  # its resume_channel() was not called
    finally:
        venv.close()


def test_sb3s_own_vec_envs_do_not_warn(tmp_path):
    # pyproject's filterwarnings makes a GymcurricWarning fail the test
    cur = Curriculum(levels(3), seed=0)
    venv = _venv(DummyVecEnv, cur)
    try:
        venv.reset()
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        load_curriculum_state(path, cur, env=venv)
    finally:
        venv.close()
