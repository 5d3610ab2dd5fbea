"""Raw JSON / JSONL records of a file or a directory, each with where it was read.

A ``.json`` file holds one record or a list of records; a ``.jsonl`` file one record per
non-blank line. The suffix is read in any case (``.JSON``, ``.Jsonl``), as the config readers
read ``.YAML``. A directory is read file by file in sorted name order. Nothing is validated here
beyond the JSON syntax: a record that is not valid JSON comes as a ``DataError`` in its place,
and one with a key given twice in an object (which ``json`` would read as the later value
without a word) carries the error in :attr:`RawRecord.twice`, for the reader to report once
it has read the record's id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from gymcurric._parsing import TwiceKeyedDict, loads_json, twice_marked, twice_marking_hook
from gymcurric.errors import DataError

SUFFIXES = (".json", ".jsonl")


class RawRecord(NamedTuple):
    """One decoded record (or the error that took its place) and where it was read."""

    data: Any
    source: str
    line: int | None
    where: str  # "file, line N", "file, record i" or "file"
    #: a key given twice in one of the record's objects (``data`` has the later value): the
    #: error to report for the record once its id is read
    twice: DataError | None = None


def _twice_error(data: Any, where: str) -> DataError | None:
    """The first key given twice in ``data``'s objects (document order), named by its path."""
    for node, field in twice_marked(data):
        _, first, later = node.twice
        return DataError(
            f"{where}: field {field!r}: given twice in one JSON object, whose reader keeps "
            f"only the later; got {first!r}, then {later!r}"
        )
    return None


def json_files(path: Any, recursive: bool, what: str = "datapack") -> list[Path]:
    """The ``.json`` / ``.jsonl`` files (any case) under ``path`` (or ``path`` itself), sorted."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise DataError(f"{root}: no such file or directory")
    pattern = "**/*" if recursive else "*"
    files = sorted(p for p in root.glob(pattern) if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        scope = "subfolders searched too" if recursive else "subfolders not searched"
        raise DataError(
            f"{root}: no .json or .jsonl {what} files found (suffix in any case; {scope})"
        )
    return files


def raw_records(path: Path, what: str = "datapack") -> Iterator[RawRecord]:
    """Every record of one file; unreadable or invalid JSON comes as a ``DataError``."""
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield RawRecord(DataError(f"{src}: cannot read {what} file ({exc})"), src, None, src)
        return
    found: list[TwiceKeyedDict | None] = [None]  # set when an object had a key given twice
    decoder = json.JSONDecoder(object_pairs_hook=twice_marking_hook(found))  # one per file
    if path.suffix.lower() == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{src}, line {lineno}"
            try:
                data = loads_json(line, source=where, decoder=decoder)
            except DataError as exc:  # nested too deeply
                data = exc
            except json.JSONDecodeError as exc:
                data = DataError(
                    f"{where}: invalid JSON ({exc.msg}, column {exc.colno}); got {line[:80]!r}"
                )
            if found[0] is not None:
                found[0] = None
                yield RawRecord(data, src, lineno, where, _twice_error(data, where))
            else:
                yield RawRecord(data, src, lineno, where)
        return
    try:
        data = loads_json(text, source=src, decoder=decoder)
    except DataError as exc:  # nested too deeply
        yield RawRecord(exc, src, None, src)
        return
    except json.JSONDecodeError as exc:
        where = f"{src}, line {exc.lineno}"
        yield RawRecord(
            DataError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno})"), src, None, where
        )
        return
    marked = found[0] is not None  # an object in the file had a key given twice
    if not isinstance(data, list):
        yield RawRecord(data, src, None, src, _twice_error(data, src) if marked else None)
        return
    for i, item in enumerate(data):
        where = f"{src}, record {i}"
        yield RawRecord(item, src, None, where, _twice_error(item, where) if marked else None)
