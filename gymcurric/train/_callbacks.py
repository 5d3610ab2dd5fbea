"""SB3 callbacks of the training runner: progress and the curriculum's distribution over time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import KVWriter, filter_excluded_keys

from gymcurric._npz import read_npz
from gymcurric.errors import DataError

__all__ = [
    "CurriculumHistory",
    "ProgressCSV",
    "ProgressCallback",
    "StopAtEpisodes",
    "read_history",
    "read_history_arrays",
]

_HISTORY_MEMBERS = ("steps", "keys", "probs", "explore_ratio")


class ProgressCallback(BaseCallback):
    """Report the env steps of every vector step to ``update(n)`` (a progress bar)."""

    def __init__(self, update: Callable[[int], None]) -> None:
        super().__init__()
        self._update = update

    def _on_step(self) -> bool:
        self._update(self.training_env.num_envs)
        return True


class StopAtEpisodes(BaseCallback):
    """End training once the datapack curriculum has counted ``episodes`` episodes."""

    def __init__(self, curriculum: Any, episodes: int) -> None:
        super().__init__()
        self.curriculum, self.episodes = curriculum, episodes

    @property
    def reached(self) -> bool:
        return bool(self.curriculum.episode >= self.episodes)

    def _on_step(self) -> bool:
        return not self.reached


class CurriculumHistory(BaseCallback):
    """Record the curriculum's task distribution after every rollout (for the heatmap).

    Keeps ``(num_timesteps, task keys, probabilities)`` per rollout; :meth:`save` writes them as
    one ``.npz`` (``steps``, ``keys`` (the union of keys seen, sorted), ``probs`` of shape
    ``(rollouts, len(keys))``, ``explore_ratio`` when the pool reports one).
    """

    def __init__(self, curriculum: Any) -> None:
        super().__init__()
        self.curriculum = curriculum
        self.rows: list[tuple[int, np.ndarray, np.ndarray, float]] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        keys, probs = self.curriculum.probabilities()
        ratio = self.curriculum.stats().get("curriculum/explore_ratio", float("nan"))
        self.rows.append(
            (
                int(self.num_timesteps),
                np.asarray(keys, np.int64),
                np.asarray(probs, np.float64),
                float(ratio),
            )
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The history as arrays (see the class docstring)."""
        if not self.rows:
            return {
                "steps": np.zeros(0, np.int64),
                "keys": np.zeros(0, np.int64),
                "probs": np.zeros((0, 0)),
                "explore_ratio": np.zeros(0),
            }
        keys = np.unique(np.concatenate([r[1] for r in self.rows]))
        probs = np.zeros((len(self.rows), len(keys)))
        for i, (_, k, p, _) in enumerate(self.rows):
            probs[i, np.searchsorted(keys, k)] = p
        return {
            "steps": np.array([r[0] for r in self.rows], np.int64),
            "keys": keys,
            "probs": probs,
            "explore_ratio": np.array([r[3] for r in self.rows]),
        }

    def save(self, path: str | Path) -> None:
        """Write :meth:`arrays` to ``path`` (``.npz``)."""
        a = self.arrays()
        np.savez(
            path,
            steps=a["steps"],
            keys=a["keys"],
            probs=a["probs"],
            explore_ratio=a["explore_ratio"],
        )

    def load(self, path: str | Path) -> None:
        """Restore the rows written by :meth:`save` (when resuming).

        Raises:
            FileNotFoundError: there is no file at ``path``.
            DataError: the file is damaged or malformed (the message names the file and the
                member at fault); the rows are left as they were.
        """
        self.rows = read_history(path)


def _history_problem(a: dict[str, np.ndarray]) -> str | None:
    """What is wrong with the members of a history file, or None."""
    missing = [k for k in _HISTORY_MEMBERS if k not in a]
    if missing:
        return f"missing member(s) {missing}"
    steps, keys, probs, ratio = (a[k] for k in _HISTORY_MEMBERS)
    for name, arr in (("steps", steps), ("keys", keys)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            return f"member {name!r} must be a 1-D integer array; got {arr.dtype}{arr.shape}"
    for name, arr, shape in (
        ("probs", probs, (len(steps), len(keys))),
        ("explore_ratio", ratio, (len(steps),)),
    ):
        if arr.dtype.kind != "f" or arr.shape != shape:
            return (
                f"member {name!r} must be a float array of shape {shape} (from 'steps' and "
                f"'keys'); got {arr.dtype}{arr.shape}"
            )
    if (steps < 0).any() or (np.diff(steps) < 0).any():
        return "member 'steps' must be non-decreasing step counts >= 0"
    if (keys < 0).any() or (np.diff(keys) <= 0).any():
        return "member 'keys' must be increasing task keys >= 0"
    if not np.isfinite(probs).all() or (probs < 0).any() or (probs.sum(axis=1) > 1 + 1e-6).any():
        return "member 'probs' must hold finite probabilities >= 0 summing to at most 1 per row"
    ok = np.isnan(ratio) | ((ratio >= 0) & (ratio <= 1))
    if not ok.all():
        return "member 'explore_ratio' must hold values in [0, 1] (or NaN)"
    return None


def read_history_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The members of a ``curriculum_history.npz``, checked (``steps``, ``keys``, ``probs``...).

    Raises:
        FileNotFoundError: there is no file at ``path``.
        DataError: the file is damaged or malformed; the message names the file and what is
            wrong.
    """
    a = read_npz(path, "curriculum history file")
    problem = _history_problem(a)
    if problem is not None:
        raise DataError(f"{os.fspath(path)}: not a curriculum history file: {problem}")
    return a


def read_history(path: str | Path) -> list[tuple[int, np.ndarray, np.ndarray, float]]:
    """The rows of a ``curriculum_history.npz`` written by :meth:`CurriculumHistory.save`.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        DataError: the file is damaged or malformed; the message names the file and what is
            wrong.
    """
    a = read_history_arrays(path)
    steps, keys, probs, ratio = (a[k] for k in _HISTORY_MEMBERS)
    rows = []
    for i in range(len(steps)):
        live = probs[i] > 0
        rows.append((int(steps[i]), keys[live], probs[i][live], float(ratio[i])))
    return rows


class ProgressCSV(KVWriter):
    """``progress.csv`` with a deterministic column order, that a resumed run appends to.

    SB3's own CSV writer orders new columns as a Python set does (it changes from process to
    process) and truncates the file when opened. Here new columns are added in sorted order
    after the existing ones, and an existing file is continued.
    """

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self.keys: list[str] = []
        if append and self.path.is_file() and self.path.stat().st_size > 0:
            with open(self.path) as f:
                self.keys = f.readline().rstrip("\n").split(",")
            self.file = open(self.path, "a")  # noqa: SIM115 - closed in close()
        else:
            self.file = open(self.path, "w")  # noqa: SIM115

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0
    ) -> None:
        """Append one row (rewriting the header when new keys appear)."""
        kv = filter_excluded_keys(key_values, key_excluded, "csv")
        new = sorted(k for k in kv if k not in self.keys)
        if new:
            self.file.close()
            lines = self.path.read_text().splitlines()[1:] if self.keys else []
            self.keys.extend(new)
            pad = "," * len(new)
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w") as f:
                f.write(",".join(self.keys) + "\n")
                for line in lines:
                    f.write(line + pad + "\n")
            os.replace(tmp, self.path)
            self.file = open(self.path, "a")  # noqa: SIM115
        cells = []
        for key in self.keys:
            v = kv.get(key)
            if v is None:
                cells.append("")
            elif isinstance(v, str):
                cells.append('"' + v.replace('"', '""') + '"')
            elif isinstance(v, float | int | np.floating | np.integer):
                cells.append(str(v))
            else:
                cells.append("")  # images, figures, videos: not for CSV
        self.file.write(",".join(cells) + "\n")
        self.file.flush()

    def close(self) -> None:
        """Close the file."""
        self.file.close()
