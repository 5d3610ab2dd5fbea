"""Rows of a checkpoint's channel, checked: waiting tasks, spares, pool slots, stale marks.

:meth:`~gymcurric.wrappers.vector.SampleCurriculumTask.resume_channel` checks their form when
it is called (:func:`checked_rows`); the reset that restores them checks that each slot is in
the pool then loaded (:func:`check_slots_fit`), before anything is changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_one_per_env, check_task_id, no_slot_reason
from gymcurric.errors import ConfigError

__all__ = ["check_slots_fit", "checked_rows"]

#: The source errors about the rows name (resume_channel's, and the reset's that restores them).
_SOURCE = "vector.SampleCurriculumTask.resume_channel"


def checked_rows(
    num_envs: int,
    waiting: Sequence[Any],
    spares: Sequence[Sequence[Any]] | None,
    slots: Sequence[Sequence[Any]] | None,
    stale: Sequence[Any] | None,
    refill_due: Any,
) -> tuple[Any, ...]:
    """The rows given to ``resume_channel``, checked, as the reset restores them.

    ``(waiting, spares, slots, stale, refill_due)``: ints, bools and None where not given; a
    ConfigError names the first list without one row per sub-env, or entry refused.
    """
    check_one_per_env("waiting", waiting, num_envs, source=_SOURCE)
    for name, rows in (("spares", spares), ("slots", slots), ("stale", stale)):
        if rows is not None:
            check_one_per_env(name, rows, num_envs, source=_SOURCE)
    ids = [check_task_id(f"waiting[{i}]", t, source=_SOURCE) for i, t in enumerate(waiting)]
    spare_ids = None if spares is None else _task_rows("spares", spares, _SOURCE)
    slot_ids = None if slots is None else _slot_rows(slots, spare_ids, _SOURCE)
    for i, row in enumerate(slot_ids or []):  # a task without its slot: refused as in a file
        tasks = [ids[i], *(spare_ids[i] if spare_ids is not None else [])]
        for j, (task, at) in enumerate(zip(tasks, row, strict=True)):
            if task >= 0 and at == -1:
                raise ConfigError(f"slots[{i}][{j}]", at, no_slot_reason(task, i), source=_SOURCE)
    return (
        ids,
        spare_ids,
        slot_ids,
        None if stale is None else _stale_marks(stale, _SOURCE),
        None if refill_due is None else _refill_due_mark(refill_due, _SOURCE),
    )


def _task_rows(name: str, rows: Sequence[Sequence[Any]], source: str) -> list[list[int]]:
    """Per-sub-env rows of task ids (-1: none) as ints, or a ConfigError naming the entry."""
    return [
        [check_task_id(f"{name}[{i}][{j}]", t, source=source) for j, t in enumerate(row)]
        for i, row in enumerate(_listed(name, rows, "task ids (-1: none)", source))
    ]


def _listed(name: str, rows: Sequence[Any], what: str, source: str) -> list[list[Any]]:
    """Each row of ``rows`` as a list, or a ConfigError naming the first that is not a list.

    A row that is an int or None (``spares=[5, 6]``) raised a bare ``TypeError`` in the loops.
    """
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(list(row))
        except TypeError:
            why = f"expected a list of {what} per sub-env"
            raise ConfigError(f"{name}[{i}]", row, why, source=source) from None
    return out


def _slot_rows(
    slots: Sequence[Sequence[Any]], spares: list[list[int]] | None, source: str
) -> list[list[int]]:
    """Per sub-env the pool slots of its waiting task and spares (-1: none), as ints.

    ``spares`` are the rows :func:`_task_rows` returned (None: no spares given).

    A ConfigError names a row without one slot per task, or an entry that is not an int
    (the rule of a task id: not a bool or a float; :func:`~gymcurric._checks.check_task_id`).
    """
    out = []
    listed = _listed("slots", slots, "pool slots (-1: none)", source)
    for i, (given, row) in enumerate(zip(slots, listed, strict=True)):
        cols = 1 + (0 if spares is None else len(spares[i]))
        if len(row) != cols:
            why = f"expected {cols} pool slots: the waiting task's, then one per spare"
            raise ConfigError(f"slots[{i}]", given, why, source=source)
        why = "expected a pool slot (an int >= 0), -1 for none"
        out.append(
            [
                check_task_id(f"slots[{i}][{j}]", t, source=source, reason=why)
                for j, t in enumerate(row)
            ]
        )
    return out


def _stale_marks(stale: Sequence[Any], source: str) -> list[bool]:
    """Per sub-env whether its waiting task is stale, as bools, or a ConfigError naming one.

    A bool or a numpy bool; anything else (``1``, ``"no"``) is refused, not taken as its truth.
    """
    for i, mark in enumerate(stale):
        if not isinstance(mark, bool | np.bool_):
            why = "expected a bool (True: the waiting task is stale)"
            raise ConfigError(f"stale[{i}]", mark, why, source=source)
    return [bool(mark) for mark in stale]


def _refill_due_mark(refill_due: Any, source: str) -> bool:
    """Whether the channel's refill was due, as a bool, or a ConfigError naming it.

    A bool or a numpy bool, as a stale mark (:func:`_stale_marks`): ``"no"`` or ``0`` is
    refused, not taken as its truth (``bool("no")`` made the refill due).
    """
    if not isinstance(refill_due, bool | np.bool_):
        why = "expected a bool (True: the channel's next refill is due), or None"
        raise ConfigError("refill_due", refill_due, why, source=source)
    return bool(refill_due)


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
                raise ConfigError(f"slots[{i}][{j}]", at, f"expected {why}", source=_SOURCE)
