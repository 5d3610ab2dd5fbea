"""Semantic reward shaping for Stable-Baselines3: a ``VecEnvWrapper`` and its logger hook.

SB3 vec envs reset a sub-env in the same step its episode ends: the returned observation is
the new episode's, the returned info the final step's (with ``terminal_observation``), and the
reset info sits in ``venv.reset_infos``. So the final state's caption is ``infos[i]["caption"]``
and the new episode's is ``reset_infos[i]["caption"]``; frames (``venv.get_images()``) and
``describe()`` always show the current state, so a final state without ``info["caption"]`` is
unknown: its last step adds 0 (additive) or keeps ``φ`` (potential); a true terminal has
``φ = 0`` in potential mode and needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from gymcurric._deprecated import alias_getattr
from gymcurric.errors import ConfigError
from gymcurric.semantics.base import stack_frames
from gymcurric.semantics.shaper import Shaper, ShapingConfig
from gymcurric.wrappers._sub_envs import call_sub_envs, sub_envs_lacking
from gymcurric.wrappers.semantic import ShapingWrapperArgs, refuse_taken_info_keys

__all__ = ["SemanticShapingCallback", "VecShapeRewardSemantic"]


class VecShapeRewardSemantic(VecEnvWrapper):
    """SB3 twin of :class:`gymcurric.wrappers.semantic.ShapeRewardSemantic`.

    All sub-envs' states are embedded in one batched call per captured step: frames from
    ``venv.get_images()`` (make the envs with ``render_mode="rgb_array"``, e.g.
    ``make_vec_env(id, env_kwargs={"render_mode": "rgb_array"})``) or captions from the infos
    (``info["caption"]``, else the sub-envs' ``describe()``). Same config, fail-soft behaviour
    and ``stats()`` as the Gymnasium wrappers; log the stats with
    :class:`SemanticShapingCallback`.

    Info keys written every step: ``shaping`` and ``raw_reward`` (floats, per sub-env).
    """

    def __init__(
        self,
        venv: VecEnv,
        embedder: Any = None,
        config: ShapingConfig | dict[str, Any] | None = None,
        *,
        kind: str = "auto",
        device: str = "cpu",
        dtype: str = "auto",
        batch_max: int | None = None,
    ) -> None:
        """Wrap ``venv``; arguments as in the Gymnasium vector wrapper.

        Args:
            venv: the SB3 vec env.
            embedder: a model folder or cached hub id, an embedder, a callable, or ``None``
                for the shipped MiniLM caption model.
            config: a :class:`ShapingConfig` or a dict of its fields.
            kind: ``"auto"``, ``"clip"``, ``"siglip"`` or ``"caption"``.
            device: where the model runs.
            dtype: ``"auto"`` or a dtype name.
            batch_max: the most states per embedding call (overrides ``config.batch_max``).
        """
        super().__init__(venv)
        args = ShapingWrapperArgs.of(
            embedder, config, kind=kind, device=device, dtype=dtype, batch_max=batch_max
        )
        self.shaper: Shaper = args.shaper(
            self.num_envs,
            getattr(venv, "render_mode", None),
            made="sub-envs",
            source="VecShapeRewardSemantic",
        )
        self.enabled = args.config.enabled
        self._current: list[Any] = [None] * self.num_envs
        self._describes = np.zeros(self.num_envs, dtype=bool)  # known to have describe()

    @property
    def status(self) -> str:
        """The shaper's status, e.g. ``"ok: ..."``, ``"failed: ..."`` or ``"disabled"``."""
        return self.shaper.status

    def stats(self, reset: bool = True) -> dict[str, float | str]:
        """The ``semantics/…`` telemetry (see :meth:`gymcurric.semantics.Shaper.stats`)."""
        return self.shaper.stats(reset=reset)

    def _captions(self, infos: list[dict[str, Any]], envs: list[int] | None = None) -> list[Any]:
        """The caption of each info; where it has none, its sub-env's ``describe()``.

        ``envs``: the sub-env each info comes from (default: one info per sub-env, in order).
        """
        envs = list(range(self.num_envs)) if envs is None else envs
        captions = [info.get("caption") for info in infos]
        missing = [k for k, c in enumerate(captions) if c is None]
        if missing:
            sub_envs = [envs[k] for k in missing]
            self._check_describe(sub_envs)
            # a describe() that raises comes back as an error here, its worker still running
            described = call_sub_envs(self.venv, "describe", indices=sub_envs)
            if described is None:  # a VecEnv without env_method()
                raise _no_describe(sub_envs)
            for k, d in zip(missing, described, strict=True):
                captions[k] = d
        return [str(c) for c in captions]

    def _check_describe(self, sub_envs: list[int]) -> None:
        """Refuse sub-envs without ``describe()`` before calling it (each is asked once).

        Asked with each sub-env's ``has_wrapper_attr`` (:func:`sub_envs_lacking`): a
        ``SubprocVecEnv`` worker exits on the ``AttributeError`` of an ``env_method``, and the
        env would be broken before the user saw this error.
        """
        unknown = [i for i in sub_envs if not self._describes[i]]
        if not unknown:
            return
        lacking = sub_envs_lacking(self.venv, ["describe"], unknown)
        if lacking is None:
            return
        bad = [i for i, names in zip(unknown, lacking, strict=True) if names]
        if bad:
            raise _no_describe(bad)
        self._describes[unknown] = True

    def _inputs(self) -> Any:
        if self.shaper.source == "captions":
            return self._current
        return stack_frames(self.venv.get_images())

    def reset(self) -> VecEnvObs:
        """Reset all envs; in potential mode, ``φ`` of the first states."""
        obs = self.venv.reset()
        if self.enabled:
            reset_infos = _reset_infos(self.venv)
            # a model that failed to load, of unknown modality: the env's captions decide
            self.shaper.resolve_source(captions=any("caption" in i for i in reset_infos))
            if self.shaper.ok and self.shaper.source == "captions":
                self._current = self._captions(reset_infos)
            self.shaper.begin(np.ones(self.num_envs, dtype=bool), self._inputs)
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        """Step the envs and add the shaping terms; writes ``shaping`` and ``raw_reward``."""
        obs, rewards, dones, infos = self.venv.step_wait()
        if not self.enabled:
            return obs, rewards, dones, infos
        dones = np.asarray(dones, dtype=bool)
        truncated = np.array(
            [bool(info.get("TimeLimit.truncated", False)) for info in infos], dtype=bool
        )
        truncated &= dones
        terminated = dones & ~truncated
        final: list[Any] | None = None
        if self.shaper.ok and self.shaper.source == "captions":  # failed: nothing is embedded
            if dones.any():
                # an ended sub-env has already restarted: its describe() tells the new
                # episode's first state, so a final state without a caption is unknown (as a
                # final frame is), never the next episode's s_0
                ended = np.flatnonzero(dones).tolist()
                going = np.flatnonzero(~dones).tolist()
                final = [None] * self.num_envs
                for i in ended:
                    caption = infos[i].get("caption")
                    final[i] = None if caption is None else str(caption)
                step_captions: list[Any] = [None] * self.num_envs
                reset_infos = _reset_infos(self.venv)
                started = self._captions([reset_infos[i] for i in ended], ended)
                current = self._captions([infos[i] for i in going], going)
                for i, c in zip(ended + going, started + current, strict=True):
                    step_captions[i] = c
            else:
                step_captions = self._captions(list(infos))
            self._current = step_captions
        raw = np.asarray(rewards)
        shaping = self.shaper.step(
            raw,
            terminated,
            truncated,
            self._inputs,
            starts=dones,
            get_final_inputs=lambda: final,
        )
        for info, s, r in zip(infos, shaping.tolist(), raw.tolist(), strict=True):
            refuse_taken_info_keys(info, "a sub-env", "VecShapeRewardSemantic")
            info["shaping"] = s
            info["raw_reward"] = float(r)
        return obs, (raw + shaping).astype(raw.dtype, copy=False), dones, infos


def find_shaping_wrapper(venv: Any) -> Any:
    """The first :class:`VecShapeRewardSemantic` in a chain of SB3 vec-env wrappers, or None."""
    env = venv
    while env is not None:
        if isinstance(env, VecShapeRewardSemantic):
            return env
        env = getattr(env, "venv", None)
    return None


class SemanticShapingCallback(BaseCallback):
    """Log the ``semantics/…`` telemetry at the end of every rollout.

    Finds the :class:`VecShapeRewardSemantic` in the model's env chain, or uses ``source`` (any
    object with a ``stats()`` method, e.g. a Gymnasium vector ``ShapeRewardSemantic``). Logs
    ``semantics/beta``, ``raw_margin``, ``norm_margin``, ``clamp_frac``, ``capture_count``,
    ``embed_latency_ms``, ``shaping_reward_ratio``, ``shaping_std``, ``batch_max``,
    ``oom_events``, ``embed_failures`` and ``status`` (text; not sent to TensorBoard).

    Args:
        source: where the stats come from; ``None``: the model's env chain.
        verbose: SB3 verbosity.
    """

    def __init__(self, source: Any = None, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.source = source

    def _on_training_start(self) -> None:
        if self.source is None:
            self.source = find_shaping_wrapper(self.training_env)
        if self.source is None or not callable(getattr(self.source, "stats", None)):
            raise ConfigError(
                "source",
                self.source,
                "no VecShapeRewardSemantic in the model's env chain; wrap the vec env in "
                "VecShapeRewardSemantic or pass source=<object with stats()>",
                source="SemanticShapingCallback",
            )

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        for key, value in self.source.stats().items():
            if isinstance(value, str):
                self.logger.record(key, value, exclude=("tensorboard",))
            else:
                self.logger.record(key, float(value))


def _no_describe(sub_envs: list[int]) -> ConfigError:
    return ConfigError(
        "source",
        "captions",
        f"sub-envs {sub_envs} write no info['caption'] and have no describe(); use a frame "
        "embedder (CLIP/SigLIP) or add captions to the env",
    )


def _reset_infos(venv: VecEnv) -> list[dict[str, Any]]:
    # SB3's VecEnvWrapper keeps its own (empty) reset_infos and does not forward the inner
    # ones (VecMonitor, VecNormalize, ...): read them from the innermost VecEnv
    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    return list(venv.reset_infos)


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    VecSemanticShaping = VecShapeRewardSemantic
else:
    __getattr__ = alias_getattr(__name__, "VecSemanticShaping")
