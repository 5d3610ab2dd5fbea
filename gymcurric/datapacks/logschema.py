"""The JSON Schema of the sampling log (``datapack_samples.jsonl``), and a check against it.

The schema ships with the package as ``gymcurric/datapacks/sampling_log.schema.json`` (JSON
Schema draft 2020-12); any validator can use it, e.g. ``jsonschema``::

    import json, jsonschema
    from gymcurric.datapacks.logschema import sampling_log_schema
    jsonschema.validate(json.loads(line), sampling_log_schema())

:func:`validate_sampling_log` checks a log file without extra packages: a small validator for
the keywords the schema uses (``type``, ``required``, ``properties``, ``additionalProperties``,
``items``, ``enum``, ``minimum``, ``maximum``, ``minLength``, ``minItems``, ``pattern``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from gymcurric.errors import DataError

__all__ = ["SCHEMA_FILENAME", "log_entry_errors", "sampling_log_schema", "validate_sampling_log"]

#: The schema's file name inside the ``gymcurric.datapacks`` package.
SCHEMA_FILENAME = "sampling_log.schema.json"
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def sampling_log_schema() -> dict[str, Any]:
    """The shipped JSON Schema of one sampling-log entry (a fresh dict)."""
    text = resources.files("gymcurric.datapacks").joinpath(SCHEMA_FILENAME).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _check(value: Any, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    unknown = (
        set(schema)
        - _ANNOTATIONS
        - {
            "type",
            "required",
            "properties",
            "additionalProperties",
            "items",
            "enum",
            "minimum",
            "maximum",
            "minLength",
            "minItems",
            "pattern",
        }
    )
    if unknown:  # the built-in validator must not pass what it cannot check
        raise DataError(f"{SCHEMA_FILENAME}: keyword {sorted(unknown)[0]!r} is not supported")
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_TYPES[t](value) for t in names):
            out.append(f"{path}: expected {' or '.join(names)}; got {value!r}")
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: expected one of {schema['enum']}; got {value!r}")
    if _TYPES["number"](value):
        if "minimum" in schema and (math.isnan(value) or value < schema["minimum"]):
            out.append(f"{path}: expected a number >= {schema['minimum']}; got {value!r}")
        if "maximum" in schema and (math.isnan(value) or value > schema["maximum"]):
            out.append(f"{path}: expected a number <= {schema['maximum']}; got {value!r}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{path}: expected at least {schema['minLength']} characters; got {value!r}")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            out.append(f"{path}: does not match {schema['pattern']!r}; got {value!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: expected at least {schema['minItems']} items; got {len(value)}")
        if "items" in schema:
            for i, item in enumerate(value):
                _check(item, schema["items"], f"{path}[{i}]", out)
    if isinstance(value, Mapping):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: required field {key!r} is missing")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], f"{path}.{key}", out)
            elif extra is False:
                out.append(f"{path}: unexpected field {key!r}")
            elif isinstance(extra, Mapping):
                _check(item, extra, f"{path}.{key}", out)


def log_entry_errors(entry: Any, schema: Mapping[str, Any] | None = None) -> list[str]:
    """What is wrong with one log entry (``[]`` if it is valid), as ``$.field: message``.

    Examples:
        >>> log_entry_errors({"sample_id": 0})[:2]
        ["$: required field 'timestamp' is missing", "$: required field 'episode_count' is missing"]
    """
    out: list[str] = []
    _check(entry, schema if schema is not None else sampling_log_schema(), "$", out)
    return out


def validate_sampling_log(path: str | os.PathLike[str]) -> list[str]:
    """Check every line of a JSONL sampling log against the schema; the problems, in order.

    Each message names the file, the line, the field (a JSON path) and the value received.
    A log without a record (an empty file, or blank lines only) is a problem too: the sampler
    writes one entry per batch, so such a log says the run drew none (it stopped before its
    first batch, or wrote its log somewhere else).

    Raises:
        DataError: the file cannot be read.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: cannot read the sampling log ({exc})") from exc
    if not any(line.strip() for line in lines):
        what = "is empty" if not lines else "holds only whitespace"
        return [
            f"{p}: no records: the file {what} (a sampling log holds one entry per batch "
            "drawn: did the run draw none, or write its log elsewhere?)"
        ]
    schema = sampling_log_schema()
    errors: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            errors.append(f"{p}, line {lineno}: invalid JSON ({exc}); got {line[:80]!r}")
            continue
        errors += [f"{p}, line {lineno}: {e}" for e in log_entry_errors(entry, schema)]
    return errors
