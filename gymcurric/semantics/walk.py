"""Probe states from a random walk: captions of an env, labelled by the costs that follow.

The shaper checks its prompt sets at set-up on captions whose safety is known
(``ShapingConfig.probe_states`` / ``probe_unsafe``). :func:`probe_states_from_walk` makes them
from the env itself: it walks the env with seeded random actions, keeps each state's
``info["caption"]``, and labels a state unsafe when a cost (``info["cost"] > 0``) comes within
``horizon`` steps of its episode, its own step included.

Example::

    walk = probe_states_from_walk(gym.make("gymcurric/HazardNav-v0"), steps=2_000, horizon=10)
    shaper = Shaper(ShapingConfig(**walk.shaping_kwargs()), load_embedder(None))
    shaper.probe_auc  # warned at set-up if within 0.05 of 0.5
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from gymcurric._checks import check_int, shown
from gymcurric.errors import ConfigError
from gymcurric.safety.costs import check_cost_values

__all__ = ["ProbeWalk", "probe_states_from_walk"]

_SOURCE = "probe_states_from_walk"


@dataclass(frozen=True)
class ProbeWalk:
    """The states of a random walk and their known safety (:func:`probe_states_from_walk`).

    Attributes:
        captions: each step's ``info["caption"]``, in walk order.
        unsafe_now: per caption, whether that step's cost was positive.
        unsafe_soon: per caption, whether a positive cost came within ``horizon`` steps of its
            episode, its own step included (the label :meth:`shaping_kwargs` gives the shaper).
        episodes: how many episodes the walk recorded steps of (the last one may be cut
            short; a walk whose last step ends an episode counts none after it).
        horizon: the "soon" window, in steps.
        seed: the walk's seed.
        hold: how many steps each random action was held.
    """

    captions: tuple[str, ...]
    unsafe_now: tuple[bool, ...]
    unsafe_soon: tuple[bool, ...]
    episodes: int
    horizon: int
    seed: int
    hold: int

    def shaping_kwargs(self) -> dict[str, tuple[Any, ...]]:
        """``probe_states`` and ``probe_unsafe`` (the "soon" labels) for :class:`ShapingConfig`.

        ``ShapingConfig`` refuses a probe without both kinds of state: a walk that met no
        cost (or nothing else) needs more ``steps`` or another ``seed``.
        """
        return {"probe_states": self.captions, "probe_unsafe": self.unsafe_soon}


def probe_states_from_walk(
    env: Any, steps: int = 5_000, horizon: int = 10, seed: int = 0, hold: int = 10
) -> ProbeWalk:
    """Walk ``env`` with seeded random actions; its captions labelled by the costs that follow.

    Each random action is held ``hold`` steps, so the agent travels and meets hazards rather
    than jittering in place. A state is the one a step returns: its ``info["caption"]`` and that
    step's ``info["cost"]`` (HazardNav and Safety-Gymnasium charge the state stepped into). The
    env is reset with ``seed`` first and with ``seed + k`` at the start of its ``k``-th later
    episode; it is not closed. The same env and seed give the same walk. A reset's state is not
    recorded, even where the reset info carries a caption (HazardNav's does): no step's cost
    comes with it. An episode ends at termination or truncation alike; no label looks past its
    end, so the last states of a truncated episode count only the costs seen before the cut.

    Actions: a bounded float ``Box`` draws ``uniform(low, high)`` from
    ``np.random.default_rng(seed)``, rounded to float32 and cast to the space's dtype; any other
    space samples from a private copy of itself, seeded from that generator (the env's own space
    is left alone).

    Args:
        env: a Gymnasium env whose step info has ``"caption"`` (a non-empty str) and ``"cost"``
            (a real number); a single env, not a vector env.
        steps: how many steps (states) to record, >= 1.
        horizon: a state is unsafe "soon" when a cost comes within this many steps of its
            episode, its own included (1: the same as "now"); >= 1. Match the risk head's
            horizon, or how far ahead the shaping should warn.
        seed: seeds the actions and the resets, >= 0.
        hold: steps each random action is held, >= 1.

    Returns:
        A :class:`ProbeWalk`; ``ShapingConfig(..., **walk.shaping_kwargs())`` checks the prompt
        sets on it at set-up.

    Raises:
        ConfigError: ``env`` is a vector env (Gymnasium's or SB3's, naming it);
            ``steps``, ``horizon``, ``seed`` or ``hold`` out of range; the env's step
            info lacks ``"caption"`` or ``"cost"`` (naming the env id and the key), or holds a
            caption that is not a non-empty str or a cost that is not a finite real number.

    Examples:
        >>> import gymnasium as gym
        >>> import gymcurric
        >>> env = gym.make("gymcurric/HazardNav-v0")
        >>> walk = probe_states_from_walk(env, steps=300, horizon=5, seed=1)
        >>> len(walk.captions), sum(walk.unsafe_now) <= sum(walk.unsafe_soon)
        (300, True)
        >>> walk == probe_states_from_walk(env, steps=300, horizon=5, seed=1)
        True
    """
    _refuse_vector_env(env)
    check_int("steps", steps, source=_SOURCE, allow_numpy=True)
    check_int("horizon", horizon, source=_SOURCE, allow_numpy=True)
    check_int("seed", seed, minimum=0, source=_SOURCE, allow_numpy=True)
    check_int("hold", hold, source=_SOURCE, allow_numpy=True)
    steps, horizon, seed, hold = int(steps), int(horizon), int(seed), int(hold)
    rng = np.random.default_rng(seed)
    draw = _action_sampler(getattr(env, "action_space", None), rng)
    captions: list[str] = []
    costs, episode = np.zeros(steps), np.zeros(steps, dtype=np.int64)
    env.reset(seed=seed)
    ep, action = 0, None
    for k in range(steps):
        if k % hold == 0:
            action = draw()
        _, _, terminated, truncated, info = env.step(action)
        captions.append(_caption(env, info))
        costs[k], episode[k] = _cost(env, info), ep
        if terminated or truncated:
            ep += 1
            env.reset(seed=seed + ep)
    now = costs > 0
    soon = now.copy()
    for j in range(1, min(horizon, steps)):  # any cost in [k, k + horizon) of the same episode
        same = episode[j:] == episode[:-j]
        soon[:-j] |= now[j:] & same
    return ProbeWalk(
        captions=tuple(captions),
        unsafe_now=tuple(bool(u) for u in now),
        unsafe_soon=tuple(bool(u) for u in soon),
        episodes=int(episode[-1]) + 1,  # with a step recorded: not the one a last reset began
        horizon=horizon,
        seed=seed,
        hold=hold,
    )


def _action_sampler(space: Any, rng: np.random.Generator) -> Any:
    """A function drawing one random action of ``space`` from ``rng``."""
    if not isinstance(space, spaces.Space):
        raise ConfigError(
            "env.action_space", shown(space), "expected a gymnasium Space", source=_SOURCE
        )
    if (
        isinstance(space, spaces.Box)
        and np.issubdtype(space.dtype, np.floating)
        and space.is_bounded("both")
    ):
        low, high, dtype = space.low, space.high, space.dtype

        def box() -> npt.NDArray[Any]:
            # float32 first: the walk the semantic-safety study recorded (benchmarks/
            # _semantic_setup.py) rounded actions so, float64 spaces included
            return rng.uniform(low, high).astype(np.float32).astype(dtype)

        return box
    private = copy.deepcopy(space)
    private.seed(int(rng.integers(2**31)))
    return private.sample


def _refuse_vector_env(env: Any) -> None:
    """A vector env (Gymnasium's or SB3's) has a caption per sub-env: the walk steps one env."""
    if isinstance(env, VectorEnv) or (
        hasattr(env, "num_envs") and hasattr(env, "step_wait")  # SB3's VecEnv
    ):
        raise ConfigError(
            "env",
            _env_id(env),
            f"a vector env of {shown(getattr(env, 'num_envs', None))} sub-envs; the probe walk "
            "steps a single env, whose info['caption'] is one str: pass one sub-env "
            "(gym.make(...), not gym.make_vec)",
            source=_SOURCE,
        )


def _env_id(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return str(getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__)


def _missing(env: Any, key: str, info: Any) -> ConfigError:
    keys = sorted(map(str, info)) if isinstance(info, dict) else type(info).__name__
    return ConfigError(
        "env",
        _env_id(env),
        f"its step info has no {key!r} (keys: {shown(keys)}); the probe walk needs "
        "info['caption'] and info['cost'] on every step",
        source=_SOURCE,
    )


def _caption(env: Any, info: Any) -> str:
    if not isinstance(info, dict) or "caption" not in info:
        raise _missing(env, "caption", info)
    caption = info["caption"]
    if not isinstance(caption, str) or not caption.strip():
        raise ConfigError(
            "info['caption']",
            shown(caption),
            f"expected a non-empty str from {_env_id(env)}",
            source=_SOURCE,
        )
    return caption


def _cost(env: Any, info: dict[str, Any]) -> float:
    if "cost" not in info:
        raise _missing(env, "cost", info)
    value = info["cost"]
    check_cost_values(value, "info['cost']", source=_SOURCE)
    try:
        cost = float(value)
    except (TypeError, ValueError):
        cost = math.nan
    if not math.isfinite(cost):
        raise ConfigError(
            "info['cost']",
            shown(value),
            f"expected a finite real number from {_env_id(env)}",
            source=_SOURCE,
        )
    return cost
