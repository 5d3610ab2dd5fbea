"""gymcurric reads and sets its own wrappers in the sub-envs of SB3 vector envs.

SB3's ``get_attr`` and ``env_method("set_wrapper_attr", ...)`` reach the outermost layer of a
sub-env with the name: a user's wrapper above gymcurric's with a ``task_id``,
``pending_task_id``, ``resuming`` or ``next_datapack`` of its own was read
(``RegretScoreCallback`` and ``env_task_ids`` failed on ``int("mine")``) or set (the datapack
presets went to the user's attribute, and the worker exited at the reset that found none)
instead of gymcurric's. Now those go through names only gymcurric's wrappers have, with
``call_sub_envs``: a set that fails in a ``SubprocVecEnv`` worker (resuming a task) is an error
naming the sub-env, the worker goes on, and no sub-env is left resuming a task. The same goes
for the wrapper's methods: a user's ``flush_curriculum()`` above it is not called instead.
"""

from __future__ import annotations

import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import ConfigError, SubEnvCallError
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
from tests.sub_env_faults import (
    SPACE,
    Shadowing,
    resume_refuses,
    shadowing_curriculum,
    shared_curriculum_envs,
)
from tests.wrappers.vector.datapack_stubs import ENV_ID, Events, packs

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
    def make(cur):
        return subproc([partial(shadowing_curriculum, cur)] * 2)

    with shared_curriculum_envs(make) as (cur, venv):
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


def vec(fns, kind):
    return subproc(fns) if kind == "subproc" else DummyVecEnv(fns)


def armed(venv):
    """What each sub-env's next reset resumes (None: nothing), read from the wrapper itself."""
    return [r for _, r in venv.env_method("curriculum_task_ids")]


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_resuming_a_task_a_sub_env_refuses_names_it_keeps_the_worker_and_arms_none(capfd, kind):
    # sub-env 1's wrapper refuses task 2 in its process: sub-env 0 is put back
    with shared_curriculum_envs(
        lambda cur: vec([partial(resume_refuses, cur), partial(resume_refuses, cur, [2])], kind)
    ) as (cur, venv):
        venv.reset()
        match = r"sub-env 1: resume_curriculum_task\(\) raised builtins.ValueError: this"
        with pytest.raises(SubEnvCallError, match=match) as err:
            resume_env_tasks(venv, [1, 2])
        assert err.value.in_worker == (kind == "subproc")
        assert "put back" in err.value.__notes__[-1]
        assert armed(venv) == [None, None]  # sub-env 0 resumed task 1 at its next reset
        if kind == "subproc":
            assert all(p.is_alive() for p in venv.processes), "a worker exited"
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
        resume_env_tasks(venv, [1, 3])  # it goes on
        venv.reset()
        assert [info["task_id"] for info in venv.reset_infos] == [1, 3]


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_task_ids_are_checked_before_any_sub_env_is_armed(kind):
    # sub-envs 0 and 2 were armed when sub-env 1's wrapper refused -5
    def make(cur):
        return vec([partial(make_wrapped, cur)] * 3, kind)

    with shared_curriculum_envs(make) as (cur, venv):
        venv.reset()
        match = r"'task_ids\[1\]': np.int64\(-5\) \(the task sub-env 1 resumes"
        with pytest.raises(ConfigError, match=match) as err:
            resume_env_tasks(venv, np.array([1, -5, 2]))
        assert (err.value.key, err.value.value) == ("task_ids[1]", -5)
        assert armed(venv) == [None, None, None]


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_a_user_flush_curriculum_above_the_curriculum_wrapper_is_not_called(tmp_path, kind):
    # env_method("flush_curriculum") ran the user's (the outermost layer with the name)
    with shared_curriculum_envs(
        lambda cur: vec([partial(shadowing_curriculum, cur)] * 2, kind)
    ) as (cur, venv):
        venv.reset()
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        load_curriculum_state(path, cur, env=venv)
        assert venv.get_attr("calls") == [[], []]


@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_each_sub_env_of_a_mix_of_wrappers_and_look_alikes_is_reached_by_its_own_names(
    tmp_path, kind
):
    # one look-alike made every sub-env read by the plain names: int("mine") raised
    from tests.sub_env_faults import LookAlike

    with shared_curriculum_envs(
        lambda cur: vec([LookAlike, partial(shadowing_curriculum, cur)], kind)
    ) as (cur, venv):
        venv.reset()
        task = venv.reset_infos[1]["task_id"]
        assert env_task_ids(venv) == [2, task]
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        for _ in range(6):  # sub-env 1's 4-step episode ends, its next task starts
            venv.step(np.zeros(2, np.int64))
        load_curriculum_state(path, cur, env=venv)
        assert venv.get_attr("pending_task_id") == [2, "mine"]  # the look-alike's, by name
        assert venv.get_attr("resuming") == [True, "mine"]
        assert venv.get_attr("calls", indices=[1]) == [[]]  # the user's flush did not run
        assert venv.get_attr("flushes", indices=[0]) == [2]  # the save's and the load's
        venv.reset()
        assert venv.reset_infos[1]["task_id"] == task


class GymnasiumVec(VecEnv):
    """A user's SB3 ``VecEnv`` over a Gymnasium vector env, kept as ``env`` (reached through
    SB3's wrappers, which forward attributes): its sub-envs through ``call``."""

    def __init__(self, env):
        self.env = env
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    def reset(self):
        return self.env.reset(seed=0)[0]

    def step_async(self, actions):
        self.actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, _ = self.env.step(self.actions)
        return obs, rewards, terminated | truncated, [{} for _ in range(self.num_envs)]

    def close(self):
        self.env.close()

    def get_attr(self, name, indices=None):
        return [self.env.unwrapped.get_attr(name)[i] for i in self._get_indices(indices)]

    def set_attr(self, name, value, indices=None):
        raise NotImplementedError

    def env_method(self, name, *args, indices=None, **kwargs):
        values = self.env.unwrapped.call(name, *args, **kwargs)
        return [values[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._get_indices(indices)]


def test_an_sb3_vec_env_over_a_gymnasium_one_saves_and_restores_its_channel(tmp_path):
    # e99284b looked for the vector SampleCurriculumTask in Gymnasium vector envs only: through
    # an SB3 VecEnv the file silently lost the channel's rows (saved before it, through SB3's
    # attribute forwarding) and the last step's episodes, and a load restored no channel
    from stable_baselines3.common.vec_env import VecMonitor

    from tests.sub_env_faults import channel_envs, step_and_flush

    cur = Curriculum(SPACE, seed=0)
    ours = channel_envs(cur)
    venv = VecMonitor(GymnasiumVec(ours))
    try:
        venv.reset()
        for _ in range(6):  # episodes end: the vector wrapper holds their work for the next step
            venv.step(np.zeros(2, np.int64))
        saved = np.load(save_curriculum_state(tmp_path / "c.npz", cur, env=venv))
        assert "channel_waiting" in saved.files
        assert (ours.task_ids >= 0).all()
        direct = np.load(save_curriculum_state(tmp_path / "d.npz", cur, env=ours))
        assert {k: saved[k].tolist() for k in saved.files} == {
            k: direct[k].tolist() for k in direct.files
        }
        step_and_flush(ours, 5)
        assert ours.channel_waiting() != saved["channel_waiting"].tolist()
        load_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        assert ours.channel_waiting() == saved["channel_waiting"].tolist()
    finally:
        venv.close()
