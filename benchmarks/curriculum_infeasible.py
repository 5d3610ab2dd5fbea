"""Does a curriculum beat uniform sampling where it should? Infeasible-heavy task spaces (issue 23).

The study of ``../shared/notes/curriculum-efficacy.md`` (sections 2 and 4), for RL: the built-in
``gymcurric/HazardGrid-v0`` at 20x20, a sparse reward (1 for reaching the goal, nothing for
getting closer), no hazards, and the built-in task keys only (``goal_distance``, ``slip_prob``,
``max_steps``). Nothing in the observation tells a feasible task from an infeasible one.

Task families (:func:`family_tasks`; ``--ceilings`` plays each with a greedy oracle policy and a
random one):

================ ======= =============================================================== ==========
family           tasks   definition                                                      feasible
================ ======= =============================================================== ==========
trivial          4       d in {2, 4}, slip 0 / 0.3, T = 120                              yes
frontier         20      d = 6 ... 24 (even), slip 0 / 0.3, T = 120                      yes
hard             12      d = 26 ... 36 (even), slip 0 / 0.3, T = 120                     yes
uncontrollable   24 (72) d = 15 ... 38, slip 1 (every action random), T = 120            by chance
                         (``mostly``: also T = 100 and 110)
unreachable      48      d = 16, 18, ... 38, T = d - {1, 4, 8, 12}: the goal is farther  no
                 (207)   than the time limit (``mostly``: d = 16 ... 38, T = d - 1 ... 9)
================ ======= =============================================================== ==========

Spaces (``--spaces``): ``primary`` (108 tasks, 67 % infeasible), ``mostly`` (315 tasks, 89 %:
the headline) and ``feasible`` (the 36 feasible tasks: the control). Each space's tasks are put
in one fixed random order (seed ``PERMUTATION_SEED``, the same for every condition), so a task id
says nothing about its family.

Held-out evaluation: d = 27, 29, 31, 33, 35 (odd distances are never trained on), slip 0,
T = 120; the deterministic policy plays ``--eval-episodes`` (5) fixed-seed episodes of each (the
same episodes for every condition and seed) at the start and every ``--eval-every`` env steps
(10 k; 20 k for ``mostly``).

Agent: as in ``curriculum_efficacy.py``: SB3 PPO, 4 envs (``DummyVecEnv``), n_steps 256, batch
256, 5 epochs, lr 5e-4, ent_coef 0.01, one torch thread, on the CPU.

Conditions (``--conditions``; :data:`CONDITIONS` maps each name to a builder):

* ``uniform``: ``UniformScorer`` over the space;
* ``oracle``: uniform over the 36 feasible tasks only (the ``feasible`` space, whatever
  ``--spaces`` says): the room a curriculum has. In ``feasible`` it is ``uniform``;
* ``lp``: ``Curriculum(space, seed=seed)``, gymcurric's defaults *when the run starts* (the
  record keeps the config it got);
* ``lp_dual``: ``DualPool(explore_size=27, exploit_size=27)`` (18 and 18 in ``feasible``, whose
  36 tasks cannot fill 54 slots);
* ``learnability``: ``LearnabilityScorer()``, p (1 - p);
* ``plr``, ``robust_plr`` (only where ``gymcurric.tasks`` has ``PLRScorer``): ``PLRScorer()``
  fed by ``RegretScoreCallback``; ``RobustPLRScorer()`` with it and PPO's rollout buffer
  ``RegretRolloutBuffer`` (no gradient from episodes on tasks unseen when drawn);
* ``syllabus_lp``, ``syllabus_plr``: Syllabus's own ``OnlineLearningProgress`` and
  ``CentralPrioritizedLevelReplay`` on the same env and agent, through its task wrapper, its
  env sync wrapper and its curriculum sync wrapper (``_infeasible_syllabus.py`` says exactly how,
  and what had to change so that they run correctly). Needs ``syllabus-rl==0.7`` (``make
  bench``); left out of the default conditions when it is not installed.

By default every space runs every condition, but ``feasible`` only ``uniform`` and ``lp`` (its
oracle is its uniform). Adding a condition: a function ``(space, seed) -> Arm`` in
:data:`CONDITIONS`; an :class:`Arm` carries the sub-env wrapper, any SB3 callbacks and PPO
arguments, the diagnostics and the clean-up (``_plr`` is an example).

Metrics, per run: env steps until held-out success >= 80 % (``steps_to_threshold``; a run that
never gets there counts as its budget, and how many got there is shown); AUC, the mean held-out
success over the evaluations up to ``--auc-steps`` (300 k); the final success. Per evaluation
window (the episodes that ended since the last evaluation, counted in full): episodes, env
steps and successes per family, and, at the evaluation, the curriculum's probability mass per
family and its warm tasks per family (tasks with at least the scorer's ``min_samples``
episodes; PLR, gymcurric's or Syllabus's: tasks with a score; uniform and Syllabus LP: none).

Budgets: ``primary`` 500 k, ``mostly`` 1 M, ``feasible`` 300 k env steps (``--steps``
overrides). With ``--stop-after-threshold`` (the default) a run stops once it has reached the
threshold *and* passed the AUC horizon; its record says where (``stopped_at``) and its final
success is the one measured there.

Records: one JSON file per (space, condition, seed) under ``--out``
(``reference/curriculum_infeasible/records/`` beside this script), written atomically when the
run ends, with the gymcurric commit (and whether ``gymcurric/`` had uncommitted changes), the
versions, the config, the curriculum's config, the evaluation history and the diagnostics. A run
whose record exists is skipped, so an interrupted study resumes. ``--summarise`` only reads the
records and prints the tables: per space and condition the steps to threshold (mean and 95 %
Student-t CI, reached k/n), the ratio to ``uniform`` and to ``oracle`` with a paired-by-seed
bootstrap 95 % CI (seed ``BOOTSTRAP_SEED``), the AUC, the final success and each family's share
of the env steps until the threshold; then every seed. Same seed and condition, same record
(apart from wall times and the commit).

    python benchmarks/curriculum_infeasible.py --ceilings
    python benchmarks/curriculum_infeasible.py --spaces mostly --conditions uniform lp \\
        --seeds 0 1 2 --workers 2
    python benchmarks/curriculum_infeasible.py --summarise --plot infeasible.png
    python benchmarks/curriculum_infeasible.py --quick --out /tmp/ci   # smoke run, seconds
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from _stats import ci95

ENV_ID = "gymcurric/HazardGrid-v0"
# sparse reward: only reaching the goal pays, so a far goal is rarely found by chance
ENV_KWARGS = {"reward_distance": 0.0, "reward_goal": 1.0}
BASE = {"size": 20, "num_hazards": 0}
LIMIT = 120  # max_steps of every feasible and uncontrollable task
SLIPS = (0.0, 0.3)
FAMILIES = ("trivial", "frontier", "hard", "uncontrollable", "unreachable")
FEASIBLE = FAMILIES[:3]
SPACES = ("primary", "mostly", "feasible")
BUDGET = {"primary": 500_000, "mostly": 1_000_000, "feasible": 300_000}
EVAL_EVERY = {"primary": 10_000, "mostly": 20_000, "feasible": 10_000}
HELD_OUT = tuple(
    {**BASE, "goal_distance": d, "slip_prob": 0.0, "max_steps": LIMIT} for d in (27, 29, 31, 33, 35)
)
THRESHOLD = 0.8
AUC_STEPS = 300_000
PERMUTATION_SEED = 2026  # the one task order of each space
EVAL_SEED = 10_000  # held-out episode k of task i: seed EVAL_SEED + 100 * i + k
BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES = 0, 10_000
N_ENVS = 4
PPO_KWARGS: dict[str, Any] = {
    "n_steps": 256,
    "batch_size": 256,
    "n_epochs": 5,
    "learning_rate": 5e-4,
    "ent_coef": 0.01,
}
GAMMA, GAE_LAMBDA = 0.99, 0.95  # SB3's PPO defaults (Syllabus's PLR needs them too)
RECORDS = Path(__file__).resolve().parent / "reference" / "curriculum_infeasible" / "records"


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


# ----------------------------------------------------------------------------- conditions


class Arm(NamedTuple):
    """What one condition puts around the env and the agent for one run."""

    #: wraps each sub-env (below it: the base env, the family tag and SB3's ``Monitor``)
    wrap: Callable[[Any], Any]
    #: probability mass per family now (None: not known)
    mass: Callable[[], dict[str, float] | None]
    #: warm tasks per family now (None: not defined for this condition)
    warm: Callable[[], dict[str, float] | None]
    #: describes the curriculum for the record (its config, versions, ...)
    info: dict[str, Any]
    close: Callable[[], None]
    #: SB3 callbacks the condition needs (run before the study's own)
    callbacks: tuple[Any, ...] = ()
    #: PPO keyword arguments the condition needs besides the study's (e.g. a rollout buffer)
    agent: dict[str, Any] = {}  # a shared default: never mutated


def _gymcurric(
    space: StudySpace,
    seed: int,
    callbacks: Callable[[Any], tuple[Any, ...]] = lambda cur: (),
    agent: dict[str, Any] | None = None,
    **config: Any,
) -> Arm:
    """gymcurric's ``Curriculum`` over ``space`` with ``config``, via ``SampleCurriculumTask``.

    ``callbacks(curriculum)`` makes the SB3 callbacks that feed it, if any; ``agent`` adds PPO
    keyword arguments.
    """
    from gymcurric.tasks import Curriculum
    from gymcurric.wrappers import SampleCurriculumTask

    cur = Curriculum(space.fixed(), seed=seed, **config)
    families = space.family_array()

    def mass() -> dict[str, float]:
        keys, probs = cur.probabilities()
        return family_sums(families[keys], probs)

    def warm() -> dict[str, float] | None:
        st, scorer = cur.state, cur.config.scorer
        if getattr(scorer, "uses_scores", False):  # PLR: the tasks with a regret score
            warm = st.scored > 0
        elif hasattr(scorer, "min_samples"):
            warm = st.count >= scorer.min_samples
        else:  # no warm-up (uniform)
            return None
        ids = st.task_id[(st.pool >= 0) & warm]
        return family_sums(families[ids], np.ones(len(ids)))

    agent = agent or {}
    info = {"library": "gymcurric", "tasks": len(space.tasks), "config": cur.config.to_dict()}
    if agent:
        info["agent"] = {k: getattr(v, "__name__", v) for k, v in agent.items()}
    return Arm(
        wrap=functools.partial(SampleCurriculumTask, curriculum=cur),
        mass=mass,
        warm=warm,
        info=info,
        close=cur.close,
        callbacks=callbacks(cur),
        agent=agent,
    )


def _syllabus(kind: str) -> Callable[[StudySpace, int], Arm]:
    def build(space: StudySpace, seed: int) -> Arm:
        from _infeasible_syllabus import SyllabusRun  # imports Syllabus

        run = SyllabusRun(
            kind,
            space.tasks,
            n_envs=N_ENVS,
            n_steps=PPO_KWARGS["n_steps"],
            gamma=GAMMA,
            gae_lambda=GAE_LAMBDA,
        )
        families = space.family_array()

        def warm() -> dict[str, float] | None:
            seen = run.seen()
            return None if seen is None else family_sums(families, seen.astype(float))

        return Arm(
            wrap=run.wrap,
            mass=lambda: family_sums(families, run.distribution()),
            warm=warm,
            info={"library": "syllabus", "tasks": len(space.tasks), **run.describe()},
            close=run.close,
            callbacks=tuple(run.callbacks()),
        )

    return build


def _uniform(space: StudySpace, seed: int) -> Arm:
    from gymcurric.tasks import UniformScorer

    return _gymcurric(space, seed, scorer=UniformScorer())


def _oracle(space: StudySpace, seed: int) -> Arm:
    return _uniform(study_space("feasible"), seed)


def _lp(space: StudySpace, seed: int) -> Arm:
    return _gymcurric(space, seed)  # the library's defaults, whatever they are now


def _lp_dual(space: StudySpace, seed: int) -> Arm:
    from gymcurric.tasks import DualPool

    size = min(27, len(space.tasks) // 2)
    return _gymcurric(space, seed, pool=DualPool(explore_size=size, exploit_size=size))


def _learnability(space: StudySpace, seed: int) -> Arm:
    from gymcurric.tasks import LearnabilityScorer

    return _gymcurric(space, seed, scorer=LearnabilityScorer())


def _plr(space: StudySpace, seed: int) -> Arm:
    from gymcurric.integrations.sb3 import RegretScoreCallback
    from gymcurric.tasks import PLRScorer

    return _gymcurric(
        space, seed, scorer=PLRScorer(), callbacks=lambda cur: (RegretScoreCallback(cur),)
    )


def _robust_plr(space: StudySpace, seed: int) -> Arm:
    from gymcurric.integrations.sb3 import RegretRolloutBuffer, RegretScoreCallback
    from gymcurric.tasks import RobustPLRScorer

    return _gymcurric(
        space,
        seed,
        scorer=RobustPLRScorer(),
        callbacks=lambda cur: (RegretScoreCallback(cur),),
        agent={"rollout_buffer_class": RegretRolloutBuffer},
    )


CONDITIONS: dict[str, Callable[[StudySpace, int], Arm]] = {
    "uniform": _uniform,
    "oracle": _oracle,
    "lp": _lp,
    "lp_dual": _lp_dual,
    "learnability": _learnability,
    "syllabus_lp": _syllabus("lp"),
    "syllabus_plr": _syllabus("plr"),
}
if hasattr(importlib.import_module("gymcurric.tasks"), "PLRScorer"):  # PLR has landed
    CONDITIONS.update(plr=_plr, robust_plr=_robust_plr)
SYLLABUS_CONDITIONS = ("syllabus_lp", "syllabus_plr")
FEASIBLE_CONDITIONS = ("uniform", "lp")  # the control's default (oracle is uniform there)


def syllabus_installed() -> bool:
    return importlib.util.find_spec("syllabus") is not None


# ----------------------------------------------------------------------------- one run


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


def _tag_family(**env_kwargs: Any) -> Any:
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


def git_state() -> dict[str, Any]:
    """The gymcurric checkout's commit, and whether ``gymcurric/`` differs from it."""
    import gymcurric

    root = Path(gymcurric.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "gymcurric"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "gymcurric_modified": None}
    return {"commit": commit, "gymcurric_modified": bool(changed)}


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("gymcurric", "stable-baselines3", "torch", "gymnasium", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


class RunSpec(NamedTuple):
    """One run's settings (everything a worker process needs)."""

    space: str
    condition: str
    seed: int
    budget: int
    eval_every: int
    eval_episodes: int
    auc_steps: int
    stop_after_threshold: bool
    out: str

    @property
    def path(self) -> Path:
        return record_path(Path(self.out), self.space, self.condition, self.seed)


def record_path(out: Path, space: str, condition: str, seed: int) -> Path:
    return out / f"{space}-{condition}-seed{seed}.json"


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train one (space, condition, seed), write its record atomically, and return it."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    started, wall = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.perf_counter()
    git = git_state()
    space = study_space(spec.space)
    arm = CONDITIONS[spec.condition](space, spec.seed)
    history: list[dict[str, Any]] = []
    state: dict[str, Any] = {"reached": None, "stopped_at": None, "episodes": 0}

    class Study(BaseCallback):
        """Counts episodes per family; evaluates on the held-out set; stops when done."""

        def __init__(self) -> None:
            super().__init__()
            self.next = 0
            self.window = self._empty()

        @staticmethod
        def _empty() -> dict[str, dict[str, float]]:
            return {k: dict.fromkeys(FAMILIES, 0.0) for k in ("episodes", "env_steps", "successes")}

        def evaluate_now(self) -> None:
            steps = int(self.num_timesteps)
            entry = {"steps": steps, **evaluate(self.model, spec.eval_episodes)}
            entry.update(window=self.window, mass=arm.mass(), warm=arm.warm())
            history.append(entry)
            self.window = self._empty()
            if state["reached"] is None and entry["success"] >= THRESHOLD:
                state["reached"] = steps

        def _on_training_start(self) -> None:
            self.evaluate_now()
            self.next = spec.eval_every

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                fam = info.get("episode_family")
                if fam is not None:
                    self.window["episodes"][fam] += 1
                    self.window["env_steps"][fam] += info["episode"]["l"]
                    self.window["successes"][fam] += float(info["is_success"])
                    state["episodes"] += 1
            if self.num_timesteps < self.next:
                return True
            self.evaluate_now()
            self.next += spec.eval_every
            done = state["reached"] is not None and self.num_timesteps >= spec.auc_steps
            if done and spec.stop_after_threshold:
                state["stopped_at"] = int(self.num_timesteps)
                return False
            return True

    try:
        venv = make_vec_env(
            _tag_family,
            n_envs=N_ENVS,
            seed=spec.seed,
            env_kwargs=ENV_KWARGS,
            wrapper_class=arm.wrap,
        )
        model = PPO(
            "MlpPolicy",
            venv,
            gamma=GAMMA,
            gae_lambda=GAE_LAMBDA,
            seed=spec.seed,
            device="cpu",
            verbose=0,
            **PPO_KWARGS,
            **arm.agent,
        )
        study = Study()
        model.learn(spec.budget, callback=CallbackList([*arm.callbacks, study]))
        if state["stopped_at"] is None and history[-1]["steps"] < model.num_timesteps:
            study.evaluate_now()  # the end of the budget
        venv.close()
    finally:
        arm.close()
    horizon = [h["success"] for h in history if h["steps"] <= spec.auc_steps]
    record = {
        "space": spec.space,
        "condition": spec.condition,
        "seed": spec.seed,
        **git,
        "versions": {**versions(), **arm.info.pop("versions", {})},
        "config": {
            "budget": spec.budget,
            "eval_every": spec.eval_every,
            "eval_episodes": spec.eval_episodes,
            "auc_steps": spec.auc_steps,
            "threshold": THRESHOLD,
            "stop_after_threshold": spec.stop_after_threshold,
            "tasks": len(space.tasks),
            "infeasible_share": space.infeasible_share,
            "permutation_seed": PERMUTATION_SEED,
            "held_out": list(HELD_OUT),
            "env": {"id": ENV_ID, **ENV_KWARGS},
            "ppo": {**PPO_KWARGS, "n_envs": N_ENVS, "gamma": GAMMA, "gae_lambda": GAE_LAMBDA},
        },
        "curriculum": arm.info,
        "steps_to_threshold": state["reached"],
        "auc": float(np.mean(horizon)),
        "auc_complete": history[-1]["steps"] >= spec.auc_steps,
        "final_success": history[-1]["success"],
        "trained_steps": int(model.num_timesteps),
        "stopped_at": state["stopped_at"],
        "train_episodes": state["episodes"],
        "started": started,
        "seconds": time.perf_counter() - wall,
        "history": history,
    }
    write_atomic(spec.path, record)
    return record


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- summary


def load_records(out: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(out.glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
    return records


def _to_threshold(r: dict[str, Any]) -> float:
    """Steps to threshold, the budget when never reached."""
    s = r["steps_to_threshold"]
    return float(s if s is not None else r["config"]["budget"])


def step_shares(r: dict[str, Any]) -> dict[str, float]:
    """Each family's share of the env steps until the threshold (the whole run if never)."""
    end = r["steps_to_threshold"]
    total = dict.fromkeys(FAMILIES, 0.0)
    for h in r["history"]:
        if end is not None and h["steps"] > end:
            break
        for f in FAMILIES:
            total[f] += h["window"]["env_steps"][f]
    n = sum(total.values())
    return {f: total[f] / n if n else 0.0 for f in FAMILIES}


def paired_ratio(
    x: dict[int, float], y: dict[int, float]
) -> tuple[float, float, float, int] | None:
    """mean(x) / mean(y) over the seeds both have, with a paired bootstrap 95 % CI."""
    seeds = sorted(set(x) & set(y))
    if not seeds:
        return None
    a, b = np.array([x[s] for s in seeds]), np.array([y[s] for s in seeds])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(seeds), (BOOTSTRAP_RESAMPLES, len(seeds)))
    ratios = a[idx].mean(axis=1) / b[idx].mean(axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(a.mean() / b.mean()), float(lo), float(hi), len(seeds)


def _k(x: float) -> str:
    return f"{x / 1000:,.0f} k"


def _order(conditions: set[str]) -> list[str]:
    known = [c for c in CONDITIONS if c in conditions]
    return known + sorted(conditions - set(known))


def summarise(records: list[dict[str, Any]]) -> str:
    """The tables: per space and condition, then per seed."""
    lines: list[str] = []
    for space in [s for s in SPACES if any(r["space"] == s for r in records)]:
        rs = [r for r in records if r["space"] == space]
        by_cond = {
            c: [r for r in rs if r["condition"] == c] for c in _order({r["condition"] for r in rs})
        }
        to = {c: {r["seed"]: _to_threshold(r) for r in v} for c, v in by_cond.items()}
        first = rs[0]["config"]
        lines += [
            f"### {space}: {first['tasks']} tasks, {first['infeasible_share']:.0%} infeasible; "
            f"threshold {first['threshold']:.0%} held-out success, AUC up to "
            f"{_k(first['auc_steps'])}",
            "",
            "| condition | runs | reached | steps to threshold (budget if never) | x uniform "
            "| x oracle | AUC | final success | step share tri / fro / hard / unc / unr |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for cond, group in by_cond.items():
            m, h = ci95(list(to[cond].values()))
            ratios = []
            for ref in ("uniform", "oracle"):
                pr = paired_ratio(to[cond], to[ref]) if ref in to and ref != cond else None
                ratios.append("—" if pr is None else f"{pr[0]:.2f} [{pr[1]:.2f}, {pr[2]:.2f}]")
            am, ah = ci95([r["auc"] for r in group])
            fm, fh = ci95([r["final_success"] for r in group])
            shares = [step_shares(r) for r in group]
            share = " / ".join(f"{np.mean([s[f] for s in shares]):.0%}" for f in FAMILIES)
            reached = sum(r["steps_to_threshold"] is not None for r in group)
            lines.append(
                f"| {cond} | {len(group)} | {reached}/{len(group)} | {_k(m)} ± {_k(h)} | "
                f"{ratios[0]} | {ratios[1]} | {am:.2f} ± {ah:.2f} | {fm:.2f} ± {fh:.2f} | "
                f"{share} |"
            )
        lines += ["", f"Per seed ({space}): steps to threshold (never: -), AUC", ""]
        conds = list(by_cond)
        lines += [f"| seed | {' | '.join(conds)} |", "|---" * (len(conds) + 1) + "|"]
        for seed in sorted({r["seed"] for r in rs}):
            cells = []
            for cond in conds:
                r = next((r for r in by_cond[cond] if r["seed"] == seed), None)
                if r is None:
                    cells.append("")
                    continue
                s = r["steps_to_threshold"]
                cells.append(f"{'-' if s is None else _k(s)}, {r['auc']:.2f}")
            lines.append(f"| {seed} | {' | '.join(cells)} |")
        lines += ["", *_provenance(by_cond), ""]
    return "\n".join(lines) if lines else "no records"


def _provenance(by_cond: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Commits and curriculum configs behind each condition (several: the defaults moved)."""
    out = ["Provenance (+: gymcurric/ had uncommitted changes):"]
    for cond, group in by_cond.items():
        commits = sorted(
            {(r["commit"] or "?")[:9] + ("+" if r["gymcurric_modified"] else "") for r in group}
        )
        configs = set()
        for r in group:
            config = dict(r["curriculum"].get("config") or r["curriculum"].get("kwargs") or {})
            config.pop("seed", None)
            configs.add(json.dumps(config, sort_keys=True))
        note = f"{cond}: gymcurric {', '.join(commits)}"
        if len(configs) > 1:
            note += f"; WARNING: {len(configs)} different curriculum configs across seeds"
        out.append(f"- {note}")
    return out


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Held-out success against env steps, mean over seeds, one panel per space.

    A run that stopped early holds its last value from there on.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spaces = [s for s in SPACES if any(r["space"] == s for r in records)]
    fig, axes = plt.subplots(1, len(spaces), figsize=(6 * len(spaces), 4.2), squeeze=False)
    for ax, space in zip(axes[0], spaces, strict=True):
        rs = [r for r in records if r["space"] == space]
        for cond in _order({r["condition"] for r in rs}):
            group = [r for r in rs if r["condition"] == cond]
            grid = np.unique(np.concatenate([[h["steps"] for h in r["history"]] for r in group]))
            ys = []
            for r in group:
                steps = np.array([h["steps"] for h in r["history"]])
                vals = np.array([h["success"] for h in r["history"]])
                ys.append(vals[np.searchsorted(steps, grid, side="right") - 1])
            ax.plot(grid, np.mean(ys, axis=0), lw=2, label=f"{cond} (n={len(group)})")
        ax.axhline(THRESHOLD, color="black", ls="--", lw=1)
        ax.set(title=space, xlabel="env steps", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("held-out hard success (deterministic)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- CLI


def _print_ceilings(spaces: Sequence[str], episodes: int) -> None:
    print(f"greedy (straight to the goal) / random success, {episodes} episodes per task")
    print("| space | family | tasks | greedy | random |\n|---|---|---|---|---|")
    for space in spaces:
        for fam, c in ceilings(space, episodes).items():
            print(f"| {space} | {fam} | {c['tasks']} | {c['greedy']:.3f} | {c['random']:.3f} |")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the missing runs (or only summarise, or only the ceilings)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spaces", nargs="+", choices=SPACES, default=None)
    p.add_argument("--conditions", nargs="+", choices=tuple(CONDITIONS), default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--steps", type=int, default=None, help="budget per run (default per space)")
    p.add_argument("--eval-every", type=int, default=None, help="default 10 k (mostly: 20 k)")
    p.add_argument("--eval-episodes", type=int, default=5, help="per held-out task")
    p.add_argument("--auc-steps", type=int, default=AUC_STEPS)
    p.add_argument("--stop-after-threshold", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--workers", type=int, default=1, help="runs in parallel processes")
    p.add_argument("--out", default=None, help=f"records folder (default {RECORDS})")
    p.add_argument("--summarise", action="store_true", help="only read the records and print")
    p.add_argument("--plot", default=None, help="also write a success-curve plot here")
    p.add_argument("--ceilings", action="store_true", help="greedy / random success per family")
    p.add_argument("--ceiling-episodes", type=int, default=50, help="per task")
    p.add_argument("--quick", action="store_true", help="tiny budgets, 1 seed: a smoke run")
    args = p.parse_args(argv)
    spaces = args.spaces or list(SPACES)
    if args.ceilings:
        _print_ceilings(spaces, args.ceiling_episodes)
        return 0
    if args.quick:
        spaces, args.seeds, args.eval_episodes = args.spaces or ["primary"], [0], 1
        args.conditions = args.conditions or ["uniform", "lp"]
        args.steps, args.eval_every = min(args.steps or 4096, 4096), args.eval_every or 2048
        if args.out is None:
            args.out = tempfile.mkdtemp(prefix="curriculum_infeasible_")
    out = Path(args.out) if args.out else RECORDS
    if args.summarise:
        records = [
            r
            for r in load_records(out)
            if (args.spaces is None or r["space"] in args.spaces)
            and (args.conditions is None or r["condition"] in args.conditions)
        ]
        print(summarise(records))
        if args.plot:
            plot(records, Path(args.plot))
        return 0
    specs = []
    for space in spaces:
        conditions = args.conditions or (
            FEASIBLE_CONDITIONS if space == "feasible" else tuple(CONDITIONS)
        )
        if args.conditions is None and not syllabus_installed():
            conditions = [c for c in conditions if c not in SYLLABUS_CONDITIONS]
        for seed in args.seeds:
            for cond in conditions:
                budget = args.steps or BUDGET[space]
                spec = RunSpec(
                    space,
                    cond,
                    seed,
                    budget,
                    args.eval_every or EVAL_EVERY[space],
                    args.eval_episodes,
                    min(args.auc_steps, budget),
                    args.stop_after_threshold,
                    str(out),
                )
                if spec.path.exists():
                    print(f"exists, skipped: {spec.path}")
                else:
                    specs.append(spec)
    start = time.perf_counter()

    def report(r: dict[str, Any]) -> None:
        print(
            f"{r['space']:>8} {r['condition']:>12} seed {r['seed']}: steps to threshold "
            f"{r['steps_to_threshold']}, AUC {r['auc']:.2f}, final {r['final_success']:.2f}, "
            f"{r['trained_steps']} steps in {r['seconds']:.0f} s",
            flush=True,
        )

    if args.workers <= 1:
        for spec in specs:
            report(run_one(spec))
    else:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            for fut in as_completed([pool.submit(run_one, s) for s in specs]):
                report(fut.result())
    print(f"\n{len(specs)} runs in {time.perf_counter() - start:.0f} s; records in {out}\n")
    records = load_records(out)
    print(summarise(records))
    if args.plot:
        plot(records, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
