"""Steps per second of a safety-gymnasium task raw vs through ``gym.make("gymcurric/…")``.

Run:  .venv/bin/python benchmarks/safety_env_speed.py --steps 900 --repeats 7

"raw" is safety-gymnasium's own env as built by the loader (``Builder``, 6-tuple ``step``, no
wrappers); "make" is ``gym.make("gymcurric/<id>")``: the converting env plus Gymnasium's
PassiveEnvChecker, OrderEnforcing and TimeLimit; "cost" is "make" under the cost wrappers
(``RecordEpisodeStatisticsWithCost(AnnotateCost(...))``), what a user trains on. All are
reset with the same seed and stepped with the same pre-drawn actions, so they run the same
trajectory (checked and printed). Runs interleave and rotate who goes first every repetition,
so load from other processes hits all alike. Resets (0.2-0.45 s each: safety-gymnasium
recompiles the MuJoCo model) are not timed; the default 900 steps fit in one episode.

The wrapper costs about a microsecond per step against ~500 us of physics, far below the noise
of a shared machine, so the script also times the wrappers alone: the raw env's ``step`` is
replaced by a stub that returns a recorded step, and ``make``'s step minus the stub's is the
per-step overhead ("wrapper_us_per_step").

Other benchmarks import :func:`measure` and get the numbers as a dict.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from gymcurric.envs.safety_gymnasium import build_raw_safety_env, make_safety_env
from gymcurric.wrappers import AnnotateCost, RecordEpisodeStatisticsWithCost

VARIANTS = ("raw", "make", "cost")


def _run(
    step: Callable[[Any], tuple[Any, ...]], reset: Callable[[], Any], actions: np.ndarray
) -> tuple[float, Any]:
    """Steps/s over ``actions`` (resets excluded) and the last observation."""
    reset()
    elapsed, out = 0.0, None
    start = time.perf_counter()
    for action in actions:
        out = step(action)
        if out[-3] or out[-2]:  # terminated/truncated sit at -3/-2 in both the 6- and 5-tuple
            elapsed += time.perf_counter() - start
            reset()
            start = time.perf_counter()
    elapsed += time.perf_counter() - start
    return len(actions) / elapsed, None if out is None else out[0]


def _wrapper_us(made: gym.Env[Any, Any], calls: int = 5_000) -> float:
    """Per-step cost of the gym.make stack around a stubbed raw step, in microseconds."""
    made.reset(seed=0)
    raw = made.unwrapped.raw_env
    action = np.zeros(made.action_space.shape)
    recorded = raw.step(action)

    def stub(_: Any) -> tuple[Any, ...]:
        return (*recorded[:5], dict(recorded[5]))

    chunk = made.get_wrapper_attr("_max_episode_steps") - 2  # stay inside one episode
    raw.step = stub  # an instance attribute shadows the method until deleted
    try:
        start = time.perf_counter()
        for _ in range(calls):
            stub(action)
        stub_s = time.perf_counter() - start
        made_s, done = 0.0, 0
        while done < calls:
            made.reset(seed=0)  # untimed
            n = min(chunk, calls - done)
            start = time.perf_counter()
            for _ in range(n):
                made.step(action)
            made_s += time.perf_counter() - start
            done += n
    finally:
        del raw.step
    return 1e6 * (made_s - stub_s) / calls


def measure(
    env_id: str = "SafetyPointGoal1-v0", *, steps: int = 900, repeats: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Time ``env_id`` raw and through ``gym.make``, interleaved.

    Returns:
        ``{"raw": median steps/s, "make": ..., "cost": ..., "overhead_ratio": raw/make,
        "cost_overhead_ratio": raw/cost, "overhead_us_per_step": ...,
        "wrapper_us_per_step": make's overhead with physics stubbed, "cost_wrapper_us_per_step":
        the same for the cost stack, "<variant>_runs": [...], "same_trajectory": bool}``.
    """
    raw = build_raw_safety_env(env_id)
    made = make_safety_env(env_id)
    costed = RecordEpisodeStatisticsWithCost(AnnotateCost(make_safety_env(env_id)))
    rng = np.random.default_rng(seed)
    space = made.action_space
    actions = rng.uniform(space.low, space.high, size=(steps, *space.shape))
    runners = {
        "raw": (raw.step, lambda: raw.reset(seed=seed)),
        "make": (made.step, lambda: made.reset(seed=seed)),
        "cost": (costed.step, lambda: costed.reset(seed=seed)),
    }
    runs: dict[str, list[float]] = {name: [] for name in VARIANTS}
    last: dict[str, Any] = {}
    for rep in range(repeats):
        order = VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]  # rotate who goes first
        for name in order:
            rate, last[name] = _run(*runners[name], actions)
            runs[name].append(rate)
    wrapper_us = _wrapper_us(made)
    cost_wrapper_us = _wrapper_us(costed)
    made.close()
    costed.close()
    sps = {name: statistics.median(runs[name]) for name in VARIANTS}
    return {
        "env_id": env_id,
        **sps,
        "overhead_ratio": sps["raw"] / sps["make"],
        "cost_overhead_ratio": sps["raw"] / sps["cost"],
        "overhead_us_per_step": 1e6 * (1.0 / sps["make"] - 1.0 / sps["raw"]),
        "wrapper_us_per_step": wrapper_us,
        "cost_wrapper_us_per_step": cost_wrapper_us,
        **{f"{name}_runs": runs[name] for name in VARIANTS},
        "same_trajectory": bool(
            np.array_equal(last["raw"], last["make"]) and np.array_equal(last["raw"], last["cost"])
        ),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env-id", default="SafetyPointGoal1-v0")
    parser.add_argument("--steps", type=int, default=900, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per variant")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args.env_id, steps=args.steps, repeats=args.repeats, seed=args.seed)
    print(
        f"{args.env_id}: steps/s, median of {args.repeats} interleaved runs x {args.steps} "
        f"steps (gymnasium {gym.__version__}, numpy {np.__version__})"
    )
    for name in VARIANTS:
        runs = ", ".join(f"{r:,.0f}" for r in result[f"{name}_runs"])
        print(f"  {name:5s} {result[name]:10,.0f}   runs: {runs}")
    print(
        f"  ratio raw/make = {result['overhead_ratio']:.3f}, raw/cost = "
        f"{result['cost_overhead_ratio']:.3f}; same trajectory: {result['same_trajectory']}"
    )
    raw_us = 1e6 / result["raw"]
    for label, key in (
        ("loader", "wrapper_us_per_step"),
        ("loader+cost", "cost_wrapper_us_per_step"),
    ):
        us = result[key]
        share = us / raw_us
        print(f"  {label} wrappers alone (physics stubbed): {us:.2f} us/step = {share:.2%} of raw")
    return result


if __name__ == "__main__":
    main()
