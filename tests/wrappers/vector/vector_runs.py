"""Vector curriculum runs stepped with checks: the stub task space, its env spec and runners.

Shared by ``test_curriculum.py``, ``test_curriculum_channel.py`` and the other vector curriculum
tests: :func:`run` and :func:`run_disabled` step a wrapped vector env checking every transition's
task, :func:`check_reports` checks what the curriculum was told.
"""

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from gymcurric.tasks import FixedTaskSpace

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]

# level i + 1 (never 0: every real step's reward names its task), lengths 2..4 to desync envs
SPACE = FixedTaskSpace([{"level": i + 1, "len": 2 + i % 3} for i in range(6)])


#: the stub env (``tests.curriculum_stubs``) registered for ``make_curriculum_vec``
STUB = gym.envs.registration.EnvSpec(
    "gymcurric-test/TaskStub-v0", entry_point="tests.curriculum_stubs:TaskStubEnv"
)


def level(task_id):
    """The level of task ``task_id`` of :data:`SPACE` (the reward of its every step)."""
    return SPACE.task(int(task_id))["level"]


def run(envs, steps=40, seed=0, starts=None):
    """Step with checks; return the finished episodes as (task_id, return)."""
    mode = envs.metadata["autoreset_mode"]
    _, info = envs.reset(seed=seed)
    assert info["_task_id"].all() and (envs.task_ids == info["task_id"]).all()
    starts = [] if starts is None else starts
    starts.append(envs.num_envs)
    prev_dones = np.zeros(envs.num_envs, dtype=bool)
    returns = np.zeros(envs.num_envs)
    finished = []
    for _ in range(steps):
        _, rewards, term, trunc, info = envs.step(np.zeros(envs.num_envs, dtype=np.int64))
        dones = term | trunc
        real = ~prev_dones if mode == AutoresetMode.NEXT_STEP else np.ones_like(dones)
        for i in np.flatnonzero(real):  # each transition is attributed to its own task
            assert rewards[i] == level(envs.task_ids[i]), (i, rewards[i], envs.task_ids[i])
        returns[real] += rewards[real]
        for i in np.flatnonzero(dones):
            finished.append((int(envs.task_ids[i]), float(returns[i])))
            returns[i] = 0.0
        started = info.get("_task_id", np.zeros_like(dones))
        starts.append(int(started.sum()))
        assert (started == (prev_dones if mode == AutoresetMode.NEXT_STEP else dones)).all()
        prev_dones = dones
    return finished


def task_id_stream(envs, n):
    """Step ``n`` times with action 0; per step, the vector wrapper's ``task_ids`` as a list."""
    out = []
    for _ in range(n):
        envs.step(np.zeros(envs.num_envs, dtype=np.int64))
        out.append(envs.task_ids.tolist())
    return out


def check_reports(cur, finished):
    """Every finished episode earned its task's return, and the curriculum got each once."""
    assert finished, "no episode finished"
    for tid, ret in finished:
        task = SPACE.task(tid)
        assert ret == task["level"] * task["len"]
    assert cur.stats()["curriculum/updates"] == float(len(finished))


def run_disabled(envs, cur, steps):
    """DISABLED autoreset: step, reset the done sub-envs with a mask; check tasks and reports."""
    envs.reset(seed=0)
    episodes = 0
    for _ in range(steps):
        _, rewards, term, trunc, _ = envs.step(np.zeros(envs.num_envs, dtype=np.int64))
        for i in range(envs.num_envs):
            assert rewards[i] == level(envs.task_ids[i])
        dones = term | trunc
        if dones.any():
            episodes += int(dones.sum())
            before = envs.task_ids.copy()
            _, info = envs.reset(options={"reset_mask": dones})
            assert (info["_task_id"] == dones).all()
            assert (envs.task_ids[~dones] == before[~dones]).all()
            assert (envs.task_ids[dones] == info["task_id"][dones]).all()
    assert cur.stats()["curriculum/updates"] == float(episodes) > 0
