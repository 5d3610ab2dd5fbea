"""The README's and the docs' Python snippets run as written (keeps them true).

A ```python block is a runnable script; a fragment that is not (it uses names from around it)
is fenced ```py instead.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: Path = README) -> list[str]:
    text = path.read_text()
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [re.sub(rf"^{indent}", "", code, flags=re.M) for indent, code in blocks]


# slow: snippets whose path another default test runs (Ray: tests/integrations/test_ray_*)
SLOW_SNIPPETS = {"curriculum_resume_ray.md:0"}
SNIPPETS = [
    pytest.param(
        code,
        id=f"{page.name}:{i}:{code.strip().splitlines()[0][:30]}",
        marks=[pytest.mark.slow] if f"{page.name}:{i}" in SLOW_SNIPPETS else [],
    )
    for page in PAGES
    for i, code in enumerate(python_blocks(page))
]


def test_readme_has_snippets_and_stays_a_landing_page():
    assert len(python_blocks()) >= 3
    assert len(README.read_text().splitlines()) <= 300


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs_as_a_script(code, tmp_path):
    """Each snippet runs as a script in a new interpreter, as a user pastes it into a file."""
    script = tmp_path / "snippet.py"  # snippets may write files (checkpoints): in tmp_path
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, f"the snippet failed as a script:\n{code}\n{out.stderr}"
