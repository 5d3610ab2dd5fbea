"""CPU the vector curriculum wrapper adds in the main process, per vector step.

``curriculum_worker_cost.py`` measures what the curriculum costs inside ``AsyncVectorEnv``
workers; this script measures the other side. It records ``--steps`` vector steps of a real
``AsyncVectorEnv`` of ``--num-envs`` trivial envs (10-step episodes, ``_trivial_env.py``) bound
to a ``TaskChannel(episodes_in_main=True)`` (what ``make_curriculum_vec`` builds), then replays
the recording in this process under each configuration, ``--repeats`` times, interleaved:

* ``plain``: the replay alone (the baseline: returning the recorded step);
* ``ids-only``: ``vector.SampleCurriculumTask`` without a channel: it only tracks which task each
  sub-env runs (the main-process side of the worker-side path that SB3's ``SubprocVecEnv``
  uses, where the sub-envs sample and update themselves);
* ``channel-main``: ``vector.SampleCurriculumTask`` with ``TaskChannel(episodes_in_main=True)``: it
  sums every episode's rewards and costs, applies the ended episodes to the curriculum in one
  batch, and refills the channel's slots. The replay takes each restarting sub-env's task from
  its slot, as the worker would, so the refills do real work.

The thread CPU time of each configuration's ``step`` is measured with the replay's own time
subtracted (``time.thread_time_ns``, so load from other processes matters little). The
curriculum work that a vector step leaves (its ended episodes, the tasks its resets took) is
applied at the next step: with ``overlap=True`` (the default) and an ``AsyncVectorEnv``,
between ``step_async`` and ``step_wait``, while the workers step, else just before it. The
replay is not an ``AsyncVectorEnv``, so each timed step first calls ``flush_curriculum()`` and
times it apart: ``channel-main`` is then split into the part that ``overlap=True`` moves off
the main process's critical path and the part that stays on it (every configuration makes
the same timer calls). Also printed,
as the scale the extras compare with: the main thread's CPU per ``AsyncVectorEnv.step`` (pipe
writes and reads, Gymnasium's info stacking) of the bound env and of a plain one (no curriculum
wrapper), ``--async-repeats`` runs of each, interleaved. Their difference is what the sub-envs'
reset infos (``task``, ``task_id``) cost the main process inside Gymnasium.

    python benchmarks/curriculum_main_cost.py --autoreset next-step
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym
import numpy as np
from _trivial_env import ENV_ID, register
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers.vector import SampleCurriculumTask, make_curriculum_vec

_T = time.thread_time_ns
MODES = {"next-step": AutoresetMode.NEXT_STEP, "same-step": AutoresetMode.SAME_STEP}


class Recorder(VectorWrapper):
    """Times the env it wraps; with ``keep``, keeps a deep copy of every step.

    Only the recording run keeps copies: in a timed run, the garbage collector's passes over
    them would land in the timed steps, more often for the env whose infos hold more objects.
    """

    def __init__(self, env: VectorEnv, keep: bool) -> None:
        super().__init__(env)
        self.steps: list[tuple[Any, ...]] = []
        self.keep = keep
        self.cpu_ns = 0

    def step(self, actions: Any) -> Any:
        t = _T()
        out = self.env.step(actions)
        self.cpu_ns += _T() - t
        if self.keep:
            self.steps.append(copy.deepcopy(out))
        return out


class Replay(VectorEnv):
    """Returns recorded steps in a loop; takes restarting sub-envs' tasks from ``channel``."""

    def __init__(self, template: VectorEnv, reset: Any, steps: list[tuple[Any, ...]]) -> None:
        self.num_envs = template.num_envs
        self.single_observation_space = template.single_observation_space
        self.single_action_space = template.single_action_space
        self.observation_space = template.observation_space
        self.action_space = template.action_space
        self.metadata = dict(template.metadata)
        self._reset, self._steps, self._i = reset, steps, 0
        self.channel: TaskChannel | None = None
        self.cpu_ns = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self._i = 0
        obs, infos = self._reset
        self._take(np.ones(self.num_envs, dtype=bool))
        return obs, dict(infos)

    def step(self, actions: Any) -> Any:
        t = _T()
        obs, rew, term, trunc, infos = self._steps[self._i % len(self._steps)]
        self._i += 1
        started = infos.get("_task_id")
        if started is not None:
            self._take(started)
        out = obs, rew, term, trunc, dict(infos)
        self.cpu_ns += _T() - t
        return out

    def _take(self, envs: np.ndarray) -> None:
        if self.channel is not None:
            for i in np.flatnonzero(envs).tolist():
                self.channel.take(i)


def record(args: argparse.Namespace, mode: AutoresetMode) -> dict[str, Any]:
    """Steps of the real async env, bound (recorded) and plain, interleaved.

    Returns the bound env (a template for the replay), its reset and recorded steps (a run
    after the timed ones), and the main thread's CPU µs per ``AsyncVectorEnv.step`` of each
    env, one entry per timed run.
    """
    cur = Curriculum(
        FixedTaskSpace([{"level": i} for i in range(args.tasks)]), seed=0, backend="shared"
    )
    vector_kwargs = {"autoreset_mode": mode, "context": args.context}
    env = plain = None
    try:
        env = make_curriculum_vec(
            ENV_ID, cur, args.num_envs, vectorization_mode="async", vector_kwargs=vector_kwargs
        )
        plain = gym.make_vec(
            ENV_ID, args.num_envs, vectorization_mode="async", vector_kwargs=vector_kwargs
        )
        inner = env.env
        actions = np.zeros(args.num_envs, dtype=np.int64)
        us: dict[str, list[float]] = {"plain": [], "bound": []}
        runs = [("plain", False), ("bound", False)] * args.async_repeats + [("bound", True)]
        for name, keep in runs:
            rec = Recorder(plain if name == "plain" else inner, keep)
            outer = rec if name == "plain" else env
            if outer is env:
                env.env = rec  # the wrapper steps through the recorder
            gc.collect()
            first = copy.deepcopy(outer.reset(seed=0))
            for _ in range(args.steps):
                outer.step(actions)
            env.env = inner
            if keep:
                steps = rec.steps
            else:
                us[name].append(rec.cpu_ns / args.steps / 1e3)
    finally:
        for e in (env, plain):
            if e is not None:
                e.close()
        cur.close()
    return {"template": inner, "first": first, "steps": steps, "async_us": us}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--autoreset", default="next-step", choices=list(MODES))
    p.add_argument("--context", default="fork", choices=["fork", "forkserver", "spawn"])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--steps", type=int, default=2000, help="vector steps recorded")
    p.add_argument("--repeats", type=int, default=10, help="replays per configuration")
    p.add_argument(
        "--async-repeats", type=int, default=5, help="runs of each real async env (interleaved)"
    )
    args = p.parse_args(argv)
    register()
    mode = MODES[args.autoreset]
    rec = record(args, mode)
    template, first, steps = rec["template"], rec["first"], rec["steps"]
    async_us = float(np.median(rec["async_us"]["bound"]))
    plain_us = float(np.median(rec["async_us"]["plain"]))

    curricula: list[Curriculum] = []
    channels: list[TaskChannel] = []

    def build(name: str) -> tuple[VectorEnv, Replay, Curriculum | None]:
        replay = Replay(template, first, steps)
        if name == "plain":
            return replay, replay, None
        cur = Curriculum(FixedTaskSpace([{"level": i} for i in range(args.tasks)]), seed=0)
        curricula.append(cur)
        if name == "ids-only":
            return SampleCurriculumTask(replay, cur), replay, cur
        chan = TaskChannel(args.num_envs, episodes_in_main=True)
        channels.append(chan)
        replay.channel = chan
        return SampleCurriculumTask(replay, cur, channel=chan), replay, cur

    names = ("plain", "ids-only", "channel-main")
    envs = {name: build(name) for name in names}
    actions = np.zeros(args.num_envs, dtype=np.int64)
    outer = dict.fromkeys(names, 0)
    inner = dict.fromkeys(names, 0)
    flushed = dict.fromkeys(names, 0)
    try:
        for _ in range(args.repeats):
            for name, (env, replay, _cur) in envs.items():
                env.reset(seed=0)
                replay.cpu_ns = 0
                flush = getattr(env, "flush_curriculum", lambda: None)
                in_flush = 0
                t = _T()
                for _ in range(len(steps)):
                    f = _T()
                    flush()  # inside the next step of an AsyncVectorEnv (see the docstring)
                    in_flush += _T() - f
                    env.step(actions)
                outer[name] += _T() - t
                inner[name] += replay.cpu_ns
                flushed[name] += in_flush
                flush()  # the last step's episodes, for the count of updates below
    finally:
        for chan in channels:
            chan.close()
    n = args.repeats * len(steps)
    extra = {name: (outer[name] - inner[name]) / n / 1e3 for name in names}
    overlap = {name: (flushed[name] - flushed["plain"]) / n / 1e3 for name in names}
    ended = sum(int(np.logical_or(s[2], s[3]).sum()) for s in steps)
    res: dict[str, Any] = {
        "async_main_us": async_us,
        "plain_async_main_us": plain_us,
        "episodes_per_step": ended / len(steps),
        "extra_us": {name: extra[name] - extra["plain"] for name in names},
        # of extra_us, the CPU an AsyncVectorEnv runs while its workers step
        "overlapped_us": overlap,
        "updates": {
            name: (None if cur is None else int(cur.stats()["curriculum/updates"]))
            for name, (_e, _r, cur) in envs.items()
        },
    }
    expected = {"plain": None, "ids-only": 0, "channel-main": args.repeats * ended}
    if res["updates"] != expected:  # every ended episode reported once, and only by the channel
        raise RuntimeError(f"curriculum updates {res['updates']}, expected {expected}")
    print(
        f"main-thread CPU per vector step, {args.num_envs} trivial envs ({args.autoreset}, "
        f"{res['episodes_per_step']:.2f} episodes ended per step), {args.tasks} tasks, "
        f"{args.repeats} x {len(steps)} replayed steps"
    )
    print(
        f"  AsyncVectorEnv.step itself ({args.context}, median of {args.async_repeats} runs): "
        f"plain env {plain_us:8.2f} us, curriculum-bound sub-envs {async_us:8.2f} us "
        f"({async_us - plain_us:+.2f}: their reset infos, task and task_id, pass through the "
        "pipes and Gymnasium's info stacking)"
    )
    runs = rec["async_us"]
    print(
        "    runs, plain: " + " ".join(f"{v:.0f}" for v in runs["plain"])
        + "; bound: " + " ".join(f"{v:.0f}" for v in runs["bound"])
    )  # fmt: skip
    for name in names:
        r = res["extra_us"][name]
        share = 100.0 * r / async_us
        print(f"  {name:12s} extra {r:+8.2f} us  ({share:5.1f} % of the async step's main CPU)")
    o = res["overlapped_us"]["channel-main"]
    crit = res["extra_us"]["channel-main"] - o
    print(
        f"    channel-main: {o:+.2f} us of it run while the workers step (between step_async "
        f"and step_wait), {crit:+.2f} us ({100.0 * crit / async_us:.1f} %) on the critical path"
    )
    return res


if __name__ == "__main__":
    main()
