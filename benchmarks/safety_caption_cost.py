"""Cost of Safety-Gymnasium captions per step, against the step itself.

Run:  .venv/bin/python benchmarks/safety_caption_cost.py --steps 3000

For each task, one env (``make_safety_env(id)``, captions off) is stepped with pre-drawn random
actions; after every step the caption of the new state is made by a
:class:`~gymcurric.envs.safety_captions.SafetyTaskCaptioner` on the same task, which is what
``caption=True`` adds to a step. Step and caption alternate call by call, so load from other
processes hits both alike; each is timed with the thread's CPU clock (not counting time the
thread waits for a core) and with the wall clock (median per call). Resets are not timed.
The ratio caption/step is the figure to quote: on a shared machine the absolute numbers move
with the load, the ratio much less.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

from gymcurric.envs.safety_captions import SafetyTaskCaptioner
from gymcurric.envs.safety_gymnasium import make_safety_env

TASKS = (
    "SafetyPointGoal1-v0",
    "SafetyPointGoal2-v0",
    "SafetyCarButton1-v0",
    "SafetyPointButton2-v0",
    "SafetyPointPush1-v0",
    "SafetyDoggoPush2-v0",
)


def measure(env_id: str, steps: int, seed: int = 0) -> dict[str, float]:
    """CPU and median wall µs per step and per caption for ``steps`` steps of ``env_id``."""
    env = make_safety_env(env_id)
    env.reset(seed=seed)
    captioner = SafetyTaskCaptioner(env.unwrapped.raw_env.task)  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    space = env.action_space
    assert isinstance(space, gym.spaces.Box)
    actions = rng.uniform(space.low, space.high, size=(steps, *space.shape))
    cpu_step = cpu_caption = 0
    wall_step: list[int] = []
    wall_caption: list[int] = []
    for action in actions:
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        _, _, terminated, truncated, info = env.step(action)
        w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        captioner.caption(goal_met=bool(info.get("goal_met", False)))
        w2, c2 = time.perf_counter_ns(), time.thread_time_ns()
        cpu_step += c1 - c0
        cpu_caption += c2 - c1
        wall_step.append(w1 - w0)
        wall_caption.append(w2 - w1)
        if terminated or truncated:
            env.reset()
    env.close()
    return {
        "step_cpu_us": cpu_step / steps / 1e3,
        "caption_cpu_us": cpu_caption / steps / 1e3,
        "ratio_cpu": cpu_caption / cpu_step,
        "step_wall_median_us": statistics.median(wall_step) / 1e3,
        "caption_wall_median_us": statistics.median(wall_caption) / 1e3,
        "ratio_wall_median": statistics.median(wall_caption) / statistics.median(wall_step),
    }


def main() -> None:
    """Print one row per task."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    args = parser.parse_args()
    print("task | step CPU us | caption CPU us | ratio (CPU) | ratio (median wall)")
    for env_id in args.tasks:
        m = measure(env_id, args.steps)
        print(
            f"{env_id} | {m['step_cpu_us']:.0f} | {m['caption_cpu_us']:.1f} | "
            f"{m['ratio_cpu']:.3f} | {m['ratio_wall_median']:.3f}"
        )


if __name__ == "__main__":
    main()
