"""Vector twin of :class:`gymcurric.wrappers.semantic.ShapeRewardSemantic`.

All sub-envs' states are embedded in one batched call per captured step (at most ``batch_max``
states per call; a CUDA out-of-memory error halves ``batch_max`` and retries). Autoreset modes:

* ``NEXT_STEP`` (default): the step after an episode ends is a reset step (reward 0): its
  shaping is 0, and its state is the new episode's first (``φ(s_0)`` in potential mode).
* ``SAME_STEP``: a sub-env that ends returns the reset state. The final state's caption is read
  from ``info["final_info"]``; a final *frame* cannot be rendered any more, so a truncated
  episode's last step then adds 0 (additive) or keeps ``φ`` (potential); a true terminal has
  ``φ = 0`` and needs no frame.
* ``DISABLED``: ``reset(options={"reset_mask": ...})`` restarts the masked sub-envs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gymcurric.semantics.base import stack_frames
from gymcurric.semantics.shaper import Shaper, ShapingConfig
from gymcurric.wrappers._sub_envs import call_sub_envs, sub_envs_lacking
from gymcurric.wrappers.semantic import ShapingWrapperArgs, refuse_taken_info_keys
from gymcurric.wrappers.vector._common import autoreset_mode

__all__ = ["ShapeRewardSemantic"]


def _vector_captions(infos: dict[str, Any], num_envs: int) -> list[Any] | None:
    captions = infos.get("caption")
    if captions is None:
        return None
    mask = np.asarray(infos.get("_caption", np.ones(num_envs, bool)), dtype=bool)
    return [str(captions[i]) if mask[i] else None for i in range(num_envs)]


class ShapeRewardSemantic(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Add an annealed semantic shaping term to every sub-env's reward, embedding in batches.

    Same model, config and fail-soft behaviour as the single-env wrapper. Frames come from
    ``env.render()`` (make the vector env with ``render_mode="rgb_array"``), captions from
    ``info["caption"]`` (or the sub-envs' ``describe()`` through ``env.call``).

    Info keys written every step: ``shaping``/``_shaping`` (float64 per sub-env, 0.0 where not
    captured) and ``raw_reward``/``_raw_reward``. With ``enabled=False`` nothing changes.

    Examples:
        >>> import gymnasium as gym
        >>> import numpy as np
        >>> import gymcurric
        >>> from gymcurric.semantics import CallableEmbedder
        >>> words = lambda texts: np.array([[0.0, 1.0] if "inside" in t else [1.0, 0.0]
        ...                                 for t in texts])
        >>> envs = ShapeRewardSemantic(
        ...     gym.make_vec("gymcurric/HazardNav-v0", num_envs=2),
        ...     CallableEmbedder(texts=words),
        ...     config={"safe_prompts": ["clear"], "unsafe_prompts": ["inside a hazard"],
        ...             "margin_norm_enable": False, "beta_start": 0.1})
        >>> _ = envs.reset(seed=0)
        >>> infos = envs.step(np.zeros((2, 2), np.float32))[-1]
        >>> infos["shaping"].tolist()
        [0.1, 0.1]
    """

    def __init__(
        self,
        env: VectorEnv,
        embedder: Any = None,
        config: ShapingConfig | dict[str, Any] | None = None,
        *,
        kind: str = "auto",
        device: str = "cpu",
        dtype: str = "auto",
        batch_max: int | None = None,
    ) -> None:
        """Wrap ``env``.

        Args:
            env: the vector env (Sync or Async).
            embedder: as in the single-env wrapper (a model folder, an embedder, a callable, or
                ``None`` for the shipped MiniLM caption model).
            config: a :class:`ShapingConfig` or a dict of its fields.
            kind: ``"auto"``, ``"clip"``, ``"siglip"`` or ``"caption"``.
            device: where the model runs.
            dtype: ``"auto"`` or a dtype name.
            batch_max: the most states per embedding call (overrides ``config.batch_max``).
        """
        args = ShapingWrapperArgs.of(
            embedder, config, kind=kind, device=device, dtype=dtype, batch_max=batch_max
        )
        args.record(self, batch_max=batch_max)
        VectorWrapper.__init__(self, env)
        self._mode = autoreset_mode(env)
        self.shaper: Shaper = args.shaper(
            self.num_envs, env.render_mode, made="a vector env", source="ShapeRewardSemantic"
        )
        self.enabled = args.config.enabled
        self._prev_dones = np.zeros(self.num_envs, dtype=bool)
        self._infos: dict[str, Any] = {}
        self._all = np.ones(self.num_envs, dtype=bool)
        self._describes: bool | None = None  # every sub-env has describe() (asked once)

    @property
    def status(self) -> str:
        """The shaper's status, e.g. ``"ok: ..."``, ``"failed: ..."`` or ``"disabled"``."""
        return self.shaper.status

    @property
    def batch_max(self) -> int:
        """The current most states per embedding call (halved after out-of-memory errors)."""
        return self.shaper.batch_max

    def stats(self, reset: bool = True) -> dict[str, float | str]:
        """The ``semantics/…`` telemetry (see :meth:`gymcurric.semantics.Shaper.stats`)."""
        return self.shaper.stats(reset=reset)

    def _inputs(self) -> Any:
        if self.shaper.source == "captions":
            captions = _vector_captions(self._infos, self.num_envs)
            if captions is None:
                captions = [None] * self.num_envs
            if any(c is None for c in captions):
                described = self._describe()
                if described is None:  # no describe(): the shaper names what is missing
                    return captions
                captions = [
                    c if c is not None else str(d) for c, d in zip(captions, described, strict=True)
                ]
            return captions
        frames = self.env.render()
        if frames is None:
            raise RuntimeError(f"{self.env}.render() returned None")
        return stack_frames(frames)

    def _describe(self) -> Any:
        """Every sub-env's ``describe()``, or None where a sub-env has none.

        Whether they have one is asked first, once, with each sub-env's ``has_wrapper_attr``
        (:func:`sub_envs_lacking`): an ``AsyncVectorEnv`` worker exits on the
        ``AttributeError`` of a ``call`` of a missing method, and the env would be broken.
        A ``describe()`` that raises is called through :func:`call_sub_envs`: the error
        (:class:`~gymcurric.errors.SubEnvCallError` naming the sub-env) is raised from this
        step, and the workers go on.
        """
        if self._describes is None:
            lacking = sub_envs_lacking(self.env, ["describe"])
            self._describes = lacking is None or not any(lacking)
        if not self._describes:
            return None
        # a describe() that raises comes back as an error here, its worker still running
        return call_sub_envs(self.env, "describe")  # None: a vector env without call()

    def _final_inputs(self) -> list[Any] | None:
        if self.shaper.source != "captions":
            return None
        final = self._infos.get("final_info")
        if not isinstance(final, dict):
            return None
        return _vector_captions(final, self.num_envs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs (or those in ``options["reset_mask"]``); potential mode: ``φ(s_0)``."""
        # read the mask first: the vector env may pop it from ``options``
        mask = None if options is None else options.get("reset_mask")
        mask = self._all if mask is None else np.array(mask, dtype=bool)
        obs, infos = self.env.reset(seed=seed, options=options)
        if not self.enabled:
            return obs, infos
        self._infos = infos
        self.shaper.resolve_source(captions="caption" in infos)  # a failed model of unknown kind
        self.shaper.begin(mask, self._inputs)
        self._prev_dones[mask] = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the envs and add the shaping terms; writes ``shaping`` and ``raw_reward``."""
        out = self.env.step(actions)
        if not self.enabled:
            return out
        obs, rewards, terminations, truncations, infos = out
        refuse_taken_info_keys(infos, str(self.env), "ShapeRewardSemantic")
        self._infos = infos
        terminations = np.asarray(terminations, dtype=bool)
        truncations = np.asarray(truncations, dtype=bool)
        dones = terminations | truncations
        valid: np.ndarray | None = None
        starts: np.ndarray | None = None
        if self._mode == AutoresetMode.NEXT_STEP:
            valid, starts = ~self._prev_dones, self._prev_dones
        elif self._mode == AutoresetMode.SAME_STEP:
            starts = dones
        raw = np.asarray(rewards)
        shaping = self.shaper.step(
            raw,
            terminations,
            truncations,
            self._inputs,
            valid=valid,
            starts=starts,
            get_final_inputs=self._final_inputs,
        )
        self._prev_dones = dones
        infos["shaping"] = shaping
        infos["_shaping"] = self._all.copy()
        infos["raw_reward"] = raw.astype(np.float64, copy=True)
        infos["_raw_reward"] = self._all.copy()
        return obs, (raw + shaping).astype(raw.dtype, copy=False), terminations, truncations, infos
