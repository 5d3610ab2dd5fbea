"""Stub envs and helpers for the curriculum wrapper tests (importable by spawned workers)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from gymcurric.errors import TaskError
from gymcurric.tasks import FixedTaskSpace

#: Every task a TaskStubEnv has been reset with, in this process: (env name, task).
RESETS: list[tuple[str, dict[str, Any]]] = []


class TaskStubEnv(gym.Env[np.ndarray, int]):
    """Takes ``reset(options={"task": {"level": L, ...}})``; episodes last ``task["len"]`` steps.

    reward = ``level`` every step (so the return is ``level * len`` and each reward tells which
    task produced it), ``info["cost"] = 0.5``, ``info["is_success"] = level % 2 == 0`` on the
    last step (under ``success_key``; with ``is_success_none`` also ``info["is_success"] =
    None``, SB3's "not reported"). ``{"reject": True}`` raises :class:`TaskError`,
    ``{"nan": True}`` gives NaN rewards, ``{"nan_cost": True}`` NaN costs, ``{"cost": c}`` the
    cost ``c`` as given. With ``fixed_task`` (factory mode) the env ignores options and runs
    that task.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        name: str = "env",
        fixed_task: dict[str, Any] | None = None,
        obs_dim: int = 1,
        reset_info: dict[str, Any] | None = None,
        success_key: str = "is_success",
        cost: bool = True,
        is_success_none: bool = False,
    ) -> None:
        if fixed_task is not None and fixed_task.get("reject"):
            raise TaskError("reject", True, "this stub refuses the task", source="TaskStubEnv")
        self.observation_space = gym.spaces.Box(-1e6, 1e6, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.name, self.fixed_task = name, fixed_task
        self.reset_info = reset_info or {}
        self.success_key, self.cost = success_key, cost
        self.is_success_none = is_success_none
        self.task: dict[str, Any] = {"level": 0}
        self.t = 0
        self.closed = False
        self.seeds: list[int | None] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.seeds.append(seed)
        task = self.fixed_task
        if task is None:
            task = (options or {}).get("task") or self.task
            if task.get("reject"):
                raise TaskError("reject", True, "this stub refuses the task", source="TaskStubEnv")
        self.task, self.t = dict(task), 0
        RESETS.append((self.name, dict(task)))
        return np.zeros(1, np.float32), dict(self.reset_info)

    def step(self, action: int):
        self.t += 1
        level = float(self.task.get("level", 0))
        reward = float("nan") if self.task.get("nan") else level
        done = self.t >= int(self.task.get("len", 3))
        info: dict[str, Any] = {}
        if self.cost:
            cost = self.task.get("cost", 0.5)  # {"cost": 0} reports an int
            info["cost"] = float("nan") if self.task.get("nan_cost") else cost
        if done:
            if self.is_success_none:
                info["is_success"] = None
            info[self.success_key] = int(self.task.get("level", 0)) % 2 == 0
        return np.full(1, self.t, np.float32), reward, done, False, info

    def close(self) -> None:
        self.closed = True


def levels(n: int, length: int = 3) -> FixedTaskSpace:
    return FixedTaskSpace([{"level": i, "len": length} for i in range(n)])


def make_wrapped(curriculum: Any, name: str = "env", **wrapper_kwargs: Any) -> gym.Env:
    from gymcurric.wrappers import SampleCurriculumTask

    return SampleCurriculumTask(TaskStubEnv(name), curriculum, **wrapper_kwargs)


def make_stub(name: str = "env") -> gym.Env:
    return TaskStubEnv(name)
