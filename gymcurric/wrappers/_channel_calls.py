"""A checkpoint's side of a vector env's task channel: which env holds it, and its calls.

:mod:`gymcurric.wrappers.curriculum_state` saves and restores the channel's rows through
gymcurric's vector :class:`~gymcurric.wrappers.vector.SampleCurriculumTask`, found by its class
(:func:`~gymcurric.wrappers._curriculum_envs.vector_curriculum_wrapper`). A vector env of
yours with methods of the same names that is not that class is not asked for them: where no
instance of the class is in the chain, :func:`warn_channel_look_alikes` says so, instead of a
file silently saved without the rows (or a load that restores none).
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

from gymcurric.errors import GymcurricWarning
from gymcurric.wrappers._curriculum_envs import vector_curriculum_wrapper, vector_layers

__all__ = ["CHANNEL_METHODS", "channel_look_alikes", "warn_channel_look_alikes"]

#: The vector curriculum wrapper's methods that save and restore its channel's rows.
CHANNEL_METHODS = (
    "channel_waiting",
    "channel_spares",
    "channel_slots",
    "channel_stale",
    "channel_refill_due",
    "resume_channel",
)


def channel_look_alikes(env: Any) -> list[tuple[str, list[str]]]:
    """The vector envs of ``env`` that define channel methods, where gymcurric's wrapper is not.

    Each as ``(module.QualName of its class, the names it defines)``, outermost first: an SB3
    ``VecEnv`` given as ``env`` and each layer of :func:`vector_layers`. Empty where the chain
    has gymcurric's vector ``SampleCurriculumTask`` (a subclass of yours included), which then
    holds the channel (a vector wrapper of yours above it may define methods of these names
    for its own purposes), and for a single env.
    """
    if isinstance(env, gym.Env) or vector_curriculum_wrapper(env) is not None:
        return []
    layers = vector_layers(env)
    if not layers or layers[0] is not env:  # an SB3 VecEnv (over a Gymnasium vector env)
        layers = [env, *layers]
    found = []
    for layer in layers:
        names = [n for n in CHANNEL_METHODS if _defines(layer, n)]
        if names:
            cls = type(layer)
            found.append((f"{cls.__module__}.{cls.__qualname__}", names))
    return found


def _defines(layer: Any, name: str) -> bool:
    """Whether ``layer``'s class (or the instance itself) has a callable ``name``.

    Asked of the class, not through ``getattr`` on the instance: an SB3 ``VecEnvWrapper``
    forwards a missing name to the env it wraps.
    """
    own = getattr(layer, "__dict__", {})
    return callable(own.get(name)) or callable(getattr(type(layer), name, None))


def warn_channel_look_alikes(env: Any, source: str) -> None:
    """Warn (:class:`~gymcurric.errors.GymcurricWarning`) of each :func:`channel_look_alikes`.

    ``source`` is the function (``save_curriculum_state`` / ``load_curriculum_state``). A
    warning, not an error: a vector wrapper of yours may define methods of these names for
    its own purposes, over a vector env without gymcurric's curriculum wrapper (its sub-envs'
    tasks are saved and resumed all the same); filter the warning there.
    """
    if env is None:
        return
    did = "saves" if source.startswith("save") else "restores"
    for cls, names in channel_look_alikes(env):
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
