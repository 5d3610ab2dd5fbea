import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import gymcurric
from gymcurric.errors import ConfigError
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import SampleCurriculumTask, make_curriculum_vec
from tests.curriculum_stubs import make_stub, make_wrapped
from tests.wrappers.vector.vector_runs import (
    MODES,
    SPACE,
    check_reports,
    run,
    run_disabled,
    task_id_stream,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("mode", MODES)
def test_sync_vector_env_both_autoreset_modes(mode):
    cur = Curriculum(SPACE, seed=0)
    fns = [partial(make_wrapped, cur, f"s{i}") for i in range(3)]
    envs = SampleCurriculumTask(SyncVectorEnv(fns, autoreset_mode=mode), cur)
    check_reports(cur, run(envs))
    assert envs.stats() == cur.stats()
    envs.close()


@pytest.mark.parametrize("mode", MODES)
def test_async_vector_env_spawn_with_the_shared_backend(mode):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    fns = [partial(make_wrapped, cur, f"a{i}") for i in range(2)]
    envs = SampleCurriculumTask(AsyncVectorEnv(fns, autoreset_mode=mode, context="spawn"), cur)
    starts = []
    try:
        reports = run(envs, starts=starts)
        envs.close()  # the workers' copies apply their buffered episodes and sample counts
        check_reports(cur, reports)  # every worker's update lands here
        assert cur.stats()["curriculum/samples"] == float(sum(starts))
    finally:
        envs.close()
        cur.close()


@pytest.mark.filterwarnings("ignore:.*(Worker|exception|Traceback).*:UserWarning")
def test_async_vector_env_with_a_process_local_curriculum_fails_clearly():
    cur = Curriculum(SPACE, seed=0)
    envs = AsyncVectorEnv([partial(make_wrapped, cur, "l0")], context="spawn")
    try:
        with pytest.raises(ConfigError, match="backend='shared'"):
            envs.reset(seed=0)
    finally:
        envs.close(terminate=True)


def test_same_seed_same_task_stream():
    grid = FixedTaskSpace([{"num_hazards": n, "size": 4 + n % 3} for n in range(6)])

    def stream(seed):
        cur = Curriculum(grid, seed=0, recompute_every=4)
        envs = make_curriculum_vec("gymcurric/HazardGrid-v0", cur, num_envs=2)
        envs.reset(seed=seed)
        envs.action_space.seed(seed)
        out = []
        for _ in range(200):
            envs.step(envs.action_space.sample())
            out.append(envs.task_ids.tolist())
        envs.close()
        return out

    assert stream(0) == stream(0)


def test_disabled_autoreset_with_reset_mask():
    cur = Curriculum(SPACE, seed=0)
    fns = [partial(make_wrapped, cur, f"d{i}") for i in range(2)]
    envs = SampleCurriculumTask(SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED), cur)
    run_disabled(envs, cur, 20)


def test_unwrapped_sub_envs_are_a_clear_error():
    cur = Curriculum(SPACE, seed=0)
    with pytest.raises(ConfigError, match=r"sub-envs \[1\].*SampleCurriculumTask"):
        SampleCurriculumTask(SyncVectorEnv([partial(make_wrapped, cur), make_stub]), cur)
    with pytest.raises(ConfigError, match="another curriculum"):
        SampleCurriculumTask(SyncVectorEnv([partial(make_wrapped, Curriculum(SPACE))]), cur)
    envs = SampleCurriculumTask(AsyncVectorEnv([make_stub, make_stub], context="fork"), cur)
    try:
        with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] started an episode"):
            envs.reset(seed=0)
    finally:
        envs.close()


@pytest.mark.parametrize("vec", [SyncVectorEnv, AsyncVectorEnv])
def test_every_unwrapped_sub_env_is_named(vec):
    # the SyncVectorEnv check (at construction) named only the first unwrapped sub-env; the
    # AsyncVectorEnv one (at the first reset) names them all, in the same message
    cur = Curriculum(SPACE, seed=0, backend="shared")
    kw = {"context": "fork"} if vec is AsyncVectorEnv else {}
    base = vec([make_stub, partial(make_wrapped, cur), make_stub], **kw)
    try:
        with pytest.raises(ConfigError) as err:
            SampleCurriculumTask(base, cur).reset(seed=0)
        assert (err.value.key, err.value.source) == ("env", "vector.SampleCurriculumTask")
        assert "sub-envs [0, 2] started an episode without info['task_id']" in str(err.value)
    finally:
        base.close()
        cur.close()


def test_arguments_are_validated():
    cur = Curriculum(SPACE, seed=0)
    with pytest.raises(ConfigError, match="'curriculum'"):
        SampleCurriculumTask(SyncVectorEnv([partial(make_wrapped, cur)]), object())
    with pytest.raises(ConfigError, match="'vectorization_mode'"):
        make_curriculum_vec("gymcurric/HazardGrid-v0", cur, vectorization_mode="vector_entry_point")


def test_checkpoint_resume_of_a_vector_env(tmp_path):
    space = FixedTaskSpace([{"level": i + 1, "len": 3} for i in range(6)])

    def make(seed):
        cur = Curriculum(space, seed=seed, recompute_every=3)
        fns = [partial(make_wrapped, cur, f"r{i}") for i in range(2)]
        return cur, SampleCurriculumTask(
            SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP), cur
        )

    cur, envs = make(0)
    envs.reset(seed=0)
    task_id_stream(envs, 12)  # episodes of 3 steps: the checkpoint falls on an episode boundary
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
    expected = task_id_stream(envs, 30)

    cur2, envs2 = make(7)
    load_curriculum_state(path, cur2, env=envs2)
    envs2.reset(seed=123)  # the resumed tasks win over the seed; the generator is kept
    assert task_id_stream(envs2, 30) == expected


@pytest.mark.parametrize("flags", [[], ["--async"]])
def test_vector_example_runs(flags):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "examples/curriculum_gymnasium_vector.py", "--steps", "300", *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    updates = [line.split()[-1] for line in out.stdout.splitlines() if "curriculum/updates" in line]
    assert updates and float(updates[-1]) > 0


def test_gym_make_vec_wrappers_share_the_curriculum():
    cur = Curriculum(SPACE, seed=0)
    envs = gym.make_vec(
        "gymcurric/HazardGrid-v0",
        num_envs=2,
        vectorization_mode="sync",
        wrappers=[partial(gymcurric.wrappers.SampleCurriculumTask, curriculum=cur)],
    )
    SampleCurriculumTask(envs, cur)  # no error: the same object in every sub-env
