"""The README's and the docs' Python snippets run as written (keeps them true).

A ```python block is a runnable script; a fragment that is not (it uses names from around it)
is fenced ```py instead.
"""

import ast
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.snippet_server import SnippetServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: Path = README) -> list[str]:
    text = path.read_text()
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.S | re.M)
    return [re.sub(rf"^{indent}", "", code, flags=re.M) for indent, code in blocks]


# slow: snippets whose path another default test runs (Ray: tests/integrations/test_ray_*;
# the semantic-safety study's SafetyPointGoal1 probe, a 5,000-step MuJoCo walk with captions,
# 25 s: tests/semantics/test_walk.py walks SafetyPointGoal1, semantics.md:2 runs the same
# walk-to-Shaper probe on HazardNav, and the numbers it prints are checked against the study's
# records by test_the_probe_snippets_print_the_study_records_numbers)
SLOW_SNIPPETS = {"curriculum_resume_ray.md:0", "safety_gymnasium.md:2"}
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


@pytest.fixture(scope="module")
def snippet_server(tmp_path_factory):
    """One warm interpreter (torch and SB3 imported) that forks a process per snippet."""
    server = SnippetServer(tmp_path_factory.mktemp("snippet-server") / "server.log", {**os.environ})
    yield server
    server.close()


def run_as_script(server: SnippetServer, code: str, folder: Path) -> tuple[int, str, str]:
    script = folder / "snippet.py"  # snippets may write files (checkpoints): in their folder
    script.write_text(code)
    return server.run(script, timeout=240)


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs_as_a_script(code, tmp_path, snippet_server):
    """Each snippet runs as a script in a process of its own, as a user pastes it into a file."""
    returncode, _, stderr = run_as_script(snippet_server, code, tmp_path)
    assert returncode == 0, f"the snippet failed as a script:\n{code}\n{stderr}"


# the runner itself: a snippet is __main__ in its own folder, and what makes a script fail
# (an exception, sys.exit, an environment used without `import gymcurric`) fails it there too
RUNNER_CASES = {
    "passes": ("import sys\nprint('out'); print('err', file=sys.stderr)\n", 0, "err"),
    "raises": ("raise ValueError('boom')\n", 1, "ValueError: boom"),
    "exits": ("import sys\nsys.exit(3)\n", 3, ""),
    "exits with a message": ("import sys\nsys.exit('bye')\n", 1, "bye"),
    "forgets import gymcurric": (
        "import gymnasium as gym\ngym.make('gymcurric/HazardNav-v0')\n",
        1,
        "gymcurric",
    ),
    "is main in its folder": (
        "import os, sys\nfrom pathlib import Path\n"
        "here = Path(__file__).resolve().parent\n"
        "assert __name__ == '__main__' and Path(sys.argv[0]).resolve() == here / 'snippet.py'\n"
        "assert Path.cwd().resolve() == here and Path(sys.path[0]).resolve() == here\n"
        "assert 'gymcurric' not in sys.modules\n",
        0,
        "",
    ),
    # a new interpreter's shutdown order: threads joined, atexit, then the objects collected
    "shuts down": (
        "import atexit, threading, time\n"
        "class Held:\n    def __del__(self):\n        print('del', flush=True)\n"
        "held = Held()\natexit.register(print, 'atexit')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n",
        0,
        "",
    ),
}


@pytest.mark.parametrize("case", RUNNER_CASES)
def test_the_snippet_runner_fails_what_a_script_run_fails(case, tmp_path, snippet_server):
    code, expected, in_stderr = RUNNER_CASES[case]
    returncode, stdout, stderr = run_as_script(snippet_server, code, tmp_path)
    assert returncode == expected, stderr
    assert in_stderr in stderr
    if case == "passes":
        assert stdout == "out\n"
    if case == "shuts down":
        assert stdout == "thread\natexit\ndel\n"


def test_each_snippet_process_draws_its_own_unseeded_numbers(tmp_path, snippet_server):
    code = "import numpy as np\nprint(np.random.random())\n"
    first = run_as_script(snippet_server, code, tmp_path)[1]
    assert first != run_as_script(snippet_server, code, tmp_path)[1]


# a test run killed while a snippet hangs: the client (pytest) gets SIGKILL, nothing cleans up
KILLED_CLIENT = """
import os, sys
from pathlib import Path
from tests.snippet_server import SnippetServer
folder = Path(sys.argv[1])
SnippetServer(folder / "server.log", dict(os.environ)).run(folder / "snippet.py", timeout=600)
"""
HANGING_SNIPPET = """
import os, time
with open("pids.part", "w") as f:
    f.write(f"{os.getppid()} {os.getpid()}")
os.replace("pids.part", "pids")
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether ``pid`` has not ended (a zombie waiting to be reaped has), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_a_killed_test_run_leaves_no_server_or_snippet_behind(tmp_path):
    (tmp_path / "snippet.py").write_text(HANGING_SNIPPET)
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]  # server, snippet
        client.kill()
        client.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(map(running, pids)) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in pids if running(pid)]
        assert not left, f"server and snippet {pids}: still running after the client died: {left}"
    finally:
        client.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


#: the docs pages whose probe_states_from_walk snippet is the semantic-safety study's start-up
#: probe, and the env of the study's records it prints the numbers of
PROBE_SNIPPETS = {"semantics.md": "HazardNav", "safety_gymnasium.md": "SafetyPointGoal1"}
RECORDS = ROOT / "benchmarks" / "reference" / "semantic_safety" / "records"


@pytest.mark.parametrize("page", PROBE_SNIPPETS)
def test_the_probe_snippets_print_the_study_records_numbers(page):
    """The walk's arguments, prompts and the numbers in the comments are the record's probe.

    Reads the snippet without running it (the SafetyPointGoal1 one is slow-marked), so the
    numbers it claims stay those of the committed records in the default suite.
    """
    (code,) = [c for c in python_blocks(ROOT / "docs" / page) if "probe_states_from_walk(" in c]
    record = json.loads(
        (RECORDS / f"{PROBE_SNIPPETS[page]}-additive-default-seed0.json").read_text()
    )
    probe = record["probe"]
    call = re.search(
        r"probe_states_from_walk\(env, steps=([\d_]+), horizon=(\d+), seed=(\d+)", code
    )
    assert call, code
    hold = re.search(r"seed=\d+, hold=(\d+)\)", code)
    walk = (int(call[1]), int(call[2]), int(call[3]), int(hold[1]) if hold else 10)
    assert walk == (
        probe["states"],
        probe["soon_horizon"],
        probe["walk"]["seed"],
        probe["walk"]["hold"],
    )
    counts = re.search(r"sum\(walk\.unsafe_soon\)\)  # ([\d ]+)\n", code)
    *distinct, now, soon = map(int, counts[1].split())
    assert (now, soon) == (probe["unsafe_now"], probe["unsafe_soon"])
    assert distinct in ([], [probe["distinct_captions"]])
    sets = ast.literal_eval(re.search(r"for safe, unsafe in (\[.*?\]):\n", code, re.S)[1])
    named = probe["sets"]["specific"], probe["sets"]["vague"]
    assert [(tuple(s["safe"]), tuple(s["unsafe"])) for s in named] == sets
    aucs = re.search(r"# ([\d.]+); ([\d.]+) warned\n", code)
    assert [float(aucs[1]), float(aucs[2])] == [round(s["auc_soon"], 3) for s in named]
    assert named[0]["warning"] is None and named[1]["warning"]
