"""Fill a :class:`~gymcurric.replay.ring.ReplayRing` from a Gymnasium vector env.

:class:`RecordToRing` is a ``VectorWrapper``: every ``step`` writes one ring row for all sub-envs
(the step taken from the previous observations), in both autoreset modes:

* ``SAME_STEP``: a sub-env that ends returns its reset observation; the true final observation
  (``info["final_obs"]``) goes to the ring's side store, so ``sample_transitions`` returns it as
  ``next_obs``, and the next row gets ``is_first``.
* ``NEXT_STEP`` (Gymnasium's default): the final observation is returned by the ending step and
  becomes its own row; the following step is a *reset step* whose action is ignored by the env
  and whose reward is 0. That row is written as it happened (final observation, the ignored
  action, reward 0, cost 0, ``continue_`` 1, ``is_first`` False), and the row after it (the reset
  observation) has ``is_first``. The transition out of the final-observation row has no
  successor and is never sampled; sequences see the extra row, as DreamerV3's layout does.

Costs come from ``info["cost"]`` (``final_info["cost"]`` for sub-envs that ended under
``SAME_STEP``; 0 where absent, e.g. on reset steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gymcurric.errors import ConfigError
from gymcurric.replay._checks import as_tensor_like, copy_in
from gymcurric.replay.ring import ReplayRing
from gymcurric.safety.costs import read_step_costs

__all__ = ["RecordToRing"]

ExtraFn = Callable[[Any, Any, dict[str, Any]], dict[str, Any]]


class RecordToRing(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Write every step of a Gymnasium vector env into a :class:`ReplayRing`.

    Observations, rewards, terminations and truncations pass through unchanged; the ring gets
    one row per ``step``: ``(o_t, a_t, r_t, cost_t, continue_t, is_first_t)`` where ``o_t`` is
    the observation the actions were chosen from. See the module docstring for how each
    autoreset mode is laid out. ``reset()`` without a ``reset_mask`` starts new episodes in every
    sub-env (the next row has ``is_first``). ``DISABLED`` autoreset is refused.

    Info keys written: none.

    Examples:
        >>> import gymnasium as gym
        >>> from gymcurric.replay import ReplayRing, RecordToRing
        >>> envs = gym.make_vec("CartPole-v1", num_envs=2)
        >>> ring = ReplayRing.from_spaces(100, 2, envs.single_observation_space,
        ...                               envs.single_action_space)
        >>> envs = RecordToRing(envs, ring)
        >>> _ = envs.reset(seed=0)
        >>> for _ in range(30):
        ...     _ = envs.step(envs.action_space.sample())
        >>> ring.total_steps, bool(ring["is_first"][0].all())
        (30, True)
        >>> ring.check_invariants()
    """

    def __init__(
        self, env: VectorEnv, ring: ReplayRing, *, extra_fn: ExtraFn | None = None
    ) -> None:
        """Wrap ``env``.

        Args:
            env: a Gymnasium vector env (``SyncVectorEnv``, ``AsyncVectorEnv``, ...).
            ring: the ring to fill; ``num_envs`` and the observation shape must match.
            extra_fn: ``extra_fn(prev_obs, actions, infos) -> {user_field: [num_envs, ...]}``
                for the ring's user fields (required when the ring has any).
        """
        if not isinstance(ring, ReplayRing):
            raise ConfigError("ring", ring, "expected a ReplayRing", source="RecordToRing")
        if ring.num_envs != env.num_envs:
            raise ConfigError(
                "ring",
                ring,
                f"has num_envs={ring.num_envs} but the env has {env.num_envs}",
                source="RecordToRing",
            )
        if ring.user_fields and extra_fn is None:
            raise ConfigError(
                "extra_fn",
                None,
                f"the ring has user fields {list(ring.user_fields)}; pass extra_fn to fill them",
                source="RecordToRing",
            )
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ConfigError(
                "metadata['autoreset_mode']",
                mode,
                "RecordToRing supports NEXT_STEP and SAME_STEP autoreset",
                source="RecordToRing",
            )
        # no deepcopy: the kwargs hold the ring itself (possibly GBs); recorded by reference
        gym.utils.RecordConstructorArgs.__init__(
            self, ring=ring, extra_fn=extra_fn, _disable_deepcopy=True
        )
        VectorWrapper.__init__(self, env)
        self.ring = ring
        self._mode = mode
        self._extra_fn = extra_fn
        self._obs: Any = None
        self._obs_is_first = np.ones(self.num_envs, dtype=bool)
        self._prev_dones = np.zeros(self.num_envs, dtype=bool)
        self._no_resets = np.zeros(self.num_envs, dtype=bool)  # costs as the env reports them

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the envs; their next rows start new episodes."""
        if options is not None and options.get("reset_mask") is not None:
            raise ConfigError(
                "options['reset_mask']",
                options["reset_mask"],
                "partial resets are not supported by RecordToRing",
                source="RecordToRing",
            )
        obs, infos = self.env.reset(seed=seed, options=options)
        self._obs = obs
        self._obs_is_first[:] = True
        self._prev_dones[:] = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the envs and write the row of the step just taken."""
        if self._obs is None:
            raise ConfigError("step", actions, "call reset() before step()", source="RecordToRing")
        # o_t goes straight into the ring's next slot before the env may reuse its buffers
        # (copy=False vector envs); the row is committed by push_step below, in this call.
        # Non-blocking where the ring's copies are (CUDA stages pageable memory before the call
        # returns, so the env may reuse it at once; a pinned array is copied blocking)
        ring = self.ring
        spec = ring.specs["obs"]
        src = as_tensor_like(
            "obs", self._obs, (self.num_envs, *spec.shape), spec.dtype, ring.device
        )
        copy_in(ring.obs_slot(ring.head), src, non_blocking=ring.non_blocking)
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        term = np.asarray(terminations, dtype=bool)
        trunc = np.asarray(truncations, dtype=bool)
        dones = term | trunc
        same_step = self._mode == AutoresetMode.SAME_STEP
        final_obs = None
        if same_step and dones.any():
            final_obs = np.zeros((self.num_envs, *spec.shape), dtype=np.asarray(obs).dtype)
            fo = infos["final_obs"]
            for i in np.flatnonzero(dones):
                final_obs[i] = fo[i]
        extra = {} if self._extra_fn is None else self._extra_fn(self._obs, actions, infos)
        ring.push_step(
            None,
            actions,
            np.asarray(rewards),
            terminated=term,
            truncated=trunc,
            cost=read_step_costs(
                infos, self.num_envs, dones, self._no_resets, same_step, source="RecordToRing"
            )[0],
            is_first=self._obs_is_first.copy(),
            final_obs=final_obs,
            **extra,
        )
        if same_step:
            self._obs_is_first = dones.copy()
        else:
            # the next observation is a reset observation where this was a reset step
            self._obs_is_first = self._prev_dones.copy()
        self._prev_dones = dones
        self._obs = obs
        return obs, rewards, terminations, truncations, infos
