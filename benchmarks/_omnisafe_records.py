"""The common run record of ``omnisafe_side_by_side.py``: one schema for both libraries.

Every run writes, under ``--out``:

- ``<lib>__<algo>__s<seed>.csv``: one row per epoch, columns :data:`COLUMNS`;
- ``<lib>__<algo>__s<seed>_episodes.csv``: every finished episode (:data:`EPISODE_COLUMNS`);
- ``<lib>__<algo>__s<seed>.json``: what ran (config, versions, wall time).

The window means of an epoch row are computed here, from the episode records, by one function
(:func:`epoch_rows`) for both libraries, so that they mean the same thing:

- ``ep_ret``, ``ep_cost``, ``ep_len``: means over the last :data:`WINDOW` (100) episodes
  finished by the end of the epoch (NaN until one has finished);
- ``ep_ret_w50``, ``ep_cost_w50``: the same over the last 50, the window OmniSafe 0.5.0's
  on-policy logger uses for ``Metrics/EpRet``/``EpCost`` and hence for the ``J_c`` its
  Lagrangian and CPO updates read (``register_key('Metrics/EpCost', window_length=50)`` in
  ``policy_gradient.py``; ``logger_cfgs.window_lens`` is never read by them);
- ``episodes``: episodes finished so far;
- ``lagrange_multiplier``: λ after the epoch's update (NaN where there is none, e.g. CPO);
- ``wall_s``: seconds since training began (OmniSafe: its ``Time/Total``, from the start of
  ``learn()``; gymcurric: from SB3's ``on_training_start``, after the env's first reset);
- ``steps_per_s``: ``env_steps / wall_s``, training and updates included;
- ``cpu_s``, ``steps_per_cpu_s``: the same with the process's CPU time (``time.process_time``
  over the same span): on a loaded host wall time measures the neighbours too, CPU time
  much less so (NaN when unknown, e.g. a ``progress.csv`` converted without our runner).

:func:`convert_progress` turns OmniSafe's ``progress.csv`` into these rows; without the
episode file (which only our runner writes) it falls back to OmniSafe's own 50-episode
window for both window columns' places it can fill (``ep_*_w50``) and leaves the 100-episode
ones NaN.
"""

from __future__ import annotations

import contextlib
import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

LIBS = ("omnisafe", "gymcurric")
ALGOS = ("ppolag", "cppopid", "cpo")
WINDOW = 100
OMNISAFE_WINDOW = 50
COLUMNS = (
    "epoch",
    "env_steps",
    "ep_ret",
    "ep_cost",
    "ep_len",
    "episodes",
    "ep_ret_w50",
    "ep_cost_w50",
    "lagrange_multiplier",
    "wall_s",
    "steps_per_s",
    "cpu_s",
    "steps_per_cpu_s",
)
EPISODE_COLUMNS = ("env_steps", "return", "cost", "length", "wall_s")
# episodes are one tuple each, in EPISODE_COLUMNS order
Episode = tuple[int, float, float, int, float]


def run_stem(lib: str, algo: str, seed: int) -> str:
    return f"{lib}__{algo}__s{seed}"


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def window_means(episodes: Sequence[Episode], window: int) -> tuple[float, float, float]:
    """Mean return, cost and length of the last ``window`` episodes (NaN if there are none)."""
    last = episodes[-window:]
    return (
        _mean([e[1] for e in last]),
        _mean([e[2] for e in last]),
        _mean([float(e[3]) for e in last]),
    )


def epoch_row(
    epoch: int,
    env_steps: int,
    episodes: Sequence[Episode],
    lagrange_multiplier: float,
    wall_s: float,
    cpu_s: float = math.nan,
) -> dict[str, float]:
    """One row of :data:`COLUMNS`; ``episodes`` are those finished by ``env_steps``."""
    ret, cost, length = window_means(episodes, WINDOW)
    ret50, cost50, _ = window_means(episodes, OMNISAFE_WINDOW)
    return {
        "epoch": epoch,
        "env_steps": env_steps,
        "ep_ret": ret,
        "ep_cost": cost,
        "ep_len": length,
        "episodes": len(episodes),
        "ep_ret_w50": ret50,
        "ep_cost_w50": cost50,
        "lagrange_multiplier": lagrange_multiplier,
        "wall_s": wall_s,
        "steps_per_s": env_steps / wall_s if wall_s > 0 else math.nan,
        "cpu_s": cpu_s,
        "steps_per_cpu_s": env_steps / cpu_s if cpu_s > 0 else math.nan,
    }


def epoch_rows(
    epochs: Sequence[tuple[int, float, float, float]], episodes: Sequence[Episode]
) -> list[dict[str, float]]:
    """Rows for epochs given as ``(env_steps at its end, λ, wall_s, cpu_s)``."""
    rows, done = [], 0
    ordered = sorted(episodes, key=lambda e: e[0])
    for i, (steps, lam, wall, cpu) in enumerate(epochs):
        while done < len(ordered) and ordered[done][0] <= steps:
            done += 1
        rows.append(epoch_row(i, int(steps), ordered[:done], lam, wall, cpu))
    return rows


@contextlib.contextmanager
def _replaced(target: Path) -> Iterator[TextIO]:
    """Write beside ``target`` and rename over it once complete (no half-written files)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("w", newline="") as f:
        yield f
    tmp.replace(target)


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with _replaced(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def write_episodes(path: Path, episodes: Sequence[Episode]) -> None:
    with _replaced(path) as f:
        writer = csv.writer(f)
        writer.writerow(EPISODE_COLUMNS)
        writer.writerows(episodes)


def read_rows(path: Path) -> list[dict[str, float]]:
    """A common-schema CSV; a missing column is a clear error naming the file."""
    with path.open() as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"{path}: not a side-by-side run CSV, columns {missing} missing")
        return [{k: float(r[k]) if r[k] != "" else math.nan for k in COLUMNS} for r in reader]


def read_episodes(path: Path) -> list[Episode]:
    with path.open() as f:
        return [
            (
                int(float(r["env_steps"])),
                float(r["return"]),
                float(r["cost"]),
                int(float(r["length"])),
                float(r["wall_s"]),
            )
            for r in csv.DictReader(f)
        ]


def _progress_value(row: dict[str, str], *keys: str) -> float:
    for key in keys:
        if row.get(key) not in (None, ""):
            return float(row[key])
    return math.nan


def convert_progress(
    progress: Path,
    episodes: Sequence[Episode] | None,
    cpu_s: Sequence[float] | None = None,
) -> list[dict[str, float]]:
    """OmniSafe's ``progress.csv`` as rows of :data:`COLUMNS`.

    Reads ``TotalEnvSteps``, ``Time/Total`` and ``Metrics/LagrangeMultiplier`` (PPOLag logs
    it with min/max, as ``.../Mean``; CPPOPID plainly; CPO not at all). With ``episodes``
    (our runner's record of every episode) the window columns are computed by
    :func:`epoch_rows`; without, ``ep_*_w50`` are OmniSafe's own ``Metrics/EpRet`` and
    ``Metrics/EpCost`` and the 100-episode columns are NaN. ``cpu_s``: the process CPU
    seconds at the end of each epoch, as our runner records them (else NaN).
    """
    with progress.open() as f:
        reader = csv.DictReader(f)
        needed = ("TotalEnvSteps", "Time/Total", "Metrics/EpRet", "Metrics/EpCost")
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"{progress}: not an OmniSafe progress.csv, columns {missing} missing")
        raw = list(reader)
    if cpu_s is not None and len(cpu_s) != len(raw):
        raise SystemExit(f"{progress}: {len(raw)} epochs but {len(cpu_s)} CPU times recorded")
    epochs = [
        (
            int(float(r["TotalEnvSteps"])),
            _progress_value(r, "Metrics/LagrangeMultiplier", "Metrics/LagrangeMultiplier/Mean"),
            float(r["Time/Total"]),
            cpu_s[i] if cpu_s is not None else math.nan,
        )
        for i, r in enumerate(raw)
    ]
    if episodes is not None:
        return epoch_rows(epochs, episodes)
    rows = []
    for i, ((steps, lam, wall, cpu), r) in enumerate(zip(epochs, raw, strict=True)):
        row = epoch_row(i, steps, [], lam, wall, cpu)
        row["episodes"] = math.nan
        row["ep_ret_w50"] = float(r["Metrics/EpRet"])
        row["ep_cost_w50"] = float(r["Metrics/EpCost"])
        rows.append(row)
    return rows


def check_against_progress(rows: Sequence[dict[str, float]], progress: Path) -> list[str]:
    """Epochs where our 50-episode window differs from OmniSafe's logged one (should be none).

    OmniSafe logs ``0`` for an epoch before any episode ended; those epochs are skipped.
    """
    with progress.open() as f:
        raw = list(csv.DictReader(f))
    problems = []
    for row, r in zip(rows, raw, strict=False):
        if row["episodes"] == 0:
            continue
        for ours, theirs in (("ep_ret_w50", "Metrics/EpRet"), ("ep_cost_w50", "Metrics/EpCost")):
            if not math.isclose(row[ours], float(r[theirs]), rel_tol=1e-4, abs_tol=1e-4):
                problems.append(
                    f"epoch {int(row['epoch'])}: {ours} {row[ours]:.4f} vs {theirs} {r[theirs]}"
                )
    return problems
