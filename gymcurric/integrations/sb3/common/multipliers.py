"""Lagrange multipliers for constrained RL: Adam / gradient ascent (OmniSafe) and PID (CPPOPID).

Each multiplier turns the mean episode cost ``J_c`` of recent episodes and the cost limit ``d``
into a penalty coefficient ``λ ≥ 0``, once per rollout. They hold their whole state (λ, the
optimiser's moments, the PID integrator and EMAs) in ``state_dict()``, which contains only
tensors, floats and lists, so SB3's ``save``/``load`` (``torch.load(weights_only=True)``)
restores them exactly.

An optional ``lr_scale`` per update multiplies the step size (the learning rate for
:class:`LagrangeMultiplier`, the integral gain for :class:`PIDLagrangeMultiplier`); the risk hook
uses it to slow or speed the multiplier when a semantic risk annotation is present.

λ stays finite whatever ``J_c`` is. An update saturates ``J_c`` and ``J_c - d`` to
``±COST_CAP`` (1e6, far above any real episode cost, small enough that Adam's squared gradient
stays finite in float32: unsaturated, Adam froze λ for ``J_c`` of 1e30 and gave NaN from 1e39)
and skips a NaN ``J_c`` (λ and the optimiser state are left as they are). Both are counted
(:attr:`input_clipped`, :attr:`input_skipped`, saved in ``state_dict()``) and warned about once
per multiplier.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections import deque
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import torch as th

from gymcurric.errors import ConfigError, GymcurricWarning
from gymcurric.integrations.sb3.common.multiplier_checks import (
    MULTIPLIER_KWARGS,
    as_caller_error,
    check_count,
    check_finite,
    check_multiplier_kwargs,
)

__all__ = [
    "COST_CAP",
    "MULTIPLIER_KWARGS",
    "LagrangeMultiplier",
    "Multiplier",
    "MultiplierSet",
    "PIDLagrangeMultiplier",
    "make_multiplier",
    "pid_kwargs_per_update",
]


#: The cap on ``|J_c|`` and ``|J_c - d|`` in a multiplier update, and on the per-step cost the
#: Lagrangian algorithms store (``|cost| <= COST_CAP``); larger values are saturated and
#: counted. Episode costs of real tasks are in the tens to thousands.
COST_CAP = 1e6


class _InputSaturation:
    """Saturate the ``J_c`` fed to a multiplier to ``±COST_CAP``, refuse NaN; count and warn once.

    Args:
        source: the multiplier's name, for the warning.

    Examples:
        >>> import warnings
        >>> sat = _InputSaturation("doc")
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     sat(1e200), sat(float("nan")), sat(3.0)
        (1000000.0, None, 3.0)
        >>> sat.clipped, sat.skipped
        (1, 1)
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.clipped = 0
        self.skipped = 0
        self._warned = False

    def __call__(self, ep_cost: Any) -> float | None:
        """``ep_cost`` as a float within ``±COST_CAP``, or None for NaN (skip the update)."""
        jc = _as_float(ep_cost, self.source)
        if math.isnan(jc):
            self.skipped += 1
            self._warn("a NaN ep_cost (J_c) was received; the update was skipped")
            return None
        if abs(jc) > COST_CAP:
            self.clipped += 1
            self._warn(f"ep_cost (J_c) {jc!r} was saturated to ±{COST_CAP:g}")
            return math.copysign(COST_CAP, jc)
        return jc

    def _warn(self, what: str) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            f"{self.source}: {what} (counted in .input_clipped / .input_skipped, logged as "
            "train/lagrange_input_clipped / train/lagrange_input_skipped; warned once)",
            GymcurricWarning,
            stacklevel=4,
        )

    def state_dict(self) -> dict[str, int]:
        """The counters."""
        return {"input_clipped": self.clipped, "input_skipped": self.skipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters (0 for states saved before they existed)."""
        self.clipped = int(state.get("input_clipped", 0))
        self.skipped = int(state.get("input_skipped", 0))


def _as_float(value: Any, source: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError("ep_cost", value, "expected a real number", source=source) from None


def _saturate(value: float) -> float:
    return min(max(value, -COST_CAP), COST_CAP)


@runtime_checkable
class Multiplier(Protocol):
    """What the Lagrangian algorithms need from a multiplier."""

    @property
    def value(self) -> float:
        """The current λ (≥ 0)."""
        ...

    def update(
        self, ep_cost: float, cost_limit: float, *, lr: float | None = None, lr_scale: float = 1.0
    ) -> float:
        """Update λ from the mean episode cost and the limit; return the new λ."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly."""
        ...

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict`."""
        ...


class LagrangeMultiplier:
    """λ as a parameter trained by gradient descent on ``-λ·(J_c - d)``, clamped to ``[0, ub]``.

    This is OmniSafe's ``Lagrange`` (``omnisafe/common/lagrange.py``): with ``optimizer="adam"``
    (the default) the step is Adam's, about ``±lr`` per update whatever the size of the
    violation; ``optimizer="sgd"`` is plain gradient ascent on the dual,
    ``λ ← max(0, λ + lr·(J_c - d))``.

    Args:
        init: initial λ (≥ 0), 0.001 as OmniSafe.
        lr: the step size (≥ 0), 0.035 as OmniSafe; :meth:`update` may override it per call
            (a schedule evaluated by the algorithm).
        optimizer: ``"adam"`` or ``"sgd"``.
        upper_bound: optional cap on λ.

    ``J_c`` and ``J_c - d`` are saturated to ``±COST_CAP`` (1e6) and a NaN ``J_c`` skips the
    update, so λ stays finite for any input; both are counted in :attr:`input_clipped` and
    :attr:`input_skipped` (warned once).

    Examples:
        >>> lag = LagrangeMultiplier(init=0.0, lr=0.5, optimizer="sgd")
        >>> lag.update(ep_cost=30.0, cost_limit=25.0)
        2.5
        >>> lag.update(ep_cost=0.0, cost_limit=25.0)
        0.0
    """

    def __init__(
        self,
        init: float = 0.001,
        lr: float = 0.035,
        optimizer: Literal["adam", "sgd"] = "adam",
        upper_bound: float | None = None,
    ) -> None:
        src = "LagrangeMultiplier(...)"
        init = check_finite("lagrange_init", init, minimum=0.0, source=src)
        self.lr = check_finite("lagrange_lr", lr, minimum=0.0, source=src)
        if optimizer not in ("adam", "sgd"):
            raise ConfigError("optimizer", optimizer, "expected 'adam' or 'sgd'", source=src)
        self.upper_bound = (
            None
            if upper_bound is None
            else check_finite("upper_bound", upper_bound, minimum=0.0, source=src)
        )
        self.optimizer_name = optimizer
        self.param = th.nn.Parameter(th.tensor(init, dtype=th.float32))
        opt_cls = th.optim.Adam if optimizer == "adam" else th.optim.SGD
        self.optimizer: th.optim.Optimizer = opt_cls([self.param], lr=self.lr)
        self._input = _InputSaturation("LagrangeMultiplier")

    @property
    def input_clipped(self) -> int:
        """How many ``J_c`` were saturated to ``±COST_CAP``."""
        return self._input.clipped

    @property
    def input_skipped(self) -> int:
        """How many NaN ``J_c`` were refused (update skipped)."""
        return self._input.skipped

    @property
    def value(self) -> float:
        """The current λ."""
        return float(self.param.detach())

    def update(
        self, ep_cost: float, cost_limit: float, *, lr: float | None = None, lr_scale: float = 1.0
    ) -> float:
        """One optimiser step on the dual loss ``-λ·(J_c - d)``; return the new λ.

        Args:
            ep_cost: ``J_c``, the mean episode cost of recent episodes.
            cost_limit: ``d``.
            lr: step size for this update (default: the constructor's).
            lr_scale: multiplies the step size for this update (risk modulation).
        """
        src = "LagrangeMultiplier.update"
        d = check_finite("cost_limit", cost_limit, minimum=0.0, source=src)
        step = self.lr if lr is None else check_finite("lagrange_lr", lr, minimum=0.0, source=src)
        scale = check_finite("lr_scale", lr_scale, minimum=0.0, source=src)
        jc = self._input(ep_cost)
        if jc is None:  # NaN: refused, counted
            return self.value
        for group in self.optimizer.param_groups:
            group["lr"] = step * scale
        self.optimizer.zero_grad()
        loss = -self.param * _saturate(jc - d)  # OmniSafe compute_lambda_loss
        loss.backward()
        self.optimizer.step()
        with th.no_grad():
            self.param.clamp_(min=0.0, max=self.upper_bound)
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """λ and the optimiser state (tensors and numbers only)."""
        return {
            "lambda": self.param.detach().clone(),
            "optimizer": self.optimizer.state_dict(),
            **self._input.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore λ, the optimiser state and the input counters."""
        del strict
        with th.no_grad():
            self.param.copy_(th.as_tensor(state["lambda"], dtype=th.float32))
        self.optimizer.load_state_dict(state["optimizer"])
        self._input.load_state_dict(state)


class PIDLagrangeMultiplier:
    """PID Lagrangian multiplier as OmniSafe's ``PIDLagrangian`` (Stooke et al., 2020, CPPOPID).

    Per update with ``Δ = J_c - d``::

        I      = max(0, I + lr_scale·Ki·Δ)          (I starts at ``init``)
        P      = a_p·P + (1 - a_p)·Δ                 (EMA of the error)
        C_ema  = a_d·C_ema + (1 - a_d)·J_c           (EMA of the cost)
        D      = max(0, C_ema - C_ema[t - delay])    (rise of the cost EMA over ``delay`` updates)
        λ      = min(max(0, Kp·P + I + Kd·D), penalty_max)

    Args:
        kp: proportional gain (0.1).
        ki: integral gain (0.01).
        kd: derivative gain (0.01).
        init: initial integral term (0.001); λ is 0 until the first update, as in OmniSafe.
        d_delay: the delay of the derivative term, in updates (10).
        p_ema_alpha: EMA factor of the error for P (0.95).
        d_ema_alpha: EMA factor of the cost for D (0.95).
        penalty_max: cap on λ (100.0).

    ``J_c`` and ``Δ`` are saturated to ``±COST_CAP`` (1e6) and a NaN ``J_c`` skips the update
    (counted in :attr:`input_clipped` and :attr:`input_skipped`, warned once): a single absurd
    ``J_c`` would otherwise fill the integral for as long as it takes ordinary costs to drain it.

    The defaults are OmniSafe's, whose λ is updated once per epoch of 20,000 env steps. For
    other update sizes :func:`pid_kwargs_per_update` converts them so that every term keeps
    its time constant in env steps.

    Examples:
        >>> pid = PIDLagrangeMultiplier(kp=0.0, ki=0.1, kd=0.0, init=0.0)
        >>> pid.update(ep_cost=35.0, cost_limit=25.0)
        1.0
    """

    def __init__(
        self,
        kp: float = 0.1,
        ki: float = 0.01,
        kd: float = 0.01,
        init: float = 0.001,
        d_delay: int = 10,
        p_ema_alpha: float = 0.95,
        d_ema_alpha: float = 0.95,
        penalty_max: float = 100.0,
    ) -> None:
        src = "PIDLagrangeMultiplier(...)"
        self.kp = check_finite("kp", kp, minimum=0.0, source=src)
        self.ki = check_finite("ki", ki, minimum=0.0, source=src)
        self.kd = check_finite("kd", kd, minimum=0.0, source=src)
        init = check_finite("lagrange_init", init, minimum=0.0, source=src)
        self.d_delay = check_count("d_delay", d_delay, source=src)
        for name, a in (("p_ema_alpha", p_ema_alpha), ("d_ema_alpha", d_ema_alpha)):
            if not 0.0 <= check_finite(name, a, source=src) < 1.0:
                raise ConfigError(name, a, "expected a number in [0, 1)", source=src)
        self.p_ema_alpha = float(p_ema_alpha)
        self.d_ema_alpha = float(d_ema_alpha)
        self.penalty_max = check_finite("penalty_max", penalty_max, minimum=0.0, source=src)
        self.integral = init
        self.p_term = 0.0
        self.cost_ema = 0.0
        self.d_term = 0.0
        self.cost_history: deque[float] = deque([0.0], maxlen=self.d_delay)
        self._value = 0.0  # OmniSafe: the penalty is 0 until the first update
        self._input = _InputSaturation("PIDLagrangeMultiplier")

    @property
    def input_clipped(self) -> int:
        """How many ``J_c`` were saturated to ``±COST_CAP``."""
        return self._input.clipped

    @property
    def input_skipped(self) -> int:
        """How many NaN ``J_c`` were refused (update skipped)."""
        return self._input.skipped

    @property
    def value(self) -> float:
        """The current λ."""
        return self._value

    def update(
        self, ep_cost: float, cost_limit: float, *, lr: float | None = None, lr_scale: float = 1.0
    ) -> float:
        """One PID step; return the new λ (``lr`` is ignored: the gains set the step).

        Args:
            ep_cost: ``J_c``, the mean episode cost of recent episodes.
            cost_limit: ``d``.
            lr: unused (accepted so that every multiplier has the same signature).
            lr_scale: multiplies the integral step ``Ki·Δ`` for this update (risk modulation).
        """
        del lr
        src = "PIDLagrangeMultiplier.update"
        d = check_finite("cost_limit", cost_limit, minimum=0.0, source=src)
        scale = check_finite("lr_scale", lr_scale, minimum=0.0, source=src)
        jc = self._input(ep_cost)
        if jc is None:  # NaN: refused, counted
            return self._value
        delta = _saturate(jc - d)
        self.integral = max(0.0, self.integral + scale * self.ki * delta)
        a_p, a_d = self.p_ema_alpha, self.d_ema_alpha
        self.p_term = a_p * self.p_term + (1.0 - a_p) * delta
        self.cost_ema = a_d * self.cost_ema + (1.0 - a_d) * jc
        self.d_term = max(0.0, self.cost_ema - self.cost_history[0])
        self.cost_history.append(self.cost_ema)
        pid = self.kp * self.p_term + self.integral + self.kd * self.d_term
        self._value = min(max(0.0, pid), self.penalty_max)
        return self._value

    def state_dict(self) -> dict[str, Any]:
        """The integrator, the EMAs, the delay line, λ and the input counters."""
        return {
            "integral": self.integral,
            "p_term": self.p_term,
            "cost_ema": self.cost_ema,
            "d_term": self.d_term,
            "cost_history": list(self.cost_history),
            "lambda": self._value,
            **self._input.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict`."""
        del strict
        self.integral = float(state["integral"])
        self.p_term = float(state["p_term"])
        self.cost_ema = float(state["cost_ema"])
        self.d_term = float(state["d_term"])
        self.cost_history = deque((float(c) for c in state["cost_history"]), maxlen=self.d_delay)
        self._value = float(state["lambda"])
        self._input.load_state_dict(state)


def pid_kwargs_per_update(
    kwargs: dict[str, Any] | None, *, epoch_steps: int, update_steps: int
) -> dict[str, Any]:
    """:class:`PIDLagrangeMultiplier` arguments given per epoch, converted per update.

    OmniSafe's ``CPPOPID`` constants hold for one update of λ per epoch of ``epoch_steps`` env
    steps (20,000); an SB3 agent updates λ once per rollout of ``update_steps`` env steps
    (``n_steps * n_envs``). With ``r = update_steps / epoch_steps`` the integral gain becomes
    ``r·Ki``, each EMA factor ``a`` becomes ``a**r`` and the D delay ``delay / r`` updates
    (rounded, at least 1), so that the integral's rate, the EMAs' time constants and the
    delay are the same in env steps. Kp, Kd, ``init`` and ``penalty_max`` act on levels and
    are returned as given. ``ki``, the EMA factors and ``d_delay`` are always returned: left
    out, they take :class:`PIDLagrangeMultiplier`'s defaults before the conversion.

    Args:
        kwargs: the per-epoch arguments (any of ``kp``, ``ki``, ``kd``, ``init``, ``d_delay``,
            ``p_ema_alpha``, ``d_ema_alpha``, ``penalty_max``); None for all the defaults.
        epoch_steps: env steps per update that the constants were tuned for (> 0).
        update_steps: env steps per update here (> 0).

    Examples:
        >>> kw = pid_kwargs_per_update({"ki": 0.01}, epoch_steps=20_000, update_steps=2_000)
        >>> round(kw["ki"], 6), kw["d_delay"], round(kw["p_ema_alpha"] ** 10, 6)
        (0.001, 100, 0.95)
    """
    src = "pid_kwargs_per_update"
    epoch_steps, update_steps = (
        check_count(name, steps, source=src, reason="expected an int >= 1 (env steps)")
        for name, steps in (("epoch_steps", epoch_steps), ("update_steps", update_steps))
    )
    params = inspect.signature(PIDLagrangeMultiplier).parameters
    given = dict(kwargs or {})
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise ConfigError(
            "multiplier_kwargs", given, f"unknown PID arguments {unknown}", source=src
        )
    per_epoch = PIDLagrangeMultiplier(**given)  # checks every constant, fills the defaults
    r = update_steps / epoch_steps
    return given | {
        "ki": per_epoch.ki * r,
        "p_ema_alpha": per_epoch.p_ema_alpha**r,
        "d_ema_alpha": per_epoch.d_ema_alpha**r,
        "d_delay": max(1, round(per_epoch.d_delay / r)),
    }


class MultiplierSet:
    """One multiplier per constraint: ``K`` independent λ_k, each updated from its own ``J_c^k``.

    Each λ_k is a multiplier of the same kind and arguments (:func:`make_multiplier`), with its
    own state (Adam moments, PID integrator). :meth:`state_dict` holds the ``K`` states under
    ``"0"``, ``"1"``, ... (tensors, numbers and lists only, as each multiplier's).

    Args:
        n: the number of constraints ``K`` (≥ 1).
        kind: ``"adam"``, ``"sgd"`` or ``"pid"``.
        init: initial λ of every constraint.
        lr: step size (Adam/SGD).
        kwargs: extra constructor arguments of every multiplier.
        source: the caller its ``ConfigError`` names (an algorithm's class name); None:
            ``"MultiplierSet"``.

    Examples:
        >>> lams = MultiplierSet(2, "sgd", init=0.0, lr=0.5)
        >>> lams.update([30.0, 0.0], [25.0, 25.0]).tolist()
        [2.5, 0.0]
        >>> lams[0].value, len(lams)
        (2.5, 2)
    """

    def __init__(
        self,
        n: int,
        kind: str,
        *,
        init: float,
        lr: float,
        kwargs: dict[str, Any] | None = None,
        source: str | None = None,
    ) -> None:
        src = source or "MultiplierSet"
        n = check_count("n_costs", n, source=src)
        self.multipliers = [
            make_multiplier(kind, init=init, lr=lr, kwargs=kwargs, source=src) for _ in range(n)
        ]

    def __len__(self) -> int:
        """``K``."""
        return len(self.multipliers)

    def __getitem__(self, k: int) -> Multiplier:
        """The multiplier of constraint ``k``."""
        return self.multipliers[k]

    @property
    def value(self) -> np.ndarray:
        """λ_k of every constraint, a float64 array of shape ``(K,)``."""
        return np.array([m.value for m in self.multipliers], dtype=np.float64)

    @property
    def input_clipped(self) -> int:
        """How many ``J_c^k`` were saturated, all constraints together."""
        return sum(getattr(m, "input_clipped", 0) for m in self.multipliers)

    @property
    def input_skipped(self) -> int:
        """How many NaN ``J_c^k`` were refused, all constraints together."""
        return sum(getattr(m, "input_skipped", 0) for m in self.multipliers)

    def update(
        self,
        ep_cost: Any,
        cost_limit: Any,
        *,
        lr: float | None = None,
        lr_scale: float = 1.0,
    ) -> np.ndarray:
        """Update each λ_k from ``ep_cost[k]`` and ``cost_limit[k]``; return the new λ.

        Args:
            ep_cost: ``J_c^k`` of each constraint (``K`` numbers).
            cost_limit: ``d_k`` of each constraint (``K`` numbers).
            lr: step size of every multiplier for this update (default: their own).
            lr_scale: multiplies every step size (risk modulation).
        """
        costs, limits = (
            list(np.asarray(ep_cost).reshape(-1)),
            list(np.asarray(cost_limit).reshape(-1)),
        )
        if len(costs) != len(self) or len(limits) != len(self):
            raise ConfigError(
                "ep_cost",
                (costs, limits),
                f"expected {len(self)} episode costs and {len(self)} limits, got "
                f"{len(costs)} and {len(limits)}",
                source="MultiplierSet.update",
            )
        for m, jc, d in zip(self.multipliers, costs, limits, strict=True):
            m.update(float(jc), float(d), lr=lr, lr_scale=lr_scale)
        return self.value

    def state_dict(self) -> dict[str, Any]:
        """The state of each multiplier, under ``"0"``, ``"1"``, ..."""
        return {str(k): m.state_dict() for k, m in enumerate(self.multipliers)}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict` of the same ``K``."""
        if sorted(state) != sorted(str(k) for k in range(len(self))):
            raise ConfigError(
                "lagrange",
                sorted(state),
                f"a state of {len(state)} multipliers cannot be loaded into {len(self)}",
                source="MultiplierSet.load_state_dict",
            )
        for k, m in enumerate(self.multipliers):
            m.load_state_dict(state[str(k)], strict)


def make_multiplier(
    kind: str,
    *,
    init: float,
    lr: float,
    kwargs: dict[str, Any] | None = None,
    source: str | None = None,
) -> Multiplier:
    """Build a multiplier by name: ``"adam"``, ``"sgd"`` or ``"pid"``.

    Args:
        kind: the multiplier kind.
        init: initial λ.
        lr: step size (Adam/SGD; ignored by PID).
        kwargs: extra constructor arguments (``upper_bound``; PID gains ``kp``, ``ki``, ``kd``,
            ``d_delay``, ``p_ema_alpha``, ``d_ema_alpha``, ``penalty_max``).
        source: the caller the ``ConfigError`` names (the algorithm's class name); None: none.

    Raises:
        ConfigError: an unknown ``kind``, ``kwargs`` not a dict (or None), a key of it that
            ``kind`` does not take (named with the known ones, :data:`MULTIPLIER_KWARGS`), or a
            value the multiplier refuses (named as ``multiplier_kwargs['key']`` with ``source``).
    """
    kwargs = check_multiplier_kwargs(kind, kwargs, source=source)
    try:
        if kind in ("adam", "sgd"):
            return LagrangeMultiplier(init=init, lr=lr, optimizer=kind, **kwargs)  # type: ignore[arg-type]
        if kind == "pid":
            return PIDLagrangeMultiplier(init=init, **kwargs)
    except ConfigError as exc:
        if source is None:
            raise
        raise as_caller_error(exc, kwargs, source=source) from None
    raise ConfigError("multiplier", kind, "expected 'adam', 'sgd' or 'pid'", source=source)
