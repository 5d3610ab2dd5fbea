"""Syllabus's own curricula in ``curriculum_infeasible.py``, through its documented wrappers.

Kept apart from the study so that what is done to Syllabus (``syllabus-rl==0.7``) is easy to
audit. Per sub-env, Syllabus's documented stack: a ``TaskWrapper`` subclass (task ``i`` is the
study's task dict ``i``, handed to HazardGrid as ``reset(options={"task": ...})``; its
``task_completion`` is the episode's ``is_success``) inside a ``GymnasiumSyncWrapper``, talking
to the curriculum through ``make_multiprocessing_curriculum``'s queues.

* ``lp``: ``OnlineLearningProgress`` with its defaults (``ema_alpha`` 0.1, ``p_theta`` 0.1,
  ``uniform_prob`` 0.25, ``normalize_success``) and the update interval of Syllabus's own
  example (``cleanrl_procgen.py``, ``online_lp``): every 25 PPO batches, here
  ``25 * n_steps * n_envs`` = 25,600 env steps.
* ``plr``: ``CentralPrioritizedLevelReplay`` (value-L1 scores, rank transform, temperature 0.1,
  staleness 0.1: its defaults, tuned for Procgen) with the same ``num_steps``, ``gamma`` and
  ``gae_lambda`` as PPO, fed each step by the SB3 callback of Syllabus's PLR documentation
  (value, next value, reward, done and task of every env).

Three things differ from a plain install, each because it would not run correctly otherwise:

1. ``OnlineLearningProgress`` counts attempts and successes in ``update_task_progress``, but
   ``GymnasiumSyncWrapper`` 0.7 sends an episode's final ``task_completion`` only to
   ``update_on_episode`` (which ignores it) and calls ``update_task_progress`` only for
   completed tasks with ``change_task_on_completion``: failures would never be counted. Here
   ``update_on_episode`` also passes the episode's completion to ``update_task_progress`` first
   (the two hooks ``curriculum_overhead.py`` calls per episode). Its numpy-2 fix comes from
   ``_syllabus_anchor.py``.
2. PLR's default ``replay_schedule="proportionate"`` crashes (``TaskSampler`` has no
   ``evaluator``) at the first sample after every task has been seen, unless Robust PLR's
   evaluator is set up. ``replay_schedule="fixed"``, as in Syllabus's own PLR example, samples
   each unseen task first and then always replays by score.
3. The curriculum's queues are processed in the env's thread, just before an env takes its next
   task (``make_multiprocessing_curriculum(start=False, use_simple_queues=True)``; the loop is
   that of Syllabus's sync thread, ``CurriculumSyncWrapper._update_queues``). With one env per
   reset waiting on the task it asked for, the curriculum sees the same updates in the same order
   as with the thread, without its races (so a seed gives the same run) and without a thread
   that PLR's direct ``update`` calls from the training loop would race with.

Syllabus samples with numpy's global generator, which SB3 seeds with the run's seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from _syllabus_anchor import load_syllabus
from stable_baselines3.common.callbacks import BaseCallback

__all__ = ["SyllabusRun"]

KINDS = ("lp", "plr")
CURRICULA = {"lp": "OnlineLearningProgress", "plr": "CentralPrioritizedLevelReplay"}
_CLASSES: dict[str, type] = {}


def _classes(syl: Any) -> dict[str, type]:
    """The adapter classes, built once (their base classes come from Syllabus)."""
    if _CLASSES:
        return _CLASSES

    class HazardGridTasks(syl.core.TaskWrapper):
        """Syllabus task ``i`` is ``tasks[i]``; completion is the step's ``is_success``."""

        def __init__(self, env: Any, tasks: Sequence[dict[str, Any]]) -> None:
            super().__init__(env)
            self.task_space = syl.task_space.DiscreteTaskSpace(len(tasks))
            self._tasks = [dict(t) for t in tasks]

        def reset(self, new_task: Any = None, **kwargs: Any) -> Any:
            if new_task is not None:
                self.change_task(new_task)
            kwargs["options"] = {"task": self._tasks[int(self.task)]}
            return super().reset(new_task=self.task, **kwargs)

        def _task_completion(self, obs: Any, rew: Any, term: Any, trunc: Any, info: Any) -> float:
            return float(info["is_success"])

    class EpisodeLearningProgress(syl.LP):
        """``OnlineLearningProgress`` that counts every episode's completion (see point 1)."""

        def update_on_episode(
            self, episode_return: float, length: int, task: Any, progress: Any, env_id: Any = None
        ) -> None:
            self.update_task_progress(task, progress, env_id=env_id)
            super().update_on_episode(episode_return, length, task, progress, env_id=env_id)

    _CLASSES.update(
        HazardGridTasks=HazardGridTasks, EpisodeLearningProgress=EpisodeLearningProgress
    )
    return _CLASSES


class PLRUpdate(BaseCallback):
    """The SB3 callback of Syllabus's PLR documentation: one ``update`` per vector step."""

    def __init__(self, curriculum: Any) -> None:
        super().__init__()
        self.curriculum = curriculum

    def _on_step(self) -> bool:
        import torch

        obs = torch.as_tensor(self.locals["new_obs"], dtype=torch.float32, device=self.model.device)
        policy: Any = self.model.policy
        with torch.no_grad():
            next_value = policy.predict_values(obs)
        self.curriculum.update(
            {
                "value": self.locals["values"],
                "next_value": next_value,
                "rew": self.locals["rewards"],
                "dones": self.locals["dones"],
                "tasks": [info["task"] for info in self.locals["infos"]],
            }
        )
        return True


class _Drain(BaseCallback):
    """Processes the queued updates after every vector step.

    The env sync wrapper queues an update per step (and per episode), and every task fetch a
    timing. In a simple queue's pipe nothing may pile up: a writer that fills it blocks in
    its own thread, the one that would drain it. Draining each step keeps the same updates in
    the same order.
    """

    def __init__(self, process: Any) -> None:
        super().__init__()
        self.process = process

    def _on_step(self) -> bool:
        self.process()
        return True


class SyllabusRun:
    """One run's Syllabus curriculum, its sync layer and the wrapper of each sub-env."""

    def __init__(
        self,
        kind: str,
        tasks: Sequence[dict[str, Any]],
        *,
        n_envs: int,
        n_steps: int,
        gamma: float,
        gae_lambda: float,
    ) -> None:
        syl = load_syllabus()
        if syl is None:
            raise RuntimeError(
                "Syllabus is not installed: pip install syllabus-rl==0.7 (`make bench` does)"
            )
        if kind not in KINDS:
            raise ValueError(f"unknown Syllabus curriculum {kind!r}; expected one of {KINDS}")
        self.syl, self.kind, self.tasks = syl, kind, list(tasks)
        space = syl.task_space.DiscreteTaskSpace(len(tasks))
        if kind == "lp":
            self.kwargs: dict[str, Any] = {"update_interval_steps": 25 * n_steps * n_envs}
            self.curriculum = _classes(syl)["EpisodeLearningProgress"](space, **self.kwargs)
        else:
            self.kwargs = {
                "num_steps": n_steps,
                "num_processes": n_envs,
                "gamma": gamma,
                "gae_lambda": gae_lambda,
                "task_sampler_kwargs_dict": {"replay_schedule": "fixed"},
            }
            cls = syl.curricula.CentralPrioritizedLevelReplay
            self.curriculum = cls(space, **self.kwargs)
        self.sync = syl.core.make_multiprocessing_curriculum(
            self.curriculum, start=False, use_simple_queues=True
        )
        components = self.sync.components
        take = components.get_task

        def take_after_updates() -> Any:
            self._process_updates()
            return take()

        components.get_task = take_after_updates

    def _process_updates(self) -> None:
        """What Syllabus's sync thread does with each queued update, for all queued now.

        Also empties the queue of task-fetch timings that every ``get_task`` fills and only
        ``get_metrics`` reads (which fails on simple queues in 0.7: ``SimpleQueue.get`` takes
        no ``block``). Left alone, that pipe fills after a few thousand resets and the next
        ``get_task`` blocks for good: the 1 M-step runs on 315 tasks hung there.
        """
        components = self.sync.components
        timings = components._task_time_queue  # Syllabus 0.7 internal, see above
        while not timings.empty():
            timings.get()
        while not components.update_queue.empty():
            update = components.get_update()
            if isinstance(update, list):
                update = update[0]
            if update.get("request_sample"):
                for task in self.sync.sample(k=1):
                    components.put_task({"next_task": task})
            self.sync.route_update(update)

    def wrap(self, env: Any) -> Any:
        """Syllabus's task wrapper and env sync wrapper around one sub-env."""
        tasks = _classes(self.syl)["HazardGridTasks"](env, self.tasks)
        return self.syl.core.GymnasiumSyncWrapper(tasks, self.sync.task_space, self.sync.components)

    def callbacks(self) -> list[BaseCallback]:
        """Drain the update queue after every vector step, then PLR's own update."""
        drain = _Drain(self._process_updates)
        return [drain, PLRUpdate(self.curriculum)] if self.kind == "plr" else [drain]

    def distribution(self) -> np.ndarray:
        """The probability of each task at the next sample."""
        cur, n = self.curriculum, len(self.tasks)
        if self.kind == "lp":
            if cur.task_rates is None:  # nothing sampled yet: it would initialise itself
                return np.full(n, 1.0 / n)
            return np.asarray(cur._sample_distribution(), dtype=float)
        sampler = cur._task_sampler
        if sampler._proportion_filled < sampler.rho:  # unseen tasks first, uniformly
            unseen = sampler.unseen_task_weights
            return np.asarray(unseen / unseen.sum(), dtype=float)
        return np.asarray(sampler.sample_weights(), dtype=float)

    def seen(self) -> np.ndarray | None:
        """PLR: the tasks it has scored; LP: None (it has no such notion)."""
        if self.kind == "lp":
            return None
        return np.asarray(self.curriculum._task_sampler.unseen_task_weights == 0)

    def describe(self) -> dict[str, Any]:
        return {
            "versions": {"syllabus-rl": self.syl.version},
            "curriculum": CURRICULA[self.kind],
            "kwargs": self.kwargs,
            "wrappers": ["HazardGridTasks(TaskWrapper)", "GymnasiumSyncWrapper"],
            "sync": "make_multiprocessing_curriculum(start=False, use_simple_queues=True); "
            "queued updates processed in the env's thread before each task is taken",
        }

    def close(self) -> None:
        self.sync.components.close()
