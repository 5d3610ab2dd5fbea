"""The single-env resume harness: a curriculum-wrapped env run, saved and resumed.

Shared by ``test_curriculum_resume.py`` (which describes the runs) and
``test_curriculum_resave.py``: :func:`build` makes the curriculum and the env,
:func:`uninterrupted` plays a case to its checkpoint and on, :func:`resumed` loads a checkpoint
into a fresh env and plays on. Importable in a new interpreter (``tests.new_interpreter``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import SampleCurriculumTask, load_curriculum_state, save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv

#: episodes of 2 to 5 steps; the TimeLimit truncates the 5-step ones at 4
SPACE = FixedTaskSpace([{"level": i + 1, "len": 2 + i % 4} for i in range(10)])
LIMIT = 4
EPISODES = 12  # played after the checkpoint


def build(seed: int) -> tuple[Curriculum, Any]:
    cur = Curriculum(SPACE, seed=seed, recompute_every=3)
    return cur, RecordEpisodeStatistics(SampleCurriculumTask(TimeLimit(TaskStubEnv(), LIMIT), cur))


def finish(env: Any) -> list[Any]:
    """Play the current episode to its end: its task id, return and how it ended."""
    tid = int(env.get_wrapper_attr("task_id"))
    total = 0.0
    while True:
        _, reward, terminated, truncated, _ = env.step(0)
        total += float(reward)
        if terminated or truncated:
            return [tid, total, "terminated" if terminated else "truncated"]


def final_state(cur: Curriculum) -> dict[str, Any]:
    """The curriculum state, arrays as lists (NaN as a string), for an exact comparison."""
    state = dict(cur.state_dict())
    arrays = state.pop("arrays")
    state["arrays"] = {k: np.asarray(a).tolist() for k, a in sorted(arrays.items())}
    return json.loads(json.dumps(state, default=repr).replace("NaN", '"nan"'))


def uninterrupted(case: str, path: str) -> dict[str, Any]:
    """Play to the case's checkpoint (after a few episodes), save there, and play on."""
    cur, env = build(seed=0)
    env.reset(seed=0)
    played, partial = 0, 0.0
    while True:
        if case == "mid_episode" and played >= 3:
            partial = float(env.step(0)[1])  # every task lasts 2 steps at least
            break
        ended = finish(env)
        played += 1
        if played >= 3 and ended[2] == case:
            break
        env.reset()
        if case == "after_reset" and played >= 3:
            break
    save_curriculum_state(path, cur, env=env)
    after = []
    if case in ("mid_episode", "after_reset"):
        after.append(finish(env))  # the episode the checkpoint fell in
        after[0][1] += partial
    while len(after) < EPISODES:
        env.reset()
        after.append(finish(env))
    return {"after": after, "state": final_state(cur)}


def resumed(case: str, path: str) -> dict[str, Any]:
    """A fresh env (another seed) that loads the checkpoint, resets and plays on."""
    cur, env = build(seed=7)
    load_curriculum_state(path, cur, env=env)
    env.reset(seed=123)  # the checkpoint's task and generator win over the seed
    after = [finish(env)]
    while len(after) < EPISODES:
        env.reset()
        after.append(finish(env))
    return {"after": after, "state": final_state(cur)}
