"""Asking the sub-envs of a vector env which attributes they have, without breaking it.

The worker of a Gymnasium ``AsyncVectorEnv`` (``call``, ``get_attr``) or of an SB3
``SubprocVecEnv`` (``env_method``, ``get_attr``) exits on an exception raised in it: reading a
name that a sub-env lacks shuts its worker down, and the user gets ``EOFError``,
``BrokenPipeError`` or the worker's traceback, with a broken env, instead of a clear error.
Each sub-env's ``has_wrapper_attr(name)`` answers False instead of raising, so code that reads
an attribute which may be missing asks that first (:func:`sub_envs_lacking`).

A single env's wrapper looks a method up the same way (:func:`wrapper_method`), so a single-env
wrapper and its vector twins find the same method (a user's wrapper that adds ``describe()``).

Code that needs the sub-envs wrapped in :class:`~gymcurric.wrappers.SampleCurriculumTask` (the
curriculum checkpoint, SB3's ``RegretScoreCallback``) asks for the wrapper's mark,
:data:`CURRICULUM_TASK_WRAPPER_MARK`: one question, and a ``task_id`` of an env's own does not
pass for the wrapper's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

__all__ = [
    "CURRICULUM_TASK_WRAPPER_MARK",
    "sub_env_query",
    "sub_envs_lacking",
    "wrapper_method",
]

#: The name of :attr:`SampleCurriculumTask.curriculum_task_wrapper
#: <gymcurric.wrappers.SampleCurriculumTask.curriculum_task_wrapper>`, the attribute only that
#: wrapper has: a sub-env that has it is wrapped (``has_wrapper_attr`` of this name).
CURRICULUM_TASK_WRAPPER_MARK = "curriculum_task_wrapper"


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
    *,
    implied_by: str | None = None,
) -> list[list[str]] | None:
    """Per sub-env (of ``indices``, default all), the names of ``names`` it does not have.

    Each sub-env's ``has_wrapper_attr`` (its wrappers, then its base env) answers, one round
    trip per name (one in all with ``implied_by``, where every sub-env has it), so nothing
    raises in a worker. A sub-env with all of them gets ``[]``.

    Args:
        env: a Gymnasium ``VectorEnv`` (through any vector wrappers) or an SB3 ``VecEnv``.
        names: the attribute or method names to look for.
        indices: the sub-envs to ask (SB3's ``indices``; a Gymnasium vector env is asked as a
            whole, as its ``call`` takes no indices, and the answers of these are kept).
        implied_by: a name that only an env with all of ``names`` has (a wrapper's mark):
            asked first, so sub-envs that have it cost one round trip in all; only the others
            are then asked for each name, to tell which ones they lack.

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
    unsure = list(range(len(every)))  # positions in ``every`` still to ask name by name
    if implied_by is not None:
        unsure = [k for k, h in zip(unsure, has(implied_by, every), strict=True) if not h]
    if not unsure:
        return lacking
    for name in names:
        for k, h in zip(unsure, has(name, [every[k] for k in unsure]), strict=True):
            if not h:
                lacking[k].append(name)
    return lacking
