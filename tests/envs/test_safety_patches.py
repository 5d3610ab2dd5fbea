"""Each load-time patch is needed (its failure shows without it), scoped, and idempotent."""

from __future__ import annotations

import builtins
import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gymcurric.envs import _safety_patches as patches

pytestmark = pytest.mark.safety

if not all(importlib.util.find_spec(m) for m in ("mujoco", "safety_gymnasium")):
    # Not importorskip("safety_gymnasium"): its __init__ fails on Gymnasium 1.x by design.
    pytest.skip("needs mujoco and safety-gymnasium", allow_module_level=True)

# Each script loads with one patch skipped, then does the smallest thing that needs the patch.
# It prints the exception it got; the test compares it with the original failure.
_PRELUDE = """
import os, sys
os.environ.setdefault("MUJOCO_GL", "egl")
from gymcurric.envs import _safety_patches as p
from gymcurric.envs.safety_gymnasium import SafetyGymnasiumEnv
def attempt(skip, action):
    try:
        p.load_safety_gymnasium(skip=set(skip))
        action()
    except Exception as exc:
        print("FAILED", type(exc).__name__, str(exc)[:300].replace(chr(10), " "))
    else:
        print("PASSED")
"""


def _nav(env_id: str, **kwargs: Any) -> str:
    return f"lambda: SafetyGymnasiumEnv({env_id!r}, **{kwargs!r}).reset(seed=0)"


REPRODUCERS: dict[str, tuple[str, str, str]] = {
    # name: (action, exception type, message fragment of the original failure)
    "package-stub": ("lambda: None", "ModuleNotFoundError", "gymnasium.wrappers"),
    "dataclass-array-defaults": ("lambda: None", "ValueError", "mutable default"),
    "offscreen-viewer-size": ("_render", "TypeError", "height"),
    "mjmodel-jnt-array": (
        "lambda: SafetyGymnasiumEnv('SafetyCarGoal0-v0')",
        "TypeError",
        "incompatible function",
    ),
    "base-agent-float": (_nav("SafetyDoggoGoal0-v0"), "TypeError", "0-dimensional arrays"),
    "empty-lidar": (
        "lambda: SafetyGymnasiumEnv('SafetyPointGoal1-v0').reset(seed=0,"
        " options={'task': {'hazards.num': 0}})",
        "AssertionError",
        "Bad pos",
    ),
}
_RENDER = """
def _render():
    env = SafetyGymnasiumEnv('SafetyPointGoal0-v0', render_mode='rgb_array', width=16, height=16)
    env.reset(seed=0)
    return env.render()
"""


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, bool], str]:
    """Run each reproducer with its patch skipped, and all of them (control) with every patch."""
    scripts = {
        (name, True): f"attempt({[name]!r}, {action})"
        for name, (action, _, _) in REPRODUCERS.items()
    }
    scripts["all", False] = "\n".join(
        f"attempt([], {action})" for action, _, _ in REPRODUCERS.values()
    )
    procs = {
        key: subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + _RENDER + script],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for key, script in scripts.items()
    }
    results: dict[tuple[str, bool], str] = {}
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        lines = [line for line in out.splitlines() if line.startswith(("FAILED", "PASSED"))]
        if key[0] == "all":
            lines += ["NO RESULT"] * len(REPRODUCERS)
            results.update({(name, False): lines[i] for i, name in enumerate(REPRODUCERS)})
        else:
            results[key] = lines[-1] if lines else f"NO RESULT rc={proc.returncode}: {err[-1500:]}"
    return results


def test_every_patch_has_a_reproducer_a_reason_and_a_docs_entry() -> None:
    names = [p.name for p in patches.PATCHES]
    assert len(names) == len(set(names)) and set(names) == set(REPRODUCERS)
    assert all(p.reason and "\n" not in p.reason for p in patches.PATCHES)
    docs = Path(__file__).parents[2] / "docs" / "safety_gymnasium.md"
    text = docs.read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in text for name in names)


@pytest.mark.slow  # seven interpreters importing MuJoCo; the pinned safety-gymnasium changes rarely
@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_each_patch_is_needed(outcomes: dict[tuple[str, bool], str], name: str) -> None:
    _, exc_type, fragment = REPRODUCERS[name]
    without = outcomes[name, True]
    assert without.startswith(f"FAILED {exc_type}") and fragment in without, without
    assert outcomes[name, False] == "PASSED", outcomes[name, False]


def test_patches_are_applied_once_and_scoped() -> None:
    import mujoco
    from gymnasium.envs.mujoco import mujoco_rendering

    jnt_before = mujoco.MjModel.jnt
    package = patches.load_safety_gymnasium()
    assert patches.load_safety_gymnasium() is package  # idempotent
    assert set(patches.applied_patches()) == {p.name for p in patches.PATCHES}
    assert not hasattr(package, "make")  # the stub: safety_gymnasium/__init__ never ran

    # dataclass: restored, also in the modules that imported it, and never global.
    assert not getattr(dataclasses.dataclass, "_gymcurric_patch", False)
    for name, module in list(sys.modules.items()):
        if name.startswith("safety_gymnasium.") and hasattr(module, "dataclass"):
            assert module.dataclass is dataclasses.dataclass, name
    with pytest.raises(ValueError, match="mutable default"):
        dataclasses.make_dataclass("Outside", [("color", np.ndarray, np.zeros(3))])
    hazards = sys.modules["safety_gymnasium.assets.geoms.hazards"].Hazards
    assert hazards().color is not hazards().color  # per-instance copies

    # viewer: only the name inside underlying.py changes.
    underlying = sys.modules["safety_gymnasium.bases.underlying"]
    assert underlying.OffScreenViewer is not mujoco_rendering.OffScreenViewer
    assert issubclass(underlying.OffScreenViewer, mujoco_rendering.OffScreenViewer)

    # jnt: the mujoco class is untouched outside the agent's sensor set-up, even after a build.
    from gymcurric.envs.safety_gymnasium import SafetyGymnasiumEnv

    SafetyGymnasiumEnv("SafetyCarGoal0-v0")
    assert mujoco.MjModel.jnt is jnt_before

    # float: shadowed in base_agent only.
    base_agent = sys.modules["safety_gymnasium.bases.base_agent"]
    assert base_agent.float(np.array([2.0])) == 2.0 and builtins.float is float
    with pytest.raises(TypeError):
        float(np.array([2.0]))

    # Re-applying changes nothing.
    viewer, init = underlying.OffScreenViewer, base_agent.BaseAgent._init_jnt_sensors
    lidar = sys.modules["safety_gymnasium.bases.base_task"].BaseTask._obs_lidar_pseudo
    patches._patch_viewer()
    patches._patch_jnt()
    patches._patch_empty_lidar()
    assert underlying.OffScreenViewer is viewer
    assert base_agent.BaseAgent._init_jnt_sensors is init
    assert sys.modules["safety_gymnasium.bases.base_task"].BaseTask._obs_lidar_pseudo is lidar


def test_unknown_skip_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="no-such-patch"):
        patches.load_safety_gymnasium(skip={"no-such-patch"})


def test_missing_dependencies_name_the_extra_and_the_no_deps_step() -> None:
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == {blocked!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from gymcurric.errors import DependencyNotInstalled\n"
        "from gymcurric.envs.safety_gymnasium import make_safety_env\n"
        "try:\n"
        "    make_safety_env('SafetyPointGoal1-v0')\n"
        "except DependencyNotInstalled as exc:\n"
        "    print('MESSAGE', exc)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", blocker.format(blocked=blocked)],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for blocked in ("mujoco", "safety_gymnasium")
    ]
    for blocked, proc in zip(("mujoco", "safety_gymnasium"), procs, strict=True):
        out, err = proc.communicate(timeout=120)
        assert "MESSAGE" in out, err[-2000:]
        assert 'pip install "gymcurric[safety]"' in out
        assert "pip install --no-deps safety-gymnasium==1.0.0" in out
        assert blocked.replace("_", "-") in out or blocked in out
