"""PNG plots of a run directory (matplotlib, Agg backend; nothing is shown on screen).

``write_plots(run_dir)`` reads ``progress.csv``, ``monitor*.csv`` and
``curriculum_history.npz`` and writes into ``run_dir/plots/``:

* ``return_cost.png``: episode return and episode cost per episode (light) with a moving mean
  (dark), against env steps; the cost limit as a dashed line when the agent has one;
* ``lagrange.png``: the Lagrange multiplier per update (Lagrangian agents);
* ``curriculum.png``: the task distribution over time as a heatmap (tasks sorted by their
  mean probability, at most 40 shown) and the explore ratio of a dual pool;
* ``shaping.png``: the shaping coefficient beta and the margin (semantic shaping).

Plots whose data the run does not have are skipped. Every axis is labelled with its quantity
and unit, and every figure has a title naming the run.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["read_monitor", "read_progress", "write_plots"]


def read_progress(run_dir: str | Path) -> dict[str, np.ndarray]:
    """``progress.csv`` as ``{column: float array}`` (empty cells are NaN)."""
    path = Path(run_dir) / "progress.csv"
    if not path.is_file():
        return {}
    with open(path) as f:
        rows = list(csv.DictReader(f))
    out: dict[str, np.ndarray] = {}
    for key in rows[0] if rows else []:
        vals = []
        for r in rows:
            try:
                vals.append(float(r[key]))
            except (TypeError, ValueError):
                vals.append(math.nan)
        out[key] = np.array(vals)
    return out


def read_monitor(run_dir: str | Path) -> dict[str, np.ndarray]:
    """Every episode log of the run, in order: ``r``, ``l``, ``c`` per episode and ``steps``.

    ``monitor.csv`` is the first part, then ``resumed-<steps>.monitor.csv`` of each resume.

    ``steps`` is the cumulative length of the finished episodes (env steps summed over all
    envs), the x axis of the per-episode curves.
    """
    files = sorted(Path(run_dir).glob("*monitor.csv"), key=_monitor_order)
    rows: list[dict[str, str]] = []
    for path in files:
        with open(path) as f:
            first = f.readline()
            if not first.startswith("#"):
                f.seek(0)
            rows.extend(csv.DictReader(f))
    out = {
        k: np.array([float(r[k]) for r in rows if r.get(k) not in (None, "")])
        for k in ("r", "l", "c")
    }
    out["steps"] = np.cumsum(out["l"]) if len(out["l"]) else np.zeros(0)
    return out


def _monitor_order(path: Path) -> int:
    head = path.name.split(".")[0]
    if head.startswith("resumed-") and head[8:].isdigit():
        return int(head[8:])
    return -1


def _moving_mean(x: np.ndarray, n: int) -> np.ndarray:
    if len(x) == 0:
        return x
    n = max(1, min(n, len(x)))
    c = np.cumsum(np.insert(x.astype(float), 0, 0.0))
    out = np.empty(len(x))
    out[n - 1 :] = (c[n:] - c[:-n]) / n
    out[: n - 1] = c[1:n] / np.arange(1, n)
    return out


def write_plots(
    run_dir: str | Path, cfg: Any = None, cost_limit: float | None = None
) -> list[Path]:
    """Write the plots of ``run_dir`` into ``run_dir/plots``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    name = run_dir.name
    if cost_limit is None and cfg is not None:
        limit = cfg.agent.kwargs.get("cost_limit")
        cost_limit = float(limit) if isinstance(limit, int | float) else None
    written: list[Path] = []
    mon = read_monitor(run_dir)
    prog = read_progress(run_dir)

    if len(mon["r"]):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        window = max(5, len(mon["r"]) // 20)
        for ax, key, label, color in (
            (axes[0], "r", "episode return", "tab:blue"),
            (axes[1], "c", "episode cost", "tab:red"),
        ):
            if not len(mon[key]):
                ax.set_visible(False)
                continue
            steps = mon["steps"][: len(mon[key])]
            ax.plot(steps, mon[key], color=color, alpha=0.25, lw=0.8, label="per episode")
            ax.plot(
                steps,
                _moving_mean(mon[key], window),
                color=color,
                lw=2,
                label=f"moving mean ({window} episodes)",
            )
            ax.set_xlabel("env steps")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        if cost_limit is not None and len(mon["c"]):
            axes[1].axhline(
                cost_limit, color="black", ls="--", lw=1.2, label=f"cost limit ({cost_limit:g})"
            )
        for ax in axes:
            if ax.get_visible():
                ax.legend(loc="best", fontsize=8)
        fig.suptitle(f"{name}: return and cost")
        written.append(_save(fig, out_dir / "return_cost.png", plt))

    lam = prog.get("train/lagrange_multiplier")
    x = prog.get("time/total_timesteps")
    if lam is not None and x is not None and np.isfinite(lam).any():
        fig, ax = plt.subplots(figsize=(6, 4))
        ok = np.isfinite(lam)
        ax.plot(x[ok], lam[ok], color="tab:purple", lw=2)
        ax.set_xlabel("env steps")
        ax.set_ylabel("Lagrange multiplier λ")
        ax.grid(alpha=0.3)
        ax.set_title(f"{name}: Lagrange multiplier")
        written.append(_save(fig, out_dir / "lagrange.png", plt))

    hist = run_dir / "curriculum_history.npz"
    if hist.is_file():
        from gymcurric.train._callbacks import read_history_arrays

        h = read_history_arrays(hist)
        if h["probs"].size:
            written.append(_curriculum_plot(h, name, out_dir, plt))

    beta = prog.get("semantics/beta")
    if beta is not None and x is not None and np.isfinite(beta).any():
        fig, ax = plt.subplots(figsize=(6, 4))
        ok = np.isfinite(beta)
        ax.plot(x[ok], beta[ok], color="tab:green", lw=2, label="β (shaping weight)")
        ax.set_xlabel("env steps")
        ax.set_ylabel("β")
        margin = prog.get("semantics/norm_margin")
        if margin is not None and np.isfinite(margin).any():
            ax2 = ax.twinx()
            okm = np.isfinite(margin)
            ax2.plot(x[okm], margin[okm], color="tab:orange", lw=1.5, label="normalised margin")
            ax2.set_ylabel("normalised margin (safe minus unsafe)")
            ax2.legend(loc="upper right", fontsize=8)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title(f"{name}: semantic shaping")
        written.append(_save(fig, out_dir / "shaping.png", plt))
    return written


def _curriculum_plot(h: dict[str, np.ndarray], name: str, out_dir: Path, plt: Any) -> Path:
    probs, keys, steps = h["probs"], h["keys"], h["steps"]
    order = np.argsort(-probs.mean(axis=0), kind="stable")[:40]
    ratio = h.get("explore_ratio", np.zeros(0))
    has_ratio = bool(np.isfinite(ratio).any())
    fig, axes = plt.subplots(
        2 if has_ratio else 1,
        1,
        figsize=(9, 6 if has_ratio else 4.5),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 1]} if has_ratio else None,
    )
    ax = axes[0, 0]
    # the distribution at the end of rollout i is drawn over that rollout's steps
    x_edges = np.concatenate([[0.0], steps.astype(float)])
    y_edges = np.arange(len(order) + 1) - 0.5
    img = ax.pcolormesh(x_edges, y_edges, probs[:, order].T, cmap="viridis", shading="flat")
    ax.set_ylabel("task (sorted by mean probability)")
    if len(order) <= 20:
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([str(int(k)) for k in keys[order]], fontsize=7)
    fig.colorbar(img, ax=list(axes[:, 0]), label="sampling probability", pad=0.02)
    ax.set_title(f"{name}: curriculum task distribution (after each rollout)")
    if has_ratio:
        ax2 = axes[1, 0]
        ax2.step(x_edges, np.append(ratio[:1], ratio), where="pre", color="tab:orange", lw=2)
        ax2.set_ylabel("explore ratio (rho)")
        ax2.set_ylim(0, 1)
        ax2.grid(alpha=0.3)
        ax2.set_xlabel("env steps")
    else:
        ax.set_xlabel("env steps")
    return _save(fig, out_dir / "curriculum.png", plt, tight=False)


def _steps_axis(fig: Any) -> None:
    # 150000 -> "150k": long step counts otherwise run into each other
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(
        lambda x, _: (
            f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"
        )
    )
    for ax in fig.axes:
        if ax.get_xlabel() == "env steps" or ax.get_shared_x_axes().get_siblings(ax) != [ax]:
            ax.xaxis.set_major_formatter(fmt)


def _save(fig: Any, path: Path, plt: Any, tight: bool = True) -> Path:
    _steps_axis(fig)
    if tight:  # (a colorbar shared by stacked axes keeps the layout it was given)
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
