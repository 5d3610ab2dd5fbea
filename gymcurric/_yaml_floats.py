"""The YAML loader every gymcurric config reader builds on: ``1e-3`` is a float.

PyYAML implements YAML 1.1, whose float pattern needs a dot, so ``1e-3``, ``1e5`` and ``-2E-4``
load as strings (``1.0e-3`` is a float); JSON and YAML 1.2 read them as numbers, and so do
``gymcurric train --config`` and ``load_curriculum_config``, both through
:func:`gymcurric._parsing.load_yaml_unique` on :func:`float_loader`. Literals past a float's
range (``1e400``) are refused there, naming the key.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["FLOAT_FIRST_CHARACTERS", "FLOAT_PATTERN", "float_loader"]

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
