"""``key=value`` overrides of the ``gymcurric train`` config, as the command line gives them.

An override's value is read as YAML, as in a config file (``1e-3``, ``true``, ``[64, 64]``);
:func:`apply_overrides` sets each on a copy of the file's mapping before
:class:`~gymcurric.train.config.TrainConfig` checks it. A flag that stands for a key
(``--datapack-dir``, ``--out-dir``, ``--seed``) is a :class:`Setting` instead: its value is
already typed by the command and never read as YAML, so a folder named ``2024``, ``null`` or
``runs #2`` reaches the config as that string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from gymcurric._checks import check_text, cut
from gymcurric._parsing import load_yaml_unique
from gymcurric.errors import ConfigError, DataError

__all__ = ["RUN_DIR_TEXT", "Setting", "apply_overrides"]

#: The keys whose strings name the run directory (``run_path``, ``default_run_name``): a byte
#: of argv that is not UTF-8 is refused in them (:func:`~gymcurric._checks.check_text`'s path).
RUN_DIR_TEXT = ("run.name", "run.out_dir", "env.id")


@dataclass(frozen=True)
class Setting:
    """One config key set by a command-line flag, its value already typed (not YAML text).

    Attributes:
        key: the dotted config key, e.g. ``"run.out_dir"``.
        value: the value as the flag gives it: a path or a name exactly as typed (a str), an
            int the command has checked, a bool.
        flag: the flag it comes from (``"--out-dir"``), named where the value is refused here.
    """

    key: str
    value: Any
    flag: str


def _parse_value(key: str, text: str) -> Any:
    """An override's value: YAML/JSON scalars and lists (``1e-3``, ``true``, ``[1, 2]``).

    Text that is not YAML at all (``*.json``, ``a: b: c``) is the string itself. A value YAML
    reads but cannot build (``2020-02-30``, ``1e400``, ``{a: 1, a: 2}``) is refused, as in a
    file, rather than passed on as that string; so is one YAML reads as null, or as holding a
    null, where the text writes none (``#c``, ``!``, ``&a``: a comment, a tag, an anchor;
    ``-``, ``?``, ``{a, b}``, ``{a: }``: an item, a key or a value left empty), and one with a
    comment after it (``foo #c``, which YAML reads as ``foo``). An empty value is ``""``.
    """
    if text == "":
        return ""
    # a byte of argv that is not UTF-8: refused in a run directory's name, else the text itself
    check_text(key, text, source="command line", path=key in RUN_DIR_TEXT)
    try:
        import yaml
    except ImportError:  # pragma: no cover
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    try:
        value = load_yaml_unique(text)
    except yaml.YAMLError:
        return text
    except (ConfigError, DataError) as exc:  # read without a source: the value's own message
        if isinstance(exc, DataError):  # "line 1: cannot read '2020-02-30' (day is out of ...)"
            why = f"{str(exc).removeprefix('line 1: ')}; quote it for a string: {key}=\"'...'\""
            raise ConfigError(key, cut(text), why, source="command line") from None
        inner = exc.key if exc.key.startswith("[") or not exc.key else f".{exc.key}"
        why = exc.reason.replace(" (line 1)", "")  # a key twice, or a number past float's range
        raise ConfigError(f"{key}{inner}", cut(text), why, source="command line") from None
    unwritten = _unwritten_null(yaml, key, text)
    if unwritten == "":  # `x=#c`, `x=!`, `x=&a`: the whole value is a null nobody wrote
        what = (
            "only whitespace"
            if not text.strip()
            else "`#` starts a comment, `!` a tag, `&` an anchor, and nothing is left"
        )
        why = (
            f"YAML reads it as null ({what}); quote it for a string: {key}=\"'...'\", "
            f"or write {key}=null for null"
        )
        raise ConfigError(key, cut(text), why, source="command line")
    if unwritten is not None:  # `x=-` read as [None], `x={a, b}` as {a: None, b: None}
        why = (
            f"YAML reads part of it as null where no null is written: {unwritten}; quote it "
            f"for a string: {key}=\"'...'\", or write null there (`null`, `~`) for null"
        )
        raise ConfigError(key, cut(text), why, source="command line")
    at = _comment_at(yaml, text)
    if at is not None:  # `x=foo #c` read as 'foo': the text after the `#` was dropped
        comment = text[at:].partition("\n")[0]
        why = (
            f"YAML reads {cut(comment)!r} as a comment and drops it; quote it for a string: "
            f"{key}=\"'...'\", or leave the comment out"
        )
        raise ConfigError(key, cut(text), why, source="command line")
    return value


def _comment_at(yaml: Any, text: str) -> int | None:
    """Where a YAML comment starts in ``text`` (a ``#`` outside every token), or None.

    Linear in the text: each character's count of tokens over it is a running sum of the
    tokens' starts and ends (not a look at every token for each ``#``).
    """
    edges = [0] * (len(text) + 1)
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        edges[token.start_mark.index] += 1
        edges[token.end_mark.index] -= 1
    covered = list(accumulate(edges))  # tokens over each character
    at = text.find("#")
    while at != -1:
        if not covered[at]:
            return at
        at = text.find("#", at + 1)
    return None


@dataclass
class _Open:
    """A sequence or mapping open in :func:`_unwritten_null`'s walk over the parse events."""

    path: str  # the dotted override key and the steps into the value, e.g. `x.a[0]`
    index: int | None  # a sequence's next item; None in a mapping
    key: str | None = None  # in a mapping, the key whose value comes next; None: a key comes
    is_set: bool = False  # a `!!set` mapping, whose values are null by definition


def _unwritten_null(yaml: Any, key: str, text: str) -> str | None:
    """Where YAML reads a null in ``text`` that the text does not write; None if nowhere.

    A written null is ``null``, ``Null``, ``NULL`` or ``~`` (plain), or a ``!!null`` tag with
    nothing or one of those after it. Any other scalar YAML reads as null was never written:
    an empty item (``-``, ``[a, &x]``), key (``?``) or value (``{a, b}``, ``{a: }``), a bare
    tag or anchor (``[! ]``). The parse events (not the built value) show which: a null key
    and a null value look alike once built. ``""``: the whole value (also text that holds no
    YAML node at all, ``#c`` or ``" "``); else words saying where, e.g. ``the item x[0]
    (character 2: nothing is written)``. A ``!!set``'s values are null in YAML and left be,
    but not an alias of one read elsewhere (``[!!set {a: &n }, *n]`` reads ``[{'a'}, None]``).
    """
    from yaml.nodes import ScalarNode

    from gymcurric._yaml_floats import float_loader

    null_tag, set_tag = "tag:yaml.org,2002:null", "tag:yaml.org,2002:set"
    resolver = float_loader()("")  # reads a plain scalar's type as the loader does
    stack: list[_Open] = []
    nodes = 0
    set_anchors: set[str] = set()  # anchors on a set's value left unwritten (`!!set {a: &n }`)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
            if not isinstance(event, yaml.NodeEvent):
                continue
            nodes += 1
            where, path, set_value = _step(stack, key, event)
            if isinstance(event, yaml.SequenceStartEvent):
                stack.append(_Open(path, 0))
            elif isinstance(event, yaml.MappingStartEvent):
                stack.append(_Open(path, None, is_set=event.tag == set_tag))
            # an alias is checked at its anchor, except one to a set's value, not looked at there
            if isinstance(event, yaml.AliasEvent) and not set_value and event.anchor in set_anchors:
                start = event.start_mark.index
                what = "an alias of a !!set's value where nothing is written"
                return f"{where} (character {start + 1}: {'*' + event.anchor!r}, {what})"
            if not isinstance(event, yaml.ScalarEvent):
                continue
            tag = event.tag
            if tag is None or tag == "!":  # as the composer resolves them
                tag = resolver.resolve(ScalarNode, event.value, event.implicit)
            nulls = ("null", "Null", "NULL", "~")
            if tag != null_tag or (event.style is None and event.value in nulls):
                continue
            if event.tag == null_tag and event.value in ("", *nulls):  # `!!null`, `!!null ~`
                continue
            if set_value:  # null in YAML; read only through an alias (`[!!set {a: &n }, *n]`)
                if event.anchor is not None:
                    set_anchors.add(event.anchor)
                continue
            if not where:
                return ""
            start, end = event.start_mark.index, event.end_mark.index
            shown = text[start:end].strip()  # a tag or an anchor: `!`, `&a`, `! ''`, `!!null x`
            what = f"{shown!r}, with no null after it" if shown else "nothing is written"
            return f"{where} (character {start + 1}: {what})"
    finally:
        resolver.dispose()
    return "" if nodes == 0 else None


def _step(stack: list[_Open], key: str, event: Any) -> tuple[str, str, bool]:
    """Where ``event``'s node sits: words for a message, its path, whether a set's value.

    Moves the innermost open node on: a sequence to its next item, a mapping from a key to
    its value and back. A key is cut short (:func:`~gymcurric._checks.cut`), so a path's length
    is bounded by the nesting depth, and the walk is linear in the text however long its keys.
    """
    if not stack:  # the override's key, cut as a key in it is
        return "", cut(key), False
    node = stack[-1]
    if node.index is not None:
        node.index += 1
        path = f"{node.path}[{node.index - 1}]"
        return f"the item {path}", path, False
    if node.key is None:  # this is a key; an alias or a collection as one has no text
        text = getattr(event, "value", "")  # only a scalar has one
        node.key = cut(text) or "?"  # cut: the path of every node under it holds it
        return f"a key of {node.path}", node.path, False
    step, node.key = node.key, None
    path = f"{node.path}.{step}" if step.replace("_", "a").isalnum() else f"{node.path}[{step!r}]"
    return f"the value {path}", path, node.is_set


def apply_overrides(
    data: Mapping[str, Any], overrides: Sequence[str], settings: Sequence[Setting] = ()
) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``dotted.key=value`` applied (values parsed as YAML).

    Each of ``settings`` is then applied as it is (its value is not read as YAML), after every
    override: a flag wins over ``key=value`` for the same key.

    Raises:
        ConfigError: an override is not ``key=value``, walks through a non-mapping, or has a
            value YAML reads but cannot build (a date ``2020-02-30``, ``1e400``), as in a file,
            or reads as null, or as holding a null, without writing one (``#c``, ``-``,
            ``{a, b}``), or holds a comment (``foo #c``), which would drop what the user
            typed. A setting's string that is not text (a lone surrogate; in a run
            directory's name, a byte that is not UTF-8), naming its flag.
    """
    out: dict[str, Any] = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key or any(not p for p in key.split(".")):
            raise ConfigError("override", item, "expected dotted.key=value", source="command line")
        _set(out, key, _parse_value(key, text))
    for setting in settings:
        if isinstance(setting.value, str):  # as _parse_value checks an override's text
            path = setting.key in RUN_DIR_TEXT
            check_text(setting.flag, setting.value, source="command line", path=path)
        _set(out, setting.key, setting.value)
    return out


def _set(out: dict[str, Any], key: str, value: Any) -> None:
    """Set the dotted ``key`` in ``out``, making the mappings on the way."""
    node = out
    *parents, leaf = key.split(".")
    for i, p in enumerate(parents):
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(
                ".".join(parents[: i + 1]),
                nxt,
                f"is not a mapping; cannot set {key!r}",
                source="command line",
            )
        node = nxt
    node[leaf] = value
