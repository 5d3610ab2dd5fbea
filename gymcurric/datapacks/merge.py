"""The specification's Stage 1 / Stage 2.4 merge: enrichments joined to datapacks by ``pack_id``.

An enrichment directory holds ``.json`` / ``.jsonl`` files (read like datapack files) of
records such as::

    {"pack_id": "pack_001", "enrichment": {"novelty_tags": [...], "supervision_hints": {...}}}
    {"pack_id": "pack_002", "novelty_tags": [...], "fragility_tags": [...], ...}

that is, a ``pack_id`` and the enrichment, either under ``enrichment`` or as the record's other
keys (both together form the enrichment). The merge gives each datapack its enrichment; a
datapack that already has an ``enrichment`` keeps it, and the two are joined key by key (the
same key with two different values is an error). Neither file is changed: the merged records
are new ones. Every problem is reported with the file, the line (or record index) and the id:

* an enrichment whose ``pack_id`` matches no datapack,
* a datapack with no enrichment (neither in the directory nor its own),
* two enrichments for one ``pack_id``,
* an enrichment that is not valid (a bad tag list, say), as a datapack's would be; that is
  the only error reported for its ``pack_id`` (its datapack is left out, not reported as
  having no enrichment).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gymcurric.datapacks._fields import Location
from gymcurric.datapacks._jsonfiles import RawRecord, json_files, raw_records
from gymcurric.datapacks.enrichment import Enrichment
from gymcurric.errors import DataError

__all__ = ["EnrichmentIndex", "read_enrichments"]


def _relocated(exc: DataError, raw: RawRecord) -> DataError:
    """A JSON list's record has no line: name its index, as the datapack reader does."""
    if raw.line is None and raw.where != raw.source:
        return DataError(str(exc).replace(f"{raw.source}:", f"{raw.where}:", 1))
    return exc


@dataclass
class EnrichmentIndex:
    """The enrichments of a directory by ``pack_id``, and the problems found reading them.

    Attributes:
        path: the directory (or file) read.
        by_id: ``pack_id`` -> (the enrichment object, where it was read).
        errors: unreadable files, invalid records and duplicate ids, in file order.
        used: the ids merged so far (:meth:`unmatched` lists the others).
        invalid: ``pack_id`` -> where, for the invalid enrichments whose id could be read (the
            error is in :attr:`errors`; their datapacks are left out without a second one).
    """

    path: str
    by_id: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    errors: list[DataError] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    invalid: dict[str, str] = field(default_factory=dict)

    def merge(self, raw: RawRecord) -> Any:
        """``raw``'s data with its enrichment joined in, or a ``DataError`` naming the problem.

        Data that is not a JSON object with a string ``pack_id`` is returned unchanged (the
        datapack reader reports it). ``None`` for a datapack whose enrichment is invalid: that
        error is already in :attr:`errors`, and the datapack is left out.
        """
        data = raw.data
        if not isinstance(data, Mapping) or not isinstance(data.get("pack_id"), str):
            return data
        pid = data["pack_id"]
        inline = data.get("enrichment")
        if pid not in self.by_id and pid in self.invalid:
            self.used.add(pid)
            return None
        if pid not in self.by_id:
            if isinstance(inline, Mapping) and inline:
                return data  # it brings its own
            return DataError(
                f"{raw.where}: field 'pack_id': datapack has no enrichment in {self.path}; "
                f"got {pid!r}"
            )
        self.used.add(pid)
        enrichment, where = self.by_id[pid]
        if inline is None:
            return {**data, "enrichment": enrichment}
        if not isinstance(inline, Mapping):
            return data  # the datapack reader names the bad field
        for key, value in enrichment.items():
            if key in inline and inline[key] != value:
                return DataError(
                    f"{raw.where}: field 'enrichment.{key}' of datapack {pid!r} differs from "
                    f"the enrichment at {where} ({value!r}); got {inline[key]!r}"
                )
        return {**data, "enrichment": {**inline, **enrichment}}

    def unmatched(self, datapack_path: Any) -> Iterator[DataError]:
        """An error for each enrichment no datapack has used, in file order."""
        for pid, (_, where) in self.by_id.items():
            if pid not in self.used:
                yield DataError(
                    f"{where}: field 'pack_id': enrichment matches no datapack in "
                    f"{datapack_path}; got {pid!r}"
                )


def _enrichment_of(raw: RawRecord) -> tuple[str | None, dict[str, Any] | DataError]:
    """``(pack_id, enrichment)``, or ``(pack_id if it could be read, the error)``."""
    data = raw.data
    at = Location(raw.source, raw.line)
    pid = None
    try:
        if isinstance(data, DataError):
            return None, data
        if not isinstance(data, Mapping):
            raise at.error("<record>", data, "expected a JSON object")
        pid = data.get("pack_id")
        if not isinstance(pid, str) or not pid:
            got, pid = pid, None
            raise at.error(
                "pack_id",
                got,
                "required field is missing" if got is None else "expected a non-empty string",
            )
        if raw.problem is not None:  # a key given twice, a number past float's range
            raise raw.problem
        rest = {k: v for k, v in data.items() if k not in ("pack_id", "enrichment")}
        inner = data.get("enrichment", {})
        if not isinstance(inner, Mapping):
            raise at.error("enrichment", inner, "expected a JSON object")
        both = sorted(set(rest) & set(inner))
        if both:
            raise at.error(
                both[0], rest[both[0]], "given both inside 'enrichment' and beside it; give it once"
            )
        enrichment = {**inner, **rest}
        Enrichment.from_dict(enrichment, at)  # every problem found now, named in this file
        return pid, enrichment
    except DataError as exc:
        return pid, _relocated(exc, raw)


def read_enrichments(path: str | os.PathLike[str], *, recursive: bool = False) -> EnrichmentIndex:
    """Read and validate every enrichment under ``path``, collecting (not raising) problems.

    Raises:
        DataError: ``path`` does not exist or holds no ``.json`` / ``.jsonl`` file.

    Examples:
        >>> import json, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> with open(os.path.join(d, "enrichments.json"), "w") as f:
        ...     json.dump([{"pack_id": p, "novelty_tags": []} for p in ("a", "b", "a")], f)
        >>> index = read_enrichments(d)
        >>> sorted(index.by_id), [str(e).split(": ", 1)[1][:40] for e in index.errors]
        (['a', 'b'], ["field 'pack_id': a second enrichment for"])
    """
    index = EnrichmentIndex(str(path))
    for file in json_files(path, recursive, "enrichment"):
        for raw in raw_records(file, "enrichment"):
            pid, enrichment = _enrichment_of(raw)
            if isinstance(enrichment, DataError):
                index.errors.append(enrichment)
                if pid is not None and pid not in index.by_id:
                    index.invalid.setdefault(pid, raw.where)
                continue
            assert pid is not None
            first = index.by_id[pid][1] if pid in index.by_id else index.invalid.get(pid)
            if first is not None:
                index.errors.append(
                    DataError(
                        f"{raw.where}: field 'pack_id': a second enrichment for this datapack "
                        f"(the first at {first}); got {pid!r}"
                    )
                )
                continue
            index.by_id[pid] = (enrichment, raw.where)
    return index
