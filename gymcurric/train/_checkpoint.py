"""The run directory's checkpoint protocol: complete at every instant, newest one found.

A checkpoint is a folder whose ``manifest.json`` is written last and lists every file of the
folder with its size and SHA-256, the step count, and the size of each log file of the run at
that moment. A folder is *complete* when its manifest parses and every file matches it.

Writing (:func:`commit`), with ``checkpoint/`` complete or absent before and after:

1. the new checkpoint is written into ``checkpoint.tmp/`` (files fsync'ed, manifest last);
2. ``checkpoint/`` is renamed ``checkpoint.old/``;
3. ``checkpoint.tmp/`` is renamed ``checkpoint/``;
4. ``checkpoint.old/`` is deleted.

A kill at any point leaves at least one complete folder among the three names;
:func:`recover` picks the complete one with the most steps, moves it to ``checkpoint/`` and
deletes the others. :func:`cut_logs` then cuts the logs back to their size at that checkpoint,
so that a resumed run writes no row twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymcurric.errors import DataError

__all__ = [
    "CKPT",
    "commit",
    "cut_logs",
    "has_checkpoint",
    "latest_steps",
    "log_sizes",
    "read_manifest",
    "recover",
]

CKPT = "checkpoint"
_TMP, _OLD = f"{CKPT}.tmp", f"{CKPT}.old"
#: the folders a checkpoint can be in, the one resume prefers first
_FOLDERS = (CKPT, _TMP, _OLD)
MANIFEST = "manifest.json"
FORMAT = "gymcurric-checkpoint/1"
#: the run directory's append-only logs (glob patterns relative to the run directory)
LOG_PATTERNS = ("progress.csv", "*monitor.csv", "events.out.tfevents.*", "datapacks/*.jsonl")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def log_sizes(run_dir: Path) -> dict[str, int]:
    """The size of every log file of the run, by path relative to ``run_dir``."""
    out = {}
    for pattern in LOG_PATTERNS:
        for p in sorted(run_dir.glob(pattern)):
            if p.is_file():
                out[p.relative_to(run_dir).as_posix()] = p.stat().st_size
    return out


def commit(
    run_dir: Path,
    num_timesteps: int,
    write: Callable[[Path], None],
    logs: dict[str, int],
) -> Path:
    """Write a checkpoint with ``write(folder)`` and swap it in (see the module docstring)."""
    tmp, final, old = run_dir / _TMP, run_dir / CKPT, run_dir / _OLD
    shutil.rmtree(tmp, ignore_errors=True)  # a leftover of a killed save: never complete alone
    tmp.mkdir(parents=True)
    write(tmp)
    files = {}
    for p in sorted(tmp.rglob("*")):
        if p.is_file():
            with open(p, "rb+") as f:
                os.fsync(f.fileno())
            files[p.relative_to(tmp).as_posix()] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    manifest = {
        "format": FORMAT,
        "num_timesteps": int(num_timesteps),
        "files": files,
        "logs": logs,
    }
    with open(tmp / MANIFEST, "w") as f:
        f.write(json.dumps(manifest, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    _fsync_dir(run_dir)
    shutil.rmtree(old, ignore_errors=True)
    return final


def read_manifest(folder: Path, *, verify: bool = True) -> dict[str, Any]:
    """The manifest of a complete checkpoint folder.

    Raises:
        DataError: the folder is not a complete checkpoint (naming the file and the fault).
    """
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: missing (the checkpoint was not completed)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a checkpoint manifest ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path}: not a checkpoint manifest (expected format {FORMAT!r})")
    files = manifest.get("files")
    steps = manifest.get("num_timesteps")
    logs = manifest.get("logs")
    if (
        not isinstance(files, dict)
        or not isinstance(logs, dict)
        or not isinstance(steps, int)
        or steps < 0
    ):
        raise DataError(f"{path}: 'files', 'logs' or 'num_timesteps' is missing or malformed")
    for name, meta in files.items():
        f = folder / name
        if not isinstance(meta, dict) or not f.is_file():
            raise DataError(f"{f}: listed in {path} but missing")
        if f.stat().st_size != meta.get("size"):
            raise DataError(
                f"{f}: {f.stat().st_size} bytes, the manifest says {meta.get('size')} (damaged)"
            )
        if verify and _sha256(f) != meta.get("sha256"):
            raise DataError(f"{f}: its SHA-256 differs from the manifest's (damaged)")
    return manifest


def recover(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Make ``checkpoint/`` the newest complete checkpoint; returns it and its manifest.

    Raises:
        DataError: no complete checkpoint exists (the message lists what each folder lacks).
    """
    found, faults = [], []
    for name in _FOLDERS:
        folder = run_dir / name
        if not folder.is_dir():
            continue
        try:
            manifest = read_manifest(folder)
        except DataError as exc:
            faults.append(str(exc))
            continue
        found.append((manifest["num_timesteps"], _FOLDERS.index(name), folder, manifest))
    if not found:
        why = "; ".join(faults) if faults else "no checkpoint folder"
        raise DataError(f"{run_dir / CKPT}: no complete checkpoint to resume from ({why})")
    # the most steps wins; between equals, checkpoint/ before .tmp before .old
    found.sort(key=lambda t: (-t[0], t[1]))
    _, _, folder, manifest = found[0]
    final = run_dir / CKPT
    if folder != final:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(folder, final)
        _fsync_dir(run_dir)
    for other in (_TMP, _OLD):
        shutil.rmtree(run_dir / other, ignore_errors=True)
    return final, manifest


def cut_logs(run_dir: Path, sizes: dict[str, int]) -> list[str]:
    """Cut each log back to its size in ``sizes``; delete logs begun after. Returns what changed."""
    changed = []
    for rel, now in log_sizes(run_dir).items():
        path = run_dir / rel
        keep = sizes.get(rel)
        if keep is None:
            path.unlink()
            changed.append(rel)
        elif now > int(keep):
            with open(path, "rb+") as f:
                f.truncate(int(keep))
            changed.append(rel)
    return changed


def latest_steps(run_dir: Path) -> int:
    """The step count of the newest complete checkpoint (0 when there is none)."""
    best = 0
    for name in _FOLDERS:
        try:
            best = max(best, read_manifest(run_dir / name, verify=False)["num_timesteps"])
        except DataError:
            continue
    return best


def has_checkpoint(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a checkpoint folder, complete or not (a run to resume)."""
    return any((run_dir / name).is_dir() for name in _FOLDERS)
