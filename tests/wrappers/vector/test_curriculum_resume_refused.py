"""A load refused at any step changes nothing: the channel, the sub-envs and the curriculum.

``load_curriculum_state(path, cur, env=envs)`` sets three things: the tasks the vector
wrapper's channel restores at the next reset (``resume_channel``), the task each sub-env
resumes, and the curriculum. ``resume_channel`` used to run last, after the curriculum was
loaded and the sub-envs armed: where it raised, they stayed so. It now runs first (checked in
this process, before anything is set), and a refusal by the sub-envs or the curriculum after
it puts back what the channel was to restore before. Where that put-back raises (a
``resume_channel`` of yours), the refusal is still the error raised, and the sub-envs are
still put back.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from gymcurric.errors import ConfigError, DataError, SubEnvCallError
from gymcurric.tasks import Curriculum
from gymcurric.wrappers import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers import load_curriculum_state, resume_env_tasks, save_curriculum_state
from gymcurric.wrappers._sub_envs import call_sub_envs
from tests.curriculum_stubs import TaskStubEnv
from tests.sub_env_faults import (
    SPACE,
    LookAlike,
    channel_envs,
    resume_refuses,
    shared_curriculum_envs,
    step_and_flush,
)
from tests.wrappers.checkpoint_files import rewrite
from tests.wrappers.vector.refused_loads import (
    RefusesTheFile,
    refuse_a_load_that_cannot_be_put_back,
    save_without_channel_rows,
)

NAMES = ("pending_task_id", "resuming")


def _state(cur):
    state = dict(cur.state_dict())
    arrays = state.pop("arrays")
    return state, {k: np.asarray(a).tolist() for k, a in arrays.items()}


def _armed(envs):
    return [r for _, r in envs.env.call("curriculum_task_ids")]


@contextlib.contextmanager
def _reset_channel_envs(spares=0):
    """:func:`channel_envs` of a new curriculum, reset (seed 0); closed after the block."""
    envs = channel_envs(Curriculum(SPACE, seed=0), spares=spares)
    try:
        envs.reset(seed=0)
        yield envs
    finally:
        envs.close()


def test_a_channel_that_refuses_the_file_leaves_the_curriculum_and_sub_envs_as_they_were(
    tmp_path,
):
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cur)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        step_and_flush(envs, 6)  # episodes end: the curriculum learns of them and draws on
        before, waiting = _state(cur), envs.channel_waiting()
        assert before != _state(Curriculum(SPACE, seed=0))  # the load would change it

        def refuses(waiting, *args, **kwargs):  # a channel of yours that refuses the rows
            raise ConfigError("waiting", waiting, "not these tasks", source="resume_channel")

        envs.resume_channel = refuses
        with pytest.raises(ConfigError, match="not these tasks"):
            load_curriculum_state(path, cur, env=envs)
        assert _state(cur) == before  # was the file's: loaded before the channel refused
        assert _armed(envs) == [None, None]  # was the file's tasks
        assert envs.channel_waiting() == waiting
    finally:
        envs.close()


def test_a_file_the_curriculum_refuses_leaves_the_channel_restoring_what_it_did(tmp_path):
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cur)
    try:
        envs.reset(seed=0)
        first = save_curriculum_state(tmp_path / "first.npz", cur, env=envs)
        step_and_flush(envs, 6)
        later = save_curriculum_state(tmp_path / "later.npz", cur, env=envs)
        later_waiting = envs.channel_waiting()
        load_curriculum_state(first, cur, env=envs)  # the next reset is to restore it
        waiting, armed = envs.channel_waiting(), _armed(envs)
        assert waiting != later_waiting  # else the test would show nothing
        with pytest.raises(DataError, match="from another configuration"):
            load_curriculum_state(later, RefusesTheFile(), env=envs)
        assert envs.channel_waiting() == waiting and _armed(envs) == armed
    finally:
        envs.close()


def test_a_file_a_sub_env_refuses_leaves_the_channel_restoring_nothing(tmp_path):
    runs = []
    for load in (True, False):  # the same run, with and without the refused load
        cur = Curriculum(SPACE, seed=0)
        envs = channel_envs(cur, refused=range(8))
        try:
            envs.reset(seed=0)
            path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
            step_and_flush(envs, 6)
            before, waiting = _state(cur), envs.channel_waiting()
            if load:
                with pytest.raises(SubEnvCallError, match="sub-env 1: resume_curriculum_task"):
                    load_curriculum_state(path, cur, env=envs)
                assert envs.channel_waiting() == waiting
                assert _state(cur) == before and _armed(envs) == [None, None]
            envs.reset()  # the current channel's tasks, not the file's
            step_and_flush(envs, 6)
            runs.append((envs.task_ids.tolist(), envs.channel_waiting(), _state(cur)))
        finally:
            envs.close()
    assert runs[0] == runs[1]


def _put_back_raises(envs):
    """Make ``envs.resume_channel`` (a user's own) return a put-back function that raises."""
    resume = envs.resume_channel

    def resume_channel(*args, **kwargs):
        resume(*args, **kwargs)

        def put_back():
            raise RuntimeError("cannot put the channel back")

        return put_back

    envs.resume_channel = resume_channel


@pytest.mark.parametrize("refuses", ["curriculum", "sub-env"])
def test_a_put_back_that_raises_does_not_replace_the_refusal(tmp_path, refuses):
    # the put-back's RuntimeError was raised instead of the refusal, and (curriculum) the
    # sub-envs were left armed with the refused file's tasks
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cur, refused=range(8) if refuses == "sub-env" else ())
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        step_and_flush(envs, 6)
        _put_back_raises(envs)
        if refuses == "curriculum":
            with pytest.raises(DataError, match="from another configuration") as err:
                load_curriculum_state(path, RefusesTheFile(), env=envs)
            notes = getattr(err.value.__cause__, "__notes__", [])
        else:
            with pytest.raises(SubEnvCallError, match="sub-env 1: resume_curriculum_task") as err:
                load_curriculum_state(path, cur, env=envs)
            notes = getattr(err.value, "__notes__", [])
        assert any("cannot put the channel back" in n for n in notes), notes
        assert _armed(envs) == [None, None]  # put back all the same
    finally:
        envs.close()


@pytest.mark.parametrize(
    ("spares", "slots", "key"),
    [
        (0, [[0], []], "slots[1]"),  # a row without the waiting task's slot
        (1, [[0, 1], [0]], "slots[1]"),  # without its spare's
        (0, [[0], [0, 1]], "slots[1]"),
        (0, [[0], [2**64]], "slots[1][0]"),
        (0, [[0], [-2]], "slots[1][0]"),
        (0, [[0], [True]], "slots[1][0]"),
        (0, [[0], [1.0]], "slots[1][0]"),
        (0, [[0], ["1"]], "slots[1][0]"),
    ],
)
def test_resume_channel_refuses_slots_it_cannot_restore(spares, slots, key):
    # taken (int() of each), they failed the next reset half-way through restoring the
    # channel (IndexError, OverflowError; its waiting tasks withdrawn), or were restored as
    # something else (True as slot 1, -2 as "none")
    with _reset_channel_envs(spares) as envs:
        waiting, rows = envs.channel_waiting(), envs.channel_spares() if spares else None
        with pytest.raises(ConfigError) as err:
            envs.resume_channel(waiting, rows, slots=slots, stale=[False, False])
        assert err.value.key == key
        assert envs.channel_waiting() == waiting  # nothing is to be restored
        good = envs.channel_slots()
        envs.resume_channel(waiting, rows, slots=good, stale=[False, False])  # the same rows
        envs.reset()
        assert envs.task_ids.tolist() == waiting  # each sub-env took its restored task


def test_a_file_without_channel_rows_clears_the_restore_an_earlier_load_left(tmp_path):
    # loading file A (a channel's rows) and then file B (saved without a channel) left A's
    # rows to be restored: the next reset ran A's waiting tasks beside B's curriculum, and a
    # save before it wrote them into B's checkpoint
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cur)
    try:
        without = save_without_channel_rows(tmp_path / "without.npz", cur)
        envs.reset(seed=0)
        step_and_flush(envs, 6)
        with_rows = save_curriculum_state(tmp_path / "with.npz", cur, env=envs)
        step_and_flush(envs, 5)
        live = envs.channel_waiting()
        load_curriculum_state(with_rows, cur, env=envs)
        assert envs.channel_waiting() != live  # the file's rows: else the test shows nothing
        load_curriculum_state(without, cur, env=envs)
        assert envs.channel_waiting() == live  # the channel's own again
    finally:
        envs.close()


def test_slots_beyond_the_pool_are_refused_at_the_reset_before_anything_changes():
    # taken, the reset raised IndexError from curriculum.count after the sub-envs had reset
    # and the channel's waiting tasks were replaced; the pool is known only at the reset
    # (a load sets the channel's rows before it loads the curriculum)
    with _reset_channel_envs() as envs:
        waiting, good = envs.channel_waiting(), envs.channel_slots()
        envs.resume_channel(waiting, slots=[[10**6], [0]], stale=[False, False])
        cur = envs.curriculum
        before = _state(cur)
        with pytest.raises(ConfigError, match=r"slots\[0\]\[0\]") as err:
            envs.reset()
        assert "the curriculum's pool" in str(err.value)
        assert _state(cur) == before and envs.channel_waiting() == waiting
        assert envs.channel_slots() == [[10**6], [0]]  # the restore still waits
        envs.resume_channel(waiting, slots=good, stale=[False, False])
        envs.reset()  # still a working env, restoring what it was given
        assert envs.task_ids.tolist() == waiting


def look_alike(pending, resuming):
    """A :class:`~tests.sub_env_faults.LookAlike` with these attributes of its own."""
    env = LookAlike()
    env.pending_task_id, env.resuming = pending, resuming
    return env


@pytest.mark.parametrize("refuses", ["curriculum", "sub-env"])
@pytest.mark.parametrize(("pending", "resuming"), [(7, False), (None, True), (4, True)])
def test_a_refused_load_puts_a_look_alike_back_as_it_was(tmp_path, refuses, pending, resuming):
    # a look-alike was put back from the task its reset resumed: pending_task_id None where it
    # did not resume (7 lost), -1 where it resumed the task its reset takes (None lost)
    refused = range(8) if refuses == "sub-env" else ()  # sub-env 1: every task of the pool

    def make(cur):
        fns = [partial(look_alike, pending, resuming), partial(resume_refuses, cur, refused)]
        return AsyncVectorEnv(fns, context="fork")

    with shared_curriculum_envs(make) as (cur, envs):
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        if refuses == "sub-env":
            with pytest.raises(SubEnvCallError, match="sub-env 1: resume_curriculum_task"):
                load_curriculum_state(path, cur, env=envs)
        else:
            with pytest.raises(DataError, match="from another configuration"):
                load_curriculum_state(path, RefusesTheFile(), env=envs)
        got = [call_sub_envs(envs, "get_wrapper_attr", n, indices=[0])[0] for n in NAMES]
        assert got == [pending, resuming]


def test_a_refused_load_puts_a_single_look_alike_back_as_it_was(tmp_path):
    env = look_alike(7, False)
    path = save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE, seed=0), env=env)
    with pytest.raises(DataError, match="from another configuration"):
        load_curriculum_state(path, RefusesTheFile(), env=env)
    assert (env.pending_task_id, env.resuming) == (7, False)  # was (None, False)


@pytest.mark.parametrize(
    ("stale", "key"),
    [
        ([False, 1], "stale[1]"),
        (["no", False], "stale[0]"),  # bool("no") is True
        ([False, None], "stale[1]"),
        ([False, np.array([True])], "stale[1]"),
    ],
)
def test_resume_channel_refuses_stale_marks_that_are_not_bools(stale, key):
    # taken as bool(x): "no" marked a waiting task stale, withdrawn at the next refill
    with _reset_channel_envs() as envs:
        waiting, slots = envs.channel_waiting(), envs.channel_slots()
        with pytest.raises(ConfigError, match="expected a bool") as err:
            envs.resume_channel(waiting, slots=slots, stale=stale)
        assert err.value.key == key
        assert err.value.source == "vector.SampleCurriculumTask.resume_channel"
        envs.resume_channel(waiting, slots=slots, stale=[np.True_, False])  # numpy's bool
        assert envs.channel_stale() == [True, False]


@pytest.mark.parametrize("spares", [0, 1])
def test_a_task_with_slot_minus_one_is_refused_by_a_file_and_by_resume_channel(tmp_path, spares):
    # a file was refused ("holds slot -1 for task ..."), but resume_channel took the same rows
    # and its reset dropped the task: its sub-env drew another
    cur = Curriculum(SPACE, seed=0)
    envs = channel_envs(cur, spares=spares)
    try:
        envs.reset(seed=0)
        path = save_curriculum_state(tmp_path / "c.npz", cur, env=envs)
        waiting, rows = envs.channel_waiting(), envs.channel_spares() if spares else None
        good = envs.channel_slots()
        slots = [list(row) for row in good]
        slots[1][spares] = -1  # the waiting task's slot, or (spares=1) its spare's
        task = rows[1][0] if rows else waiting[1]
        assert task >= 0
        rewrite(path, channel_slots=np.array(slots, dtype=np.int64))
        with pytest.raises(DataError) as file_err:
            load_curriculum_state(path, cur, env=envs)
        with pytest.raises(ConfigError) as call_err:
            envs.resume_channel(waiting, rows, slots=slots, stale=[False, False])
        reason = f"task {task} of env 1 has slot -1, the slot of no task"
        assert (call_err.value.key, call_err.value.value) == (f"slots[1][{spares}]", -1)
        assert call_err.value.reason.startswith(reason)
        assert str(file_err.value).endswith(f"'channel_slots': {call_err.value.reason}")
        assert envs.channel_slots() == good  # no restore waits (was the -1, then dropped)
        envs.resume_channel(waiting, rows, slots=good, stale=[False, False])
        envs.reset()
        assert envs.task_ids.tolist() == waiting  # each sub-env took its restored task
    finally:
        envs.close()


@pytest.mark.parametrize("refill_due", [1, 0, "no", np.array([True]), np.int64(1)])
def test_resume_channel_refuses_a_refill_due_that_is_not_a_bool(refill_due):
    # taken as bool(x), as the stale marks were: "no" (and 1) made the next refill due, which
    # withdraws the stale tasks a step earlier than the uninterrupted run
    with _reset_channel_envs() as envs:
        waiting, slots = envs.channel_waiting(), envs.channel_slots()
        rows = {"slots": slots, "stale": [False, False]}
        with pytest.raises(ConfigError, match="expected a bool") as err:
            envs.resume_channel(waiting, **rows, refill_due=refill_due)
        assert err.value.key == "refill_due"
        assert err.value.source == "vector.SampleCurriculumTask.resume_channel"
        assert not envs.channel_refill_due()  # the channel's own: no restore waits
        envs.resume_channel(waiting, **rows, refill_due=np.True_)  # numpy's bool
        assert envs.channel_refill_due() is True
        envs.resume_channel(waiting, **rows, refill_due=None)  # a file from before it
        assert envs.channel_refill_due() is None


@pytest.mark.parametrize(
    ("rows", "key"),
    [
        ({"waiting": 5}, "waiting"),
        ({"stale": None, "slots": 3}, "slots"),
        ({"spares": [5, 6]}, "spares[0]"),
        ({"spares": [[5], None]}, "spares[1]"),
        ({"slots": [5, 6]}, "slots[0]"),
    ],
)
def test_resume_channel_refuses_rows_that_are_not_lists_naming_them(rows, key):
    # an int or None where a list of rows (or a row) goes raised a bare TypeError
    with _reset_channel_envs() as envs:
        waiting, slots = envs.channel_waiting(), envs.channel_slots()
        given = {"waiting": waiting, "spares": None, "slots": None, **rows}
        with pytest.raises(ConfigError) as err:
            envs.resume_channel(given.pop("waiting"), given.pop("spares"), **given)
        assert err.value.key == key
        assert err.value.source == "vector.SampleCurriculumTask.resume_channel"
        assert (envs.channel_waiting(), envs.channel_slots()) == (waiting, slots)  # unchanged


class ResumingRefused(LookAlike):
    """A look-alike whose ``resuming`` setter refuses True: its ``pending_task_id`` is set."""

    _resuming: Any = False

    @property
    def resuming(self) -> Any:
        return self._resuming

    @resuming.setter
    def resuming(self, value: Any) -> None:
        if value:
            raise ValueError("this env resumes nothing")
        self._resuming = value


class ArmsThenRefuses(SingleSampleCurriculumTask):
    """A curriculum wrapper (a subclass of yours) that arms its reset, then refuses task 5."""

    def resume_curriculum_task(self, task_id):
        super().resume_curriculum_task(task_id)
        if task_id == 5:
            raise ValueError("this env does not resume task 5")


def _armed_one(env):
    """A single env's ``(pending_task_id, resuming)``, or its wrapper's resumed task."""
    if isinstance(env, ArmsThenRefuses):
        return env.curriculum_task_ids()[1]
    return env.pending_task_id, env.resuming


@pytest.mark.parametrize("how", ["resume_env_tasks", "load"])
@pytest.mark.parametrize("kind", ["look-alike", "wrapped"])
def test_a_single_env_that_refuses_half_way_is_put_back_as_it_was(tmp_path, kind, how):
    # the single env was not put back: the look-alike kept the refused pending_task_id (5, set
    # before its resuming refused), the wrapper its armed task 5 (its resume_curriculum_task
    # set it, then raised); a vector env's sub-envs were put back
    cur = Curriculum(SPACE, seed=0)
    if kind == "look-alike":
        env: Any = ResumingRefused()
        env.pending_task_id = 7
    else:
        env = ArmsThenRefuses(TaskStubEnv("stub"), cur)
        env.reset(seed=0)
    before = _armed_one(env)
    with pytest.raises(ValueError, match="resume") as err:
        if how == "load":
            path = save_curriculum_state(tmp_path / "c.npz", cur, env=env)
            rewrite(path, env_task_ids=np.array([5], dtype=np.int64))
            load_curriculum_state(path, cur, env=env)
        else:
            resume_env_tasks(env, [5])
    assert _armed_one(env) == before
    assert "put back" in err.value.__notes__[-1]


@pytest.mark.parametrize("vec", ["async", "sync"])
def test_a_wrapper_that_cannot_be_put_back_leaves_a_look_alike_put_back(tmp_path, vec):
    # the put-back set the look-alikes' pending_task_id and the wrappers in one pass, and their
    # resuming in the next; where a wrapper refused to be put back (its None) the next pass did
    # not run: the look-alike kept resuming True from the refused file (pending 7 put back)
    def make(cur):
        fns = [partial(look_alike, 7, False), partial(resume_refuses, cur, [None])]
        return AsyncVectorEnv(fns, context="fork") if vec == "async" else SyncVectorEnv(fns)

    with shared_curriculum_envs(make) as (cur, envs):
        refuse_a_load_that_cannot_be_put_back(tmp_path, cur, envs)
        got = [call_sub_envs(envs, "get_wrapper_attr", n, indices=[0])[0] for n in NAMES]
        assert got == [7, False]  # sub-env 1 refused to be put back; the look-alike is
