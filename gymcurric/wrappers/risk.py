"""Risk annotation: every step carries ``info["risk"]``, a predicted discounted cost-to-go.

:class:`AnnotateRisk` predicts, for the observation each ``reset``/``step`` returns, the
horizon-``H`` discounted cost-to-go ``sum_{k<H} gamma**k * c_{t+k}`` within the episode, with a
small MLP (:class:`gymcurric.semantics.risk.RiskHead`) that it trains online from the costs the
env reports in ``info["cost"]``. Importing this module does not import torch; building the
wrapper does (extra ``torch``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.core import ActType, ObsType

from gymcurric._optional import import_optional
from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.safety.costs import check_cost_values
from gymcurric.safety.risk_targets import check_target_params
from gymcurric.wrappers._sub_envs import wrapper_method

__all__ = ["AnnotateRisk", "FEATURE_SOURCES", "missing_risk_cost_error"]

FEATURE_SOURCES = ("obs", "frames", "caption")


def missing_risk_cost_error(env: Any, where: str = "") -> ConfigError:
    """The error raised when the env reports no ``info["cost"]`` for the risk head to learn."""
    at = f" ({where})" if where else ""
    return ConfigError(
        "info['cost']",
        None,
        f"{env} reported no info['cost']{at}; the risk head learns from realised costs: wrap "
        "the env in gymcurric.wrappers.AnnotateCost(env, cost_fn=...) before AnnotateRisk",
        source="AnnotateRisk",
    )


def check_risk_args(
    features: str, embedder: Any, gamma: float, horizon: int, truncation: str, source: str
) -> None:
    """Validate the arguments the single-env and vector risk wrappers share."""
    if features not in FEATURE_SOURCES:
        raise ConfigError("features", features, f"expected one of {FEATURE_SOURCES}", source=source)
    if features != "obs":
        if embedder is None:
            raise ConfigError(
                "embedder",
                None,
                f"features={features!r} needs an Embedder (see gymcurric.semantics.embedders."
                "load_embedder)",
                source=source,
            )
        method = "embed_images" if features == "frames" else "embed_texts"
        if not callable(getattr(embedder, method, None)):
            raise ConfigError("embedder", embedder, f"has no {method}() method", source=source)
    elif embedder is not None:
        raise ConfigError(
            "embedder", embedder, "is only used with features='frames' or 'caption'", source=source
        )
    check_target_params(gamma, horizon, truncation, source)


def make_annotator(num_envs: int, **kwargs: Any) -> Any:
    """Build a :class:`gymcurric.semantics.risk.RiskAnnotator` (imports torch)."""
    import_optional("torch", "torch", purpose="by the risk head (AnnotateRisk)")
    from gymcurric.semantics.risk import RiskAnnotator

    return RiskAnnotator(num_envs, **kwargs)


def check_risk_key_free(env: Any, info: Mapping[str, Any]) -> None:
    """Refuse to overwrite an ``info["risk"]`` the inner env (or vector env) already reports."""
    if "risk" in info:
        raise InfoKeyConflictError(
            f"{env} already reports info['risk'] ({info['risk']!r}); AnnotateRisk will not "
            "overwrite info key 'risk'"
        )


def failed_features(annotator: Any, embedder: Any, num_envs: int) -> npt.NDArray[np.float32]:
    """Zero features for a step whose embedding failed, as wide as the head (or the embedder)."""
    head = annotator.head
    dim = (head.input_dim if head is not None else 0) or int(getattr(embedder, "dim", 0) or 1)
    return np.zeros((num_envs, dim), dtype=np.float32)


def risk_metrics(annotator: Any, embed_errors: int) -> dict[str, float]:
    """A risk wrapper's ``risk/*`` metrics: the annotator's and ``risk/embed_errors``."""
    return {**annotator.stats(), "risk/embed_errors": embed_errors}


def risk_state_dict(annotator: Any, embed_errors: int) -> dict[str, Any]:
    """A risk wrapper's checkpoint: the annotator's state and ``embed_errors``."""
    return {**annotator.state_dict(), "embed_errors": embed_errors}


def load_risk_state(annotator: Any, state: dict[str, Any]) -> int:
    """Restore a :func:`risk_state_dict` into ``annotator``; returns its ``embed_errors``."""
    annotator.load_state_dict(state)
    return int(state.get("embed_errors", 0))


@dataclasses.dataclass(frozen=True)
class RiskSettings:
    """The constructor arguments of :class:`AnnotateRisk` and its vector twin, checked.

    One place for what both wrappers do with them: check them (on construction), record them
    (:meth:`record`) and build the annotator (:meth:`annotator`). The fields are the wrappers'
    keyword arguments, in their order; the wrappers document them.
    """

    features: str
    embedder: Any
    gamma: float
    horizon: int
    truncation: str
    train_every: int
    risk_lr: float
    risk_min_samples: int
    risk_batch_size: int
    risk_update_iters: int
    buffer_size: int
    hidden: Sequence[int]
    history: int
    seed: int
    device: str

    def __post_init__(self) -> None:
        check_risk_args(
            self.features, self.embedder, self.gamma, self.horizon, self.truncation, "AnnotateRisk"
        )

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> RiskSettings:
        """The settings from a wrapper's ``locals()`` (its other entries are ignored).

        The wrappers keep their explicit signatures; reading the values back by field name
        spares a third copy of the argument list, and a field the signature lacks is a KeyError.
        """
        return cls(**{field.name: arguments[field.name] for field in dataclasses.fields(cls)})

    def arguments(self) -> dict[str, Any]:
        """The fields as keyword arguments (not copied: the embedder is a model)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def check_env(self, env: Any, made: str) -> None:
        """Refuse ``features="frames"`` unless ``env`` renders ``rgb_array`` frames.

        Args:
            env: the env (or vector env) to be wrapped.
            made: what the message says must be made with that mode (``"an env"``).
        """
        render_mode = getattr(env, "render_mode", None)
        if self.features == "frames" and render_mode != "rgb_array":
            raise ConfigError(
                "features",
                self.features,
                f"needs {made} made with render_mode='rgb_array' (got {render_mode!r})",
                source="AnnotateRisk",
            )

    def record(self, wrapper: gym.utils.RecordConstructorArgs) -> None:
        """Record every argument on ``wrapper`` (``RecordConstructorArgs.__init__``)."""
        gym.utils.RecordConstructorArgs.__init__(
            wrapper,
            **self.arguments(),
            _disable_deepcopy=True,  # the embedder (a model) is recorded, not copied
        )

    def annotator(self, num_envs: int) -> Any:
        """A new :class:`gymcurric.semantics.risk.RiskAnnotator` for ``num_envs`` envs."""
        head_arguments = self.arguments()
        del head_arguments["features"], head_arguments["embedder"]
        return make_annotator(num_envs, **head_arguments)


class AnnotateRisk(
    gym.Wrapper[ObsType, ActType, ObsType, ActType], gym.utils.RecordConstructorArgs
):
    """Write ``info["risk"]``, a predicted discounted cost-to-go, at reset and every step.

    Features of the returned state are the flattened observation (``features="obs"``), or an
    :class:`~gymcurric.semantics.base.Embedder`'s embedding of ``env.render()``
    (``features="frames"``, needs ``render_mode="rgb_array"``) or of ``info["caption"]``, else
    ``env.describe()`` on any wrapper or the base env (``features="caption"``). Each step makes
    one forward pass of the head. The step's cost (``info["cost"]``, required) is paired with
    the features of the state the step started from; once ``horizon`` later steps have been
    seen, or the episode ended, that pair's target
    (see :func:`gymcurric.safety.risk_targets.cost_to_go_targets`: no bootstrap at a truncation)
    becomes a training sample, and the head trains every ``train_every`` steps.

    Observation, reward and termination are unchanged. Non-finite costs or features are
    replaced by 0 for the head (``info["cost"]`` itself is left as it is) and counted in
    ``risk/nan_events``; an embedding error makes that step's risk 0.0 and its sample unusable.
    A ``reset()`` in the middle of an episode closes it like a truncation.

    Metrics (:meth:`stats`, also named :meth:`risk_stats`): ``risk/loss``, ``risk/corr``,
    ``risk/pred_mean``, ``risk/target_mean``, ``risk/train_samples``, ``risk/nan_events``,
    ``risk/embed_errors``.

    Info keys written: ``risk`` (float, at reset and every step).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> env = AnnotateRisk(gym.make("gymcurric/HazardNav-v0"), horizon=20, seed=0)
        >>> _, info = env.reset(seed=0)
        >>> _, _, _, _, info = env.step(env.action_space.sample())
        >>> isinstance(info["risk"], float), sorted(env.stats())[0]
        (True, 'risk/corr')
    """

    def __init__(
        self,
        env: gym.Env[ObsType, ActType],
        features: str = "obs",
        embedder: Any = None,
        *,
        gamma: float = 0.99,
        horizon: int = 50,
        truncation: str = "complete",
        train_every: int = 128,
        risk_lr: float = 1e-3,
        risk_min_samples: int = 256,
        risk_batch_size: int = 128,
        risk_update_iters: int = 4,
        buffer_size: int = 50_000,
        hidden: Sequence[int] = (64, 64),
        history: int = 10_000,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        """Wrap ``env``.

        Args:
            env: an env reporting ``info["cost"]`` every step.
            features: ``"obs"``, ``"frames"`` or ``"caption"``.
            embedder: the :class:`~gymcurric.semantics.base.Embedder` for frames/captions.
            gamma: cost discount of the targets.
            horizon: ``H``, steps summed in a target.
            truncation: ``"complete"`` (a target cut by a time limit is used as is) or
                ``"drop"`` (such targets are discarded).
            train_every: steps between two training rounds.
            risk_lr: the head's Adam learning rate.
            risk_min_samples: samples before the first update.
            risk_batch_size: minibatch size.
            risk_update_iters: minibatches per training round.
            buffer_size: samples kept by the head.
            hidden: the head's hidden layer sizes.
            history: predictions kept for :meth:`modulation`.
            seed: seeds the head (weights and minibatch draws).
            device: torch device of the head.
        """
        settings = RiskSettings.from_arguments(locals())
        settings.check_env(env, "an env")
        settings.record(self)
        gym.Wrapper.__init__(self, env)
        self.features = features
        self.embedder = embedder
        self.annotator = settings.annotator(1)
        self.embed_errors = 0
        self._box = isinstance(env.observation_space, gym.spaces.Box)
        self._current: npt.NDArray[np.float32] | None = None  # features of the current state
        self._current_ok = True

    # -- features ------------------------------------------------------------------------------
    def _features(self, obs: Any, info: dict[str, Any]) -> tuple[npt.NDArray[np.float32], bool]:
        if self.features == "obs":
            if self._box:
                raw = np.asarray(obs, dtype=np.float32).reshape(1, -1)
            else:
                raw = np.asarray(
                    gym.spaces.flatten(self.env.observation_space, obs), dtype=np.float32
                ).reshape(1, -1)
            return self.annotator.sanitise(raw), True
        caption = self._caption(info) if self.features == "caption" else ""
        try:
            if self.features == "frames":
                emb = self.embedder.embed_images([np.asarray(self.env.render())])
            else:
                emb = self.embedder.embed_texts([caption])
        except Exception:  # fail-soft: an embedding error costs one step's risk, not the run
            self.embed_errors += 1
            return failed_features(self.annotator, self.embedder, 1), False
        return self.annotator.sanitise(emb), True

    def _caption(self, info: dict[str, Any]) -> str:
        if "caption" in info:
            return str(info["caption"])
        describe = wrapper_method(self.env, "describe")  # any wrapper's, as the twins find it
        if describe is not None:
            return str(describe())
        raise ConfigError(
            "features",
            "caption",
            f"{self.env} reports no info['caption'] and has no describe() method",
            source="AnnotateRisk",
        )

    def _annotate(self, obs: Any, info: dict[str, Any]) -> None:
        check_risk_key_free(self.env, info)
        feats, ok = self._features(obs, info)
        risk = float(self.annotator.predict(feats)[0]) if ok else 0.0
        self._current, self._current_ok = feats, ok
        info["risk"] = risk

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset the env and write ``info["risk"]`` for the first state."""
        if self._current is not None:
            self.annotator.pending.end_all()  # a reset mid-episode ends it like a truncation
        obs, info = self.env.reset(seed=seed, options=options)
        self._annotate(obs, info)
        return obs, info

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env, learn from the step's cost, write ``info["risk"]``."""
        out = self.env.step(action)
        if len(out) != 5:
            raise ConfigError(
                "env",
                self.env,
                f"step returned a {len(out)}-tuple; AnnotateRisk needs the Gymnasium 5-tuple "
                "with info['cost'] (wrap a Safety-Gymnasium env in AnnotateCost first)",
                source="AnnotateRisk",
            )
        obs, reward, terminated, truncated, info = out
        if "cost" not in info:
            raise missing_risk_cost_error(self.env)
        if self._current is None:
            raise gym.error.ResetNeeded("AnnotateRisk: call reset() before step()")
        # np.array(..., float64) in record() would read "0.5" as 0.5 (a bool is 0 or 1: a cost)
        check_cost_values(info["cost"], "info['cost']", source="AnnotateRisk")
        self.annotator.record(
            self._current, [info["cost"]], [terminated], [truncated], [self._current_ok]
        )
        self._annotate(obs, info)
        if terminated or truncated:
            self.annotator.episodes += 1
            self._current = None
        return obs, reward, terminated, truncated, info

    # -- reporting -----------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """The ``risk/*`` metrics (see the class docstring)."""
        return risk_metrics(self.annotator, self.embed_errors)

    def modulation(self, **kwargs: Any) -> Any:
        """The Lagrange modulation of the predictions since the previous call.

        See :meth:`gymcurric.semantics.risk.RiskAnnotator.modulation`; returns a
        :class:`gymcurric.safety.modulation.Modulation`.
        """
        return self.annotator.modulation(**kwargs)

    # A vector env reaches a sub-env's method by name on the outermost wrapper that has it
    # (SB3's env_method, Gymnasium's call and get_wrapper_attr): names no other wrapper uses
    # reach this one under any stack (ShapeRewardSemantic, say, has a stats() of its own).
    def risk_stats(self) -> dict[str, float]:
        """:meth:`stats` under a name no other wrapper has (for ``env_method``)."""
        return self.stats()

    def risk_modulation(self, **kwargs: Any) -> Any:
        """:meth:`modulation` under a name no other wrapper has (for ``env_method``)."""
        return self.modulation(**kwargs)

    def state_dict(self) -> dict[str, Any]:
        """The head (weights, optimiser, generator, buffer), history and counters."""
        return risk_state_dict(self.annotator, self.embed_errors)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; call ``reset()`` afterwards."""
        self.embed_errors = load_risk_state(self.annotator, state)
        self._current = None
