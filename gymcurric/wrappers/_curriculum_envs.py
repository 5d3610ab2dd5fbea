"""The envs' side of a curriculum checkpoint: which task each env runs, and which it resumes.

:mod:`gymcurric.wrappers.curriculum_state` writes and reads the file; this module reaches the
:class:`~gymcurric.wrappers.SampleCurriculumTask` of each env (a single env, a Gymnasium
``VectorEnv`` or an SB3 ``VecEnv`` of such envs) without breaking a vector env's workers:
it checks each env is wrapped (:func:`check_wrapped`), reads the task it runs
(:func:`env_tasks`), arms its next reset to resume one (:func:`resume_tasks`) and flushes the
episodes it buffered (:func:`flush_envs`).

The wrapper is read, set and called through names only it has
(:mod:`gymcurric.wrappers._sub_envs`: ``CURRICULUM_TASK_IDS``, ``RESUME_CURRICULUM_TASK``,
``FLUSH_CURRICULUM``, ``AWAITING_RESET``), so that a user's wrapper above it with a
``task_id`` or a ``flush_curriculum()`` of its own is not taken for it. An env with every
plain name (:data:`WRAPPER_ATTRS`) and no wrapper mark (a look-alike) is accepted, as it
always was, and reached by the plain names. Each sub-env is reached by its own kind of names:
in a vector env that mixes wrapped sub-envs and look-alikes, the wrapped ones keep the names
only the wrapper has (one look-alike used to make every sub-env reached by the plain names).
A vector env's own curriculum wrapper is found by its class
(:func:`vector_curriculum_wrapper`), not by the first layer with a method's name.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import gymnasium as gym

from gymcurric._checks import check_task_id
from gymcurric.errors import ConfigError, GymcurricError
from gymcurric.wrappers._sub_envs import (
    AWAITING_RESET,
    CURRICULUM_TASK_IDS,
    CURRICULUM_TASK_WRAPPER_MARK,
    FLUSH_CURRICULUM,
    RESUME_CURRICULUM_TASK,
    call_sub_envs,
    call_sub_envs_each,
    sub_envs_lacking,
)

__all__ = [
    "WRAPPER_ATTRS",
    "awaiting_reset",
    "check_wrapped",
    "checked_task_ids",
    "Armed",
    "LookAlikeArm",
    "env_armed",
    "env_task_ids",
    "env_tasks",
    "flush_envs",
    "resume_env_tasks",
    "resume_tasks",
    "vector_curriculum_wrapper",
    "vector_layers",
]

#: What the curriculum wrapper of every env has: the attributes a checkpoint reads and sets and
#: the method it calls. An env with only some of them (a ``task_id`` of its own) is not wrapped.
#: The wrapper's mark (CURRICULUM_TASK_WRAPPER_MARK) implies all of them: a sub-env is asked for
#: it first (one round trip to the workers instead of one per name), and only an env without it
#: is asked name by name. An env with all of them and no mark (a look-alike of the wrapper) is
#: accepted, as it always was, and read and set by these names; the wrapper itself is read and
#: set through names only it has (CURRICULUM_TASK_IDS, RESUME_CURRICULUM_TASK,
#: FLUSH_CURRICULUM, AWAITING_RESET), which a user's wrapper above it cannot shadow, in a
#: vector env with look-alikes among its sub-envs too.
WRAPPER_ATTRS = ("task_id", "pending_task_id", "resuming", "flush_curriculum")


def _not_wrapped(env: Any, exc: Exception | None = None) -> ConfigError:
    """The error for an env whose curriculum wrapper lacked a name (``exc``) when reached."""
    why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return ConfigError(
        "env",
        env,
        f"its envs must be wrapped in gymcurric.wrappers.SampleCurriculumTask{why}",
        source="curriculum state",
    )


def check_wrapped(env: Any, source: str) -> list[bool] | None:
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
        :func:`env_tasks`, :func:`resume_tasks` and :func:`flush_envs`; None for a vector env
        of neither kind (:func:`~gymcurric.wrappers._sub_envs.sub_env_query`), whose
        ``get_attr`` / ``set_attr`` then raise where they fail.
    """
    if isinstance(env, gym.Env):
        lacking = [[n for n in WRAPPER_ATTRS if not env.has_wrapper_attr(n)]]
        marked = [env.has_wrapper_attr(CURRICULUM_TASK_WRAPPER_MARK)]
    else:
        marks = sub_envs_lacking(env, [CURRICULUM_TASK_WRAPPER_MARK])
        if marks is None:
            return None
        marked = [not m for m in marks]
        lacking = [[] for _ in marks]
        unmarked = [i for i, m in enumerate(marked) if not m]
        if unmarked:  # one round trip per name, for these only
            found = sub_envs_lacking(env, WRAPPER_ATTRS, unmarked) or []
            for i, missing in zip(unmarked, found, strict=True):
                lacking[i] = missing
    bad = [i for i, names in enumerate(lacking) if names]
    if not bad:
        return marked
    names = ", ".join(repr(n) for n in WRAPPER_ATTRS if any(n in lacking[i] for i in bad))
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
    marked = check_wrapped(env, "env_task_ids")
    return [t for t, _ in env_tasks(env, marked, resumed=False)]


class LookAlikeArm(NamedTuple):
    """A look-alike's ``pending_task_id`` and ``resuming`` as read: put back as they were.

    A look-alike's two attributes are its own (``resuming`` False beside a ``pending_task_id``,
    or True beside None); the task its next reset resumes (:attr:`resumed`) does not tell them.
    """

    pending_task_id: Any
    resuming: Any

    @property
    def resumed(self) -> int | None:
        """``-1``: the task the reset takes; None: nothing (see :func:`env_tasks`)."""
        if not self.resuming:
            return None
        return -1 if self.pending_task_id is None else int(self.pending_task_id)


#: What an env's next reset resumes, as :func:`resume_tasks` sets it: a task id (``-1``: the
#: task the reset takes), None (nothing), or a look-alike's own attributes (:class:`LookAlikeArm`)
Armed = int | None | LookAlikeArm


def env_tasks(
    env: Any, marked: list[bool] | None, *, resumed: bool = True
) -> list[tuple[int, int | None]]:
    """Per env ``(task_id, resumed)``: the task it runs, and the one its next reset resumes.

    ``resumed``: ``-1`` for the task the reset takes, None where none is armed (see
    :meth:`~gymcurric.wrappers.SampleCurriculumTask.curriculum_task_ids`; with
    ``resumed=False`` the wrappers' comes along, and look-alikes' is None). Read through the
    wrapper's ``curriculum_task_ids()`` in one round trip to the workers; look-alikes
    (``marked`` False) by the names of :data:`WRAPPER_ATTRS`. In a vector env that mixes the
    two, each sub-env is asked for its own names only, in safe calls (:func:`_call_each`): a
    wrapped sub-env's plain ``task_id`` may be a user's wrapper's above it, which its worker
    may not be able to send. Only for an env :func:`check_wrapped` accepted (``marked`` is
    what it returned).
    """
    return [
        (t, a.resumed if isinstance(a, LookAlikeArm) else a)
        for t, a in _env_arms(env, marked, resumed)
    ]


def env_armed(env: Any, marked: list[bool] | None) -> list[Armed]:
    """What each env's next reset resumes, in the form :func:`resume_tasks` puts back.

    As :func:`env_tasks` reads it, except that a look-alike's ``pending_task_id`` and
    ``resuming`` are kept as they are (:class:`LookAlikeArm`), for a refused load or resume
    to set them back to those values.
    """
    return [a for _, a in _env_arms(env, marked, True)]


def _env_arms(env: Any, marked: list[bool] | None, resumed: bool) -> list[tuple[int, Armed]]:
    """:func:`env_tasks`, with each look-alike's attributes as read (None: not ``resumed``)."""
    if marked and all(marked):
        if isinstance(env, gym.Env):
            pairs = [env.get_wrapper_attr(CURRICULUM_TASK_IDS)()]
        else:
            pairs = call_sub_envs(env, CURRICULUM_TASK_IDS) or []
        return [(int(t), None if r is None else int(r)) for t, r in pairs]
    if marked and any(marked):
        return _mixed_arms(env, marked, resumed)
    # look-alikes only (or a vector env of neither kind): one get_attr per name (a Gymnasium
    # vector env's takes no indices; an SB3 VecEnv's is asked the same way)
    ids = [int(t) for t in _env_attr(env, "task_id")]
    if not resumed:
        return [(t, None) for t in ids]
    armed, pending = _env_attr(env, "resuming"), _env_attr(env, "pending_task_id")
    return [(t, LookAlikeArm(p, a)) for t, a, p in zip(ids, armed, pending, strict=True)]


def _mixed_arms(env: Any, marked: list[bool], resumed: bool) -> list[tuple[int, Armed]]:
    """:func:`_env_arms` of a vector env that mixes wrapped sub-envs and look-alikes.

    The wrapped ones answer ``curriculum_task_ids()``; the look-alikes their ``task_id`` in
    the same safe call, then (``resumed``) ``resuming`` and ``pending_task_id``, in which the
    wrapped ones are asked nothing that reads or sends a value of theirs.
    """
    n = len(marked)

    def plain(name: str) -> list[tuple[str, tuple[Any, ...]]]:
        return [("get_wrapper_attr", (name,))] * n

    ids = _call_each(env, marked, [(CURRICULUM_TASK_IDS, ())] * n, plain("task_id"))
    if resumed:
        armed = _call_each(env, marked, None, plain("resuming"))
        pending = _call_each(env, marked, None, plain("pending_task_id"))
    out: list[tuple[int, Armed]] = []
    for i, ours in enumerate(marked):
        if ours:
            t, r = ids[i]
            out.append((int(t), None if r is None else int(r)))
        else:
            out.append((int(ids[i]), LookAlikeArm(pending[i], armed[i]) if resumed else None))
    return out


def _env_attr(env: Any, name: str) -> list[Any]:
    """The attribute ``name`` of each env (a single env: one entry), for look-alikes.

    Only for an env :func:`check_wrapped` accepted: a worker exits on a missing attribute;
    and one whose sub-envs are all look-alikes (a wrapped sub-env's plain name may be a user's
    wrapper's above it: :func:`_mixed_arms` reads a mix).
    """
    try:
        if isinstance(env, gym.Env):
            return [env.get_wrapper_attr(name)]
        if isinstance(env, gym.vector.VectorEnv):
            env = env.unwrapped  # Gymnasium's VectorWrapper does not forward get_attr
        return list(env.get_attr(name))
    except AttributeError as exc:
        raise _not_wrapped(env, exc) from exc


def _call_each(
    env: Any,
    marked: list[bool],
    ours: Sequence[tuple[str, tuple[Any, ...]]] | None,
    theirs: Sequence[tuple[str, tuple[Any, ...]]] | None,
) -> list[Any]:
    """Call ``ours[i]`` (a method name and its arguments) in each wrapped (``marked``) sub-env
    and ``theirs[i]`` in each look-alike, in one :func:`call_sub_envs_each`.

    None (for one side) leaves those sub-envs alone: they are asked for the wrapper's mark, a
    question that changes nothing and cannot raise (a Gymnasium vector env's ``call`` reaches
    every sub-env), and their values are the answers.
    """
    nothing = ("has_wrapper_attr", (CURRICULUM_TASK_WRAPPER_MARK,))
    calls = []
    for i, m in enumerate(marked):
        side = ours if m else theirs
        calls.append(nothing if side is None else side[i])
    return call_sub_envs_each(env, [n for n, _ in calls], [a for _, a in calls]) or []


def resume_env_tasks(env: Any, task_ids: Sequence[int]) -> None:
    """Make each env's next reset (without an explicit task) resume a checkpoint.

    That reset runs ``task_ids[i]``, or for ``-1`` takes its task as any reset does (the next
    draw, or the task restored in its channel slot); either way it keeps the restored
    curriculum's generator (see :attr:`gymcurric.wrappers.SampleCurriculumTask.resuming`).

    All or nothing: ``task_ids`` is checked here first (one task id per env, an int from -1
    to 2**63 - 1), and where a sub-env's wrapper refuses its id all the same (a subclass of
    yours, or a look-alike's setter), every sub-env is put back as it was (the refusing one
    too, where it was set half-way; a single env too) before the error is raised.

    Raises:
        ConfigError: an env is not wrapped (the env is left working), or ``task_ids`` does not
            hold one id per env, or holds something else than a task id (the key names the
            sub-env: ``task_ids[1]``); nothing was changed.
        SubEnvCallError: a sub-env's wrapper refused its id (gymcurric's own errors are raised
            as themselves, with a note naming the sub-env); its worker goes on, and the
            sub-envs were put back. A single env's refusal is raised as itself, the env put
            back.
    """
    marked = check_wrapped(env, "resume_env_tasks")
    resume_tasks(env, checked_task_ids(env, task_ids, "resume_env_tasks"), marked)


def checked_task_ids(env: Any, task_ids: Sequence[int], source: str) -> list[int]:
    """``task_ids`` as ints, one per env of ``env``, each a task id, or a ConfigError naming it.

    What a sub-env's wrapper would refuse, refused here, before any sub-env is changed: each
    id is checked by :func:`gymcurric._checks.check_task_id`, the wrapper's own rule.
    """
    single = isinstance(env, gym.Env)
    try:
        ids = list(task_ids)
    except TypeError:
        raise ConfigError(
            "task_ids", task_ids, "expected a list of task ids, one per env", source=source
        ) from None
    n = 1 if single else env.num_envs
    if len(ids) != n:
        expected = "one id for a single env" if single else f"{n} ids, one per sub-env"
        raise ConfigError("task_ids", ids, f"expected {expected}", source=source)
    which = ["the env"] if single else [f"sub-env {i}" for i in range(n)]
    return [
        check_task_id(f"task_ids[{i}]", t, source=source, about=f"the task {which[i]} resumes")
        for i, t in enumerate(ids)
    ]


def resume_tasks(
    env: Any,
    resumed: Sequence[Armed],
    marked: list[bool] | None,
    before: Sequence[Armed] | None = None,
) -> None:
    """Arm each env's next reset to resume ``resumed[i]`` (``-1``: the task it takes; None:
    nothing; a :class:`LookAlikeArm`: a look-alike's attributes as they were), for an env
    already checked (``marked``: :func:`check_wrapped`).

    The wrapper is set through its ``resume_curriculum_task()``, look-alikes by their names,
    each sub-env through :func:`call_sub_envs_each` (an error there ends no worker). Where a
    sub-env refuses, every sub-env is put back to ``before`` (what each resumed, a look-alike's
    attributes as they were: :func:`env_armed`, read here where not given) and the error is
    raised; so is a single env that refuses (its error as itself), which may have been set
    half-way (a look-alike's ``resuming`` that refuses after its ``pending_task_id`` was set).
    """
    try:
        if isinstance(env, gym.Env):
            ours = bool(marked and marked[0])
            was = _single_armed(env, ours) if before is None else before[0]
            try:
                _arm_one(env, resumed[0], ours)
            except Exception as exc:
                try:
                    _arm_one(env, was, ours)
                except Exception as again:
                    exc.add_note(f"putting the env back failed too ({type(again).__name__})")
                else:
                    exc.add_note("the env was put back: it resumes what it did before")
                raise
            return
        if marked is None:  # neither kind of vector env: its set_attr raises where it fails
            plain = [_plain(r) for r in resumed]
            env.unwrapped.set_attr("pending_task_id", [p for p, _ in plain])
            env.unwrapped.set_attr("resuming", [a for _, a in plain])
            return
        if before is None:
            before = env_armed(env, marked)
        try:
            _arm_sub_envs(env, resumed, marked)
        except GymcurricError as exc:  # SubEnvCallError, or the wrapper's own error
            try:
                _arm_sub_envs(env, before, marked)
            except Exception as again:
                exc.add_note(f"putting the sub-envs back failed too ({type(again).__name__})")
            else:
                exc.add_note("the sub-envs were put back: none resumes another task")
            raise
    except AttributeError as exc:
        raise _not_wrapped(env, exc) from exc


def _single_armed(env: gym.Env[Any, Any], marked: bool) -> Armed:
    """What a single env's next reset resumes (:func:`env_armed`), its ``task_id`` unread."""
    if marked:
        resumed = env.get_wrapper_attr(CURRICULUM_TASK_IDS)()[1]
        return None if resumed is None else int(resumed)
    return LookAlikeArm(env.get_wrapper_attr("pending_task_id"), env.get_wrapper_attr("resuming"))


def _plain(resumed: Armed) -> tuple[Any, Any]:
    """The ``pending_task_id`` and ``resuming`` a look-alike is set to, to resume ``resumed``."""
    if isinstance(resumed, LookAlikeArm):
        return resumed.pending_task_id, resumed.resuming
    return resumed, resumed is not None


def _arm_one(env: gym.Env[Any, Any], resumed: Armed, marked: bool) -> None:
    if marked:
        env.get_wrapper_attr(RESUME_CURRICULUM_TASK)(resumed)
    else:
        pending, resuming = _plain(resumed)
        env.set_wrapper_attr("pending_task_id", pending)
        env.set_wrapper_attr("resuming", resuming)


def _arm_sub_envs(env: Any, resumed: Sequence[Armed], marked: list[bool]) -> None:
    if all(marked):
        call_sub_envs_each(env, RESUME_CURRICULUM_TASK, [(r,) for r in resumed])
        return
    # look-alikes by the plain names, wrappers (where the env mixes them) by their own
    plain = [_plain(r) for r in resumed]
    ours = [(RESUME_CURRICULUM_TASK, (r,)) for r in resumed]
    resuming = [("set_wrapper_attr", ("resuming", a)) for _, a in plain]
    try:
        pending = [("set_wrapper_attr", ("pending_task_id", p)) for p, _ in plain]
        _call_each(env, marked, ours, pending)
    except GymcurricError as exc:
        # the look-alikes' resuming is set all the same: where a sub-env refuses to be put
        # back, the others are put back whole (not their pending_task_id alone)
        try:
            _call_each(env, marked, None, resuming)
        except Exception as again:
            exc.add_note(f"setting the look-alikes' resuming failed too ({type(again).__name__})")
        raise
    _call_each(env, marked, None, resuming)


def flush_envs(env: Any, marked: list[bool] | None) -> None:
    """Apply the curriculum work ``env`` holds back: each sub-env's, then the vector wrapper's.

    A sub-env's ``flush_curriculum()`` runs in its process (an SB3 ``VecEnv``'s ``env_method``,
    a Gymnasium vector env's ``call``), through :func:`call_sub_envs` (a mix of wrappers and
    look-alikes: :func:`_call_each`) and under the name only the wrapper has
    (``curriculum_task_flush``; look-alikes' by its name): one that raises there does not end
    its worker, and its error is raised here (a :class:`~gymcurric.errors.SubEnvCallError`
    naming the sub-env, or gymcurric's own error).
    Then gymcurric's vector curriculum wrappers, under outer vector wrappers too (each
    instance of the class: see :func:`vector_curriculum_wrapper`). Only for an env
    :func:`check_wrapped` accepted (``marked``).
    """
    if env is None:
        return
    if isinstance(env, gym.Env):
        if marked and marked[0]:
            env.get_wrapper_attr(FLUSH_CURRICULUM)()
        elif (flush := _find_method(env, "flush_curriculum")) is not None:  # a look-alike
            flush()
        return
    if marked and any(marked) and not all(marked):  # a mix: each sub-env by its own name
        n = len(marked)
        _call_each(env, marked, [(FLUSH_CURRICULUM, ())] * n, [("flush_curriculum", ())] * n)
    else:
        call_sub_envs(env, FLUSH_CURRICULUM if marked and all(marked) else "flush_curriculum")
    for wrapper in _vector_curriculum_wrappers(env):  # each holds its own step's work
        wrapper.flush_curriculum()


def awaiting_reset(env: Any, marked: list[bool] | None) -> list[bool] | None:
    """Per env whether its episode ended and it has not reset since; None where none tells.

    A single env's wrapper answers under the name only it has (``awaiting_reset()`` of a
    wrapper of yours above it is not asked; a look-alike's by its name); a vector env's
    curriculum wrapper (:func:`vector_curriculum_wrapper`) answers for its sub-envs, and a
    vector env without one cannot tell.
    """
    if isinstance(env, gym.Env):
        if marked and marked[0]:
            return list(env.get_wrapper_attr(AWAITING_RESET)())
        awaiting = _find_method(env, "awaiting_reset")  # a look-alike, by the plain name
    else:
        wrapper = vector_curriculum_wrapper(env)
        awaiting = None if wrapper is None else wrapper.awaiting_reset
    return None if awaiting is None else list(awaiting())


def vector_curriculum_wrapper(env: Any) -> Any:
    """gymcurric's vector :class:`~gymcurric.wrappers.vector.SampleCurriculumTask` of ``env``.

    The first instance of the class (a subclass of yours included) down the ``.env`` chain of
    a Gymnasium vector env (its ``VectorWrapper`` does not forward attributes) that has a
    :attr:`~gymcurric.wrappers.vector.SampleCurriculumTask.channel`, else the first instance,
    or None: a single env, an SB3 ``VecEnv`` of single envs, a vector env without it (an SB3
    ``VecEnv`` over a Gymnasium vector env that it keeps as ``env`` is searched from there).
    A vector env wrapped twice, ``SampleCurriculumTask(make_curriculum_vec(...), cur)``, has
    its channel in the inner one (the outer one's ``channel_waiting()`` was saved, None, and
    its ``resume_channel()`` restored nothing). A checkpoint calls this wrapper's
    ``awaiting_reset()``, ``channel_*()`` and ``resume_channel()`` (and every instance's
    ``flush_curriculum()``), as attributes of the instance: a subclass's override, or a
    function set on the instance, is called; a vector wrapper of yours above it with a method
    of the same name is not (before, the first layer with the name was called: its
    ``awaiting_reset()`` saved running tasks as -1, its ``resume_channel()`` took the loaded
    rows).
    """
    found = _vector_curriculum_wrappers(env)
    return next((w for w in found if w.channel is not None), found[0] if found else None)


def _vector_curriculum_wrappers(env: Any) -> list[Any]:
    """Every vector ``SampleCurriculumTask`` down the ``.env`` chain of ``env``, outermost first.

    An SB3 ``VecEnv`` over a Gymnasium vector env (an adapter of yours that keeps it as
    ``env``; SB3's ``VecEnvWrapper`` forwards the attribute) is searched from that env: its
    channel's rows and the last step's episodes were lost otherwise.
    """
    layers = vector_layers(env)
    if not layers:
        return []
    # imported here: gymcurric.wrappers imports this module, and gymcurric.wrappers.vector
    # (every vector wrapper) only where a vector env is given
    from gymcurric.wrappers.vector.curriculum import SampleCurriculumTask

    return [layer for layer in layers if isinstance(layer, SampleCurriculumTask)]


def vector_layers(env: Any) -> list[Any]:
    """The Gymnasium vector env of ``env`` and each vector env under it, down to the base one.

    The ``.env`` chain of a Gymnasium vector env, outermost first; of an SB3 ``VecEnv``, the
    chain of the Gymnasium vector env it keeps as ``env`` (none: ``[]``); ``[]`` for anything
    else. Where gymcurric's vector curriculum wrapper is looked for.
    """
    if not isinstance(env, gym.Env | gym.vector.VectorEnv):
        env = getattr(env, "env", None)  # an SB3 VecEnv's Gymnasium vector env, if any
    if not isinstance(env, gym.vector.VectorEnv):
        return []
    found = []
    for layer in _env_chain(env):
        found.append(layer)
        if not isinstance(layer, gym.vector.VectorWrapper):  # the base vector env
            break
    return found


def _find_method(env: Any, name: str) -> Any:
    """The callable ``name`` of ``env`` or of the first env under it (``.env`` chain), or None.

    For a single look-alike env only (one with the wrapper's plain names and not its mark),
    which is reached by those names as it always was; gymcurric's own wrappers are reached
    through names only they have, or by their class (:func:`vector_curriculum_wrapper`).
    """
    for layer in _env_chain(env):
        found = getattr(layer, name, None)
        if callable(found):
            return found
    return None


def _env_chain(env: Any) -> Iterator[Any]:
    """``env``, then the env under it (its ``.env``), and so on: 64 at most, against cycles."""
    for _ in range(64):
        if env is None:
            return
        yield env
        env = getattr(env, "env", None)
