"""Reading datapacks from JSON / JSONL files and recorded episodes from ``.npz``.

A ``.json`` file holds one record or a list of records; a ``.jsonl`` file holds one record per
non-blank line. A directory is read file by file in sorted name order (so the order of the
records, and hence every seeded sample, does not depend on the file system).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import DataError

__all__ = ["iter_datapack_file", "iter_episodes", "load_datapacks", "load_episode"]

_SUFFIXES = (".json", ".jsonl")


def iter_datapack_file(path: str | os.PathLike[str]) -> Iterator[DataPack]:
    """Yield the validated records of one ``.json`` or ``.jsonl`` file.

    Raises:
        DataError: the file is not valid JSON, or a record is invalid; the message names the
            file, the line (JSONL, or where the JSON parser stopped), the field and the value.
    """
    path = Path(path)
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{src}: cannot read datapack file ({exc})") from exc
    if path.suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{src}, line {lineno}: invalid JSON ({exc.msg}, column "
                    f"{exc.colno}); got {line[:80]!r}"
                ) from exc
            yield DataPack.from_dict(data, source=src, line=lineno)
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{src}, line {exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno})"
        ) from exc
    items: list[Any] = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        try:
            yield DataPack.from_dict(item, source=src)
        except DataError as exc:
            if not isinstance(data, list):
                raise
            # A JSON list has no per-record line; name the record's index instead.
            raise DataError(str(exc).replace(f"{src}:", f"{src}, record {i}:", 1)) from None


def load_datapacks(path: str | os.PathLike[str], *, recursive: bool = False) -> list[DataPack]:
    """Load every datapack under a directory (or from one file), validated.

    Args:
        path: a directory of ``.json`` / ``.jsonl`` files, or a single such file.
        recursive: also read sub-directories.

    Returns:
        The records in sorted-file order, then file order.

    Raises:
        DataError: a malformed file or record (see :func:`iter_datapack_file`), a ``pack_id``
            seen twice (both places are named), or a path with no datapack files.
    """
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        pattern = "**/*" if recursive else "*"
        files = sorted(p for p in root.glob(pattern) if p.is_file() and p.suffix in _SUFFIXES)
    else:
        raise DataError(f"{root}: no such file or directory")
    if not files:
        raise DataError(f"{root}: no .json or .jsonl datapack files found")
    packs: list[DataPack] = []
    seen: dict[str, DataPack] = {}
    for file in files:
        for pack in iter_datapack_file(file):
            if pack.pack_id in seen:
                first = seen[pack.pack_id]
                raise DataError(
                    f"{pack.source}: field 'pack_id': duplicate of a record in "
                    f"{first.source}; got {pack.pack_id!r}"
                )
            seen[pack.pack_id] = pack
            packs.append(pack)
    return packs


def load_episode(pack: DataPack) -> dict[str, np.ndarray]:
    """Load a datapack's recorded episode arrays (read-only), refusing pickled objects.

    The path in ``pack.episode`` is relative to the directory of the file the record came from.

    Raises:
        DataError: the pack has no episode, the file is missing or not a valid ``.npz``, or an
            array holds Python objects (``allow_pickle=False``); the message names the file.
    """
    if pack.episode is None:
        raise DataError(
            f"{pack.source}: field 'episode': datapack {pack.pack_id!r} has no "
            "recorded episode; got None"
        )
    base = Path(pack.source).parent if pack.source else Path()
    file = base / pack.episode
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(file, allow_pickle=False) as npz:
            for key in npz.files:
                try:
                    arr = npz[key]
                except ValueError as exc:
                    raise DataError(
                        f"{file}: array {key!r} of datapack {pack.pack_id!r} holds "
                        f"Python objects, which are refused (allow_pickle=False); "
                        f"got {exc}"
                    ) from exc
                arr.setflags(write=False)
                out[key] = arr
    except DataError:
        raise
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{file}: field 'episode' of datapack {pack.pack_id!r}: cannot load "
            f"the .npz ({exc}); got {pack.episode!r}"
        ) from exc
    return out


def iter_episodes(packs: Iterable[DataPack]) -> Iterator[tuple[DataPack, dict[str, np.ndarray]]]:
    """Yield ``(pack, arrays)`` for each datapack that has a recorded episode, in order.

    Loads one ``.npz`` at a time (read-only arrays, ``allow_pickle=False``), e.g. to fill an
    off-policy replay buffer; datapacks without an ``episode`` are skipped.
    """
    for pack in packs:
        if pack.episode is not None:
            yield pack, load_episode(pack)
