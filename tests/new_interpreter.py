"""Run a test module's function in a new Python interpreter, as a resumed user run would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def call_in_new_interpreter(module: str, function: str, *args: Any, timeout: float = 300) -> Any:
    """``module.function(*args)`` in a new interpreter; arguments and result travel as JSON.

    The child runs from the repository root with one OpenMP thread; a failure fails the
    calling test with the child's output.
    """
    code = (
        "import json, sys\n"
        f"from {module} import {function}\n"
        f"print(json.dumps({function}(*json.loads(sys.argv[1]))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
