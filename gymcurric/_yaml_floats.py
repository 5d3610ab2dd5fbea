"""The YAML loader every gymcurric config reader builds on: ``1e-3`` is a float.

PyYAML implements YAML 1.1, whose float pattern needs a dot, so ``1e-3``, ``1e5`` and ``-2E-4``
load as strings (``1.0e-3`` is a float); JSON and YAML 1.2 read them as numbers, and so do
``gymcurric train --config`` and ``load_curriculum_config``, both through
:func:`gymcurric._parsing.load_yaml_unique` on :func:`float_loader`. Literals past a float's
range (``1e400``) are refused there, naming the key. A stage name written so (``name: 1e3``)
is a number, not a name: :func:`unquoted_name_error` says to quote it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from gymcurric.errors import ConfigError

__all__ = ["FLOAT_FIRST_CHARACTERS", "FLOAT_PATTERN", "float_loader", "unquoted_name_error"]

#: YAML 1.1's float pattern, with the dot made optional when an exponent is given.
FLOAT_PATTERN = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |\.[0-9_]+(?:[eE][-+][0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
    re.X,
)
#: The first characters of a plain scalar that :data:`FLOAT_PATTERN` is tried on.
FLOAT_FIRST_CHARACTERS = tuple("-+0123456789.")


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
        "tag:yaml.org,2002:float", FLOAT_PATTERN, list(FLOAT_FIRST_CHARACTERS)
    )
    return FloatLoader


#: The reasons :class:`~gymcurric.errors.ConfigError` gives for a stage name that is no string.
_NAME_REASONS = ("expected a non-empty string", "expected a stage name")
_READ_AS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}


def unquoted_name_error(exc: ConfigError, text: str) -> ConfigError:
    """``exc``, or, for a stage name YAML read as a number or bool, one naming the literal.

    ``name: 1e3`` (and ``stages: {1e3: ...}``, ``curriculum_stage: 1e3``) reads as the float
    ``1000.0``, ``name: 123`` as an int, ``name: yes`` as ``True``: the error then shows what
    ``text`` says (``1e3``, its line) and says to quote it, not a value the file never wrote.
    """
    if not isinstance(exc.reason, str) or not exc.reason.startswith(_NAME_REASONS):
        return exc
    values = exc.value if isinstance(exc.value, list | tuple) else [exc.value]
    read = [v for v in values if isinstance(v, int | float)]  # a bool is an int
    found = _written(text, read[0]) if read else None
    if found is None:
        return exc
    literal, line = found
    key = exc.key
    spec_key = f"stages.{read[0]}"  # the specification's format names a stage by its key
    if isinstance(key, str) and (key == spec_key or key.startswith(spec_key + ".")):
        key = f"stages.{literal}{key[len(spec_key) :]}"
    why = f"{exc.reason}; YAML reads {literal} (line {line}) as {read[0]!r}: quote it, '{literal}'"
    return ConfigError(key, literal, why, source=exc.source)


def _written(text: str, value: Any) -> tuple[str, int] | None:
    """The first unquoted stage name in YAML ``text`` that reads as ``value``, and its line.

    A stage name is the value of a ``name`` or ``curriculum_stage`` key (or an item of its list)
    or a key of a ``stages`` mapping. Only called for an error: ``text`` has loaded already.
    """
    import yaml

    loader = float_loader()
    seen: set[int] = set()
    try:
        todo = [yaml.compose(text, Loader=loader)]
    except yaml.YAMLError:  # not expected, as text has loaded: the error stays as it was
        return None
    while todo:
        node = todo.pop(0)
        if node is None or id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        pairs = (
            node.value if isinstance(node, yaml.MappingNode) else [(None, n) for n in node.value]
        )
        for k, v in pairs:
            names: list[Any] = []
            if isinstance(k, yaml.ScalarNode) and k.value in ("name", "curriculum_stage"):
                names = v.value if isinstance(v, yaml.SequenceNode) else [v]
            elif (
                isinstance(k, yaml.ScalarNode)
                and k.value == "stages"
                and isinstance(v, yaml.MappingNode)
            ):
                names = [name for name, _ in v.value]
            for n in names:
                if isinstance(n, yaml.ScalarNode) and n.style is None and n.tag in _READ_AS:
                    got = yaml.load(n.value, Loader=loader)
                    if type(got) is type(value) and got == value:
                        return n.value, n.start_mark.line + 1
            todo.extend(x for x in (k, v) if x is not None)
    return None
