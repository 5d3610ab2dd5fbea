"""The records side of ``semantic_safety.py``: summary tables and figures, from records alone.

:func:`summarise` prints, per env: the start-up probe of each prompt set; the primary metrics
against ``ppolag`` (paired by seed) with the pre-registered goal's verdict and the secondary
non-inferiority criterion (:mod:`_semantic_goal`); the diagnostics (λ final, max and mean, risk
modulation, the risk head's correlation and calibration, the CPU-time overhead); prompt
sensitivity (probe AUC against the cost ratio); ``null`` against ``ppolag`` bit for bit;
where in training the violations happened (:func:`tenths`); every seed; the provenance. Then
the goal on both envs, and an exploratory section (not pre-registered): the cost above the
limit. :func:`figures` draws the curves, the risk heads' calibration and the
probe-against-benefit plot.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _semantic_goal import (
    BASE,
    GOAL_RATIO,
    GUIDED,
    NI_MARGIN,
    PLANNED_SEEDS,
    SHAPED,
    arm_goal,
    goal_verdict,
    ni_margin,
    non_inferior,
    primary,
)
from _semantic_goal import arm as _arm
from _semantic_goal import by_seed as _by_seed
from _semantic_metrics import over_budget, paired_diff, paired_ratio, run_metrics
from _semantic_prompts import NO_PROMPTS, PRIMARY, PROMPT_NAMES
from _stats import ci95

__all__ = [
    "GOAL_RATIO",
    "NI_MARGIN",
    "figures",
    "goal_verdict",
    "load_records",
    "non_inferior",
    "summarise",
    "tenths",
]

ORDER = ("ppolag", "null", "pbrs", "additive", "risk", "pbrs_risk")


def load_records(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(complete records with their ``metrics`` recomputed, incomplete ones) under ``out``."""
    done, partial = [], []
    for path in sorted(out.glob("*-seed*.json")):
        try:
            r = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            continue
        if r.get("complete"):
            r["metrics"] = run_metrics(r)  # from the raw rows and episodes, not the stored copy
            done.append(r)
        else:
            partial.append(r)
    return done, partial


def _arms(rs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    arms = {_arm(r) for r in rs}
    rank = {c: i for i, c in enumerate(ORDER)}
    prank = {p: i for i, p in enumerate((NO_PROMPTS, *PROMPT_NAMES))}
    return sorted(arms, key=lambda a: (rank.get(a[0], 99), a[0], prank.get(a[1], 99), a[1]))


def _mci(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    v = [x for x in values if np.isfinite(x)]
    if not v:
        return "—"
    if len(v) == 1:  # one seed has no interval (ci95's half-width 0 would read as certainty)
        return f"{fmt.format(v[0])} (n=1)"
    m, h = ci95(v)
    return f"{fmt.format(m)} ± {fmt.format(h)}"


def _pr(p: tuple[float, float, float, int] | None, fmt: str = "{:.2f}") -> str:
    if p is None:
        return "—"
    return f"{fmt.format(p[0])} [{fmt.format(p[1])}, {fmt.format(p[2])}]"


def _secondary(rs: list[dict[str, Any]], arms: list[tuple[str, str]]) -> list[str]:
    """The pre-registered secondary criterion (README, Goal, *Confirmed*) per primary arm."""
    pct = f"{NI_MARGIN * 100:g} %"
    lines = [
        f"Secondary criterion (pre-registered): last-10 % return non-inferior at a margin of "
        f"{pct}: the lower end of the paired difference's bootstrap 95 % CI above "
        f"-{pct} of (the size of) ppolag's mean last-10 % return (same seeds).",
        "",
        f"| condition | prompts | n | last-10 % return Δ | -{pct} of ppolag's | non-inferior |",
        "|---|---|---|---|---|---|",
    ]
    for a in [a for a in arms if primary(a)]:
        g = arm_goal(rs, a)
        n = g["d_ret"][3] if g["d_ret"] else 0
        margin = _f(-ni_margin(g["base_mean"]), "{:.2f}")
        lines.append(f"| {a[0]} | {a[1]} | {n} | {_pr(g['d_ret'])} | {margin} | {g['ni']} |")
    return lines


def _goal_both(records: list[dict[str, Any]], envs: Sequence[str]) -> list[str]:
    """The goal as pre-registered: the same condition meets it on every env of the study."""
    lines = [
        "## Goal on both envs (pre-registered)",
        "",
        "The goal is met when the same condition meets it (cumulative cost ratio and last-10 % "
        f"return, prompts '{PRIMARY}') on every env: {', '.join(envs)}. Per env: the verdict "
        "and the number of paired seeds (a verdict on fewer seeds than planned is provisional; "
        "no correction for the four comparisons).",
        "",
        f"| condition | prompts | {' | '.join(envs)} | goal |",
        "|---|---|" + "---|" * len(envs) + "---|",
    ]
    for cond in GUIDED:
        arm = (cond, PRIMARY if cond in SHAPED else NO_PROMPTS)
        cells, verdicts, final = [], [], []
        for env in envs:
            g = arm_goal([r for r in records if r["env"] == env], arm)
            n = min(g["ratio"][3], g["d_ret"][3]) if g["ratio"] and g["d_ret"] else 0
            verdicts.append(g["verdict"])
            final.append(n >= PLANNED_SEEDS)
            cells.append(f"{g['verdict']} (n={n})")
        if all(v in ("**met**", "**strict**") for v in verdicts):
            overall = "**met**" + ("" if all(final) else " (provisional)")
        elif any(v == "no" and f for v, f in zip(verdicts, final, strict=True)):
            overall = "no"
        elif "no" in verdicts:
            overall = "no (provisional)"
        else:
            overall = "— (pending)"
        lines.append(f"| {arm[0]} | {arm[1]} | {' | '.join(cells)} | {overall} |")
    return lines


def _env_summary(env: str, rs: list[dict[str, Any]], probe: dict[str, Any] | None) -> list[str]:
    first = rs[0]["config"]
    seeds = sorted({r["seed"] for r in rs})
    lines = [
        f"## {env}: {first['env_id']}, {first['budget']:,} steps, cost limit "
        f"{first['lagrangian']['cost_limit']:g}, seeds {seeds}",
        "",
    ]
    probe = probe or next((r["probe"] for r in rs if r.get("probe")), None)
    if probe:
        lines += [
            f"Start-up probe: {probe['states']:,} states of a random walk "
            f"({probe['distinct_captions']} distinct captions), {probe['unsafe_soon']} unsafe "
            f"within {probe['soon_horizon']} steps, {probe['unsafe_now']} inside a hazard.",
            "",
            "| prompts | AUC soon | AUC now | margin inside / safe | warning |",
            "|---|---|---|---|---|",
        ]
        for name, p in probe["sets"].items():
            lines.append(
                f"| {name} | {_f(p['auc_soon'], '{:.3f}')} | {_f(p['auc_now'], '{:.3f}')} | "
                f"{_f(p['margin_unsafe_now'], '{:+.3f}')} / {_f(p['margin_safe'], '{:+.3f}')} | "
                f"{'yes' if p['warning'] else ''} |"
            )
        lines.append("")
    arms = _arms(rs)
    base = BASE
    m = {a: [r["metrics"] for r in rs if _arm(r) == a] for a in arms}
    lines += [
        f"Primary metrics (mean ± 95 % t CI over seeds; x / Δ: against ppolag paired by seed, "
        f"bootstrap 95 % CI). Goal: cumulative cost ≤ {GOAL_RATIO:.0%} of ppolag's (CI < 1) "
        f"at a last-10 % return not significantly worse; judged on prompts '{PRIMARY}'.",
        "",
        "| condition | prompts | n | cumulative cost | x ppolag | return AUC 20 % | Δ | "
        "last-10 % return | Δ | last-10 % cost | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        g = arm_goal(rs, a)
        ratio, d_ret = g["ratio"], g["d_ret"]
        d_auc = paired_diff(_by_seed(rs, a, "return_auc20"), _by_seed(rs, base, "return_auc20"))
        lines.append(
            f"| {a[0]} | {a[1]} | {len(m[a])} | {_mci([x['cum_cost'] for x in m[a]], '{:,.0f}')}"
            f" | {_pr(ratio) if a != base else '1'} | "
            f"{_mci([x['return_auc20'] for x in m[a]])} | {_pr(d_auc) if a != base else ''} | "
            f"{_mci([x['last10_return'] for x in m[a]])} | {_pr(d_ret) if a != base else ''} | "
            f"{_mci([x['last10_cost'] for x in m[a]])} | "
            f"{g['verdict'] if primary(a) else ''} |"
        )
    lines += ["", *_secondary(rs, arms)]
    lines += [
        "",
        "Diagnostics: λ after each update (final, max, mean over updates); M, the risk "
        "modulation scale (mean over updates); the risk head's Pearson correlation with the "
        "realised cost-to-go and its expected calibration error, second half of training; CPU "
        "steps/s and its ratio to ppolag's (paired); distinct captions MiniLM embedded.",
        "",
        "| condition | prompts | final λ | max λ | mean λ | mean M | risk corr | ECE | "
        "CPU steps/s | x ppolag | captions embedded |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        mods = [
            float(np.nanmean([_f0(row.get("mod")) for row in r["rows"]]))
            for r in rs
            if _arm(r) == a and any(row.get("mod") is not None for row in r["rows"])
        ]
        sps = paired_ratio(
            _by_seed(rs, a, "cpu_steps_per_s"), _by_seed(rs, base, "cpu_steps_per_s")
        )
        lines.append(
            f"| {a[0]} | {a[1]} | {_mci([x['final_lambda'] for x in m[a]])} | "
            f"{_mci([x['max_lambda'] for x in m[a]])} | "
            f"{_mci([x['mean_lambda'] for x in m[a]])} | {_mci(mods)} | "
            f"{_mci([x['risk_corr'] for x in m[a]])} | "
            f"{_mci([x['risk_ece'] for x in m[a]], '{:.3f}')} | "
            f"{_mci([x['cpu_steps_per_s'] for x in m[a]], '{:.0f}')} | "
            f"{_pr(sps) if a != base else '1'} | "
            f"{_mci([_f0(r.get('captions_embedded')) for r in rs if _arm(r) == a], '{:,.0f}')} |"
        )
    lines += ["", *_sensitivity(rs, probe), "", *_parity(rs), "", *_deciles(rs, arms)]
    lines += ["", *_per_seed(rs, arms, seeds), "", *_provenance(rs, arms)]
    return lines


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None or not np.isfinite(x) else fmt.format(x)


def _f0(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _sensitivity(rs: list[dict[str, Any]], probe: dict[str, Any] | None) -> list[str]:
    """Probe AUC per prompt set against each shaped condition's cost ratio to ppolag."""
    base = _by_seed(rs, ("ppolag", NO_PROMPTS), "cum_cost")
    conds = [c for c in SHAPED if any(r["condition"] == c for r in rs)]
    if not probe or not conds:
        return []
    lines = [
        "Prompt sensitivity: cumulative cost x ppolag (paired bootstrap 95 % CI) per prompt set",
        "",
        f"| prompts | probe AUC soon | {' | '.join(conds)} |",
        "|---|---|" + "---|" * len(conds),
    ]
    for name, p in probe["sets"].items():
        cells = [_pr(paired_ratio(_by_seed(rs, (c, name), "cum_cost"), base)) for c in conds]
        lines.append(f"| {name} | {_f(p['auc_soon'], '{:.3f}')} | {' | '.join(cells)} |")
    return lines


PARITY_ROW_KEYS = ("t", "ret", "cost", "eps", "step_cost", "viol", "cum_cost", "lambda")
PARITY_KEYS = ("episodes", "cum_cost", "violation_steps", "trained_steps")


def _parity(rs: list[dict[str, Any]]) -> list[str]:
    """``null`` against ``ppolag`` per seed: the same record, bit for bit?

    Compared as recorded: every episode (end step, return rounded to 5 decimals, cost,
    length), every rollout row's step counter, episode means, step costs and λ
    (:data:`PARITY_ROW_KEYS`), and the totals. Not compared: what only ``null`` has (M, its
    risk heads, the shaping telemetry at β = 0) and timings.
    """
    out = []
    for r in [r for r in rs if r["condition"] == "null"]:
        base = next((b for b in rs if b["condition"] == "ppolag" and b["seed"] == r["seed"]), None)
        if base is None:
            continue
        same = all(r.get(k) == base.get(k) for k in PARITY_KEYS) and [
            [row.get(k) for k in PARITY_ROW_KEYS] for row in r["rows"]
        ] == [[row.get(k) for k in PARITY_ROW_KEYS] for row in base["rows"]]
        out.append(f"seed {r['seed']}: {'identical' if same else 'DIFFERENT'}")
    if not out:
        return []
    return [
        "null against ppolag (episodes, per-rollout costs and λ, totals; as recorded, bit for "
        "bit): " + "; ".join(out)
    ]


def tenths(rows: Sequence[dict[str, Any]], budget: int) -> np.ndarray:
    """Each tenth of the budget's share of the rollouts' step cost, split by steps.

    A rollout ``(t_prev, t]`` that straddles a tenth's end gives each tenth the part of its
    cost proportional to its steps there (the record keeps no per-step cost); steps trained
    past the budget (SB3 finishes the last rollout) count in the last tenth; a null cost (not
    finite when recorded) is NaN, and so are the tenths it touches. Example: budget
    100, rollouts (0, 8] and (8, 16] with cost 8 each: the first tenth gets 8 + 2, the second 6.
    """
    out = np.zeros(10)
    edges = np.linspace(0.0, float(budget), 11)
    prev = 0.0
    for row in rows:
        t, c = float(row["t"]), row["step_cost"]
        c = math.nan if c is None else float(c)  # a record's null: not finite when run
        if t > prev:
            lo, hi = np.maximum(edges[:-1], prev), np.minimum(edges[1:], t)
            hi[-1] = t  # past the budget: the last tenth
            out += c * np.clip(hi - lo, 0.0, None) / (t - prev)
        prev = t
    return out


def _deciles(rs: list[dict[str, Any]], arms: list[tuple[str, str]]) -> list[str]:
    """Each arm's mean share of its cumulative cost per tenth of training."""
    lines = [
        "Where the violations happened: share of the cumulative cost per tenth of training",
        "",
        "| condition | prompts | "
        + " | ".join(f"{10 * i}-{10 * i + 10} %" for i in range(10))
        + " |",
        "|---|---|" + "---|" * 10,
    ]
    for a in arms:
        shares = []
        for r in [r for r in rs if _arm(r) == a]:
            per_tenth = tenths(r["rows"], r["config"]["budget"])
            total = per_tenth.sum()
            if total > 0:
                shares.append(per_tenth / total)
        if shares:
            cells = " | ".join(f"{s:.0%}" for s in np.mean(shares, axis=0))
            lines.append(f"| {a[0]} | {a[1]} | {cells} |")
    return lines


def _per_seed(rs: list[dict[str, Any]], arms: list[tuple[str, str]], seeds: list[int]) -> list[str]:
    head = " | ".join(f"{c} {p}" if p != NO_PROMPTS else c for c, p in arms)
    lines = [
        "Per seed: cumulative cost / last-10 % return",
        "",
        f"| seed | {head} |",
        "|---" * (len(arms) + 1) + "|",
    ]
    for s in seeds:
        cells = []
        for a in arms:
            r = next((r for r in rs if _arm(r) == a and r["seed"] == s), None)
            x = None if r is None else r["metrics"]
            cells.append("" if x is None else f"{x['cum_cost']:,.0f} / {x['last10_return']:.2f}")
        lines.append(f"| {s} | {' | '.join(cells)} |")
    return lines


def _provenance(rs: list[dict[str, Any]], arms: list[tuple[str, str]]) -> list[str]:
    out = ["Provenance (+: gymcurric/ had uncommitted changes):"]
    for a in arms:
        group = [r for r in rs if _arm(r) == a]
        commits = sorted(
            {(r["commit"] or "?")[:9] + ("+" if r["gymcurric_modified"] else "") for r in group}
        )
        configs = {json.dumps(r["config"], sort_keys=True) for r in group}
        load = [r.get("load_average_start", math.nan) for r in group]
        note = (
            f"- {a[0]} {a[1]}: gymcurric {', '.join(commits)}, load average at the start "
            f"{np.nanmin(load):.1f}-{np.nanmax(load):.1f}"
        )
        if len(configs) > 1:
            note += f"; WARNING: {len(configs)} different configs across seeds"
        out.append(note)
    return out


def _over_budget(env: str, rs: list[dict[str, Any]]) -> list[str]:
    """Per arm: episodes, ``limit x episodes``, the cost above it and its ratio to ppolag's."""
    arms = _arms(rs)
    base = ("ppolag", NO_PROMPTS)
    runs = {a: {r["seed"]: over_budget(r) for r in rs if _arm(r) == a} for a in arms}
    limits = sorted({float(r["config"]["lagrangian"]["cost_limit"]) for r in rs})

    def values(a: tuple[str, str], key: str) -> dict[int, float]:
        return {s: v[key] for s, v in runs.get(a, {}).items()}

    lines = [
        f"### {env}: cost above the limit (cost limit {', '.join(f'{x:g}' for x in limits)})",
        "",
        "| condition | prompts | n | episodes | limit x episodes | over-budget Σ(c - limit) | "
        "x ppolag |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        ratio = paired_ratio(values(a, "over_budget"), values(base, "over_budget"))
        lines.append(
            f"| {a[0]} | {a[1]} | {len(runs[a])} | "
            f"{_mci(list(values(a, 'episodes').values()), '{:,.0f}')} | "
            f"{_mci(list(values(a, 'allowed').values()), '{:,.0f}')} | "
            f"{_mci(list(values(a, 'over_budget').values()), '{:,.0f}')} | "
            f"{_pr(ratio) if a != base else '1'} |"
        )
    seeds = sorted({r["seed"] for r in rs})
    head = " | ".join(f"{c} {p}" if p != NO_PROMPTS else c for c, p in arms)
    lines += ["", "Per seed: over-budget cost", "", f"| seed | {head} |"]
    lines.append("|---" * (len(arms) + 1) + "|")
    for s in seeds:
        cells = [f"{runs[a][s]['over_budget']:,.0f}" if s in runs[a] else "" for a in arms]
        lines.append(f"| {s} | {' | '.join(cells)} |")
    return lines


def summarise(
    records: list[dict[str, Any]],
    partial: Sequence[dict[str, Any]] = (),
    probes: dict[str, dict[str, Any]] | None = None,
    envs: Sequence[str] | None = None,
) -> str:
    """The tables for every env the records cover (see the module docstring).

    ``envs``: the envs the goal must hold on (default: the study's, ``_semantic_setup.ENVS``,
    and any other env in the records).
    """
    lines: list[str] = []
    for env in sorted({r["env"] for r in records}):
        lines += _env_summary(env, [r for r in records if r["env"] == env], (probes or {}).get(env))
        lines.append("")
    if records:
        if envs is None:
            from _semantic_setup import ENVS

            envs = [*ENVS, *sorted({r["env"] for r in records} - set(ENVS))]
        lines += [*_goal_both(records, envs), ""]
        lines += [
            "## Over-budget cost (exploratory, not pre-registered)",
            "",
            "Not part of the pre-registration; no goal is judged on it. A Lagrangian agent is "
            "asked to hold the mean episode cost at its limit, so `limit x episodes` of the "
            "cumulative cost is cost the constraint allows; the over-budget cost, Σ over "
            "finished episodes of (episode cost - limit), is the part guidance could remove "
            "(README, HazardNav diagnosis). Mean ± 95 % t CI over seeds; x ppolag: ratio of "
            "means paired by seed, bootstrap 95 % CI, as for the cumulative cost.",
            "",
        ]
        for env in sorted({r["env"] for r in records}):
            lines += [*_over_budget(env, [r for r in records if r["env"] == env]), ""]
    if partial:
        lines.append("Incomplete records (interrupted; rerun by the next study command):")
        lines += [
            f"- {r['env']} {r['condition']} {r['prompts']} seed {r['seed']}: "
            f"{r.get('trained_steps', 0):,} of {r['config']['budget']:,} steps"
            for r in partial
        ]
    return "\n".join(lines) if lines else "no records"


# ----------------------------------------------------------------------------- figures


def _curve(r: dict[str, Any], key: str, grid: np.ndarray) -> np.ndarray:
    t = np.array([row["t"] for row in r["rows"]], dtype=float)
    v = np.array([_f0(row.get(key)) for row in r["rows"]], dtype=float)
    if key in ("ret", "cost"):  # smooth over 5 rollouts, ignoring rollouts without episodes
        ok = np.isfinite(v)
        kernel = np.ones(5)
        num = np.convolve(np.where(ok, v, 0.0), kernel, "same")
        den = np.convolve(ok.astype(float), kernel, "same")
        v = np.where(den > 0, num / np.maximum(den, 1), np.nan)
    idx = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    return v[idx]


def figures(records: list[dict[str, Any]], folder: Path) -> list[Path]:
    """``curves_<env>.png``, ``calibration_<env>.png`` and ``prompts.png`` in ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    panels = (
        ("ret", "episode return (env's own)"),
        ("cost", "episode cost"),
        ("cum_cost", "cumulative training cost"),
        ("lambda", "λ"),
        ("mod", "risk modulation scale M"),
        ("shaping_reward_ratio", "Σ|shaping| / Σ|reward|"),
    )
    for env in sorted({r["env"] for r in records}):
        rs = [r for r in records if r["env"] == env]
        budget = rs[0]["config"]["budget"]
        grid = np.linspace(0, budget, 200)[1:]
        fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
        for i, a in enumerate([a for a in _arms(rs) if a[1] in (PRIMARY, NO_PROMPTS)]):
            group = [r for r in rs if _arm(r) == a]
            for ax, (key, _title) in zip(axes.flat, panels, strict=True):
                ys = np.array([_curve(r, key, grid) for r in group])
                if not np.isfinite(ys).any():
                    continue
                with warnings.catch_warnings():  # all-NaN columns: rollouts without episodes
                    warnings.simplefilter("ignore", RuntimeWarning)
                    mean = np.nanmean(ys, axis=0)
                ax.plot(grid, mean, lw=1.6, color=f"C{i}", label=f"{a[0]} (n={len(group)})")
        for ax, (_, title) in zip(axes.flat, panels, strict=True):
            ax.set(title=title, xlabel="env steps")
            ax.grid(alpha=0.3)
        axes[0][1].axhline(rs[0]["config"]["lagrangian"]["cost_limit"], color="k", ls="--", lw=1)
        axes[0][0].legend(fontsize=8)
        fig.suptitle(f"{env}: mean over seeds, prompts '{PRIMARY}'")
        fig.tight_layout()
        written.append(_save(fig, folder / f"curves_{env}.png", plt))
        risky = [r for r in rs if (r.get("risk_quality") or {}).get("calibration_late")]
        if risky:
            fig, ax = plt.subplots(figsize=(5.5, 5))
            colours = {}
            for r in risky:
                cal = r["risk_quality"]["calibration_late"]
                label = f"{r['condition']} {r['prompts']}"
                colour = colours.setdefault(label, f"C{len(colours)}")
                first = label not in ax.get_legend_handles_labels()[1]
                ax.plot(cal["pred"], cal["real"], "o-", ms=3, color=colour, alpha=0.7,
                        label=label if first else None)  # fmt: skip
            top = max(max(r["risk_quality"]["calibration_late"]["pred"] + [0]) for r in risky)
            ax.plot([0, top], [0, top], "k--", lw=1)
            ax.set(xlabel="predicted cost-to-go (bin mean)", ylabel="realised (bin mean)",
                   title=f"{env}: risk head calibration, 2nd half, per seed")  # fmt: skip
            ax.legend(fontsize=8)
            fig.tight_layout()
            written.append(_save(fig, folder / f"calibration_{env}.png", plt))
    points = _probe_points(records)
    if points:
        fig, ax = plt.subplots(figsize=(6.5, 4.8))
        markers = {"HazardNav": "o", "SafetyPointGoal1": "s"}
        for i, cond in enumerate(SHAPED):
            for env, auc, ratio in [(e, a, q) for e, c, a, q in points if c == cond]:
                ax.scatter(auc, ratio, color=f"C{i}", marker=markers.get(env, "^"))
            ax.scatter([], [], color=f"C{i}", label=cond)
        ax.axhline(1.0, color="k", lw=1)
        ax.axhline(GOAL_RATIO, color="k", ls="--", lw=1)
        ax.set(xlabel="probe ROC AUC (soon)", ylabel="cumulative cost x ppolag",
               title="probe separation against benefit (o HazardNav, s PointGoal1)")  # fmt: skip
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(_save(fig, folder / "prompts.png", plt))
    return written


def _probe_points(records: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    out = []
    for env in sorted({r["env"] for r in records}):
        rs = [r for r in records if r["env"] == env]
        base = _by_seed(rs, ("ppolag", NO_PROMPTS), "cum_cost")
        for cond, prompts in {_arm(r) for r in rs if r["condition"] in SHAPED}:
            r0 = next(r for r in rs if _arm(r) == (cond, prompts))
            ratio = paired_ratio(_by_seed(rs, (cond, prompts), "cum_cost"), base)
            auc = ((r0.get("probe") or {}).get("sets") or {}).get(prompts, {}).get("auc_soon")
            if ratio is not None and auc is not None:
                out.append((env, cond, auc, ratio[0]))
    return out


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
