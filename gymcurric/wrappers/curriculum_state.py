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

import gymnasium as gym
import numpy as np

from gymcurric._checks import check_one_per_env
from gymcurric._npz import read_npz
from gymcurric.errors import ConfigError, DataError
from gymcurric.wrappers._sub_envs import (
    CURRICULUM_TASK_IDS,
    CURRICULUM_TASK_WRAPPER_MARK,
    RESUME_CURRICULUM_TASK,
    call_sub_envs,
    call_sub_envs_each,
    sub_envs_lacking,
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


#: What the curriculum wrapper of every env has: the attributes a checkpoint reads and sets and
#: the method it calls. An env with only some of them (a ``task_id`` of its own) is not wrapped.
#: The wrapper's mark (CURRICULUM_TASK_WRAPPER_MARK) implies all of them: a sub-env is asked for
#: it first (one round trip to the workers instead of one per name), and only an env without it
#: is asked name by name. An env with all of them and no mark (a look-alike of the wrapper) is
#: accepted, as it always was, and read and set by these names; the wrapper itself is read and
#: set through names only it has (CURRICULUM_TASK_IDS, RESUME_CURRICULUM_TASK), which a user's
#: wrapper above it with a ``task_id`` of its own cannot shadow.
_WRAPPER_ATTRS = ("task_id", "pending_task_id", "resuming", "flush_curriculum")


def _not_wrapped(env: Any, exc: Exception | None = None) -> ConfigError:
    why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return ConfigError(
        "env",
        env,
        f"its envs must be wrapped in gymcurric.wrappers.SampleCurriculumTask{why}",
        source="curriculum state",
    )


def _check_wrapped(env: Any, source: str) -> list[bool] | None:
    """Raise a ConfigError naming the envs of ``env`` that lack the curriculum wrapper.

    Asked with each sub-env's ``has_wrapper_attr`` (False, not an exception, for a missing
    name) before anything that raises there: the worker of an ``AsyncVectorEnv`` (``call``,
    ``get_attr``) or of an SB3 ``SubprocVecEnv`` (``env_method``, ``get_attr``) exits on an
    exception, and the env would be broken before the user saw this error. Wrapped sub-envs
    answer one question, for the wrapper's mark
    (:attr:`~gymcurric.wrappers.SampleCurriculumTask.curriculum_task_wrapper`); the others are
    asked for each name, which the message lists.

    Returns:
        Per env, whether it has the wrapper's mark (False: a look-alike with every name), for
        :func:`_env_tasks` and :func:`_resume_tasks`; None for a vector env of neither kind
        (:func:`~gymcurric.wrappers._sub_envs.sub_env_query`), whose ``get_attr`` /
        ``set_attr`` then raise where they fail.
    """
    if isinstance(env, gym.Env):
        lacking = [[n for n in _WRAPPER_ATTRS if not env.has_wrapper_attr(n)]]
        marked = [env.has_wrapper_attr(CURRICULUM_TASK_WRAPPER_MARK)]
    else:
        marks = sub_envs_lacking(env, [CURRICULUM_TASK_WRAPPER_MARK])
        if marks is None:
            return None
        marked = [not m for m in marks]
        lacking = [[] for _ in marks]
        unmarked = [i for i, m in enumerate(marked) if not m]
        if unmarked:  # one round trip per name, for these only
            found = sub_envs_lacking(env, _WRAPPER_ATTRS, unmarked) or []
            for i, missing in zip(unmarked, found, strict=True):
                lacking[i] = missing
    bad = [i for i, names in enumerate(lacking) if names]
    if not bad:
        return marked
    names = ", ".join(repr(n) for n in _WRAPPER_ATTRS if any(n in lacking[i] for i in bad))
    if isinstance(env, gym.Env):
        what, how = "it is not wrapped", "SampleCurriculumTask(env, curriculum)"
    else:
        what = f"its sub-envs {bad} of {len(lacking)} are not wrapped"
        how = (
            "each sub-env, e.g. gym.make_vec(..., wrappers=[partial(SampleCurriculumTask, "
            "curriculum=cur)]), make_vec_env(..., wrapper_class=SampleCurriculumTask) or "
            "make_curriculum_vec"
        )
    raise ConfigError(
        "env",
        env,
        f"{what} in gymcurric.wrappers.SampleCurriculumTask (no {names}); wrap {how}",
        source=source,
    )


def env_task_ids(env: Any) -> list[int]:
    """The task id each env is running (``-1``: an explicit task or no episode yet).

    Each env's :class:`~gymcurric.wrappers.SampleCurriculumTask` is read, under a wrapper of
    yours with a ``task_id`` of its own too.

    Args:
        env: a :class:`~gymcurric.wrappers.SampleCurriculumTask`-wrapped env, a Gymnasium
            ``VectorEnv`` or an SB3 ``VecEnv`` of such envs.

    Raises:
        ConfigError: an env is not wrapped (the message names the sub-envs); the env is left
            working (no worker of an ``AsyncVectorEnv`` or ``SubprocVecEnv`` is shut down).
    """
    marked = _check_wrapped(env, "env_task_ids")
    return [t for t, _ in _env_tasks(env, marked, resumed=False)]


def _env_tasks(
    env: Any, marked: list[bool] | None, *, resumed: bool = True
) -> list[tuple[int, int | None]]:
    """Per env ``(task_id, resumed)``: the task it runs, and the one its next reset resumes.

    ``resumed``: ``-1`` for the task the reset takes, None where none is armed (see
    :meth:`~gymcurric.wrappers.SampleCurriculumTask.curriculum_task_ids`; with
    ``resumed=False`` the wrappers' comes along, and look-alikes' is None). Read through the
    wrapper's ``curriculum_task_ids()`` in one round trip to the workers; where any env is
    ``marked`` False (a look-alike), every env is read by the names of ``_WRAPPER_ATTRS``.
    Only for an env :func:`_check_wrapped` accepted (``marked`` is what it returned).
    """
    if marked and all(marked):
        if isinstance(env, gym.Env):
            pairs = [env.get_wrapper_attr(CURRICULUM_TASK_IDS)()]
        else:
            pairs = call_sub_envs(env, CURRICULUM_TASK_IDS) or []
        return [(int(t), None if r is None else int(r)) for t, r in pairs]
    ids = [int(t) for t in _env_attr(env, "task_id")]
    if not resumed:
        return [(t, None) for t in ids]
    armed, pending = _env_attr(env, "resuming"), _env_attr(env, "pending_task_id")
    return [
        (t, (-1 if p is None else int(p)) if a else None)
        for t, a, p in zip(ids, armed, pending, strict=True)
    ]


def _env_attr(env: Any, name: str) -> list[Any]:
    """The attribute ``name`` of each env (a single env: one entry), for look-alikes.

    Only for an env :func:`_check_wrapped` accepted: a worker exits on a missing attribute.
    """
    try:
        if isinstance(env, gym.Env):
            return [env.get_wrapper_attr(name)]
        if isinstance(env, gym.vector.VectorEnv):
            env = env.unwrapped  # Gymnasium's VectorWrapper does not forward get_attr
        return list(env.get_attr(name))
    except AttributeError as exc:
        raise _not_wrapped(env, exc) from exc


def resume_env_tasks(env: Any, task_ids: list[int]) -> None:
    """Make each env's next reset (without an explicit task) resume a checkpoint.

    That reset runs ``task_ids[i]``, or for ``-1`` takes its task as any reset does (the next
    draw, or the task restored in its channel slot); either way it keeps the restored
    curriculum's generator (see :attr:`gymcurric.wrappers.SampleCurriculumTask.resuming`).

    Raises:
        ConfigError: an env is not wrapped (the env is left working), or ``task_ids`` does not
            hold one id per env, or holds an id below ``-1`` (raised by the sub-env's wrapper,
            whose worker goes on).
        SubEnvCallError: a sub-env's wrapper raised another error (its worker goes on).
    """
    marked = _check_wrapped(env, "resume_env_tasks")
    _resume_tasks(env, task_ids, marked)


def _resume_tasks(env: Any, task_ids: list[int], marked: list[bool] | None) -> None:
    """:func:`resume_env_tasks` for an env already checked (``marked``: :func:`_check_wrapped`).

    The wrapper is set through its ``resume_curriculum_task()``, look-alikes by their names,
    each sub-env through :func:`call_sub_envs_each` (an error there ends no worker).
    """
    ids = [int(t) for t in task_ids]
    try:
        if isinstance(env, gym.Env):
            if len(ids) != 1:
                raise ConfigError(
                    "task_ids", ids, "expected one id for a single env", source="resume_env_tasks"
                )
            if marked and marked[0]:
                env.get_wrapper_attr(RESUME_CURRICULUM_TASK)(ids[0])
            else:
                env.set_wrapper_attr("pending_task_id", ids[0])
                env.set_wrapper_attr("resuming", True)
            return
        check_one_per_env("task_ids", ids, env.num_envs, source="resume_env_tasks")
        if marked and all(marked):
            done = call_sub_envs_each(env, RESUME_CURRICULUM_TASK, [(t,) for t in ids])
        else:  # look-alikes (and, with them, every sub-env) by the plain names
            pending = [("pending_task_id", t) for t in ids]
            done = call_sub_envs_each(env, "set_wrapper_attr", pending)
            if done is not None:
                call_sub_envs(env, "set_wrapper_attr", "resuming", True)
        if done is None:  # neither kind of vector env
            env.unwrapped.set_attr("pending_task_id", ids)
            env.unwrapped.set_attr("resuming", [True] * len(ids))
    except AttributeError as exc:
        raise _not_wrapped(env, exc) from exc


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
    ``awaiting_reset()``, found under outer wrappers too); a bare ``VectorEnv`` without the
    vector :class:`~gymcurric.wrappers.vector.SampleCurriculumTask` (``make_curriculum_vec``)
    cannot, and such a checkpoint replays the task that ended.
    A sub-env in the middle of an episode is saved with its task, which the resumed run plays
    again from the start (the env's own state is not in the file).

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
    marked = _check_wrapped(env, "save_curriculum_state") if env is not None else None
    _flush_envs(env)  # every episode that ended before the call, workers' buffers included
    state = dict(curriculum.state_dict())
    arrays = state.pop("arrays")
    meta = {"file_format": FILE_FORMAT, **state}
    try:
        blob = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise DataError(f"curriculum state is not JSON-safe outside its arrays ({exc})") from exc
    members: dict[str, np.ndarray] = {_META: np.array(blob)}
    members.update({_ARRAYS + name: np.asarray(a) for name, a in arrays.items()})
    tasks = _env_tasks(env, marked) if env is not None else []
    ids = [t for t, _ in tasks]
    awaiting = _method(env, "awaiting_reset")  # sub-envs whose next task is not started yet
    if awaiting is not None:
        ids = [-1 if ended else t for t, ended in zip(ids, awaiting(), strict=True)]
    # envs armed by a load that have not reset (whatever their task_id says): the loaded tasks
    ids = [t if r is None else r for t, (_, r) in zip(ids, tasks, strict=True)]
    members[_IDS] = np.asarray(ids, dtype=np.int64)
    waiting = _method(env, "channel_waiting")  # an async vector env's drawn-ahead tasks
    if waiting is not None and (w := waiting()) is not None:
        members[_WAIT] = np.asarray(w, dtype=np.int64)
        spares = _method(env, "channel_spares")  # and the retries' spare tasks, per env
        if spares is not None and (rows := spares()) and len(rows[0]):
            members[_SPARES] = np.asarray(rows, dtype=np.int64)
        # where each was drawn from, and which predate a pool change (taken all the same by
        # a sub-env that resets before the channel's next refill)
        slots, stale = _method(env, "channel_slots"), _method(env, "channel_stale")
        if (
            slots is not None
            and stale is not None
            and (slot_rows := slots()) is not None
            and (marks := stale()) is not None
        ):
            members[_SLOTS] = np.asarray(slot_rows, dtype=np.int64).reshape(len(w), -1)
            members[_STALE] = np.asarray(marks, dtype=bool)
            # whether the refill that withdraws the stale ones is due at the resumed reset
            due = _method(env, "channel_refill_due")
            if due is not None and (flag := due()) is not None:
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
        if t < -1:
            raise DataError(f"{where}: member {key!r} holds task id {t} (expected -1 or >= 0)")
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
            :class:`~gymcurric.wrappers.SampleCurriculumTask`; the env is left working.
        DataError: the file is not a curriculum checkpoint, is damaged (empty, truncated, not
            an ``.npz``, pickled objects, bad JSON metadata, a task id outside the space), or
            (from ``load_state_dict``) comes from another configuration or breaks the
            curriculum state's invariants; the message names the file.
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
    if env is not None:
        marked = _check_wrapped(env, "load_curriculum_state")  # before anything runs there
        n = len(_env_tasks(env, marked, resumed=False))
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
    _flush_envs(env)  # the workers' buffered episodes too
    if curriculum is not None:
        try:
            curriculum.load_state_dict(state)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from exc
    if env is not None:
        _resume_tasks(env, ids, marked)
        resume = _method(env, "resume_channel")  # through outer vector wrappers too
        if waiting is not None and resume is not None:
            # spares, slots, stale marks and refill_due are None in files from before them
            resume(waiting, spares, slots=slots, stale=stale, refill_due=refill_due)
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


def _flush_envs(env: Any) -> None:
    """Apply the curriculum work ``env`` holds back: each sub-env's, then the vector wrapper's.

    A sub-env's ``flush_curriculum()`` runs in its process (an SB3 ``VecEnv``'s ``env_method``,
    a Gymnasium vector env's ``call``), through :func:`call_sub_envs`: one that raises there
    does not end its worker, and its error is raised here (a
    :class:`~gymcurric.errors.SubEnvCallError` naming the sub-env, or gymcurric's own error).
    A single env, or a vector curriculum wrapper under outer vector wrappers, is flushed
    through ``_method``. Only for an env :func:`_check_wrapped` accepted.
    """
    if env is None:
        return
    call_sub_envs(env, "flush_curriculum")  # None: a single env, or no call / env_method
    flush = _method(env, "flush_curriculum")  # through outer vector wrappers too
    if flush is not None:
        flush()


def _method(env: Any, name: str) -> Any:
    """The callable ``name`` of ``env`` or of the first env under it (``.env`` chain), or None.

    Gymnasium's ``VectorWrapper`` does not forward attributes, so a vector curriculum wrapper
    under another vector wrapper (shaping, say) is found by walking down.
    """
    for _ in range(64):  # a bound on the chain, against cycles
        if env is None:
            return None
        found = getattr(env, name, None)
        if callable(found):
            return found
        env = getattr(env, "env", None)
    return None
