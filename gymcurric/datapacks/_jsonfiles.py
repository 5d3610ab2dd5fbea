"""Raw JSON / JSONL records of a file or a directory, each with where it was read.

A ``.json`` file holds one record or a list of records; a ``.jsonl`` file one record per
non-blank line. The suffix is read in any case (``.JSON``, ``.Jsonl``), as the config readers
read ``.YAML``. A directory is read file by file in sorted name order, hidden names skipped and
a broken symbolic link refused (:func:`json_files`). Nothing is validated here
beyond the JSON syntax: a record that is not valid JSON comes as a ``DataError`` in its place,
and one that ``json`` would read without a word as something it does not say carries the error
in :attr:`RawRecord.problem`, for the reader to report once it has read the record's id: a key
given twice in an object (read as the later value) or a number too large for a float (``1e400``,
read as inf; ``Infinity`` says it and is read), as the config readers refuse them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from gymcurric._checks import cut
from gymcurric._parsing import (
    TwiceKeyedDict,
    loads_json,
    twice_marked,
    twice_marking_hook,
    walk_with_paths,
)
from gymcurric._yaml_floats import Overflowed, overflow_marking_parse_float
from gymcurric.errors import DataError

SUFFIXES = (".json", ".jsonl")


class RawRecord(NamedTuple):
    """One decoded record (or the error that took its place) and where it was read."""

    data: Any
    source: str
    line: int | None
    where: str  # "file, line N", "file, record i" or "file"
    #: a key given twice in one of the record's objects (``data`` has the later value), else a
    #: number too large for a float (``data`` has inf): the error to report for the record once
    #: its id is read
    problem: DataError | None = None


def _twice_error(data: Any, where: str) -> DataError | None:
    """The first key given twice in ``data``'s objects (document order), named by its path."""
    for node, field in twice_marked(data):
        _, first, later = node.twice
        return DataError(
            f"{where}: field {field!r}: given twice in one JSON object, whose reader keeps "
            f"only the later; got {first!r}, then {later!r}"
        )
    return None


#: Only a number written with an exponent of 3 digits or more, or with 210 integer digits or more
#: (JSON has no leading zeros, and 10**209 * 10**99 is below the largest float), can be too large
#: for a float: a file holding neither is read with ``json``'s own float parser. A number starts
#: where a JSON value can (the text's start, after whitespace, ``[``, ``,`` or ``:``), so the
#: look-behind skips the inside of strings such as hex digests (``"...3e581..."``, which
#: ``[eE][0-9]{3}`` alone matched) and makes the search linear: each digit run is tried from its
#: start only, and the possessive ``++`` never backtracks into it. A string holding one after a
#: space or a colon (``"see 1e300"``) only costs the slower parser.
_MAY_OVERFLOW = re.compile(r"(?<![^\s\[,:])-?(?:[0-9]{210}|[0-9]++(?:\.[0-9]++)?[eE]\+?[0-9]{3})")


def _problem(data: Any, where: str, twice: bool, past: bool) -> DataError | None:
    """The error of a record with a key given twice (first) or a number past float's range."""
    error = _twice_error(data, where) if twice else None
    for node, field in walk_with_paths(data) if past and error is None else ():
        if isinstance(node, Overflowed):  # JSON's keys are strings: only a value can be one
            got = cut(node.literal)
            return DataError(
                f"{where}: field {field or '<record>'!r}: a number too large for a float, which "
                f"would read as infinity; write Infinity where infinity is meant; got {got!r}"
            )
    return error


def json_files(path: Any, recursive: bool, what: str = "datapack") -> list[Path]:
    """The ``.json`` / ``.jsonl`` files (any case) under ``path`` (or ``path`` itself), sorted.

    Hidden names under ``path`` (macOS's ``._pack.jsonl``, Emacs's lock link ``.#pack.jsonl``,
    a ``.git`` folder) are skipped, as ``ls`` and shell globs skip them. A
    broken symbolic link is refused, naming it and its target, rather than left out without a
    word: one named as a data file, or any one when subfolders are searched (it may have been
    one), or ``path`` itself. With ``recursive``, a symbolic link to a folder is searched as a
    subfolder, each real folder once (one to a folder the tree holds, a loop among them, is not
    searched again).
    """
    root = Path(path)
    if root.is_file():
        return [root]
    if root.is_symlink() and not root.exists():
        raise _broken_link(root, what)
    if not root.is_dir():
        raise DataError(f"{root}: no such file or directory")
    files: list[Path] = []
    hidden: list[Path] = []  # data files, named in the error if no other
    for p in _tree(root) if recursive else root.glob("*"):
        data_name = p.suffix.lower() in SUFFIXES
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            hidden += [p] if data_name else []  # or in a hidden folder
        elif p.is_symlink() and not p.exists() and (data_name or recursive):
            raise _broken_link(p, what)
        elif data_name and p.is_file():
            files.append(p)
    if not files:
        scope = "subfolders searched too" if recursive else "subfolders not searched"
        skipped = f", hidden ones skipped ({str(min(hidden))!r})" if hidden else ""
        raise DataError(
            f"{root}: no .json or .jsonl {what} files found (suffix in any case; {scope}{skipped})"
        )
    return sorted(files)


def _tree(root: Path) -> Iterator[Path]:
    """Every path under ``root``, symbolic links to folders followed, each real folder once.

    ``Path.glob("**/*")`` does not go into a linked folder, so the packs in one
    (``packs/extra -> /data/extra``) were left out without a word. A link to a folder the tree
    holds without links (``latest -> v2``, ``a/x -> ../b``, one back to an ancestor) is not
    followed, so its files are read once, at their own path; a folder outside it is walked at
    the first link to it in sorted order. Walking each real folder once keeps links between
    sibling folders from walking every path through them (exponential in their number).
    """
    tree: set[str] = set()  # the folders reached without a link
    for folder, folders, _ in os.walk(root):
        folders[:] = [
            name
            for name in folders
            if not name.startswith(".") and not os.path.islink(os.path.join(folder, name))
        ]  # os.walk lists a link to a folder among the folders, though it does not follow it
        tree.update(os.path.realpath(os.path.join(folder, name)) for name in folders)
    walked = {os.path.realpath(root)}
    for folder, folders, names in os.walk(root, followlinks=True):
        hidden = any(part.startswith(".") for part in Path(folder).relative_to(root).parts)
        folders.sort()  # which link to a folder outside the tree is walked: the first in order
        for name in list(folders):
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            if os.path.islink(path) and (real in tree or hidden or name.startswith(".")):
                # read at its own path, or hidden: nothing in it is read, not worth walking
                folders.remove(name)
            elif real in walked:  # the root, in a folder a link reached (up -> ..), or walked
                folders.remove(name)
            else:
                walked.add(real)
        for name in [*folders, *names]:
            yield Path(folder, name)


def _broken_link(link: Path, what: str) -> DataError:
    try:
        target = repr(os.readlink(link))
    except OSError as exc:  # pragma: no cover - removed since it was listed
        target = f"unknown: {exc.strerror}"
    return DataError(
        f"{link}: a broken symbolic link (to {target}, which does not exist or loops); fix or "
        f"remove it, as the {what} records it stood for would be left out"
    )


def raw_records(path: Path, what: str = "datapack") -> Iterator[RawRecord]:
    """Every record of one file; unreadable or invalid JSON comes as a ``DataError``."""
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield RawRecord(DataError(f"{src}: cannot read {what} file ({exc})"), src, None, src)
        return
    found: list[TwiceKeyedDict | None] = [None]  # set when an object had a key given twice
    past: list[Overflowed] = []  # the numbers too large for a float, of the record (or file)
    parse_float = overflow_marking_parse_float(past) if _MAY_OVERFLOW.search(text) else None
    decoder = json.JSONDecoder(object_pairs_hook=twice_marking_hook(found), parse_float=parse_float)
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
            if found[0] is not None or past:
                problem = _problem(data, where, found[0] is not None, bool(past))
                found[0] = None
                past.clear()
                yield RawRecord(data, src, lineno, where, problem)
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
    twice = found[0] is not None  # an object in the file had a key given twice
    if not isinstance(data, list):
        yield RawRecord(data, src, None, src, _problem(data, src, twice, bool(past)))
        return
    for i, item in enumerate(data):
        where = f"{src}, record {i}"
        yield RawRecord(item, src, None, where, _problem(item, where, twice, bool(past)))
