"""The README's Python snippets run as written (keeps the README true)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    text = README.read_text()
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [re.sub(rf"^{indent}", "", code, flags=re.M) for indent, code in blocks]


def test_readme_has_snippets():
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("code", python_blocks(), ids=lambda c: c.strip().splitlines()[0][:40])
def test_readme_snippet_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # snippets may write files (checkpoints)
    namespace: dict = {}
    exec("import gymnasium as gym\nimport gymcurric\n", namespace)
    exec(compile(code, str(README), "exec"), namespace)
