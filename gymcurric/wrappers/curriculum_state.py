"""Curriculum checkpoints: one pickle-free ``.npz`` file per checkpoint.

The file holds the curriculum's :meth:`~gymcurric.tasks.Curriculum.state_dict` (its arrays as
``.npy`` members, everything else as one JSON member) and, optionally, the task id each env is
running at the moment of the checkpoint. Loading it with ``env=`` makes each env's next reset
continue that task instead of drawing a new one (see
:attr:`gymcurric.wrappers.SampleCurriculumTask.pending_task_id`), so that a run resumed from a model
checkpoint and this file draws the same task sequence as the uninterrupted run. An env (or a
sub-env of a vector env) whose episode ended and that has not reset yet is saved with no task:
its resumed reset starts the next one (see :func:`save_curriculum_state`).

``env`` may be a single env wrapped in :class:`~gymcurric.wrappers.SampleCurriculumTask`, a
Gymnasium ``VectorEnv`` or an SB3 ``VecEnv`` whose sub-envs are.

Example:
    >>> import os, tempfile
    >>> from gymcurric.tasks import Curriculum, FixedTaskSpace
    >>> cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(3)]), seed=0)
    >>> tid, _ = cur.sample_task()
    >>> cur.update(tid, return_=1.0, success=True)
    >>> path = save_curriculum_state(os.path.join(tempfile.mkdtemp(), "cur.npz"), cur)
    >>> other = Curriculum(FixedTaskSpace([{"level": i} for i in range(3)]), seed=5)
    >>> _ = load_curriculum_state(path, other)
    >>> other.sample_task() == cur.sample_task()
    True
"""

from __future__ import annotations

import json
import os
import reprlib
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric._checks import as_task_id, no_slot_reason
from gymcurric._npz import read_npz
from gymcurric.errors import ConfigError, DataError
from gymcurric.wrappers._channel_calls import resume_channel, warn_channel_look_alikes
from gymcurric.wrappers._curriculum_envs import (
    Armed,
    awaiting_reset,
    check_wrapped,
    env_armed,
    env_task_ids,
    env_tasks,
    flush_envs,
    resume_env_tasks,
    resume_tasks,
    vector_curriculum_wrapper,
)

__all__ = [
    "FILE_FORMAT",
    "env_task_ids",
    "load_curriculum_state",
    "resume_env_tasks",
    "save_curriculum_state",
]

#: Format tag of the checkpoint file (the state dict inside carries its own ``format``).
FILE_FORMAT = "gymcurric.curriculum-npz/1"
_META, _IDS, _ARRAYS, _WAIT = "meta", "env_task_ids", "arrays/", "channel_waiting"
_SPARES, _SLOTS, _STALE = "channel_spares", "channel_slots", "channel_stale"
_DUE = "channel_refill_due"


def save_curriculum_state(
    path: str | os.PathLike[str], curriculum: Any, *, env: Any = None
) -> Path:
    """Write ``curriculum.state_dict()`` (and the envs' current task ids) to ``path``.

    The write is atomic (a temporary file is renamed over ``path``); parent folders are
    created. The file loads with ``np.load(path, allow_pickle=False)``.

    Args:
        path: the ``.npz`` file to write.
        curriculum: the curriculum to save.
        env: optional env(s) whose current task ids are saved (see :func:`env_task_ids`).

    Returns:
        The path written.

    The envs are flushed first, so that the file holds every episode that ended before the
    call: each sub-env's ``flush_curriculum()`` runs where it lives (an SB3 ``VecEnv``'s
    ``env_method``, a Gymnasium vector env's ``call``), which applies what the workers of a
    ``SubprocVecEnv`` / ``AsyncVectorEnv`` buffered for a shared curriculum (up to
    ``worker_update_batch`` episodes, 1-4 s), then the vector wrapper's (it applies a step's
    episodes during the next step).

    A checkpoint may be taken after any step. An env whose episode ended in the last step
    and has not reset since (a single env: until your ``reset()``; a sub-env with
    ``NEXT_STEP`` autoreset: until its reset step; ``DISABLED``: until
    ``reset(options={"reset_mask": ...})``) is saved with no task (``-1``), so that the
    resumed run's reset starts its next task, the one the uninterrupted run starts, instead of
    replaying the one that ended. The curriculum wrappers tell which envs those are (their
    ``awaiting_reset()``; the vector
    :class:`~gymcurric.wrappers.vector.SampleCurriculumTask`'s, ``make_curriculum_vec``'s, is
    found under outer vector wrappers too); a bare ``VectorEnv`` without that wrapper cannot,
    and such a checkpoint replays the task that ended. A sub-env in the middle of an episode
    is saved with its task, which the resumed run plays again from the start (the env's own
    state is not in the file).

    The vector wrapper's ``flush_curriculum()``, ``awaiting_reset()`` and ``channel_*()`` (and
    the load's ``resume_channel()``) are called on it, never on a vector wrapper of yours above
    it that has a method of the same name: to change what a checkpoint gets, subclass it, or
    set the method on its instance. A vector env of yours with ``channel_*()`` or
    ``resume_channel()`` methods, in a chain without gymcurric's vector wrapper, is not asked
    either: its rows are not saved (nor restored by a load), and a
    :class:`~gymcurric.errors.GymcurricWarning` names its class.

    A save right after :func:`load_curriculum_state` with ``env=``, before the envs reset,
    writes what was loaded (each env's task, an async vector env's channel rows): the envs
    still resume those at their next reset.

    Raises:
        ConfigError: ``env`` is given and an env of it is not wrapped in
            :class:`~gymcurric.wrappers.SampleCurriculumTask` (the message names the
            sub-envs and what they lack). This is asked before anything runs in the envs, so
            nothing is written and the env keeps working (a worker of an ``AsyncVectorEnv``
            or ``SubprocVecEnv`` exits on an exception raised in it).
    """
    marked = check_wrapped(env, "save_curriculum_state") if env is not None else None
    warn_channel_look_alikes(env, "save_curriculum_state")  # a channel this save cannot see
    flush_envs(env, marked)  # every episode that ended before the call, workers' buffers too
    state = dict(curriculum.state_dict())
    arrays = state.pop("arrays")
    meta = {"file_format": FILE_FORMAT, **state}
    try:
        blob = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise DataError(f"curriculum state is not JSON-safe outside its arrays ({exc})") from exc
    members: dict[str, np.ndarray] = {_META: np.array(blob)}
    members.update({_ARRAYS + name: np.asarray(a) for name, a in arrays.items()})
    tasks = env_tasks(env, marked) if env is not None else []
    ids = [t for t, _ in tasks]
    ended = awaiting_reset(env, marked) if env is not None else None  # next task not started
    if ended is not None:
        ids = [-1 if e else t for t, e in zip(ids, ended, strict=True)]
    # envs armed by a load that have not reset (whatever their task_id says): the loaded tasks
    ids = [t if r is None else r for t, (_, r) in zip(ids, tasks, strict=True)]
    members[_IDS] = np.asarray(ids, dtype=np.int64)
    # an async vector env's drawn-ahead tasks, from gymcurric's vector wrapper (not from a
    # vector wrapper of yours above it with a channel_waiting() of its own)
    vec = vector_curriculum_wrapper(env)
    if vec is not None and (w := vec.channel_waiting()) is not None:
        members[_WAIT] = np.asarray(w, dtype=np.int64)
        if (rows := vec.channel_spares()) and len(rows[0]):  # the retries' spares, per env
            members[_SPARES] = np.asarray(rows, dtype=np.int64)
        # where each was drawn from, and which predate a pool change (taken all the same by
        # a sub-env that resets before the channel's next refill)
        if (slot_rows := vec.channel_slots()) is not None and (
            marks := vec.channel_stale()
        ) is not None:
            members[_SLOTS] = np.asarray(slot_rows, dtype=np.int64).reshape(len(w), -1)
            members[_STALE] = np.asarray(marks, dtype=bool)
            # whether the refill that withdraws the stale ones is due at the resumed reset
            if (flag := vec.channel_refill_due()) is not None:
                members[_DUE] = np.asarray(bool(flag))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **members)  # type: ignore[arg-type]
    os.replace(tmp, out)
    return out


def _read_meta(members: dict[str, np.ndarray], where: str) -> dict[str, Any]:
    raw = members.get(_META)
    if raw is None:
        raise DataError(f"{where}: not a gymcurric curriculum checkpoint (no {_META!r} member)")
    if raw.shape != () or raw.dtype.kind != "U":
        raise DataError(
            f"{where}: not a gymcurric curriculum checkpoint (member {_META!r} must be one "
            f"JSON string; got {raw.dtype}{raw.shape})"
        )
    try:
        meta = json.loads(str(raw[()]))
    except ValueError as exc:
        raise DataError(
            f"{where}: not a gymcurric curriculum checkpoint (member {_META!r} is not valid "
            f"JSON: {exc})"
        ) from exc
    if not isinstance(meta, dict) or meta.pop("file_format", None) != FILE_FORMAT:
        raise DataError(
            f"{where}: not a gymcurric curriculum checkpoint (expected file_format {FILE_FORMAT!r})"
        )
    return meta


def _read_ids(
    members: dict[str, np.ndarray], key: str, where: str, curriculum: Any, ndim: int = 1
) -> list[Any] | None:
    """Task ids saved under ``key`` (-1: none), checked against the curriculum's space.

    A list of ids, or for ``ndim=2`` a list of rows of ids.
    """
    raw = members.get(key)
    if raw is None:
        return None
    if raw.ndim != ndim or raw.dtype.kind not in "iu":
        raise DataError(
            f"{where}: member {key!r} must be a {ndim}-D array of task ids; got "
            f"{raw.dtype}{raw.shape}"
        )
    ids = [int(t) for t in raw.ravel()]
    space = getattr(curriculum, "space", None)
    for t in ids:
        if as_task_id(t) is None:  # the rule of every task id given (-1: none)
            raise DataError(
                f"{where}: member {key!r} holds task id {t} (expected -1, or an int "
                "from 0 to 2**63 - 1)"
            )
        if t >= 0 and space is not None:
            try:
                space.check_id(t)
            except ConfigError as exc:
                raise DataError(f"{where}: member {key!r}: {exc}") from exc
    return ids if ndim == 1 else raw.astype(np.int64).tolist()


def load_curriculum_state(
    path: str | os.PathLike[str], curriculum: Any = None, *, env: Any = None
) -> dict[str, Any]:
    """Read a file written by :func:`save_curriculum_state`.

    Everything is checked before anything is changed: a refused file leaves ``curriculum`` and
    ``env`` as they were. Envs that already ran may be given: the curriculum work their last
    step left pending and the episodes their workers buffered (``flush_curriculum()``, as
    :func:`save_curriculum_state` runs it) are applied first, to the state being replaced.

    Args:
        path: the ``.npz`` file.
        curriculum: if given, ``curriculum.load_state_dict(state)`` is called.
        env: if given, each env's next reset continues the task it ran at the checkpoint
            (the ids saved with ``env=``); the env must have as many sub-envs as were saved.

    Returns:
        The state dict (for ``Curriculum.load_state_dict``), plus ``"env_task_ids"``.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        ConfigError: ``env`` is given and an env of it is not wrapped in
            :class:`~gymcurric.wrappers.SampleCurriculumTask`; the env is left working. Or
            its vector wrapper's ``resume_channel`` refused the file's channel rows, or an
            override of it raised something else (a ``TypeError`` of one written for
            ``waiting: list[int]``, given None for a file without a channel's rows): the
            message names the override and the file. Nothing is loaded or armed, and the
            channel restores what it did.
        DataError: the file is not a curriculum checkpoint, is damaged (empty, truncated, not
            an ``.npz``, pickled objects, bad JSON metadata, a task id outside the space), or
            (from ``load_state_dict``) comes from another configuration or breaks the
            curriculum state's invariants; the message names the file. The envs resume
            nothing of it.
        SubEnvCallError: a sub-env's wrapper refused the task it was to resume (gymcurric's
            own errors are raised as themselves, naming the sub-env): the curriculum is not
            loaded, and every sub-env is put back as it was (its worker goes on). A single
            env's refusal is raised as itself, the env put back.
    """
    where = os.fspath(path)
    members = read_npz(path, "gymcurric curriculum checkpoint")
    meta = _read_meta(members, where)
    arrays = {k[len(_ARRAYS) :]: v for k, v in members.items() if k.startswith(_ARRAYS)}
    ids = _read_ids(members, _IDS, where, curriculum) or []
    waiting = _read_ids(members, _WAIT, where, curriculum)
    spares = _read_ids(members, _SPARES, where, curriculum, ndim=2)
    if spares is not None and (waiting is None or len(spares) != len(waiting)):
        raise DataError(f"{where}: member {_SPARES!r} must have one row per waiting task")
    slots, stale = _read_channel_marks(members, where, waiting, spares)
    refill_due = _read_refill_due(members, where)
    state: dict[str, Any] = {**meta, "arrays": arrays}
    marked: list[bool] | None = None
    before: list[Armed] = []  # what each env resumes now (a look-alike: its attributes)
    if env is not None:
        marked = check_wrapped(env, "load_curriculum_state")  # before anything runs there
        warn_channel_look_alikes(env, "load_curriculum_state")  # rows this load cannot set
        before = env_armed(env, marked)
        n = len(before)
        if len(ids) != n:
            raise DataError(
                f"{where}: saved the tasks of {len(ids)} envs, the env "
                f"given has {n}; save with env= the same number of envs"
            )
        if waiting is not None and len(waiting) != n:  # saved with the ids, one per env
            raise DataError(
                f"{where}: member {_WAIT!r} holds {len(waiting)} waiting tasks for the "
                f"{n} envs of {_IDS!r}; expected one per env"
            )
    # the envs' curriculum work still pending from their last step (a vector wrapper with a
    # channel applies it at the next step or reset) belongs to the run before the load: apply
    # it now, to the state it belongs to, and not to the loaded one at the resumed reset
    flush_envs(env, marked)  # the workers' buffered episodes too
    # All or nothing: the channel's waiting tasks (checked and set in this process, put back
    # by the function it returns), then the sub-envs (put back by resume_tasks where one
    # refuses), then the curriculum; a refusal at any step puts back the steps before it.
    vec = vector_curriculum_wrapper(env)  # under outer vector wrappers too (not theirs)
    # spares, slots, stale marks and refill_due are None in files from before them; waiting
    # None (a file without a channel's rows) drops what an earlier load left
    undo_channel = resume_channel(vec, where, waiting, spares, slots, stale, refill_due)
    if env is not None:
        try:
            resume_tasks(env, ids, marked, before)
        except Exception as exc:
            undo_channel(exc)
            raise
    if curriculum is not None:
        try:
            curriculum.load_state_dict(state)
        except Exception as exc:
            undo_channel(exc)
            if env is not None:  # the envs do not resume the tasks of a refused file
                try:
                    resume_tasks(env, before, marked, before)
                except Exception as again:  # the refusal is the error to raise, not this
                    exc.add_note(
                        f"putting the envs back failed too ({type(again).__name__}: {again}); "
                        "they may resume the tasks of the refused file"
                    )
            if isinstance(exc, DataError):
                raise DataError(f"{where}: {exc}") from exc
            raise
    state["env_task_ids"] = ids
    return state


def _read_channel_marks(
    members: dict[str, np.ndarray],
    where: str,
    waiting: list[int] | None,
    spares: list[Any] | None,
) -> tuple[list[list[int]] | None, list[bool] | None]:
    """The channel's slots and stale marks (both or neither), checked against its tasks."""
    slots, stale = members.get(_SLOTS), members.get(_STALE)
    if slots is None and stale is None:
        return None, None
    got = f"got {_SLOTS!r} {_described(slots)} and {_STALE!r} {_described(stale)}"
    if waiting is None:
        raise DataError(
            f"{where}: members {_SLOTS!r} and {_STALE!r} mark the tasks of {_WAIT!r}, and the "
            f"file has no {_WAIT!r} ({got})"
        )
    n = len(waiting)
    cols = 1 + (len(spares[0]) if spares else 0)
    capacity = len(members.get(_ARRAYS + "task_id", ()))
    if (
        slots is None
        or stale is None
        or slots.shape != (n, cols)
        or slots.dtype.kind not in "iu"
        or stale.shape != (n,)
        or stale.dtype != bool
    ):
        raise DataError(
            f"{where}: members {_SLOTS!r} and {_STALE!r} must be an int array of shape "
            f"({n}, {cols}) (a slot per waiting task and spare) and a bool array of shape "
            f"({n},) (one per waiting task); {got}"
        )
    tasks = np.column_stack([np.asarray(waiting), np.asarray(spares or np.zeros((n, 0)))])
    bad = (slots < -1) | (slots >= capacity) | ((tasks >= 0) & (slots < 0))
    if bad.any():
        env, col = (int(i) for i in np.argwhere(bad)[0])
        if slots[env, col] == -1:  # a task without its slot: refused as resume_channel does
            reason = no_slot_reason(int(tasks[env, col]), env)
            raise DataError(f"{where}: member {_SLOTS!r}: {reason}")
        raise DataError(
            f"{where}: member {_SLOTS!r} holds slot {int(slots[env, col])} for task "
            f"{int(tasks[env, col])} of env {env} (expected a slot in [0, {capacity}) for a "
            "task, -1 for none)"
        )
    return slots.astype(np.int64).tolist(), stale.tolist()


def _described(member: np.ndarray | None) -> str:
    """A member's dtype and shape for a message (``missing``: not in the file)."""
    return "missing" if member is None else f"{member.dtype} of shape {member.shape}"


def _read_refill_due(members: dict[str, np.ndarray], where: str) -> bool | None:
    """Whether the channel's refill was due at the save (None: a file from before it)."""
    raw = members.get(_DUE)
    if raw is None:
        return None
    if raw.shape != () or raw.dtype != bool:
        raise DataError(
            f"{where}: member {_DUE!r} must be one bool (True or False); got "
            f"{raw.dtype}{raw.shape} {reprlib.repr(raw.tolist())}"
        )
    if _STALE not in members:
        raise DataError(
            f"{where}: member {_DUE!r} ({bool(raw)}) comes with the channel's stale marks, and "
            f"the file has no {_STALE!r}"
        )
    return bool(raw)
