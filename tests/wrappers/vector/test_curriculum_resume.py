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

With a pool that evicts tasks (``evicting``), the save's flush applies the last episodes, and
their records evict tasks that wait in the channel's slots (drawn ahead, or spares). The
uninterrupted run's sub-envs still take those (the channel withdraws them at its next refill,
after the reset step, or, ``SAME_STEP``, after the next step). Before the channel's slots and
stale marks were saved, the resumed run dropped them and drew others.

Every task has episodes of 3 steps and a refused task costs no step, so the sub-envs end their
episodes in the same steps and the checkpoint falls on a boundary for all of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import load_curriculum_state, save_curriculum_state
from tests.new_interpreter import call_in_new_interpreter

from ..checkpoint_files import rewrite
from .resume_harness import MODES, PLAIN, SPACES, N, build, resumed, step, uninterrupted

CASES = [(mode, space, vec) for mode in MODES for space in SPACES for vec in ("sync", "async")]


def resume_all(cases: list[list[str]]) -> list[Any]:
    """Resume every ``(mode, space, vec, path)`` case (in a new interpreter)."""
    return [resumed(*case) for case in cases]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Every case run uninterrupted here, and resumed, all in one new interpreter."""
    folder = tmp_path_factory.mktemp("resume")
    expected, cases = {}, []
    for mode, space, vec in CASES:
        path = folder / f"{mode}-{space}-{vec}.npz"
        expected[mode, space, vec] = uninterrupted(mode, space, vec, path)
        cases.append([mode, space, vec, str(path)])
    got = call_in_new_interpreter(
        "tests.wrappers.vector.test_curriculum_resume", "resume_all", cases
    )
    return {case: (expected[case], g) for case, g in zip(CASES, got, strict=True)}


@pytest.mark.parametrize(("mode", "space", "vec"), CASES)
def test_resume_right_after_a_step_that_ended_every_episode_is_exact(runs, mode, space, vec):
    expected, got = runs[mode, space, vec]
    if space == "refusing":
        assert expected["rej"] > 0
    if space == "evicting" and vec == "async" and mode != "DISABLED":
        assert expected["gone"], "no waiting task left the pool in the save's flush"
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
    cur, envs = build(mode, "plain", "sync", seed=0)
    try:
        envs.reset(seed=0)
        seen = []
        for _ in range(3):  # episodes of 3 steps end in step 3
            _, _, dones = step(envs)
            seen.append((dones[0], envs.awaiting_reset()))
        awaiting = MODES[mode] != AutoresetMode.SAME_STEP
        assert seen == [(False, [False] * N)] * 2 + [(True, [awaiting] * N)]
        if MODES[mode] == AutoresetMode.DISABLED:  # until the user resets them
            envs.reset(options={"reset_mask": np.array([True, False, True, False])})
            assert envs.awaiting_reset() == [False, True, False, True]
        else:  # NEXT_STEP: until the reset step
            step(envs)
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


def test_a_channel_restored_with_its_slots_and_stale_marks_refills_as_the_saved_one():
    space = FixedTaskSpace([{"level": i + 1} for i in range(8)])
    cur, cur2 = Curriculum(space, seed=0), Curriculum(space, seed=3)
    saved, restored, old = TaskChannel(3, spares=2), TaskChannel(3, spares=2), TaskChannel(3)
    try:
        saved.refill(cur)
        gone = saved.waiting()[1]
        cur.mark_invalid(gone, "refused")  # a pool change: every waiting task is stale now
        assert cur.slot_of(gone) is None and saved.stale(cur) == [True] * 3
        cur2.load_state_dict(cur.state_dict())
        rows = saved.waiting(), saved.waiting_spares(), saved.waiting_slots()
        restored.restore_waiting(cur2, *rows)  # the task that left the pool too
        assert (restored.waiting(), restored.waiting_spares(), restored.waiting_slots()) == rows
        assert restored.stale(cur2) == [False] * 3
        restored.mark_stale(saved.stale(cur))
        # env 1 resets before the refill (it was busy at the change): it takes the stale task
        assert saved.take(1) == restored.take(1) == gone
        saved.refill(cur)
        restored.refill(cur2)
        assert restored.waiting() == saved.waiting() and gone not in saved.waiting()
        assert restored.waiting_spares() == saved.waiting_spares()
        assert restored.stale(cur2) == saved.stale(cur) == [False] * 3
        state, state2 = cur.state_dict(), cur2.state_dict()
        assert state2["rng"] == state["rng"]
        for key, value in state["arrays"].items():
            assert np.array_equal(state2["arrays"][key], value, equal_nan=True), key
        # without the slots (a file from before them) such a task is dropped: a fresh draw
        old.restore_waiting(cur2, [gone, -1, -1])
        assert old.waiting() == [-1, -1, -1]
    finally:
        for chan in (saved, restored, old):
            chan.close()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        # the message gives the shapes and dtypes expected and those the file holds
        (
            {"channel_stale": None},
            r"must be an int array of shape \(4, 2\) .* a bool array of shape \(4,\) .*; got "
            r"'channel_slots' int64 of shape \(4, 2\) and 'channel_stale' missing$",
        ),
        (
            {"channel_slots": np.zeros((N, 3), np.int64)},
            r"shape \(4, 2\) .*got 'channel_slots' int64 of shape \(4, 3\) and "
            r"'channel_stale' bool of shape \(4,\)$",
        ),
        (
            {"channel_slots": np.zeros((N, 2), np.float32)},
            r"an int array of .*got 'channel_slots' float32 of shape \(4, 2\)",
        ),
        (
            {"channel_stale": np.zeros(N, np.int64)},
            r"a bool array of shape \(4,\) .*'channel_stale' int64 of shape \(4,\)$",
        ),
        (
            {"channel_stale": np.ones((N, 1), bool)},
            r"'channel_stale' bool of shape \(4, 1\)$",
        ),
        (
            {"channel_waiting": None, "channel_spares": None},
            r"the file has no 'channel_waiting' \(got 'channel_slots' int64 of shape \(4, 2\) "
            r"and 'channel_stale' bool of shape \(4,\)\)$",
        ),
        ({"channel_slots": np.array([[0, 1]] * (N - 1) + [[12, 1]])}, "holds slot 12 for task"),
        (
            {"channel_slots": np.array([[0, 1]] * (N - 1) + [[-1, 1]])},
            "'channel_slots': task 3 of env 3 has slot -1, the slot of no task",
        ),
    ],
)
def test_malformed_channel_slots_or_stale_marks_are_a_data_error(tmp_path, change, match):
    from gymcurric.errors import DataError

    path = save_curriculum_state(tmp_path / "c.npz", Curriculum(PLAIN, seed=0))
    rewrite(  # well-formed channel members, then the damage
        path,
        channel_waiting=np.arange(N, dtype=np.int64),
        channel_spares=np.full((N, 1), 5, dtype=np.int64),
        channel_slots=np.array([[0, 1]] * N, dtype=np.int64),
        channel_stale=np.ones(N, dtype=bool),
    )
    rewrite(path, **change)
    target = Curriculum(PLAIN, seed=3)
    before = target.state_dict()["rng"]
    with pytest.raises(DataError, match=match) as info:
        load_curriculum_state(path, target)
    assert "c.npz" in str(info.value) and target.state_dict()["rng"] == before


def test_a_file_whose_waiting_tasks_do_not_match_its_envs_is_refused_before_any_change(tmp_path):
    # channel_waiting has one entry per sub-env, as env_task_ids: a file where they differ is
    # damaged, and refused before the curriculum or the env is changed (not by resume_channel,
    # after the curriculum was loaded and the env set to resume)
    from gymnasium.vector import SyncVectorEnv

    from gymcurric.errors import DataError
    from gymcurric.wrappers.vector import SampleCurriculumTask
    from tests.curriculum_stubs import make_wrapped

    path = save_curriculum_state(tmp_path / "c.npz", Curriculum(PLAIN, seed=0))
    rewrite(
        path,
        env_task_ids=np.full(2, -1, dtype=np.int64),
        channel_waiting=np.arange(3, dtype=np.int64),
    )
    cur = Curriculum(PLAIN, seed=3)
    chan = TaskChannel(2)
    envs = SampleCurriculumTask(SyncVectorEnv([lambda: make_wrapped(cur)] * 2), cur, channel=chan)
    try:
        before = cur.state_dict()["rng"]
        with pytest.raises(DataError, match="channel_waiting"):
            load_curriculum_state(path, cur, env=envs)
        assert cur.state_dict()["rng"] == before
        assert envs.unwrapped.get_attr("resuming") == (False, False)
    finally:
        envs.close()
