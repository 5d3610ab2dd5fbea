"""Vector twin of :class:`gymcurric.wrappers.risk.AnnotateRisk` for Gymnasium ``VectorEnv``.

One risk head serves all sub-envs: each step embeds (if an embedder is used) and predicts all
sub-envs' states in **one batch**. Costs are read aligned with the rewards in every autoreset
mode (see :mod:`gymcurric.wrappers.vector.cost`):

* ``NEXT_STEP``: the step after an episode end is a reset step; it is not a transition, so it
  gives no training sample, and the risk written on it is that of the reset state.
* ``SAME_STEP``: a sub-env that ends resets in the same step; its cost comes from
  ``info["final_info"]`` and the risk written is that of the reset state (the observation
  returned). No risk is predicted for the final observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gymcurric.errors import ConfigError
from gymcurric.wrappers.risk import (
    RiskSettings,
    check_risk_key_free,
    failed_features,
    load_risk_state,
    missing_risk_cost_error,
    risk_metrics,
    risk_state_dict,
)
from gymcurric.wrappers.vector._common import autoreset_mode
from gymcurric.wrappers.vector.cost import read_step_costs

__all__ = ["AnnotateRisk"]


class AnnotateRisk(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Write ``info["risk"]`` (float32 array, all-True ``info["_risk"]``) at reset and every step.

    Same behaviour and arguments as :class:`gymcurric.wrappers.risk.AnnotateRisk`, with one
    head for all sub-envs and one batched embedding + forward per vector step; ``train_every``
    counts vector steps. Frames come from the vector env's ``render()`` (one per sub-env),
    captions from ``info["caption"]``.

    Info keys written: ``risk`` / ``_risk`` (at reset and every step).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> envs = AnnotateRisk(gym.make_vec("gymcurric/HazardNav-v0", num_envs=2), horizon=20)
        >>> _ = envs.reset(seed=0)
        >>> envs.step(envs.action_space.sample())[-1]["risk"].shape
        (2,)
    """

    def __init__(
        self,
        env: VectorEnv,
        features: str = "obs",
        embedder: Any = None,
        *,
        gamma: float = 0.99,
        horizon: int = 50,
        truncation: str = "complete",
        train_every: int = 8,
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
        """Wrap ``env``; see :class:`gymcurric.wrappers.risk.AnnotateRisk` for the arguments.

        ``train_every`` counts vector steps (each adds ``num_envs`` transitions).
        """
        settings = RiskSettings.from_arguments(locals())
        settings.check_env(env, "sub-envs")
        settings.record(self)
        VectorWrapper.__init__(self, env)
        self._mode = autoreset_mode(env)
        self.features = features
        self.embedder = embedder
        self.annotator = settings.annotator(self.num_envs)
        self.embed_errors = 0
        self._box = isinstance(env.single_observation_space, gym.spaces.Box)
        self._current: npt.NDArray[np.float32] | None = None
        self._current_ok = np.ones(self.num_envs, dtype=bool)
        self._prev_dones = np.zeros(self.num_envs, dtype=bool)
        self._all = np.ones(self.num_envs, dtype=bool)

    # -- features ------------------------------------------------------------------------------
    def _features(self, obs: Any, infos: dict[str, Any]) -> tuple[npt.NDArray[np.float32], bool]:
        n = self.num_envs
        if self.features == "obs":
            if self._box:
                raw = np.asarray(obs, dtype=np.float32).reshape(n, -1)
            else:
                flat = gym.spaces.flatten(self.env.observation_space, obs)
                raw = np.asarray(flat, dtype=np.float32).reshape(n, -1)
            return self.annotator.sanitise(raw), True
        captions: list[str] = []
        if self.features == "caption":
            mask = np.asarray(infos.get("_caption", np.zeros(n, bool)), dtype=bool)
            if "caption" not in infos or not mask.all():
                raise ConfigError(
                    "features",
                    "caption",
                    f"sub-envs of {self.env} report no info['caption']",
                    source="AnnotateRisk",
                )
            captions = [str(c) for c in infos["caption"]]
        try:
            if self.features == "frames":
                frames = self.env.render() or ()
                emb = self.embedder.embed_images([np.asarray(f) for f in frames])
            else:
                emb = self.embedder.embed_texts(captions)
        except Exception:  # fail-soft: an embedding error costs one step's risk, not the run
            self.embed_errors += 1
            return failed_features(self.annotator, self.embedder, n), False
        return self.annotator.sanitise(emb), True

    def _annotate(self, obs: Any, infos: dict[str, Any]) -> None:
        check_risk_key_free(self.env, infos)
        feats, ok = self._features(obs, infos)
        risk = self.annotator.predict(feats) if ok else np.zeros(self.num_envs, dtype=np.float32)
        self._current = feats
        self._current_ok[:] = ok
        infos["risk"] = risk
        infos["_risk"] = self._all.copy()

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs (or those in ``options["reset_mask"]``); write ``info["risk"]``."""
        mask = None if options is None else options.get("reset_mask")
        if self._current is not None:
            self.annotator.pending.end_all(mask)  # an explicit reset ends those episodes
        obs, infos = self.env.reset(seed=seed, options=options)
        self._annotate(obs, infos)
        if mask is None:
            self._prev_dones[:] = False
        else:
            self._prev_dones[np.asarray(mask, dtype=bool)] = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the envs, learn from the step's costs, write ``info["risk"]``."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if self._current is None:
            raise gym.error.ResetNeeded("AnnotateRisk: call reset() before step()")
        dones = np.logical_or(terminations, truncations)
        if self._mode == AutoresetMode.NEXT_STEP:
            reset_steps = self._prev_dones
        else:
            reset_steps = np.zeros(self.num_envs, dtype=bool)
        costs, present = read_step_costs(
            infos,
            self.num_envs,
            dones,
            reset_steps,
            self._mode == AutoresetMode.SAME_STEP,
            source="vector.AnnotateRisk",
        )
        if not present.all():
            missing = np.flatnonzero(~present).tolist()
            raise missing_risk_cost_error(self.env, f"sub-envs {missing}")
        self.annotator.record(
            self._current,
            costs,
            np.asarray(terminations, dtype=bool),
            np.asarray(truncations, dtype=bool),
            self._current_ok & ~reset_steps,
        )
        self._annotate(obs, infos)
        self.annotator.episodes += int(dones.sum())
        self._prev_dones = dones
        return obs, rewards, terminations, truncations, infos

    # -- reporting -----------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """The ``risk/*`` metrics (see :class:`gymcurric.wrappers.risk.AnnotateRisk`)."""
        return risk_metrics(self.annotator, self.embed_errors)

    def modulation(self, **kwargs: Any) -> Any:
        """The Lagrange modulation of the predictions since the previous call."""
        return self.annotator.modulation(**kwargs)

    def state_dict(self) -> dict[str, Any]:
        """The head (weights, optimiser, generator, buffer), history and counters."""
        return risk_state_dict(self.annotator, self.embed_errors)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; call ``reset()`` afterwards."""
        self.embed_errors = load_risk_state(self.annotator, state)
        self._current = None
