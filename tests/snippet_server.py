"""Run scripts as ``python script.py`` does, each in a process forked from a warm interpreter.

Importing torch and Stable-Baselines3 took a large part of each docs snippet's run (a new
interpreter per snippet, about 40 of them). The server imports them once (``PRELOAD``: modules
that register nothing anywhere) and forks a child per script. The child runs the script as
``__main__`` with fresh globals, ``sys.argv[0]`` and ``sys.path[0]`` set to the script and its
folder, that folder as the working directory, its own stdout/stderr files, a freshly seeded
global numpy generator, and the exit code Python gives (0, ``sys.exit``'s code, 1 on an uncaught
exception). It ends as the interpreter's shutdown does, in the same order: non-daemon threads
joined, atexit handlers (multiprocessing's clean-up, ``weakref.finalize``) run, then the
script's objects collected (their ``__del__``); only the teardown of the preloaded modules, which
took a new interpreter about 0.7 s of CPU with torch loaded, is skipped (``os._exit``). A script
that forgets ``import gymcurric`` still fails: the server checks that gymcurric, Safety-Gymnasium
and their environments are not loaded before it forks. On Linux the server ends with the test
process that started it, and a script's process with the server (``PR_SET_PDEATHSIG``), so a
killed or interrupted test run leaves neither behind, even while a script hangs.

Known differences from a new interpreter: a submodule the preload imported is reachable as an
attribute without its import (``torch.utils.tensorboard``: SB3's logger imports it), and the
preloaded libraries' warning filters are in place. A snippet imports what it uses by name.

Protocol (one JSON line each way): ``[script, stdout_file, stderr_file]`` in; the child's pid,
then its exit code, out. ``SnippetServer`` is the client.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("numpy", "torch", "stable_baselines3")
# what a script must import itself: nothing of these may be loaded in the server
NOT_PRELOADED = ("gymcurric", "safety_gymnasium", "mujoco", "ray")
_kept: list[dict[str, Any]] = []  # the scripts' globals live until shutdown, as __main__'s do


def _exit_code(exc: SystemExit) -> int:
    """The exit status Python gives for an uncaught ``SystemExit``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when ``parent`` (the process that started it) ends.

    Strictly, when the *thread* that started it ends: start a ``SnippetServer`` from a thread
    that outlives its use (pytest's main thread, where fixtures run; pytest-timeout's
    ``thread`` method ends the whole process, which is what should end the server then).

    Without it a server waiting on a hanging script outlives a killed test run, and the script
    with it.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the call above
        os._exit(1)


def _run_child(script: str, out_file: str, err_file: str) -> int:
    """In the forked child: run ``script`` as ``__main__``; its exit code."""
    sys.stdout.flush()
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, out_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, err_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    import numpy as np

    # the legacy global generator, seeded from the OS as in a new interpreter
    np.random.seed()  # noqa: NPY002
    folder = os.path.dirname(os.path.abspath(script))
    os.chdir(folder)
    sys.argv = [script]
    sys.path[0] = folder
    try:
        _kept.append(runpy.run_path(script, run_name="__main__"))
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except BaseException:
        traceback.print_exc()
        return 1


def _shut_down(code: int) -> None:
    """End the child as the interpreter's shutdown would, less the modules' teardown."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # Python's first shutdown step
        atexit._run_exitfuncs()
        _kept.clear()
        gc.collect()
    except BaseException:
        traceback.print_exc()
        code = code or 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(parent: int) -> None:
    """The server's loop: preload, then fork one child per request until stdin closes."""
    _die_with_parent(parent)
    server = os.getpid()
    for name in PRELOAD:
        importlib.import_module(name)
    loaded = [m for m in sys.modules if m.split(".")[0] in NOT_PRELOADED]
    assert not loaded, f"the preload imported modules a script must import itself: {loaded}"
    import gymnasium as gym

    registered = [env_id for env_id in gym.registry if env_id.startswith(("gymcurric", "Safety"))]
    assert not registered, f"the preload registered environments: {registered}"
    for line in sys.stdin:
        script, out_file, err_file = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _die_with_parent(server)
            _shut_down(_run_child(script, out_file, err_file))
        print(json.dumps(pid), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)


class SnippetServer:
    """Client: ``run(script, timeout)`` gives ``(exit code, stdout, stderr)`` of the script."""

    def __init__(self, log: Path, env: dict[str, str]) -> None:
        self._log = log
        start = f"from tests.snippet_server import serve; serve({os.getpid()})"
        with log.open("w") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", start],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                bufsize=0,  # unbuffered: readline reads no further than the line
                cwd=ROOT,
                env={**env, "PYTHONPATH": str(ROOT)},
            )

    def _read(self, timeout: float) -> Any:
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self._proc.stdout.readline()
        assert line, f"the snippet server ended:\n{self._log.read_text()}"
        return json.loads(line)

    def run(self, script: Path, timeout: float) -> tuple[int, str, str]:
        out, err = script.with_suffix(".stdout"), script.with_suffix(".stderr")
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps([str(script), str(out), str(err)]) + "\n").encode())
        pid = self._read(60)
        assert pid is not None, f"the snippet server did not fork:\n{self._log.read_text()}"
        code = self._read(timeout)
        if code is None:
            os.kill(pid, signal.SIGKILL)
            self._read(60)
            raise AssertionError(f"{script.name} ran past {timeout} s")
        return code, out.read_text(), err.read_text()

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
