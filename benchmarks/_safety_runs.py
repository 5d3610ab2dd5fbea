"""Run records of ``benchmarks/safety_gym.py``: per-rollout recording, run CSVs, worker lifetime.

A :class:`Recorder` callback collects one row per rollout (with the diagnostics SB3 logged for
the update that used it) and every finished episode; :func:`write_run_csv` and
:func:`load_run` write and read them as ``runs/<algo>__<env>__s<seed>.csv`` and
``..._episodes.csv``; :func:`exit_with_parent` keeps ``--jobs`` workers from outliving the
main process.
"""

from __future__ import annotations

import contextlib
import csv
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback


def short(name: str) -> str:
    return name.split("/")[-1]


def run_path(out: Path, algo: str, name: str, seed: int) -> Path:
    return out / "runs" / f"{algo}__{short(name)}__s{seed}"


# SB3 train/* keys copied into the per-rollout CSV (the update that used the rollout)
UPDATE_DIAGNOSTICS = (
    "explained_variance",
    "cost_explained_variance",
    "cost_value_loss",
    "cost_advantage_std",
    "approx_kl",
    "clip_fraction",
    "entropy_loss",
    "kappa",  # P3O's penalty weight (it has no λ: its lagrange_multiplier column is NaN)
)


class Recorder(BaseCallback):
    """Episode (timestep, return, cost) and one row per rollout; times from the first reset.

    With ``flush_to`` (a path without suffix) the rows and episodes are rewritten to
    ``<flush_to>.csv`` and ``<flush_to>_episodes.csv`` after every rollout.
    """

    def __init__(self, flush_to: Path | None = None) -> None:
        super().__init__()
        self.episodes: list[tuple[int, float, float]] = []
        self.rows: list[dict[str, float]] = []
        self.flush_to = flush_to
        self._since = 0
        self.t0 = self.c0 = 0.0
        self.wall = self.cpu = 0.0

    def _on_training_start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            ep = info.get("episode")
            if ep is not None:
                self.episodes.append((self.num_timesteps, float(ep["r"]), float(ep["c"])))
        return True

    def _on_rollout_end(self) -> None:
        # SB3 records an update's train/* keys after this callback and dumps (clears) them
        # after the next rollout: here they are the previous rollout's update.
        self._fill_update_diagnostics()
        new = self.episodes[self._since :]
        self._since = len(self.episodes)
        lam = getattr(self.model, "lagrange_multiplier", float("nan"))
        log_std = getattr(self.model.policy, "log_std", None)
        std = float("nan")
        if isinstance(log_std, th.Tensor):  # state-independent Gaussian (Box actions)
            std = float(th.exp(log_std.detach()).mean())
        self.rows.append(
            {
                "timesteps": self.num_timesteps,
                "ep_return": float(np.mean([e[1] for e in new])) if new else float("nan"),
                "ep_cost": float(np.mean([e[2] for e in new])) if new else float("nan"),
                "episodes": len(new),
                "lagrange_multiplier": float(lam),
                "wall_s": time.perf_counter() - self.t0,
                "std": std,
                **dict.fromkeys(UPDATE_DIAGNOSTICS, float("nan")),
            }
        )
        if self.flush_to is not None:
            write_run_csv(self.flush_to, self)

    def _fill_update_diagnostics(self) -> None:
        """Write the last update's ``train/*`` values into the row of the rollout it used."""
        if not self.rows:
            return
        logged = self.model.logger.name_to_value
        for key in UPDATE_DIAGNOSTICS:
            if f"train/{key}" in logged:
                self.rows[-1][key] = float(logged[f"train/{key}"])

    def _on_training_end(self) -> None:
        self._fill_update_diagnostics()  # the last update: recorded, never dumped
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0


@contextlib.contextmanager
def _replaced(target: Path) -> Iterator[TextIO]:
    """Write ``target`` beside it and rename it over ``target`` only once complete."""
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("w", newline="") as f:
        yield f
    tmp.replace(target)


def write_run_csv(path: Path, rec: Any) -> None:
    """``<path>.csv``: one row per rollout; ``<path>_episodes.csv``: one row per episode.

    Each file is written beside its target and renamed over it, so a run killed while writing
    leaves the previous rollout's complete file, never a truncated one.
    """
    with _replaced(path.with_suffix(".csv")) as f:
        writer = csv.DictWriter(f, fieldnames=list(rec.rows[0]) if rec.rows else ["timesteps"])
        writer.writeheader()
        writer.writerows(rec.rows)
    with _replaced(Path(f"{path}_episodes.csv")) as f:
        episodes = csv.writer(f)
        episodes.writerow(["timesteps", "return", "cost"])
        episodes.writerows(rec.episodes)


def load_run(out: Path, algo: str, name: str, seed: int) -> SimpleNamespace | None:
    """A run as written by :func:`write_run_csv` (None if it was never started)."""
    path = run_path(out, algo, name, seed)
    rows_csv, eps_csv = path.with_suffix(".csv"), Path(f"{path}_episodes.csv")
    if not rows_csv.exists():
        return None
    with rows_csv.open() as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    episodes = []
    if eps_csv.exists():
        with eps_csv.open() as f:
            episodes = [
                (int(r["timesteps"]), float(r["return"]), float(r["cost"]))
                for r in csv.DictReader(f)
            ]
    return SimpleNamespace(rows=rows, episodes=episodes, wall=float("nan"), cpu=float("nan"))


def exit_with_parent(parent_pid: int, poll_s: float = 2.0) -> None:
    """Worker initializer: end this worker when the main process is gone.

    The workers are children of the forkserver, not of the main process, and a worker deep in
    ``learn()`` never reads its call queue: killing the main process (SIGTERM, SIGKILL, a lost
    session) would leave it training on. The run CSVs are replaced atomically after every
    rollout, so exiting between two writes loses only the rollout in progress.
    """

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            try:
                os.kill(parent_pid, 0)
            except (ProcessLookupError, PermissionError):  # gone, or its pid reused by another user
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
