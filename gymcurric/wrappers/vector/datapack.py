"""Datapack presentation for Gymnasium vector envs (Sync and Async): :class:`PresentDatapack`.

Why not the curriculum twin's design. :class:`gymcurric.wrappers.vector.SampleCurriculumTask` lets
each sub-env pick its own task inside its autoreset, which works across processes because the
curriculum state lives in shared memory. A :class:`~gymcurric.datapacks.DataPackRLSampler`
(records, logs, a generator) and its :class:`~gymcurric.datapacks.DataPackCurriculum` are plain
process-local objects: in an ``AsyncVectorEnv`` every worker would unpickle its own copy, all
copies would draw the same stream from the same seed, and the outcomes reported in the workers
would never reach the curriculum the trainer sees.

So this twin keeps the sampler and the curriculum in the main process and samples centrally.
Each sub-env is wrapped in the single-env :class:`gymcurric.wrappers.PresentDatapack` with
``sampler=None``: it only presents a *preset*, the datapack stored in its ``next_datapack``
attribute, at its next reset (explicit or automatic) and then clears it. The twin sets the
presets with the vector env's ``set_attr`` (one message per worker, only on steps where some
sub-env needs a new datapack) under the wrapper's ``datapack_preset``, a name no other wrapper
has (a user's wrapper above it with a ``next_datapack`` of its own does not take them),
computes every episode's outcome itself from the vector ``step`` results (return, summed
``info["cost"]``, the last step's info) and reports it with ``curriculum.update_diagnostics``.
When the preset is drawn depends on ``env.metadata["autoreset_mode"]``:

* ``NEXT_STEP`` (default): a sub-env resets in the ``step`` *after* its episode ends, so the twin
  reports the outcome and draws the next datapack in between: the draw sees the updated stage,
  exactly as with a single env. The reset info (``info["datapack"]``/``_datapack``) comes in
  that next step.
* ``SAME_STEP``: a sub-env resets inside the step that ends its episode, before the main process
  can react, so every sub-env always holds a preset drawn in advance: the datapack of episode
  ``k + 1`` is drawn when episode ``k`` starts. Stage changes therefore reach each sub-env one
  episode late. The reset info is in the ending step's top-level info; the final step's info
  (used for success) in ``info["final_info"]``.
* ``DISABLED``: datapacks are drawn in ``reset(options={"reset_mask": ...})`` for the masked
  sub-envs.

Draws made together (the sub-envs that need a datapack after one vector step, in index order)
come from one ``sample_batch(k)`` call, so the sampler's log has one entry per such step and
the stage's strategy stratifies within it. The same sampler seed, env seeds and actions give the
same datapack sequence per sub-env, for Sync and Async alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv, VectorWrapper

from gymcurric._checks import check_int
from gymcurric._deprecated import alias_getattr
from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import ConfigError
from gymcurric.wrappers._sub_envs import sub_envs_lacking
from gymcurric.wrappers.curriculum import SuccessFn
from gymcurric.wrappers.datapack import (
    DatapackEpisodes,
    MplFn,
    check_datapack_args,
    draw_datapacks,
)
from gymcurric.wrappers.datapack import PresentDatapack as _SinglePresentDatapack
from gymcurric.wrappers.vector._common import sync_sub_wrappers
from gymcurric.wrappers.vector.cost import AutoresetSteps

__all__ = ["PresentDatapack", "make_datapack_vec", "sub_env_info"]


def sub_env_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s own info dict out of a vector info (dict of arrays with ``_key`` masks).

    Examples:
        >>> import numpy as np
        >>> infos = {"a": np.array([1, 2]), "_a": np.array([False, True]),
        ...          "d": {"x": np.array([3, 4]), "_x": np.array([True, True])},
        ...          "_d": np.array([True, False])}
        >>> sub_env_info(infos, 0), sub_env_info(infos, 1)
        ({'d': {'x': 3}}, {'a': 2})
    """
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        if isinstance(value, dict):
            out[key] = sub_env_info(value, i)
        else:
            item = value[i]
            out[key] = item.item() if isinstance(item, np.generic) else item
    return out


class PresentDatapack(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Vector twin of :class:`gymcurric.wrappers.PresentDatapack`: one central sampler for all.

    At every reset of every sub-env (explicit or automatic) the sub-env runs the next datapack
    drawn from ``sampler`` in the main process: its task parameters through
    ``reset(options={"task": ...})`` and its seed (unless ``reset`` got one). Episode outcomes
    (``success``, ``error`` = positive summed cost, ``mpl``, ``tag_results``, ``return_``, as
    for the single-env wrapper) go to ``sampler.curriculum.update_diagnostics`` in sub-env index
    order. Observations, rewards and infos are passed through unchanged. See the module
    docstring for why, and for when each draw happens in each autoreset mode.

    The sub-envs must each be wrapped in the single-env ``PresentDatapack`` with ``sampler=None``
    (:func:`make_datapack_vec` does it); with ``SyncVectorEnv`` and ``AsyncVectorEnv`` a sub-env
    without one, or whose one has its own sampler (which would draw and report twice), raises
    :class:`~gymcurric.errors.ConfigError` here. The sub-envs of an ``AsyncVectorEnv`` are asked
    ``has_wrapper_attr`` first, then ``datapack_has_sampler`` (a name no other wrapper has, so a
    user wrapper with a ``sampler`` of its own above it is not read; a bool, so no sampler
    crosses the pipe): no worker exits. A sub-env (of any vector env) that starts an episode
    without reporting ``info["datapack"]`` raises :class:`~gymcurric.errors.ConfigError` too.

    ``reset(options={"task": {...}})`` runs that task on the reset sub-envs, draws nothing and
    reports nothing for those episodes (a preset already drawn stays for the next reset).

    Attributes:
        sampler: the sampler (main process).
        datapacks: per sub-env, the datapack of the transition the last ``step`` / ``reset``
            returned (for a sub-env that just ended, the datapack of the ended episode, in every
            autoreset mode); ``None`` for explicit tasks and before the first reset.

    Info keys: none written here; the sub-envs write ``datapack`` (see
    :func:`gymcurric.wrappers.datapack_info`), which the vector env batches into
    ``info["datapack"]`` (a dict of arrays) with the ``info["_datapack"]`` mask.

    Examples:
        >>> import gymcurric
        >>> from gymcurric.datapacks import DataPack, DataPackCurriculum, DataPackRLSampler
        >>> packs = [DataPack(f"p{n}", "nav", "gymcurric/HazardGrid-v0", n % 3, seed=n,
        ...                   task_params={"size": 5, "num_hazards": n, "max_steps": 10})
        ...          for n in range(6)]
        >>> sampler = DataPackRLSampler(packs, curriculum=DataPackCurriculum(), seed=0)
        >>> envs = make_datapack_vec("gymcurric/HazardGrid-v0", sampler, num_envs=2)
        >>> _, info = envs.reset(seed=0)
        >>> info["_datapack"].tolist(), len(sampler.logs)
        ([True, True], 1)
        >>> for _ in range(25):
        ...     _ = envs.step(envs.action_space.sample())
        >>> sampler.curriculum.episode >= 4
        True
        >>> envs.close()
    """

    def __init__(
        self,
        env: VectorEnv,
        sampler: Any,
        *,
        success_fn: SuccessFn | None = None,
        mpl_fn: MplFn | None = None,
    ) -> None:
        """Wrap ``env``, whose sub-envs are wrapped in ``PresentDatapack(..., sampler=None)``.

        Args:
            env: the vector env (Sync or Async, any autoreset mode).
            sampler: a :class:`~gymcurric.datapacks.DataPackRLSampler` (or an object with its
                ``sample_batch`` method and a ``curriculum`` attribute, which may be ``None``).
            success_fn: ``success_fn(info) -> bool | None`` on a sub-env's last step info.
            mpl_fn: ``mpl_fn(info) -> float | None``: the episode's marginal productivity.
        """
        src = "vector.PresentDatapack"
        check_datapack_args(sampler, success_fn, mpl_fn, source=src)
        gym.utils.RecordConstructorArgs.__init__(
            self, sampler=sampler, success_fn=success_fn, mpl_fn=mpl_fn, _disable_deepcopy=True
        )
        VectorWrapper.__init__(self, env)
        self.sampler = sampler
        self._steps = AutoresetSteps(env)
        subs = sync_sub_wrappers(env, _SinglePresentDatapack, self._not_wrapped_error)
        own = [i for i, wrapper in enumerate(subs) if wrapper.sampler is not None]
        if isinstance(env.unwrapped, AsyncVectorEnv):
            own = self._async_own_samplers(env.unwrapped)
        if own:
            raise ConfigError(
                "env",
                env,
                f"sub-envs {own} are wrapped in PresentDatapack with their own sampler; the "
                "vector twin samples centrally: wrap sub-envs with PresentDatapack(env, None)",
                source=src,
            )
        n = self.num_envs
        self._preset: list[DataPack | None] = [None] * n  # mirror of the sub-envs' presets
        self._episodes = DatapackEpisodes(n, success_fn, mpl_fn, reporter=src)
        self.datapacks: list[DataPack | None] = [None] * n

    def _async_own_samplers(self, env: AsyncVectorEnv) -> list[int]:
        """The sub-envs whose ``PresentDatapack`` has its own sampler, asked in their workers.

        ``has_wrapper_attr`` first (an unwrapped sub-env's worker would exit on reading a
        missing name), then the wrapper's ``datapack_has_sampler``: not ``sampler``, which
        ``get_wrapper_attr`` takes from the outermost wrapper with the name (a user's, say).
        """
        lacking = sub_envs_lacking(env, ["datapack_has_sampler"])
        missing = [i for i, names in enumerate(lacking or []) if names]
        if missing:
            raise self._not_wrapped_error(missing)
        return [i for i, has in enumerate(env.call("datapack_has_sampler")) if has]

    def _not_wrapped_error(self, envs: Sequence[int]) -> ConfigError:
        return ConfigError(
            "env",
            self.env,
            f"sub-envs {list(envs)} are not wrapped in gymcurric.wrappers.PresentDatapack(env, "
            "sampler=None) (e.g. make_datapack_vec)",
            source="vector.PresentDatapack",
        )

    def _unwrapped_error(self, envs: Sequence[int]) -> ConfigError:
        return ConfigError(
            "env",
            self.env,
            f"sub-envs {list(envs)} started an episode without info['datapack']: wrap each "
            "sub-env in gymcurric.wrappers.PresentDatapack(env, sampler=None) (e.g. "
            "make_datapack_vec)",
            source="vector.PresentDatapack",
        )

    # ---------------------------------------------------------------- presets
    def _ensure(self, envs: npt.NDArray[np.bool_]) -> None:
        """Draw a preset for each sub-env in ``envs`` that has none, and send all presets."""
        need = [i for i in np.flatnonzero(envs).tolist() if self._preset[i] is None]
        if not need:
            return
        batch = draw_datapacks(self.sampler, len(need), source="vector.PresentDatapack")
        for i, pack in zip(need, batch, strict=True):
            self._preset[i] = pack
        # One value per sub-env (Gymnasium's API); unchanged ones get what they already hold.
        # Not through call_sub_envs_each (two round trips): the setter only stores the pack,
        # so nothing raises in a worker here, and "datapack_preset" reaches the sub-env's
        # PresentDatapack under any wrapper of the user's (set_attr sets the outermost layer
        # with the name: "next_datapack" would be a user's attribute of that name).
        base: Any = self.env.unwrapped  # Sync/AsyncVectorEnv (VectorEnv declares no set_attr)
        base.set_attr("datapack_preset", list(self._preset))

    def _start(self, started: npt.NDArray[np.bool_], infos: dict[str, Any]) -> None:
        """Sub-envs in ``started`` began an episode on their preset (and consumed it)."""
        mask = infos.get("_datapack")
        got = np.zeros(self.num_envs, bool) if mask is None else np.asarray(mask, bool)
        missing = started & ~got
        if missing.any():
            raise self._unwrapped_error(np.flatnonzero(missing).tolist())
        envs = np.flatnonzero(started).tolist()
        self._episodes.start(envs, [self._preset[i] for i in envs])
        for i in envs:
            self._preset[i] = None

    # ---------------------------------------------------------------- API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs (or those in ``options["reset_mask"]``) on the next datapacks."""
        mask = None if options is None else options.get("reset_mask")  # the env pops it
        resets = np.ones(self.num_envs, bool) if mask is None else np.asarray(mask, bool).copy()
        explicit = options is not None and options.get("task") is not None
        if not explicit:
            self._ensure(resets)
        obs, infos = self.env.reset(seed=seed, options=options)
        if explicit:
            envs = np.flatnonzero(resets).tolist()
            self._episodes.start(envs, [None] * len(envs))
        else:
            self._start(resets, infos)
        if self._steps.same_step:
            self._ensure(np.ones(self.num_envs, bool))
        self._steps.reset(resets)
        self.datapacks = list(self._episodes.packs)
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the sub-envs; report ended episodes; give sub-envs about to reset a datapack."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        dones, reset_steps = self._steps.begin(terminations, truncations)
        if reset_steps.any():  # NEXT_STEP: these sub-envs reset in this step
            self._start(reset_steps, infos)
        costs, _ = self._steps.costs(infos, dones, reset_steps, "vector.PresentDatapack")
        self._episodes.add(rewards, costs, ~reset_steps)
        self.datapacks = list(self._episodes.packs)  # the episodes of this step's transitions
        if dones.any():
            final = infos.get("final_info") if self._steps.same_step else infos
            self._episodes.report(
                getattr(self.sampler, "curriculum", None),
                np.flatnonzero(dones).tolist(),
                lambda i: sub_env_info(final, i) if isinstance(final, dict) else {},
            )
            if self._steps.same_step:
                self._start(dones, infos)
                self._ensure(np.ones(self.num_envs, bool))
            elif self._steps.mode == AutoresetMode.NEXT_STEP:
                self._ensure(dones)
        self._steps.end(dones)
        return obs, rewards, terminations, truncations, infos

    def get_diagnostics(self) -> dict[str, Any]:
        """The sampler's diagnostics (and its curriculum's)."""
        return dict(self.sampler.get_diagnostics())


def make_datapack_vec(
    env_id: str | gym.envs.registration.EnvSpec,
    sampler: Any,
    num_envs: int = 1,
    *,
    vectorization_mode: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    success_fn: SuccessFn | None = None,
    mpl_fn: MplFn | None = None,
    **env_kwargs: Any,
) -> PresentDatapack:
    """``gym.make_vec`` with every sub-env wrapped in ``PresentDatapack(env, None)``, plus the twin.

    Args:
        env_id: the registered env id (or spec); the env must accept
            ``reset(options={"task": ...})``.
        sampler: the sampler, kept in this process.
        num_envs: number of sub-envs.
        vectorization_mode: ``"sync"`` or ``"async"``.
        vector_kwargs: passed to the vector env (e.g. ``{"autoreset_mode": ...}``).
        success_fn: see :class:`PresentDatapack`.
        mpl_fn: see :class:`PresentDatapack`.
        **env_kwargs: passed to the env constructor.
    """
    # checked before any sub-env (or worker process) is built; numpy integers count too
    check_int("num_envs", num_envs, source="make_datapack_vec", allow_numpy=True)
    check_datapack_args(sampler, success_fn, mpl_fn, source="make_datapack_vec")
    if vectorization_mode not in ("sync", "async"):
        raise ConfigError(
            "vectorization_mode",
            vectorization_mode,
            "expected 'sync' or 'async' (sub-envs must be wrapped one by one)",
            source="make_datapack_vec",
        )
    envs = gym.make_vec(
        env_id,
        num_envs=int(num_envs),
        vectorization_mode=vectorization_mode,
        vector_kwargs=vector_kwargs,
        wrappers=[partial(_SinglePresentDatapack, sampler=None)],
        **env_kwargs,
    )
    return PresentDatapack(envs, sampler, success_fn=success_fn, mpl_fn=mpl_fn)


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    DatapackTask = PresentDatapack
else:
    __getattr__ = alias_getattr(__name__, "DatapackTask")
