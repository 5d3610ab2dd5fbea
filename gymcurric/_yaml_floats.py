"""The YAML loader every gymcurric config reader builds on: ``1e-3`` is a float.

PyYAML implements YAML 1.1, whose float pattern needs a dot, so ``1e-3``, ``1e5`` and ``-2E-4``
load as strings (``1.0e-3`` is a float); JSON and YAML 1.2 read them as numbers, and so do
``gymcurric train --config`` and ``load_curriculum_config``, both through
:func:`gymcurric._parsing.load_yaml_unique` on :func:`float_loader`. Literals past a float's
range (``1e400``) are refused there, naming the key; :class:`Overflowed` marks them, and
:func:`overflow_marking_parse_float` does so for the JSON readers (configs and datapack
records). A stage name written so (``name: 1e3``) is a number, not a name:
:func:`unquoted_name_error` says to quote it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

from gymcurric._checks import cut
from gymcurric.errors import ConfigError

__all__ = [
    "Overflowed",
    "float_loader",
    "overflow_marking_parse_float",
    "unquoted_name_error",
]

#: YAML 1.1's float pattern, with the dot made optional when an exponent is given.
_FLOAT_PATTERN = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |\.[0-9_]+(?:[eE][-+][0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
    re.X,
)
#: The first characters of a plain scalar that :data:`_FLOAT_PATTERN` is tried on.
_FLOAT_FIRST_CHARACTERS = tuple("-+0123456789.")


class Overflowed(float):
    """A literal too large for a float (``1e400``, which Python reads as +-inf without a word,
    where ``.inf`` and JSON's ``Infinity`` say it), with its text and, from YAML, its line.
    """

    literal: str
    where: str

    def __new__(cls, number: float, literal: str, where: str = "") -> Overflowed:
        self = super().__new__(cls, number)
        self.literal, self.where = literal, where
        return self


def overflow_marking_parse_float(found: list[Overflowed]) -> Callable[[str], float]:
    """A JSON ``parse_float`` that marks (and adds to ``found``) each literal read as inf."""

    def parse_float(literal: str) -> float:  # not called for `Infinity`, a constant
        number = float(literal)
        if not math.isinf(number):
            return number
        found.append(marked := Overflowed(number, literal))
        return marked

    return parse_float


@functools.cache
def float_loader() -> type[Any]:
    """A ``yaml.SafeLoader`` subclass (safe) that reads ``1e-3`` as a float; built once.

    The pattern is tried after SafeLoader's own resolvers (bool, int, float, null, timestamp),
    so it only adds floats written without a dot: every scalar SafeLoader reads as another type
    stays that type.

    Raises:
        ImportError: PyYAML is not installed.

    Examples:
        >>> import yaml
        >>> yaml.load("a: 1e-3\\nb: 1_000\\nc: '1e5'", Loader=float_loader())
        {'a': 0.001, 'b': 1000, 'c': '1e5'}
    """
    import yaml

    class FloatLoader(yaml.SafeLoader):
        pass

    FloatLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float", _FLOAT_PATTERN, list(_FLOAT_FIRST_CHARACTERS)
    )
    return FloatLoader


#: The reasons :class:`~gymcurric.errors.ConfigError` gives for a stage name that is no string.
_NAME_REASONS = ("expected a non-empty string", "expected a stage name")
_READ_AS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}


def unquoted_name_error(exc: ConfigError, text: str) -> ConfigError:
    """``exc``, or, for a stage name YAML read as a number or bool, one naming the literal.

    ``name: 1e3`` (and ``stages: {1e3: ...}``, ``curriculum_stage: 1e3``) reads as the float
    ``1000.0``, ``name: 123`` as an int, ``name: yes`` as ``True``: the error then shows what
    ``text`` says at ``exc``'s key (``1e3``, its line) and says to quote it, not a value the file
    never wrote. Called on an error only: where the literal is not found (an int whose ``repr``
    is over 80 characters, which the config shows cut), or anything fails, ``exc`` is returned
    as it was (never a traceback in its place).
    """
    if not isinstance(exc.reason, str) or not exc.reason.startswith(_NAME_REASONS):
        return exc
    values = exc.value if isinstance(exc.value, list | tuple) else [exc.value]
    read = [v for v in values if isinstance(v, int | float)]  # a bool is an int
    key = exc.key
    if not read or not isinstance(key, str):
        return exc
    try:
        found = _written(text, key, read[0])
        if found is None:
            return exc
        literal, line, key = found
        literal = cut(literal)  # 0000...1e3 is 1000.0
        why = f"{exc.reason}; YAML reads {literal} (line {line}) as {read[0]!r}: quote it, "
        return ConfigError(key, literal, f"{why}'{literal}'", source=exc.source)
    except Exception:  # only the better message is lost: the error stays as it was
        return exc


def _written(text: str, key: str, value: Any) -> tuple[str, int, str] | None:
    """The unquoted scalar of YAML ``text`` at the dotted ``key`` that reads as ``value``.

    ``key`` is the config's error key: ``stages[0].name``, ``stages[1].filters.curriculum_stage``
    (the scalar, or an item of the list there) or, in the specification's format,
    ``stages.<name>.name`` (the key of the ``stages`` mapping). Returns the literal, its line
    and ``key`` as written (``stages.1e3.name``, not ``stages.1000.0.name``), or ``None``.
    The tree is walked along ``key`` only (a merge key ``<<`` stays at its mapping's path), so
    another scalar reading as ``value`` elsewhere is never named.
    """
    import yaml

    loader = float_loader()
    reader = loader("")  # reads a mapping key's scalar as the config reader did
    # (node, its dotted key as the config names it, and as the text writes it)
    todo: list[tuple[Any, str, str]] = [(yaml.compose(text, Loader=loader), "", "")]
    while todo:
        node, path, written = todo.pop(0)
        if isinstance(node, yaml.SequenceNode):
            children = [
                (f"{path}[{i}]", f"{written}[{i}]", None, item) for i, item in enumerate(node.value)
            ]
        elif isinstance(node, yaml.MappingNode):
            children = []
            for k, v in node.value:
                if k.tag == "tag:yaml.org,2002:merge":  # <<: its mappings' keys are this one's
                    merged = v.value if v.id == "sequence" else [v]
                    todo.extend((m, path, written) for m in merged)
                elif isinstance(k, yaml.ScalarNode):
                    name, as_written = str(reader.construct_object(k)), k.value
                    if path:
                        name, as_written = f"{path}.{name}", f"{written}.{as_written}"
                    children.append((name, as_written, k, v))
        else:
            continue
        for at, at_written, k, v in children:
            if at == key:
                names, key_written = (
                    v.value if isinstance(v, yaml.SequenceNode) else [v],
                    at_written,
                )
            elif k is not None and path == "stages" and f"{at}.name" == key:  # named by its key
                names, key_written = [k], f"{at_written}.name"
            elif key.startswith((f"{at}.", f"{at}[")):
                todo.append((v, at, at_written))
                continue
            else:
                continue
            for n in names:
                if (
                    isinstance(n, yaml.ScalarNode)
                    and n.style is None
                    and n.tag in _READ_AS  # as resolved, not tagged (!!float 12: quoting fails)
                    and reader.resolve(yaml.ScalarNode, n.value, (True, False)) == n.tag
                ):
                    got = reader.construct_object(n)
                    if type(got) is type(value) and got == value:
                        return n.value, n.start_mark.line + 1, key_written
    return None
