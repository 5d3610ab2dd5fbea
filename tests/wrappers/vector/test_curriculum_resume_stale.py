"""Resume with ``DISABLED`` autoreset after the user disabled a task waiting in a channel slot.

A user's ``cur.mark_invalid(task_id, ...)`` between two steps changes the curriculum's pool
outside the vector wrapper: an async vector env's channel (``make_curriculum_vec``) still holds
the tasks it drew ahead, the disabled one among them, and withdraws them at its next refill.
Until then they are stale, and ``save_curriculum_state(..., env=envs)`` saves them with their
slots and stale marks (``channel_stale``). With ``DISABLED`` autoreset no sub-env takes a task
during a step, so that next refill is the one the uninterrupted run makes after its next step
that ends episodes (or at its next masked reset), after those episodes are recorded.

Each case runs to a boundary where every sub-env starts its next episode from scratch, disables
a task waiting in a slot (sync: a task of the pool nobody runs), saves, and goes on; a new
interpreter builds the same vector env with another seed, loads the file, resets once and goes
on. Its episodes (task ids, rewards, dones, the masked resets' tasks) and the final curriculum
state (the generator too) must be the uninterrupted run's exactly:

* ``after_reset``: saved right after the masked reset that restarted every sub-env. Before the
  fix the resumed reset withdrew and redrew the stale tasks at once, before the first episodes
  were recorded, where the uninterrupted run draws them after: the spares drawn then (a refused
  task's retries) differed, and with them the tasks of the sub-envs that refused one.
* ``after_done``: saved after the step that ended every episode, once ``envs.stats()`` had
  applied that step's work (so the pool change is the last thing before the save); the
  uninterrupted run's masked reset withdraws the stale tasks, as the resumed reset does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

from .test_curriculum_resume import N, _build, _state, _step, _stream

MODE = AutoresetMode.DISABLED.name
STEPS = 30
CASES = [
    (where, space, vec)
    for where in ("after_reset", "after_done")
    for space in ("plain", "refusing", "evicting")
    for vec in ("sync", "async")
]


def _disable_a_waiting_task(cur: Any, envs: Any, vec: str) -> int:
    """``mark_invalid`` a task waiting in sub-env 1's slot (sync: a pool task nobody runs)."""
    if vec == "async":
        waiting, spares = envs.channel_waiting(), envs.channel_spares()
        task = waiting[1] if waiting[1] >= 0 else spares[1][0]
    else:
        running = set(envs.task_ids.tolist())
        task = max(t for t in range(12) if cur.slot_of(t) is not None and t not in running)
    assert task >= 0 and cur.slot_of(task) is not None
    cur.mark_invalid(task, "disabled by the user")
    assert cur.slot_of(task) is None
    return task


def uninterrupted(where: str, space: str, vec: str, path: Path) -> dict[str, Any]:
    """Run to the second step that ends every episode; disable a waiting task, save, go on."""
    cur, envs = _build(MODE, space, vec, seed=0)
    try:
        envs.reset(seed=0)
        ended = 0
        while ended < 2:
            _, _, dones = _step(envs)
            if any(dones):
                assert all(dones), "the sub-envs must end their episodes in the same steps"
                ended += 1
                if ended < 2 or where == "after_reset":
                    envs.reset(options={"reset_mask": np.asarray(dones)})
        if where == "after_done":
            envs.stats()  # applies the done step's work: the pool change comes after it
        disabled = _disable_a_waiting_task(cur, envs, vec)
        save_curriculum_state(path, cur, env=envs)
        with np.load(path) as z:
            saved = {k: z[k].tolist() for k in z.files if k.startswith("channel_")}
        if where == "after_done":  # the user's masked reset starts the next episodes
            envs.reset(options={"reset_mask": np.ones(N, dtype=bool)})
        starts = envs.task_ids.tolist()
        trace = _stream(envs, MODE, STEPS)
        rejections = sum(envs.unwrapped.get_attr("rejections"))
        state = _state(cur, envs)
        return {
            "starts": starts,
            "trace": trace,
            "state": state,
            "rej": rejections,
            "saved": saved,
            "disabled": disabled,
        }
    finally:
        envs.close()
        cur.close()


def resumed(where: str, space: str, vec: str, path: str) -> dict[str, Any]:
    """A fresh run (another seed) that loads the checkpoint, resets once and steps on."""
    cur, envs = _build(MODE, space, vec, seed=7)
    try:
        load_curriculum_state(path, cur, env=envs)
        envs.reset(seed=123)  # the checkpoint's tasks and generator win over the seed
        starts = envs.task_ids.tolist()
        trace = _stream(envs, MODE, STEPS)
        return {"starts": starts, "trace": trace, "state": _state(cur, envs)}
    finally:
        envs.close()
        cur.close()


def resume_all(cases: list[list[str]]) -> list[Any]:
    """Resume every ``(where, space, vec, path)`` case (in a new interpreter)."""
    return [resumed(*case) for case in cases]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Every case run uninterrupted here, and resumed, all in one new interpreter."""
    folder = tmp_path_factory.mktemp("resume_stale")
    expected, cases = {}, []
    for where, space, vec in CASES:
        path = folder / f"{where}-{space}-{vec}.npz"
        expected[where, space, vec] = uninterrupted(where, space, vec, path)
        cases.append([where, space, vec, str(path)])
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_curriculum_resume_stale", "resume_all", cases
    )
    return {case: (expected[case], g) for case, g in zip(CASES, got, strict=True)}


@pytest.mark.parametrize(("where", "space", "vec"), CASES)
def test_resume_after_a_waiting_task_was_disabled_is_exact(runs, where, space, vec):
    expected, got = runs[where, space, vec]
    if space == "refusing":
        assert expected["rej"] > 0
    saved = expected["saved"]
    if vec == "async":  # the disabled task was saved in a slot, marked stale
        assert expected["disabled"] in [saved["channel_waiting"][1], *saved["channel_spares"][1]]
        assert saved["channel_stale"] == [True] * N
    else:  # no channel
        assert saved == {}
    assert expected["disabled"] in expected["state"]["disabled"]
    assert got["starts"] == expected["starts"]
    assert got["trace"] == expected["trace"]
    state, got_state = dict(expected["state"]), dict(got["state"])
    arrays, got_arrays = state.pop("arrays"), got_state.pop("arrays")
    assert got_state == state  # generator, disabled tasks, config
    for key, value in arrays.items():
        assert got_arrays[key] == value, key
