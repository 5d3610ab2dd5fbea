"""``omnisafe_side_by_side.py --setup``: OmniSafe 0.5.0 in its own venv, ``.omnisafe-venv/``.

The recipe is route B of ``shared/notes/safe-rl-algorithms.md`` §4.3 (Python 3.11):

1. ``python3.11 -m venv .omnisafe-venv``;
2. a CPU torch (``torch==2.13.0+cpu``, the wheel this machine keeps locally; if pip cannot
   find it there, from PyTorch's CPU index). A CUDA torch is refused: its nvidia-* wheels
   are gigabytes and this comparison runs on the CPU;
3. ``pip install --no-deps`` of omnisafe 0.5.0, safety-gymnasium 1.0.0, gymnasium-robotics
   1.2.2 and PettingZoo 1.24.3 (with their dependencies pip would try to build pygame 2.1.0
   from source, which has no Python 3.11 wheel, and fail);
4. their real dependencies, pinned as the note tested them (gymnasium 0.28.1, mujoco 2.3.3,
   numpy < 1.24 for pandas 2.0.3's binary, ...);
5. a ``sitecustomize.py`` in the venv's site-packages: on Python 3.11 ``@dataclass`` refuses
   the numpy-array field defaults that safety-gymnasium 1.0.0 uses; the shim turns each into a
   ``default_factory`` copy. It runs in that venv only.

Every step is skipped when what it installs is already there, so ``--setup`` may be run
again. Nothing here is a dependency of gymcurric: the venv is ignored by git and used only
through its own interpreter (``.omnisafe-venv/bin/python``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".omnisafe-venv"
VENV_PYTHON = VENV / "bin" / "python"

TORCH = "torch==2.13.0+cpu"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NO_DEPS = {
    "omnisafe": "0.5.0",
    "safety-gymnasium": "1.0.0",
    "gymnasium-robotics": "1.2.2",
    "pettingzoo": "1.24.3",
}
# pins as tested in the note (§4.3); the unpinned ones are what omnisafe imports at all
PINNED = {
    "gymnasium": "==0.28.1",
    "mujoco": "==2.3.3",
    "numpy": "<1.24",
    "pandas": "==2.0.3",
    "xmltodict": "",
    "pyyaml": "",
    "imageio": "",
    "tensorboard": "",
    "wandb": "",
    "moviepy": "<2",
    "typing-extensions": "",
    "typer[all]": "",
    "seaborn": "",
    "matplotlib": "",
    "gdown": "",
}

SHIM_MARK = "# gymcurric omnisafe-venv shim v1"
SHIM = f'''{SHIM_MARK}
"""numpy-array defaults in @dataclass classes become default_factory copies (Python >= 3.11).

safety-gymnasium 1.0.0 declares fields like ``color: np.ndarray = np.array(...)``, which
Python 3.11's dataclasses reject as mutable defaults. Installed by gymcurric's
benchmarks/omnisafe_side_by_side.py --setup into this venv only.
"""
import dataclasses as _dc

_original_dataclass = _dc.dataclass


def _array_defaults_to_factories(cls):
    for name in list(getattr(cls, "__annotations__", {{}})):
        value = cls.__dict__.get(name)
        if type(value).__name__ == "ndarray" and type(value).__module__ == "numpy":
            setattr(cls, name, _dc.field(default_factory=value.copy))
    return cls


def _dataclass(cls=None, /, **kwargs):
    def wrap(c):
        return _original_dataclass(_array_defaults_to_factories(c), **kwargs)

    return wrap if cls is None else wrap(cls)


_dc.dataclass = _dataclass
'''

_PROBE = """
import importlib.metadata as md, json, sys, sysconfig
names = sys.argv[1:]
out = {"purelib": sysconfig.get_paths()["purelib"], "versions": {}}
for n in names:
    try:
        out["versions"][n] = md.version(n)
    except md.PackageNotFoundError:
        out["versions"][n] = None
print(json.dumps(out))
"""


def _say(msg: str) -> None:
    print(f"[setup] {msg}", flush=True)


def _run(cmd: list[str]) -> None:
    _say("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def _probe(names: list[str]) -> dict:
    out = subprocess.run(
        [str(VENV_PYTHON), "-c", _PROBE, *names], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("+")[0].split(".")[:3] if part.isdigit())


def _satisfied(version: str | None, spec: str) -> bool:
    """``version`` meets ``spec`` ('' any, '==x', '<x'; the only forms used above)."""
    if version is None:
        return False
    if not spec:
        return True
    if spec.startswith("=="):
        return version == spec[2:]
    if spec.startswith("<"):
        return _release(version) < _release(spec[1:])
    raise ValueError(f"unsupported version spec {spec!r}")


def _find_python311() -> str:
    found = shutil.which("python3.11")
    if found is None:
        raise SystemExit(
            "--setup: python3.11 not found on PATH; the OmniSafe venv recipe (route B) needs "
            "Python 3.11 (Debian 12: apt-get install python3.11-venv)"
        )
    return found


def setup_venv() -> Path:
    """Create or complete ``.omnisafe-venv`` (idempotent); return its interpreter's path."""
    if VENV_PYTHON.exists():
        _say(f"venv: {VENV} exists, kept")
    else:
        _run([_find_python311(), "-m", "venv", str(VENV)])
    pip = [str(VENV_PYTHON), "-m", "pip", "install"]

    torch_version = _probe(["torch"])["versions"]["torch"]
    if torch_version is not None and torch_version.endswith("+cpu"):
        _say(f"torch: {torch_version} installed, kept")
    elif torch_version is not None:
        raise SystemExit(
            f"--setup: {VENV} holds torch {torch_version}, not a CPU build; remove the venv "
            f"(rm -r {VENV}) and run --setup again"
        )
    else:
        try:
            _run([*pip, TORCH])
        except subprocess.CalledProcessError:
            _say(f"{TORCH} not found locally; trying PyTorch's CPU index")
            _run([*pip, TORCH, "--index-url", TORCH_CPU_INDEX])

    versions = _probe(list(NO_DEPS))["versions"]
    missing = [f"{n}=={v}" for n, v in NO_DEPS.items() if versions[n] != v]
    if missing:
        _run([*pip, "--no-deps", *missing])
    else:
        _say("omnisafe, safety-gymnasium, gymnasium-robotics, pettingzoo: installed, kept")

    names = [n.split("[")[0] for n in PINNED]
    versions = _probe(names)["versions"]
    todo = [
        n + spec for n, spec in PINNED.items() if not _satisfied(versions[n.split("[")[0]], spec)
    ]
    if todo:
        # the torch already there satisfies omnisafe's torch>=1.10: pip keeps it
        _run([*pip, *todo])
    else:
        _say("pinned dependencies: installed, kept")
    torch_version = _probe(["torch"])["versions"]["torch"]
    if torch_version is None or not torch_version.endswith("+cpu"):
        raise SystemExit(f"--setup: torch in {VENV} is now {torch_version!r}, not a CPU build")

    shim = Path(_probe([])["purelib"]) / "sitecustomize.py"
    if shim.exists() and shim.read_text() == SHIM:
        _say(f"shim: {shim} up to date, kept")
    else:
        if shim.exists() and SHIM_MARK not in shim.read_text():
            raise SystemExit(f"--setup: {shim} exists and is not ours; not overwriting it")
        shim.write_text(SHIM)
        _say(f"shim: wrote {shim}")

    check = (
        "import omnisafe, safety_gymnasium, torch, numpy; "
        "print('omnisafe', omnisafe.__version__, '| torch', torch.__version__, "
        "'| numpy', numpy.__version__)"
    )
    out = subprocess.run([str(VENV_PYTHON), "-c", check], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"--setup: `import omnisafe` fails in {VENV}:\n{out.stderr[-3000:]}")
    _say("ok: " + out.stdout.strip().splitlines()[-1])
    return VENV_PYTHON


if __name__ == "__main__":  # pragma: no cover - use omnisafe_side_by_side.py --setup
    setup_venv()
    sys.exit(0)
