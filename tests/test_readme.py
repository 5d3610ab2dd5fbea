"""The README's Python snippets run as written (keeps the README true)."""

import os
import re
import subprocess
import sys
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
def test_readme_snippet_runs(code, tmp_path):
    """Each snippet runs as a script in a new interpreter, as a user pastes it into a file."""
    script = tmp_path / "snippet.py"  # snippets may write files (checkpoints): in tmp_path
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, f"the README snippet failed as a script:\n{code}\n{out.stderr}"
