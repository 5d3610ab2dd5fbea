"""Resume as users run it: a checkpoint right after a step that ended episodes, in a new process.

A run saves its curriculum state (``save_curriculum_state(..., env=envs)``) on any step, and
the resumed run loads it in a new interpreter, resets once and steps on. Right after a step in
which every sub-env's episode ended, the resumed run must start the tasks the uninterrupted run
starts next and then match it step for step, curriculum state included (bit for bit, the
generator too), in every autoreset mode, sync and async, with and without refused tasks:

* ``NEXT_STEP``: the sub-envs reset in the next step (the reset step, reward 0); the resumed
  run's reset stands for it. Before the fix the saved task of a done sub-env was the one that
  had just ended, and the resumed run played it again.
* ``SAME_STEP``: the sub-envs reset in the done step itself; the resumed run's reset restarts
  the tasks they had just started.
* ``DISABLED``: the user resets the done sub-envs (``reset_mask``) after the checkpoint.

Every task has episodes of 3 steps and a refused task costs no step, so the sub-envs end their
episodes in the same steps and the checkpoint falls on a boundary for all of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from gymcurric.wrappers.vector import make_curriculum_vec

from .test_curriculum_channel import STUB

ROOT = Path(__file__).resolve().parents[3]
N = 4
STEPS = 20
SPACES = {
    "plain": FixedTaskSpace([{"level": i + 1, "len": 3} for i in range(12)]),
    # every fourth task is refused (make_curriculum_vec's spares take the retries)
    "refusing": FixedTaskSpace(
        [{"reject": True, "n": i} if i % 4 == 1 else {"level": i + 1, "len": 3} for i in range(12)]
    ),
}
MODES = {
    m.name: m for m in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
}
CASES = [(mode, space, vec) for mode in MODES for space in SPACES for vec in ("sync", "async")]


def _build(mode: str, space: str, vec: str, seed: int) -> tuple[Any, Any]:
    backend = "shared" if vec == "async" else "local"
    cur = Curriculum(SPACES[space], seed=seed, recompute_every=3, backend=backend)
    kwargs: dict[str, Any] = {"autoreset_mode": MODES[mode]}
    if vec == "async":
        kwargs["context"] = "fork"
    envs = make_curriculum_vec(STUB, cur, N, vectorization_mode=vec, vector_kwargs=kwargs)
    return cur, envs


def _step(envs: Any) -> tuple[list[int], list[float], list[bool]]:
    _, rewards, term, trunc, _ = envs.step(np.zeros(N, dtype=np.int64))
    return envs.task_ids.tolist(), rewards.tolist(), (term | trunc).tolist()


def _stream(envs: Any, mode: str, n: int) -> list[Any]:
    """``n`` steps: per step the task ids, rewards and dones (and the masked resets)."""
    out: list[Any] = []
    for _ in range(n):
        ids, rewards, dones = _step(envs)
        out.append([ids, rewards, dones])
        if MODES[mode] == AutoresetMode.DISABLED and any(dones):
            envs.reset(options={"reset_mask": np.asarray(dones)})
            out.append(["reset", envs.task_ids.tolist()])
    return out


def _state(cur: Any, envs: Any) -> dict[str, Any]:
    """The curriculum state after the run's last step, arrays as lists (NaN as a string)."""
    envs.flush_curriculum()
    state = dict(cur.state_dict())
    arrays = state.pop("arrays")
    state["arrays"] = {k: np.asarray(a).tolist() for k, a in sorted(arrays.items())}
    return json.loads(json.dumps(state, default=repr).replace("NaN", '"nan"'))


def uninterrupted(mode: str, space: str, vec: str, path: Path) -> dict[str, Any]:
    """Run until the second step that ends every episode, save there, go on."""
    cur, envs = _build(mode, space, vec, seed=0)
    try:
        envs.reset(seed=0)
        ended = 0
        while True:
            ids, rewards, dones = _step(envs)
            if any(dones):
                assert all(dones), "the sub-envs must end their episodes in the same steps"
                ended += 1
                if ended == 2:
                    break
                if MODES[mode] == AutoresetMode.DISABLED:
                    envs.reset(options={"reset_mask": np.asarray(dones)})
        save_curriculum_state(path, cur, env=envs)
        # the episodes that start next: in the reset step, the done step, the masked reset
        if MODES[mode] == AutoresetMode.NEXT_STEP:
            ids, rewards, _ = _step(envs)
            assert rewards == [0.0] * N  # the reset step
            starts = ids
        elif MODES[mode] == AutoresetMode.SAME_STEP:
            starts = [int(t) for t in envs.unwrapped.get_attr("task_id")]
        else:
            envs.reset(options={"reset_mask": np.ones(N, dtype=bool)})
            starts = envs.task_ids.tolist()
        trace = _stream(envs, mode, STEPS)
        rejections = sum(envs.unwrapped.get_attr("rejections"))
        return {"starts": starts, "trace": trace, "state": _state(cur, envs), "rej": rejections}
    finally:
        envs.close()
        cur.close()


def resumed(mode: str, space: str, vec: str, path: str) -> dict[str, Any]:
    """A fresh run (another seed) that loads the checkpoint, resets once and steps on."""
    cur, envs = _build(mode, space, vec, seed=7)
    try:
        load_curriculum_state(path, cur, env=envs)
        envs.reset(seed=123)  # the checkpoint's tasks and generator win over the seed
        starts = envs.task_ids.tolist()
        trace = _stream(envs, mode, STEPS)
        return {"starts": starts, "trace": trace, "state": _state(cur, envs)}
    finally:
        envs.close()
        cur.close()


def resume_all(cases_json: str) -> None:
    """Resume every ``(mode, space, vec, path)`` case; print the results as one JSON line."""
    print(json.dumps([resumed(*case) for case in json.loads(cases_json)]))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Every case run uninterrupted here, and resumed, all in one new interpreter."""
    folder = tmp_path_factory.mktemp("resume")
    expected, cases = {}, []
    for mode, space, vec in CASES:
        path = folder / f"{mode}-{space}-{vec}.npz"
        expected[mode, space, vec] = uninterrupted(mode, space, vec, path)
        cases.append([mode, space, vec, str(path)])
    code = f"""
        from tests.wrappers.vector.test_curriculum_resume import resume_all
        resume_all({json.dumps(json.dumps(cases))})
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {case: (expected[case], g) for case, g in zip(CASES, got, strict=True)}


@pytest.mark.parametrize(("mode", "space", "vec"), CASES)
def test_resume_right_after_a_step_that_ended_every_episode_is_exact(runs, mode, space, vec):
    expected, got = runs[mode, space, vec]
    if space == "refusing":
        assert expected["rej"] > 0
    assert got["starts"] == expected["starts"]
    assert got["trace"] == expected["trace"]
    state, got_state = dict(expected["state"]), dict(got["state"])
    arrays, got_arrays = state.pop("arrays"), got_state.pop("arrays")
    assert got_state == state  # generator, disabled tasks, config
    for key, value in arrays.items():
        assert got_arrays[key] == value, key


# ---------------------------------------------------------------- the parts, in this process


@pytest.mark.parametrize("mode", list(MODES))
def test_awaiting_reset_marks_the_done_sub_envs_until_they_reset(mode):
    cur, envs = _build(mode, "plain", "sync", seed=0)
    try:
        envs.reset(seed=0)
        seen = []
        for _ in range(3):  # episodes of 3 steps end in step 3
            _, _, dones = _step(envs)
            seen.append((dones[0], envs.awaiting_reset()))
        awaiting = MODES[mode] != AutoresetMode.SAME_STEP
        assert seen == [(False, [False] * N)] * 2 + [(True, [awaiting] * N)]
        if MODES[mode] == AutoresetMode.DISABLED:  # until the user resets them
            envs.reset(options={"reset_mask": np.array([True, False, True, False])})
            assert envs.awaiting_reset() == [False, True, False, True]
        else:  # NEXT_STEP: until the reset step
            _step(envs)
            assert envs.awaiting_reset() == [False] * N
    finally:
        envs.close()


def test_a_resuming_env_without_a_task_takes_the_next_one_and_keeps_the_generator():
    from gymcurric.wrappers import SampleCurriculumTask
    from tests.curriculum_stubs import TaskStubEnv, levels

    env = SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(8), seed=0))
    twin = Curriculum(levels(8), seed=0)
    env.resuming = True
    assert env.resuming and env.pending_task_id is None
    _, info = env.reset(seed=5)  # resumed: the seed does not reseed the curriculum
    assert info["task_id"] == twin.sample_task()[0] and not env.resuming
    _, info = env.reset(seed=5)  # an ordinary seeded reset does
    twin.reseed(5)
    assert info["task_id"] == twin.sample_task()[0]
    env.pending_task_id = 3  # a task to resume: resuming too, until that reset
    assert env.resuming and env.pending_task_id == 3
    env.resuming = False
    assert env.pending_task_id is None
