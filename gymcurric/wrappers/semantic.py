"""Semantic reward shaping for one env: a frozen embedding model nudges the reward.

The wrapper is thin: it fetches the state's frame (``env.render()``) or caption
(``info["caption"]`` / ``env.describe()``) when the :class:`~gymcurric.semantics.Shaper`
asks for it, and adds the shaper's term to the reward. torch/transformers are imported only
when a model is loaded (never by importing this module).

What the twins (:mod:`gymcurric.wrappers.vector.semantic`,
:mod:`gymcurric.integrations.sb3.semantic`) share with this wrapper lives here:
:class:`ShapingWrapperArgs` (coerce the config, record the arguments, build the shaper and
check the env can feed it) and :func:`refuse_taken_info_keys`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.core import ActType, ObsType

from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.semantics.shaper import Shaper, ShapingConfig, build_shaper
from gymcurric.wrappers._sub_envs import wrapper_method

__all__ = [
    "SHAPING_INFO_KEYS",
    "ShapeRewardSemantic",
    "ShapingWrapperArgs",
    "caption_of",
    "refuse_taken_info_keys",
]

SHAPING_INFO_KEYS = ("shaping", "raw_reward")
"""The info keys every semantic shaping wrapper writes."""


def caption_of(env: gym.Env[Any, Any], info: dict[str, Any]) -> str:
    """The state's caption: ``info["caption"]``, else ``env.describe()``.

    ``describe()`` is looked up on every wrapper of ``env``, then its base env, as the vector
    twins' ``call`` and SB3's ``env_method`` do (a wrapper that adds captions counts).

    Raises:
        ConfigError: the env offers neither.
    """
    caption = info.get("caption")
    if caption is not None:
        return str(caption)
    describe = wrapper_method(env, "describe")
    if describe is not None:
        return str(describe())
    raise ConfigError(
        "source",
        "captions",
        f"{env} writes no info['caption'] and has no describe() method; use a frame embedder "
        "(CLIP/SigLIP, source='frames') or add captions to the env",
    )


def refuse_taken_info_keys(
    info: Mapping[str, Any], reporter: str, wrapper: str, *, show_value: bool = False
) -> None:
    """Refuse to overwrite a :data:`SHAPING_INFO_KEYS` key the inner env already wrote.

    Args:
        info: the info (one env's, or a vector env's dict of arrays).
        reporter: who wrote it, for the message (the inner env).
        wrapper: the shaping wrapper's class name, for the message.
        show_value: quote the value found (a scalar, not a vector env's array).

    Raises:
        InfoKeyConflictError: ``info`` holds ``"shaping"`` or ``"raw_reward"``.
    """
    for key in SHAPING_INFO_KEYS:
        if key in info:
            found = f" ({info[key]!r})" if show_value else ""
            raise InfoKeyConflictError(
                f"{reporter} already reports info[{key!r}]{found}; {wrapper} will not overwrite it"
            )


@dataclass(frozen=True)
class ShapingWrapperArgs:
    """The arguments every semantic shaping wrapper takes past its env, and what it does with them.

    One place for the start of the single-env, vector and SB3 wrappers: the config coerced
    (with a vector wrapper's ``batch_max`` override), the arguments recorded, the shaper
    loaded fail-soft and the env's ``render_mode`` checked when it reads frames.

    Attributes:
        embedder: as given (a model folder or hub id, an embedder, a callable or ``None``).
        config: the coerced :class:`ShapingConfig`.
        kind: the model kind (``"auto"``, ``"clip"``, ``"siglip"``, ``"caption"``).
        device: where the model runs.
        dtype: ``"auto"`` or a dtype name.
    """

    embedder: Any
    config: ShapingConfig
    kind: str
    device: str
    dtype: str

    @classmethod
    def of(
        cls,
        embedder: Any,
        config: ShapingConfig | dict[str, Any] | None,
        *,
        kind: str,
        device: str,
        dtype: str,
        batch_max: int | None = None,
    ) -> ShapingWrapperArgs:
        """Coerce ``config``; a ``batch_max`` that is not ``None`` replaces its ``batch_max``.

        Raises:
            ConfigError: a bad config (an unknown key or a bad value).
        """
        cfg = ShapingConfig.coerce(config)
        if batch_max is not None:
            cfg = ShapingConfig.coerce(cfg, batch_max=batch_max)
        return cls(embedder, cfg, kind, device, dtype)

    def record(self, wrapper: gym.utils.RecordConstructorArgs, **extra: Any) -> None:
        """Record the arguments (and a twin's ``extra`` ones) as ``wrapper``'s constructor's."""
        # no deepcopy: the embedder may hold a model of hundreds of MB
        gym.utils.RecordConstructorArgs.__init__(
            wrapper,
            _disable_deepcopy=True,
            embedder=self.embedder,
            config=self.config,
            kind=self.kind,
            device=self.device,
            dtype=self.dtype,
            **extra,
        )

    def shaper(
        self,
        num_envs: int,
        render_mode: str | None,
        *,
        made: str,
        source: str,
        describes: bool = False,
    ) -> Shaper:
        """Load the shaper for ``num_envs`` envs (fail-soft) and check the env can feed it.

        Args:
            num_envs: how many envs the shaper serves.
            render_mode: the env's; a shaper that reads frames needs ``"rgb_array"``.
            made: what the error says must be made with ``render_mode='rgb_array'``
                (``"an env"``).
            source: the wrapper's class name, for the error.
            describes: the env has ``describe()``, so a model of unknown modality that failed
                to load reads captions (and needs no ``render_mode``).

        Raises:
            ConfigError: shaping is enabled and reads frames, and ``render_mode`` is not
                ``"rgb_array"``.
        """
        shaper = build_shaper(
            self.config,
            self.embedder,
            num_envs,
            kind=self.kind,
            device=self.device,
            dtype=self.dtype,
        )
        if describes:
            shaper.resolve_source(captions=True)
        if self.config.enabled and shaper.source == "frames" and render_mode != "rgb_array":
            raise ConfigError(
                "render_mode",
                render_mode,
                f"frame embedders need {made} made with render_mode='rgb_array'",
                source=source,
            )
        return shaper


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
        args = ShapingWrapperArgs.of(embedder, config, kind=kind, device=device, dtype=dtype)
        args.record(self)
        gym.Wrapper.__init__(self, env)
        self.shaper: Shaper = args.shaper(
            1,
            env.render_mode,
            made="an env",
            source="ShapeRewardSemantic",
            describes=wrapper_method(env, "describe") is not None,
        )
        self.enabled = args.config.enabled
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
        refuse_taken_info_keys(info, str(self.env), "ShapeRewardSemantic", show_value=True)
        self._info = info
        raw = float(reward)
        shaping = float(
            self.shaper.step([raw], [bool(terminated)], [bool(truncated)], self._inputs)[0]
        )
        info["shaping"] = shaping
        info["raw_reward"] = raw
        return obs, raw + shaping, terminated, truncated, info
