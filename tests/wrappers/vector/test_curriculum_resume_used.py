"""A checkpoint loaded into vector envs that already ran resumes as into fresh ones.

A user may load a checkpoint into envs that have been stepping (a rollback after a diverged
run, a second training phase in the same process that starts from a saved state). The envs'
curriculum work of their last step may still be pending then: with a channel (async) the
vector wrapper applies a step's ended episodes and refills the slots during the next step or
at the next reset. Those episodes and taken tasks belong to the run before the load; the loaded
state replaces them, as it does for a sync vector env, whose sub-envs recorded them at once.

Before the fix the resumed reset applied that pending work to the loaded curriculum (the old
run's episodes recorded and its taken tasks counted into the checkpoint's state, the refill
drawing from the restored generator), so the resumed run diverged from the uninterrupted one
where it had loaded right after a step that ended episodes, and only with async envs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gymcurric.errors import DataError
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

from ..checkpoint_files import rewrite
from .resume_harness import MODES, build, resumed, step
from .resume_harness import uninterrupted as run_and_save

STEPS = 20
CASES = [
    (mode, space, vec)
    for mode in MODES
    for space in ("plain", "evicting")
    for vec in ("sync", "async")
]


def run_until_every_episode_ends(envs: Any) -> None:
    """Reset ``envs`` (seed 7) and step them until a step ends every episode."""
    envs.reset(seed=7)
    while not all(step(envs)[2]):  # the step's curriculum work is pending now
        pass


def resumed_into_used_envs(mode: str, space: str, vec: str, path: str) -> dict[str, Any]:
    """Envs (another seed) that run until a step ends every episode, then load and reset."""
    return resumed(mode, space, vec, path, STEPS, before_load=run_until_every_episode_ends)


def resume_all(cases: list[list[str]]) -> list[Any]:
    """Resume every ``(mode, space, vec, path)`` case (in a new interpreter)."""
    return [resumed_into_used_envs(*case) for case in cases]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Every case run uninterrupted here (saved after a step that ended every episode)."""
    folder = tmp_path_factory.mktemp("resume_used")
    expected, cases = {}, []
    for case in CASES:
        path = folder / ("-".join(case) + ".npz")
        expected[case] = run_and_save(*case, Path(path))
        cases.append([*case, str(path)])
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_curriculum_resume_used", "resume_all", cases
    )
    return {case: (expected[case], g) for case, g in zip(CASES, got, strict=True)}


@pytest.mark.parametrize(("mode", "space", "vec"), CASES)
def test_a_load_into_envs_with_pending_curriculum_work_resumes_exactly(runs, mode, space, vec):
    expected, got = runs[mode, space, vec]
    assert got["starts"] == expected["starts"]
    assert got["trace"] == expected["trace"]
    state, got_state = dict(expected["state"]), dict(got["state"])
    arrays, got_arrays = state.pop("arrays"), got_state.pop("arrays")
    assert got_state == state  # generator, disabled tasks, config
    for key, value in arrays.items():
        assert got_arrays[key] == value, key


def test_the_pending_work_is_applied_to_the_state_it_belongs_to(tmp_path):
    # in one process: a refused load (a damaged file) leaves the pending work pending, and a
    # load applies it before the state is replaced, never after
    cur, envs = build("NEXT_STEP", "plain", "async", seed=0)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        saved = cur.state_dict()
        while not all(step(envs)[2]):
            pass
        assert envs._pending is not None or envs._pending_refill  # work left for the next step
        bad = tmp_path / "bad.npz"
        bad.write_bytes(path.read_bytes())
        rewrite(bad, channel_refill_due=np.asarray(2))
        with pytest.raises(DataError, match="channel_refill_due"):
            load_curriculum_state(bad, cur, env=envs)
        assert envs._pending is not None or envs._pending_refill  # untouched
        load_curriculum_state(path, cur, env=envs)
        assert envs._pending is None and not envs._pending_refill
        envs.flush_curriculum()
        assert cur.state_dict()["rng"] == saved["rng"]
        assert cur.stats()["curriculum/updates"] == 0.0  # the old run's episodes are not in it
    finally:
        envs.close()
        cur.close()
