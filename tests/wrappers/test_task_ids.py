"""A task id is checked by one rule wherever it is given (gymcurric._checks.check_task_id).

An int from -1 to 2**63 - 1 (-1: no task), a numpy integer or a 0-d int array; not a bool
(numpy's too), a float, a string or an array of one or more dimensions, nor an id no int64
holds (``np.uint64(2**64 - 1)``: taken, it broke a channel's reset or a checkpoint's save, and
a file's was taken, or wrapped round to -1, without a curriculum). The entry points used to
differ: the ``pending_task_id`` setter took ``-1.0`` (as "none") and one-element arrays
(``int()`` of them) and raised a ValueError of numpy's for a longer array;
``resume_env_tasks`` refused those; a vector wrapper's ``resume_channel`` took anything
``int()`` takes (``3.0``, ``"3"``, ``True``, ``-5``). And ``resume_curriculum_task(task_id)``
named ``pending_task_id`` in its error.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

from gymcurric._checks import as_task_id, check_task_id
from gymcurric.errors import ConfigError, DataError
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers import (
    SampleCurriculumTask,
    load_curriculum_state,
    resume_env_tasks,
    save_curriculum_state,
)
from gymcurric.wrappers.vector import SampleCurriculumTask as VectorSampleCurriculumTask
from tests.curriculum_stubs import TaskStubEnv, make_wrapped

SPACE = FixedTaskSpace([{"level": i} for i in range(8)])

IDS = [  # (value, the id it is)
    (3, 3),
    (0, 0),
    (-1, -1),
    (np.int64(3), 3),
    (np.uint8(3), 3),
    (np.int32(-1), -1),
    (np.array(3), 3),
    (np.array(-1), -1),
    (np.int8(-1), -1),
    (np.uint64(2**63 - 1), 2**63 - 1),  # the largest id an int64 array (a checkpoint) holds
]
NOT_IDS = [
    -2,
    True,
    False,
    np.True_,
    np.array(True),
    3.0,
    -1.0,
    np.float64(3.0),
    "3",
    np.array([3]),
    np.array([-1]),
    np.array([1, 2]),
    [3],
    np.uint64(2**64 - 1),  # no int64 holds these: a channel slot or a checkpoint cannot
    np.uint64(2**63),
    2**63,
]


def _arm_one(value):
    """What each single-env entry point arms for ``value``: the pending id, or the error."""
    got = []
    for arm in (_by_setter, _by_resume_method, _by_resume_env_tasks):
        env = SampleCurriculumTask(TaskStubEnv(), Curriculum(SPACE, seed=0))
        try:
            arm(env, value)
        except ConfigError as exc:
            got.append(("refused", exc.key))
        else:
            got.append(("armed", env.curriculum_task_ids()[1]))
    return got


def _by_setter(env, value):
    env.pending_task_id = value
    env.resuming = True


def _by_resume_method(env, value):
    env.resume_curriculum_task(value)


def _by_resume_env_tasks(env, value):
    resume_env_tasks(env, [value])


def _resume_channel(value):
    cur = Curriculum(SPACE, seed=0)
    envs = VectorSampleCurriculumTask(
        SyncVectorEnv([lambda: make_wrapped(cur)] * 2), cur, channel=TaskChannel(2)
    )
    try:
        envs.resume_channel([value, -1], [[value], [-1]])
        return envs.channel_waiting(), envs.channel_spares()
    finally:
        envs.close()


@pytest.mark.parametrize(("value", "task_id"), IDS)
def test_an_id_is_accepted_by_every_entry_point(value, task_id):
    assert as_task_id(value) == task_id
    assert check_task_id("task_id", value, source="test") == task_id
    assert _arm_one(value) == [("armed", task_id)] * 3
    assert _resume_channel(value) == ([task_id, -1], [[task_id], [-1]])


def _refused_by_the_wrappers(value):
    """Assert that each wrapper entry point refuses ``value``; ``resume_channel``'s error."""
    assert _arm_one(value) == [
        ("refused", "pending_task_id"),
        ("refused", "task_id"),
        ("refused", "task_ids[0]"),
    ]
    with pytest.raises(ConfigError) as err:
        _resume_channel(value)
    assert err.value.key == "waiting[0]"
    return err.value


@pytest.mark.parametrize("value", NOT_IDS, ids=repr)
def test_what_is_not_an_id_is_refused_by_every_entry_point(value):
    assert as_task_id(value) is None
    _refused_by_the_wrappers(value)


def test_none_clears_where_it_means_nothing_to_resume():
    env = SampleCurriculumTask(TaskStubEnv(), Curriculum(SPACE, seed=0))
    env.resume_curriculum_task(4)
    env.resume_curriculum_task(None)
    assert env.curriculum_task_ids()[1] is None and not env.resuming
    env.resume_curriculum_task(4)
    env.pending_task_id = None
    assert not env.resuming
    with pytest.raises(ConfigError) as err:  # resume_env_tasks takes -1 for "the next task"
        resume_env_tasks(env, [None])
    assert err.value.key == "task_ids[0]"


def test_the_error_of_resume_curriculum_task_names_its_parameter_and_itself():
    env = SampleCurriculumTask(TaskStubEnv(), Curriculum(SPACE, seed=0))
    env.resume_curriculum_task(2)
    with pytest.raises(ConfigError) as err:
        env.resume_curriculum_task(-3)
    assert (err.value.key, err.value.value) == ("task_id", -3)
    assert err.value.source == "SampleCurriculumTask.resume_curriculum_task"
    assert "'task_id': -3" in str(err.value) and "pending_task_id" not in str(err.value)
    assert env.curriculum_task_ids()[1] == 2  # unchanged
    with pytest.raises(ConfigError) as err:
        env.pending_task_id = 2.0
    assert (err.value.key, err.value.source) == ("pending_task_id", "SampleCurriculumTask")


def test_the_error_of_resume_env_tasks_still_names_the_sub_env():
    cur = Curriculum(SPACE, seed=0)
    envs = SyncVectorEnv([lambda: make_wrapped(cur)] * 3)
    try:
        with pytest.raises(ConfigError, match=r"'task_ids\[2\]': 1\.5 \(the task sub-env 2 res"):
            resume_env_tasks(envs, [1, -1, 1.5])
    finally:
        envs.close()


@pytest.mark.parametrize(
    ("member", "value", "bad"),
    [
        ("env_task_ids", [2**64 - 1], 2**64 - 1),
        ("channel_spares", [[2**64 - 1]], 2**64 - 1),
        ("env_task_ids", [2**63], 2**63),
    ],
)
def test_a_file_with_an_id_no_int64_holds_is_refused_naming_it(tmp_path, member, value, bad):
    # without a curriculum (no space to check them against) the uint64 ids were taken: an
    # env_task_ids entry as a huge int, a spare wrapped round to -1 by astype(int64)
    path = save_curriculum_state(tmp_path / "c.npz", Curriculum(SPACE, seed=0))
    with np.load(path) as f:
        members = dict(f)
    members["env_task_ids"] = np.zeros(1, np.int64)
    members["channel_waiting"] = np.full(1, -1, np.int64)
    members[member] = np.asarray(value, dtype=np.uint64)
    np.savez(path, **members)
    expected = f"{path}: member '{member}' holds task id {bad}"
    with pytest.raises(DataError, match=re.escape(expected)):
        load_curriculum_state(path)
    with pytest.raises(DataError, match=f"member '{member}'"):
        load_curriculum_state(path, Curriculum(SPACE, seed=0))  # refused by the space already


class IndexRaises:
    """A value whose ``__index__`` raises something other than a TypeError (user code)."""

    def __index__(self):
        raise ValueError("no index today")

    def __repr__(self):
        return "IndexRaises()"


def test_an_index_that_raises_is_refused_with_its_error_as_the_cause():
    # the ValueError went through check_task_id (and as_task_id) as itself: no ConfigError
    # naming the parameter, and a vector wrapper's resume_channel raised it half-checked
    value = IndexRaises()
    assert as_task_id(value) is None
    with pytest.raises(ConfigError, match="no index today") as err:
        check_task_id("task_id", value, source="test")
    assert (err.value.key, err.value.value) == ("task_id", value)
    assert "IndexRaises()" in str(err.value) and "__index__ raised ValueError" in str(err.value)
    assert isinstance(err.value.__cause__, ValueError)
    assert isinstance(_refused_by_the_wrappers(value).__cause__, ValueError)
