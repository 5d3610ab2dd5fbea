"""Rows of a checkpoint's channel, checked: the waiting tasks' spares and their pool slots.

:meth:`~gymcurric.wrappers.vector.SampleCurriculumTask.resume_channel` checks their form when
it is called; the reset that restores them checks that each slot is in the pool then loaded
(:func:`check_slots_fit`), before anything is changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymcurric._checks import as_task_id, check_task_id
from gymcurric.errors import ConfigError

__all__ = ["SOURCE", "check_slots_fit", "slot_rows", "task_rows"]

#: The source errors about the rows name (resume_channel's, and the reset's that restores them).
SOURCE = "vector.SampleCurriculumTask.resume_channel"


def task_rows(name: str, rows: Sequence[Sequence[Any]], source: str) -> list[list[int]]:
    """Per-sub-env rows of task ids (-1: none) as ints, or a ConfigError naming the entry."""
    return [
        [check_task_id(f"{name}[{i}][{j}]", t, source=source) for j, t in enumerate(row)]
        for i, row in enumerate(rows)
    ]


def slot_rows(slots: Sequence[Sequence[Any]], spares: Any, source: str) -> list[list[int]]:
    """Per sub-env the pool slots of its waiting task and spares (-1: none), as ints.

    A ConfigError names a row without one slot per task, or an entry that is not an int
    (the rule of a task id: not a bool or a float).
    """
    out = []
    for i, row in enumerate(slots):
        cols = 1 + (0 if spares is None else len(spares[i]))
        if len(row) != cols:
            why = f"expected {cols} pool slots: the waiting task's, then one per spare"
            raise ConfigError(f"slots[{i}]", row, why, source=source)
        checked = [as_task_id(t) for t in row]
        if None in checked:
            j = checked.index(None)
            why = "expected a pool slot (an int >= 0), -1 for none"
            raise ConfigError(f"slots[{i}][{j}]", row[j], why, source=source)
        out.append([t for t in checked if t is not None])  # each is (a None raised above)
    return out


def check_slots_fit(slots: list[list[int]] | None, curriculum: Any) -> None:
    """Raise a ConfigError naming the first slot beyond ``curriculum``'s pool, if any.

    A curriculum without a pool of slots to check (no ``state.task_id``) is not checked.
    """
    state = getattr(curriculum, "state", None)
    capacity = getattr(getattr(state, "task_id", None), "shape", (None,))[0]
    if slots is None or capacity is None:
        return
    for i, row in enumerate(slots):
        for j, at in enumerate(row):
            if at >= capacity:
                why = f"a pool slot from -1 to {capacity - 1} (the curriculum's pool)"
                raise ConfigError(f"slots[{i}][{j}]", at, f"expected {why}", source=SOURCE)
