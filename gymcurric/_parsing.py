"""Bounded JSON / YAML parsing for the files users hand to gymcurric.

Every reader of a user file (datapacks, curriculum configs, training configs) parses through
:func:`loads_json` and :func:`load_yaml`, which refuse hostile or broken input with a
:class:`DataError` naming the file instead of a raw ``RecursionError`` or a memory blow-up:

* JSON nested deeper than :data:`MAX_JSON_DEPTH` levels (Python's parser recurses and gave up
  with ``RecursionError`` on 100,000 ``[``; no datapack or config comes near 64 levels);
* YAML larger than :data:`MAX_YAML_BYTES`, nested deeper than :data:`MAX_JSON_DEPTH`, with a
  recursive alias, or whose aliases expand to more than :data:`MAX_YAML_NODES` nodes. PyYAML
  shares aliased nodes, so a "billion laughs" file parses quickly, but anything that walks the
  result (validation, ``json.dumps``, an error message's ``repr``) then visits every one of
  9**9 strings: a 300-byte file took 11 s and 1.4 GB before failing. The expansion is counted
  while the document is composed, before any Python object is built.

``json`` and PyYAML both keep the later of two equal keys without a word, so a config with two
``warmup:`` stages (or two ``lr:`` lines) would silently lose the first. Config readers refuse
that with :func:`loads_json_unique` and :func:`load_yaml_unique` (a :class:`ConfigError` naming
the file, the key's dotted path and, for YAML, both lines); the datapack record reader marks
such objects with :func:`twice_marking_hook` and reports them per record.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Hashable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from gymcurric._checks import cut
from gymcurric._yaml_floats import Overflowed, overflow_marking_parse_float
from gymcurric.errors import ConfigError, DataError, GymcurricError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "TwiceKeyedDict",
    "drop_bom",
    "is_blank_config",
    "is_yaml_file",
    "load_yaml",
    "load_yaml_unique",
    "loads_json",
    "loads_json_unique",
    "twice_marked",
    "twice_marking_hook",
    "unique_keys_loader",
    "walk_with_paths",
    "yaml_error_text",
]

#: Deepest nesting of lists / objects (mappings) accepted in a JSON or YAML file.
MAX_JSON_DEPTH = 64
#: Largest YAML file accepted, in bytes (UTF-8): 1 MiB; the shipped configs are about 1 KB.
MAX_YAML_BYTES = 1 << 20
#: Most nodes a YAML document may hold with every alias expanded (scalars, lists and mappings
#: each count one).
MAX_YAML_NODES = 100_000


def is_blank_config(text: str, *, yaml: bool) -> bool:
    r"""Whether a config file's text holds nothing: only whitespace and, in YAML, comment lines.

    A YAML comment line starts (after spaces) with ``#``; ``yaml.safe_load`` reads a file of
    them as ``None`` (and a whitespace-only one with a tab as a syntax error). JSON has no
    comments: a JSON file is blank only when it holds nothing but whitespace (``json`` refuses
    it, "Expecting value"), and one of ``#`` or ``//`` lines stays invalid JSON, reported as
    such, as it is when settings follow them. The config readers call a blank file an empty
    one, naming it, rather than fall back to their defaults or report a syntax error. A YAML
    text over :data:`MAX_YAML_BYTES` is not blank (:func:`load_yaml` refuses it as too large),
    so that no list of its lines is built (8 bytes a line, more than the line itself).

    Examples:
        >>> is_blank_config("  # later\n\n", yaml=True), is_blank_config("{}", yaml=True)
        (True, False)
        >>> is_blank_config(" \n", yaml=False), is_blank_config("# later", yaml=False)
        (True, False)
    """
    if not yaml:
        return not text.replace("\ufeff", "").strip()
    return len(text) <= MAX_YAML_BYTES and all(  # characters: at most as many as bytes
        not line or line.startswith("#")
        for line in (raw.strip().lstrip("\ufeff").strip() for raw in text.splitlines())
    )


def is_yaml_file(path: str | PathLike[str]) -> bool:
    """Whether a config file is YAML: its name ends in ``.yaml`` or ``.yml``, in any case.

    The whole name, not ``Path.suffix``, which is ``""`` for a file named just ``.yaml``.

    Examples:
        >>> is_yaml_file("run.YML"), is_yaml_file(".yaml"), is_yaml_file("a.json")
        (True, True, False)
    """
    return Path(path).name.lower().endswith((".yaml", ".yml"))


def drop_bom(text: str, *, source: str = "") -> str:
    r"""A config file's text without its one leading UTF-8 byte order mark (BOM), if any.

    Windows editors write one; PyYAML skips one and ``json`` refuses it, so the config readers
    drop it for both formats. A second one is refused by name rather than skipped by YAML and
    called an "Unexpected UTF-8 BOM (decode using utf-8-sig)" by JSON.

    Raises:
        DataError: more than one leading BOM (naming ``source`` and how many).

    Examples:
        >>> drop_bom("\ufeff{}"), drop_bom("{}")
        ('{}', '{}')
    """
    out = text.removeprefix("\ufeff")
    if out.startswith("\ufeff"):
        count = len(text) - len(text.lstrip("\ufeff"))
        raise DataError(
            f"{_where(source)}starts with {count} UTF-8 byte order marks (BOM); one is accepted, "
            "remove the others"
        )
    return out


def _where(source: str) -> str:
    return f"{source}: " if source else ""


def _depth_error(source: str, depth: int | None = None) -> DataError:
    seen = f"{depth} levels" if depth is not None else "deeper than the parser can recurse"
    return DataError(
        f"{_where(source)}nested too deeply ({seen}); at most {MAX_JSON_DEPTH} levels of "
        "lists / objects are accepted"
    )


def _check_depth(data: Any, source: str) -> None:
    """Raise if containers nest deeper than :data:`MAX_JSON_DEPTH` (iterative, no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise _depth_error(source, depth)
        stack.extend((child, depth) for child in children if isinstance(child, dict | list))


def loads_json(text: str, *, source: str = "", decoder: json.JSONDecoder | None = None) -> Any:
    """``json.loads(text)`` with nesting bounded by :data:`MAX_JSON_DEPTH`.

    Args:
        text: the JSON document.
        source: the file (and line) it came from, named in the error.
        decoder: a ``json.JSONDecoder`` to read it with (e.g. with an ``object_pairs_hook``,
            which must return a ``dict``), built once by a caller that reads many documents;
            default ``json.loads``'s own.

    Raises:
        json.JSONDecodeError: invalid JSON (left to the caller, which knows how to name the
            line).
        DataError: nested deeper than :data:`MAX_JSON_DEPTH` levels, or an integer with more
            digits than Python reads (``sys.get_int_max_str_digits()``, 4,300 by default).

    Examples:
        >>> loads_json('{"a": [1, 2]}')
        {'a': [1, 2]}
        >>> loads_json("[" * 100_000, source="deep.json")
        Traceback (most recent call last):
        ...
        gymcurric.errors.DataError: deep.json: nested too deeply (deeper than the parser can \
recurse); at most 64 levels of lists / objects are accepted
    """
    try:
        if decoder is None:
            data = json.loads(text)
        elif text.startswith("\ufeff"):  # as json.loads says it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        else:
            data = decoder.decode(text)
    except RecursionError:
        raise _depth_error(source) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer past Python's digit limit (its message names sys)
        raise DataError(
            f"{_where(source)}an integer too long to read ({str(exc).partition(';')[0]}; "
            f"Python reads at most {sys.get_int_max_str_digits():,} digits)"
        ) from None
    _check_depth(data, source)
    return data


class TwiceKeyedDict(dict[str, Any]):
    """A JSON object in which a key was given twice; ``twice`` is ``(key, first, later value)``.

    The dict itself holds the later value, as ``json`` would.
    """

    twice: tuple[str, Any, Any]


def twice_marking_hook(
    found: list[TwiceKeyedDict | None],
) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An ``object_pairs_hook`` that marks each object with a key given twice.

    Such an object is returned as a :class:`TwiceKeyedDict` (the first key given twice, in the
    object's order); ``found[0]``, when ``None``, is set to the first one decoded (an inner
    object is decoded before the one that holds it). The caller resets ``found[0]`` to ``None``
    between documents. An object without a repeated key costs one ``dict`` and a length
    comparison, as many records are read through it.
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) == len(pairs):
            return out
        seen: dict[str, Any] = {}
        marked = TwiceKeyedDict(out)
        for key, value in pairs:
            if key in seen:
                marked.twice = (key, seen[key], value)
                break
            seen[key] = value
        if found[0] is None:
            found[0] = marked
        return marked

    return hook


_JSON_TWICE = (
    "duplicate key: given twice in one JSON object, whose reader keeps only the later; give it once"
)


def loads_json_unique(text: str, *, source: str = "") -> Any:
    """:func:`loads_json` (bounded), refusing a key given twice in one object; one parse.

    The errors come in the order of two separate passes: invalid JSON, then nesting too deep,
    then the first object (in decoding order) with a key given twice.

    Args:
        text: the JSON document.
        source: the file it came from, named in the errors.

    Raises:
        json.JSONDecodeError: invalid JSON (left to the caller, which knows how to name the
            line).
        DataError: nested deeper than :data:`MAX_JSON_DEPTH` levels.
        ConfigError: a key given twice in one object (``source`` and the key's dotted path,
            ``stages[0].a``, as for YAML; JSON's parser gives no line to name); then a number
            too large for a float (``1e400``, which ``json`` reads as inf), naming its key.

    Examples:
        >>> loads_json_unique('{"a": {"b": 1}}')
        {'a': {'b': 1}}
        >>> loads_json_unique('{"run": {"lr": 1, "lr": 2}}', source="run.json")
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: run.json: invalid value for 'run.lr': 'lr' (duplicate \
key: given twice in one JSON object, whose reader keeps only the later; give it once)
    """
    found: list[TwiceKeyedDict | None] = [None]
    overflowed: list[Overflowed] = []
    as_float = overflow_marking_parse_float(overflowed)
    decoder = json.JSONDecoder(object_pairs_hook=twice_marking_hook(found), parse_float=as_float)
    data = loads_json(text, source=source, decoder=decoder)
    if found[0] is not None:  # only then is the parsed document walked for the key's path
        key, path = _twice_path(data, found[0])
        raise ConfigError(path, key, _JSON_TWICE, source=source)
    if overflowed:
        raise _overflow_error(data, overflowed[0], source)
    return data


def _overflow_error(data: Any, first: Overflowed, source: str) -> ConfigError:
    """The error for the first overflowed literal in ``data``, named by its dotted key."""
    found = (first, "")  # one the walk does not reach: named without its key
    for node, path in walk_with_paths(data):
        keys = [k for k in node if isinstance(k, Overflowed)] if isinstance(node, dict) else []
        if isinstance(node, Overflowed) or keys:
            found = (node, path or "") if not keys else (keys[0], _dotted(path, keys[0].literal))
            break
    why = (
        f"a number too large for a float{found[0].where}, which would read as infinity; write "
        ".inf (YAML) or Infinity (JSON) where infinity is meant"
    )
    return ConfigError(found[1], found[0].literal, why, source=source)


def twice_marked(data: Any) -> Iterator[tuple[TwiceKeyedDict, str]]:
    """The objects of ``data`` marked by :func:`twice_marking_hook`, each with the dotted path of
    its key given twice (``stages[0].a``, :func:`unique_keys_loader`'s notation for YAML), in
    document order. ``json``'s hook sees no path, so the parsed document is walked (iteratively).
    """
    for node, path in walk_with_paths(data):
        if isinstance(node, TwiceKeyedDict):
            yield node, _dotted(path, node.twice[0])


def walk_with_paths(data: Any) -> Iterator[tuple[Any, str | None]]:
    """Each value of ``data`` with its dotted path (None: the document), in document order."""
    stack: list[tuple[Any, str | None]] = [(data, None)]
    while stack:
        node, path = stack.pop()
        yield node, path
        if isinstance(node, dict):
            stack.extend(reversed([(v, _dotted(path, k)) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(v, f"{path or ''}[{i}]") for i, v in enumerate(node)]))
        elif isinstance(node, set):  # a YAML !!set: its members are named by its path
            stack.extend((v, path) for v in node)


def _dotted(path: str | None, key: Any) -> str:
    """``path.key``, or ``key`` at the top of the document (an empty key still adds its dot)."""
    return str(key) if path is None else f"{path}.{key}"


def _twice_path(data: Any, marked: TwiceKeyedDict) -> tuple[str, str]:
    """The key given twice in ``marked`` and its dotted path in ``data`` (:func:`twice_marked`).

    Where the reader dropped that object (it was the first value of a key given twice in an
    object that holds it), the first marked object still in ``data`` is named instead: its key is
    given twice too.
    """
    first: tuple[str, str] | None = None
    for node, field in twice_marked(data):
        here = (node.twice[0], field)
        if node is marked:
            return here
        first = first or here
    # an object that dropped ``marked`` is marked itself and in ``data``, so ``first`` is set
    return first or (marked.twice[0], marked.twice[0])


def _bounded_loader(base: type[Any], source: str) -> type[Any]:
    """A subclass of the PyYAML loader ``base`` that bounds depth and alias expansion."""
    from yaml.events import AliasEvent
    from yaml.nodes import MappingNode, SequenceNode

    class BoundedLoader(base):
        overflow: list[Overflowed] = []  # the number literals read as inf, not written so

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._expanded: dict[int, int] = {}  # id(node) -> its size with aliases expanded

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(AliasEvent):
                mark = self.peek_event().start_mark
                node = super().compose_node(parent, index)  # the anchored node, shared
                if id(node) not in self._expanded:  # its anchor is still being composed
                    raise DataError(
                        f"{_where(source)}recursive YAML alias at line {mark.line + 1} (a node "
                        "that contains itself); refused"
                    )
                return node
            self._depth += 1
            if self._depth > MAX_JSON_DEPTH:
                raise _depth_error(source, self._depth)
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            if isinstance(node, SequenceNode):
                children = node.value
            elif isinstance(node, MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = []
            size = 1 + sum(self._expanded[id(child)] for child in children)
            if size > MAX_YAML_NODES:
                raise DataError(
                    f"{_where(source)}more than {MAX_YAML_NODES:,} YAML nodes with the aliases "
                    f"expanded (at line {node.start_mark.line + 1}); a config needs a few "
                    "hundred, so an alias bomb or a runaway file is refused"
                )
            self._expanded[id(node)] = size
            return node

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            limit = sys.get_int_max_str_digits()  # 0: no limit
            text = node.value if node.tag == _INT_TAG and isinstance(node.value, str) else ""
            if limit and len(text) > 4 * limit + 3:
                # longer than any integer under the limit in any base (binary: 3.33 characters
                # a decimal digit), so refused before it is built: PyYAML builds a sexagesimal
                # one (1:59:59:...) in time quadratic in its length
                written = len(_int_digits(text))
                if written > 4 * limit + 3:
                    why = f"an integer of {written:,} characters, past Python's {limit:,} digits"
                    raise _unreadable(node, source, why)
            try:
                data = super().construct_object(node, deep)
            except GymcurricError:  # ours, from an inner node: named already
                raise
            except ValueError as exc:  # a constructor's own: a date out of range, a long int
                raise _unreadable(node, source, str(exc).partition(";")[0]) from None
            except OverflowError:  # a sexagesimal float (1:30:...:30.5) past float's range
                raise _unreadable(node, source, "a number too large for a float") from None
            except (LookupError, AttributeError, TypeError):
                # a scalar its explicit tag cannot read: PyYAML's constructors fail on
                # `!!bool maybe` (KeyError), `!!int ''` (IndexError), `!!timestamp x`
                # (AttributeError) with a message that says nothing of the value
                tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
                raise _unreadable(node, source, f"not a valid {tag} value") from None
            # a hexadecimal, binary, octal or sexagesimal integer is built without Python's
            # digit limit (only base 10 has one), and then cannot be printed: refused as a
            # decimal one of as many digits is
            long = type(data) is int and limit and data.bit_length() > 3 * limit  # log2(10) > 3
            if long and abs(data) >= 10**limit:
                why = f"an integer of more than {limit:,} decimal digits, the most Python reads"
                raise _unreadable(node, source, why)
            if type(data) is float and math.isinf(data) and "inf" not in str(node.value).lower():
                # `1e400`, not `.inf`: marked, to be named by its key once the document is built
                data = Overflowed(data, str(node.value), f" (line {node.start_mark.line + 1})")
                self.overflow.append(data)
            return data

    return BoundedLoader


def _int_digits(text: str) -> str:
    """The digits of a YAML integer literal that carry its value.

    PyYAML drops the underscores and reads any literal that starts with ``0`` (after its sign)
    in base 2, 8 or 16, in time linear in its length: its leading zeros (after ``0b`` / ``0x``)
    are dropped too, so that a zero-padded small integer is not taken for a long one. So is
    the prefix Python's ``int(digits, base)`` takes after PyYAML's (``!!int 0o17`` is read
    as ``int("0o17", 8)``, ``!!int 0x0X1f`` as ``int("0X1f", 16)``; only the prefix of
    PyYAML's base: after ``0x``, ``0b1`` is hexadecimal digits).
    """
    digits = text.replace("_", "")
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    base = digits[:2] if digits[:2] in ("0b", "0x") else "0o"  # PyYAML's: 2, 16, else 8
    digits = digits[2:] if base != "0o" else digits
    digits = digits[2:] if digits[:2].lower() == base else digits  # int()'s, in either case
    return digits.lstrip("0")


def _unreadable(node: Any, source: str, why: str) -> DataError:
    """A value PyYAML's constructor cannot build (or Python cannot print), naming its line."""
    from yaml.nodes import ScalarNode

    got = cut(str(node.value) if isinstance(node, ScalarNode) else str(node.tag))
    return DataError(
        f"{_where(source)}line {node.start_mark.line + 1}: cannot read {got!r} ({why})"
    )


def load_yaml(text: str, *, source: str = "", loader: type[Any] | None = None) -> Any:
    """Parse one YAML document with PyYAML's safe loader, bounded in size, depth and aliases.

    Args:
        text: the YAML document.
        source: the file it came from, named in the error.
        loader: a ``yaml.SafeLoader`` subclass to extend (default ``yaml.SafeLoader``).

    Raises:
        DataError: more than :data:`MAX_YAML_BYTES` bytes, nesting deeper than
            :data:`MAX_JSON_DEPTH`, a recursive alias, more than :data:`MAX_YAML_NODES`
            nodes once aliases are expanded, or a value PyYAML's constructor cannot build
            (``2020-02-30``, an integer past Python's digit limit in any base, a
            sexagesimal float past float's range, ``!!bool maybe``, ``!!int ''``,
            ``!!timestamp x``), naming its line.
        ConfigError: a float past float's range (``1e400``; ``.inf`` is read), naming its key.
        yaml.YAMLError: invalid YAML (left to the caller).
        ImportError: PyYAML is not installed.

    Examples:
        >>> load_yaml("a: &x [1, 2]\\nb: *x")
        {'a': [1, 2], 'b': [1, 2]}
    """
    import yaml

    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise DataError(
            f"{_where(source)}YAML file of {len(text.encode('utf-8', 'surrogatepass')):,} bytes; "
            f"at most {MAX_YAML_BYTES:,} bytes are accepted"
        )
    bounded = _bounded_loader(loader or yaml.SafeLoader, source)
    try:
        data = yaml.load(text, Loader=bounded)  # a SafeLoader subclass: safe
    except RecursionError:  # a constructor recursing past what the composer bounds
        raise _depth_error(source) from None
    if bounded.overflow:
        raise _overflow_error(data, bounded.overflow[0], source)
    return data


def yaml_error_text(exc: Exception, *, width: int = 200) -> str:
    """A PyYAML error's text with each line cut to ``width`` characters.

    PyYAML quotes a tag or an alias name whole ("could not determine a constructor for the tag
    '!...'", "found undefined alias '...'"), which a file may make as long as it is; its own
    excerpt of the line is already short.

    Examples:
        >>> yaml_error_text(ValueError("tag '!" + "a" * 300 + "'"), width=12)
        "tag '!aaaaaa... (307 characters)"
    """
    return "\n".join(
        line if len(line) <= width else f"{line[:width]}... ({len(line):,} characters)"
        for line in str(exc).splitlines()
    )


_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"


def unique_keys_loader(base: type[Any], *, source: str = "") -> type[Any]:
    """A subclass of the PyYAML loader ``base`` that refuses a key given twice in one mapping.

    PyYAML keeps the later of two equal keys without a word, so a config with two ``warmup:``
    stages (or two ``lr:`` lines) would silently lose the first. A YAML merge key
    (``<<: *base``) is not a duplicate: an explicit key overrides a merged one.

    Raises (when loading):
        ConfigError: a key given twice (``source``, the dotted key, both lines).
    """
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    class UniqueKeyLoader(base):
        def construct_document(self, node: Any) -> Any:
            self.check_unique(node, None, set())  # None: the document itself
            return super().construct_document(node)

        def check_unique(self, node: Any, path: str | None, seen: set[int]) -> None:
            if id(node) in seen:  # an alias: checked where it is anchored
                return
            seen.add(id(node))
            if isinstance(node, SequenceNode):
                for i, child in enumerate(node.value):
                    self.check_unique(child, f"{path or ''}[{i}]", seen)
            elif isinstance(node, MappingNode):
                lines: dict[Any, int] = {}
                for key_node, value_node in node.value:
                    if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                        self.check_unique(value_node, path, seen)
                        continue
                    key = self.construct_object(key_node)
                    if not isinstance(key, Hashable):  # `!!set x: 1`: PyYAML's constructor
                        continue  # refuses it, naming its line (a raw TypeError here)
                    line = key_node.start_mark.line + 1
                    if key in lines:
                        raise ConfigError(
                            _dotted(path, key),
                            key,
                            "duplicate key: given at line "
                            f"{lines[key]} and line {line} in one YAML mapping, whose reader "
                            "keeps only the later; give it once",
                            source=source,
                        )
                    lines[key] = line
                    self.check_unique(value_node, _dotted(path, key), seen)

    return UniqueKeyLoader


def load_yaml_unique(text: str, *, source: str = "") -> Any:
    """:func:`load_yaml` (bounded) refusing duplicate keys, ``1e-3`` a float (``_yaml_floats``).

    Raises:
        ConfigError: a key given twice in one mapping (``source``, the dotted key, both lines).
        DataError, ConfigError, yaml.YAMLError, ImportError: as :func:`load_yaml`.
    """
    from gymcurric._yaml_floats import float_loader  # a SafeLoader subclass: safe

    return load_yaml(text, source=source, loader=unique_keys_loader(float_loader(), source=source))
