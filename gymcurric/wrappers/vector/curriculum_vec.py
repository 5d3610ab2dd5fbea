"""``make_curriculum_vec``: a vector env whose sub-envs run the tasks of one curriculum.

``gym.make_vec`` with every sub-env wrapped in :class:`gymcurric.wrappers.SampleCurriculumTask`,
plus the vector twin :class:`gymcurric.wrappers.vector.SampleCurriculumTask` around it; for
async vector envs of a shared-memory :class:`~gymcurric.tasks.Curriculum`, a
:class:`~gymcurric.tasks.channel.TaskChannel` between the two.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.tasks.channel import TaskChannel
from gymcurric.wrappers._sub_envs import call_sub_envs_each
from gymcurric.wrappers.curriculum import SampleCurriculumTask as SingleSampleCurriculumTask
from gymcurric.wrappers.vector.curriculum import SampleCurriculumTask

__all__ = ["make_curriculum_vec"]


def make_curriculum_vec(
    env_id: str | gym.envs.registration.EnvSpec,
    curriculum: Any,
    num_envs: int = 1,
    *,
    vectorization_mode: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
    episodes_in_main: bool = True,
    overlap: bool = True,
    **env_kwargs: Any,
) -> SampleCurriculumTask:
    """``gym.make_vec``, every sub-env wrapped in ``SampleCurriculumTask``, plus the vector twin.

    Args:
        env_id: the registered env id (or spec).
        curriculum: the curriculum; for ``vectorization_mode="async"`` it must be on the
            shared-memory backend.
        num_envs: number of sub-envs.
        vectorization_mode: ``"sync"`` or ``"async"``.
        vector_kwargs: passed to the vector env (e.g. ``{"autoreset_mode": ...,
            "context": "spawn"}``).
        wrapper_kwargs: keyword arguments of the single-env ``SampleCurriculumTask``
            (``success_fn``, ``max_retries``, ...).
        episodes_in_main: for async vector envs, whether this process sums each episode's
            return and cost from the vector env's rewards and infos (the default; not with a
            ``success_fn`` or a ``factory``, whose view the vector env does not carry).
            ``False`` keeps the sums in the sub-envs. Gymnasium types each step's info array
            by the first sub-env that reports the key, so an env that mixes ``int`` and
            ``float`` costs (or ``bool`` and ``float`` successes) in one step loses the
            fractions there (and an ``is_success`` of ``None``, "not reported", beside a
            ``bool`` one becomes ``False``); such envs should report floats, or use ``False``.
        overlap: apply each step's curriculum work while the workers step (the default;
            see the vector ``SampleCurriculumTask``), or, with ``False``, just before the
            step. Both give the same tasks and curriculum state, bit for bit.
        **env_kwargs: passed to the env constructor.

    Async vector envs of a :class:`~gymcurric.tasks.Curriculum` go through a
    :class:`~gymcurric.tasks.channel.TaskChannel`: this process draws each sub-env's next task
    and applies the finished episodes, in batches, once per vector step; the workers only take
    the task waiting in their slot and leave their results there. The per-episode work then
    runs once, hot, in this process, instead of cold in every worker, before the next vector
    step (by default during it, while the workers step; see
    ``SampleCurriculumTask.flush_curriculum``); the task stream depends only on this process's
    generator (the same seed gives the same tasks in every run). For the retries after an env
    refuses a task, each slot also holds ``max_retries`` spare tasks drawn ahead: the sub-env
    leaves the refusal in its slot and takes the next spare; this process applies the refusals
    (``mark_invalid``, in env order) after the step and draws new spares.
    Sample counts are taken when a sub-env takes its task, so ``curriculum/samples`` counts the
    episodes started.

    Raises:
        SubEnvCallError: a sub-env could not be bound to the channel (setting its wrapper's
            ``channel_index`` raised there; gymcurric's own errors are raised as themselves,
            with a note): the error names the sub-env, whose worker goes on until the vector
            env built here is closed, before the error reaches you.
    """
    if vectorization_mode not in ("sync", "async"):
        raise ConfigError(
            "vectorization_mode",
            vectorization_mode,
            "expected 'sync' or 'async' (sub-envs must be wrapped one by one)",
            source="make_curriculum_vec",
        )
    kwargs = dict(wrapper_kwargs or {})
    channel = None
    if vectorization_mode == "async" and _takes_channel(curriculum, kwargs):
        # the vector env's rewards and infos are this wrapper's (it is the outermost one):
        # without a success_fn or a factory the episodes can be accounted in this process
        in_main = (
            episodes_in_main and kwargs.get("success_fn") is None and kwargs.get("factory") is None
        )
        # one spare task per retry: a sub-env never draws one itself (see TaskChannel)
        retries = kwargs.get("max_retries", _single_max_retries())
        check_int("max_retries", retries, minimum=0, source="SampleCurriculumTask")
        channel = TaskChannel(
            num_envs,
            episodes_in_main=in_main,
            spares=retries,
            key_modulus=curriculum.space.key_modulus,
        )
        kwargs["channel"] = channel
    wrap = partial(SingleSampleCurriculumTask, curriculum=curriculum, **kwargs)
    envs = None
    try:
        envs = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode=vectorization_mode,
            vector_kwargs=vector_kwargs,
            wrappers=[wrap],
            **env_kwargs,
        )
        if channel is not None:  # an error binding a sub-env ends no worker: it is raised here
            bind = [("channel_index", i) for i in range(num_envs)]
            call_sub_envs_each(envs, "set_wrapper_attr", bind)
        return SampleCurriculumTask(
            envs,
            curriculum,
            channel=channel,
            reseed_curriculum=kwargs.get("reseed_curriculum", True),
            overlap=overlap,
        )
    except BaseException:
        if envs is not None:  # built, then binding or wrapping failed: stop its workers
            envs.close()
        if channel is not None:
            channel.close()
        raise


def _single_max_retries() -> int:
    """The single-env wrapper's default ``max_retries``."""
    defaults = SingleSampleCurriculumTask.__init__.__kwdefaults__ or {}
    return int(defaults["max_retries"])


def _takes_channel(curriculum: Any, wrapper_kwargs: dict[str, Any]) -> bool:
    """Whether the sub-envs of an async vector env can go through a :class:`TaskChannel`.

    Only for a gymcurric curriculum on the shared-memory backend (the sub-envs still fall back
    to it) and when the caller did not bring a channel of their own.
    """
    from gymcurric.tasks import Curriculum, SharedMemoryBackend

    return (
        isinstance(curriculum, Curriculum)
        and isinstance(curriculum.backend, SharedMemoryBackend)
        and "channel" not in wrapper_kwargs
    )
