"""gymcurric reads and sets its own wrappers in the sub-envs of SB3 vector envs.

SB3's ``get_attr`` and ``env_method("set_wrapper_attr", ...)`` reach the outermost layer of a
sub-env with the name: a user's wrapper above gymcurric's with a ``task_id``,
``pending_task_id``, ``resuming`` or ``next_datapack`` of its own was read
(``RegretScoreCallback`` and ``env_task_ids`` failed on ``int("mine")``) or set (the datapack
presets went to the user's attribute, and the worker exited at the reset that found none)
instead of gymcurric's. Now those go through names only gymcurric's wrappers have, with
``call_sub_envs``: a set that fails in a ``SubprocVecEnv`` worker (resuming a task) is an error
naming the sub-env, and the worker goes on.
"""

from __future__ import annotations

import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import RegretScoreCallback
from gymcurric.integrations.sb3.datapack import make_datapack_vec_env
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import (
    SampleCurriculumTask,
    env_task_ids,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from tests.curriculum_stubs import make_wrapped
from tests.sub_env_faults import SPACE, Shadowing, shadowing_curriculum
from tests.wrappers.vector.test_datapack import ENV_ID, Events, packs

pytestmark = pytest.mark.sb3

HAZARDS = FixedTaskSpace(
    [{"size": 5, "goal_distance": 1 + i % 3, "max_steps": 6 + 3 * i} for i in range(4)]
)


def subproc(fns):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (py3.12+)
        return SubprocVecEnv(fns, start_method="fork")


def shadowing_hazards(curriculum):
    env = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), curriculum)
    return Shadowing(env)


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_regret_scores_go_to_the_curriculum_task_ids_not_a_user_task_id(kind):
    # get_attr("task_id") gave ["mine", "mine"]: np.asarray(..., int64) raised in learn()
    cur = Curriculum(HAZARDS, seed=0, backend="shared")
    fns = [partial(shadowing_hazards, cur)] * 2
    venv = subproc(fns) if kind == "subproc" else DummyVecEnv(fns)
    callback = RegretScoreCallback(cur)
    try:
        model = PPO("MlpPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
        model.learn(64, callback=callback)
        ids, scores = callback.last_scores
        assert len(ids) > 0 and set(ids.tolist()) <= {0, 1, 2, 3}
        assert np.isfinite(scores).all()
    finally:
        venv.close()
        cur.close()


def test_a_checkpoint_reads_and_resumes_the_curriculum_wrapper_not_a_user_task_id(tmp_path):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc([partial(shadowing_curriculum, cur)] * 2)
    try:
        venv.reset()
        started = [info["task_id"] for info in venv.reset_infos]
        assert env_task_ids(venv) == started  # was ["mine", "mine"]: int("mine") raised
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        for _ in range(6):  # the 4-step episodes end, the next tasks start
            venv.step(np.zeros(2, np.int64))
        load_curriculum_state(path, cur, env=venv)
        # the resumed tasks went to the curriculum wrapper, not to the user's attributes
        assert venv.get_attr("pending_task_id") == ["mine", "mine"]
        assert venv.get_attr("resuming") == ["mine", "mine"]
        venv.reset()
        assert [info["task_id"] for info in venv.reset_infos] == started
    finally:
        venv.close()
        cur.close()


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_a_user_next_datapack_above_present_datapack_does_not_take_the_presets(kind):
    # env_method("set_wrapper_attr", "next_datapack") set the user's attribute: the sub-env's
    # reset found no preset, and a SubprocVecEnv worker exited on it
    sampler = Events(packs())
    venv = make_datapack_vec_env(
        ENV_ID, sampler, n_envs=2, wrapper=Shadowing,
        vec_env_cls=SubprocVecEnv if kind == "subproc" else DummyVecEnv,
        vec_env_kwargs={"start_method": "fork"} if kind == "subproc" else None,
    )  # fmt: skip
    try:
        venv.reset()
        assert [p.pack_id for p in venv.datapacks] == ["p0", "p1"]
        for _ in range(12):
            venv.step(np.zeros(2, dtype=np.int64))
        assert len(sampler.reports()) >= 2
        assert venv.get_attr("next_datapack") == ["mine", "mine"]  # the user's: untouched
    finally:
        venv.close()


def test_resuming_a_task_a_sub_env_refuses_names_it_and_keeps_the_worker(capfd):
    # env_method("set_wrapper_attr", "pending_task_id", -5) raised in the worker: it exited
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = subproc([partial(make_wrapped, cur)] * 2)
    try:
        venv.reset()
        with pytest.raises(ConfigError, match="pending_task_id") as err:
            resume_env_tasks(venv, [0, -5])
        assert err.value.value == -5
        assert "resume_curriculum_task() of sub-env 1" in "".join(err.value.__notes__)
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
        resume_env_tasks(venv, [1, 2])  # it goes on
        venv.reset()
        assert [info["task_id"] for info in venv.reset_infos] == [1, 2]
    finally:
        venv.close()
        cur.close()
