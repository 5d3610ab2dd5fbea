"""Vector twin of :class:`gymcurric.wrappers.AugmentStateSaute` for Gymnasium vector envs.

The safety state of every sub-env is one entry of a numpy array, updated from the vector
``info["cost"]`` (see :func:`gymcurric.wrappers.vector.read_step_costs` for how costs line up
with rewards in each autoreset mode). Where a sub-env's episode ends depends on
``env.metadata["autoreset_mode"]``:

* ``NEXT_STEP``: the reset step (reward 0) starts the new episode with ``z = 1``; its reward is
  left as it is.
* ``SAME_STEP``: the ending step's reward uses the final ``z``; the returned observation is the
  new episode's (``z = 1``) while ``info["final_obs"]`` gets the final ``z``, so bootstrapping
  from it sees the spent budget.
* ``DISABLED``: ``reset(options={"reset_mask": ...})`` restores ``z = 1`` for those sub-envs.

The results equal those of the single-env wrapper applied inside every sub-env (tested).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from gymcurric._deprecated import alias_getattr
from gymcurric.safety.costs import NonFinitePolicy
from gymcurric.wrappers.cost import cost_guard
from gymcurric.wrappers.saute import (
    SAUTE_INFO_KEY,
    SAUTE_OBS_KEY,
    SauteSettings,
    augment_obs,
    augment_space,
    check_saute_key_free,
    no_cost_error,
    spend_budget,
)
from gymcurric.wrappers.vector.cost import AutoresetSteps

__all__ = ["AugmentStateSaute"]


class AugmentStateSaute(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Sauté RL state augmentation for every sub-env of a vector env.

    Per sub-env exactly :class:`gymcurric.wrappers.AugmentStateSaute`: the safety state ``z`` (1 at
    reset) falls by ``info["cost"] / b`` each step and is divided by ``saute_gamma``; while
    ``z <= 0`` the reward is ``unsafe_reward``. Observations get ``z`` as their last coordinate
    (1-D ``Box``) or as the ``"saute_state"`` key (``Dict``), clipped to ``[-1, saute_gamma^-T]``
    (``info["saute_state"]`` and the rewards use the unclipped ``z``). Costs come from the vector
    ``info["cost"]``; a step where a sub-env reports none raises
    :class:`~gymcurric.errors.ConfigError` (wrap the env in
    :class:`gymcurric.wrappers.vector.AnnotateCost` first). NaN/Inf costs are replaced by
    ``nonfinite_value`` and counted in :attr:`nonfinite_count` (warned once), or raise with
    ``nonfinite="raise"``, as in the vector ``AnnotateCost``.

    Info keys written: ``saute_state`` (float64 array, all-True ``_saute_state`` mask): per
    sub-env the ``z`` of the transition just returned (for a sub-env that ended under
    ``SAME_STEP``, its final ``z``; at reset 1.0).

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> envs = AugmentStateSaute(gym.make_vec("gymcurric/HazardGrid-v0", num_envs=2),
        ...                    safety_budget=3.0, saute_gamma=1.0, max_episode_steps=100)
        >>> obs, info = envs.reset(seed=0)
        >>> obs.shape, obs[:, -1].tolist(), info["saute_state"].tolist()
        ((2, 30), [1.0, 1.0], [1.0, 1.0])
        >>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> bool((obs[:, -1] == 1.0 - info["cost"] / 3.0).all())
        True
        >>> envs.close()
    """

    def __init__(
        self,
        env: VectorEnv,
        safety_budget: float,
        *,
        saute_gamma: float = 0.999,
        max_episode_steps: int | None = None,
        unsafe_reward: float = -1.0,
        nonfinite: NonFinitePolicy = "warn",
        nonfinite_value: float = 0.0,
    ) -> None:
        """Wrap ``env``.

        Args:
            env: a vector env whose steps report ``info["cost"]``.
            safety_budget: ``d``, the episode cost budget (> 0).
            saute_gamma: ``gamma_s`` in (0, 1].
            max_episode_steps: the horizon ``T``; default the env spec's
                ``max_episode_steps``.
            unsafe_reward: the reward once the budget is spent.
            nonfinite: ``"warn"``, ``"ignore"`` or ``"raise"`` for a NaN/Inf cost (as in
                ``AnnotateCost``).
            nonfinite_value: the replacement for a non-finite cost.
        """
        src = "vector.AugmentStateSaute"
        saute = SauteSettings.checked(
            env, safety_budget, saute_gamma, max_episode_steps, unsafe_reward, source=src
        )
        self._guard = cost_guard(nonfinite, nonfinite_value, f"{src}({env})")
        gym.utils.RecordConstructorArgs.__init__(
            self, **saute.arguments, nonfinite=nonfinite, nonfinite_value=nonfinite_value
        )
        VectorWrapper.__init__(self, env)
        self.safety_budget = saute.safety_budget
        self.saute_gamma = saute.saute_gamma
        self.max_episode_steps = saute.max_episode_steps
        self.unsafe_reward = saute.unsafe_reward
        self.step_budget = saute.step_budget
        self._z_bounds = saute.z_bounds
        self.single_observation_space = augment_space(
            env.single_observation_space, self._z_bounds, src
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._steps = AutoresetSteps(env)
        #: Per sub-env safety state ``z`` of the episode it is in.
        self.z: npt.NDArray[np.float64] = np.ones(self.num_envs)

    @property
    def nonfinite_count(self) -> int:
        """How many non-finite costs were replaced so far."""
        return self._guard.count

    def _obs(self, obs: Any, z: npt.NDArray[np.float64]) -> Any:
        space = self.single_observation_space
        z = np.clip(z, *self._z_bounds)
        if isinstance(space, spaces.Dict):
            return {**obs, SAUTE_OBS_KEY: z[:, None].astype(np.float32)}
        assert isinstance(space, spaces.Box)
        flat = np.asarray(obs, space.dtype).reshape(self.num_envs, -1)
        return np.concatenate([flat, z[:, None].astype(space.dtype)], axis=1)

    def _write(self, infos: dict[str, Any], z: npt.NDArray[np.float64]) -> None:
        check_saute_key_free(infos, self.env, "vector.AugmentStateSaute")
        infos[SAUTE_INFO_KEY] = z.copy()
        infos[f"_{SAUTE_INFO_KEY}"] = np.ones(self.num_envs, dtype=bool)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs (or those in ``options["reset_mask"]``) and their budgets."""
        mask = None if options is None else options.get("reset_mask")  # the env pops it
        resets = np.ones(self.num_envs, bool) if mask is None else np.asarray(mask, bool).copy()
        obs, infos = self.env.reset(seed=seed, options=options)
        self.z[resets] = 1.0
        self._steps.reset(resets)
        self._write(infos, self.z)
        return self._obs(obs, self.z), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step; spend each sub-env's cost; replace rewards of spent budgets."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        dones, reset_steps = self._steps.begin(terminations, truncations)
        costs, present = self._steps.costs(infos, dones, reset_steps, "vector.AugmentStateSaute")
        if not present.all():
            raise no_cost_error(
                f"sub-envs {np.flatnonzero(~present).tolist()}",
                "wrap the env in gymcurric.wrappers.vector.AnnotateCost(env, cost_fn=...) first",
                "vector.AugmentStateSaute.step",
            )
        costs = self._guard.array(costs, where="info['cost']")
        real = ~reset_steps
        self.z = np.where(
            real, spend_budget(self.z, costs, self.step_budget, self.saute_gamma), 1.0
        )
        rewards = np.where(real & (self.z <= 0.0), self.unsafe_reward, rewards)
        self._write(infos, self.z)  # the z of this transition (final z where one ended)
        if self._steps.same_step and dones.any():
            final = infos.get("final_obs")
            if final is not None:
                for i in np.flatnonzero(dones).tolist():
                    final[i] = augment_obs(
                        final[i], float(self.z[i]), self.single_observation_space
                    )
            self.z = np.where(dones, 1.0, self.z)  # the returned obs starts a new episode
        self._steps.end(dones)
        return self._obs(obs, self.z), rewards, terminations, truncations, infos


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    SauteBudget = AugmentStateSaute
else:
    __getattr__ = alias_getattr(__name__, "SauteBudget")
