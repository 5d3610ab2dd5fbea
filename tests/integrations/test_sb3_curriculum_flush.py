"""Checkpoints of a shared curriculum hold the episodes the env workers buffered.

A worker of a ``SubprocVecEnv`` (or ``AsyncVectorEnv``) buffers the episodes it ends
(``worker_update_batch``, up to 1-4 s); every save flushes them into the shared state first.
"""

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import SubprocVecEnv, VecMonitor

from gymcurric.integrations.sb3 import (
    CurriculumCallback,
    load_curriculum_state,
    save_curriculum_state,
)
from gymcurric.tasks import Curriculum, FixedTaskSpace
from tests.curriculum_stubs import make_wrapped

pytestmark = pytest.mark.sb3

# 4-step episodes: after 4 vector steps each worker has ended (and buffered) one episode
SPACE = FixedTaskSpace([{"level": i + 1, "len": 4} for i in range(8)])


def subproc(cur, n=2):
    fns = [partial(make_wrapped, cur, f"flush{i}") for i in range(n)]
    return VecMonitor(SubprocVecEnv(fns, start_method="fork"))


def state_of(cur):
    """The curriculum's state now, as a saved file holds it (arrays, then the rest)."""
    state = dict(cur.state_dict())
    return {k: np.asarray(v).copy() for k, v in state.pop("arrays").items()}, state


def assert_file_holds(path, expected):
    arrays, meta = expected
    saved = load_curriculum_state(path)
    saved.pop("env_task_ids")
    saved_arrays = saved.pop("arrays")
    assert saved_arrays.keys() == arrays.keys()
    for name, array in arrays.items():
        np.testing.assert_array_equal(saved_arrays[name], array, name)
    assert saved == meta
    loaded = Curriculum(SPACE, seed=99)  # and a curriculum loaded from it agrees
    load_curriculum_state(path, loaded)
    return loaded.stats()


def test_save_curriculum_state_flushes_the_subproc_workers(tmp_path):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc(cur)
    try:
        venv.reset()
        for _ in range(4):
            venv.step(np.zeros(2, dtype=np.int64))
        assert cur.stats()["curriculum/updates"] == 0  # both episodes wait in the workers
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        venv.env_method("flush_curriculum")  # what the save must have done
        stats = cur.stats()
        assert stats["curriculum/updates"] == 2
        assert assert_file_holds(path, state_of(cur)) == stats
    finally:
        venv.close()
        cur.close()


class FlushAfterSave(BaseCallback):
    """After the curriculum callback's save, the state with every worker flushed."""

    def __init__(self, cur, every):
        super().__init__()
        self.cur, self.every, self.states = cur, every, []

    def _on_step(self):
        if self.n_calls % self.every == 0:
            self.training_env.env_method("flush_curriculum")
            self.states.append(state_of(self.cur))
        return True


def test_the_callback_saves_flush_the_subproc_workers(tmp_path):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc(cur)
    try:
        model = PPO("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0)
        save = CurriculumCallback(cur, save_path=tmp_path, save_freq=4)
        after = FlushAfterSave(cur, every=4)
        model.learn(32, callback=[save, after])  # 16 vector steps
        assert len(save.saved) == len(after.states) == 4
        updates = []
        for path, expected in zip(save.saved, after.states, strict=True):
            updates.append(assert_file_holds(path, expected)["curriculum/updates"])
        assert updates == [2, 4, 6, 8]  # every episode ended before each save
    finally:
        venv.close()
        cur.close()


def test_save_curriculum_state_flushes_async_vector_env_workers(tmp_path):
    # a Gymnasium AsyncVectorEnv of wrapped sub-envs (no vector wrapper): the same buffers
    cur = Curriculum(SPACE, seed=0, backend="shared")
    fns = [partial(make_wrapped, cur, f"aflush{i}") for i in range(2)]
    envs = gym.vector.AsyncVectorEnv(fns, context="fork")
    try:
        envs.reset(seed=0)
        for _ in range(4):
            envs.step(np.zeros(2, dtype=np.int64))
        assert cur.stats()["curriculum/updates"] == 0
        path = save_curriculum_state(tmp_path / "a.npz", cur, env=envs)
        envs.call("flush_curriculum")
        assert cur.stats()["curriculum/updates"] == 2
        assert_file_holds(path, state_of(cur))
    finally:
        envs.close()
        cur.close()


def test_a_load_applies_the_workers_buffers_to_the_state_it_replaces(tmp_path):
    # loading into envs that already ran: their buffered episodes belong to the old state
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc(cur)
    try:
        venv.reset()
        fresh = save_curriculum_state(tmp_path / "fresh.npz", cur, env=venv)
        for _ in range(4):
            venv.step(np.zeros(2, dtype=np.int64))
        load_curriculum_state(fresh, cur, env=venv)
        venv.env_method("flush_curriculum")
        assert cur.stats()["curriculum/updates"] == 0  # the loaded state, as saved
    finally:
        venv.close()
        cur.close()
