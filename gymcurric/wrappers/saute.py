"""Sauté RL: the remaining safety budget as part of the state (:class:`AugmentStateSaute`).

Sauté RL (Sootla et al., "Sauté RL: Almost Surely Safe Reinforcement Learning Using State
Augmentation", ICML 2022) turns a constrained problem "expected episode cost ≤ d" into an
unconstrained one that any RL algorithm can solve: the observation carries a *safety state* z,
the share of the budget still available, and once the budget is spent the reward is replaced by
a fixed unsafe reward, so that a policy that overspends is never better than one that does not.

With budget ``d`` (``safety_budget``), discount ``gamma_s`` (``saute_gamma``) and horizon ``T``
(``max_episode_steps``), the budget normaliser is (as in OmniSafe's ``SauteAdapter``)::

    b = d · (1 - gamma_s^T) / ((1 - gamma_s) · T)

that is, ``d`` times the mean of ``gamma_s^t`` over the horizon: the budget expressed the way the
safety state discounts it (``b → d`` as ``gamma_s → 1``; 15.8 for d = 25, gamma_s = 0.999,
T = 1000). Then::

    z_0 = 1                         # the whole budget is available
    z_{t+1} = (z_t - c_t / b) / gamma_s  # c_t: this step's info["cost"]
    r'_t = r_t if z_{t+1} > 0 else unsafe_reward

``z`` is normalised: 1 is the full budget, 0 (or below) a spent one. Dividing by ``gamma_s`` keeps
z in units of the remaining discounted budget (z grows slowly while no cost is paid, up to
``gamma_s^-T`` after ``T`` cost-free steps). With ``gamma_s = 1``, ``b = d`` and z is plainly
``1 - (cost so far) / d``. Once z ≤ 0 it stays there (costs are ≥ 0).

The *observed* z is clipped to ``[-1, gamma_s^-T]``, the observation space's bounds for it: the
upper bound is the most z can reach within the horizon, and below -1 (the budget overspent by
as much again) the reward already says all there is to say, while unbounded negative inputs
would hurt observation normalisation. ``info["saute_state"]`` and the reward use the unclipped
z.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, SupportsFloat, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gymcurric._checks import check_int, finite_reason, is_finite_number, shown
from gymcurric._deprecated import alias_getattr
from gymcurric.errors import ConfigError, InfoKeyConflictError
from gymcurric.safety.costs import NonFinitePolicy
from gymcurric.wrappers.cost import cost_guard

__all__ = [
    "SAUTE_INFO_KEY",
    "AugmentStateSaute",
    "SauteSettings",
    "augment_space",
    "saute_step_budget",
]

Z = TypeVar("Z", float, np.ndarray)

#: Info key holding the safety state z after the step (and at reset).
SAUTE_INFO_KEY = "saute_state"
#: Key added to a ``Dict`` observation space.
SAUTE_OBS_KEY = "saute_state"


def saute_step_budget(safety_budget: float, saute_gamma: float, max_episode_steps: int) -> float:
    """The budget normaliser ``b = d·(1 - gamma^T) / ((1 - gamma)·T)`` (``d`` when ``gamma = 1``).

    Examples:
        >>> round(saute_step_budget(25.0, 0.999, 1000), 3)
        15.808
        >>> saute_step_budget(25.0, 1.0, 1000)
        25.0
    """
    if saute_gamma == 1.0:
        return float(safety_budget)
    return (
        safety_budget
        * (1.0 - saute_gamma**max_episode_steps)
        / ((1.0 - saute_gamma) * max_episode_steps)
    )


def check_saute_args(
    safety_budget: Any, saute_gamma: Any, max_episode_steps: Any, unsafe_reward: Any, src: str
) -> None:
    """Validate the Sauté parameters (a :class:`~gymcurric.errors.ConfigError` from ``src``)."""

    def number(name: str, v: Any) -> float:
        if not is_finite_number(v):  # an int too large for a float included
            reason = finite_reason(v, "expected a finite number")
            raise ConfigError(name, shown(v), reason, source=src)
        return float(v)

    if number("safety_budget", safety_budget) <= 0:
        raise ConfigError("safety_budget", safety_budget, "expected a number > 0", source=src)
    g = number("saute_gamma", saute_gamma)
    if not 0 < g <= 1:
        raise ConfigError("saute_gamma", saute_gamma, "expected a number in (0, 1]", source=src)
    number("unsafe_reward", unsafe_reward)
    check_int(
        "max_episode_steps",
        max_episode_steps,
        source=src,
        reason="expected an integer >= 1 (the horizon T; the env's spec has none)",
    )


def z_bounds(saute_gamma: float, max_episode_steps: int) -> tuple[float, float]:
    """Bounds of the observed safety state: ``(-1, gamma_s^-T)``."""
    return -1.0, float(saute_gamma ** (-max_episode_steps))


@dataclass(frozen=True)
class SauteSettings:
    """The checked Sauté parameters, shared by :class:`AugmentStateSaute` and its vector twin.

    Build it with :meth:`checked`. The fields are the values the wrappers compute with (floats,
    the horizon an int); :attr:`arguments` keeps the arguments as given (``max_episode_steps``
    resolved from the env's spec), which is what the wrappers record. The cost guard's
    ``nonfinite`` arguments are not part of it (:func:`gymcurric.wrappers.cost.cost_guard`).

    Examples:
        >>> import gymnasium as gym
        >>> saute = SauteSettings.checked(gym.make("CartPole-v1"), 25, 0.999, None, -1.0)
        >>> saute.max_episode_steps, round(saute.step_budget, 3), saute.arguments["safety_budget"]
        (500, 19.681, 25)
    """

    safety_budget: float
    saute_gamma: float
    max_episode_steps: int
    unsafe_reward: float
    #: ``b``, the per-step budget (:func:`saute_step_budget`).
    step_budget: float
    #: The bounds of the observed safety state (:func:`z_bounds`).
    z_bounds: tuple[float, float]
    #: The arguments as given, for ``RecordConstructorArgs``.
    arguments: dict[str, Any] = field(compare=False, repr=False)

    @classmethod
    def checked(
        cls,
        env: Any,
        safety_budget: float,
        saute_gamma: float,
        max_episode_steps: int | None,
        unsafe_reward: float,
        *,
        source: str = "AugmentStateSaute",
    ) -> SauteSettings:
        """Check the Sauté arguments of a wrapper of ``env`` (single-env or vector).

        ``max_episode_steps=None`` means the horizon of ``env.spec``; without one, or with any
        argument out of range, :class:`~gymcurric.errors.ConfigError` from ``source``.
        """
        if max_episode_steps is None:
            max_episode_steps = getattr(getattr(env, "spec", None), "max_episode_steps", None)
        check_saute_args(safety_budget, saute_gamma, max_episode_steps, unsafe_reward, source)
        assert max_episode_steps is not None
        arguments = {
            "safety_budget": safety_budget,
            "saute_gamma": saute_gamma,
            "max_episode_steps": max_episode_steps,
            "unsafe_reward": unsafe_reward,
        }
        gamma, horizon = float(saute_gamma), int(max_episode_steps)
        return cls(
            safety_budget=float(safety_budget),
            saute_gamma=gamma,
            max_episode_steps=horizon,
            unsafe_reward=float(unsafe_reward),
            step_budget=saute_step_budget(float(safety_budget), gamma, horizon),
            z_bounds=z_bounds(gamma, horizon),
            arguments=arguments,
        )


def spend_budget(z: Z, cost: Z, step_budget: float, saute_gamma: float) -> Z:
    """The safety state after a step that cost ``cost``: ``(z - cost / b) / gamma_s``.

    ``z`` and ``cost`` are floats (one env) or arrays (one entry per sub-env).

    Examples:
        >>> spend_budget(1.0, 0.5, 2.0, 1.0)
        0.75
    """
    return (z - cost / step_budget) / saute_gamma


def no_cost_error(reporter: str, fix: str, source: str) -> ConfigError:
    """The error of a Sauté wrapper when ``reporter`` reported no ``info["cost"]`` this step."""
    return ConfigError(
        "info['cost']", None, f"{reporter} reported no cost this step; {fix}", source=source
    )


def check_saute_key_free(info: dict[str, Any], env: Any, owner: str, where: str = "") -> None:
    """Raise :class:`~gymcurric.errors.InfoKeyConflictError` if ``env`` already set the key.

    ``owner`` is the wrapper that would write ``info["saute_state"]``, ``where`` (if given) the
    call, both named in the message.
    """
    if SAUTE_INFO_KEY in info:
        at = f" at {where}" if where else ""
        raise InfoKeyConflictError(
            f"{env} already sets info[{SAUTE_INFO_KEY!r}]{at}; {owner} will not overwrite info "
            f"key {SAUTE_INFO_KEY!r}"
        )


def augment_space(space: gym.Space[Any], bounds: tuple[float, float], src: str) -> gym.Space[Any]:
    """``space`` plus the safety state: one more coordinate of a 1-D Box, or a Dict key."""
    lo, hi = bounds
    z = spaces.Box(lo, hi, (1,), np.float32)
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        dtype = space.dtype if np.issubdtype(space.dtype, np.floating) else np.float32
        low = np.concatenate([space.low.astype(dtype), np.array([lo], dtype)])
        high = np.concatenate([space.high.astype(dtype), np.array([hi], dtype)])
        return spaces.Box(low, high, dtype=dtype)
    if isinstance(space, spaces.Dict):
        if SAUTE_OBS_KEY in space.spaces:
            raise ConfigError(
                "env.observation_space",
                space,
                f"already has a key {SAUTE_OBS_KEY!r}",
                source=src,
            )
        return spaces.Dict({**space.spaces, SAUTE_OBS_KEY: z})
    raise ConfigError(
        "env.observation_space",
        space,
        "expected a 1-D Box (the safety state is appended) or a Dict (a key is added); "
        "flatten other observations first (gymnasium.wrappers.FlattenObservation)",
        source=src,
    )


def augment_obs(obs: Any, z: float, space: gym.Space[Any]) -> Any:
    """One observation of ``space`` (the augmented space) with safety state ``z`` (clipped)."""
    if isinstance(space, spaces.Dict):
        box = space.spaces[SAUTE_OBS_KEY]
        assert isinstance(box, spaces.Box)
        return {**obs, SAUTE_OBS_KEY: np.clip(np.array([z], np.float32), box.low, box.high)}
    assert isinstance(space, spaces.Box)
    zz = np.clip(np.array([z], space.dtype), space.low[-1:], space.high[-1:])
    return np.concatenate([np.asarray(obs, space.dtype).ravel(), zz])


class AugmentStateSaute(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Append the remaining safety budget to the observation; unsafe reward once it is spent.

    The Sauté RL state augmentation (see the module docstring for the formulas): the safety
    state ``z`` starts at 1 at every reset, falls by ``info["cost"] / b`` each step (then is
    divided by ``saute_gamma``), and while ``z <= 0`` the reward is replaced by
    ``unsafe_reward``. Costs are read from ``info["cost"]`` (wrap the env in
    :class:`~gymcurric.wrappers.AnnotateCost` first if it reports none; a step without it raises
    :class:`~gymcurric.errors.ConfigError`). Terminations are unchanged. A NaN/Inf cost is
    handled as :class:`~gymcurric.wrappers.AnnotateCost` does: replaced by ``nonfinite_value``
    and counted in :attr:`nonfinite_count` (warned once), or an error with
    ``nonfinite="raise"``; it never reaches ``z`` or the observation.

    Observation: a 1-D ``Box`` gets one more float coordinate (last) holding ``z`` clipped to
    ``[-1, saute_gamma^-T]``; a ``Dict`` gets the key ``"saute_state"`` (shape ``(1,)``, same
    bounds).

    Info keys written: ``saute_state`` (``z`` after the step, and 1.0 at reset). An env that
    already sets it raises :class:`~gymcurric.errors.InfoKeyConflictError`.

    Examples:
        >>> import gymnasium as gym
        >>> from gymcurric.wrappers import AnnotateCost
        >>> every_step = AnnotateCost(gym.make("CartPole-v1"), cost_fn=lambda o, a, i: 1.0)
        >>> env = AugmentStateSaute(every_step, safety_budget=2.0, saute_gamma=1.0)
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, float(obs[-1]), info["saute_state"]
        ((5,), 1.0, 1.0)
        >>> for _ in range(3):
        ...     obs, reward, terminated, truncated, info = env.step(0)
        ...     print(info["saute_state"], float(obs[-1]), reward)
        0.5 0.5 1.0
        0.0 0.0 -1.0
        -0.5 -0.5 -1.0
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
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
            env: an env whose steps report ``info["cost"]``.
            safety_budget: ``d``, the episode cost budget (> 0), e.g. Safety-Gymnasium's 25.
            saute_gamma: ``gamma_s`` in (0, 1]; OmniSafe's default 0.999.
            max_episode_steps: the horizon ``T``; default ``env.spec.max_episode_steps``.
            unsafe_reward: the reward once the budget is spent; OmniSafe's default -1.0.
            nonfinite: what to do with a NaN/Inf cost, as in ``AnnotateCost``: ``"warn"``
                (replace, warn once), ``"ignore"`` (replace silently) or ``"raise"``.
            nonfinite_value: the replacement for a non-finite cost.
        """
        saute = SauteSettings.checked(
            env, safety_budget, saute_gamma, max_episode_steps, unsafe_reward
        )
        self._guard = cost_guard(nonfinite, nonfinite_value, f"AugmentStateSaute({env})")
        gym.utils.RecordConstructorArgs.__init__(
            self, **saute.arguments, nonfinite=nonfinite, nonfinite_value=nonfinite_value
        )
        gym.Wrapper.__init__(self, env)
        self.safety_budget = saute.safety_budget
        self.saute_gamma = saute.saute_gamma
        self.max_episode_steps = saute.max_episode_steps
        self.unsafe_reward = saute.unsafe_reward
        #: ``b``, the per-step budget.
        self.step_budget = saute.step_budget
        self.observation_space = augment_space(
            env.observation_space, saute.z_bounds, "AugmentStateSaute"
        )
        #: The safety state ``z`` (1.0 = the whole budget left).
        self.z = 1.0

    @property
    def nonfinite_count(self) -> int:
        """How many non-finite costs were replaced so far."""
        return self._guard.count

    def _write(self, info: dict[str, Any], where: str) -> None:
        check_saute_key_free(info, self.env, "AugmentStateSaute", where)
        info[SAUTE_INFO_KEY] = self.z

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and the budget (``z = 1``)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.z = 1.0
        self._write(info, "reset")
        return augment_obs(obs, self.z, self.observation_space), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; spend ``info["cost"]`` from the budget; replace the reward once it is spent."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        cost = info.get("cost")
        if cost is None:
            raise no_cost_error(
                f"{self.env}",
                "wrap it in gymcurric.wrappers.AnnotateCost(env, cost_fn=...) first",
                "AugmentStateSaute.step",
            )
        cost = self._guard.scalar(cost, where="info['cost']")
        self.z = spend_budget(self.z, cost, self.step_budget, self.saute_gamma)
        if self.z <= 0.0:
            reward = self.unsafe_reward
        self._write(info, "step")
        return augment_obs(obs, self.z, self.observation_space), reward, terminated, truncated, info


# The old names, deprecated (issue 22): type checkers see plain aliases; at run time an
# access warns and returns the renamed class (gymcurric._deprecated).
if TYPE_CHECKING:
    SauteBudget = AugmentStateSaute
else:
    __getattr__ = alias_getattr(__name__, "SauteBudget")
