"""Resume after the user disabled a task waiting in a channel slot, in every autoreset mode.

A user's ``cur.mark_invalid(task_id, ...)`` between two steps changes the curriculum's pool
outside the vector wrapper: an async vector env's channel (``make_curriculum_vec``) still holds
the tasks it drew ahead, the disabled one among them, and withdraws them at its next refill.
Until then they are stale, and ``save_curriculum_state(..., env=envs)`` saves them with their
slots and stale marks (``channel_stale``), and whether the refill that withdraws them is due at
the resumed reset (``channel_refill_due``). Which refill that is depends on the last step:

* after a step that ended episodes, the refill after it (``NEXT_STEP``: after the reset step,
  which the resumed reset stands for; ``SAME_STEP``: after the next step; ``DISABLED``: the
  masked reset's);
* after a reset that started every episode, the refill after the next step that ends episodes
  (``NEXT_STEP``: after the reset step that follows it), after those episodes are recorded: the
  sub-envs that reset before it still take the stale tasks.

Each case runs to a boundary where every sub-env starts its next episode from scratch, disables
a task waiting in a slot (sync: a task of the pool nobody runs), saves, and goes on; a new
interpreter builds the same vector env with another seed, loads the file, resets once and goes
on. Its episodes (task ids, rewards, dones, the masked resets' tasks) and the final curriculum
state (the generator too) must be the uninterrupted run's exactly:

* ``after_reset``: saved right after the reset that restarted every sub-env (``DISABLED``: the
  masked reset; else a full ``reset()``). Before the fix the resumed reset withdrew and redrew
  the stale tasks at once (``DISABLED``: before the first episodes were recorded; ``NEXT_STEP``
  at the reset; ``SAME_STEP`` after the first step), where the uninterrupted run draws them
  after the next step that ends episodes: the tasks the sub-envs start then, the spares (a
  refused task's retries) and the generator differed. ``SAME_STEP`` files could not tell this
  save from one after a done step.
* ``after_done``: saved after the step that ended every episode, once ``envs.stats()`` had
  applied that step's work (so the pool change is the last thing before the save).

The same files without ``channel_refill_due`` (as written before it) load as before.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gymcurric.errors import DataError
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

from ..checkpoint_files import members, rewrite
from .resume_harness import MODES, N, build, final_state, next_starts, resumed, step, stream

STEPS = 30
DUE = "channel_refill_due"
CASES = [
    (mode, where, space, vec)
    for mode in MODES
    for where in ("after_reset", "after_done")
    for space in ("plain", "refusing", "evicting")
    for vec in ("sync", "async")
]
# the async cases the resumed reset got right before channel_refill_due: their files without
# it (as written before it) must still resume exactly
LEGACY = [
    case
    for case in CASES
    if case[3] == "async" and (case[0] == "DISABLED" or case[1] == "after_done")
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


def _run_to_boundary(envs: Any, mode: str, where: str) -> None:
    """From ``reset(seed=0)`` to the second step that ends every episode, or the reset after it."""
    disabled = MODES[mode] == AutoresetMode.DISABLED
    envs.reset(seed=0)
    ended = 0
    while ended < 2:
        _, _, dones = step(envs)
        if any(dones):
            assert all(dones), "the sub-envs must end their episodes in the same steps"
            ended += 1
            if disabled and (ended < 2 or where == "after_reset"):
                envs.reset(options={"reset_mask": np.asarray(dones)})
    if where == "after_reset" and not disabled:
        envs.reset()  # a full reset: every sub-env starts a new episode
    if where == "after_done":
        envs.stats()  # applies the done step's work: the pool change comes after it


def uninterrupted(mode: str, where: str, space: str, vec: str, path: Path) -> dict[str, Any]:
    """Run to the boundary; disable a waiting task, save, go on."""
    cur, envs = build(mode, space, vec, seed=0)
    try:
        _run_to_boundary(envs, mode, where)
        disabled = _disable_a_waiting_task(cur, envs, vec)
        save_curriculum_state(path, cur, env=envs)
        saved = {k: v.tolist() for k, v in members(path).items() if k.startswith("channel_")}
        # the episodes that start next: at the reset, else as the harness finds them
        starts = envs.task_ids.tolist() if where == "after_reset" else next_starts(envs, mode)
        trace = stream(envs, mode, STEPS)
        rejections = sum(envs.unwrapped.get_attr("rejections"))
        state = final_state(cur, envs)
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


def resume_all(cases: list[list[str]]) -> list[Any]:
    """Resume every ``(mode, where, space, vec, path)`` case (in a new interpreter)."""
    return [resumed(mode, space, vec, path, STEPS) for mode, _, space, vec, path in cases]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Any]:
    """Every case run uninterrupted here, and resumed, all in one new interpreter.

    The ``LEGACY`` cases are resumed from their file without ``channel_refill_due`` too (keyed
    with ``"legacy"`` appended).
    """
    folder = tmp_path_factory.mktemp("resume_stale")
    expected, keys, cases = {}, [], []
    for case in CASES:
        path = folder / ("-".join(case) + ".npz")
        expected[case] = uninterrupted(*case, path)
        keys.append(case)
        cases.append([*case, str(path)])
        if case in LEGACY:
            old = shutil.copy(path, folder / ("-".join(case) + "-legacy.npz"))
            if DUE in members(old):  # the main test checks that it is saved
                rewrite(old, **{DUE: None})
            keys.append((*case, "legacy"))
            cases.append([*case, str(old)])
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_curriculum_resume_stale", "resume_all", cases
    )
    return {key: (expected[key[:4]], g) for key, g in zip(keys, got, strict=True)}


def _check_exact(expected: dict[str, Any], got: dict[str, Any]) -> None:
    assert got["starts"] == expected["starts"]
    assert got["trace"] == expected["trace"]
    state, got_state = dict(expected["state"]), dict(got["state"])
    arrays, got_arrays = state.pop("arrays"), got_state.pop("arrays")
    assert got_state == state  # generator, disabled tasks, config
    for key, value in arrays.items():
        assert got_arrays[key] == value, key


@pytest.mark.parametrize(("mode", "where", "space", "vec"), CASES)
def test_resume_after_a_waiting_task_was_disabled_is_exact(runs, mode, where, space, vec):
    expected, got = runs[mode, where, space, vec]
    if space == "refusing":
        assert expected["rej"] > 0
    saved = expected["saved"]
    if vec == "async":  # the disabled task was saved in a slot, marked stale
        assert expected["disabled"] in [saved["channel_waiting"][1], *saved["channel_spares"][1]]
        assert saved["channel_stale"] == [True] * N
    else:  # no channel
        assert saved == {}
    assert expected["disabled"] in expected["state"]["disabled"]
    _check_exact(expected, got)
    if vec == "async":  # the refill that withdraws the stale tasks is due after a done step
        assert saved[DUE] is (where == "after_done")


@pytest.mark.parametrize(("mode", "where", "space", "vec"), LEGACY)
def test_a_file_from_before_channel_refill_due_resumes_as_before(runs, mode, where, space, vec):
    expected, got = runs[mode, where, space, vec, "legacy"]
    _check_exact(expected, got)


# ---------------------------------------------------------------- the file, in this process


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP"])
def test_without_channel_refill_due_a_reset_save_withdraws_the_stale_tasks_at_once(tmp_path, mode):
    # A file from before channel_refill_due loads as it did: the stale tasks are withdrawn at
    # the resumed reset (NEXT_STEP) or after the first step (SAME_STEP), as if saved after a
    # done step; with the member (saved right after a reset: False) they wait for the refill
    # after the next step that ends episodes.
    cur, envs = build(mode, "plain", "async", seed=0)
    try:
        _run_to_boundary(envs, mode, "after_reset")
        _disable_a_waiting_task(cur, envs, "async")
        path = save_curriculum_state(tmp_path / "new.npz", cur, env=envs)
    finally:
        envs.close()
        cur.close()
    old = shutil.copy(path, tmp_path / "old.npz")
    rewrite(old, **{DUE: None})
    saved = members(path)
    assert not saved[DUE] and DUE not in members(old)
    seen = {}
    for name, file in (("new", path), ("old", old)):
        cur, envs = build(mode, "plain", "async", seed=7)
        try:
            load_curriculum_state(file, cur, env=envs)
            assert envs.channel_refill_due() is (False if name == "new" else None)
            envs.reset(seed=123)
            if mode == "SAME_STEP":
                assert not any(step(envs)[2])
            seen[name] = envs.channel_waiting(), envs.channel_stale()
        finally:
            envs.close()
            cur.close()
    assert seen["new"] == (saved["channel_waiting"].tolist(), [True] * N)
    waiting, stale = seen["old"]
    assert stale == [False] * N and waiting != saved["channel_waiting"].tolist()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.asarray(1), r"must be one bool \(True or False\); got int64\(\) 1"),
        (np.asarray([True]), r"got bool\(1,\) \[True\]"),
        (np.asarray("yes"), r"got <U3\(\) 'yes'"),
        (np.zeros(40, dtype=bool), r"got bool\(40,\) \[False, False, False, False, False, False"),
    ],
)
def test_a_damaged_channel_refill_due_is_a_data_error_before_any_change(tmp_path, value, match):
    cur, envs = build("NEXT_STEP", "plain", "async", seed=0)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        assert members(path)[DUE].shape == ()
        rewrite(path, **{DUE: value})
        cur.reseed(3)
        before, waiting = cur.state_dict()["rng"], envs.channel_waiting()
        with pytest.raises(DataError, match=match) as info:
            load_curriculum_state(path, cur, env=envs)
        assert "c.npz" in str(info.value) and repr(DUE) in str(info.value)
        assert cur.state_dict()["rng"] == before
        assert envs.unwrapped.get_attr("resuming") == (False,) * N
        assert envs.channel_waiting() == waiting and envs.channel_refill_due() is False
        rewrite(path, **{DUE: np.asarray(True), "channel_stale": None, "channel_slots": None})
        with pytest.raises(DataError, match="comes with the channel's stale marks") as info:
            load_curriculum_state(path, cur, env=envs)
        assert "c.npz" in str(info.value) and repr(DUE) in str(info.value)
        assert envs.unwrapped.get_attr("resuming") == (False,) * N
    finally:
        envs.close()
        cur.close()
