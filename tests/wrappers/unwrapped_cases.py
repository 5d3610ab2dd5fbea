"""Vector envs whose sub-envs lack ``SampleCurriculumTask``: the shared space, stubs and errors.

Shared by ``test_curriculum_state_unwrapped.py`` (Gymnasium vector envs) and
``tests/integrations/test_sb3_curriculum_unwrapped.py`` (Stable-Baselines3 ones).
"""

from functools import partial

import gymnasium as gym

from gymcurric.tasks import Curriculum
from gymcurric.wrappers import save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv, levels, make_wrapped

SPACE = levels(4)
#: The error for sub-envs ``{0}`` of ``{1}`` without the wrapper (a regex, to ``format``).
NOT_WRAPPED = (
    r"'env'.*sub-envs \[{}\] of {} are not wrapped in gymcurric\.wrappers\.SampleCurriculumTask"
)
#: Each action, and the function its error names.
SOURCES = {
    "save": "save_curriculum_state",
    "load": "load_curriculum_state",
    "task_ids": "env_task_ids",
    "resume": "resume_env_tasks",
}


class TaskIdStubEnv(TaskStubEnv):
    """An env with a ``task_id`` of its own (not gymcurric's wrapper): only that is not enough."""

    task_id = 0


def make_task_id_stub() -> gym.Env:
    """A fresh :class:`TaskIdStubEnv` (an env factory for vector envs)."""
    return TaskIdStubEnv()


def checkpoint(tmp_path, num_envs):
    """A checkpoint saved with a wrapped vector env of ``num_envs`` sub-envs."""
    cur = Curriculum(SPACE, seed=0)
    envs = gym.vector.SyncVectorEnv([partial(make_wrapped, cur)] * num_envs)
    envs.reset(seed=0)
    return save_curriculum_state(tmp_path / "wrapped.npz", cur, env=envs)
