"""Validation helpers for datapack records (messages name file, line, field and value)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gymcurric._checks import finite_reason, is_finite_number, shown
from gymcurric.errors import DataError

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def empty_mapping() -> Mapping[str, Any]:
    """The shared empty read-only mapping (a dataclass ``default_factory``)."""
    return _EMPTY


_SCALARS = (str, int, float, bool, type(None))


def freeze(obj: Any) -> Any:
    """Read-only deep copy: dicts become mapping proxies, lists become tuples."""
    t = type(obj)
    # exact-type fast paths first: loading 100k records calls this ~2M times
    if t in _SCALARS:
        return obj
    if t is dict or t is MappingProxyType:
        return MappingProxyType({k: freeze(v) for k, v in obj.items()})
    if t is list or t is tuple:
        return tuple(freeze(v) for v in obj)
    if isinstance(obj, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in obj.items()})
    if isinstance(obj, list | tuple):
        return tuple(freeze(v) for v in obj)
    return obj


def thaw(obj: Any) -> Any:
    """JSON-ready deep copy of a frozen value."""
    if isinstance(obj, Mapping):
        return {k: thaw(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return [thaw(v) for v in obj]
    return obj


class Location:
    """Where a record came from, to put in error messages."""

    def __init__(self, source: str | None, line: int | None, prefix: str = "") -> None:
        self.source, self.line, self.prefix = source, line, prefix

    def sub(self, name: str) -> Location:
        """The location of the nested object ``name`` (field names get its prefix)."""
        return Location(self.source, self.line, f"{self.prefix}{name}.")

    def error(self, name: str, value: Any, reason: str) -> DataError:
        """A ``DataError`` naming the file, line, field, reason and value received."""
        where = self.source or "<datapack>"
        if self.line is not None:
            where += f", line {self.line}"
        got = shown(value, width=200)  # a long value (an int of 400 digits) cut
        return DataError(f"{where}: field {self.prefix + name!r}: {reason}; got {got!r}")


def read_object(data: Any, name: str, at: Location) -> Mapping[str, Any]:
    """``data`` checked to be a JSON object; ``None`` reads as an empty one."""
    if data is None:
        return _EMPTY
    if not isinstance(data, Mapping):
        raise at.error(name, data, "expected a JSON object")
    return data


def read_str(
    data: Mapping[str, Any],
    name: str,
    at: Location,
    *,
    required: bool = False,
    default: str | None = None,
) -> Any:
    """Field ``name`` as a string (non-empty if ``required``), or ``default`` if absent."""
    if name not in data:
        if required:
            raise at.error(name, None, "required field is missing")
        return default
    value = data[name]
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise at.error(
            name, value, "expected a non-empty string" if required else "expected a string or null"
        )
    return value


def read_num(
    data: Mapping[str, Any],
    name: str,
    at: Location,
    default: float | None,
    lo: float | None = None,
    hi: float | None = None,
) -> Any:
    """Field ``name`` as a finite float in ``[lo, hi]``, or ``default`` if absent."""
    if name not in data or (data[name] is None and default is None):
        return default
    value = data[name]
    if not is_finite_number(value):  # an int too large for a float included
        raise at.error(name, value, finite_reason(value, "expected a finite number"))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise at.error(name, value, f"out of range [{lo}, {'inf' if hi is None else hi}]")
    return float(value)


def read_int(
    data: Mapping[str, Any],
    name: str,
    at: Location,
    default: int | None,
    allowed: tuple[int, ...] | None = None,
    lo: int | None = None,
) -> Any:
    """Field ``name`` as an int (one of ``allowed``, ``>= lo``), or ``default`` if absent."""
    if name not in data:
        if default is None and allowed is not None:
            raise at.error(name, None, "required field is missing")
        return default
    value = data[name]
    if value is None and default is None and allowed is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise at.error(name, value, "expected an integer")
    if allowed is not None and value not in allowed:
        raise at.error(name, value, f"expected one of {list(allowed)}")
    if lo is not None and value < lo:
        raise at.error(name, value, f"expected an integer >= {lo}")
    return value


def read_bool(data: Mapping[str, Any], name: str, at: Location, default: bool) -> bool:
    """Field ``name`` as a bool, or ``default`` if absent."""
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise at.error(name, value, "expected true or false")
    return value


def extra_fields(data: Mapping[str, Any], known: frozenset[str]) -> Mapping[str, Any]:
    """The fields of ``data`` not in ``known``, frozen, kept for the round trip."""
    if data.keys() <= known:
        return _EMPTY
    return freeze({k: v for k, v in data.items() if k not in known})


def read_tag_list(
    data: Mapping[str, Any],
    name: str,
    at: Location,
    check: Any = None,
) -> tuple[Mapping[str, Any], ...] | None:
    """Field ``name`` as a list of JSON objects, frozen whole (every key kept).

    ``check(item, location)`` validates the keys a formula reads; absent or ``null`` is
    ``None`` (so that a record is written back with the lists it had).
    """
    items = data.get(name)
    if items is None:
        return None
    if not isinstance(items, list):
        raise at.error(name, items, "expected a list of objects")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise at.error(f"{name}[{i}]", item, "expected a JSON object")
        if check is not None:
            check(item, at.sub(f"{name}[{i}]"))
        out.append(freeze(item))
    return tuple(out)


def require(data: Mapping[str, Any], name: str, at: Location) -> None:
    """Raise the "required field is missing" error when ``name`` is not in ``data``."""
    if name not in data:
        raise at.error(name, None, "required field is missing")
