"""``omnisafe_side_by_side.py --summarise DIR``: the table, the JSON and the curves.

Per (lib, algo) and seed: the return and cost over the last 10 % of that run's env steps (the
mean of the episodes that ended after 90 % of them, from ``..._episodes.csv``; without that
file, the mean of the 100-episode window means of the epochs there, flagged ``†``), and the
run's env steps/s at its end. Across seeds: the mean and its 95 % Student-t half-width. The
steps/s ratio is gymcurric's mean over OmniSafe's mean for the same algorithm.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from _omnisafe_records import LIBS, read_episodes, read_rows, run_stem
from _stats import ci95


def last_tenth(rows: list[dict[str, float]], episodes: list[Any] | None) -> dict[str, Any]:
    """Return and cost over the last 10 % of the run's env steps (see the module docstring)."""
    steps = rows[-1]["env_steps"]
    if episodes:
        last = [e for e in episodes if e[0] > 0.9 * steps]
        if last:
            return {
                "return": math.fsum(e[1] for e in last) / len(last),
                "cost": math.fsum(e[2] for e in last) / len(last),
                "episodes": len(last),
                "source": "episodes",
            }
    late = [r for r in rows if r["env_steps"] > 0.9 * steps]
    ret = [r["ep_ret"] if not math.isnan(r["ep_ret"]) else r["ep_ret_w50"] for r in late]
    cost = [r["ep_cost"] if not math.isnan(r["ep_cost"]) else r["ep_cost_w50"] for r in late]
    return {
        "return": math.fsum(ret) / len(ret),
        "cost": math.fsum(cost) / len(cost),
        "episodes": None,
        "source": "epoch windows",
    }


def load(out: Path, lib: str, algo: str, seed: int) -> dict[str, Any] | None:
    path = out / f"{run_stem(lib, algo, seed)}.csv"
    if not path.exists():
        return None
    rows = read_rows(path)
    if not rows:
        return None
    ep_path = out / f"{run_stem(lib, algo, seed)}_episodes.csv"
    episodes = read_episodes(ep_path) if ep_path.exists() else None
    return {
        "rows": rows,
        **last_tenth(rows, episodes),
        "env_steps": int(rows[-1]["env_steps"]),
        "steps_per_s": rows[-1]["steps_per_s"],
        "steps_per_cpu_s": rows[-1]["steps_per_cpu_s"],
        "wall_s": rows[-1]["wall_s"],
    }


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (strict JSON)."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _ratio_cell(ratio: dict[str, float]) -> str:
    cells = [f"{v:.2f}" if math.isfinite(v) else "n/a" for v in ratio.values()]
    return "; ".join(cells)


def _fmt(mean: float, half: float, n: int) -> str:
    if n == 0 or math.isnan(mean):
        return "n/a"
    return f"{mean:.2f} ± {half:.2f}" if n > 1 else f"{mean:.2f}"


def summarise(out: Path, algos: list[str], seeds: list[int], cost_limit: float = 25.0) -> dict:
    """Write ``summary.md``, ``summary.json`` and ``curves_<algo>.png`` into ``out``."""
    runs = {
        (lib, algo, seed): load(out, lib, algo, seed)
        for lib in LIBS
        for algo in algos
        for seed in seeds
    }
    summary: dict[str, Any] = {"seeds": seeds, "groups": {}}
    lines = [
        "| algo | lib | seeds | return per seed (last 10 %) | cost per seed (last 10 %) | "
        "return mean ± 95 % CI | cost mean ± 95 % CI | env steps/s per seed (wall) | "
        "env steps/CPU-s per seed | steps/s gymcurric / OmniSafe (wall; CPU) |",
        "|" + "---|" * 10,
    ]
    for algo in algos:
        mean_speed: dict[str, dict[str, float]] = {}
        for lib in LIBS:
            have = {s: runs[(lib, algo, s)] for s in seeds if runs[(lib, algo, s)] is not None}
            mean_speed[lib] = {}
            for key in ("steps_per_s", "steps_per_cpu_s"):
                vals = [r[key] for r in have.values() if not math.isnan(r[key])]
                mean_speed[lib][key] = math.fsum(vals) / len(vals) if vals else math.nan
        ratio = {
            key: mean_speed["gymcurric"][key] / mean_speed["omnisafe"][key]
            for key in ("steps_per_s", "steps_per_cpu_s")
        }
        for lib in LIBS:
            have = {s: runs[(lib, algo, s)] for s in seeds if runs[(lib, algo, s)] is not None}
            missing = [s for s in seeds if s not in have]
            max_steps = max((r["env_steps"] for r in have.values()), default=0)
            ret = ci95([r["return"] for r in have.values()]) if have else (math.nan, 0.0)
            cost = ci95([r["cost"] for r in have.values()]) if have else (math.nan, 0.0)

            def per_seed(
                key: str,
                digits: int = 2,
                flag: bool = True,
                have=have,
                missing=missing,
                max_steps=max_steps,
            ) -> str:
                cells = []
                for s in seeds:
                    if s in missing:
                        cells.append(f"s{s}: missing")
                        continue
                    r = have[s]
                    mark = "†" if flag and r["source"] != "episodes" else ""
                    short = " (short)" if r["env_steps"] < max_steps else ""
                    value = f"{r[key]:.{digits}f}" if math.isfinite(r[key]) else "n/a"
                    cells.append(f"s{s}: {value}{mark}{short}")
                return ", ".join(cells)

            lines.append(
                f"| {algo} | {lib} | {len(have)}/{len(seeds)} | {per_seed('return')} | "
                f"{per_seed('cost')} | {_fmt(*ret, len(have))} | {_fmt(*cost, len(have))} | "
                f"{per_seed('steps_per_s', 1, False)} | {per_seed('steps_per_cpu_s', 1, False)} | "
                + (_ratio_cell(ratio) if lib == "gymcurric" else "")
                + " |"
            )
            summary["groups"][f"{lib}/{algo}"] = {
                "lib": lib,
                "algo": algo,
                "per_seed": {
                    str(s): {k: v for k, v in r.items() if k != "rows"} for s, r in have.items()
                },
                "missing_seeds": missing,
                "return_mean": ret[0],
                "return_ci95": ret[1],
                "cost_mean": cost[0],
                "cost_ci95": cost[1],
                "steps_per_s_mean": mean_speed[lib]["steps_per_s"],
                "steps_per_cpu_s_mean": mean_speed[lib]["steps_per_cpu_s"],
            }
        summary["groups"][f"ratio/{algo}"] = {
            "steps_per_s_gymcurric_over_omnisafe": ratio["steps_per_s"],
            "steps_per_cpu_s_gymcurric_over_omnisafe": ratio["steps_per_cpu_s"],
        }
    note = (
        "\nLast 10 %: mean of the episodes that ended in the last 10 % of each run's env "
        "steps († = from the 100-episode epoch windows instead). CI: Student t over seeds. "
        "env steps/s: training and updates from the start of learning, on this machine "
        "(wall clock, and per second of the process's CPU time, which a loaded host "
        "distorts less); compare runs made in the same hour. (short): the run has fewer "
        "steps than the longest of its group.\n"
    )
    table = "\n".join(lines) + "\n" + note
    (out / "summary.md").write_text(table)
    summary = _finite(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(table)
    for algo in algos:
        path = plot(out, algo, seeds, runs, cost_limit)
        if path is not None:
            print("plot:", path)
    return summary


def plot(
    out: Path, algo: str, seeds: list[int], runs: dict[tuple, Any], cost_limit: float
) -> Path | None:
    """Return and cost (100-episode windows) against env steps, mean ± std over seeds."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib not installed: no curves")
        return None
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    drawn = False
    for lib in LIBS:
        recs = [runs[(lib, algo, s)] for s in seeds if runs[(lib, algo, s)] is not None]
        if not recs:
            continue
        n = min(len(r["rows"]) for r in recs)
        x = np.array([row["env_steps"] for row in recs[0]["rows"][:n]])
        for ax, key in zip(axes, ("ep_ret", "ep_cost"), strict=True):
            ys = np.array([[row[key] for row in r["rows"][:n]] for r in recs], dtype=float)
            with warnings.catch_warnings():  # epochs before the first episode are NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                mean, std = np.nanmean(ys, axis=0), np.nanstd(ys, axis=0)
            ax.plot(x, mean, label=f"{lib} ({len(recs)} seeds)")
            ax.fill_between(x, mean - std, mean + std, alpha=0.2)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    axes[0].set_title(f"{algo}: episode return (last 100)")
    axes[1].set_title(f"{algo}: episode cost (last 100)")
    axes[1].axhline(cost_limit, ls="--", c="k", lw=1, label=f"limit {cost_limit:g}")
    for ax in axes:
        ax.set_xlabel("env steps")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / f"curves_{algo}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
