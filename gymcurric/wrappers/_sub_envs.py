"""Asking the sub-envs of a vector env which attributes they have, without breaking it.

The worker of a Gymnasium ``AsyncVectorEnv`` (``call``, ``get_attr``) or of an SB3
``SubprocVecEnv`` (``env_method``, ``get_attr``) exits on an exception raised in it: reading a
name that a sub-env lacks shuts its worker down, and the user gets ``EOFError``,
``BrokenPipeError`` or the worker's traceback, with a broken env, instead of a clear error.
Each sub-env's ``has_wrapper_attr(name)`` answers False instead of raising, so code that reads
an attribute which may be missing asks that first (:func:`sub_envs_lacking`).

A single env's wrapper looks a method up the same way (:func:`wrapper_method`), so a single-env
wrapper and its vector twins find the same method (a user's wrapper that adds ``describe()``).

A method of a sub-env that raises in its worker ends the worker all the same, and so does a
value it returns that the worker's pipe cannot pickle. So gymcurric calls the sub-envs' methods
(``describe()``, ``flush_curriculum()``, ...) with :func:`call_sub_envs`: through
:func:`gymcurric_call`, a method this module gives every Gymnasium env, which returns the
exception as a value (and, in a worker, the method's value pickled as the pipe pickles it, or
the error pickling raised); the error is raised in the main process, the worker goes on, and
the vector env can still be stepped or closed.

A vector env's ``get_attr`` / ``set_attr`` (SB3's ``env_method("set_wrapper_attr", ...)``)
reaches the *outermost* layer of a sub-env that has the name: a user's wrapper above gymcurric's
with a ``task_id`` (or ``next_datapack``) of its own would be read, or set, instead. So
gymcurric reaches its wrappers' state through names only they have
(:data:`CURRICULUM_TASK_IDS`, :data:`RESUME_CURRICULUM_TASK`, ``datapack_preset``,
``datapack_has_sampler``), and calls their methods so too (:data:`FLUSH_CURRICULUM`,
:data:`AWAITING_RESET`: a user's wrapper with a ``flush_curriculum()`` of its own would run
instead). It gives each sub-env its own arguments with :func:`call_sub_envs_each`, as safely
as :func:`call_sub_envs`.

Code that needs the sub-envs wrapped in :class:`~gymcurric.wrappers.SampleCurriculumTask` (the
curriculum checkpoint, SB3's ``RegretScoreCallback``) asks for the wrapper's mark,
:data:`CURRICULUM_TASK_WRAPPER_MARK`: one question, and a ``task_id`` of an env's own does not
pass for the wrapper's.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple

import gymnasium as gym

from gymcurric._checks import check_one_per_env
from gymcurric.errors import GymcurricError, SubEnvCallError

__all__ = [
    "AWAITING_RESET",
    "CURRICULUM_TASK_IDS",
    "CURRICULUM_TASK_WRAPPER_MARK",
    "FLUSH_CURRICULUM",
    "RESUME_CURRICULUM_TASK",
    "SAFE_CALL",
    "STAGED_CALL",
    "SubEnvCall",
    "call_sub_envs",
    "call_sub_envs_each",
    "error_text",
    "gymcurric_call",
    "load_pickled_error",
    "sub_env_query",
    "sub_envs_lacking",
    "wrapper_method",
]

#: The name of :attr:`SampleCurriculumTask.curriculum_task_wrapper
#: <gymcurric.wrappers.SampleCurriculumTask.curriculum_task_wrapper>`, the attribute only that
#: wrapper has: a sub-env that has it is wrapped (``has_wrapper_attr`` of this name).
CURRICULUM_TASK_WRAPPER_MARK = "curriculum_task_wrapper"

#: The name of :meth:`SampleCurriculumTask.curriculum_task_ids
#: <gymcurric.wrappers.SampleCurriculumTask.curriculum_task_ids>`: the wrapper's ``task_id``
#: (and the task its next reset resumes) under a name no other wrapper has.
CURRICULUM_TASK_IDS = "curriculum_task_ids"

#: The name of :meth:`SampleCurriculumTask.resume_curriculum_task
#: <gymcurric.wrappers.SampleCurriculumTask.resume_curriculum_task>`: sets what
#: ``pending_task_id`` and ``resuming`` set, under a name no other wrapper has.
RESUME_CURRICULUM_TASK = "resume_curriculum_task"

#: The name of :meth:`SampleCurriculumTask.curriculum_task_flush
#: <gymcurric.wrappers.SampleCurriculumTask.curriculum_task_flush>`: the wrapper's
#: ``flush_curriculum()`` under a name no other wrapper has.
FLUSH_CURRICULUM = "curriculum_task_flush"

#: The name of :meth:`SampleCurriculumTask.curriculum_task_awaiting_reset
#: <gymcurric.wrappers.SampleCurriculumTask.curriculum_task_awaiting_reset>`: the wrapper's
#: ``awaiting_reset()`` under a name no other wrapper has.
AWAITING_RESET = "curriculum_task_awaiting_reset"


def wrapper_method(env: gym.Env[Any, Any], name: str) -> Callable[..., Any] | None:
    """The method ``name`` of the outermost wrapper of ``env`` that has it, else of its base env.

    This is where a vector env's ``call`` / SB3's ``env_method`` find a sub-env's method
    (``get_wrapper_attr``). None where no layer has ``name`` or it is not callable.
    """
    if not env.has_wrapper_attr(name):
        return None
    method = env.get_wrapper_attr(name)
    return method if callable(method) else None


def sub_env_query(env: Any) -> Callable[..., Sequence[Any]] | None:
    """How to call a method on every sub-env: ``call`` (Gymnasium) or ``env_method`` (SB3).

    None for a single env, or a vector env with neither method.
    """
    if isinstance(env, gym.vector.VectorEnv):
        call = getattr(env.unwrapped, "call", None)  # VectorWrapper does not forward it
        return call if callable(call) else None
    if isinstance(env, gym.Env):
        return None
    method = getattr(env, "env_method", None)
    return method if callable(method) else None


def sub_envs_lacking(
    env: Any,
    names: Sequence[str],
    indices: Sequence[int] | None = None,
) -> list[list[str]] | None:
    """Per sub-env (of ``indices``, default all), the names of ``names`` it does not have.

    Each sub-env's ``has_wrapper_attr`` (its wrappers, then its base env) answers, one round
    trip per name, so nothing raises in a worker. A sub-env with all of them gets ``[]``.

    Args:
        env: a Gymnasium ``VectorEnv`` (through any vector wrappers) or an SB3 ``VecEnv``.
        names: the attribute or method names to look for.
        indices: the sub-envs to ask (SB3's ``indices``; a Gymnasium vector env is asked as a
            whole, as its ``call`` takes no indices, and the answers of these are kept).

    Returns:
        One list per sub-env asked, or None where ``env`` is neither kind of vector env
        (:func:`sub_env_query`): its own ``get_attr`` or ``call`` then raise in this process.
    """
    ask = sub_env_query(env)
    if ask is None:
        return None
    gymnasium = isinstance(env, gym.vector.VectorEnv)

    def has(name: str, sub_envs: list[int]) -> list[bool]:
        if gymnasium:
            answers = ask("has_wrapper_attr", name)
            return [bool(answers[i]) for i in sub_envs]
        return [bool(h) for h in ask("has_wrapper_attr", name, indices=sub_envs)]

    every = list(range(env.num_envs)) if indices is None else list(indices)
    lacking: list[list[str]] = [[] for _ in every]
    if not every:
        return lacking
    for name in names:
        for k, h in enumerate(has(name, every)):
            if not h:
                lacking[k].append(name)
    return lacking


#: The method Gymnasium envs get once gymcurric makes a safe call (:func:`gymcurric_call`): a
#: vector env's ``call`` / SB3's ``env_method`` of this name runs another method of a sub-env
#: so that an exception in it comes back as a value, and the sub-env's worker goes on.
SAFE_CALL = "gymcurric_call"


class SubEnvCall(NamedTuple):
    """A method call for :func:`gymcurric_call` to make in a sub-env's process.

    Passed as the argument of ``call(SAFE_CALL, ...)`` / ``env_method(SAFE_CALL, ...)``: a
    worker unpickles it (every start method sends it through a pipe) before it looks the name
    up, and unpickling installs :func:`gymcurric_call` there (:func:`_install`), so that
    importing gymcurric changes nothing outside it; only a safe call does. Unpickling also sets
    ``sent``: the value goes back the way the call came, through a pipe, so
    :func:`gymcurric_call` pickles it first; an in-process sub-env (``SyncVectorEnv``,
    ``DummyVecEnv``) gets the call as it was made (``sent`` False) and hands its value over as
    it is, at no cost.
    """

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    sent: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickled_call, (self.name, self.args, self.kwargs))


def _unpickled_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SubEnvCall:
    _install()
    return SubEnvCall(name, args, kwargs, True)


#: Where :func:`call_sub_envs_each` leaves a sub-env's own :class:`SubEnvCall` (a vector env's
#: ``set_attr``: a plain attribute of the sub-env's outermost layer, which nothing else has)
#: for :func:`gymcurric_call` to take and run.
STAGED_CALL = "gymcurric_staged_call"


def gymcurric_call(self: gym.Env[Any, Any], call: SubEnvCall | None = None) -> tuple[Any, ...]:
    """Run ``call`` on this env: ``("ok", value)``, or ``("error", ...)`` for an exception.

    ``call=None`` runs (and removes) the call left in this env's :data:`STAGED_CALL`.

    The method is looked up as ``call`` / ``env_method`` look one up: on the outermost wrapper
    that has it (``get_wrapper_attr``). An exception comes back as ``("error", stage, type
    name, message, formatted traceback, a copy of the exception or None)``, ``stage`` being
    ``"call"``: the copy that pickling makes (:class:`_SentError`: None where it cannot be
    made, in this process or the one it is sent to, so that sending it can neither end the
    worker nor break the pipe), as a worker's pipe would make one, so the sub-env's own
    exception is left as it was (an in-process sub-env may raise one object again).

    A call that came through a pipe (``call.sent``: a worker's) returns ``("sent", pickle)``:
    the value pickled as the pipe would pickle it (``multiprocessing``'s ``ForkingPickler``,
    which both Gymnasium's and SB3's workers send with), which the main process loads; where
    that raises, the pipe would have raised too, ending the worker: ``("error", "send", ...)``
    instead. The value is pickled once, here (the pipe then pickles only the bytes: a copy).
    Installed on ``gymnasium.Env`` under :data:`SAFE_CALL`, a name no user wrapper has.
    """
    try:
        if call is None:
            call = _staged_call(self)
        value = self.get_wrapper_attr(call.name)(*call.args, **call.kwargs)
    except Exception as exc:
        return _failed("call", exc)
    if not call.sent:  # in-process: handed over as it is
        return ("ok", value)
    shared = _shared_key()
    try:
        buffer = io.BytesIO()
        ForkingPickler(buffer).dump(value)  # what the worker's Connection.send does with it
    except Exception as exc:
        _unshare_since(shared)
        return _failed("send", exc)
    return ("sent", buffer.getvalue())


def _sharer() -> Any:
    """``multiprocessing``'s resource sharer of this process (its internals: no API has them)."""
    from multiprocessing import resource_sharer

    module: Any = resource_sharer  # typeshed does not list the module's internals
    return module._resource_sharer


def _shared_key() -> int:
    """The last key the resource sharer handed out in this process (-1: none to tell)."""
    try:
        return int(_sharer()._key)
    except (AttributeError, TypeError, ValueError):  # another Python's sharer: nothing to undo
        return -1


def _unshare_since(key: int) -> None:
    """Close what a failed pickling shared after ``key`` (its fds, none of them sent).

    ``ForkingPickler`` sends an fd (a pipe end, a torch tensor's shared memory) as a copy the
    resource sharer keeps until the loading process asks for it; after a failed pickling none
    will, and the worker would hold each copy (and the memory behind it) until it exits.
    Keys are handed out in order, and this thread is the worker's one that pickles.
    """
    if key < 0:
        return
    try:
        sharer = _sharer()
        lock, cache = sharer._lock, sharer._cache
    except AttributeError:
        return
    with lock:
        closes = [cache.pop(k)[1] for k in [k for k in cache if k > key]]
    for close in closes:
        with contextlib.suppress(OSError):
            close()


def _failed(stage: str, exc: Exception) -> tuple[Any, ...]:
    """The answer for ``exc``, raised at ``stage`` (``call``, ``send``; ``load``: in main)."""
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return ("error", stage, name, error_text(exc), traceback.format_exc(), _SentError(exc))


def _staged_call(env: gym.Env[Any, Any]) -> SubEnvCall:
    """The call :func:`call_sub_envs_each` left on ``env`` (its outermost layer), removed."""
    call = vars(env).pop(STAGED_CALL, None)
    if not isinstance(call, SubEnvCall):
        raise RuntimeError(f"no call was left in {STAGED_CALL!r} of this sub-env ({call!r})")
    return call


def error_text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in where that raises (it would end the worker here)."""
    try:
        return str(exc)
    except Exception as failed:
        return f"<str() of the error raised {type(failed).__name__}>"


class _SentError:
    """A sub-env's exception on its way to the main process: ``error``, a copy made by pickling.

    In-process (``SyncVectorEnv``, ``DummyVecEnv``) it arrives as it is, the copy with the
    original's traceback and chain. Through a pipe it travels as the pickle (``blob``) and
    arrives as the exception loaded there, or as None where it cannot be loaded there (a class
    only the worker has): an unpickling error in the vector env's ``call`` would leave the call
    pending and the env unusable.
    """

    __slots__ = ("blob", "error")

    def __init__(self, exc: BaseException) -> None:
        try:
            self.blob: bytes | None = pickle.dumps(exc)  # one the pipe cannot send ends the worker
        except Exception:
            self.blob = None
        self.error = load_pickled_error(self.blob)
        if self.error is not None:  # the traceback and chain do not pickle
            self.error.__traceback__ = exc.__traceback__
            self.error.__cause__, self.error.__context__ = exc.__cause__, exc.__context__
            self.error.__suppress_context__ = exc.__suppress_context__

    def __reduce__(self) -> tuple[Any, ...]:
        return (load_pickled_error, (self.blob,))


def load_pickled_error(blob: bytes | None) -> BaseException | None:
    """The exception pickled as ``blob``, or None where it does not load as one."""
    if blob is None:
        return None
    try:
        error = pickle.loads(blob)
    except Exception:
        return None
    return error if isinstance(error, BaseException) else None  # a __reduce__ may build others


def _install() -> None:
    """Give ``gymnasium.Env`` (every env and wrapper) :func:`gymcurric_call` in this process.

    Done by the first safe call (:func:`call_sub_envs`) and by a worker unpickling its
    argument, not at import: importing gymcurric leaves Gymnasium's classes as they are.
    """
    if getattr(gym.Env, SAFE_CALL, None) is not gymcurric_call:
        setattr(gym.Env, SAFE_CALL, gymcurric_call)


def call_sub_envs(
    env: Any, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any
) -> list[Any] | None:
    """Call the method ``name`` of the sub-envs (of ``indices``, default all) and return theirs.

    Like ``env.call(name, ...)`` (Gymnasium) or ``env.env_method(name, ..., indices=...)``
    (SB3), one round trip in all, but a method that raises does not end its sub-env's worker
    (:func:`gymcurric_call`): the error is raised here, and the vector env can be stepped or
    closed afterwards. A :class:`~gymcurric.errors.GymcurricError` is raised as itself (a note
    names the sub-env and method); any other exception as a
    :class:`~gymcurric.errors.SubEnvCallError` naming the sub-env, method and error, with the
    original as its ``__cause__`` where it could be sent.

    Args:
        env: a Gymnasium ``VectorEnv`` (through any vector wrappers) or an SB3 ``VecEnv``.
        name: the method, found on each sub-env's outermost wrapper that has it.
        indices: the sub-envs to call (SB3; a Gymnasium vector env calls all of them and the
            answers of these are kept).

    Returns:
        The values, one per sub-env called, or None where ``env`` is neither kind of vector
        env (:func:`sub_env_query`).
    """
    ask = sub_env_query(env)
    if ask is None:
        return None
    _install()  # in-process sub-envs (SyncVectorEnv, DummyVecEnv) are not sent a pickle
    call = SubEnvCall(name, args, kwargs)
    every = list(range(env.num_envs)) if indices is None else [int(i) for i in indices]
    if isinstance(env, gym.vector.VectorEnv):
        answers = ask(SAFE_CALL, call)
        answers = [answers[i] for i in every]
    else:
        answers = ask(SAFE_CALL, call, indices=every)
    return _values(every, name, answers)


def call_sub_envs_each(
    env: Any, name: str | Sequence[str], args: Sequence[Sequence[Any]]
) -> list[Any] | None:
    """Call the method ``name`` of every sub-env ``i`` with its own arguments ``args[i]``.

    As safe as :func:`call_sub_envs` (a method that raises ends no worker; the error is raised
    here, the same way), for what a vector env's ``set_attr`` with one value per sub-env did.
    An SB3 ``VecEnv`` gets one ``env_method`` per sub-env (``indices=[i]``). A Gymnasium
    vector env, whose ``call`` sends every sub-env the same arguments, gets two round trips:
    ``set_attr`` leaves each sub-env its own :class:`SubEnvCall` in :data:`STAGED_CALL` (a
    plain attribute of its outermost layer, which no wrapper has: setting it cannot raise), and
    ``call`` runs it there (:func:`gymcurric_call` without an argument).

    Args:
        env: a Gymnasium ``VectorEnv`` (through any vector wrappers) or an SB3 ``VecEnv``.
        name: the method, found on each sub-env's outermost wrapper that has it; or one
            method per sub-env (a vector env whose sub-envs are reached by different names).
        args: one sequence of positional arguments per sub-env.

    Returns:
        The values, one per sub-env, or None where ``env`` is neither kind of vector env
        (:func:`sub_env_query`).

    Raises:
        ConfigError: ``args`` (or a list of names) does not hold one entry per sub-env.
    """
    ask = sub_env_query(env)
    if ask is None:
        return None
    check_one_per_env("args", list(args), env.num_envs, source="call_sub_envs_each")
    names = [name] * env.num_envs if isinstance(name, str) else list(name)
    check_one_per_env("name", names, env.num_envs, source="call_sub_envs_each")
    _install()
    calls = [SubEnvCall(n, tuple(a)) for n, a in zip(names, args, strict=True)]
    every = list(range(env.num_envs))
    if isinstance(env, gym.vector.VectorEnv):
        base: Any = env.unwrapped  # VectorWrapper does not forward set_attr
        base.set_attr(STAGED_CALL, calls)
        answers = list(ask(SAFE_CALL))
    else:
        answers = [ask(SAFE_CALL, c, indices=[i])[0] for i, c in zip(every, calls, strict=True)]
    return _values(every, names, answers)


def _values(
    every: list[int], name: str | Sequence[str], answers: Sequence[tuple[Any, ...]]
) -> list[Any]:
    """The values of the sub-envs ``every`` from their answers, or the error of the first.

    A worker's value arrives pickled (``"sent"``) and is loaded here: one that does not load
    (a class only the worker has) is an error of that sub-env, as one that raised there.
    ``name``: the method called, or one per sub-env of ``every`` (the error names its own).
    """
    values: list[Any] = []
    failed: list[tuple[int, tuple[Any, ...]]] = []
    for i, answer in zip(every, answers, strict=True):
        if answer[0] == "sent":
            try:
                values.append(pickle.loads(answer[1]))
                continue
            except Exception as exc:
                kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
                answer = ("error", "load", kind, error_text(exc), "", exc)  # exc: the cause
        elif answer[0] == "ok":
            values.append(answer[1])
            continue
        failed.append((i, answer))
    if failed:
        method = name if isinstance(name, str) else name[every.index(failed[0][0])]
        raise _sub_env_error([i for i, _ in failed], method, failed[0][1])
    return values


def _sub_env_error(failed: list[int], method: str, answer: tuple[Any, ...]) -> Exception:
    """The error to raise for the first of the sub-envs ``failed`` (``answer`` is its own)."""
    _, stage, type_name, message, worker_traceback, sent = answer
    in_worker = not isinstance(sent, _SentError)  # in-process answers are not pickled
    original = sent if in_worker else sent.error
    also = f"; sub-envs {failed[1:]} raised too" if len(failed) > 1 else ""
    if stage == "call" and isinstance(original, GymcurricError):
        where = (
            f"; its worker goes on. In the sub-env's process:\n{worker_traceback}"
            if in_worker
            else " (in this process)"
        )
        original.add_note(f"raised by {method}() of sub-env {failed[0]}{also}{where}")
        return original
    error = SubEnvCallError(
        failed[0], method, type_name, message, worker_traceback, in_worker, stage
    )
    if also:
        error.add_note(also[2:].capitalize())
    if isinstance(original, BaseException):
        error.__cause__ = original
    return error
