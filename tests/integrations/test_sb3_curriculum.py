import math
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import CheckpointCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import (
    CurriculumCallback,
    load_curriculum_state,
    save_curriculum_state,
)
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import SampleCurriculumTask, env_task_ids
from tests.curriculum_stubs import RESETS, TaskStubEnv, make_wrapped

pytestmark = pytest.mark.sb3

ROOT = Path(__file__).resolve().parents[2]
# 4-step episodes: with n_steps=8 every rollout (and checkpoint) ends on an episode boundary
SPACE = FixedTaskSpace([{"level": i + 1, "len": 4} for i in range(8)])


def venv_for(cur, tag, n=2, cls=DummyVecEnv, **kwargs):
    return cls([partial(make_wrapped, cur, f"{tag}{i}") for i in range(n)], **kwargs)


def ppo(venv):
    return PPO("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0, device="cpu")


def resets(tag):
    return [(name, task["level"]) for name, task in RESETS if name.startswith(tag)]


class Capture(KVWriter):
    def __init__(self):
        self.dumps = []

    def write(self, key_values, key_excluded, step=0):
        self.dumps.append(dict(key_values))

    def close(self):
        pass


def test_dummy_vec_env_reports_every_episode_and_the_callback_logs(tmp_path):
    cur = Curriculum(SPACE, seed=0)
    venv = VecMonitor(venv_for(cur, "log"))
    model = ppo(venv)
    capture = Capture()
    model.set_logger(Logger(folder=None, output_formats=[capture]))
    model.learn(64, callback=CurriculumCallback(cur))
    assert cur.stats()["curriculum/updates"] == 64 / 4  # 2 envs x 32 steps / 4-step episodes
    logged = [d for d in capture.dumps if "curriculum/updates" in d]
    assert logged, capture.dumps
    keys = {k for d in logged for k in d if k.startswith("curriculum/")}
    assert {"curriculum/entropy", "curriculum/num_tasks", "curriculum/samples"} <= keys
    assert all(math.isfinite(v) for d in logged for k, v in d.items() if k in keys)
    assert "rollout/ep_rew_mean" in logged[-1]  # dumped together with SB3's own values


def test_make_vec_env_with_wrapper_class():
    cur = Curriculum(SPACE, seed=0)
    venv = make_vec_env(
        TaskStubEnv,
        n_envs=2,
        seed=0,
        wrapper_class=SampleCurriculumTask,
        wrapper_kwargs={"curriculum": cur},
    )
    venv.reset()
    ids = env_task_ids(venv)
    assert all(i >= 0 for i in ids) and [r["task_id"] for r in venv.reset_infos] == ids
    for _ in range(8):
        venv.step(np.zeros(2, dtype=np.int64))
    assert cur.stats()["curriculum/updates"] == 4.0


def test_exact_resume_from_model_and_curriculum_checkpoints(tmp_path):
    n, m = 32, 48  # timesteps: 2 rollouts, then 3 more
    cur_a = Curriculum(SPACE, seed=0, recompute_every=3)
    ppo(venv_for(cur_a, "A")).learn(n + m)
    uninterrupted = [level for _, level in resets("A")]

    cur_b = Curriculum(SPACE, seed=0, recompute_every=3)
    callbacks = [
        CheckpointCallback(save_freq=8, save_path=str(tmp_path)),
        CurriculumCallback(cur_b, save_path=tmp_path, save_freq=8),
    ]
    ppo(venv_for(cur_b, "B")).learn(n, callback=callbacks)
    assert callbacks[1].saved[-1] == tmp_path / f"rl_model_curriculum_{n}_steps.npz"
    assert (tmp_path / f"rl_model_{n}_steps.zip").exists()
    first = [level for _, level in resets("B")]

    # "a new process": another curriculum seed, fresh envs; both come back from the files
    cur_c = Curriculum(SPACE, seed=99, recompute_every=3)
    venv_c = venv_for(cur_c, "C")
    model = PPO.load(tmp_path / f"rl_model_{n}_steps.zip", env=venv_c, device="cpu")
    load_curriculum_state(callbacks[1].saved[-1], cur_c, env=venv_c)
    model.learn(m, reset_num_timesteps=False)
    second = [level for _, level in resets("C")]

    assert second[:2] == first[-2:]  # the resumed resets continue the tasks in progress
    assert first + second[2:] == uninterrupted
    assert cur_c.stats() == cur_a.stats()


def test_callback_arguments_are_validated():
    cur = Curriculum(SPACE, seed=0)
    with pytest.raises(ConfigError, match="'save_freq'"):
        CurriculumCallback(cur, save_path="x")
    with pytest.raises(ConfigError, match="'save_freq'"):
        CurriculumCallback(cur, save_freq=-1)
    with pytest.raises(ConfigError, match="'curriculum'"):
        CurriculumCallback(object())
    with pytest.raises(ConfigError, match="'save_path'"):
        CurriculumCallback(cur).checkpoint_path(10)


def test_saving_with_unwrapped_envs_is_a_clear_error(tmp_path):
    venv = DummyVecEnv([TaskStubEnv])
    with pytest.raises(ConfigError, match="SampleCurriculumTask"):
        save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE), env=venv)


def test_a_save_after_a_load_before_any_reset_keeps_the_loaded_tasks(tmp_path):
    # a CheckpointCallback that fires before the first reset after a load, or a load-and-save
    # that migrates a file: the sub-envs still resume the loaded tasks, so the file saves them
    path = save_curriculum_state(tmp_path / "a.npz", Curriculum(SPACE, seed=0))
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    members["env_task_ids"] = np.array([3, -1], dtype=np.int64)
    with open(path, "wb") as f:
        np.savez(f, **members)
    cur = Curriculum(SPACE, seed=5)
    venv = venv_for(cur, "resave")
    load_curriculum_state(path, cur, env=venv)
    again = save_curriculum_state(tmp_path / "b.npz", cur, env=venv)
    with np.load(again, allow_pickle=False) as z:
        assert z["env_task_ids"].tolist() == [3, -1]
    venv.reset()
    ids = env_task_ids(venv)
    assert ids[0] == 3 and ids[1] >= 0
    with np.load(save_curriculum_state(again, cur, env=venv), allow_pickle=False) as z:
        assert z["env_task_ids"].tolist() == ids  # resumed: the envs' own tasks again


@pytest.mark.parametrize(
    "start_method", ["fork", pytest.param("forkserver", marks=pytest.mark.slow), "spawn"]
)
def test_subproc_vec_env_with_the_shared_backend(start_method, tmp_path):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = venv_for(cur, "S", cls=SubprocVecEnv, start_method=start_method)
    try:
        callback = CurriculumCallback(cur, save_path=tmp_path, save_freq=8)
        ppo(venv).learn(32, callback=callback)
        state = load_curriculum_state(callback.saved[-1])
        assert len(state["env_task_ids"]) == 2
        venv.close()  # the workers' copies apply their buffered episodes and sample counts
        assert cur.stats()["curriculum/updates"] == 32 / 4  # every worker's episodes count
        assert cur.stats()["curriculum/samples"] == 2 + 32 / 4  # first resets + autoresets
    finally:
        venv.close()
        cur.close()


@pytest.mark.timeout(60)
@pytest.mark.slow  # docs/curriculum.md's SubprocVecEnv snippet runs the same path by default
def test_sb3_example_runs():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "examples/curriculum_sb3.py", "--steps", "512", "--num-envs", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "curriculum/updates" in out.stdout
