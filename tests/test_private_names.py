"""No gymcurric module uses a private name of another module (issue 22).

A leading underscore (not a dunder) means "this module only". Every module under
``gymcurric/`` is parsed with ``ast`` (nothing is imported) and two things are reported:

1. an import of a private name: ``from gymcurric.x import _name`` (or from any other module).
   A private *module* may be imported (``from gymcurric.envs import _render``); what other
   modules take from it has public names.
2. an attribute access ``X._name`` where ``X`` is not ``self``, ``cls`` or ``super()`` and
   ``_name`` is not defined in the same module. A name counts as defined in a module when the
   module has ``def _name``, ``class _name``, an assignment to ``_name``, ``self._name`` or
   ``X._name``, or ``"_name"`` in a ``__slots__``.

Plain ``import a.b._c`` names a module, which may be private, so it is not checked; nor are
string lookups (``getattr(obj, "_name")``). Exceptions are listed below as (file, name) pairs;
an entry that no longer matches a use fails the test, so the lists only shrink.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gymcurric"

# The public API of namedtuples (``rows._replace`` in replay/sampling.py): the underscore only
# keeps it clear of the field names.
NAMEDTUPLE_API = frozenset({"_asdict", "_field_defaults", "_fields", "_make", "_replace"})

# Third-party internals gymcurric has to reach, as (file, name). Each needs a reason. Private
# attributes a module sets itself (the `_gymcurric_patch` marks of envs/_safety_patches.py, the
# handles of tasks/_shm.py) and `super()._method` calls into SB3 base classes pass by the rule.
ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        # safety_gymnasium's navigation tasks keep these only in private attributes
        ("gymcurric/envs/safety_gymnasium.py", "_viewers"),  # to close the GL contexts
        ("gymcurric/envs/safety_gymnasium.py", "_geoms"),  # the objects a task dict may set
        ("gymcurric/envs/safety_gymnasium.py", "_free_geoms"),  # the same
        ("gymcurric/envs/safety_gymnasium.py", "_mocaps"),  # the same
        ("gymcurric/envs/safety_gymnasium.py", "_obstacles"),  # to check placement density
        ("gymcurric/envs/safety_captions.py", "_obstacles"),  # every object a caption describes
        # multiprocessing's resource sharer has no API to drop what a failed pickling shared
        ("gymcurric/wrappers/_sub_envs.py", "_resource_sharer"),  # the process's sharer
        ("gymcurric/wrappers/_sub_envs.py", "_key"),  # the last key it handed out
        ("gymcurric/wrappers/_sub_envs.py", "_cache"),  # what it holds, by key
        ("gymcurric/wrappers/_sub_envs.py", "_lock"),  # held while it registers one
        # SB3's SubprocVecEnv worker converts gym / shimmy envs with it; the checked one does too
        ("gymcurric/integrations/sb3/_subproc_worker.py", "_patch_env"),
        # a worker's Popen holds two pipe fds until it is collected (or Process.close(), which
        # makes exitcode unreadable): CheckedSubprocVecEnv.close() closes them
        ("gymcurric/integrations/sb3/checked_vec_env.py", "_popen"),
    }
)

# Violations in modules being rewritten, as (file, name): none left (issue 22's transport
# refactor removed the last ones). Add an entry only for a rewrite in progress.
PENDING: frozenset[tuple[str, str]] = frozenset()


def is_private(name: str) -> bool:
    """``_name`` and ``__name`` are private; ``__name__`` is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> str:
    """``gymcurric/tasks/pools.py`` -> ``gymcurric.tasks.pools``; a package is its folder."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def defined_names(tree: ast.AST) -> set[str]:
    """The names a module defines (see the module docstring)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
                names.update(
                    n.value
                    for n in ast.walk(node.value)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                )
    return names


def _is_own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def violations(
    module: str, source: str, known: set[str], is_package: bool = False
) -> list[tuple[int, str, str]]:
    """``(line, private name, expression)`` for each use in ``source`` of another's private name.

    Args:
        module: the dotted name of the module ``source`` is the text of.
        source: the module's text.
        known: every gymcurric module name (an import of one of them is a module import).
        is_package: ``source`` is a package's ``__init__.py``.
    """
    tree = ast.parse(source)
    own = defined_names(tree)
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, or node.level - 1 packages above it
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            for alias in node.names:
                if is_private(alias.name) and f"{base}.{alias.name}" not in known:
                    expr = f"from {'.' * node.level}{node.module or ''} import {alias.name}"
                    found.append((node.lineno, alias.name, expr))
        elif (
            isinstance(node, ast.Attribute)
            and is_private(node.attr)
            and node.attr not in own
            and node.attr not in NAMEDTUPLE_API
            and not _is_own(node.value)
        ):
            found.append((node.lineno, node.attr, ast.unparse(node)))
    return sorted(found)


@functools.cache
def scan_package() -> dict[tuple[str, str], list[str]]:
    """``{(file, private name): ["file:line expression", ...]}`` over all of gymcurric/."""
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in paths}
    found: dict[tuple[str, str], list[str]] = {}
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text()
        for line, name, expr in violations(
            module_name(path), source, known, path.name == "__init__.py"
        ):
            found.setdefault((rel, name), []).append(f"{rel}:{line} {expr}")
    return found


def test_no_module_uses_another_modules_private_names():
    found = scan_package()
    new = [
        use for key, uses in sorted(found.items()) if key not in ALLOWED | PENDING for use in uses
    ]
    assert not new, (
        "private names used outside the module that defines them (give them public names, or "
        "add a third-party internal to ALLOWED with a reason):\n" + "\n".join(new)
    )


def test_allowlists_have_no_stale_entries():
    found = scan_package()
    stale = sorted((ALLOWED | PENDING) - found.keys())
    assert not stale, f"ALLOWED/PENDING entries that no longer match a use (remove them): {stale}"
    assert not ALLOWED & PENDING


_KNOWN = {"gymcurric", "gymcurric.tasks", "gymcurric.tasks.fake", "gymcurric.tasks._helpers"}


@pytest.mark.parametrize(
    "source",
    [
        "from gymcurric.tasks.pools import _pick",
        "from gymcurric.tasks._helpers import _frac",  # a private module exports public names
        "from .pools import _pick",
        "from . import _pick",  # a name in gymcurric/tasks/__init__.py, not a module
        "def f():\n    from gymcurric.tasks.pools import _pick\n",
        "if TYPE_CHECKING:\n    from gymcurric.tasks.pools import _Pool\n",
        "from typing import _GenericAlias",
        "ring._start_episodes(mask)",
        "self.curriculum._report_episodes()",
        "args._run(args)",
        "x = f()._cache",
    ],
)
def test_the_check_flags_a_private_name_of_another_module(source):
    # self-check: each of these, written in gymcurric/tasks/fake.py, must be reported
    assert violations("gymcurric.tasks.fake", source, _KNOWN)


@pytest.mark.parametrize(
    "source",
    [
        "from gymcurric.tasks import _helpers",  # a private module
        "from . import _helpers",
        "import gymcurric.tasks._helpers",
        "from gymcurric.tasks.pools import pick as _pick",
        "self._x = 1\ncls._y\nsuper()._z()",
        "def _f(): pass\nclass _C: pass\nobj._f, obj._C",
        "_N = 3\nother._N",
        "def f(o):\n    o._seen = True\n    return other._seen",
        "class A:\n    __slots__ = ('_buf',)\ndef f(a):\n    return a._buf",
        "t = t._replace(a=1)._asdict()",
        "obj.__class__.__name__",
    ],
)
def test_the_check_accepts_own_names_private_modules_and_dunders(source):
    assert violations("gymcurric.tasks.fake", source, _KNOWN) == []
