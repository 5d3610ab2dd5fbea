"""A checkpoint's side of a vector env's task channel: which env holds it, and its calls.

:mod:`gymcurric.wrappers.curriculum_state` saves and restores the channel's rows through
gymcurric's vector :class:`~gymcurric.wrappers.vector.SampleCurriculumTask`, found by its class
(:func:`~gymcurric.wrappers._curriculum_envs.vector_curriculum_wrapper`). A vector env of
yours with methods of the same names that is not that class is not asked for them: where no
instance of the class is in the chain, :func:`warn_channel_look_alikes` says so, instead of a
file silently saved without the rows (or a load that restores none). A load's call of that
wrapper's ``resume_channel`` (an override of yours included) goes through
:func:`resume_channel`, which returns what puts the channel back where the load is refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from gymcurric.errors import ConfigError, GymcurricError, GymcurricWarning
from gymcurric.wrappers._curriculum_envs import vector_curriculum_wrapper, vector_layers

__all__ = ["resume_channel", "warn_channel_look_alikes"]

#: The vector curriculum wrapper's methods that save and restore its channel's rows.
_CHANNEL_METHODS = (
    "channel_waiting",
    "channel_spares",
    "channel_slots",
    "channel_stale",
    "channel_refill_due",
    "resume_channel",
)


def _channel_look_alikes(env: Any) -> list[tuple[str, list[str]]]:
    """The vector envs of ``env`` that define channel methods, where gymcurric's wrapper is not.

    Each as ``(module.QualName of its class, the names it defines)``, outermost first: an SB3
    ``VecEnv`` given as ``env`` and each one under it (``VecEnvWrapper.venv``: a VecEnv of
    yours under ``VecMonitor`` or ``VecNormalize``), then each layer of :func:`vector_layers`.
    Empty where the chain has gymcurric's vector ``SampleCurriculumTask`` (a subclass of yours
    included), which then holds the channel (a vector wrapper of yours above it may define
    methods of these names for its own purposes), and for a single env.
    """
    if isinstance(env, gym.Env) or vector_curriculum_wrapper(env) is not None:
        return []
    layers = [*_sb3_layers(env), *vector_layers(env)]
    found = []
    for layer in layers:
        names = [n for n in _CHANNEL_METHODS if _defines(layer, n)]
        if names:
            cls = type(layer)
            found.append((f"{cls.__module__}.{cls.__qualname__}", names))
    return found


def _sb3_layers(env: Any) -> list[Any]:
    """An SB3 ``VecEnv`` ``env`` and each one under it, down its ``venv`` chain (else ``[]``).

    Down to the first Gymnasium env or vector env (that of an SB3 ``VecEnv`` of yours that
    keeps one as ``env`` is in :func:`vector_layers`), read from each instance's own
    attributes: an SB3 ``VecEnvWrapper`` forwards a missing name to the env it wraps.
    """
    found: list[Any] = []
    while env is not None and not isinstance(env, gym.Env | gym.vector.VectorEnv):
        if any(env is seen for seen in found):  # a cycle: stop
            break
        found.append(env)
        env = getattr(env, "__dict__", {}).get("venv")
    return found


def _defines(layer: Any, name: str) -> bool:
    """Whether ``layer``'s class (or the instance itself) has a callable ``name``.

    Asked of the class, not through ``getattr`` on the instance: an SB3 ``VecEnvWrapper``
    forwards a missing name to the env it wraps.
    """
    own = getattr(layer, "__dict__", {})
    return callable(own.get(name)) or callable(getattr(type(layer), name, None))


def warn_channel_look_alikes(env: Any, source: str) -> None:
    """Warn (:class:`~gymcurric.errors.GymcurricWarning`) of each :func:`_channel_look_alikes`.

    ``source`` is the function (``save_curriculum_state`` / ``load_curriculum_state``). A
    warning, not an error: a vector wrapper of yours may define methods of these names for
    its own purposes, over a vector env without gymcurric's curriculum wrapper (its sub-envs'
    tasks are saved and resumed all the same); filter the warning there.
    """
    if env is None:
        return
    did = "saves" if source.startswith("save") else "restores"
    for cls, names in _channel_look_alikes(env):
        listed = ", ".join(f"{n}()" for n in names)
        warnings.warn(
            GymcurricWarning(
                f"{source}: {cls} defines {listed} of gymcurric's vector SampleCurriculumTask "
                "but is not one, and no gymcurric.wrappers.vector.SampleCurriculumTask is in "
                f"the env's .env chain: the checkpoint {did} no task channel's rows (its "
                "methods are not called). To have them saved and restored, subclass "
                "gymcurric.wrappers.vector.SampleCurriculumTask (its channel= argument takes "
                "a TaskChannel); if the names mean something else there, filter this warning."
            ),
            stacklevel=3,
        )


def _override_of(vec: Any, name: str) -> str | None:
    """Who defines ``vec``'s method ``name`` in place of gymcurric's (None: gymcurric's own).

    ``module.QualName.name`` of the subclass that overrides it, or ``the name set on the
    instance of module.QualName`` for a function set on ``vec``.
    """
    cls = type(vec)
    if name in getattr(vec, "__dict__", {}):
        return f"the {name} set on the instance of {cls.__module__}.{cls.__qualname__}"
    for klass in cls.__mro__:
        if name in vars(klass):
            if klass.__module__.startswith("gymcurric."):
                return None
            return f"{klass.__module__}.{klass.__qualname__}.{name}"
    return None


def resume_channel(
    vec: Any,
    where: str,
    waiting: list[int] | None,
    spares: list[list[int]] | None,
    slots: list[list[int]] | None,
    stale: list[bool] | None,
    refill_due: bool | None,
) -> Callable[[BaseException], None]:
    """Call ``vec.resume_channel``; return what puts the channel back where the load is refused.

    ``vec`` is gymcurric's vector ``SampleCurriculumTask`` (a subclass of yours included), or
    None (no channel: nothing is called, and the function returned does nothing). The
    function returned takes the refusal being raised: it calls what ``resume_channel``
    returned. An override of yours that returns None (or anything but a function) where the
    wrapper has a channel is put back all the same, with the wrapper's own put-back taken
    before the call
    (:meth:`~gymcurric.wrappers.vector.SampleCurriculumTask.curriculum_channel_put_back`), and
    the refusal gets a note saying so: it used to stay changed without a word. So is one whose
    function raises when called: the refusal stays the error raised, with a note (the
    channel used to keep restoring the refused file's rows).

    Raises:
        ConfigError: an override of yours raised something else than gymcurric's own errors
            (an override written for the older ``resume_channel(waiting: list[int])``, given
            ``waiting=None`` for a file without a channel's rows, or the keywords ``slots``,
            ``stale``, ``refill_due``): the message names the override and the file ``where``.
            The channel is put back first, so nothing is changed (the load calls this before
            it arms a sub-env or loads the curriculum). gymcurric's errors (a refusal of the
            rows) are raised as themselves.
    """
    if vec is None:  # no vector curriculum wrapper: no channel
        return _nothing
    put_back = vec.curriculum_channel_put_back()
    try:
        undo = vec.resume_channel(waiting, spares, slots=slots, stale=stale, refill_due=refill_due)
    except Exception as exc:
        put_back()  # an override may have changed the rows before it raised
        owner = _override_of(vec, "resume_channel")
        if owner is None or isinstance(exc, GymcurricError):
            raise
        raise _override_failed(owner, where, waiting is None, exc) from exc
    if callable(undo):
        return lambda exc: _call_undo(undo, put_back, exc)
    if vec.channel is None:  # nothing to put back (gymcurric's returns None then)
        return _nothing
    owner = _override_of(vec, "resume_channel") or f"{type(vec).__qualname__}.resume_channel"

    def put_back_rows(exc: BaseException) -> None:
        put_back()
        exc.add_note(
            f"{owner} returned {undo!r}, not a function that puts the channel back (what "
            "gymcurric.wrappers.vector.SampleCurriculumTask.resume_channel returns, for an "
            "override to return): gymcurric put back the rows the channel's next reset "
            "restores; anything else the override changed stays as the refused load left it"
        )

    return put_back_rows


def _override_failed(owner: str, where: str, no_rows: bool, exc: Exception) -> ConfigError:
    """The error for an override of ``resume_channel`` that raised ``exc`` (not gymcurric's)."""
    given = (
        "waiting=None (this file holds no channel rows)" if no_rows else "this file's channel rows"
    )
    return ConfigError(
        "resume_channel",
        owner,
        f"it raised {type(exc).__name__}: {exc}, given {given}. load_curriculum_state calls an "
        "override of gymcurric.wrappers.vector.SampleCurriculumTask.resume_channel as it calls "
        "that method: resume_channel(waiting, spares, slots=..., stale=..., refill_due=...), "
        "with waiting=None for a file without a channel's rows and None for the members a "
        "file lacks; take these as it does and return what super().resume_channel(...) "
        "returns. Nothing was loaded or armed: the curriculum, the sub-envs and the rows the "
        "channel's next reset restores are as they were",
        source=where,
    )


def _nothing(exc: BaseException) -> None:
    """Put back nothing (there is no channel)."""


def _call_undo(undo: Callable[[], Any], put_back: Callable[[], None], exc: BaseException) -> None:
    """Call ``undo`` (what ``resume_channel`` returned); where it raises, note it on ``exc``.

    ``put_back`` (the wrapper's own, taken before the call) then puts the rows back: an
    override's function that raises (one that takes arguments, or fails part way) left the
    channel restoring the refused file's rows.
    """
    try:
        undo()
    except Exception as again:
        put_back()
        exc.add_note(
            "putting the channel's waiting tasks back failed too: the function resume_channel "
            f"returned raised {type(again).__name__}: {again}; gymcurric put back the rows the "
            "channel's next reset restores, and anything else the override changed stays as "
            "the refused load left it"
        )
