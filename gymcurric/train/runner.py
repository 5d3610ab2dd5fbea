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

Training runs in chunks of ``run.checkpoint_every`` steps; after each chunk the checkpoint is
rewritten atomically: the model, the vector env (pickled, for one-process ``dummy`` runs), the
global numpy / Python / torch RNG states and the curriculum state. ``resume`` loads it and runs
the remaining chunks: with ``dummy`` vectorisation the result equals the uninterrupted run
exactly; ``subproc`` workers cannot be pickled, so a resumed ``subproc`` run restarts its
episodes (model, optimiser, curriculum and counters still continue).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric.errors import ConfigError, DataError
from gymcurric.train.build import Built, agent_class, build_run, make_agent
from gymcurric.train.config import TrainConfig

__all__ = ["RunResult", "default_run_name", "resume", "train"]

_CKPT = "checkpoint"


class RunResult(dict[str, Any]):
    """``summary.json`` as a dict, plus ``run_dir``."""


def default_run_name(cfg: TrainConfig) -> str:
    """``<env>-<algo>-s<seed>``, e.g. ``HazardNav-v0-ppolag-s0``."""
    env = cfg.env.id.split("/")[-1]
    return f"{env}-{cfg.agent.algo}-s{cfg.run.seed}"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _callbacks(built: Built, cfg: TrainConfig) -> list[Any]:
    from gymcurric.integrations.sb3 import CurriculumCallback, EpisodeCostCallback
    from gymcurric.train._callbacks import CurriculumHistory

    cbs: list[Any] = [EpisodeCostCallback()]
    if built.curriculum is not None:
        cbs += [CurriculumCallback(built.curriculum), CurriculumHistory(built.curriculum)]
    if cfg.risk.enabled:
        from gymcurric.integrations.sb3 import RiskCallback

        cbs.append(RiskCallback())  # risk/* and risk/modulation_scale
    cbs.extend(built.callbacks)
    return cbs


def _save_checkpoint(
    model: Any, built: Built, cfg: TrainConfig, run_dir: Path, history: Any
) -> None:
    import torch

    from gymcurric.wrappers import save_curriculum_state

    if built.sampler is not None:  # logs so far go to disk first: the copy below knows it
        built.sampler.write_logs(run_dir / "datapacks")
    tmp = run_dir / f"{_CKPT}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save(tmp / "model.zip")
    rng = {
        "numpy": np.random.get_state(),  # noqa: NPY002 - SB3 draws minibatches from it
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "num_timesteps": int(model.num_timesteps),
        # values recorded by the last train() that SB3 dumps with the next rollout's row
        "logger": {name: dict(getattr(model.logger, name)) for name in _PENDING},
    }
    if built.sampler is not None:  # for runs whose envs are not pickled (subproc)
        rng["datapacks"] = {
            "sampler": built.sampler.state_dict(),
            "curriculum": built.sampler.curriculum.state_dict(),
        }
    with open(tmp / "rng.pkl", "wb") as f:
        pickle.dump(rng, f)
    if cfg.env.vectorization == "dummy":
        _dump_venv(built.venv, tmp / "venv.pkl")
    if built.curriculum is not None:
        save_curriculum_state(tmp / "curriculum.npz", built.curriculum)
    if history is not None:
        history.save(tmp / "curriculum_history.npz")
    old = run_dir / _CKPT
    if old.exists():
        shutil.rmtree(old)
    os.replace(tmp, old)


_PENDING = ("name_to_value", "name_to_count", "name_to_excluded")
_SKIP = frozenset({"venv", "class_attributes", "results_writer"})


def _layers(venv: Any) -> tuple[Any, list[Any]]:
    """``(base vec env, [wrappers, outermost first])``."""
    layers = []
    while hasattr(venv, "venv"):
        layers.append(venv)
        venv = venv.venv
    return venv, layers


def _dump_venv(venv: Any, path: Path) -> None:
    # The in-process envs (their states, wrappers, RNGs and a local curriculum) are pickled
    # whole; the SB3 wrappers above them hold open files and class tables, so only their
    # state (running episode sums, VecNormalize statistics) is kept, to restore onto fresh ones.
    import cloudpickle

    base, layers = _layers(venv)
    states = []
    for layer in layers:
        state = {}
        for k, v in vars(layer).items():
            if k in _SKIP:
                continue
            try:
                cloudpickle.dumps(v)
            except Exception:
                continue
            state[k] = v
        states.append((type(layer).__name__, state))
    with open(path, "wb") as f:
        cloudpickle.dump({"base": base, "layers": states}, f)


def _restore_venv(built: Built, path: Path) -> None:
    with open(path, "rb") as f:
        saved = pickle.load(f)  # our own checkpoint file
    fresh_base, layers = _layers(built.venv)
    names = [type(layer).__name__ for layer in layers]
    if names != [n for n, _ in saved["layers"]]:
        raise DataError(
            f"{path}: the checkpoint's vector env wrappers "
            f"{[n for n, _ in saved['layers']]} differ from the config's {names}"
        )
    for layer, (_, state) in zip(layers, saved["layers"], strict=True):
        vars(layer).update(state)
    fresh_base.close()
    if built.curriculum is not None:
        built.curriculum.close()
    if layers:
        layers[-1].venv = saved["base"]
    else:
        built.venv = saved["base"]
    built.curriculum = _find_curriculum(saved["base"])
    for layer in layers:  # the restored sampler is the one whose logs the run writes
        if hasattr(layer, "sampler") and built.sampler is not None:
            built.sampler = layer.sampler


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
    from gymcurric.train._callbacks import CurriculumHistory, ProgressCallback

    history = next((c for c in callbacks if isinstance(c, CurriculumHistory)), None)
    cbs = list(callbacks)
    if progress is not None:
        cbs.append(ProgressCallback(progress))
    for n in _chunks(cfg, int(model.num_timesteps)):
        model.learn(n, callback=cbs, reset_num_timesteps=False, progress_bar=False)
        _save_checkpoint(model, built, cfg, run_dir, history)


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
    built.close_envs()  # worker processes flush their last curriculum updates
    if built.curriculum is not None:
        save_curriculum_state(run_dir / "curriculum.npz", built.curriculum)
        if cfg.env.vectorization != "dummy":  # the checkpoint's copy predates that flush
            save_curriculum_state(run_dir / _CKPT / "curriculum.npz", built.curriculum)
    hist = run_dir / _CKPT / "curriculum_history.npz"
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
    lam = getattr(model, "lagrange_multiplier", None)
    if lam is not None:
        summary["lagrange_multiplier"] = float(lam() if callable(lam) else lam)
    if built.curriculum is not None:
        summary["curriculum"] = {k: float(v) for k, v in built.curriculum.stats().items()}
    _atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if cfg.run.plots:
        try:
            from gymcurric.train.plots import write_plots

            summary["plots"] = [str(p) for p in write_plots(run_dir, cfg)]
        except ImportError as exc:  # matplotlib missing: the run itself is complete
            summary["plots_error"] = str(exc)
        _atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    out = RunResult(summary)
    out["run_dir"] = str(run_dir)
    return out


def _torch_setup(cfg: TrainConfig) -> None:
    import torch

    torch.set_num_threads(cfg.run.torch_threads)


def train(
    cfg: TrainConfig,
    *,
    run_dir: str | Path | None = None,
    source: str = "config",
    progress: Callable[[int], None] | None = None,
    overwrite: bool = False,
) -> RunResult:
    """Train ``cfg`` into a run directory; returns the summary (with ``run_dir``).

    Args:
        cfg: the validated config.
        run_dir: where to write (default ``run.out_dir / (run.name or default_run_name)``).
        source: the config's origin, for error messages.
        progress: called with the number of new env steps after every step (progress bars).
        overwrite: replace an existing run directory; otherwise an existing one is an error
            (use ``resume`` to continue it).

    Raises:
        ConfigError: the run directory exists, or the config cannot be built.
    """
    from stable_baselines3.common.utils import set_random_seed

    path = (
        Path(run_dir)
        if run_dir is not None
        else (Path(cfg.run.out_dir) / (cfg.run.name or default_run_name(cfg)))
    )
    if path.exists() and any(path.iterdir()):
        if not overwrite:
            raise ConfigError(
                "run.name",
                str(path),
                "the run directory exists and is not "
                "empty: continue it with `gymcurric resume`, pass --overwrite, "
                "or choose another run.name",
                source=source,
            )
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    _atomic_write_text(path / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")
    _torch_setup(cfg)
    set_random_seed(cfg.run.seed)
    started = time.perf_counter()
    built = build_run(cfg, path, source)
    try:
        model = make_agent(cfg, built.venv, source)
        _configure_logger(model, path)
        _learn(model, cfg, built, path, _callbacks(built, cfg), progress)
        return _finish(model, cfg, built, path, started, 0)
    finally:
        built.close()


def resume(
    run_dir: str | Path,
    *,
    total_steps: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Continue the run in ``run_dir`` from its last checkpoint (to ``total_steps``).

    Raises:
        DataError: the directory has no config or no checkpoint.
    """
    import torch

    path = Path(run_dir)
    ckpt = path / _CKPT
    if not (path / "config.json").is_file():
        raise DataError(f"{path}: not a gymcurric run directory (no config.json)")
    if not (ckpt / "model.zip").is_file():
        raise DataError(f"{ckpt}: no checkpoint to resume from (model.zip missing)")
    data = json.loads((path / "config.json").read_text())
    if total_steps is not None:
        data["run"]["total_steps"] = int(total_steps)
    cfg = TrainConfig.from_dict(data, source=str(path / "config.json"))
    _torch_setup(cfg)
    with open(ckpt / "rng.pkl", "rb") as f:
        rng = pickle.load(f)  # our own file, written by _save_checkpoint
    started = time.perf_counter()
    steps = int(rng["num_timesteps"])
    built = build_run(
        cfg, path, str(path / "config.json"), monitor_name=f"resumed-{steps}.monitor.csv"
    )
    exact = (ckpt / "venv.pkl").is_file()
    if exact:
        _restore_venv(built, ckpt / "venv.pkl")
    else:
        if built.curriculum is not None and (ckpt / "curriculum.npz").is_file():
            from gymcurric.wrappers import load_curriculum_state

            load_curriculum_state(ckpt / "curriculum.npz", built.curriculum)
        if built.sampler is not None and "datapacks" in rng:
            built.sampler.load_state_dict(rng["datapacks"]["sampler"])
            built.sampler.curriculum.load_state_dict(rng["datapacks"]["curriculum"])
    try:
        # force_reset=False keeps the loaded model's last observations: they belong to the
        # restored envs, mid-episode (fresh subproc envs are reset instead)
        model = agent_class(cfg).load(
            ckpt / "model.zip", env=built.venv, device=cfg.agent.device, force_reset=not exact
        )
        np.random.set_state(rng["numpy"])  # noqa: NPY002 - the global RNG SB3 uses
        random.setstate(rng["python"])
        torch.set_rng_state(rng["torch"])
        _configure_logger(model, path, append=True)
        for name, values in rng.get("logger", {}).items():
            getattr(model.logger, name).update(values)
        callbacks = _callbacks(built, cfg)
        from gymcurric.train._callbacks import CurriculumHistory

        for cb in callbacks:
            if isinstance(cb, CurriculumHistory) and (ckpt / "curriculum_history.npz").is_file():
                cb.load(ckpt / "curriculum_history.npz")
        steps_before = int(model.num_timesteps)
        _learn(model, cfg, built, path, callbacks, progress)
        _atomic_write_text(path / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")
        return _finish(model, cfg, built, path, started, steps_before)
    finally:
        built.close()


def _find_curriculum(venv: Any) -> Any:
    from gymcurric.wrappers import CurriculumTask
    from gymcurric.wrappers.vector._common import find_wrapper

    base, _ = _layers(venv)
    for env in getattr(base, "envs", []):
        wrapper = find_wrapper(env, CurriculumTask)
        if wrapper is not None:
            return wrapper.curriculum
    return None
