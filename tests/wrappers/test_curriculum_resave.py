"""A checkpoint saved right after a load, before any reset, is the loaded one.

Users save before the first reset after a load: a checkpoint callback that fires early, a
defensive save, a load-and-save that migrates files. The envs then still wait to resume (each
its saved task, a vector env's channel its saved waiting tasks, spares, slots and stale marks,
all put back at the first reset), and the new file must say so: resuming from it must give the
uninterrupted run's episodes and curriculum state exactly, as resuming from the first file does.
Before the fix the save read the envs' current state instead (a single env's ``task_id`` of
``-1``, the channel's fresh slots), and the run resumed from the second file diverged.

As users run it, in three interpreters: one runs uninterrupted and writes the checkpoint
(the harnesses in ``resume_harness.py``, single and vector), one loads it into a fresh
env and saves at once, one resumes from that second file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter
from tests.wrappers import resume_harness as single
from tests.wrappers.checkpoint_files import members
from tests.wrappers.vector import resume_harness as vector

#: single env: saved with no task (an episode had ended), and with the task reset to
SINGLE = [["single", "terminated"], ["single", "after_reset"]]
#: vector: NEXT_STEP saves -1 for its done sub-envs (and, evicting, stale waiting tasks);
#: SAME_STEP saves the tasks just started (and spares, the refused tasks' retries)
VECTOR = [
    ["vector", "NEXT_STEP", "evicting", "sync"],
    ["vector", "NEXT_STEP", "evicting", "async"],
    ["vector", "SAME_STEP", "plain", "sync"],
    ["vector", "SAME_STEP", "refusing", "async"],
    ["vector", "DISABLED", "plain", "async"],
]
CASES = SINGLE + VECTOR


def _build(case: list[str], seed: int) -> tuple[Any, Any]:
    if case[0] == "single":
        return single.build(seed)
    return vector.build(*case[1:], seed=seed)


def write(case: list[str], path: str) -> dict[str, Any]:
    """The uninterrupted run, which saves the checkpoint at ``path`` on its way."""
    if case[0] == "single":
        return single.uninterrupted(case[1], path)
    return vector.uninterrupted(*case[1:], Path(path))


def resave(case: list[str], path: str, again: str) -> dict[str, Any]:
    """A fresh env (another seed) loads ``path`` and saves to ``again`` before any reset."""
    cur, env = _build(case, seed=5)
    try:
        load_curriculum_state(path, cur, env=env)
        save_curriculum_state(again, cur, env=env)
    finally:
        env.close()
        if case[0] == "vector":
            cur.close()
    return {}


def resume(case: list[str], path: str) -> dict[str, Any]:
    """A fresh env that loads ``path``, resets and plays on."""
    if case[0] == "single":
        return single.resumed(case[1], path)
    return vector.resumed(*case[1:], path)


def run_all(which: str, calls: list[list[Any]]) -> list[Any]:
    """Run ``write``, ``resave`` or ``resume`` on every argument list (in a new interpreter)."""
    fn = {"write": write, "resave": resave, "resume": resume}[which]
    return [fn(*args) for args in calls]


def _interpreter(which: str, calls: list[list[Any]]) -> list[Any]:
    return call_in_new_interpreter("tests.wrappers.test_curriculum_resave", "run_all", which, calls)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each case written, re-saved after a load and resumed from the re-saved file."""
    folder = tmp_path_factory.mktemp("resave")
    first = [str(folder / f"{'-'.join(case)}.npz") for case in CASES]
    second = [str(folder / f"{'-'.join(case)}-again.npz") for case in CASES]
    expected = _interpreter("write", [[c, p] for c, p in zip(CASES, first, strict=True)])
    _interpreter("resave", [[c, p, q] for c, p, q in zip(CASES, first, second, strict=True)])
    got = _interpreter("resume", [[c, q] for c, q in zip(CASES, second, strict=True)])
    return {
        "-".join(case): (e, g, p, q)
        for case, e, g, p, q in zip(CASES, expected, got, first, second, strict=True)
    }


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_a_save_right_after_a_load_resumes_as_the_loaded_checkpoint(runs, case):
    expected, got, first, second = runs["-".join(case)]
    if case[0] == "single":
        assert got["after"] == expected["after"]
        assert got["state"] == expected["state"]
    else:
        assert got["starts"] == expected["starts"]
        assert got["trace"] == expected["trace"]
        assert got["state"] == expected["state"]
    saved, again = members(first), members(second)
    assert sorted(again) == sorted(saved)
    for key, value in saved.items():  # the same file: task ids, channel, curriculum state
        assert np.array_equal(again[key], value, equal_nan=value.dtype.kind == "f"), key
    if case[0] == "vector" and case[1] == "NEXT_STEP":
        assert saved["env_task_ids"].tolist() == [-1] * vector.N
