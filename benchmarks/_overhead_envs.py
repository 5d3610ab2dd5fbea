"""The vector envs that ``curriculum_overhead.py`` part (b) measures, one builder per config.

Each builder takes ``(start-method context, parsed args, loaded Syllabus or None)`` and returns
``(vector env, cleanup)``; the cleanup closes what else it created (a curriculum, Syllabus's
curriculum process).
"""

from __future__ import annotations

import argparse
import functools
import signal
from collections.abc import Callable
from typing import Any

import _trivial_env as trivial
import gymnasium as gym
from _syllabus_anchor import syllabus_lp

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers.vector import make_curriculum_vec

__all__ = ["BUILDERS", "Built"]

Built = tuple[Any, Callable[[], None]]  # (vector env, cleanup of what else was created)


def _trivial_vec(ctx: str, args: argparse.Namespace, wrappers: Any = None) -> Any:
    """An ``AsyncVectorEnv`` of ``--num-envs`` trivial envs, each in ``wrappers``."""
    return gym.make_vec(
        trivial.ENV_ID,
        args.num_envs,
        vectorization_mode="async",
        vector_kwargs={"context": ctx},
        episode_length=args.episode_length,
        wrappers=wrappers,
    )


def _build_plain(ctx: str, args: argparse.Namespace, syl: Any) -> Built:
    return _trivial_vec(ctx, args), lambda: None


def _build_gymcurric(
    ctx: str,
    args: argparse.Namespace,
    syl: Any,
    wrapper_kwargs: dict[str, Any] | None = None,
    overlap: bool = False,
) -> Built:
    tasks = [{"level": i} for i in range(args.env_tasks)]
    cur = Curriculum(FixedTaskSpace(tasks), seed=0, backend="shared")
    try:
        envs = make_curriculum_vec(
            trivial.ENV_ID,
            cur,
            args.num_envs,
            vectorization_mode="async",
            vector_kwargs={"context": ctx},
            wrapper_kwargs=wrapper_kwargs,
            overlap=overlap,
            episode_length=args.episode_length,
        )
    except BaseException:
        cur.close()
        raise
    return envs, cur.close


def _build_syllabus(ctx: str, args: argparse.Namespace, syl: Any) -> Built:
    sigint = signal.getsignal(signal.SIGINT)  # start() installs its own SIGINT handler
    mp_cur = syl.core.make_multiprocessing_curriculum(syllabus_lp(syl, args.env_tasks))

    def stop() -> None:
        mp_cur.stop()
        signal.signal(signal.SIGINT, sigint)

    sync = functools.partial(
        syl.core.GymnasiumSyncWrapper, task_space=mp_cur.task_space, components=mp_cur.components
    )
    try:
        envs = _trivial_vec(ctx, args, [trivial.NewTaskToOptions, sync])
    except BaseException:
        stop()
        raise
    return envs, stop


def _build_gymcurric_slots(ctx: str, args: argparse.Namespace, syl: Any) -> Built:
    """``gymcurric`` with a ``success_fn`` (the default rule): episodes summed in the workers."""
    return _build_gymcurric(ctx, args, syl, {"success_fn": trivial.success})


def _build_gymcurric_overlap(ctx: str, args: argparse.Namespace, syl: Any) -> Built:
    """``gymcurric`` with ``overlap=True``: a step's curriculum work runs while the workers step."""
    return _build_gymcurric(ctx, args, syl, overlap=True)


BUILDERS: dict[str, Callable[[str, argparse.Namespace, Any], Built]] = {
    "plain": _build_plain,
    "gymcurric": _build_gymcurric,
    "gc-overlap": _build_gymcurric_overlap,
    "gc-slots": _build_gymcurric_slots,
    "syllabus": _build_syllabus,
}
