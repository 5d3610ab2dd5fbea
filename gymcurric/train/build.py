"""Turn a :class:`~gymcurric.train.config.TrainConfig` into envs, wrappers and an agent.

Per env, inside out: ``gym.make(id, **kwargs)`` → ``AnnotateCost`` → ``SampleCurriculumTask`` or
``PresentDatapack`` (they set each episode's task at reset) → the optional per-env wrappers
(Saute, semantic shaping, risk). Then the SB3 vector env (``DummyVecEnv`` or ``SubprocVecEnv``,
gymcurric's ``Checked`` ones: a sub-env's error or a dead worker ends the run naming the sub-env)
→ ``VecCostMonitor`` (episode return, length and cost) → ``VecNormalize`` when asked →
``VecSimmer`` for ``agent.algo=pposimmer`` (with the agent's Sauté settings).
"""

from __future__ import annotations

import contextlib
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from gymcurric.errors import ConfigError
from gymcurric.train.config import TrainConfig

__all__ = [
    "Built",
    "agent_class",
    "build_curriculum",
    "build_env_fn",
    "build_run",
    "check_buildable",
    "check_no_bool_for_number",
    "kwarg_key",
    "make_agent",
    "round_to_steps",
    "setup_torch",
    "step_unit",
]

# algo -> (module, class); imported only when used
AGENTS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "sac": ("stable_baselines3", "SAC"),
    "ppolag": ("gymcurric.integrations.sb3.ppo_lag", "PPOLag"),
    "pidlag": ("gymcurric.integrations.sb3.ppo_lag", "PPOPIDLag"),
    "trpolag": ("gymcurric.integrations.sb3.trpo_lag", "TRPOLag"),
    "cpo": ("gymcurric.integrations.sb3.cpo", "CPO"),
    "p3o": ("gymcurric.integrations.sb3.p3o", "P3O"),
    "pposimmer": ("gymcurric.integrations.sb3.simmer", "PPOSimmer"),
}


@dataclass
class Built:
    """What :func:`build_run` made: close it with :meth:`close`."""

    venv: Any
    curriculum: Any = None
    sampler: Any = None
    callbacks: list[Any] = field(default_factory=list)

    closed_envs: bool = False
    close_began: bool = False  # a close interrupted part way is finished by the next one

    def close_envs(self) -> None:
        """Close the vector env (workers flush their buffered curriculum updates).

        Once closed, a second call does nothing. A close interrupted part way (a Ctrl-C while
        the workers finish) is finished by the next call, which closes the base vector env
        directly, not through its wrappers again: a
        :class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv` then ends the workers still
        running at once, instead of leaving them to a long-lived caller's process. A close
        that fails with an error (a sub-env's ``close()`` raising) is not tried again: its
        error is raised once, not again by the next call in its place; the workers of a
        subprocess vector env are still ended (a wrapper's close may raise before its own).
        """
        if self.closed_envs:
            return
        if self.close_began:
            from gymcurric.train._runstate import vec_layers

            base, _ = vec_layers(self.venv)
            base.close()  # interrupted again: the next call tries again
            self.closed_envs = True
            return
        self.close_began = True
        try:
            self.venv.close()
        except Exception:
            # a DummyVecEnv would close its sub-envs again, the failing one raising again
            # (the runner's final close() then replaced this error with its repeat); a
            # subprocess one (which has ``closed``) may not have been reached (VecMonitor's
            # file close raising first) or have stopped part way: its close() ends the
            # workers still running, and does nothing where it is done
            from gymcurric.train._runstate import vec_layers

            base, _ = vec_layers(self.venv)
            if hasattr(base, "closed"):
                with contextlib.suppress(Exception):  # the first error is the one raised
                    base.close()
            self.closed_envs = True
            raise
        self.closed_envs = True

    def close(self) -> None:
        """Close the vector env and the curriculum."""
        try:
            self.close_envs()
        finally:
            if self.curriculum is not None:
                self.curriculum.close()


def _space(spec: dict[str, Any], seed: int, source: str) -> Any:
    from gymcurric.tasks import BoxTaskSpace, BucketedTaskSpace, FixedTaskSpace, Span

    kind = spec.get("type")
    rest = {k: v for k, v in spec.items() if k != "type"}
    key = "curriculum.space"
    try:
        if kind == "fixed":
            return FixedTaskSpace(rest.pop("tasks", []), **rest)
        if kind == "bucketed":
            params = rest.pop("params", {})
            if not isinstance(params, dict):
                raise ConfigError(f"{key}.params", params, "expected a mapping", source=source)
            conv = {
                name: [Span(v["min"], v["max"]) if isinstance(v, dict) else v for v in values]
                for name, values in params.items()
            }
            return BucketedTaskSpace(conv, seed=rest.pop("seed", seed), **rest)
        if kind == "box":
            return BoxTaskSpace(seed=rest.pop("seed", seed), **rest)
    except TypeError as exc:  # an unknown keyword of the space's constructor
        raise ConfigError(key, spec, str(exc), source=source) from exc
    except ConfigError as exc:
        raise ConfigError(f"{key}.{exc.key}", exc.value, exc.reason, source=source) from exc
    raise ConfigError(f"{key}.type", kind, "expected 'fixed', 'bucketed' or 'box'", source=source)


def build_curriculum(cfg: TrainConfig, source: str = "config") -> Any:
    """The run's :class:`~gymcurric.tasks.Curriculum`, or None when disabled."""
    sec = cfg.curriculum
    if not sec.enabled:
        return None
    from gymcurric.tasks import Curriculum, CurriculumConfig

    space = _space(dict(sec.space), cfg.run.seed, source)
    data = dict(sec.config)
    data.setdefault("seed", cfg.run.seed)
    try:
        ccfg = CurriculumConfig.from_dict(data, source=source)
    except ConfigError as exc:
        raise ConfigError(
            f"curriculum.config.{exc.key}", exc.value, exc.reason, source=source
        ) from exc
    backend = "shared" if sec.backend == "shared" else "local"
    try:
        return Curriculum(space, config=ccfg, backend=backend)
    except ConfigError as exc:  # e.g. a pool larger than a finite space, or none for a box
        parts = {type(ccfg.pool).__name__: "pool", type(ccfg.scorer).__name__: "scorer"}
        part = parts.get(str(exc.source))
        key = f"curriculum.config.{part}.{exc.key}" if part else f"curriculum.{exc.key}"
        where = f" ({exc.source})" if exc.source else ""
        raise ConfigError(key, exc.value, exc.reason + where, source=source) from exc


def _wrap_optional(env: gym.Env, name: str, params: dict[str, Any], source: str) -> gym.Env:
    # the optional per-env wrappers, by config section
    targets = {
        "saute": ("gymcurric.wrappers.saute", "AugmentStateSaute"),
        "risk": ("gymcurric.wrappers.risk", "AnnotateRisk"),
    }
    module, cls_name = targets[name]
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"{name}.enabled",
            True,
            f"this install has no {module}.{cls_name} ({exc})",
            source=source,
        ) from exc
    try:
        return cls(env, **params)
    except TypeError as exc:
        key, value = kwarg_key(f"{name}.params", exc, params)
        raise ConfigError(key, value, str(exc), source=source) from exc


def build_env_fn(
    cfg: TrainConfig, curriculum: Any = None, sampler: Any = None, source: str = "config"
) -> Any:
    """A picklable factory ``f() -> gym.Env`` for one sub-env (SB3's ``make_vec_env`` seeds it)."""
    return _EnvFactory(cfg, curriculum, sampler, source)


class _EnvFactory:
    def __init__(self, cfg: TrainConfig, curriculum: Any, sampler: Any, source: str) -> None:
        self.cfg, self.curriculum, self.source = cfg, curriculum, source
        # whether there is one only: it draws in the main process (VecPresentDatapack), and a
        # subproc worker gets this factory pickled (the sampler, its table, in every worker)
        self.datapacks = sampler is not None

    def __call__(self) -> gym.Env:
        import gymcurric  # noqa: F401  (registers the ids in a fresh worker process)
        from gymcurric.wrappers import AnnotateCost, SampleCurriculumTask

        cfg = self.cfg
        from gymcurric.train._runstate import EpisodeLog

        try:
            env = gym.make(cfg.env.id, **cfg.env.kwargs)
        except gym.error.Error as exc:
            raise ConfigError("env.id", cfg.env.id, str(exc), source=self.source) from exc
        except TypeError as exc:  # a keyword the env's constructor does not take
            raise ConfigError("env.kwargs", cfg.env.kwargs, str(exc), source=self.source) from exc
        env = EpisodeLog(env)  # seeds every reset; a checkpoint replays the current episode
        if cfg.cost.enabled:
            env = AnnotateCost(env, nonfinite=cfg.cost.nonfinite)
        if self.curriculum is not None:
            env = SampleCurriculumTask(env, self.curriculum)
        if self.datapacks:
            from gymcurric.wrappers.datapack import PresentDatapack

            # shows the datapacks VecPresentDatapack draws in the main process
            env = PresentDatapack(env, None)
        for name in ("saute", "risk"):
            sec = getattr(cfg, name)
            if sec.enabled:
                env = _wrap_optional(env, name, dict(sec.params), self.source)
        return env


def _datapack_sampler(cfg: TrainConfig, source: str) -> Any:
    sec = cfg.datapacks
    if not sec.enabled:
        return None
    try:
        from gymcurric.datapacks.cli import build_sampler
    except ImportError as exc:
        raise ConfigError(
            "datapacks.enabled",
            True,
            f"datapack training options are not available in this install ({exc})",
            source=source,
        ) from exc
    assert sec.dir is not None  # checked by DatapacksSection
    return build_sampler(
        sec.dir,
        sec.curriculum_config,
        sec.strategy,
        sec.auto_advance,
        seed=cfg.run.seed,
        env_id=cfg.env.id,
        enrichment_dir=sec.enrichment_dir,
    )


def _check_datapack_tasks(factory: Any, sampler: Any) -> None:
    from gymcurric.wrappers.datapack import check_datapack_tasks

    env = factory()
    try:
        check_datapack_tasks(env, sampler.table.records)
    finally:
        env.close()


def build_run(
    cfg: TrainConfig,
    run_dir: Path | None = None,
    source: str = "config",
    monitor_name: str = "monitor.csv",
) -> Built:
    """Build the vector env (and curriculum / datapack sampler) for ``cfg``.

    With ``run_dir``, the episode monitor writes ``run_dir / monitor_name``.
    """
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from gymcurric.integrations.sb3 import (
        CheckedDummyVecEnv,
        CheckedSubprocVecEnv,
        VecCostMonitor,
    )

    curriculum = build_curriculum(cfg, source)
    try:
        sampler = _datapack_sampler(cfg, source)
        factory = build_env_fn(cfg, curriculum, sampler, source)
        if sampler is not None:  # a task the env refuses: named now, not in a worker mid-run
            _check_datapack_tasks(factory, sampler)
        kwargs: dict[str, Any] = {}
        # a sub-env that raises, or a worker that dies, is an error naming it, not a hang
        vec_cls: Any = CheckedDummyVecEnv
        if cfg.env.vectorization == "subproc":
            vec_cls = CheckedSubprocVecEnv
            # float32 rewards, as DummyVecEnv's (SB3's SubprocVecEnv gives float64): the same
            # seeded run under either (VecCostMonitor's returns, VecNormalize's statistics)
            vec_kwargs: dict[str, Any] = {"timeout": cfg.env.step_timeout}
            vec_kwargs["build_timeout"] = cfg.env.build_timeout
            vec_kwargs["reward_dtype"] = np.float32
            if cfg.env.start_method:
                vec_kwargs["start_method"] = cfg.env.start_method
            kwargs["vec_env_kwargs"] = vec_kwargs
        venv = make_vec_env(
            factory, n_envs=cfg.env.num_envs, seed=cfg.run.seed, vec_env_cls=vec_cls, **kwargs
        )
        callbacks: list[Any] = []
        if sampler is not None:
            # one sampler in this process for every sub-env (also under subproc)
            from gymcurric.integrations.sb3.datapack import DatapackCallback, VecPresentDatapack

            venv = VecPresentDatapack(venv, sampler)
            callbacks.append(DatapackCallback(venv))
        monitor_file = None if run_dir is None else str(run_dir / monitor_name)
        # records the unshaped returns
        venv = VecCostMonitor(venv, filename=monitor_file, env_id=cfg.env.id)
        if cfg.shaping.enabled:
            venv, cb = _shaping(cfg, venv, source)
            callbacks.append(cb)
        if cfg.agent.normalize:
            venv = VecNormalize(venv, gamma=float(cfg.agent.kwargs.get("gamma", 0.99)))
        if cfg.agent.algo == "pposimmer":
            venv = _simmer(cfg, venv, source)
    except BaseException:
        if curriculum is not None:
            curriculum.close()
        raise
    return Built(venv=venv, curriculum=curriculum, sampler=sampler, callbacks=callbacks)


def _simmer(cfg: TrainConfig, venv: Any, source: str) -> Any:
    # where PPOSimmer would put it (on top), but built here: the run's saved env state then
    # holds each sub-env's safety state and the budget of the episodes under way
    from gymcurric.integrations.sb3.simmer import VecSimmer, vec_simmer_kwargs

    try:
        return VecSimmer(venv, **vec_simmer_kwargs(cfg.agent.kwargs))
    except ConfigError as exc:
        raise ConfigError(f"agent.kwargs.{exc.key}", exc.value, exc.reason, source=source) from exc


def _shaping(cfg: TrainConfig, venv: Any, source: str) -> tuple[Any, Any]:
    # one batched embedding call per captured step for all envs (SB3 twin of the wrapper)
    from gymcurric.integrations.sb3.semantic import SemanticShapingCallback, VecShapeRewardSemantic

    params = dict(cfg.shaping.params)
    config = dict(params.pop("config", {}) or {})
    config.setdefault("total_steps", cfg.run.total_steps)  # beta anneals over this run
    try:
        shaped = VecShapeRewardSemantic(venv, config=config, **params)
    except TypeError as exc:
        key, value = kwarg_key("shaping.params", exc, dict(cfg.shaping.params))
        raise ConfigError(key, value, str(exc), source=source) from exc
    except ConfigError as exc:
        raise ConfigError(
            f"shaping.params.{exc.key}", exc.value, exc.reason, source=source
        ) from exc
    return shaped, SemanticShapingCallback(shaped)


def agent_class(cfg: TrainConfig, source: str = "config") -> Any:
    """The SB3 algorithm class of ``cfg.agent.algo`` (imported now)."""
    module, cls_name = AGENTS[cfg.agent.algo]
    try:
        return getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError) as exc:
        from gymcurric._optional import missing_extra

        # a missing extra is named (pip install "gymcurric[train]"), anything else is a config error
        purpose = f"by gymcurric train (agent.algo {cfg.agent.algo!r})"
        missing = missing_extra(exc, "train", purpose=purpose)
        if missing is not None:
            raise missing from exc
        raise ConfigError(
            "agent.algo",
            cfg.agent.algo,
            f"not available in this install ({module}.{cls_name}: {exc})",
            source=source,
        ) from exc


def make_agent(cfg: TrainConfig, venv: Any, source: str = "config") -> Any:
    """Construct the configured SB3 algorithm on ``venv``."""
    cls = agent_class(cfg, source)
    check_no_bool_for_number(cls, cfg.agent.kwargs, source)
    kwargs = dict(cfg.agent.kwargs)
    scorer = cfg.curriculum.config.get("scorer") if cfg.curriculum.enabled else None
    robust = isinstance(scorer, dict) and scorer.get("type") == "RobustPLRScorer"
    if robust and cfg.agent.algo == "ppo":  # trains only on replays: a buffer that can leave
        # the steps of new tasks out (RegretScoreCallback; see gymcurric.train.runner)
        from gymcurric.integrations.sb3.regret import RegretDictRolloutBuffer, RegretRolloutBuffer

        buffer = (
            RegretDictRolloutBuffer
            if isinstance(venv.observation_space, gym.spaces.Dict)
            else RegretRolloutBuffer
        )
        kwargs.setdefault("rollout_buffer_class", buffer)
    if cfg.agent.algo == "pposimmer":
        # the PI reference schedule spans the run, not each checkpoint chunk's learn() call
        kwargs.setdefault("reference_steps", cfg.run.total_steps)
    if cfg.agent.algo == "sac":
        try:
            from gymcurric.integrations.sb3.replay import RingReplayBuffer

            kwargs.setdefault("replay_buffer_class", RingReplayBuffer)
        except ImportError:  # the replay ring is not part of this install: SB3's buffer
            pass
    try:
        return cls(
            cfg.agent.policy, venv, seed=cfg.run.seed, device=cfg.agent.device, verbose=0, **kwargs
        )
    except TypeError as exc:
        key, value = kwarg_key("agent.kwargs", exc, kwargs)
        raise ConfigError(key, value, str(exc), source=source) from exc


def check_no_bool_for_number(cls: Any, kwargs: dict[str, Any], source: str = "config") -> None:
    """Refuse a bool given for a keyword of ``cls`` whose default is a number.

    Python takes ``True`` as 1: ``gamma: true`` trained with a discount of 1.0, ``n_steps:
    true`` with rollouts of one step, silently. A keyword whose default is None
    (``target_kl``) or that is not in the signature is left to the algorithm.
    """
    import inspect

    params = inspect.signature(cls.__init__).parameters
    for name, value in kwargs.items():
        default = params[name].default if name in params else None
        wants_number = isinstance(default, int | float) and not isinstance(default, bool)
        if isinstance(value, bool) and wants_number:
            reason = (
                f"expected a number, not a bool ({cls.__name__} would read it as "
                f"{int(value)}; its default is {default!r})"
            )
            raise ConfigError(f"agent.kwargs.{name}", value, reason, source=source)


def kwarg_key(prefix: str, exc: TypeError, kwargs: dict[str, Any]) -> tuple[str, Any]:
    """``(dotted key, value)`` of the keyword a ``TypeError`` names (else the whole section)."""
    match = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
    if match and match.group(1) in kwargs:
        return f"{prefix}.{match.group(1)}", kwargs[match.group(1)]
    return prefix, kwargs


def setup_torch(cfg: TrainConfig) -> None:
    """Apply the process-wide torch settings of ``cfg.run`` (``torch_threads``)."""
    import torch

    torch.set_num_threads(cfg.run.torch_threads)


def check_buildable(cfg: TrainConfig, source: str = "config") -> None:
    """Build the envs and the agent of ``cfg``, then close them (``--dry-run``).

    What would fail at the start of training (an unknown keyword, an unregistered id) fails
    here, naming the dotted key.
    """
    setup_torch(cfg)
    built = build_run(cfg, None, source)
    try:
        make_agent(cfg, built.venv, source)
    finally:
        built.close()


def step_unit(cfg: TrainConfig, source: str = "config") -> int:
    """The env steps SB3 takes between two checks of ``total_timesteps``.

    A whole rollout (``n_steps x num_envs``) for on-policy agents, ``train_freq x num_envs``
    for off-policy ones (``num_envs`` when ``train_freq`` counts episodes).
    """
    import inspect

    cls = agent_class(cfg, source)
    params = inspect.signature(cls.__init__).parameters
    n = cfg.env.num_envs
    for name in ("n_steps", "train_freq"):
        if name not in params:
            continue
        value = cfg.agent.kwargs.get(name, params[name].default)
        if isinstance(value, list | tuple):  # (frequency, "step" | "episode")
            value = value[0] if len(value) == 2 and value[1] == "step" else 1
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value * n
    return n


def round_to_steps(cfg: TrainConfig, source: str = "config") -> TrainConfig:
    """``cfg`` with ``run.total_steps`` and ``run.checkpoint_every`` rounded up.

    To whole :func:`step_unit` s: the steps SB3 really trains (it finishes the rollout it
    is in).
    """
    import dataclasses

    unit = step_unit(cfg, source)

    def up(n: int) -> int:
        return -(-n // unit) * unit

    every = cfg.run.checkpoint_every
    run = dataclasses.replace(
        cfg.run,
        total_steps=up(cfg.run.total_steps),
        checkpoint_every=None if every is None else up(every),
    )
    return dataclasses.replace(cfg, run=run)
