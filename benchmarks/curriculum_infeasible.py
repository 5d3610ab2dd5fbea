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
* ``lp_v1``, ``lp_fallback``, ``lp_warm1`` (exploratory, run only when named): gymcurric
  0.1's LP; LP with ``fallback="progress"``; LP with ``min_samples=1`` (a shorter warm-up);
* ``lp_dual``: ``DualPool(explore_size=27, exploit_size=27)`` (18 + 18 in ``feasible``);
* ``learnability``: ``LearnabilityScorer()``, p (1 - p);
* ``plr``, ``robust_plr``: ``PLRScorer()`` fed by ``RegretScoreCallback``; ``RobustPLRScorer()``
  with it and ``RegretRolloutBuffer`` (no gradient from episodes on tasks unseen when drawn);
* ``syllabus_lp``, ``syllabus_plr``: Syllabus's own ``OnlineLearningProgress`` and
  ``CentralPrioritizedLevelReplay`` on the same env and agent, through its task wrapper, its
  env sync wrapper and its curriculum sync wrapper (``_infeasible_syllabus.py`` says exactly how,
  and what had to change so that they run correctly). Needs ``syllabus-rl==0.7`` (``make
  bench``); left out of the default conditions when it is not installed.

By default every space runs every condition, but ``feasible`` only ``uniform`` and ``lp`` (its
oracle is its uniform). Adding a condition: a function ``(space, seed) -> Arm`` in
:data:`CONDITIONS`; an :class:`Arm` carries the sub-env wrapper, any SB3 callbacks and PPO
arguments, the diagnostics and the clean-up (``_plr`` is an example).

Metrics, per run: env steps until held-out success >= 80 % (``steps_to_threshold``; never: the
budget); AUC, the mean held-out success over the evaluations up to ``--auc-steps`` (300 k);
the final success. Per evaluation window (the episodes that ended since the last evaluation):
episodes, env steps and successes per family, and, at the evaluation, the curriculum's
probability mass and warm tasks per family (tasks with at least the scorer's ``min_samples``
episodes; PLR, gymcurric's or Syllabus's: tasks with a score; uniform and Syllabus LP: none).

Budgets: ``primary`` 500 k, ``mostly`` 1 M, ``feasible`` 300 k env steps (``--steps``
overrides). A run stops once it has reached the threshold *and* passed the AUC horizon
(``--stop-after-threshold``, the default; ``stopped_at`` and the final success are there).

Records: one JSON file per (space, condition, seed) under ``--out``
(``reference/curriculum_infeasible/records/``), written atomically when the run ends, with its
provenance (commit, uncommitted changes, versions), configs, evaluation history and
diagnostics; a run whose record exists is skipped, so an interrupted study resumes.
``--summarise`` reads only the records: steps to threshold (mean, Student-t CI, reached k/n),
ratios to ``uniform`` and ``oracle`` (paired bootstrap CIs), AUC, final success, step shares.

The task spaces, the policies and the held-out evaluation are in ``_infeasible_tasks.py``; the
provenance, the tables and the plot in ``_infeasible_report.py`` (both beside this script).

    python benchmarks/curriculum_infeasible.py --ceilings
    python benchmarks/curriculum_infeasible.py --spaces mostly --conditions uniform lp \\
        --seeds 0 1 2 --workers 2
    python benchmarks/curriculum_infeasible.py --summarise --plot infeasible.png
    python benchmarks/curriculum_infeasible.py --quick --out /tmp/ci   # smoke run, seconds
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, NamedTuple

import _infeasible_report
import numpy as np

# the names only re-exported are for the smoke test (tests/benchmarks/), which reads them here
from _infeasible_report import (  # noqa: F401
    git_state,
    load_records,
    paired_ratio,
    step_shares,
    versions,
)
from _infeasible_tasks import (  # noqa: F401
    ENV_ID,
    ENV_KWARGS,
    FAMILIES,
    FEASIBLE,
    HELD_OUT,
    PERMUTATION_SEED,
    SPACES,
    THRESHOLD,
    StudySpace,
    _task,
    ceilings,
    evaluate,
    family_of,
    family_sums,
    family_tasks,
    greedy_action,
    play,
    random_action,
    study_space,
    tag_family,
)

BUDGET = {"primary": 500_000, "mostly": 1_000_000, "feasible": 300_000}
EVAL_EVERY = {"primary": 10_000, "mostly": 20_000, "feasible": 10_000}
AUC_STEPS = 300_000
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


def _lp_v1(space: StudySpace, seed: int) -> Arm:  # exploratory: not in the pre-registration
    from gymcurric.tasks import LearningProgressScorer, SignalConfig

    scorer = LearningProgressScorer.v1()
    return _gymcurric(space, seed, scorer=scorer, signal=SignalConfig(alpha=0.1))


def _lp_with(**kwargs: Any) -> Callable[[StudySpace, int], Arm]:
    """Default LP with some of the scorer's settings changed (the exploratory conditions)."""

    def build(space: StudySpace, seed: int) -> Arm:
        from gymcurric.tasks import LearningProgressScorer

        return _gymcurric(space, seed, scorer=LearningProgressScorer(**kwargs))

    return build


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
    "lp_v1": _lp_v1,
    "lp_fallback": _lp_with(fallback="progress"),  # exploratory (the record says why)
    "lp_warm1": _lp_with(min_samples=1),
    "lp_dual": _lp_dual,
    "learnability": _learnability,
    "syllabus_lp": _syllabus("lp"),
    "syllabus_plr": _syllabus("plr"),
    "plr": _plr,
    "robust_plr": _robust_plr,
}
SYLLABUS_CONDITIONS = ("syllabus_lp", "syllabus_plr")
FEASIBLE_CONDITIONS = ("uniform", "lp")  # the control's default (oracle is uniform there)
EXPLORATORY = ("lp_v1", "lp_fallback", "lp_warm1")  # run only when named


def syllabus_installed() -> bool:
    return importlib.util.find_spec("syllabus") is not None


# ----------------------------------------------------------------------------- one run


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
            tag_family,
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


# ----------------------------------------------------------------------------- CLI


def summarise(records: list[dict[str, Any]]) -> str:
    """The tables: per space and condition (in :data:`CONDITIONS` order), then per seed."""
    return _infeasible_report.summarise(records, tuple(CONDITIONS))


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Held-out success against env steps, mean over seeds, one panel per space."""
    _infeasible_report.plot(records, path, tuple(CONDITIONS))


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
        _infeasible_report.print_ceilings(ceilings, spaces, args.ceiling_episodes)
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
            FEASIBLE_CONDITIONS
            if space == "feasible"
            else tuple(c for c in CONDITIONS if c not in EXPLORATORY)
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
