"""Semantic reward shaping for one env: a frozen embedding model nudges the reward.

The wrapper is thin: it fetches the state's frame (``env.render()``) or caption
(``info["caption"]`` / ``env.describe()``) when the :class:`~gymcurric.semantics.Shaper`
asks for it, and adds the shaper's term to the reward. torch/transformers are imported only
when a model is loaded (never by importing this module).
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.core import ActType, ObsType

from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.semantics.shaper import Shaper, ShapingConfig, build_shaper

__all__ = ["ShapeRewardSemantic", "caption_of"]


def caption_of(env: gym.Env[Any, Any], info: dict[str, Any]) -> str:
    """The state's caption: ``info["caption"]``, else ``env.unwrapped.describe()``.

    Raises:
        ConfigError: the env offers neither.
    """
    caption = info.get("caption")
    if caption is not None:
        return str(caption)
    describe = getattr(env.unwrapped, "describe", None)
    if callable(describe):
        return str(describe())
    raise ConfigError(
        "source",
        "captions",
        f"{env} writes no info['caption'] and has no describe() method; use a frame embedder "
        "(CLIP/SigLIP, source='frames') or add captions to the env",
    )


class ShapeRewardSemantic(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Add an annealed semantic shaping term to the reward (see :mod:`gymcurric.semantics`).

    States are embedded from frames (``render_mode="rgb_array"`` needed) for CLIP/SigLIP
    models, or from captions (``info["caption"]`` or ``env.describe()``) for caption models,
    and scored against the config's safe/unsafe prompts; the :class:`ShapingConfig` sets mode,
    β schedule, normalisation, clamp, capture interval and pooling. A model that fails to load
    or to embed gives shaping 0 (``status`` says why, a ``RuntimeWarning`` is emitted once);
    whether it would have read captions or frames is taken from the config's ``source``, the
    requested ``kind`` or folder, else the env's captions, so a caption env needs no
    ``render_mode`` even then.
    With ``enabled=False`` the wrapper changes nothing (no info keys either).

    Info keys written every step: ``shaping`` (the term added, 0.0 when not captured) and
    ``raw_reward`` (the reward before shaping).

    Examples:
        >>> import gymnasium as gym
        >>> import numpy as np
        >>> import gymcurric
        >>> from gymcurric.semantics import CallableEmbedder
        >>> words = lambda texts: np.array([[0.0, 1.0] if "inside" in t else [1.0, 0.0]
        ...                                 for t in texts])
        >>> env = ShapeRewardSemantic(
        ...     gym.make("gymcurric/HazardNav-v0"),
        ...     CallableEmbedder(texts=words),
        ...     config={"safe_prompts": ["clear"], "unsafe_prompts": ["inside a hazard"],
        ...             "margin_norm_enable": False, "beta_start": 0.1})
        >>> _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.float32))
        >>> info["shaping"], info["raw_reward"] + info["shaping"] == reward
        (0.1, True)
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        embedder: Any = None,
        config: ShapingConfig | dict[str, Any] | None = None,
        *,
        kind: str = "auto",
        device: str = "cpu",
        dtype: str = "auto",
    ) -> None:
        """Wrap ``env``.

        Args:
            env: the env to shape.
            embedder: a model folder or cached hub id (CLIP/SigLIP, or a sentence-embedding
                model for captions), an :class:`~gymcurric.semantics.Embedder`, a callable,
                or ``None`` for the shipped offline MiniLM caption model.
            config: a :class:`ShapingConfig` or a dict of its fields (``None``: defaults).
            kind: ``"auto"``, ``"clip"``, ``"siglip"`` or ``"caption"`` (for a model folder).
            device: where the model runs (``"cpu"``, ``"cuda"``, ``"auto"``).
            dtype: ``"auto"`` (bf16 → fp32 on CPU) or a dtype name.
        """
        cfg = ShapingConfig.coerce(config)
        # no deepcopy: the embedder may hold a model of hundreds of MB
        gym.utils.RecordConstructorArgs.__init__(
            self,
            _disable_deepcopy=True,
            embedder=embedder,
            config=cfg,
            kind=kind,
            device=device,
            dtype=dtype,
        )
        gym.Wrapper.__init__(self, env)
        self.shaper: Shaper = build_shaper(cfg, embedder, 1, kind=kind, device=device, dtype=dtype)
        self.enabled = cfg.enabled
        if callable(getattr(env.unwrapped, "describe", None)):
            self.shaper.resolve_source(captions=True)  # a failed model of unknown modality
        if self.enabled and self.shaper.source == "frames" and env.render_mode != "rgb_array":
            raise ConfigError(
                "render_mode",
                env.render_mode,
                "frame embedders need an env made with render_mode='rgb_array'",
                source="ShapeRewardSemantic",
            )
        self._info: dict[str, Any] = {}

    @property
    def status(self) -> str:
        """The shaper's status, e.g. ``"ok: ..."``, ``"failed: ..."`` or ``"disabled"``.

        (the same string as ``stats()["semantics/status"]``)
        """
        return self.shaper.status

    def stats(self, reset: bool = True) -> dict[str, float | str]:
        """The ``semantics/…`` telemetry (see :meth:`gymcurric.semantics.Shaper.stats`)."""
        return self.shaper.stats(reset=reset)

    def _inputs(self) -> list[Any]:
        if self.shaper.source == "captions":
            return [caption_of(self.env, self._info)]
        return [self.env.render()]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env; in potential mode, ``φ`` of the first state."""
        obs, info = self.env.reset(seed=seed, options=options)
        if self.enabled:
            self._info = info
            self.shaper.resolve_source(captions="caption" in info)
            self.shaper.begin(np.ones(1, dtype=bool), self._inputs)
        return obs, info

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; add the shaping term; write ``info["shaping"]`` and ``raw_reward``."""
        out = self.env.step(action)
        if not self.enabled:
            return out
        obs, reward, terminated, truncated, info = out
        for key in ("shaping", "raw_reward"):
            if key in info:
                raise InfoKeyConflictError(
                    f"{self.env} already reports info[{key!r}] ({info[key]!r}); "
                    f"ShapeRewardSemantic will not overwrite it"
                )
        self._info = info
        raw = float(reward)
        shaping = float(
            self.shaper.step([raw], [bool(terminated)], [bool(truncated)], self._inputs)[0]
        )
        info["shaping"] = shaping
        info["raw_reward"] = raw
        return obs, raw + shaping, terminated, truncated, info
