"""Write a synthetic but realistic datapack set for the built-in envs (deterministic per seed).

Each datapack is a scenario of ``gymcurric/HazardNav-v0`` or ``gymcurric/HazardGrid-v0`` with
task parameters those envs accept, and metadata derived from how hard and how risky the
scenario is, the way a data team would annotate it:

* difficulty (goal distance, hazard density, time limit, slip) drives the *tier* (0 redundant
  for easy, frequently seen layouts; 1 context-novel; 2 frontier), the curriculum stage hint,
  the trust score (frontier data is noisier) and the MPL gain;
* hazard density drives *risk*, ``safety_critical`` and interventions, and partly *fragility*;
* affordances (``reach_goal``, ``avoid_hazards``, ``thread_gap``, ``escape_ring``,
  ``recover_slip``) follow from the layout; hard ones require easier ones as
  ``prerequisite_tags``, with the same names, so the curriculum can satisfy them from episodes.

Optionally the first ``--episodes`` datapacks get a recorded episode: a short random-policy
rollout of that very scenario, saved as ``episodes/<pack_id>.npz`` with the arrays of
:data:`gymcurric.datapacks.EPISODE_KEYS` (``obs`` with the final observation, ``action``,
``reward``) plus ``cost``, ``terminated`` and ``truncated``, ready for
:func:`gymcurric.replay.extend_from_episodes`.

    python examples/make_datapacks.py --out datapacks --count 3000 --seed 0 [--episodes 20]
    gymcurric datapacks validate datapacks --check-episodes
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

NAV, GRID = "gymcurric/HazardNav-v0", "gymcurric/HazardGrid-v0"
STAGES = ("warmup", "skill_building", "frontier", "fine_tuning")
_BASE_TIME = 1_790_000_000  # 2026-09-21 UTC: fixed, so the output does not depend on today
SHARD = 1000  # records per JSONL file


def _nav_task(rng: np.random.Generator, d: float) -> dict[str, Any]:
    arena = float(np.round(rng.uniform(3.0, 4.0 + 4.0 * d), 2))
    goal_r = float(np.round(rng.uniform(0.2, 0.45) * (1.2 - 0.5 * d), 2))
    dist = float(np.round(np.clip(0.6 + d * (arena - 1.0), goal_r + 0.2, arena - 0.3), 2))
    r = float(np.round(rng.uniform(0.15, 0.35), 2))
    # keep the hazard area to at most ~20% of the arena so layouts are always placeable
    cap = int(0.2 * arena * arena / (np.pi * r * r))
    n = int(min(cap, 32, rng.poisson(1 + 14 * d)))
    placement = str(rng.choice(["random", "between", "ring"], p=[0.5, 0.35, 0.15]))
    return {
        "arena_size": arena,
        "goal_distance": dist,
        "goal_radius": goal_r,
        "num_hazards": n,
        "hazard_radius": r,
        "hazard_placement": placement,
        "agent_speed": float(np.round(rng.uniform(0.08, 0.15), 3)),
        "max_steps": int(100 + 100 * round(3 * d)),
    }


def _grid_task(rng: np.random.Generator, d: float) -> dict[str, Any]:
    size = int(rng.integers(4, 6 + int(8 * d) + 1))
    dist = int(np.clip(round(1 + d * 2 * (size - 1)), 1, 2 * (size - 1)))
    n = int(min(size * size // 4, rng.poisson(1 + 0.25 * size * size * d)))
    return {
        "size": size,
        "goal_distance": dist,
        "num_hazards": n,
        "hazard_placement": str(rng.choice(["random", "between"], p=[0.6, 0.4])),
        "max_steps": int(4 * size * size),
        "slip_prob": float(np.round(rng.choice([0.0, 0.0, 0.05, 0.1]) * (0.5 + d), 3)),
    }


def _density(env_id: str, task: dict[str, Any]) -> float:
    """Share of the area covered by hazards (0..~0.25)."""
    if env_id == NAV:
        return task["num_hazards"] * np.pi * task["hazard_radius"] ** 2 / task["arena_size"] ** 2
    return task["num_hazards"] / task["size"] ** 2


def make_datapack(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """One datapack record (a JSON-ready dict) drawn from ``rng``."""
    env_id = NAV if rng.random() < 0.6 else GRID
    d = float(rng.beta(1.6, 2.2))  # difficulty in [0, 1], most scenarios easy to medium
    task = _nav_task(rng, d) if env_id == NAV else _grid_task(rng, d)
    density = _density(env_id, task)
    risk = float(np.round(np.clip(3.5 * density + 0.15 * rng.standard_normal(), 0, 1), 3))
    novelty = float(np.round(np.clip(0.7 * d + 0.3 * rng.random(), 0, 1), 3))
    frontier_score = 0.6 * d + 0.4 * novelty
    tier = 2 if frontier_score > 0.62 else 1 if frontier_score > 0.3 else 0
    stage = STAGES[min(3, int(d * 4))]

    affordances = [{"name": "reach_goal", "demonstrated": True}]
    prereq: list[str] = []
    if task["num_hazards"] > 0:
        affordances.append({"name": "avoid_hazards", "demonstrated": bool(rng.random() < 0.8)})
        prereq.append("reach_goal")
    placement = task["hazard_placement"]
    if placement == "between" and task["num_hazards"] >= 4:
        affordances.append({"name": "thread_gap", "demonstrated": bool(rng.random() < 0.4)})
        prereq.append("avoid_hazards")
    if placement == "ring":
        affordances.append({"name": "escape_ring", "demonstrated": bool(rng.random() < 0.3)})
        prereq.append("avoid_hazards")
    if task.get("slip_prob", 0.0) > 0:
        affordances.append({"name": "recover_slip", "demonstrated": bool(rng.random() < 0.5)})
    if tier < 2:
        prereq = prereq[:1]  # only frontier scenarios wait for the harder skills

    # how fragile the objects involved are: related to the risk, but a property of its own
    fragile = 0.5 * risk + 0.5 * rng.random()
    fragility = ("none", "low", "medium", "high", "critical")[
        int(np.digitize(fragile, [0.2, 0.4, 0.6, 0.8]))
    ]
    time_eff = float(np.round(np.clip(1.0 - 0.6 * d + 0.1 * rng.standard_normal(), 0, 1), 3))
    energy_eff = float(np.round(np.clip(rng.beta(4, 2) - 0.3 * d, 0, 1), 3))
    efficiency: dict[str, float] = {"time": time_eff}
    if rng.random() < 0.7:  # energy is not metered for every recording
        efficiency["energy"] = energy_eff
    prefix = "nav" if env_id == NAV else "grid"
    kind = "navigate" if task["num_hazards"] == 0 else "avoid_hazards"
    return {
        "pack_id": f"{prefix}-{index:06d}",
        "task_type": kind,
        "env_id": env_id,
        "tier": tier,
        "task_params": task,
        "seed": int(rng.integers(0, 2**31 - 1)),
        "trust_score": float(np.round(np.clip(rng.beta(8, 2) - 0.15 * (tier == 2), 0, 1), 3)),
        "sampling_weight": float(np.round(rng.lognormal(0.0, 0.4), 3)),
        "objective_vector": [
            float(np.round(1.0 - 0.7 * d, 3)),  # expected success
            float(np.round(1.0 - risk, 3)),  # safety
            time_eff,  # efficiency
        ],
        "mpl_gain": float(np.round(rng.gamma(2.0, 1.0 + 3.0 * d), 3)),
        "timestamp": _BASE_TIME + int(index * 600 + rng.integers(0, 600)),
        "enrichment": {
            "fragility": fragility,
            "risk": risk,
            "affordances": affordances,
            "efficiency": efficiency,
            "novelty": novelty,
            "interventions": int(rng.poisson(3.0 * risk)),
        },
        "supervision_hints": {
            "safety_critical": bool(risk >= 0.6),
            "curriculum_stage": stage,
            "prerequisite_tags": prereq,
        },
        "source_robot": str(rng.choice(["sim-a", "sim-b", "field-1"])),  # an extra field, kept
    }


def record_episode(pack: dict[str, Any], path: Path, max_steps: int = 64) -> None:
    """A random-policy rollout of ``pack``'s scenario, saved as ``.npz`` (no pickled objects)."""
    import gymnasium as gym

    import gymcurric  # noqa: F401  (registers the env ids)

    env = gym.make(pack["env_id"])
    obs, _ = env.reset(seed=pack["seed"], options={"task": pack["task_params"]})
    env.action_space.seed(pack["seed"])
    rows: dict[str, list[Any]] = {k: [] for k in ("action", "reward", "cost", "term", "trunc")}
    all_obs = [obs]
    for t in range(max_steps):
        action = env.action_space.sample()
        obs, reward, term, trunc, info = env.step(action)
        trunc = trunc or t == max_steps - 1
        for key, value in zip(
            ("action", "reward", "cost", "term", "trunc"),
            (action, reward, info.get("cost", 0.0), term, trunc),
            strict=True,
        ):
            rows[key].append(value)
        all_obs.append(obs)
        if term or trunc:
            break
    env.close()
    np.savez_compressed(
        path,
        obs=np.asarray(all_obs, np.float32),
        action=np.asarray(rows["action"]),
        reward=np.asarray(rows["reward"], np.float64),
        cost=np.asarray(rows["cost"], np.float64),
        terminated=np.asarray(rows["term"], bool),
        truncated=np.asarray(rows["trunc"], bool),
    )


def write_datapacks(out: Path, count: int, seed: int, episodes: int = 0) -> list[Path]:
    """Write ``count`` datapacks as JSONL shards under ``out`` (and ``episodes`` recordings)."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    packs = [make_datapack(rng, i) for i in range(count)]
    if episodes:
        (out / "episodes").mkdir(exist_ok=True)
        for pack in packs[:episodes]:
            rel = f"episodes/{pack['pack_id']}.npz"
            record_episode(pack, out / rel)
            pack["episode"] = rel
    files = []
    for k in range(0, count, SHARD):
        path = out / f"datapacks-{k // SHARD:03d}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for pack in packs[k : k + SHARD]:
                f.write(json.dumps(pack, sort_keys=True) + "\n")
        files.append(path)
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("datapacks"), help="output directory")
    parser.add_argument("--count", type=int, default=3000, help="number of datapacks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--episodes", type=int, default=0, help="record a random rollout for the first N packs"
    )
    args = parser.parse_args(argv)
    if args.count < 1 or not 0 <= args.episodes <= args.count:
        parser.error("need --count >= 1 and 0 <= --episodes <= --count")
    files = write_datapacks(args.out, args.count, args.seed, args.episodes)
    print(f"wrote {args.count} datapacks to {len(files)} files under {args.out}")


if __name__ == "__main__":
    main()
