"""A trivial task-taking env for the curriculum overhead benchmark, importable by name.

``AsyncVectorEnv`` workers started with ``spawn`` or ``forkserver`` unpickle their env factory
and so import the module that defines the env: it must live in a module of its own (not in
the benchmark's ``__main__``). Nothing here imports Syllabus; its wrappers are referenced only
by the factories that the benchmark builds when Syllabus is installed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["ENV_ID", "NewTaskToOptions", "TrivialTaskEnv", "register", "success"]

ENV_ID = "gymcurric-bench/TrivialTask-v0"


class TrivialTaskEnv(gym.Env[np.ndarray, np.int64]):
    """Fixed-length episodes that do nothing: the cheapest env a vector env can step.

    ``reset(options={"task": task})`` stores the task; every step returns a zero observation.
    The last step of an episode (terminated after ``episode_length`` steps) reports
    ``info["is_success"]`` (a coin flip from the env's own generator) and a reward of 1.0 for a
    success, so that a curriculum wrapper has an outcome to report.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, episode_length: int = 10) -> None:
        self.episode_length = episode_length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.task: Any = None
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and "task" in options:
            self.task = options["task"]
        self._t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        obs = np.zeros(1, dtype=np.float32)  # new data every call, as Gymnasium asks
        if self._t < self.episode_length:
            return obs, 0.0, False, False, {}
        success = bool(self.np_random.random() < 0.5)
        return obs, float(success), True, False, {"is_success": success}


def success(info: dict[str, Any]) -> Any:
    """The wrapper's default success rule as a ``success_fn`` (a picklable module function)."""
    return info.get("is_success", info.get("success"))


class NewTaskToOptions(gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64]):
    """Adapter for Syllabus: its sync wrapper calls ``reset(new_task=...)``.

    Passes the task on as ``options={"task": ...}`` and copies the last step's
    ``info["is_success"]`` into ``info["task_completion"]``, where Syllabus's sync wrapper reads
    an episode's progress. It stands in for a Syllabus ``TaskWrapper`` subclass, and does less
    work than one (no extra info keys on every step).
    """

    def reset(  # type: ignore[override]
        self,
        *,
        new_task: Any = None,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        return self.env.reset(seed=seed, options={**(options or {}), "task": new_task})

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "is_success" in info:
            info["task_completion"] = float(info["is_success"])
        return obs, reward, terminated, truncated, info


def register() -> str:
    """Register :data:`ENV_ID` (idempotent) and return it."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=TrivialTaskEnv, kwargs={"episode_length": 10})
    return ENV_ID
