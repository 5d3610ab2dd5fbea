"""The docstring examples of ``benchmarks/*.py``, which pytest's ``--doctest-modules`` skips.

``testpaths`` is ``tests`` and ``gymcurric``, so the benchmark scripts' doctests would never
run; this runs every module that has one (found by its ``>>>``, so a new one joins by itself).
"""

from __future__ import annotations

import doctest

import pytest

from tests.benchmarks import BENCHMARKS, load_script

WITH_EXAMPLES = sorted(p.stem for p in BENCHMARKS.glob("*.py") if ">>>" in p.read_text())


def test_the_benchmarks_with_examples_are_found():
    assert "_semantic_metrics" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_doctests_of_the_benchmark_module_pass(name):
    result = doctest.testmod(load_script(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"benchmarks/{name}.py: no example was run"
    assert result.failed == 0, f"benchmarks/{name}.py: {result.failed} doctest(s) failed"
