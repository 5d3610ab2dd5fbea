"""The layer map (DESIGN.md, docs/developer_guide.md): no module imports from a layer below it.

Every module under ``gymcurric/`` is parsed with ``ast`` (nothing is imported). An import
counts wherever it is written: at module level, inside a function (a lazy import of an optional
part is still a dependency), and as a module name in a string (``importlib.import_module``,
Gymnasium entry points, the CLI's subcommand table). Imports under ``if TYPE_CHECKING:`` are
annotations only and do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gymcurric"
GUIDE = ROOT / "docs" / "developer_guide.md"

# From the most basic layer to the last. A module may import from its own layer and the layers
# above it, never from one below. Units are module names; a module belongs to the longest unit
# it starts with. "gymcurric" is the package facade (gymcurric/__init__.py) only: it re-exports
# the wrappers and registers the envs, so it sits with them, and core code must not import it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core helpers",
        (
            "gymcurric.errors",
            "gymcurric._checks",
            "gymcurric._optional",
            "gymcurric._parsing",
            "gymcurric._yaml_floats",
            "gymcurric._npz",
            "gymcurric._torch_devices",
            "gymcurric._deprecated",
        ),
    ),
    ("core", ("gymcurric.tasks", "gymcurric.datapacks", "gymcurric.safety")),
    ("torch-level", ("gymcurric.semantics", "gymcurric.replay")),
    ("env-facing", ("gymcurric.wrappers", "gymcurric.envs", "gymcurric")),
    ("integrations", ("gymcurric.integrations",)),  # integrations/sb3/ and integrations/ray/
    ("entry points", ("gymcurric.cli", "gymcurric.train", "gymcurric.__main__")),
)

# Today's exceptions to the rule, each as (file, imported module). The code follows the map
# (checked when this test was written), so the list is empty. Add an entry only with a comment
# saying why the import cannot move; an entry that no longer matches an import fails the test.
ALLOWED: frozenset[tuple[str, str]] = frozenset()

FACADE = "gymcurric"
_UNIT_TIER = {unit: tier for tier, (_, units) in enumerate(LAYERS) for unit in units}
# a string naming a module, optionally with an attribute (Gymnasium's "module:Class")
_MODULE_STRING = re.compile(r"^gymcurric(?:\.\w+)+(?::[\w.]+)?$")


def module_name(path: Path) -> str:
    """``gymcurric/tasks/pools.py`` -> ``gymcurric.tasks.pools``; a package is its folder."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module under gymcurric/, by name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def unit_of(module: str) -> str | None:
    """The layer-map unit a module belongs to (None: not in the map)."""
    if module == FACADE:
        return FACADE
    units = [u for u in _UNIT_TIER if u != FACADE and (module == u or module.startswith(u + "."))]
    return max(units, key=len) if units else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(module: str, source: str, known: set[str], is_package: bool) -> list[str]:
    """The gymcurric modules ``source`` (the text of ``module``) imports, in order."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[str] = []

    def target(name: str) -> str:
        # `from gymcurric import envs` imports the submodule; `from gymcurric import X` the package
        return name if name in known else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.split(".")[0] == "gymcurric")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base_name = ".".join([*base, node.module] if node.module else base)
            else:
                base_name = node.module or ""
            if base_name.split(".")[0] == "gymcurric":
                found.extend(target(f"{base_name}.{a.name}") for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _MODULE_STRING.match(node.value)
        ):
            name = node.value.partition(":")[0]
            if name in known:
                found.append(name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def violations(module: str, source: str, known: set[str], is_package: bool = False) -> list[str]:
    """The modules ``module`` imports from a layer below its own."""
    unit = unit_of(module)
    assert unit is not None, f"{module} is in no layer: add it to LAYERS (and the guide's map)"
    bad = []
    for name in imported_modules(module, source, known, is_package):
        target = unit_of(name)
        assert target is not None, f"{module} imports {name}, which is in no layer"
        if _UNIT_TIER[target] > _UNIT_TIER[unit]:
            bad.append(name)
    return bad


def test_every_module_is_in_the_map():
    unmapped = [m for m in package_modules() if unit_of(m) is None]
    assert not unmapped, f"add these modules to LAYERS and the developer guide's map: {unmapped}"


def test_no_module_imports_from_a_layer_below_it():
    modules = package_modules()
    known = set(modules)
    found = set()
    for name, path in modules.items():
        rel = path.relative_to(ROOT).as_posix()
        for imported in violations(name, path.read_text(), known, path.name == "__init__.py"):
            found.add((rel, imported))
    new = sorted(found - ALLOWED)
    assert not new, (
        "imports from a layer below (see the layer map in docs/developer_guide.md): "
        + ", ".join(f"{path} imports {mod}" for path, mod in new)
    )
    stale = sorted(ALLOWED - found)
    assert not stale, f"ALLOWED entries that no longer match an import (remove them): {stale}"


_KNOWN = {
    "gymcurric",
    "gymcurric.tasks",
    "gymcurric.tasks.fake",
    "gymcurric.errors",
    "gymcurric.wrappers",
    "gymcurric.wrappers.cost",
    "gymcurric.envs",
    "gymcurric.integrations.sb3",
    "gymcurric.integrations.ray",
}


@pytest.mark.parametrize(
    "source",
    [
        "from gymcurric.wrappers import AnnotateCost",
        "import gymcurric.wrappers.cost",
        "def f():\n    from gymcurric.integrations.sb3 import PPOLag\n",
        "from ..wrappers import cost",
        "from gymcurric import envs",
        "from gymcurric import Curriculum",  # the facade imports the wrappers
        "import importlib\nimportlib.import_module('gymcurric.integrations.ray')",
        "ENTRY = 'gymcurric.wrappers.cost:AnnotateCost'",
        "if TYPE_CHECKING:\n    pass\nelse:\n    import gymcurric.wrappers\n",
    ],
)
def test_the_check_flags_an_import_from_below(source):
    # self-check: each of these, written in a core module, must be reported
    assert violations("gymcurric.tasks.fake", source, _KNOWN)


@pytest.mark.parametrize(
    "source",
    [
        "from gymcurric.errors import ConfigError",
        "from gymcurric.tasks import Curriculum\nfrom . import fake",
        "if TYPE_CHECKING:\n    from gymcurric.wrappers import X\n",
        "import typing\nif typing.TYPE_CHECKING:\n    import gymcurric.integrations.sb3\n",
        "MSG = 'needed by gymcurric.integrations.sb3'",  # prose, not a module name
    ],
)
def test_the_check_accepts_imports_from_above_and_annotations(source):
    assert violations("gymcurric.tasks.fake", source, _KNOWN) == []


def test_an_entry_point_may_import_every_layer():
    source = "\n".join(f"import {m}" for m in sorted(_KNOWN))
    assert violations("gymcurric.train.fake", source, _KNOWN) == []


def _guide_map() -> list[tuple[str, tuple[str, ...]]]:
    text = GUIDE.read_text()
    block = text.split("<!-- layer-map:start -->")[1].split("<!-- layer-map:end -->")[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[1].startswith("`"):
            continue  # header or separator row
        names = re.findall(r"`([^`]+)`", cells[1])
        rows.append((cells[0], tuple(n if n == FACADE else f"gymcurric.{n}" for n in names)))
    return rows


def test_the_developer_guide_shows_this_map():
    assert _guide_map() == [(name, units) for name, units in LAYERS]


def test_the_developer_guide_points_at_real_files_and_tests():
    text = GUIDE.read_text()
    paths = set(re.findall(r"`((?:gymcurric|tests|docs)/[\w/]+\.(?:py|md))`", text))
    assert paths, "the guide names no files"
    missing = sorted(p for p in paths if not (ROOT / p).is_file())
    assert not missing, f"docs/developer_guide.md names files that do not exist: {missing}"
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    named = set(re.findall(r"`(test_\w+)`", text))
    gone = sorted(n for n in named if f"def {n}(" not in tests)
    assert not gone, f"docs/developer_guide.md names tests that do not exist: {gone}"
