"""Datapack presentation for Stable-Baselines3 vector envs: :class:`VecPresentDatapack`.

The design is that of the Gymnasium vector twin :class:`gymcurric.wrappers.vector.PresentDatapack`:
the :class:`~gymcurric.datapacks.DataPackRLSampler` and its
:class:`~gymcurric.datapacks.DataPackCurriculum` stay in the main process (a ``SubprocVecEnv``
worker would otherwise unpickle its own copy, draw the same stream as every other worker and
report to a curriculum the trainer never sees). Each sub-env is wrapped in the single-env
:class:`gymcurric.wrappers.PresentDatapack` with ``sampler=None``, which presents the datapack
preset in its ``next_datapack`` attribute at its next reset. This wrapper draws the presets,
sends each to its sub-env's ``PresentDatapack`` under ``datapack_preset``, a name no other
wrapper has (``set_wrapper_attr`` through
:func:`~gymcurric.wrappers._sub_envs.call_sub_envs`: it finds the ``PresentDatapack`` anywhere in
the sub-env's wrapper chain, for ``DummyVecEnv`` and ``SubprocVecEnv`` alike, and an error there
ends no worker), computes each episode's outcome from the vector stream (return from
the rewards, cost from the summed ``info["cost"]``, success from the final step's
``info["is_success"]``, else ``info["success"]``, as the single-env wrapper reads it) and
reports it with ``curriculum.update_diagnostics``.

One episode ahead. SB3 vector envs reset a sub-env *inside* the ``step_wait`` that ends its
episode (the final observation goes to ``info["terminal_observation"]``), before the main
process can react, exactly like Gymnasium's ``SAME_STEP`` autoreset mode. So every sub-env
always holds a preset drawn in advance: the datapack of its episode ``k + 1`` is drawn right after
episode ``k - 1`` ends (at the first reset: two batches, for episodes 1 and 2). Stage changes and
newly satisfied prerequisites therefore reach each sub-env one episode late. The only way around
it would be to reset the sub-env a second time from the main process and swap the returned
observation, which VecEnv wrappers below this one (``VecFrameStack``, ``VecNormalize``
statistics, ``VecMonitor``) would already have seen: not done.

Draws made together (the sub-envs whose episode ended in one vector step, in index order) come
from one ``sample_batch(k)`` call, so the sampler's log has one entry per such step.

Same run under either vectorization. Rewards leave this wrapper as float32, the dtype SB3's
``DummyVecEnv`` gives them (``SubprocVecEnv`` gives float64, which made the reported returns,
hence the curriculum's ``mean_return``, the sampler's log and possibly the stages and draws,
differ in the last bits). So the same sampler seed, env seeds and actions give the same
observations, rewards, dones, datapack sequence per sub-env, reports and sampler log for
``DummyVecEnv`` and ``SubprocVecEnv`` (and gymcurric's checked versions of both), with any
start method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from gymcurric._checks import check_int
from gymcurric._deprecated import alias_getattr
from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.checked_vec_env import CheckedDummyVecEnv
from gymcurric.safety.costs import check_cost_values, numbers_only
from gymcurric.wrappers._sub_envs import call_sub_envs
from gymcurric.wrappers.curriculum import SuccessFn
from gymcurric.wrappers.datapack import (
    DatapackEpisodes,
    MplFn,
    PresentDatapack,
    check_datapack_args,
    check_datapack_tasks,
    draw_datapacks,
)

__all__ = ["DatapackCallback", "VecPresentDatapack", "datapack_log_values", "make_datapack_vec_env"]

_SRC = "VecPresentDatapack"


class VecPresentDatapack(VecEnvWrapper):
    """Present sampled datapacks to the sub-envs of an SB3 ``VecEnv``; report their outcomes.

    At every reset of every sub-env (the first ``reset()`` and every auto-reset) the sub-env runs
    a datapack drawn from ``sampler`` in this process, one episode ahead (see the module
    docstring). When a sub-env's episode ends, ``sampler.curriculum.update_diagnostics`` gets
    the same outcome the single-env :class:`gymcurric.wrappers.PresentDatapack` reports
    (``success``, ``error`` = positive summed cost, ``mpl``, ``tag_results``, ``return_``), in
    sub-env index order, so stages advance during ``learn()``. Observations and infos pass
    through unchanged, rewards as float32 (``DummyVecEnv``'s dtype, so that ``SubprocVecEnv``
    gives the same stream); an episode cut short by ``reset()`` is not reported.

    The sub-envs must each be wrapped in ``PresentDatapack(env, sampler=None)``
    (:func:`make_datapack_vec_env` does it); otherwise :class:`~gymcurric.errors.ConfigError`.
    Put this wrapper directly on the base ``VecEnv`` (under ``VecNormalize``), so that the
    returns it reports are the env's own. ``venv.set_options({"task": {...}})`` before
    ``reset()`` runs that task on every sub-env (SB3 applies options to the next ``reset()``
    only): those episodes are not reported and the presets wait for the next auto-reset.

    Attributes:
        sampler: the sampler (this process).
        datapacks: per sub-env, the datapack of the transition the last ``step_wait`` /
            ``reset`` returned (for a sub-env that just ended: the ended episode's).
        next_datapacks: per sub-env, the preset its next (auto-)reset will present.

    Info keys: none written. The sub-envs write ``datapack`` into their *reset* info, which SB3
    keeps in ``reset_infos`` (passed through by this wrapper).

    Examples:
        >>> from gymcurric.datapacks import DataPack, DataPackCurriculum, DataPackRLSampler
        >>> packs = [DataPack(f"p{n}", "nav", "gymcurric/HazardGrid-v0", n % 3, seed=n,
        ...                   task_params={"size": 5, "num_hazards": n, "max_steps": 10})
        ...          for n in range(6)]
        >>> sampler = DataPackRLSampler(packs, curriculum=DataPackCurriculum(), seed=0)
        >>> venv = make_datapack_vec_env("gymcurric/HazardGrid-v0", sampler, n_envs=2, seed=0)
        >>> _ = venv.reset()
        >>> len(sampler.logs)  # episode 1 and, ahead, episode 2 of both sub-envs
        2
        >>> for _ in range(25):
        ...     _ = venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        >>> sampler.curriculum.episode >= 4
        True
        >>> venv.close()
    """

    def __init__(
        self,
        venv: VecEnv,
        sampler: Any,
        *,
        success_fn: SuccessFn | None = None,
        mpl_fn: MplFn | None = None,
    ) -> None:
        """Wrap ``venv``, whose sub-envs are wrapped in ``PresentDatapack(..., sampler=None)``.

        Args:
            venv: the SB3 vector env (``DummyVecEnv``, ``SubprocVecEnv``, or a wrapper of one).
            sampler: a :class:`~gymcurric.datapacks.DataPackRLSampler` (or an object with its
                ``sample_batch`` method and a ``curriculum`` attribute, which may be ``None``).
            success_fn: ``success_fn(info) -> bool | None`` on a sub-env's last step info.
            mpl_fn: ``mpl_fn(info) -> float | None``: the episode's marginal productivity.
        """
        if not isinstance(venv, VecEnv):
            raise ConfigError("venv", venv, "expected a stable_baselines3 VecEnv", source=_SRC)
        check_datapack_args(sampler, success_fn, mpl_fn, source=_SRC)
        wrapped = venv.env_is_wrapped(PresentDatapack)
        if not all(wrapped):
            raise self._unwrapped_error([i for i, w in enumerate(wrapped) if not w], venv)
        # not "sampler": get_attr takes the outermost wrapper with the name (a user's, say);
        # a bool, not the sampler, comes back from a SubprocVecEnv worker (nothing to pickle)
        own = [i for i, has in enumerate(venv.get_attr("datapack_has_sampler")) if has]
        if own:
            raise ConfigError(
                "venv",
                venv,
                f"sub-envs {own} are wrapped in PresentDatapack with their own sampler; "
                "VecPresentDatapack samples centrally: wrap sub-envs with "
                "PresentDatapack(env, None)",
                source=_SRC,
            )
        super().__init__(venv)
        self.sampler = sampler
        n = self.num_envs
        self.next_datapacks: list[DataPack | None] = [None] * n  # mirror of the sub-envs' presets
        self._episodes = DatapackEpisodes(n, success_fn, mpl_fn, reporter=_SRC)
        self.datapacks: list[DataPack | None] = [None] * n
        self._all = np.ones(n, dtype=bool)

    @staticmethod
    def _unwrapped_error(envs: Sequence[int], venv: Any) -> ConfigError:
        return ConfigError(
            "venv",
            venv,
            f"sub-envs {list(envs)} are not wrapped in gymcurric.wrappers.PresentDatapack(env, "
            "sampler=None) (e.g. make_datapack_vec_env, or make_vec_env(..., "
            "wrapper_class=PresentDatapack, wrapper_kwargs={'sampler': None}))",
            source=_SRC,
        )

    # ---------------------------------------------------------------- presets
    def _draw(self, envs: Sequence[int]) -> None:
        """Draw one preset for each sub-env in ``envs`` (one batch) and send each its own."""
        if not envs:
            return
        batch = draw_datapacks(self.sampler, len(envs), source=_SRC)
        for i, pack in zip(envs, batch, strict=True):
            self.next_datapacks[i] = pack
            self._send(i, pack)

    def _send(self, i: int, pack: DataPack) -> None:
        """Preset ``pack`` in sub-env ``i``'s ``PresentDatapack``.

        Under ``datapack_preset``: ``set_wrapper_attr`` sets the outermost layer with the name,
        and ``next_datapack`` could be a user's wrapper's above it. Through
        :func:`call_sub_envs`, so that an error there ends no ``SubprocVecEnv`` worker.
        """
        call_sub_envs(self.venv, "set_wrapper_attr", "datapack_preset", pack, indices=[i])

    def _start(self, envs: Sequence[int]) -> list[int]:
        """Sub-envs ``envs`` just reset; returns those that consumed their preset.

        A sub-env whose reset info has ``datapack = None`` ran an explicit task (SB3's
        ``set_options({"task": ...})`` before ``reset()``): nothing is reported for that episode
        and its preset stays for its next reset.
        """
        reset_infos = getattr(self.venv, "reset_infos", None)
        consumed = []
        for i in envs:
            pack = self.next_datapacks[i]
            if reset_infos is not None:  # the sub-env reports what it presented
                info = reset_infos[i] or {}
                if "datapack" in info and info["datapack"] is None:
                    self._episodes.start([i], [None])
                    continue
                shown = info.get("datapack")
                if pack is not None and (shown is None or shown.get("pack_id") != pack.pack_id):
                    raise ConfigError(
                        "venv",
                        self.venv,
                        f"sub-env {i} reset on {shown!r} instead of its preset datapack "
                        f"{pack.pack_id!r}: is its PresentDatapack's next_datapack set by someone "
                        "else?",
                        source=_SRC,
                    )
            self._episodes.start([i], [pack])
            self.next_datapacks[i] = None
            consumed.append(i)
        return consumed

    # ---------------------------------------------------------------- VecEnv API
    def reset(self) -> VecEnvObs:
        """Reset every sub-env on its preset, then draw the presets of the episodes after."""
        for i, pack in enumerate(self.next_datapacks):
            if pack is not None:  # sent again: the sub-env may be new (a resumed run's worker)
                self._send(i, pack)
        self._draw([i for i in range(self.num_envs) if self.next_datapacks[i] is None])
        obs = self.venv.reset()
        # one episode ahead: an auto-reset cannot wait for the main process
        self._draw(self._start(range(self.num_envs)))
        self.datapacks = list(self._episodes.packs)
        self._pass_reset_infos()
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        """Step; report the ended episodes; draw the presets of the sub-envs that auto-reset."""
        obs, rewards, dones, infos = self.venv.step_wait()
        # SB3 gives DummyVecEnv's rewards as float32 (its buffer's dtype) and SubprocVecEnv's as
        # float64 (np.stack of the workers' Python floats): one dtype, DummyVecEnv's, so both
        # return the same rewards and report the same returns (the curriculum's mean_return,
        # the sampler's log, and the stages and draws that follow from them)
        rewards = np.asarray(rewards, dtype=np.float32)
        costs = [info.get("cost") for info in infos]
        if not numbers_only(costs):  # text ("0.5") is refused, as by every cost reader
            for i, c in enumerate(costs):
                if c is not None:
                    check_cost_values(c, f"info['cost'][{i}]", source="VecPresentDatapack")
        self._episodes.add(rewards, [0.0 if c is None else float(c) for c in costs], self._all)
        self.datapacks = list(self._episodes.packs)
        ended = np.flatnonzero(dones).tolist()
        if ended:
            curriculum = getattr(self.sampler, "curriculum", None)
            self._episodes.report(curriculum, ended, lambda i: infos[i])
            self._draw(self._start(ended))  # the auto-resets in step_wait consumed presets
        self._pass_reset_infos()
        return obs, rewards, dones, infos

    def _pass_reset_infos(self) -> None:
        # VecEnvWrapper keeps a reset_infos list of its own: show the wrapped env's
        inner = getattr(self.venv, "reset_infos", None)
        if inner is not None:
            self.reset_infos = list(inner)

    def get_diagnostics(self) -> dict[str, Any]:
        """The sampler's diagnostics (and its curriculum's)."""
        return dict(self.sampler.get_diagnostics())


class _MakeEnv:
    """Picklable env factory for worker processes (imports gymcurric there to register ids)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        self.env_id = env_id
        self.env_kwargs = env_kwargs

    def __call__(self) -> gym.Env[Any, Any]:
        import gymcurric  # noqa: F401

        return gym.make(self.env_id, **self.env_kwargs)


def make_datapack_vec_env(
    env_id: str,
    sampler: Any,
    n_envs: int = 1,
    *,
    seed: int | None = None,
    vec_env_cls: type[DummyVecEnv] | type[SubprocVecEnv] | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    success_fn: SuccessFn | None = None,
    mpl_fn: MplFn | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None = None,
) -> VecPresentDatapack:
    """SB3's ``make_vec_env``, every sub-env in ``PresentDatapack(env, None)``, plus the wrapper.

    Built as ``gymcurric train`` builds it: first the sampler's datapacks (``sampler.table``, as
    a :class:`~gymcurric.datapacks.DataPackRLSampler` holds them; a sampler without one is not
    checked) are checked against one env built here with
    :func:`~gymcurric.wrappers.datapack.check_datapack_tasks`, so a task the env refuses is an
    error naming the datapack and its file before any sub-env is built or stepped; then the
    vector env is gymcurric's :class:`~gymcurric.integrations.sb3.CheckedDummyVecEnv` unless
    ``vec_env_cls`` says otherwise (a failing sub-env is then an error naming it, never a
    hang).

    Args:
        env_id: the registered env id; the env must accept ``reset(options={"task": ...})``.
        sampler: the sampler, kept in this process.
        n_envs: number of sub-envs.
        seed: ``make_vec_env``'s seed (sub-env ``i`` gets ``seed + i`` at the first reset).
        vec_env_cls: the vector env class, used as given; ``None`` (default):
            :class:`~gymcurric.integrations.sb3.CheckedDummyVecEnv` (a ``DummyVecEnv``). For
            worker processes pass :class:`~gymcurric.integrations.sb3.CheckedSubprocVecEnv`
            (or SB3's ``SubprocVecEnv``).
        vec_env_kwargs: e.g. ``{"start_method": "forkserver"}``.
        env_kwargs: passed to the env constructor.
        success_fn: see :class:`VecPresentDatapack`.
        mpl_fn: see :class:`VecPresentDatapack`.
        monitor_kwargs: passed to SB3's ``Monitor`` (which sits inside ``PresentDatapack``).
        wrapper: an extra single-env wrapper applied outside ``PresentDatapack`` (e.g. a cost
            annotator), or ``None``.

    Raises:
        ConfigError: a bad argument (naming it and the value).
        TaskError: a datapack whose ``task_params`` the env refuses (its file, its id,
            ``task_params.<key>`` and the value), before any sub-env is built.
    """
    if not isinstance(env_id, str):
        raise ConfigError("env_id", env_id, "expected a registered env id", source=_SRC)
    # checked before any sub-env (or worker process) is built; numpy integers count too
    check_int("n_envs", n_envs, source="make_datapack_vec_env", allow_numpy=True)
    check_datapack_args(sampler, success_fn, mpl_fn, source="make_datapack_vec_env")

    def wrap(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        out: gym.Env[Any, Any] = PresentDatapack(env, None)
        return wrapper(out) if wrapper is not None else out

    make_env = _MakeEnv(env_id, dict(env_kwargs or {}))
    _check_sampler_tasks(make_env, sampler)
    venv = make_vec_env(
        make_env,
        n_envs=int(n_envs),
        seed=seed,
        vec_env_cls=vec_env_cls or CheckedDummyVecEnv,
        vec_env_kwargs=vec_env_kwargs,
        monitor_kwargs=monitor_kwargs,
        wrapper_class=wrap,
    )
    return VecPresentDatapack(venv, sampler, success_fn=success_fn, mpl_fn=mpl_fn)


def _check_sampler_tasks(make_env: _MakeEnv, sampler: Any) -> None:
    """:func:`check_datapack_tasks` for the datapacks ``sampler.table`` holds, on one env."""
    records = getattr(getattr(sampler, "table", None), "records", None)
    if not records:  # a sampler without a table (or an empty one): nothing to check
        return
    env = make_env()
    try:
        check_datapack_tasks(env, records)
    finally:
        env.close()


def datapack_log_values(diagnostics: dict[str, Any]) -> dict[str, float | str]:
    """The ``datapack/…`` values logged for a sampler's ``get_diagnostics()``.

    Examples:
        >>> from gymcurric.datapacks import DataPack, DataPackCurriculum, DataPackRLSampler
        >>> sampler = DataPackRLSampler([DataPack(f"p{i}", "x", "E-v0", i % 3) for i in range(6)],
        ...                             curriculum=DataPackCurriculum(), seed=0)
        >>> _ = sampler.sample_batch(4)
        >>> values = datapack_log_values(sampler.get_diagnostics())
        >>> values["datapack/stage"], values["datapack/stage_index"], values["datapack/sampled"]
        ('warmup', 0.0, 4.0)
    """
    out: dict[str, float | str] = {
        "datapack/batches": float(diagnostics.get("batches", 0)),
        "datapack/sampled": float(diagnostics.get("datapacks_sampled", 0)),
    }
    tiers = diagnostics.get("tier_distribution") or {}
    total = sum(tiers.values())
    for tier, count in tiers.items():
        out[f"datapack/tier{tier}_frac"] = float(count) / total if total else 0.0
    cur = diagnostics.get("curriculum")
    if isinstance(cur, dict):
        out["datapack/stage"] = str(cur.get("stage"))
        for key in ("stage_index", "episode", "episodes_in_stage", "stage_progress"):
            if cur.get(key) is not None:
                out[f"datapack/{key}"] = float(cur[key])
        for key, value in (cur.get("metrics") or {}).items():
            if value is not None:
                out[f"datapack/{key}"] = float(value)
        out["datapack/satisfied_prerequisites"] = float(
            len(cur.get("satisfied_prerequisites") or ())
        )
    return out


class DatapackCallback(BaseCallback):
    """Log the sampler's and its curriculum's ``datapack/…`` diagnostics at every rollout end.

    Values (see :func:`datapack_log_values`): ``datapack/stage`` (the stage name; not sent to
    TensorBoard), ``datapack/stage_index``, ``datapack/episode``, ``datapack/episodes_in_stage``,
    ``datapack/stage_progress``, the curriculum's rolling metrics (``datapack/error_rate``,
    ``datapack/success_rate``, ``datapack/mean_return``, ... once defined),
    ``datapack/satisfied_prerequisites`` (a count), ``datapack/batches``, ``datapack/sampled``
    and ``datapack/tier{0,1,2}_frac`` (the tiers of all datapacks drawn so far).

    Args:
        sampler: the sampler, or a :class:`VecPresentDatapack` (its sampler is used).
        verbose: SB3's verbosity.
    """

    def __init__(self, sampler: Any, verbose: int = 0) -> None:
        super().__init__(verbose)
        sampler = getattr(sampler, "sampler", sampler)
        if not callable(getattr(sampler, "get_diagnostics", None)):
            raise ConfigError(
                "sampler",
                sampler,
                "expected a DataPackRLSampler or a VecPresentDatapack (missing get_diagnostics)",
                source="DatapackCallback",
            )
        self.sampler = sampler
        #: The values recorded at the last rollout end.
        self.last: dict[str, float | str] = {}

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.last = datapack_log_values(self.sampler.get_diagnostics())
        for key, value in self.last.items():
            exclude = ("tensorboard",) if isinstance(value, str) else None
            self.logger.record(key, value, exclude=exclude)


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    VecDatapackTask = VecPresentDatapack
else:
    __getattr__ = alias_getattr(__name__, "VecDatapackTask")
