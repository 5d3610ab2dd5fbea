"""``gymcurric._yaml_floats`` exports only what other gymcurric modules take from it."""

from __future__ import annotations

import ast
from pathlib import Path

from gymcurric import _yaml_floats

PACKAGE = Path(__file__).resolve().parents[1] / "gymcurric"


def test_every_exported_name_is_imported_by_another_module():
    # FLOAT_PATTERN and FLOAT_FIRST_CHARACTERS were exported, though only float_loader uses
    # them: a private module's __all__ lists what the package takes from it, no more
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_yaml_floats.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "gymcurric._yaml_floats":
                imported.update(alias.name for alias in node.names)
    assert sorted(set(_yaml_floats.__all__) - imported) == []
