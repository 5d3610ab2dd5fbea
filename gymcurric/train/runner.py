"""Run a training job into a run directory, checkpoint it, and resume it exactly.

The run directory holds::

    config.json              the merged, validated config (what ``gymcurric resume`` rebuilds)
    progress.csv             SB3's logger: rollout/*, train/*, curriculum/*, semantics/*, risk/*
    events.out.tfevents.*    the same, for TensorBoard (when ``tensorboard`` is installed)
    monitor.csv              one row per episode: return, length, cost
                             (resumed-<steps>.monitor.csv for each resumed part)
    model.zip                the final model (SB3 ``save``; ``PPO.load`` opens it)
    curriculum.npz           the curriculum state (when a curriculum is used)
    curriculum_history.npz   the task distribution after every rollout (for the heatmap)
    datapacks/               the datapack sampler's JSONL logs (when datapacks are used)
    checkpoint/              everything ``resume`` needs to continue bit-for-bit
    summary.json             final figures
    plots/*.png              return/cost, lambda, curriculum heatmap, shaping

Training runs in chunks of ``run.checkpoint_every`` steps; after each chunk a checkpoint is
written without pickle (the model in SB3's ``model.zip``, the rest as JSON and ``.npz``) and
swapped in atomically (:mod:`gymcurric.train._checkpoint`). ``resume`` finds the newest complete
checkpoint, cuts the logs back to it and runs the remaining chunks, in a new process as well as
in the one that trained. With ``dummy`` vectorisation each env is rebuilt from the config and
replays its current episode (its seed, options and actions), so the result equals the
uninterrupted run exactly; ``subproc`` workers restart their episodes (model, optimiser,
VecNormalize statistics, curriculum and counters still continue).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gymcurric.errors import ConfigError, DataError, GymcurricWarning
from gymcurric.tasks.regret import uses_scores
from gymcurric.train._checkpoint import CKPT, commit, cut_logs, has_checkpoint, log_sizes, recover
from gymcurric.train._runstate import (
    capture_venv,
    decode,
    encode,
    encode_items,
    restore_venv,
    vec_layers,
)
from gymcurric.train.build import (
    Built,
    agent_class,
    build_run,
    make_agent,
    round_to_steps,
    setup_torch,
)
from gymcurric.train.config import TrainConfig

__all__ = ["RunResult", "default_run_name", "resume", "train"]


class RunResult(dict[str, Any]):
    """``summary.json`` as a dict, plus ``run_dir``."""


def default_run_name(cfg: TrainConfig) -> str:
    """``<env>-<algo>-s<seed>``, e.g. ``HazardNav-v0-ppolag-s0``."""
    env = cfg.env.id.split("/")[-1]
    return f"{env}-{cfg.agent.algo}-s{cfg.run.seed}"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_config(run_dir: Path, cfg: TrainConfig) -> None:
    """``config.json``: the merged config, which ``resume`` rebuilds the run from."""
    _atomic_write_text(run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")


def _callbacks(built: Built, cfg: TrainConfig) -> list[Any]:
    from gymcurric.integrations.sb3 import CurriculumCallback, EpisodeCostCallback
    from gymcurric.train._callbacks import CurriculumHistory

    cbs: list[Any] = [EpisodeCostCallback()]
    if built.curriculum is not None:
        cbs += [CurriculumCallback(built.curriculum), CurriculumHistory(built.curriculum)]
        if uses_scores(built.curriculum.config.scorer):  # PLR: scores from every rollout
            from gymcurric.integrations.sb3 import RegretScoreCallback

            # robust PLR leaves new tasks' steps out of training only where make_agent gave the
            # agent a buffer that can (plain PPO); the Lagrangian agents' buffers cannot
            robust_ok = cfg.agent.algo == "ppo"
            cbs.append(
                RegretScoreCallback(built.curriculum, train_on_unseen=None if robust_ok else True)
            )
    if cfg.risk.enabled:
        from gymcurric.integrations.sb3 import RiskCallback

        cbs.append(RiskCallback())  # risk/* and risk/modulation_scale
    cbs.extend(built.callbacks)
    return cbs


def _flush_logs(model: Any) -> None:
    for fmt in getattr(model.logger, "output_formats", []):
        writer = getattr(fmt, "writer", None)  # TensorBoard's SummaryWriter
        flush = getattr(writer, "flush", None) or getattr(fmt, "flush", None)
        if callable(flush):
            flush()
        file = getattr(fmt, "file", None)
        if file is not None and not file.closed:
            file.flush()


def _vec_normalize(venv: Any) -> Any:
    from stable_baselines3.common.vec_env import VecNormalize

    _, layers = vec_layers(venv)
    return next((layer for layer in layers if isinstance(layer, VecNormalize)), None)


def _save_checkpoint(
    model: Any, built: Built, cfg: TrainConfig, run_dir: Path, history: Any
) -> None:
    from gymcurric.wrappers import save_curriculum_state
    from gymcurric.wrappers._sub_envs import FLUSH_CURRICULUM, call_sub_envs

    if built.sampler is not None:  # logs so far go to disk first: the manifest knows them
        built.sampler.write_logs(run_dir / "datapacks")
    if built.curriculum is not None and cfg.env.vectorization != "dummy":
        # workers buffer their episodes (worker_update_batch): the checkpoint must see them
        # under the curriculum wrapper's own name; one that raises ends no worker
        call_sub_envs(built.venv, FLUSH_CURRICULUM)
    _flush_logs(model)

    def write(folder: Path) -> None:
        model.save(folder / "model.zip")
        norm = _vec_normalize(built.venv)
        if norm is not None:  # SB3's own format, for evaluating the model (not read here)
            norm.save(str(folder / VECNORMALIZE))
        arrays: dict[str, np.ndarray] = {}
        tree = _run_state(model, built, cfg, arrays)
        _write_state(folder, tree, arrays)
        if built.curriculum is not None:
            save_curriculum_state(folder / "curriculum.npz", built.curriculum)
        if history is not None:
            history.save(folder / "curriculum_history.npz")

    commit(run_dir, int(model.num_timesteps), write, log_sizes(run_dir))


VECNORMALIZE = "vecnormalize.pkl"
_STATE_FORMAT = "gymcurric-run-state/1"
_PENDING = ("name_to_value", "name_to_count", "name_to_excluded")


def _run_state(model: Any, built: Built, cfg: TrainConfig, arrays: dict[str, Any]) -> Any:
    import torch

    shared = frozenset(id(o) for o in (built.curriculum, built.sampler) if o is not None)
    tree: dict[str, Any] = {
        "format": _STATE_FORMAT,
        "num_timesteps": int(model.num_timesteps),
        "rng": {
            "numpy": encode(np.random.get_state(), arrays),  # noqa: NPY002 - SB3 draws from it
            "python": encode(random.getstate(), arrays),
            "torch": encode(torch.get_rng_state(), arrays),
        },
        # values recorded by the last train() that SB3 dumps with the next rollout's row
        "logger": {name: encode_items(getattr(model.logger, name), arrays) for name in _PENDING},
        "venv": capture_venv(built.venv, arrays, shared),
    }
    if built.sampler is not None:
        tree["datapacks"] = {
            "sampler": encode(built.sampler.state_dict(), arrays),
            "curriculum": encode(built.sampler.curriculum.state_dict(), arrays),
        }
    return tree


def _write_state(folder: Path, tree: Any, arrays: dict[str, np.ndarray]) -> None:
    with open(folder / "state.npz", "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    (folder / "state.json").write_text(json.dumps(tree, allow_nan=False) + "\n", encoding="utf-8")


def _read_state(folder: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    path = folder / "state.json"
    try:
        tree = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"{path}: not a gymcurric run state ({exc})") from exc
    if not isinstance(tree, dict) or tree.get("format") != _STATE_FORMAT:
        raise DataError(f"{path}: not a gymcurric run state (expected format {_STATE_FORMAT!r})")
    npz = folder / "state.npz"
    try:
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{npz}: not the arrays of a gymcurric run state ({exc})") from exc
    return tree, arrays


def _restore_run_state(
    built: Built, tree: dict[str, Any], arrays: dict[str, np.ndarray], where: Path, run_dir: Path
) -> bool:
    """Restore the envs, sampler and vec-env wrappers; True when the envs continue exactly."""
    try:
        if built.sampler is not None and "datapacks" in tree:
            from gymcurric.datapacks import LOG_FILENAME

            # the log (cut back to the checkpoint) recounts the totals of older states
            built.sampler.load_state_dict(
                decode(tree["datapacks"]["sampler"], arrays),
                sampling_log=run_dir / "datapacks" / LOG_FILENAME,
            )
            built.sampler.curriculum.load_state_dict(
                decode(tree["datapacks"]["curriculum"], arrays)
            )
        return restore_venv(built.venv, tree["venv"], arrays)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(
            f"{where}: the saved run state does not fit this run ({type(exc).__name__}: {exc})"
        ) from exc


def _chunks(cfg: TrainConfig, start: int) -> list[int]:
    every = cfg.run.checkpoint_every or cfg.run.total_steps
    out, done = [], start
    while done < cfg.run.total_steps:
        n = min(every - done % every, cfg.run.total_steps - done)
        out.append(n)
        done += n
    return out


def _learn(
    model: Any,
    cfg: TrainConfig,
    built: Built,
    run_dir: Path,
    callbacks: list[Any],
    progress: Callable[[int], None] | None,
) -> None:
    from gymcurric.train._callbacks import CurriculumHistory, ProgressCallback, StopAtEpisodes

    history = next((c for c in callbacks if isinstance(c, CurriculumHistory)), None)
    cbs = list(callbacks)
    if progress is not None:
        cbs.append(ProgressCallback(progress))
    stop = None
    if cfg.datapacks.episodes is not None and built.sampler is not None:
        # --episodes: the run ends within one vector step of that many datapack episodes
        stop = StopAtEpisodes(built.sampler.curriculum, cfg.datapacks.episodes)
        cbs.append(stop)
    try:
        for n in _chunks(cfg, int(model.num_timesteps)):
            if stop is not None and stop.reached:
                break
            model.learn(n, callback=cbs, reset_num_timesteps=False, progress_bar=False)
            _save_checkpoint(model, built, cfg, run_dir, history)
    except BaseException:  # a sub-env's error (SubEnvError), a dead worker, Ctrl-C, ...
        _close_logs(model, built, run_dir)  # on disk; the last checkpoint stays as it was
        raise


def _close_logs(model: Any, built: Built, run_dir: Path) -> None:
    """Write, flush and close the run's logs, keeping the error that ends it (best effort)."""
    try:
        if built.sampler is not None:  # which datapacks were played up to the error
            built.sampler.write_logs(run_dir / "datapacks")
        _flush_logs(model)
        model.logger.close()
    except Exception as exc:  # the run's own error is the one to raise
        warnings.warn(f"closing the run's logs failed: {exc!r}", GymcurricWarning, stacklevel=2)


def _configure_logger(model: Any, run_dir: Path, *, append: bool = False) -> None:
    from stable_baselines3.common.logger import Logger

    from gymcurric.train._callbacks import ProgressCSV

    formats: list[Any] = [ProgressCSV(run_dir / "progress.csv", append=append)]
    try:
        from stable_baselines3.common.logger import TensorBoardOutputFormat

        formats.append(TensorBoardOutputFormat(str(run_dir)))
    except ImportError:  # tensorboard is not installed: CSV only
        pass
    model.set_logger(Logger(str(run_dir), formats))


def _finish(
    model: Any, cfg: TrainConfig, built: Built, run_dir: Path, started: float, steps_before: int
) -> RunResult:
    from gymcurric.wrappers import save_curriculum_state

    model.save(run_dir / "model.zip")
    norm = _vec_normalize(built.venv)
    if norm is not None:  # evaluate with VecNormalize.load(path, venv) and training=False
        norm.save(str(run_dir / VECNORMALIZE))
    built.close_envs()  # worker processes flush their last curriculum updates
    if built.curriculum is not None:
        save_curriculum_state(run_dir / "curriculum.npz", built.curriculum)
    hist = run_dir / CKPT / "curriculum_history.npz"
    if hist.exists():
        shutil.copyfile(hist, run_dir / "curriculum_history.npz")
    if built.sampler is not None and hasattr(built.sampler, "write_logs"):
        built.sampler.write_logs(run_dir / "datapacks")
    elapsed = time.perf_counter() - started
    eps = list(model.ep_info_buffer or [])
    summary: dict[str, Any] = {
        "env": cfg.env.id,
        "algo": cfg.agent.algo,
        "seed": cfg.run.seed,
        "total_steps": int(model.num_timesteps),
        "steps_this_session": int(model.num_timesteps) - steps_before,
        "wall_seconds": round(elapsed, 2),
        "steps_per_second": round((model.num_timesteps - steps_before) / max(elapsed, 1e-9), 1),
        "episodes_in_window": len(eps),
        "ep_return_mean": float(np.mean([e["r"] for e in eps])) if eps else None,
        "ep_cost_mean": float(np.mean([e["c"] for e in eps if "c" in e])) if eps else None,
        "ep_length_mean": float(np.mean([e["l"] for e in eps])) if eps else None,
        "success_rate": (
            float(np.mean(model.ep_success_buffer))
            if getattr(model, "ep_success_buffer", None)
            else None
        ),
    }
    # agents without a multiplier (PPO, CPO, P3O, PPOSimmer) have no lagrange_multiplier
    # attribute: the key is left out rather than written as 0
    lam = getattr(model, "lagrange_multiplier", None)
    if lam is not None:  # a float, or one λ per constraint (a list) with several
        lam = np.asarray(lam() if callable(lam) else lam, dtype=np.float64)
        summary["lagrange_multiplier"] = float(lam) if lam.ndim == 0 else lam.tolist()
    kappa = getattr(model, "last_kappa", None)
    if kappa is not None:  # P3O's penalty weight κ, its counterpart of λ
        summary["kappa"] = float(kappa)
    if built.curriculum is not None:
        summary["curriculum"] = {k: float(v) for k, v in built.curriculum.stats().items()}
    short = None
    if built.sampler is not None and getattr(built.sampler, "curriculum", None) is not None:
        played = summary["datapack_episodes"] = int(built.sampler.curriculum.episode)
        target = cfg.datapacks.episodes
        if target is not None:  # --episodes: say whether run.total_steps came first
            summary["datapack_episodes_target"] = target
            summary["datapack_episodes_target_reached"] = played >= target
            if played < target:
                short = (
                    f"--episodes (datapacks.episodes) asked for {target} datapack episodes, "
                    f"but run.total_steps ({cfg.run.total_steps}) ended the run after {played}; "
                    "raise run.total_steps to reach them (summary.json: "
                    "datapack_episodes_target_reached false)"
                )
    _atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if cfg.run.plots:
        try:
            from gymcurric.train.plots import write_plots

            summary["plots"] = [str(p) for p in write_plots(run_dir, cfg)]
        except (ImportError, DataError) as exc:  # no matplotlib, a damaged history file:
            summary["plots_error"] = str(exc)  # the run itself is complete
        _atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if short is not None:
        warnings.warn(short, GymcurricWarning, stacklevel=2)
    out = RunResult(summary)
    out["run_dir"] = str(run_dir)
    return out


def run_path(cfg: TrainConfig, run_dir: str | Path | None = None) -> Path:
    """Where ``train`` writes: ``run_dir``, else ``run.out_dir / (run.name or the default)``."""
    if run_dir is not None:
        return Path(run_dir)
    return Path(cfg.run.out_dir) / (cfg.run.name or default_run_name(cfg))


def train(
    cfg: TrainConfig,
    *,
    run_dir: str | Path | None = None,
    source: str = "config",
    progress: Callable[[int], None] | None = None,
    overwrite: bool = False,
) -> RunResult:
    """Train ``cfg`` into a run directory; returns the summary (with ``run_dir``).

    ``run.total_steps`` and ``run.checkpoint_every`` are first rounded up to whole rollouts
    (:func:`~gymcurric.train.build.round_to_steps`): the steps SB3 really trains, recorded in
    ``config.json`` and the summary. A directory that holds no checkpoint (a start that
    failed or was killed before its first checkpoint) is started afresh; one with a
    checkpoint is refused unless ``overwrite``. A start that fails before its first checkpoint
    removes what it wrote.

    Args:
        cfg: the validated config.
        run_dir: where to write (default ``run.out_dir / (run.name or default_run_name)``).
        source: the config's origin, for error messages.
        progress: called with the number of new env steps after every step (progress bars).
        overwrite: replace an existing run directory; otherwise one with a checkpoint is an
            error (use ``resume`` to continue it).

    Raises:
        ConfigError: the run directory holds a run, or the config cannot be built.
    """
    from stable_baselines3.common.utils import set_random_seed

    cfg = round_to_steps(cfg, source)
    path = run_path(cfg, run_dir)
    if path.exists() and any(path.iterdir()):
        if not overwrite and has_checkpoint(path):
            raise ConfigError(
                "run.name",
                str(path),
                "the run directory holds a run: continue it with `gymcurric resume`, pass "
                "--overwrite, or choose another run.name",
                source=source,
            )
        if not overwrite and not (path / "config.json").is_file():
            raise ConfigError(
                "run.name",
                str(path),
                "the directory is not empty and holds no gymcurric run: pass --overwrite to "
                "replace it, or choose another run.name",
                source=source,
            )
        shutil.rmtree(path)  # overwrite, or a run that failed before its first checkpoint
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    setup_torch(cfg)
    set_random_seed(cfg.run.seed)
    started = time.perf_counter()
    try:
        built = build_run(cfg, path, source)
        try:
            model = make_agent(cfg, built.venv, source)
            _write_config(path, cfg)
            _configure_logger(model, path)
            _learn(model, cfg, built, path, _callbacks(built, cfg), progress)
            return _finish(model, cfg, built, path, started, 0)
        finally:
            built.close()
    except BaseException:
        if not has_checkpoint(path):  # nothing worth keeping: leave no half-made run behind
            if created:
                shutil.rmtree(path, ignore_errors=True)
            else:
                for child in path.iterdir():
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise


def load_run_config(
    path: Path,
    total_steps: int | None = None,
    step_timeout: float | Literal["keep"] | None = "keep",
    build_timeout: float | Literal["keep"] | None = "keep",
) -> TrainConfig:
    """The config a run directory was trained with (``total_steps`` replaced when given).

    ``step_timeout`` and ``build_timeout`` replace ``env.step_timeout`` and
    ``env.build_timeout`` (seconds, or None for no limit) unless they are ``"keep"``. One
    leading UTF-8 BOM in ``config.json`` is accepted, as ``gymcurric train --config`` does.

    Raises:
        DataError: no ``config.json``, or one that is damaged (naming the file).
        ConfigError: a ``config.json`` whose values are invalid (naming the file and key: a
            number too large for a float, ``1e400``, or a key given twice included); a
            ``step_timeout`` or ``build_timeout`` that is not seconds > 0 or None, or one for
            a run whose ``env.vectorization`` is not ``subproc`` (naming the parameter).
    """
    from gymcurric._checks import check_timeout
    from gymcurric._parsing import drop_bom, loads_json_unique

    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise DataError(f"{path}: not a gymcurric run directory (no config.json)")
    try:  # one leading BOM (an editor's) is dropped, as the config readers do
        text = drop_bom(cfg_file.read_text(encoding="utf-8"), source=str(cfg_file))
        data = loads_json_unique(text, source=str(cfg_file))  # ConfigError: 1e400, a key twice
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{cfg_file}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("run"), dict):
        raise DataError(f"{cfg_file}: not a gymcurric run config (no 'run' section)")
    if total_steps is not None:
        data["run"]["total_steps"] = int(total_steps)
    cfg = TrainConfig.from_dict(data, source=str(cfg_file))
    asked = {"step_timeout": step_timeout, "build_timeout": build_timeout}
    timeouts = {"step_timeout": cfg.env.step_timeout, "build_timeout": cfg.env.build_timeout}
    for name, seconds in asked.items():
        if isinstance(seconds, str) and seconds == "keep":
            continue
        check_timeout(seconds, name)
        if seconds is not None and cfg.env.vectorization != "subproc":
            raise ConfigError(
                name,
                seconds,
                "only subproc workers can be timed out; this run's env.vectorization is "
                f"{cfg.env.vectorization!r}",
                source=str(cfg_file),
            )
        timeouts[name] = check_timeout(seconds)
    env = dataclasses.replace(
        cfg.env, step_timeout=timeouts["step_timeout"], build_timeout=timeouts["build_timeout"]
    )
    return dataclasses.replace(cfg, env=env)


def resume(
    run_dir: str | Path,
    *,
    total_steps: int | None = None,
    step_timeout: float | Literal["keep"] | None = "keep",
    build_timeout: float | Literal["keep"] | None = "keep",
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Continue the run in ``run_dir`` from its newest complete checkpoint (to ``total_steps``).

    Works in a new process: everything is rebuilt from ``config.json`` and the checkpoint.
    The logs are first cut back to the checkpoint, so no row is written twice. A new
    ``total_steps``, ``step_timeout`` or ``build_timeout`` (``env.step_timeout``,
    ``env.build_timeout``: seconds, or None for no limit; ``"keep"`` keeps the run's) is
    written into ``config.json`` once the run is rebuilt, so a later resume keeps it.

    Raises:
        DataError: the directory has no config or no complete checkpoint, or a checkpoint file
            is damaged (the message names it).
        ConfigError: a bad ``step_timeout`` or ``build_timeout`` (see :func:`load_run_config`).
    """
    import torch

    path = Path(run_dir)
    asked = load_run_config(path, total_steps, step_timeout, build_timeout)
    cfg = round_to_steps(asked, str(path / "config.json"))
    ckpt, manifest = recover(path)
    tree, arrays = _read_state(ckpt)
    cut_logs(path, manifest["logs"])
    setup_torch(cfg)
    started = time.perf_counter()
    steps = int(manifest["num_timesteps"])
    built = build_run(
        cfg, path, str(path / "config.json"), monitor_name=f"resumed-{steps}.monitor.csv"
    )
    try:
        if built.curriculum is not None and (ckpt / "curriculum.npz").is_file():
            from gymcurric.wrappers import load_curriculum_state

            load_curriculum_state(ckpt / "curriculum.npz", built.curriculum)
        exact = _restore_run_state(built, tree, arrays, ckpt / "state.json", path)
        model = _load_model(cfg, built, ckpt / "model.zip", exact)
        try:
            np.random.set_state(decode(tree["rng"]["numpy"], arrays))  # noqa: NPY002 - SB3's RNG
            random.setstate(decode(tree["rng"]["python"], arrays))
            torch.set_rng_state(decode(tree["rng"]["torch"], arrays))
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise DataError(f"{ckpt / 'state.json'}: bad RNG state ({exc})") from exc
        _configure_logger(model, path, append=True)
        for name, values in tree.get("logger", {}).items():
            if name in _PENDING:
                getattr(model.logger, name).update(
                    {key: decode(value, arrays) for key, value in values.items()}
                )
        callbacks = _callbacks(built, cfg)
        from gymcurric.train._callbacks import CurriculumHistory

        for cb in callbacks:
            if isinstance(cb, CurriculumHistory) and (ckpt / "curriculum_history.npz").is_file():
                cb.load(ckpt / "curriculum_history.npz")
        steps_before = int(model.num_timesteps)
        # the new target first: a resume killed on the way continues to it when resumed again
        _write_config(path, cfg)
        _learn(model, cfg, built, path, callbacks, progress)
        return _finish(model, cfg, built, path, started, steps_before)
    finally:
        built.close()


def _load_model(cfg: TrainConfig, built: Built, path: Path, exact: bool) -> Any:
    # force_reset=False keeps the loaded model's last observations: they belong to the
    # restored envs, mid-episode (fresh subproc envs are reset instead)
    try:
        return agent_class(cfg).load(
            path, env=built.venv, device=cfg.agent.device, force_reset=not exact
        )
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError, RuntimeError) as exc:
        raise DataError(f"{path}: not a loadable SB3 model ({type(exc).__name__}: {exc})") from exc
