"""Resume of a single env as users run it: save in one interpreter, load and go on in another.

A run of one :class:`~gymcurric.wrappers.SampleCurriculumTask` env (under another wrapper, and
over a ``TimeLimit`` that truncates the longest tasks) saves its curriculum state with
``save_curriculum_state(..., env=env)`` and goes on; a new interpreter builds the same env with
another seed, loads the file and plays on. The episodes after the checkpoint (task ids,
returns, how they ended) and the final curriculum state (the generator too) must be the
uninterrupted run's exactly:

* ``terminated`` / ``truncated``: saved right after the step that ended an episode, before the
  user's ``reset()``. The resumed reset draws the next task, as the uninterrupted reset does.
  Before the single wrapper had ``awaiting_reset()``, the file held the task that had just
  ended and the resumed run played it again.
* ``mid_episode``: the resumed run plays the interrupted episode's task again from the start
  (the env's own state is not saved); the stub's episodes depend only on their task.
* ``after_reset``: saved right after ``reset()``: the resumed run plays the task reset to.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gymcurric.tasks import Curriculum
from gymcurric.wrappers import SampleCurriculumTask, load_curriculum_state, save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv
from tests.new_interpreter import call_in_new_interpreter
from tests.wrappers.resume_harness import SPACE, build, final_state, finish, resumed, uninterrupted

CASES = ("terminated", "truncated", "mid_episode", "after_reset")


def run_all(which: str, cases: list[list[str]]) -> list[Any]:
    """Run ``uninterrupted`` or ``resumed`` for every ``(case, path)`` (in a new interpreter)."""
    fn = {"uninterrupted": uninterrupted, "resumed": resumed}[which]
    return [fn(*case) for case in cases]


def _interpreter(which: str, cases: list[list[str]]) -> list[Any]:
    return call_in_new_interpreter("tests.wrappers.test_curriculum_resume", "run_all", which, cases)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case saved in one new interpreter and resumed in another."""
    folder = tmp_path_factory.mktemp("single-resume")
    cases = [[case, str(folder / f"{case}.npz")] for case in CASES]
    expected = _interpreter("uninterrupted", cases)
    got = _interpreter("resumed", cases)
    return {case: (e, g, path) for (case, path), e, g in zip(cases, expected, got, strict=True)}


@pytest.mark.parametrize("case", CASES)
def test_a_resumed_single_env_plays_the_uninterrupted_runs_episodes(runs, case):
    expected, got, path = runs[case]
    assert got["after"] == expected["after"]
    assert got["state"] == expected["state"]  # bit for bit, the generator too
    with np.load(path, allow_pickle=False) as z:
        saved = z["env_task_ids"].tolist()
    if case in ("terminated", "truncated"):
        assert saved == [-1]  # no task saved for an episode that had ended
    else:
        assert saved == [expected["after"][0][0]]  # the episode in progress, played again


def test_awaiting_reset_marks_an_ended_episode_until_the_reset(tmp_path):
    cur, env = build(seed=0)
    assert env.get_wrapper_attr("awaiting_reset")() == [False]
    env.reset(seed=0)
    env.step(0)
    assert env.get_wrapper_attr("awaiting_reset")() == [False]
    tid = finish(env)[0]
    assert env.get_wrapper_attr("awaiting_reset")() == [True]
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=env)  # through the outer wrapper
    with np.load(path, allow_pickle=False) as z:
        assert z["env_task_ids"].tolist() == [-1]
    env.reset()
    assert env.get_wrapper_attr("awaiting_reset")() == [False]
    assert env.get_wrapper_attr("task_id") != -1
    # an explicit task's episode is not tracked (it has no task id to save)
    env.reset(options={"task": {"level": 3, "len": 2}})
    finish(env)
    assert env.get_wrapper_attr("awaiting_reset")() == [False]
    assert tid >= 0


class _FailingReset(TaskStubEnv):
    """A stub whose next reset raises ``fail`` (once), after taking its task."""

    fail: type[Exception] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        fail, self.fail = self.fail, None
        if fail is not None:
            raise fail("this reset fails")
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("episode", ["ended", "running"])
@pytest.mark.parametrize("fail", [RuntimeError, ValueError])
def test_a_checkpoint_after_a_failed_reset_resumes_with_the_next_task(tmp_path, episode, fail):
    # A reset that fails (a refusal with no retry left, or any error) takes a task and starts
    # no episode: the uninterrupted run's next reset draws a new task, so the checkpoint must
    # save none, not the task of the episode before (which the resumed run would play again).
    def build(seed: int) -> tuple[Curriculum, Any, _FailingReset]:
        cur = Curriculum(SPACE, seed=seed, recompute_every=3)
        inner = _FailingReset()
        return cur, SampleCurriculumTask(inner, cur, max_retries=0), inner

    cur, env, inner = build(seed=0)
    env.reset(seed=0)
    for _ in range(3):
        finish(env)
        env.reset()
    if episode == "ended":
        finish(env)
    else:
        env.step(0)
    inner.fail = fail
    with pytest.raises(ValueError if fail is ValueError else fail):
        env.reset()
    assert env.awaiting_reset() == [True]  # no episode runs: the next reset draws
    path = save_curriculum_state(tmp_path / "c.npz", cur, env=env)
    with np.load(path, allow_pickle=False) as z:
        assert z["env_task_ids"].tolist() == [-1]
    env.reset()
    expected = [finish(env), final_state(cur)]

    cur2, env2, _ = build(seed=7)
    load_curriculum_state(path, cur2, env=env2)
    env2.reset(seed=123)
    assert [finish(env2), final_state(cur2)] == expected
