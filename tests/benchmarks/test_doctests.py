"""The docstring examples of ``benchmarks/*.py``, which pytest's ``--doctest-modules`` skips.

``testpaths`` is ``tests`` and ``gymcurric``, so the benchmark scripts' doctests would never
run; this runs every module that has one (found by its ``>>>``, so a new one joins by itself).
"""

from __future__ import annotations

import doctest
import sys

import pytest

from tests.benchmarks import BENCHMARKS, load_script

WITH_EXAMPLES = sorted(p.stem for p in BENCHMARKS.glob("*.py") if ">>>" in p.read_text())


def run_examples(name: str) -> doctest.TestResults:
    """Run the examples of ``benchmarks/<name>.py`` in a fresh copy of it.

    The copy is ``sys.modules[name]`` while doctest looks: doctest keeps only the examples of the
    objects whose module (``inspect.getmodule``: ``sys.modules[obj.__module__]``) is the module
    tested. A copy imported by name earlier (a sibling's ``from _semantic_metrics import ...``,
    with ``benchmarks/`` on ``sys.path``) would be found instead, and every function's examples
    skipped: the result depended on the order of the tests. The earlier entry is put back.
    """
    module = load_script(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, name, module)
        return doctest.testmod(module, optionflags=doctest.ELLIPSIS)


def test_the_benchmarks_with_examples_are_found():
    assert "_semantic_metrics" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_doctests_of_the_benchmark_module_pass(name):
    result = run_examples(name)
    assert result.attempted > 0, f"benchmarks/{name}.py: no example was run"
    assert result.failed == 0, f"benchmarks/{name}.py: {result.failed} doctest(s) failed"


def test_a_copy_imported_by_name_earlier_hides_no_example(monkeypatch):
    # What an earlier test leaves: a sibling's `from _semantic_metrics import ...` (benchmarks/ on
    # sys.path, see load_script) put another copy of the module in sys.modules.
    name = "_semantic_metrics"
    earlier = load_script(name)
    monkeypatch.setitem(sys.modules, name, earlier)
    with_copy = run_examples(name)
    assert sys.modules[name] is earlier  # put back
    monkeypatch.delitem(sys.modules, name)
    assert with_copy.attempted > 0 and run_examples(name).attempted == with_copy.attempted
    assert name not in sys.modules
