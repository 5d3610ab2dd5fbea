"""Curriculum config files with a key given twice in one mapping are refused, not half-read.

PyYAML and ``json`` both keep the later of two equal keys without a word, so a config with two
``warmup:`` stages (or two ``window:`` lines) would silently lose the first. Here either is a
:class:`~gymcurric.errors.ConfigError` naming the file, the dotted key and, for YAML, both lines.
A YAML merge key (``<<: *base``) is not a duplicate: an explicit key overrides a merged one.
"""

from __future__ import annotations

import json
from typing import Any

from gymcurric._parsing import load_yaml
from gymcurric.errors import ConfigError

__all__ = ["check_json_unique", "load_yaml_unique"]

_MERGE = "tag:yaml.org,2002:merge"
_TWICE = "duplicate key: given {} in one {}, whose reader keeps only the later; give it once"


def _dotted(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def load_yaml_unique(text: str, *, source: str) -> Any:
    """:func:`gymcurric._parsing.load_yaml` (bounded), refusing duplicate keys.

    Raises:
        ConfigError: a key given twice in one mapping (``source``, the dotted key, both lines).
    """
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_document(self, node: Any) -> Any:
            self._check(node, "", set())
            return super().construct_document(node)

        def _check(self, node: Any, path: str, seen: set[int]) -> None:
            if id(node) in seen:  # an alias: checked where it is anchored
                return
            seen.add(id(node))
            if isinstance(node, SequenceNode):
                for i, child in enumerate(node.value):
                    self._check(child, f"{path}[{i}]", seen)
            elif isinstance(node, MappingNode):
                lines: dict[Any, int] = {}
                for key_node, value_node in node.value:
                    if key_node.tag == _MERGE or not isinstance(key_node, ScalarNode):
                        self._check(value_node, path, seen)
                        continue
                    key = self.construct_object(key_node)
                    line = key_node.start_mark.line + 1
                    if key in lines:
                        where = f"at line {lines[key]} and line {line}"
                        raise ConfigError(
                            _dotted(path, key),
                            key,
                            _TWICE.format(where, "YAML mapping"),
                            source=source,
                        )
                    lines[key] = line
                    self._check(value_node, _dotted(path, key), seen)

    return load_yaml(text, source=source, loader=UniqueKeyLoader)  # a SafeLoader: safe


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
