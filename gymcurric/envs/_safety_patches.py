"""Load-time patches that let safety-gymnasium 1.0.0 run on Python 3.11+, Gymnasium 1.x, NumPy 2.

safety-gymnasium 1.0.0 (the only release) was written for Python 3.10, Gymnasium 0.28, NumPy 1
and mujoco 2.3. Rather than aliasing removed Gymnasium modules (its own ``make`` then fails on
removed ``EnvSpec`` fields), gymcurric imports only the submodules that build envs and patches
the few places that break, each as narrowly as it can (name: scope):

- ``package-stub``: ``sys.modules["safety_gymnasium"]`` is a bare package; ``__init__`` never runs.
- ``dataclass-array-defaults``: ``dataclasses.dataclass`` during the import only, for
  ``safety_gymnasium`` classes only; restored (also in the importing modules) right after.
- ``offscreen-viewer-size``: the ``OffScreenViewer`` name inside ``bases.underlying``.
- ``mjmodel-jnt-array``: ``mujoco.MjModel.jnt`` while ``BaseAgent._init_jnt_sensors`` runs.
- ``base-agent-float``: a ``float`` global inside ``bases.base_agent``.
- ``empty-lidar``: ``BaseTask._obs_lidar_pseudo``, for an empty position list only.

:data:`PATCHES` lists them with the reason for each (docs/safety_gymnasium.md too). Every patch is
idempotent; :func:`load_safety_gymnasium` applies them all once per process. ``skip`` exists so
the tests can show, in a subprocess, that each patch is needed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from gymcurric.errors import DependencyNotInstalled

__all__ = ["PATCHES", "Patch", "applied_patches", "install_hint", "load_safety_gymnasium"]

PACKAGE = "safety_gymnasium"
PINNED_RELEASE = "safety-gymnasium==1.0.0"


class Patch(NamedTuple):
    """One load-time patch: a stable name and the one-line reason it exists."""

    name: str
    reason: str


PATCHES: tuple[Patch, ...] = (
    Patch(
        "package-stub",
        "safety_gymnasium/__init__.py imports Gymnasium modules removed in 1.x "
        "(wrappers.compatibility, autoreset, vector, ...) and the multi-agent tasks; a bare "
        "package module lets the env submodules import without running it.",
    ),
    Patch(
        "dataclass-array-defaults",
        "Python 3.11 rejects unhashable dataclass defaults; safety-gymnasium's geom/agent config "
        "classes use numpy arrays as defaults ('mutable default ... is not allowed').",
    ),
    Patch(
        "offscreen-viewer-size",
        "Gymnasium 1.x OffScreenViewer(model, data, width, height) requires the size; "
        "safety-gymnasium calls OffScreenViewer(model, data) when it first renders.",
    ),
    Patch(
        "mjmodel-jnt-array",
        "current mujoco returns sensor objid as a 1-element array, which MjModel.jnt() rejects "
        "(robots with joint sensors: Car, Doggo, Ant).",
    ),
    Patch(
        "base-agent-float",
        "NumPy 2 refuses float() of a 1-element 1-D array; base_agent reads hinge sensors "
        "that way (Doggo, Ant).",
    ),
    Patch(
        "empty-lidar",
        "the pseudo-lidar fails on an empty object list ('Bad pos []'); gymcurric task "
        "parameters may set an object count to 0 (e.g. {'hazards.num': 0}).",
    ),
)
_NAMES = frozenset(p.name for p in PATCHES)

_lock = threading.RLock()
_applied: set[str] = set()
_loaded: ModuleType | None = None


def install_hint() -> str:
    """The two install steps, for error messages."""
    return (
        'pip install "gymcurric[safety]" && '
        f"pip install --no-deps {PINNED_RELEASE} "
        "(safety-gymnasium's own pins - gymnasium 0.28, mujoco 2.3, pygame 2.1 - cannot be "
        "installed with a current stack, hence --no-deps)"
    )


def applied_patches() -> tuple[str, ...]:
    """Names of the patches applied in this process, in :data:`PATCHES` order."""
    return tuple(p.name for p in PATCHES if p.name in _applied)


def load_safety_gymnasium(*, skip: Collection[str] = ()) -> ModuleType:
    """Make safety-gymnasium's env modules importable and patched; return the package module.

    Args:
        skip: names of patches not to apply (for tests that show each patch is needed).

    Returns:
        The ``safety_gymnasium`` package module (a stub whose ``__init__`` never ran), with
        ``builder`` imported.

    Raises:
        DependencyNotInstalled: mujoco or safety-gymnasium is not installed.
    """
    global _loaded
    unknown = set(skip) - _NAMES
    if unknown:
        raise ValueError(f"unknown patch names in skip: {sorted(unknown)}; known: {sorted(_NAMES)}")
    with _lock:
        if _loaded is not None:
            return _loaded
        _import_dependencies()
        package = _stub_package() if "package-stub" not in skip else None
        if "dataclass-array-defaults" in skip:
            importlib.import_module(f"{PACKAGE}.builder")
        else:
            with _ndarray_defaults_allowed():
                importlib.import_module(f"{PACKAGE}.builder")
            _applied.add("dataclass-array-defaults")
        if package is None:
            package = sys.modules[PACKAGE]
        if "offscreen-viewer-size" not in skip:
            _patch_viewer()
        if "mjmodel-jnt-array" not in skip:
            _patch_jnt()
        if "base-agent-float" not in skip:
            _patch_float()
        if "empty-lidar" not in skip:
            _patch_empty_lidar()
        _loaded = package
        return package


def import_package_module(name: str) -> ModuleType:
    """Import ``safety_gymnasium.<name>`` (after :func:`load_safety_gymnasium`).

    The array-default dataclass patch is active during the import, for modules (such as
    ``tasks.safe_velocity.*``) that were not pulled in by ``builder``.
    """
    full = f"{PACKAGE}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    with _lock:
        if "dataclass-array-defaults" not in _applied:
            return importlib.import_module(full)
        with _ndarray_defaults_allowed():
            return importlib.import_module(full)


# --- dependencies and the package stub ---------------------------------------------------------


def _missing(what: str, exc: BaseException | None) -> DependencyNotInstalled:
    because = f" ({exc})" if exc else ""
    return DependencyNotInstalled(
        f"{what} is required for the gymcurric/Safety* envs but could not be imported{because}; "
        f"install the 'safety' extra and then safety-gymnasium without its pins: {install_hint()}"
    )


def _import_dependencies() -> None:
    # Imported before any patch is active, so the patches never see third-party classes.
    try:
        import mujoco  # noqa: F401
    except ImportError as exc:
        raise _missing("mujoco", exc) from exc
    for module in ("xmltodict", "yaml", "glfw", "gymnasium.envs.mujoco.mujoco_rendering"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise _missing(module, exc) from exc


def _stub_package() -> ModuleType:
    existing = sys.modules.get(PACKAGE)
    if existing is not None:
        return existing
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError) as exc:
        raise _missing("safety-gymnasium", exc) from exc
    if spec is None or not spec.submodule_search_locations:
        raise _missing("safety-gymnasium", None)
    # A module object with the installed package's __path__/__file__/__spec__; its __init__
    # is never executed (world.py only needs safety_gymnasium.__file__ to find its assets).
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    _applied.add("package-stub")
    return module


# --- dataclass-array-defaults ------------------------------------------------------------------


@contextlib.contextmanager
def _ndarray_defaults_allowed() -> Iterator[None]:
    original = dataclasses.dataclass
    if getattr(original, "_gymcurric_patch", False):  # re-entrant: already active
        yield
        return

    @functools.wraps(original)
    def dataclass(cls: Any = None, /, **kwargs: Any) -> Any:
        def wrap(klass: type) -> type:
            if klass.__module__.startswith(f"{PACKAGE}."):
                _ndarray_defaults_to_factories(klass)
            return original(klass, **kwargs)

        return wrap if cls is None else wrap(cls)

    dataclass._gymcurric_patch = True  # type: ignore[attr-defined]
    dataclasses.dataclass = dataclass
    try:
        yield
    finally:
        dataclasses.dataclass = original
        # Modules that did `from dataclasses import dataclass` meanwhile hold our function.
        for name, module in list(sys.modules.items()):
            if name.startswith(f"{PACKAGE}.") and getattr(module, "dataclass", None) is dataclass:
                vars(module)["dataclass"] = original


def _ndarray_defaults_to_factories(klass: type) -> None:
    for name in inspect.get_annotations(klass):
        value = klass.__dict__.get(name)
        if isinstance(value, np.ndarray):
            # Each instance gets its own copy (what the authors meant; Python <= 3.10 shared one).
            setattr(klass, name, dataclasses.field(default_factory=value.copy))


# --- offscreen-viewer-size ---------------------------------------------------------------------


def _patch_viewer() -> None:
    underlying: Any = importlib.import_module(f"{PACKAGE}.bases.underlying")
    base = underlying.OffScreenViewer
    if getattr(base, "_gymcurric_patch", False):
        return

    class OffScreenViewer(base):  # type: ignore[misc, valid-type]
        """Gymnasium's offscreen viewer, sized from the model when no size is given."""

        _gymcurric_patch = True

        def __init__(
            self,
            model: Any,
            data: Any,
            width: int | None = None,
            height: int | None = None,
            *args: Any,
            **kwargs: Any,
        ) -> None:
            # Underlying.render() sets offwidth/offheight to the requested size just before.
            width = int(model.vis.global_.offwidth) if width is None else width
            height = int(model.vis.global_.offheight) if height is None else height
            super().__init__(model, data, width, height, *args, **kwargs)

    underlying.OffScreenViewer = OffScreenViewer
    _applied.add("offscreen-viewer-size")


# --- mjmodel-jnt-array ---------------------------------------------------------------------------


def _as_index(key: Any) -> Any:
    if isinstance(key, np.ndarray) and key.size == 1 and key.dtype.kind in "iu":
        return int(key.item())
    return key


def _patch_jnt() -> None:
    import mujoco

    base_agent = importlib.import_module(f"{PACKAGE}.bases.base_agent")
    cls = base_agent.BaseAgent
    original_init = cls._init_jnt_sensors
    if getattr(original_init, "_gymcurric_patch", False):
        return
    depth = [0]

    @functools.wraps(original_init)
    def _init_jnt_sensors(self: Any) -> Any:
        # MjModel.jnt accepts a 1-element index array only while the agent reads its sensors.
        with _lock:
            if depth[0] == 0:
                jnt = mujoco.MjModel.jnt
                mujoco.MjModel.jnt = lambda model, key: jnt(model, _as_index(key))
                restore: Callable[[], None] = functools.partial(setattr, mujoco.MjModel, "jnt", jnt)
            depth[0] += 1
            try:
                return original_init(self)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    restore()

    _init_jnt_sensors._gymcurric_patch = True  # type: ignore[attr-defined]
    cls._init_jnt_sensors = _init_jnt_sensors
    _applied.add("mjmodel-jnt-array")


# --- base-agent-float --------------------------------------------------------------------------


def _float(value: Any = 0.0) -> float:
    if isinstance(value, np.ndarray) and value.size == 1:
        return float(value.item())
    return float(value)


def _patch_float() -> None:
    base_agent = importlib.import_module(f"{PACKAGE}.bases.base_agent")
    # A module global shadows the builtin for code in that module only.
    base_agent.float = _float  # type: ignore[attr-defined]
    _applied.add("base-agent-float")


# --- empty-lidar ---------------------------------------------------------------------------------


def _patch_empty_lidar() -> None:
    base_task = importlib.import_module(f"{PACKAGE}.bases.base_task")
    cls = base_task.BaseTask
    original = cls._obs_lidar_pseudo
    if getattr(original, "_gymcurric_patch", False):
        return

    @functools.wraps(original)
    def _obs_lidar_pseudo(self: Any, positions: Any) -> Any:
        if len(positions) == 0:  # no objects: every bin reads 0 ("nothing in that direction")
            return np.zeros(self.lidar_conf.num_bins)
        return original(self, positions)

    _obs_lidar_pseudo._gymcurric_patch = True  # type: ignore[attr-defined]
    cls._obs_lidar_pseudo = _obs_lidar_pseudo
    _applied.add("empty-lidar")
