"""Reading datapacks from JSON / JSONL files and recorded episodes from ``.npz``.

A ``.json`` file holds one record or a list of records; a ``.jsonl`` file holds one record per
non-blank line. A directory is read file by file in sorted name order (so the order of the
records, and hence every seeded sample, does not depend on the file system).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric.datapacks._jsonfiles import RawRecord, json_files, raw_records
from gymcurric.datapacks.merge import read_enrichments
from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import DataError

__all__ = [
    "EPISODE_KEYS",
    "iter_datapack_file",
    "iter_episodes",
    "load_datapacks",
    "load_episode",
    "validate_datapacks",
]


def _record(raw: RawRecord) -> tuple[DataPack | DataError, str]:
    if isinstance(raw.data, DataError):
        return raw.data, raw.where
    if raw.problem is not None:  # a key given twice, a number past float's range
        return raw.problem, raw.where
    try:
        return DataPack.from_dict(raw.data, source=raw.source, line=raw.line), raw.where
    except DataError as exc:
        if raw.line is None and raw.where != raw.source:  # a JSON list: name the record index
            exc = DataError(str(exc).replace(f"{raw.source}:", f"{raw.where}:", 1))
        return exc, raw.where


def _records(path: Path) -> Iterator[tuple[DataPack | DataError, str]]:
    """``(record or its error, where)`` for one file; ``where`` is "file, line N" or similar."""
    for raw in raw_records(path):
        yield _record(raw)


def _packs(
    path: str | os.PathLike[str], recursive: bool, enrichment_dir: Any
) -> Iterator[tuple[DataPack | DataError, str]]:
    """Every record under ``path`` (merged with ``enrichment_dir``'s enrichments), in order."""
    files = json_files(path, recursive)
    if enrichment_dir is None:
        for file in files:
            yield from _records(file)
        return
    index = read_enrichments(enrichment_dir, recursive=recursive)
    for exc in index.errors:
        yield exc, ""
    for file in files:
        for raw in raw_records(file):
            merged = index.merge(raw)
            if merged is not None:  # None: its enrichment is invalid, an error already given
                yield _record(raw._replace(data=merged))
    for exc in index.unmatched(path):
        yield exc, ""


def iter_datapack_file(path: str | os.PathLike[str]) -> Iterator[DataPack]:
    """Yield the validated records of one ``.json`` or ``.jsonl`` file.

    Raises:
        DataError: the file is not valid JSON, or a record is invalid; the message names the
            file, the line (JSONL, or where the JSON parser stopped), the field and the value.
    """
    for item, _ in _records(Path(path)):
        if isinstance(item, DataError):
            raise item
        yield item


def _duplicate(pack: DataPack, where: str, first: str) -> DataError:
    return DataError(
        f"{where}: field 'pack_id': duplicate of the record at {first}; got {pack.pack_id!r}"
    )


def load_datapacks(
    path: str | os.PathLike[str],
    *,
    recursive: bool = False,
    enrichment_dir: str | os.PathLike[str] | None = None,
) -> list[DataPack]:
    """Load every datapack under a directory (or from one file), validated.

    Args:
        path: a directory of ``.json`` / ``.jsonl`` files, or a single such file. Hidden names
            in the directory (``._a.jsonl``, ``.git/``) are skipped.
        recursive: also read sub-directories (of ``enrichment_dir`` too), symbolic links to
            folders followed.
        enrichment_dir: Stage 2.4 enrichments to merge in by ``pack_id`` (the specification's
            Stage 1 / 2.4 merge; see :mod:`gymcurric.datapacks.merge`). The files are not
            changed.

    Returns:
        The records in sorted-file order, then file order.

    Raises:
        DataError: a malformed file or record (see :func:`iter_datapack_file`), a ``pack_id``
            seen twice (both places are named), a path with no datapack files, or a broken
            symbolic link where one could be (named with its target); with
            ``enrichment_dir``, an invalid enrichment, two enrichments for one id, a datapack
            without an enrichment or an enrichment without a datapack (file, line and id named).
    """
    packs: list[DataPack] = []
    seen: dict[str, str] = {}
    for pack, where in _packs(path, recursive, enrichment_dir):
        if isinstance(pack, DataError):
            raise pack
        if pack.pack_id in seen:
            raise _duplicate(pack, where, seen[pack.pack_id])
        seen[pack.pack_id] = where
        packs.append(pack)
    return packs


def validate_datapacks(
    path: str | os.PathLike[str],
    *,
    recursive: bool = False,
    check_episodes: bool = False,
    enrichment_dir: str | os.PathLike[str] | None = None,
) -> tuple[list[DataPack], list[str]]:
    """Check every record under ``path`` and collect *all* problems instead of stopping.

    Args:
        path: a directory of ``.json`` / ``.jsonl`` files, or one such file.
        recursive: also read sub-directories.
        check_episodes: also load each recorded episode (see :func:`load_episode`).
        enrichment_dir: enrichments to merge in by ``pack_id`` (see :func:`load_datapacks`).

    Returns:
        ``(valid records, error messages)``; each message names the file, the line (or record
        index), the field and the value, as :func:`load_datapacks` would raise it.
    """
    packs: list[DataPack] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    try:
        for item, where in _packs(path, recursive, enrichment_dir):
            if isinstance(item, DataError):
                errors.append(str(item))
            elif item.pack_id in seen:
                errors.append(str(_duplicate(item, where, seen[item.pack_id])))
            else:
                seen[item.pack_id] = where
                packs.append(item)
    except DataError as exc:  # a path that does not exist or holds no files
        return packs, [*errors, str(exc)]
    if check_episodes:
        for pack in packs:
            if pack.episode is not None:
                try:
                    load_episode(pack)
                except DataError as exc:
                    errors.append(str(exc))
    return packs, errors


def load_episode(pack: DataPack) -> dict[str, np.ndarray]:
    """Load a datapack's recorded episode arrays (read-only), refusing pickled objects.

    The path in ``pack.episode`` is relative to the directory of the file the record came from.

    Raises:
        DataError: the pack has no episode, the file is missing or not a valid ``.npz`` (a
            ``.npy`` or text file included), or an array holds Python objects
            (``allow_pickle=False``); the message names the file.
    """
    if pack.episode is None:
        raise DataError(
            f"{pack.source}: field 'episode': datapack {pack.pack_id!r} has no "
            "recorded episode; got None"
        )
    base = Path(pack.source).parent if pack.source else Path()
    file = base / pack.episode
    if file.is_file() and not zipfile.is_zipfile(file):
        # np.load would return a .npy's one array, or call a text file "pickled data"
        raise DataError(
            f"{file}: field 'episode' of datapack {pack.pack_id!r}: not a .npz archive (a zip "
            f"of named arrays, as np.savez writes); got {pack.episode!r}"
        )
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
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(
            f"{file}: field 'episode' of datapack {pack.pack_id!r}: cannot load "
            f"the .npz ({exc}); got {pack.episode!r}"
        ) from exc
    return out


#: Array names every recorded episode of ``T`` steps should have (the layout
#: :func:`gymcurric.replay.extend_from_episodes` reads): ``obs`` (``T + 1`` rows, the final
#: observation last; or ``T`` rows with ``next_obs``), ``action`` (``T``) and ``reward``
#: (``T``). Optional: ``cost`` (``T``), ``next_obs`` (``T``), ``terminated`` and ``truncated``
#: (a scalar or ``T`` booleans). Other arrays are kept and passed through.
EPISODE_KEYS: tuple[str, ...] = ("obs", "action", "reward")
#: Arrays with one row per step when present.
_PER_STEP = ("action", "reward", "cost", "next_obs")


def iter_episodes(
    packs: Iterable[DataPack], *, require: Iterable[str] | None = None
) -> Iterator[tuple[DataPack, dict[str, np.ndarray]]]:
    """Yield ``(pack, arrays)`` for each datapack that has a recorded episode, in order.

    This is the iterator an off-policy replay buffer is filled from: it loads one ``.npz`` at a
    time (read-only arrays, ``allow_pickle=False``), skips datapacks without an ``episode``, and
    never changes a datapack or its arrays. See :data:`EPISODE_KEYS` for the array names.

    Args:
        packs: the datapacks, e.g. ``sampler.table.records`` or a sampled batch.
        require: array names every episode must have (e.g. :data:`EPISODE_KEYS`). When given,
            the per-step arrays present (``action``, ``reward``, ``cost``, ``next_obs``) must
            also agree on ``T``, ``obs`` must have ``T`` or ``T + 1`` rows and ``terminated``
            / ``truncated`` must be scalars or ``T`` long.

    Raises:
        DataError: a file that cannot be loaded (see :func:`load_episode`), or a required array
            that is missing or has the wrong length; the message names the file and the array.

    Examples:
        >>> import json, os, tempfile
        >>> import numpy as np
        >>> d = tempfile.mkdtemp()
        >>> np.savez(os.path.join(d, "e.npz"), obs=np.zeros((3, 2)), action=np.zeros(2),
        ...          reward=np.ones(2), cost=np.zeros(2), terminated=np.array([False, True]))
        >>> rec = {"pack_id": "a", "task_type": "reach", "env_id": "E-v0", "tier": 0,
        ...        "episode": "e.npz"}
        >>> with open(os.path.join(d, "packs.json"), "w") as f:
        ...     json.dump([rec, {**rec, "pack_id": "b", "episode": None}], f)
        >>> [(p.pack_id, float(ep["reward"].sum()))
        ...  for p, ep in iter_episodes(load_datapacks(d), require=EPISODE_KEYS)]
        [('a', 2.0)]
    """
    need = tuple(require) if require is not None else ()
    for pack in packs:
        if pack.episode is None:
            continue
        arrays = load_episode(pack)
        if need:
            _check_episode(pack, arrays, need)
        yield pack, arrays


def _check_episode(pack: DataPack, arrays: dict[str, np.ndarray], need: tuple[str, ...]) -> None:
    where = Path(pack.source).parent / str(pack.episode) if pack.source else pack.episode

    def rows(key: str) -> int:
        return int(arrays[key].shape[0]) if arrays[key].ndim else 0

    for key in need:
        if key not in arrays:
            raise DataError(
                f"{where}: episode of datapack {pack.pack_id!r} has no array {key!r}; "
                f"got {sorted(arrays)}"
            )
    steps: int | None = None
    for key in _PER_STEP:
        if key in arrays:
            if steps is None:
                steps = rows(key)
            elif rows(key) != steps:
                raise DataError(
                    f"{where}: array {key!r} of datapack {pack.pack_id!r} has {rows(key)} rows, "
                    f"expected {steps} like the other per-step arrays"
                )
    if steps is None:
        return
    allowed = {"obs": (steps, steps + 1), "terminated": (0, steps), "truncated": (0, steps)}
    for key, ok in allowed.items():
        if key in arrays and rows(key) not in ok:
            expected = " or ".join(str(v) for v in ok) if key == "obs" else f"a scalar or {steps}"
            raise DataError(
                f"{where}: array {key!r} of datapack {pack.pack_id!r} has {rows(key)} rows, "
                f"expected {expected}"
            )
