"""The task side of ``curriculum_infeasible.py``: its env, task families and spaces, and policies.

The families, spaces and held-out set are the ones that script's docstring describes. Here: the
env settings (:data:`ENV_ID`, :data:`ENV_KWARGS`), the families (:func:`family_tasks`,
:func:`family_of`), each space's tasks in their fixed order (:func:`study_space`), the greedy
oracle and random policies with :func:`play` and :func:`ceilings` (``--ceilings``), the held-out
evaluation (:func:`evaluate`) and the env that tags each episode with its family
(:func:`tag_family`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BASE",
    "ENV_ID",
    "ENV_KWARGS",
    "EVAL_SEED",
    "FAMILIES",
    "FEASIBLE",
    "HELD_OUT",
    "LIMIT",
    "PERMUTATION_SEED",
    "SLIPS",
    "SPACES",
    "THRESHOLD",
    "StudySpace",
    "_task",
    "ceilings",
    "evaluate",
    "family_of",
    "family_sums",
    "family_tasks",
    "greedy_action",
    "play",
    "random_action",
    "study_space",
    "tag_family",
]

ENV_ID = "gymcurric/HazardGrid-v0"
# sparse reward: only reaching the goal pays, so a far goal is rarely found by chance
ENV_KWARGS = {"reward_distance": 0.0, "reward_goal": 1.0}
BASE = {"size": 20, "num_hazards": 0}
LIMIT = 120  # max_steps of every feasible and uncontrollable task
SLIPS = (0.0, 0.3)
FAMILIES = ("trivial", "frontier", "hard", "uncontrollable", "unreachable")
FEASIBLE = FAMILIES[:3]
SPACES = ("primary", "mostly", "feasible")
HELD_OUT = tuple(
    {**BASE, "goal_distance": d, "slip_prob": 0.0, "max_steps": LIMIT} for d in (27, 29, 31, 33, 35)
)
THRESHOLD = 0.8
PERMUTATION_SEED = 2026  # the one task order of each space
EVAL_SEED = 10_000  # held-out episode k of task i: seed EVAL_SEED + 100 * i + k


# ----------------------------------------------------------------------------- task spaces


def _task(d: int, slip: float, limit: int) -> dict[str, Any]:
    return {**BASE, "goal_distance": d, "slip_prob": slip, "max_steps": limit}


def family_tasks(space: str) -> dict[str, list[dict[str, Any]]]:
    """The tasks of each family of ``space``, in family order (see the module docstring)."""
    if space not in SPACES:
        raise ValueError(f"unknown space {space!r}; expected one of {SPACES}")
    out = {
        "trivial": [_task(d, s, LIMIT) for d in (2, 4) for s in SLIPS],
        "frontier": [_task(d, s, LIMIT) for d in range(6, 25, 2) for s in SLIPS],
        "hard": [_task(d, s, LIMIT) for d in range(26, 37, 2) for s in SLIPS],
    }
    if space == "feasible":
        return out
    limits = (LIMIT, 100, 110) if space == "mostly" else (LIMIT,)
    out["uncontrollable"] = [_task(d, 1.0, t) for t in limits for d in range(15, 39)]
    if space == "mostly":
        out["unreachable"] = [_task(d, 0.0, d - k) for d in range(16, 39) for k in range(1, 10)]
    else:
        out["unreachable"] = [_task(d, 0.0, d - k) for d in range(16, 39, 2) for k in (1, 4, 8, 12)]
    return out


def family_of(task: dict[str, Any]) -> str:
    """The family a task belongs to, read from its parameters alone."""
    if task["slip_prob"] >= 1.0:
        return "uncontrollable"
    if task["max_steps"] < task["goal_distance"]:
        return "unreachable"
    d = task["goal_distance"]
    return "trivial" if d <= 4 else "frontier" if d <= 24 else "hard"


class StudySpace(NamedTuple):
    """One space's tasks in their fixed random order, and the family of each task id."""

    name: str
    tasks: tuple[dict[str, Any], ...]
    families: tuple[str, ...]

    @property
    def infeasible_share(self) -> float:
        return sum(f not in FEASIBLE for f in self.families) / len(self.families)

    def family_array(self) -> np.ndarray:
        return np.array(self.families)

    def fixed(self) -> Any:
        from gymcurric.tasks import FixedTaskSpace

        return FixedTaskSpace(list(self.tasks))


@functools.cache
def study_space(name: str) -> StudySpace:
    """``name``'s tasks, permuted with ``PERMUTATION_SEED`` (ids carry no hint of the family)."""
    by_family = family_tasks(name)
    tasks = [t for f in FAMILIES for t in by_family.get(f, [])]
    order = np.random.default_rng(PERMUTATION_SEED).permutation(len(tasks))
    tasks = [tasks[i] for i in order]
    return StudySpace(name, tuple(tasks), tuple(family_of(t) for t in tasks))


def family_sums(families: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """``values`` summed per family (every family listed, 0 where none)."""
    return {f: float(values[families == f].sum()) for f in FAMILIES}


# ----------------------------------------------------------------------------- policies


def greedy_action(obs: np.ndarray, rng: np.random.Generator) -> int:
    """The oracle: one step straight towards the goal (rows first), from the observation."""
    dr, dc = obs[2], obs[3]  # (goal - agent) / (size - 1)
    if dr != 0:
        return 2 if dr > 0 else 0
    return 1 if dc > 0 else 3


def random_action(obs: np.ndarray, rng: np.random.Generator) -> int:
    return int(rng.integers(4))


def play(
    tasks: Sequence[dict[str, Any]],
    policy: Callable[[np.ndarray, np.random.Generator], int],
    episodes: int,
    seed: int = 0,
) -> np.ndarray:
    """Success rate of ``policy`` on each task over ``episodes`` fixed-seed episodes."""
    from gymcurric.envs.grid import HazardGridEnv

    env = HazardGridEnv(**ENV_KWARGS)
    rng = np.random.default_rng(seed)
    out = np.zeros(len(tasks))
    for i, task in enumerate(tasks):
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + 1000 * i + ep, options={"task": task})
            done = False
            while not done:
                obs, _, term, trunc, info = env.step(policy(obs, rng))
                done = term or trunc
            out[i] += info["is_success"]
    return out / episodes


def ceilings(space: str, episodes: int) -> dict[str, dict[str, float]]:
    """Greedy and random success per family of ``space`` (and the number of tasks)."""
    out = {}
    for fam, tasks in family_tasks(space).items():
        out[fam] = {
            "tasks": len(tasks),
            "greedy": float(play(tasks, greedy_action, episodes).mean()),
            "random": float(play(tasks, random_action, episodes).mean()),
        }
    return out


# ----------------------------------------------------------------------------- evaluation


def evaluate(model: Any, episodes: int) -> dict[str, Any]:
    """Held-out success: the deterministic policy, ``episodes`` fixed-seed episodes per task.

    The episodes run side by side and the policy sees all of them in one batch each step (the
    finished ones keep their last observation), so every evaluation asks the same batch shape.
    """
    from gymcurric.envs.grid import HazardGridEnv

    envs, obs = [], []
    for i, task in enumerate(HELD_OUT):
        for ep in range(episodes):
            env = HazardGridEnv(**ENV_KWARGS)
            o, _ = env.reset(seed=EVAL_SEED + 100 * i + ep, options={"task": task})
            envs.append(env)
            obs.append(o)
    batch = np.stack(obs)
    running = np.ones(len(envs), dtype=bool)
    success = np.zeros(len(envs))
    while running.any():
        actions, _ = model.predict(batch, deterministic=True)
        for j in np.flatnonzero(running):
            batch[j], _, term, trunc, info = envs[j].step(int(actions[j]))
            if term or trunc:
                running[j] = False
                success[j] = float(info["is_success"])
    per_task = success.reshape(len(HELD_OUT), episodes).mean(axis=1)
    return {"success": float(success.mean()), "per_task": [float(x) for x in per_task]}


def tag_family(**env_kwargs: Any) -> Any:
    """The base env, with each episode's family written into the info of its last step."""
    import gymnasium as gym

    import gymcurric  # noqa: F401  (registers the env)

    class TagFamily(gym.Wrapper):
        def step(self, action: Any) -> Any:
            obs, reward, term, trunc, info = self.env.step(action)
            if term or trunc:  # the base env still holds this episode's task
                base: Any = self.env.unwrapped
                info["episode_family"] = family_of(base.task)
            return obs, reward, term, trunc, info

    return TagFamily(gym.make(ENV_ID, **env_kwargs))
