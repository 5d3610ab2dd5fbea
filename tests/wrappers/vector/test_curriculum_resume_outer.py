"""Resume a vector env whose curriculum wrapper sits under another vector wrapper.

Users wrap ``make_curriculum_vec``'s env further (episode statistics, cost shaping).
``save_curriculum_state(..., env=outer)`` finds the curriculum wrapper under them (Gymnasium's
``VectorWrapper`` does not forward attributes: it walks the ``.env`` chain) and saves the
channel's rows; ``load_curriculum_state(..., env=outer)`` must put them back too. Before the fix
the load looked for ``resume_channel`` on the outermost wrapper only and, not finding it,
restored no channel: the resumed reset then reseeded the curriculum with its seed and withdrew
the saved waiting tasks, and an async run diverged from the uninterrupted one (a sync run, with
no channel, resumed exactly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

from .resume_harness import MODES, N, build, final_state

STEPS = 20
CASES = [(mode, vec) for mode in ("NEXT_STEP", "SAME_STEP") for vec in ("sync", "async")]


def _step(outer: Any, inner: Any) -> list[Any]:
    _, rewards, term, trunc, _ = outer.step(np.zeros(N, dtype=np.int64))
    return [inner.task_ids.tolist(), rewards.tolist(), (term | trunc).tolist()]


def run(mode: str, vec: str, path: str, resume: bool) -> dict[str, Any]:
    """Uninterrupted (save after the step that ends every first episode) or resumed."""
    cur, inner = build(mode, "evicting", vec, seed=7 if resume else 0)
    outer = gym.wrappers.vector.RecordEpisodeStatistics(inner)
    try:
        if resume:
            load_curriculum_state(path, cur, env=outer)
            outer.reset(seed=123)  # the checkpoint's tasks and generator win over the seed
        else:
            outer.reset(seed=0)
            while not all(_step(outer, inner)[2]):
                pass
            save_curriculum_state(path, cur, env=outer)
            if mode == "NEXT_STEP":  # the reset step, which the resumed reset stands for
                _step(outer, inner)
        trace = [_step(outer, inner) for _ in range(STEPS)]
        return {"trace": trace, "state": final_state(cur, inner)}
    finally:
        outer.close()
        cur.close()


def resume_all(cases: list[list[Any]]) -> list[Any]:
    """Resume every ``(mode, vec, path)`` case (in a new interpreter)."""
    return [run(*case, resume=True) for case in cases]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    folder = tmp_path_factory.mktemp("resume_outer")
    expected, cases = {}, []
    for mode, vec in CASES:
        path = str(Path(folder) / f"{mode}-{vec}.npz")
        expected[mode, vec] = run(mode, vec, path, resume=False)
        cases.append([mode, vec, path])
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_curriculum_resume_outer", "resume_all", cases
    )
    return {case: (expected[case], g) for case, g in zip(CASES, got, strict=True)}


@pytest.mark.parametrize(("mode", "vec"), CASES)
def test_a_curriculum_wrapper_under_another_vector_wrapper_resumes_exactly(runs, mode, vec):
    assert mode in MODES
    expected, got = runs[mode, vec]
    assert got["trace"] == expected["trace"]
    assert got["state"] == expected["state"]
