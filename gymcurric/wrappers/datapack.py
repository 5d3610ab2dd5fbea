"""Datapack presentation for a single env: :class:`PresentDatapack`.

The wrapper draws the next datapack from a :class:`~gymcurric.datapacks.DataPackRLSampler`
*inside* ``reset()`` (SB3 and Gymnasium vector envs auto-reset without options), hands its task
parameters to the env as ``reset(options={"task": ...})`` together with its seed, and, when the
episode ends, feeds the outcome into the sampler's :class:`~gymcurric.datapacks.DataPackCurriculum`
with ``update_diagnostics`` so that stages advance during training. The sampler stays advisory:
rewards, observations, objective vectors and the datapacks themselves are never changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.core import ActType, ObsType

from gymcurric._deprecated import alias_getattr
from gymcurric.datapacks.schema import DataPack
from gymcurric.errors import ConfigError, GymcurricError, InfoKeyConflictError, TaskError
from gymcurric.wrappers._success import success_of
from gymcurric.wrappers.curriculum import SuccessFn
from gymcurric.wrappers.episode_sums import EpisodeSums

__all__ = [
    "DatapackEpisodes",
    "MplFn",
    "PresentDatapack",
    "check_datapack_args",
    "check_datapack_tasks",
    "datapack_info",
    "draw_datapacks",
    "report_episode",
]

#: ``mpl_fn(info) -> float | None``: marginal productivity of an episode from its last step's info.
MplFn = Callable[[dict[str, Any]], Any]


def _json_task(obj: Any) -> Any:
    """A fresh JSON-ready copy of frozen task params (mapping proxies → dicts, tuples → lists)."""
    if hasattr(obj, "items"):
        return {k: _json_task(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_json_task(v) for v in obj]
    return obj


def datapack_info(pack: DataPack) -> dict[str, Any]:
    """The small JSON-safe dict written to ``info["datapack"]`` for ``pack``.

    Examples:
        >>> from gymcurric.datapacks import DataPack
        >>> info = datapack_info(DataPack("p1", "reach", "E-v0", 2, objective_vector=(1.0, 0.5)))
        >>> info["pack_id"], info["tier"], info["objective_vector"], info["trust_score"]
        ('p1', 2, [1.0, 0.5], 1.0)
    """
    return {
        "pack_id": pack.pack_id,
        "tier": int(pack.tier),
        "task_type": pack.task_type,
        "objective_vector": [float(v) for v in pack.objective_vector],
        "trust_score": float(pack.trust_score),
    }


class PresentDatapack(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Run every episode on the next sampled datapack, and report how it went.

    On ``reset()`` without a task the wrapper draws one datapack with
    ``sampler.sample_batch(1)`` (which also appends the sampler's log entry) and resets the env
    with ``seed=`` the seed passed to ``reset`` if any, else the datapack's ``seed`` if set, else
    ``None``, and ``options={**options, "task": <the datapack's task_params as a dict>}`` (other
    options are passed through). Observations, rewards and step infos are passed through
    unchanged. A :class:`~gymcurric.errors.TaskError` of the env refusing the task is raised
    naming the datapack's file and id and the key as ``task_params.<key>``
    (:func:`check_datapack_tasks` finds such datapacks before any reset).

    When the episode ends (terminated or truncated) and the sampler has a curriculum, the
    wrapper calls ``curriculum.update_diagnostics(success=..., error=..., mpl=...,
    tag_results=...)`` with:

    * ``success``: ``success_fn(info)`` on the last step's info if given, else
      ``info["is_success"]``, else ``info["success"]``, else ``False`` (a key whose value is
      ``None`` counts as absent);
    * ``error``: whether the episode's summed ``info["cost"]`` is positive (``False`` when the
      env reports no cost);
    * ``mpl``: ``mpl_fn(info)`` if given, else ``None``;
    * ``tag_results``: ``{affordance name: success}`` for the datapack's affordances (the tags
      this episode attempted), so prerequisite tags become satisfied during training;
    * ``return_``: the episode's summed reward (as the env returned it).

    Presets: setting :attr:`next_datapack` (directly, or from another process with
    ``set_wrapper_attr`` / a vector env's ``set_attr``) makes the next reset present that
    datapack instead of drawing one; the reset consumes it. With ``sampler=None`` the wrapper
    only presents presets (a reset without one raises :class:`~gymcurric.errors.ConfigError`)
    and reports nothing: this is how the vector twin
    :class:`gymcurric.wrappers.vector.PresentDatapack` drives its sub-envs from one central sampler.
    The sampler is also :attr:`datapack_sampler`, whether there is one
    :attr:`datapack_has_sampler`, and the preset :attr:`datapack_preset`: names no other wrapper
    has, which a vector env's ``get_attr`` / ``set_attr`` reaches under any wrapper stack (a
    wrapper of yours with a ``next_datapack`` of its own may sit above this one).

    An episode cut short by a reset is not reported. ``reset(options={"task": {...}})`` runs that
    task unchanged, draws no datapack, writes ``info["datapack"] = None`` and is not reported
    (evaluation runs must not skew the curriculum). The sampler's own seed fixes the datapack
    stream; ``reset(seed=s)`` seeds the env only (a sampler shared by several envs of a
    :class:`~gymnasium.vector.SyncVectorEnv` would otherwise be reseeded once per sub-env).

    Worker processes (``AsyncVectorEnv``, SB3's ``SubprocVecEnv``) would each unpickle their own
    copy of the sampler: every copy draws the same stream and reports to a curriculum the
    trainer never sees. Use :class:`gymcurric.wrappers.vector.datapack.PresentDatapack` (central
    sampling) for Gymnasium vector envs.

    Info keys written (at reset): ``datapack``, see :func:`datapack_info` (``pack_id``, ``tier``,
    ``task_type``, ``objective_vector`` as a list, ``trust_score``). An env that already sets it
    raises :class:`~gymcurric.errors.InfoKeyConflictError`. ``task`` / ``task_id`` belong to
    :class:`~gymcurric.wrappers.SampleCurriculumTask` and are not written.

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> from gymcurric.datapacks import DataPack, DataPackCurriculum, DataPackRLSampler
        >>> packs = [
        ...     DataPack(f"p{n}", "nav", "gymcurric/HazardGrid-v0", n % 3,
        ...              task_params={"size": 5, "num_hazards": n}, seed=n)
        ...     for n in range(3)
        ... ]
        >>> cur = DataPackCurriculum()
        >>> sampler = DataPackRLSampler(packs, curriculum=cur, seed=0)
        >>> env = PresentDatapack(gym.make("gymcurric/HazardGrid-v0"), sampler)
        >>> obs, info = env.reset()
        >>> env.unwrapped.task["num_hazards"] == dict(env.datapack.task_params)["num_hazards"]
        True
        >>> info["datapack"]["pack_id"] == env.datapack.pack_id
        True
        >>> done = False
        >>> while not done:
        ...     _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        ...     done = terminated or truncated
        >>> cur.episode
        1
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        sampler: Any | None,
        *,
        success_fn: SuccessFn | None = None,
        mpl_fn: MplFn | None = None,
    ) -> None:
        """Wrap ``env``.

        Args:
            env: the env; it must accept ``reset(options={"task": task})``.
            sampler: a :class:`~gymcurric.datapacks.DataPackRLSampler` (or any object with its
                ``sample_batch`` method and a ``curriculum`` attribute, which may be ``None``);
                ``None``: present only the datapacks set in :attr:`next_datapack`.
            success_fn: ``success_fn(info) -> bool | None`` on the last step's info.
            mpl_fn: ``mpl_fn(info) -> float | None``: the episode's marginal productivity.
        """
        check_datapack_args(sampler, success_fn, mpl_fn, source="PresentDatapack", optional=True)
        gym.utils.RecordConstructorArgs.__init__(
            self,
            sampler=sampler,
            success_fn=success_fn,
            mpl_fn=mpl_fn,
            _disable_deepcopy=True,  # the sampler (and its curriculum) must stay the same object
        )
        gym.Wrapper.__init__(self, env)
        self.sampler = sampler
        self._success_fn = success_fn
        self._mpl_fn = mpl_fn
        #: The datapack of the current episode; ``None`` before the first reset or for an
        #: explicit task.
        self.datapack: DataPack | None = None
        #: Preset: the datapack the next reset presents instead of drawing one (then ``None``).
        self.next_datapack: DataPack | None = None
        self._live = False
        self._cost = 0.0
        self._return = 0.0

    # A vector env reads a sub-env's attribute by name on the outermost wrapper that has it
    # (SB3's get_attr, Gymnasium's get_wrapper_attr): a wrapper above this one with a
    # ``sampler`` of its own would be read instead; this name reaches this wrapper.
    @property
    def datapack_sampler(self) -> Any | None:
        """:attr:`sampler` under a name no other wrapper has (for a vector env's ``get_attr``)."""
        return self.sampler

    @property
    def datapack_has_sampler(self) -> bool:
        """Whether :attr:`sampler` is not ``None``: the vector twins' own-sampler check.

        A bool, so a worker (``AsyncVectorEnv``, ``SubprocVecEnv``) sends no sampler back
        through its pipe (one built in the worker may not pickle, and the worker would exit),
        and Gymnasium's ``call`` / ``get_attr``, which call a callable attribute, call nothing.
        """
        return self.sampler is not None

    @property
    def datapack_preset(self) -> DataPack | None:
        """:attr:`next_datapack` under a name no other wrapper has (a vector env sets it).

        ``set_attr`` / ``set_wrapper_attr`` set the name on the outermost wrapper that has it:
        a ``next_datapack`` of a wrapper above this one would take the preset instead.
        """
        return self.next_datapack

    @datapack_preset.setter
    def datapack_preset(self, pack: DataPack | None) -> None:
        self.next_datapack = pack  # checked by the reset that presents it (no error here)

    # ---------------------------------------------------------------- reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode on the next sampled datapack (or on ``options["task"]``)."""
        opts = dict(options) if options else {}
        self._live = False
        self._cost = 0.0
        self._return = 0.0
        if opts.get("task") is not None:
            pack = None
            obs, info = self.env.reset(seed=seed, options=opts)
        else:
            opts.pop("task", None)
            pack = self._next_pack()
            if seed is None and pack.seed is not None:
                seed = int(pack.seed)
            try:
                obs, info = self.env.reset(
                    seed=seed, options={**opts, "task": _json_task(pack.task_params)}
                )
            except TaskError as exc:  # the env refuses the task: say which datapack, where
                raise _refused(exc, pack) from exc
        if "datapack" in info:
            raise InfoKeyConflictError(
                f"{self.env} already sets info['datapack'] at reset ({info['datapack']!r}); "
                "PresentDatapack will not overwrite info key 'datapack'"
            )
        self.datapack = pack
        info["datapack"] = None if pack is None else datapack_info(pack)
        self._live = pack is not None
        return obs, info

    def _next_pack(self) -> DataPack:
        if self.next_datapack is not None:
            pack, self.next_datapack = self.next_datapack, None
            if not isinstance(pack, DataPack):
                raise ConfigError(
                    "next_datapack", pack, "expected a DataPack", source="PresentDatapack.reset"
                )
            return pack
        if self.sampler is None:
            raise ConfigError(
                "next_datapack",
                None,
                "sampler is None and no datapack was preset for this reset",
                source="PresentDatapack.reset",
            )
        return draw_datapacks(self.sampler, 1, source="PresentDatapack.reset")[0]

    # ---------------------------------------------------------------- step
    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; at episode end report the outcome to the sampler's curriculum."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._live:
            self._return += float(reward)
            cost = info.get("cost")
            if cost is not None:
                self._cost += float(cost)
            if terminated or truncated:
                self._report(info)
        return obs, reward, terminated, truncated, info

    def _report(self, info: dict[str, Any]) -> None:
        self._live = False  # reported at most once, even if the curriculum raises
        curriculum = getattr(self.sampler, "curriculum", None)
        if curriculum is None or self.datapack is None:
            return
        report_episode(
            curriculum,
            self.datapack,
            info,
            cost=self._cost,
            return_=self._return,
            success_fn=self._success_fn,
            mpl_fn=self._mpl_fn,
            reporter="PresentDatapack",
        )


def _refused(exc: TaskError, pack: DataPack) -> TaskError:
    """``exc`` (an env refusing ``pack``'s task) naming the datapack, its file and the field.

    The env's error names its task key and the value; among thousands of datapacks the user
    also needs the one that holds it: ``FILE: datapack 'ID': task_params refused by SOURCE:
    invalid value for 'task_params.KEY': VALUE (REASON)``.
    """
    where = f"{pack.source}: " if pack.source else ""
    by = f" by {exc.source}" if exc.source else ""
    if exc.key is None:  # a TaskError(message) without fields
        return type(exc)(f"{where}datapack {pack.pack_id!r}: task_params refused{by}: {exc}")
    return type(exc)(
        f"task_params.{exc.key}",
        exc.value,
        exc.reason,
        source=f"{where}datapack {pack.pack_id!r}: task_params refused{by}",
    )


def check_datapack_tasks(env: gym.Env[Any, Any], packs: Iterable[DataPack]) -> None:
    """Refuse, before any episode, a datapack whose ``task_params`` ``env`` would refuse.

    Asks the env's ``validate_task(task)`` (gymcurric's envs have one; for an env without it
    nothing is checked) once per distinct task. A refusal found only at a reset comes from a
    worker process mid-run when the env runs in one, and a worker that dies there can leave
    the run waiting for it; checked here, it names the datapack at once.

    Raises:
        TaskError: as :class:`PresentDatapack`'s reset would raise it: the datapack's file and
            id, ``task_params.<key>`` and the value.
    """
    validate = getattr(env.unwrapped, "validate_task", None)
    if not callable(validate):
        return
    seen: set[str] = set()
    for pack in packs:
        task = _json_task(pack.task_params)
        key = json.dumps(task, sort_keys=True, default=repr)
        if key in seen:
            continue
        seen.add(key)
        try:
            validate(task)
        except TaskError as exc:
            raise _refused(exc, pack) from exc


def check_datapack_args(
    sampler: Any,
    success_fn: SuccessFn | None,
    mpl_fn: MplFn | None,
    *,
    source: str,
    optional: bool = False,
) -> None:
    """Check the arguments of :class:`PresentDatapack` and its twins.

    ``sampler`` must have a ``sample_batch`` method (or be ``None`` where ``optional``), the
    functions must be callable or ``None``; else :class:`~gymcurric.errors.ConfigError` from
    ``source``.
    """
    allowed_none = optional and sampler is None
    if not allowed_none and not callable(getattr(sampler, "sample_batch", None)):
        raise ConfigError(
            "sampler",
            sampler,
            "expected a DataPackRLSampler (missing method 'sample_batch')",
            source=source,
        )
    for name, fn in (("success_fn", success_fn), ("mpl_fn", mpl_fn)):
        if fn is not None and not callable(fn):
            raise ConfigError(name, fn, "must be callable or None", source=source)


def draw_datapacks(sampler: Any, count: int, *, source: str) -> Sequence[DataPack]:
    """``sampler.sample_batch(count)``, checked to hold ``count`` datapacks.

    Raises:
        ConfigError: the sampler returned another number of datapacks (from ``source``).
    """
    batch = sampler.sample_batch(count)
    if len(batch) != count:
        raise ConfigError(
            "sampler",
            sampler,
            f"sample_batch({count}) returned {len(batch)} datapacks",
            source=source,
        )
    return batch


class DatapackEpisodes:
    """Per sub-env of a vector env: the datapack its episode runs, the episode's sums, the report.

    The bookkeeping of the vector twins of :class:`PresentDatapack` (Gymnasium's and SB3's):
    :attr:`packs` holds each sub-env's datapack (``None``: an explicit task or no episode,
    never reported), :attr:`sums` its return and summed cost
    (:class:`~gymcurric.wrappers.episode_sums.EpisodeSums`), and :meth:`report` feeds ended
    episodes to the curriculum with :func:`report_episode`, as the single-env wrapper does.

    Args:
        num_envs: how many sub-envs.
        success_fn: see :class:`PresentDatapack`.
        mpl_fn: see :class:`PresentDatapack`.
        reporter: the wrapper, named (with the sub-env) in the note of a report that fails.
    """

    def __init__(
        self,
        num_envs: int,
        success_fn: SuccessFn | None,
        mpl_fn: MplFn | None,
        reporter: str,
    ) -> None:
        self.packs: list[DataPack | None] = [None] * num_envs
        self.sums = EpisodeSums(num_envs)
        self.success_fn = success_fn
        self.mpl_fn = mpl_fn
        self.reporter = reporter

    def start(self, envs: Sequence[int], packs: Sequence[DataPack | None]) -> None:
        """Sub-envs ``envs`` start episodes of ``packs``: their sums restart from zero."""
        for i, pack in zip(envs, packs, strict=True):
            self.packs[i] = pack
        self.sums.start(list(envs))

    def add(self, rewards: Any, costs: Any, where: npt.NDArray[np.bool_]) -> None:
        """Add one step's rewards (sub-envs in ``where``) and costs (0 where none) to the sums."""
        self.sums.add_rewards(np.asarray(rewards, np.float64), where)
        self.sums.add_costs(costs, where)

    def report(
        self, curriculum: Any, ended: Sequence[int], info_of: Callable[[int], dict[str, Any]]
    ) -> None:
        """Report the episodes that ended in ``ended`` (index order); then they have no datapack.

        ``info_of(i)`` is sub-env ``i``'s last step info. Nothing is reported without a
        curriculum, nor for an episode without a datapack.
        """
        for i in ended:
            pack = self.packs[i]
            if curriculum is not None and pack is not None:
                report_episode(
                    curriculum,
                    pack,
                    info_of(i),
                    cost=float(self.sums.costs[i]),
                    return_=float(self.sums.returns[i]),
                    success_fn=self.success_fn,
                    mpl_fn=self.mpl_fn,
                    reporter=f"{self.reporter} (sub-env {i})",
                )
            self.packs[i] = None


def report_episode(
    curriculum: Any,
    pack: DataPack,
    info: dict[str, Any],
    *,
    cost: float,
    return_: float,
    success_fn: SuccessFn | None,
    mpl_fn: MplFn | None,
    reporter: str,
) -> None:
    """Feed one finished episode of ``pack`` to ``curriculum.update_diagnostics``.

    ``info`` is the episode's last step info; ``cost`` and ``return_`` its sums. Shared by
    :class:`PresentDatapack` and its vector twins (through :class:`DatapackEpisodes`), so all
    report the same outcome.
    """
    raw = success_fn(info) if success_fn is not None else success_of(info)
    success = bool(raw) if raw is not None else False
    mpl = mpl_fn(info) if mpl_fn is not None else None
    tags = {a.name: success for a in pack.enrichment.affordances}
    try:
        curriculum.update_diagnostics(
            success=success,
            error=cost > 0.0,
            mpl=None if mpl is None else float(mpl),
            tag_results=tags or None,
            return_=float(return_),
        )
    except GymcurricError as exc:
        exc.add_note(
            f"reported by {reporter} at the end of an episode of datapack {pack.pack_id!r}"
        )
        raise


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    DatapackTask = PresentDatapack
else:
    __getattr__ = alias_getattr(__name__, "DatapackTask")
