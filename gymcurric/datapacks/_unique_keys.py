"""Curriculum config files with a key given twice in one mapping are refused, not half-read.

PyYAML and ``json`` both keep the later of two equal keys without a word, so a config with two
``warmup:`` stages (or two ``window:`` lines) would silently lose the first. Here either is a
:class:`~gymcurric.errors.ConfigError` naming the file, the dotted key and, for YAML, both lines.
A YAML merge key (``<<: *base``) is not a duplicate: an explicit key overrides a merged one.
"""

from __future__ import annotations

import json
from typing import Any

from gymcurric._parsing import load_yaml, unique_keys_loader
from gymcurric.errors import ConfigError

__all__ = ["check_json_unique", "load_yaml_unique"]

_TWICE = "duplicate key: given {} in one {}, whose reader keeps only the later; give it once"


def load_yaml_unique(text: str, *, source: str) -> Any:
    """:func:`gymcurric._parsing.load_yaml` (bounded), refusing duplicate keys.

    Raises:
        ConfigError: a key given twice in one mapping (``source``, the dotted key, both lines).
    """
    import yaml

    loader = unique_keys_loader(yaml.SafeLoader, source=source)
    return load_yaml(text, source=source, loader=loader)  # a SafeLoader: safe


def check_json_unique(text: str, *, source: str) -> None:
    """Refuse a JSON text (already parsed once, within the input limits) with duplicate keys.

    Raises:
        ConfigError: a key given twice in one object (``source`` and the key; JSON's parser
            gives no line to name).
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ConfigError(key, key, _TWICE.format("twice", "JSON object"), source=source)
            out[key] = value
        return out

    json.loads(text, object_pairs_hook=pairs)
