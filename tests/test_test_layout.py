"""No module under ``tests`` imports from a test module (``test_*.py``).

Importing ``tests/x/test_a.py`` from ``test_b.py`` ties the two files together (moving or
renaming a test breaks the other, and the importer runs the first one's module-level code, its
skips included); shared helpers live in plain helper modules with public names instead
(``tests/sub_env_faults.py``, ``tests/wrappers/checkpoint_files.py``, ...).

Every ``tests/**/*.py`` (test and helper modules) is parsed with ``ast`` (nothing is imported);
an import that names a module ``test_*`` under ``tests`` (``from tests.x.test_a import f``,
``from .test_a import f``, ``from tests.x import test_a``, ``import tests.x.test_a``) is
reported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def is_test_module(dotted: str) -> bool:
    """Whether the dotted module name is a test module under ``tests``."""
    parts = dotted.split(".")
    return parts[0] == "tests" and parts[-1].startswith("test_")


def imported_modules(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names ``node`` may import, relative imports resolved against ``package``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    # ``from tests.x import test_a`` imports the module tests.x.test_a
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports_of_test_modules(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: module`` for each test module that ``path`` imports."""
    rel = path.relative_to(root)
    package = ".".join(rel.parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in imported_modules(node, package):
                if is_test_module(name):
                    found.append(f"{rel.as_posix()}:{node.lineno}: {name}")
                    break
    return found


def offenders(root: Path = ROOT) -> dict[str, list[str]]:
    """Each module under ``root/tests`` that imports a test module, with those imports."""
    found = {}
    for path in sorted((root / "tests").rglob("*.py")):
        hits = imports_of_test_modules(path, root)
        if hits:
            found[path.relative_to(root).as_posix()] = hits
    return found


def test_no_test_module_imports_another_test_module():
    found = [hit for hits in offenders().values() for hit in hits]
    assert not found, (
        "modules import test modules; move the shared names to a helper module "
        "(not test_*.py) and import them from there:\n" + "\n".join(found)
    )


def test_the_check_sees_every_import_form(tmp_path):
    forms = {
        "absolute": "from tests.a.test_x import f\n",
        "relative": "from .test_x import f\n",
        "parent": "from ..test_x import f\n",
        "module": "from tests.a import test_x\n",
        "sibling": "from . import test_x\n",
        "plain": "import tests.a.test_x\n",
    }
    package = tmp_path / "tests" / "a" / "b"
    package.mkdir(parents=True)
    for name, source in forms.items():
        (package / f"test_{name}.py").write_text(source + "from tests.a import helpers\n")
    (package / "harness.py").write_text("from .test_x import f\n")
    (package / "clean.py").write_text("from tests.a.b import harness\nimport tests.a.helpers\n")
    found = offenders(tmp_path)
    expected = [f"tests/a/b/test_{name}.py" for name in forms] + ["tests/a/b/harness.py"]
    assert sorted(found) == sorted(expected)
    assert all(len(hits) == 1 for hits in found.values()), found
