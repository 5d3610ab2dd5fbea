"""CPO's update rule as pure functions: the five cases, the step and the backtracking line search.

Achiam et al. 2017, "Constrained Policy Optimization" (ICML), section 6 and appendix 10.2. One
update solves the trust-region problem linearised around the current parameters ``θ_k``::

    maximise  gᵀΔθ   subject to   c + bᵀΔθ ≤ 0,   ½ ΔθᵀHΔθ ≤ δ

where ``g`` is the gradient of the reward surrogate, ``b`` that of the cost surrogate, ``H`` the
Fisher matrix (with damping), ``c`` the constraint gap and ``δ`` the KL radius. With
``x = H⁻¹g`` and ``p = H⁻¹b``: ``q = gᵀH⁻¹g``, ``r = gᵀH⁻¹b``, ``s = bᵀH⁻¹b``,
``A = q - r²/s`` and ``B = 2δ - c²/s``. The cases (numbering of the reference code and OmniSafe):

- 4: ``bᵀb ≤ 1e-6`` and ``c < 0``: no cost gradient, feasible: TRPO's step ``√(2δ/q)·x``;
- 3: ``c < 0``, ``B < 0``: the whole trust region is feasible: TRPO's step;
- 2: ``c < 0 ≤ B``: feasible, the constraint cuts the trust region: the dual solution;
- 1: ``c ≥ 0``, ``B ≥ 0``: infeasible, recovery possible inside the trust region: the dual
  solution;
- 0: ``c ≥ 0``, ``B < 0``: infeasible, no feasible point in reach: the pure cost-descent step
  ``-√(2δ/s)·p``.

Dual solution (cases 1, 2), with ``g`` the gradient of the surrogate to *maximise*::

    nu*(λ) = max(0, λc + r)/s,   Δθ = (x - nu*·p)/λ*
    f_a(λ) = -½(A/λ + Bλ) + rc/s    on Λ_a = {λ ≥ 0 : λc + r > 0}   (nu* > 0)
    f_b(λ) = -½(q/λ + 2δλ)          on Λ_b = {λ ≥ 0 : λc + r ≤ 0}   (nu* = 0)
    λ* = the better of  proj(√(A/B), Λ_a)  and  proj(√(q/2δ), Λ_b)

Signs of ``r``: the paper prints ``(λc - r)`` and ``-rc/s``, which hold when ``r`` is built from
the gradient of the *loss* ``-surrogate``, as the reference code (safety-starter-agents
``flat_g = ∇ pi_loss``) does. OmniSafe and SafePO take ``g = ∇ surrogate`` but keep the
paper's signs, so their cases 1 and 2 solve a different problem (the tests compare both
against the optimum found by hand). Here ``r = gᵀH⁻¹b`` with the ascent gradient and the
signs derived for it, which give the same steps as the reference code.

``q``, ``r`` and ``s`` are the quadratic forms of the solved directions, ``xᵀHx``, ``pᵀHx`` and
``pᵀHp``, as the reference code computes them (OmniSafe: ``xᵀHx``, ``gᵀp``, ``bᵀp``). With an
exact solve they are the same numbers; with conjugate gradient's approximate ``x`` and ``p``
these keep ``A ≥ 0`` (Cauchy-Schwarz in the ``H`` inner product) and make the case-3/4 step
exactly TRPO's (sb3-contrib's step length is ``√(2δ/xᵀHx)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch as th

__all__ = [
    "COST_GRADIENT_TOL",
    "EPS",
    "CPOStep",
    "LineSearchResult",
    "conjugate_gradient",
    "cpo_step",
    "line_search",
]

#: Added to ``λ`` and ``s`` where they divide (the reference code's and OmniSafe's ``EPS``).
EPS = 1e-8
#: Case 4 needs ``bᵀb`` at most this (OmniSafe's threshold; the reference code uses 1e-8).
COST_GRADIENT_TOL = 1e-6

Fvp = Callable[[th.Tensor], th.Tensor]


class CPOStep(NamedTuple):
    """One CPO step before the line search: ``Δθ = scale · direction``.

    The step is kept as a scalar times a vector so that the case-3/4 step is applied exactly as
    sb3-contrib's TRPO applies its step (``θ + (fraction·scale)·x``), to the bit.

    Attributes:
        case: 0 to 4 (see the module docstring), or -1: a non-finite input or intermediate
            (``g``, ``b``, ``c``, ``x``, ``p``, a Fisher product, ``q``, ``r``, ``s`` or the
            step), or ``q ≤ 0``; then there is no step.
        scale: the scalar factor (``√(2δ/q)``, ``1/λ*`` or ``-√(2δ/s)``); NaN when case -1.
        direction: ``x``, ``x - nu*·p`` or ``p``.
        q: ``xᵀHx``.
        r: ``pᵀHx`` (NaN in case 4, where ``p`` is not computed).
        s: ``pᵀHp`` (NaN in case 4).
        A: ``q - r²/s`` (NaN in case 4).
        B: ``2δ - c²/s`` (NaN in case 4).
        lam: ``λ*``, the trust-region multiplier (0 in case 0).
        nu: ``nu*``, the cost multiplier (0 in cases 3 and 4).
    """

    case: int
    scale: float
    direction: th.Tensor
    q: float
    r: float
    s: float
    A: float
    B: float
    lam: float
    nu: float

    @property
    def step(self) -> th.Tensor:
        """``Δθ = scale · direction``."""
        return self.scale * self.direction


class LineSearchResult(NamedTuple):
    """The outcome of :func:`line_search`.

    Attributes:
        fraction: the accepted fraction of the step, ``shrink**k``; 0.0 when none was accepted.
        tries: how many fractions were evaluated (``k + 1`` when accepted, ``max_iter`` if not).
        reward: the reward surrogate at the accepted point (the one before, when none).
        cost: the cost surrogate at the accepted point (the one before, when none).
        kl: the mean KL at the accepted point (0.0 when none).
    """

    fraction: float
    tries: int
    reward: float
    cost: float
    kl: float

    @property
    def accepted(self) -> bool:
        """Whether a fraction was accepted."""
        return self.fraction > 0.0


def conjugate_gradient(
    fvp: Fvp, v: th.Tensor, max_iter: int = 15, residual_tol: float = 1e-10
) -> th.Tensor:
    """Solve ``H z = v`` by conjugate gradient from ``z = 0`` (Nocedal and Wright, alg. 5.2).

    Deterministic: unlike sb3-contrib's solver, which starts from a small random point, it
    draws nothing from torch's generator.

    Args:
        fvp: ``u -> H u`` for a symmetric positive definite ``H``.
        v: the right-hand side.
        max_iter: iterations at most (exact after ``len(v)`` in exact arithmetic).
        residual_tol: stop once the squared residual norm is below this.

    Returns:
        The approximate solution ``z ≈ H⁻¹v``.
    """
    z = th.zeros_like(v)
    residual = v.clone()
    direction = v.clone()
    rho = th.dot(residual, residual)
    for _ in range(max_iter):
        if not rho > residual_tol:  # also stops on NaN
            break
        h_dir = fvp(direction)
        alpha = rho / th.dot(direction, h_dir)
        z = z + alpha * direction
        residual = residual - alpha * h_dir
        rho_next = th.dot(residual, residual)
        direction = residual + (rho_next / rho) * direction
        rho = rho_next
    return z


def _finite(*values: float | th.Tensor) -> bool:
    for value in values:
        if isinstance(value, th.Tensor):
            if not bool(th.isfinite(value).all()):
                return False
        elif not math.isfinite(value):
            return False
    return True


def _div(num: float, den: float) -> float:
    """``num / den`` with IEEE semantics (±inf, NaN) instead of ZeroDivisionError."""
    if den != 0.0:
        return num / den
    if num == 0.0 or math.isnan(num):
        return math.nan
    return math.copysign(math.inf, num) * math.copysign(1.0, den)


def _project(value: float, low: float, high: float) -> float:
    """``max(low, min(high, value))`` as the reference code (``low`` wins if ``high < low``)."""
    return value if math.isnan(value) else max(low, min(high, value))


def cpo_step(
    g: th.Tensor,
    b: th.Tensor,
    c: float,
    target_kl: float,
    fvp: Fvp,
    *,
    x: th.Tensor | None = None,
    cg_max_steps: int = 15,
) -> CPOStep:
    """The CPO step for one update (case selection and closed-form solution, no line search).

    Args:
        g: gradient of the reward surrogate (to maximise), flat.
        b: gradient of the cost surrogate, flat.
        c: the constraint gap, in the units of ``b`` (``J_c - d``, per step or per episode).
        target_kl: ``δ``, the trust-region radius in mean KL.
        fvp: the Fisher-vector product ``u -> H u`` (damping included).
        x: ``H⁻¹g`` if already solved (the algorithm passes sb3-contrib's solution, as TRPO);
            default: :func:`conjugate_gradient`.
        cg_max_steps: conjugate-gradient iterations for ``x`` (when not given) and ``p``.

    Returns:
        The :class:`CPOStep`; case -1 (and no step) when anything is non-finite.

    Examples:
        >>> import torch
        >>> H = torch.diag(torch.tensor([2.0, 0.5], dtype=torch.float64))
        >>> g = torch.tensor([2.0, 0.0], dtype=torch.float64)
        >>> b = torch.tensor([1.0, 1.0], dtype=torch.float64)
        >>> out = cpo_step(g, b, -0.5, 0.5, lambda v: H @ v)
        >>> out.case, [round(v, 6) for v in out.step.tolist()]
        (2, [0.7, -0.2])
    """
    nan = math.nan
    delta = float(target_kl)
    c = float(c)

    def skipped(q: float = nan, r: float = nan, s: float = nan) -> CPOStep:
        return CPOStep(-1, nan, th.zeros_like(g), q, r, s, nan, nan, nan, nan)

    if not _finite(g, b, c):
        return skipped()
    if x is None:
        x = conjugate_gradient(fvp, g, cg_max_steps)
    hx = fvp(x)
    # th.matmul as sb3-contrib's TRPO, so that the case-3/4 step length is its own to the bit
    q = float(th.matmul(x, hx))
    if not _finite(x, hx, q) or q <= 0.0:
        return skipped(q)
    trpo_scale = math.sqrt(2.0 * delta / q)
    if float(th.dot(b, b)) <= COST_GRADIENT_TOL and c < 0.0:
        return CPOStep(4, trpo_scale, x, q, nan, nan, nan, nan, 1.0 / trpo_scale, 0.0)

    p = conjugate_gradient(fvp, b, cg_max_steps)
    hp = fvp(p)
    r = float(th.matmul(p, hx))
    s = float(th.matmul(p, hp))
    if not _finite(p, hp, r, s):
        return skipped(q, r, s)
    # A ≥ 0 by Cauchy-Schwarz in the H inner product; clamp the rounding error
    A = max(q - _div(r * r, s), 0.0) if s > 0.0 else nan
    B = 2.0 * delta - _div(c * c, s)

    if c < 0.0 and B < 0.0:
        case = 3
    elif c < 0.0 <= B:
        case = 2
    elif c >= 0.0 and B >= 0.0:
        case = 1
    else:  # c ≥ 0 and B < 0 (or B NaN: c = s = 0), as the reference code's last branch
        case = 0

    if case == 3:
        return CPOStep(3, trpo_scale, x, q, r, s, A, B, 1.0 / trpo_scale, 0.0)
    if case == 0:
        nu = math.sqrt(2.0 * delta / (s + EPS))
        return _checked(CPOStep(0, -nu, p, q, r, s, A, B, 0.0, nu), skipped)

    # cases 1 and 2: λ* from the two pieces of the dual, nu* from λ*
    lam_a = math.sqrt(_div(A, B))
    lam_b = math.sqrt(q / (2.0 * delta))
    # the λ where nu* switches on: λc + r = 0
    bound = -r / c if c != 0.0 else (-math.inf if r > 0.0 else math.inf)
    if c < 0.0:  # Λ_a = [0, bound], Λ_b = [bound, ∞)
        lam_a, lam_b = _project(lam_a, 0.0, bound), _project(lam_b, bound, math.inf)
    else:  # Λ_a = [bound, ∞), Λ_b = [0, bound]
        lam_a, lam_b = _project(lam_a, bound, math.inf), _project(lam_b, 0.0, bound)

    def f_a(lam: float) -> float:
        return -0.5 * (_div(A, lam + EPS) + B * lam) + r * c / (s + EPS)

    def f_b(lam: float) -> float:
        return -0.5 * (_div(q, lam + EPS) + 2.0 * delta * lam)

    lam = lam_a if f_a(lam_a) >= f_b(lam_b) else lam_b
    nu = max(0.0, lam * c + r) / (s + EPS)
    direction = x - nu * p
    return _checked(CPOStep(case, 1.0 / (lam + EPS), direction, q, r, s, A, B, lam, nu), skipped)


def _checked(out: CPOStep, skipped: Callable[..., CPOStep]) -> CPOStep:
    if _finite(out.scale, out.direction, out.lam, out.nu):
        return out
    return skipped(out.q, out.r, out.s)


def line_search(
    evaluate: Callable[[float], tuple[float, float, float]],
    *,
    case: int,
    c: float,
    target_kl: float,
    reward_before: float,
    cost_before: float,
    shrink: float = 0.8,
    max_iter: int = 20,
) -> LineSearchResult:
    """Backtracking line search over the fractions ``1, shrink, shrink², ...`` of the step.

    A fraction is accepted when its evaluation is finite and all three checks of the reference
    code and OmniSafe hold:

    - the reward surrogate did not get worse (``reward ≥ reward_before``), in cases 2 to 4 only;
    - the cost surrogate rose by at most ``max(0, -c)``;
    - the mean KL is at most ``target_kl``.

    Args:
        evaluate: ``fraction -> (reward surrogate, cost surrogate, mean KL)`` with the
            parameters at ``θ_k + fraction·Δθ`` (it sets them; the caller restores ``θ_k`` when
            nothing is accepted).
        case: the :class:`CPOStep` case.
        c: the constraint gap, in the units of the cost surrogate.
        target_kl: ``δ``.
        reward_before: the reward surrogate at ``θ_k``.
        cost_before: the cost surrogate at ``θ_k``.
        shrink: the factor between fractions.
        max_iter: fractions tried at most.

    Returns:
        The :class:`LineSearchResult` (fraction 0.0 when none is accepted).

    Examples:
        >>> kl = lambda f: (0.0, 0.0, 0.02 * f * f)  # the KL grows as the square of the step
        >>> out = line_search(
        ...     kl, case=3, c=-1.0, target_kl=0.01, reward_before=0.0, cost_before=0.0
        ... )
        >>> out.tries, round(out.fraction, 6), round(out.kl, 6)
        (3, 0.64, 0.008192)
    """
    slack = max(0.0, -float(c))
    fraction = 1.0
    for k in range(max_iter):
        reward, cost, kl = evaluate(fraction)
        if (
            _finite(reward, cost, kl)
            and kl <= target_kl
            and cost - cost_before <= slack
            and (case < 2 or reward >= reward_before)
        ):
            return LineSearchResult(fraction, k + 1, reward, cost, kl)
        fraction *= shrink
    return LineSearchResult(0.0, max_iter, reward_before, cost_before, 0.0)
