"""The run configuration of ``gymcurric train``: typed sections, validated on load.

A YAML or JSON file maps 1:1 onto :class:`TrainConfig`; every key is checked before anything
starts, and an error names the file, the dotted key and the value received. ``key=value``
overrides from the command line are applied to the file's mapping first, so they are checked the
same way. The merged config (defaults filled in) is what the run directory's ``config.json``
holds, and ``TrainConfig.from_dict(cfg.to_dict()) == cfg``.

Example:
    >>> cfg = TrainConfig.from_dict({"env": {"id": "gymcurric/HazardGrid-v0"},
    ...                              "run": {"total_steps": 2048}})
    >>> cfg.agent.algo, cfg.env.num_envs
    ('ppo', 4)
    >>> apply_overrides(cfg.to_dict(), ["agent.algo=ppolag", "env.num_envs=2"])["env"]
    {'id': 'gymcurric/HazardGrid-v0', 'kwargs': {}, 'num_envs': 2, 'vectorization': 'dummy', 'start_method': None, 'step_timeout': None, 'build_timeout': None}
"""  # noqa: E501

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from gymcurric._checks import (
    check_int,
    check_text,
    check_timeout,
    finite_reason,
    is_finite_number,
    shown,
    too_large_int,
)
from gymcurric._parsing import (
    drop_bom,
    is_blank_config,
    is_yaml_file,
    load_yaml_unique,
    loads_json_unique,
    yaml_error_text,
)
from gymcurric.errors import ConfigError, DataError, DependencyNotInstalled
from gymcurric.train._overrides import RUN_DIR_TEXT, Setting, apply_overrides

__all__ = [
    "AgentSection",
    "CostSection",
    "CurriculumSection",
    "DatapacksSection",
    "EnvSection",
    "RunSection",
    "Setting",
    "TrainConfig",
    "WrapperSection",
    "apply_overrides",
    "load_config",
]

#: The largest ``run.seed``: SB3's ``set_random_seed`` passes it to ``np.random.seed``.
_MAX_SEED = 2**32 - 1

ALGOS = ("ppo", "ppolag", "pidlag", "trpolag", "cpo", "p3o", "pposimmer", "sac")


@dataclass(frozen=True)
class EnvSection:
    """Which env, how many copies, and how they are vectorised.

    Attributes:
        id: a registered id: built-in (``gymcurric/HazardNav-v0``), any Gymnasium id, or a
            Safety-Gymnasium one (``gymcurric/SafetyPointGoal1-v0``).
        kwargs: keyword arguments of ``gym.make``.
        num_envs: parallel copies (>= 1).
        vectorization: ``"dummy"`` (SB3 ``DummyVecEnv``, one process) or ``"subproc"`` (SB3
            ``SubprocVecEnv``, one process per env). Subproc rewards are float32, as dummy's
            (the same seeded run without a curriculum).
        start_method: ``fork``, ``forkserver`` or ``spawn`` for ``subproc`` (None: the
            platform default).
        step_timeout: for ``subproc``, the seconds a worker may take to answer a step (or a
            reset, or any other command) before the run ends with an error naming the hung
            sub-env (``CheckedSubprocVecEnv(timeout=...)``); None (the default) waits for ever.
            A worker's first answer, which waits for it to start and build its env, is limited
            by ``build_timeout`` instead.
        build_timeout: for ``subproc``, the seconds each worker may take to start and build its
            env (the env's constructor, imports included) before the run ends with an error
            naming the sub-env (``CheckedSubprocVecEnv(build_timeout=...)``); every sub-env is
            then built before training starts. None (the default) waits for ever. Separate from
            ``step_timeout``: building often takes far longer than a step.
    """

    id: str = "gymcurric/HazardNav-v0"
    kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 4
    vectorization: Literal["dummy", "subproc"] = "dummy"
    start_method: Literal["fork", "forkserver", "spawn"] | None = None
    step_timeout: float | None = None
    build_timeout: float | None = None

    def _check(self, key: str, source: str | None) -> None:
        check_int(f"{key}.num_envs", self.num_envs, source=source)
        if not self.id:
            raise ConfigError(f"{key}.id", self.id, "expected an env id", source=source)
        for name in ("step_timeout", "build_timeout"):
            value = getattr(self, name)
            check_timeout(value, f"{key}.{name}", source=source)
            if value is not None and self.vectorization != "subproc":
                raise ConfigError(
                    f"{key}.{name}",
                    value,
                    f"only subproc workers can be timed out; {key}.vectorization is "
                    f"{self.vectorization!r} (set it to 'subproc', or {name} to null)",
                    source=source,
                )


@dataclass(frozen=True)
class CostSection:
    """Cost annotation (``AnnotateCost`` on each env; ``VecCostMonitor`` on the vector env).

    Attributes:
        enabled: annotate (on by default: every agent and log expects ``info["cost"]``).
        nonfinite: what to do with a NaN/Inf cost: ``raise`` (default: a run never trains
            on a corrupt cost silently), ``warn`` or ``ignore`` (replace it by 0.0; see
            :class:`~gymcurric.wrappers.AnnotateCost`).
    """

    enabled: bool = True
    nonfinite: Literal["warn", "raise", "ignore"] = "raise"


@dataclass(frozen=True)
class CurriculumSection:
    """Learning-progress task selection (``SampleCurriculumTask`` on each env).

    Attributes:
        enabled: use a curriculum.
        space: the task space: ``{"type": "fixed", "tasks": [...]}``,
            ``{"type": "bucketed", "params": {name: [value | {"min": a, "max": b}, ...]},
            "base": {...}}`` or ``{"type": "box", "low": [...], "high": [...], "bins": 10,
            "names": [...], "integers": [...], "base": {...}}``.
        config: :class:`~gymcurric.tasks.CurriculumConfig` as a dict (scorer, pool, signal,
            recompute_every); its seed defaults to the run's seed.
        backend: ``local`` (one process; ``dummy`` vectorisation) or ``shared`` (shared memory,
            needed for ``subproc``).
    """

    enabled: bool = False
    space: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    backend: Literal["local", "shared"] = "local"

    def _check(self, key: str, source: str | None) -> None:
        if self.enabled and not self.space:
            raise ConfigError(
                f"{key}.space", self.space, "a curriculum needs a task space", source=source
            )


@dataclass(frozen=True)
class DatapacksSection:
    """Datapack sampling (``PresentDatapack`` on each env).

    Attributes:
        enabled: present datapacks.
        dir: the folder of JSON/JSONL datapacks (``--datapack-dir``).
        enrichment_dir: Stage 2.4 enrichments merged into them by ``pack_id``
            (``--enrichment-dir``), or None.
        curriculum_config: a YAML/JSON stage config in either format (``--curriculum-config``),
            or None for the shipped four-stage default.
        strategy: the sampling strategy (``--sampling-strategy``): forced on every stage
            with a curriculum config in gymcurric's format (or the default one); with one in
            the specification's format, the default for the stages that name none (a stage's
            own strategy wins).
        auto_advance: advance stages by their transition rules (``--curriculum-auto-advance``).
        episodes: end training once this many episodes have been played (``--episodes``);
            ``run.total_steps`` stays the upper bound. None: train for ``run.total_steps``.
    """

    enabled: bool = False
    dir: str | None = None
    enrichment_dir: str | None = None
    curriculum_config: str | None = None
    strategy: str | None = None
    auto_advance: bool = True
    episodes: int | None = None

    def _check(self, key: str, source: str | None) -> None:
        if self.enabled and not self.dir:
            raise ConfigError(f"{key}.dir", self.dir, "datapacks need a directory", source=source)
        if self.episodes is not None:
            check_int(f"{key}.episodes", self.episodes, source=source)
        for name in ("enrichment_dir", "episodes"):
            if not self.enabled and getattr(self, name) is not None:
                raise ConfigError(
                    f"{key}.{name}",
                    getattr(self, name),
                    "needs datapacks.enabled (--datapack-dir)",
                    source=source,
                )


@dataclass(frozen=True)
class WrapperSection:
    """An optional wrapper configured by its own keyword arguments (shaping, risk, Saute).

    Attributes:
        enabled: apply the wrapper.
        params: its constructor's keyword arguments; the wrapper validates them by name.
    """

    enabled: bool = False
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentSection:
    """The learner.

    Attributes:
        algo: ``ppo`` (SB3), ``ppolag``, ``pidlag``, ``trpolag`` (gymcurric's Lagrangian
            agents), ``cpo``, ``p3o``, ``pposimmer`` (gymcurric's CPO, P3O and PPO-Simmer)
            or ``sac`` (SB3, with the replay ring).
        policy: the SB3 policy name.
        kwargs: the algorithm's constructor keyword arguments (hyperparameters).
        normalize: wrap the vector env in ``VecNormalize`` (costs are never normalised).
        device: the torch device.
    """

    algo: Literal["ppo", "ppolag", "pidlag", "trpolag", "cpo", "p3o", "pposimmer", "sac"] = "ppo"
    policy: str = "MlpPolicy"
    kwargs: dict[str, Any] = field(default_factory=dict)
    normalize: bool = False
    device: str = "cpu"


@dataclass(frozen=True)
class RunSection:
    """Budget, seed and where the run directory goes.

    Attributes:
        total_steps: env steps to train for (>= 1).
        seed: seeds the agent, the envs (``seed + i``) and the curriculum; 0 to 2**32 - 1.
        out_dir: parent folder of run directories.
        name: the run directory's name (None: ``<env>-<algo>-s<seed>``).
        checkpoint_every: env steps between checkpoints (model, curriculum state, RNG
            states); None: only at the end. Training runs in chunks of this size.
        progress_bar: show a progress bar on stderr (where stderr cannot be written, it is
            switched off with one warning and the run goes on).
        plots: write PNG plots at the end (needs matplotlib).
        torch_threads: torch CPU threads (1 is fastest for small MLPs on few cores).
    """

    total_steps: int = 100_000
    seed: int = 0
    out_dir: str = "runs"
    name: str | None = None
    checkpoint_every: int | None = None
    progress_bar: bool = True
    plots: bool = True
    torch_threads: int = 1

    def _check(self, key: str, source: str | None) -> None:
        check_int(f"{key}.total_steps", self.total_steps, source=source)
        check_int(f"{key}.seed", self.seed, minimum=0, source=source)
        if self.seed > _MAX_SEED:  # SB3 seeds numpy's legacy generator, which takes 32 bits
            why = f"expected an int from 0 to 2**32 - 1 ({_MAX_SEED}), as the agent's seed"
            raise ConfigError(f"{key}.seed", shown(self.seed), why, source=source)
        check_int(f"{key}.torch_threads", self.torch_threads, source=source)
        if self.checkpoint_every is not None:
            check_int(f"{key}.checkpoint_every", self.checkpoint_every, source=source)


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``gymcurric train`` is configured with (see the section classes)."""

    env: EnvSection = field(default_factory=EnvSection)
    cost: CostSection = field(default_factory=CostSection)
    curriculum: CurriculumSection = field(default_factory=CurriculumSection)
    datapacks: DatapacksSection = field(default_factory=DatapacksSection)
    shaping: WrapperSection = field(default_factory=WrapperSection)
    risk: WrapperSection = field(default_factory=WrapperSection)
    saute: WrapperSection = field(default_factory=WrapperSection)
    agent: AgentSection = field(default_factory=AgentSection)
    run: RunSection = field(default_factory=RunSection)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict with every default filled in."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> TrainConfig:
        """Validate ``data`` and build the config; errors name the dotted key and ``source``."""
        cfg = _build(cls, data, "", source)
        plain = cfg.to_dict()
        _check_plain(plain, "", source)  # an override's date in env.kwargs, say
        _check_finite(plain, "", source)
        _check_agent_numbers(plain["agent"]["kwargs"], "agent.kwargs.", source)
        if cfg.curriculum.enabled and cfg.datapacks.enabled:
            raise ConfigError(
                "datapacks.enabled",
                True,
                "a run takes its tasks either from a curriculum or from datapacks, not both",
                source=source,
            )
        if (
            cfg.curriculum.enabled
            and cfg.env.vectorization == "subproc"
            and cfg.curriculum.backend == "local"
        ):
            raise ConfigError(
                "curriculum.backend",
                "local",
                "subproc envs run in other processes: use backend 'shared'",
                source=source,
            )
        return cfg


# ------------------------------------------------------------------------------- validation
_PLAIN = (str, int, float, bool, type(None))
_YAML_READS = {
    "date": "an unquoted date",
    "datetime": "an unquoted timestamp",
    "bytes": "!!binary",
    "set": "!!set",
}


def _check_plain(data: Any, prefix: str, source: str | None) -> None:
    r"""Every key and value one that JSON holds (``config.json`` is written with ``json``).

    YAML reads an unquoted ``2024-05-01`` as a date, ``!!binary`` as bytes and ``!!set`` as a
    set, which no setting is and ``json`` cannot write (a raw ``TypeError`` otherwise). A
    string is text: a lone surrogate (``"\ud800"``) is refused by :func:`check_text` (a raw
    ``UnicodeEncodeError`` once a path or a UTF-8 file was written with it); a byte that is not
    UTF-8 (``"\udce9"``, a Latin-1 file name) only where it would name the run directory.
    """
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str):
                check_text(f"{prefix}{key}", key, source=source)
            if not isinstance(key, _PLAIN):
                dotted = f"{prefix}{key}"
                if len(repr(key)) > 80:  # a !!binary key, as long as the file may be: cut
                    dotted = f"{prefix}{str(key)[:60]}..."
                raise ConfigError(dotted, shown(key), _not_plain(key, "key"), source=source)
            _check_plain(value, f"{prefix}{key}.", source)
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):  # a[1], as _parsing names a key twice or 1e400
            _check_plain(value, f"{prefix.removesuffix('.')}[{i}].", source)
    elif isinstance(data, str):
        name = prefix.rstrip(".")
        check_text(name, data, source=source, path=name in RUN_DIR_TEXT)
    elif not isinstance(data, _PLAIN):
        got = data if len(repr(data)) <= 80 else f"{repr(data)[:60]}... ({type(data).__name__})"
        raise ConfigError(prefix.rstrip("."), got, _not_plain(data, "value"), source=source)


def _not_plain(data: Any, what: str) -> str:
    name = type(data).__name__
    read = f" (YAML reads {_YAML_READS[name]} as one)" if name in _YAML_READS else ""
    plain = "a string" if what == "key" else "a string, number, boolean, null, list or mapping"
    return (
        f"a {what} of type {name}{read}; a config {what} is {plain}: quote it in YAML for a string"
    )


def _check_finite(data: Any, prefix: str, source: str | None) -> None:
    """NaN is never a setting; nor is an infinite or non-positive learning rate."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            _check_finite(value, f"{prefix}{key}.", source)
        return
    if isinstance(data, list):
        for i, value in enumerate(data):
            _check_finite(value, f"{prefix.removesuffix('.')}[{i}].", source)
        return
    key = prefix.rstrip(".")
    if isinstance(data, float) and math.isnan(data):
        raise ConfigError(key, data, "NaN is not a valid setting", source=source)
    leaf = key.rsplit(".", 1)[-1]
    if (
        isinstance(data, int | float)
        and not isinstance(data, bool)
        and (leaf.endswith("learning_rate") or leaf.endswith("_lr") or leaf == "lr")
        and not (is_finite_number(data) and data > 0)  # an int too large for a float is not
    ):
        reason = finite_reason(data, "a learning rate must be finite and > 0")
        raise ConfigError(key, shown(data), reason, source=source)


def _check_agent_numbers(data: Any, prefix: str, source: str | None) -> None:
    """Every integer in ``agent.kwargs`` (nested ones too) one a float holds.

    The algorithm takes them unchecked: an int too large for a float (``1`` and 400 zeros)
    failed at its first update with a raw ``OverflowError`` from SB3 or torch. ``.inf`` is a
    setting there, as in the rest of the config (``max_grad_norm: .inf`` never clips); NaN is
    refused by :func:`_check_finite`. A bool is not a number here (``normalize_advantage``).
    """
    if isinstance(data, Mapping):
        for key, value in data.items():
            _check_agent_numbers(value, f"{prefix}{key}.", source)
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            _check_agent_numbers(value, f"{prefix.removesuffix('.')}[{i}].", source)
    elif isinstance(data, int) and not isinstance(data, bool) and too_large_int(data):
        reason = finite_reason(data, "a number in agent.kwargs must fit a float")
        raise ConfigError(prefix.rstrip("."), shown(data), reason, source=source)


def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if get_origin(tp) in (types.UnionType, typing.Union):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _ok(value: Any, tp: Any) -> bool:
    origin = get_origin(tp)
    if origin is Literal:
        return value in get_args(tp) and not isinstance(value, bool)
    if origin in (types.UnionType, typing.Union):
        return any(_ok(value, a) for a in get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:  # an int too large for a float is not one
        return isinstance(value, float) or (isinstance(value, int) and is_finite_number(value))
    if tp is str:
        return isinstance(value, str)
    if origin is dict or tp is dict:
        return isinstance(value, Mapping)
    raise TypeError(f"unsupported config type {tp!r}")  # pragma: no cover


def _build(cls: Any, data: Any, prefix: str, source: str | None) -> Any:
    where = prefix.rstrip(".") or "config"
    if not isinstance(data, Mapping):
        raise ConfigError(where, data, "expected a mapping", source=source)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            reason = f"unknown key; expected one of {names}"
            raise ConfigError(dotted, shown(value, width=200), reason, source=source)
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, value, f"{dotted}.", source)
            continue
        if not _ok(value, tp):
            reason = f"expected {_type_name(tp)}"
            reason = finite_reason(value, reason) if "float" in reason else reason
            raise ConfigError(dotted, shown(value, width=200), reason, source=source)
        kwargs[key] = dict(value) if isinstance(value, Mapping) else value
    obj = cls(**kwargs)
    check = getattr(obj, "_check", None)
    if check is not None:
        check(where, source)
    return obj


# ------------------------------------------------------------------------------- files
def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # missing, a folder, not UTF-8 text
        raise ConfigError("--config", str(path), f"cannot read it: {exc}") from exc
    # one leading UTF-8 BOM (which Windows editors write) is dropped, for JSON as for YAML; a
    # DataError naming the file for a second one
    text = drop_bom(text, source=str(path))
    is_yaml = is_yaml_file(path)
    if is_blank_config(text, yaml=is_yaml):
        raise _empty_file(path)
    if is_yaml:
        try:
            import yaml
        except ImportError as exc:  # pyyaml ships with the train extra
            raise DependencyNotInstalled(
                f"{path}: YAML training configs need pyyaml, which is not installed; "
                'pip install "gymcurric[train]" (or write the config as JSON)'
            ) from exc
        try:
            # safe_load with 1e-3 a float; bounded; a key twice or 1e400 a ConfigError
            data = load_yaml_unique(text, source=str(path))
        except yaml.YAMLError as exc:
            raise DataError(f"{path}: not valid YAML: {yaml_error_text(exc)}") from exc
        if data is None:  # an empty YAML document ("---", "~", "null"): no settings either
            raise _empty_file(path)
        return data
    try:
        # DataError if nested too deeply; ConfigError for a key given twice (json would keep
        # the later silently); JSON's null is a value, not an empty file: not a mapping
        return loads_json_unique(text, source=str(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc


def _empty_file(path: Path) -> ConfigError:
    return ConfigError(
        "--config",
        str(path),
        "the file is empty: it holds no settings (only whitespace, YAML comments or an empty YAML "
        "document); write the training config in it, or give no --config for the defaults",
    )


def load_config(
    path: str | Path | None, overrides: Sequence[str] = (), settings: Sequence[Setting] = ()
) -> TrainConfig:
    """Read a YAML/JSON config (or start from defaults), apply overrides and settings, validate.

    ``overrides`` are ``key=value`` text, their values read as YAML; ``settings`` are the
    command's flags, their values already typed (:func:`apply_overrides`).

    ``path=None`` starts from the defaults; a file that holds no settings (only whitespace or
    YAML comments) is an error naming it, not the defaults. The file is UTF-8 text; one leading
    byte order mark (BOM) is accepted in either format (more than one is a ``DataError``).

    Raises:
        ConfigError: a bad key or value (a YAML date, ``!!binary`` or ``!!set`` included, or a
            number too large for a float, ``1e400``, which would read as inf); the message
            names the file and the dotted key. An empty file, naming it.
        DataError: the file is not valid YAML/JSON, or a value in it cannot be read (a YAML date
            out of range, an integer of more digits than Python reads, ``!!bool maybe``).
        DependencyNotInstalled: a YAML file without pyyaml (``pip install "gymcurric[train]"``).
    """
    source = str(path) if path is not None else "defaults"
    data: Any = {} if path is None else _read(Path(path))
    if not isinstance(data, Mapping):
        raise ConfigError("config", data, "the file must hold a mapping", source=source)
    _check_plain(data, "", source)  # before apply_overrides' json round trip
    if overrides or settings:
        source = f"{source} + overrides"
    return TrainConfig.from_dict(apply_overrides(data, overrides, settings), source=source)
