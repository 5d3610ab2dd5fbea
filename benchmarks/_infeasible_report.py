"""The records side of ``curriculum_infeasible.py``: provenance, tables and plot (no training).

:func:`git_state` and :func:`versions` say what a run ran on (its record keeps them);
:func:`load_records` reads a records folder; :func:`summarise` prints the tables of
``--summarise`` (steps to threshold, paired-by-seed bootstrap ratios with
:func:`paired_ratio`, AUC, final success, each family's share of the env steps with
:func:`step_shares`, every seed, the provenance) and :func:`plot` draws the success curves.
Conditions come in the order the caller gives (the script's ``CONDITIONS``).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _infeasible_tasks import FAMILIES, SPACES, THRESHOLD
from _stats import ci95

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "git_state",
    "load_records",
    "paired_ratio",
    "print_ceilings",
    "plot",
    "step_shares",
    "summarise",
    "versions",
]

BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES = 0, 10_000


# ----------------------------------------------------------------------------- provenance


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


# ----------------------------------------------------------------------------- summary


def print_ceilings(ceilings: Any, spaces: Sequence[str], episodes: int) -> None:
    """``--ceilings``: the greedy and random policies' success per space and family."""
    print(f"greedy (straight to the goal) / random success, {episodes} episodes per task")
    print("| space | family | tasks | greedy | random |\n|---|---|---|---|---|")
    for space in spaces:
        for fam, c in ceilings(space, episodes).items():
            print(f"| {space} | {fam} | {c['tasks']} | {c['greedy']:.3f} | {c['random']:.3f} |")


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


def _order(conditions: set[str], order: Sequence[str]) -> list[str]:
    """``conditions`` in ``order``, then any others sorted by name."""
    known = [c for c in order if c in conditions]
    return known + sorted(conditions - set(known))


def summarise(records: list[dict[str, Any]], order: Sequence[str]) -> str:
    """The tables: per space and condition (conditions in ``order``), then per seed."""
    lines: list[str] = []
    for space in [s for s in SPACES if any(r["space"] == s for r in records)]:
        rs = [r for r in records if r["space"] == space] + oracle_stand_in(records, space)
        by_cond = {
            c: [r for r in rs if r["condition"] == c]
            for c in _order({r["condition"] for r in rs}, order)
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


def oracle_stand_in(records: list[dict[str, Any]], space: str) -> list[dict[str, Any]]:
    """The oracle of ``space`` from the ``feasible`` space's uniform runs, if it has none.

    The oracle trains on the 36 feasible tasks whatever the space, so it is the same training
    run as ``feasible``/``uniform`` (the held-out evaluations do not touch the training's
    generators; the records agree wherever both evaluated). A space with no ``oracle`` records
    of its own takes those runs when they were evaluated on the same grid (``eval_every``), so
    its steps to threshold have the same resolution.
    """
    mine = [r for r in records if r["space"] == space]
    if space == "feasible" or not mine or any(r["condition"] == "oracle" for r in mine):
        return []
    grid = mine[0]["config"]["eval_every"]
    return [
        {**r, "condition": "oracle", "space": space}
        for r in records
        if r["space"] == "feasible"
        and r["condition"] == "uniform"
        and r["config"]["eval_every"] == grid
    ]


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


def plot(records: list[dict[str, Any]], path: Path, order: Sequence[str]) -> None:
    """Held-out success against env steps, mean over seeds, one panel per space.

    Conditions in ``order``, then any others. A run that stopped early holds its last value from
    there on.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spaces = [s for s in SPACES if any(r["space"] == s for r in records)]
    fig, axes = plt.subplots(1, len(spaces), figsize=(6 * len(spaces), 4.2), squeeze=False)
    for ax, space in zip(axes[0], spaces, strict=True):
        rs = [r for r in records if r["space"] == space]
        for cond in _order({r["condition"] for r in rs}, order):
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
