"""Discounted cost-to-go targets with a horizon, for training a risk head online (numpy only).

The target of row ``t`` (the state from which the step with cost ``c_t`` was taken) is the
horizon-``H`` discounted cost-to-go *within the episode*::

    G_t = sum_{k=0}^{K_t - 1} gamma**k * c_{t+k},   K_t = min(H, steps left in the episode)

computed for a whole time-major ``[T, n_envs]`` block in **one backward pass** over ``T``
(vectorised over envs) by the recursion ``G_t = c_t + gamma * G_{t+1} - gamma**H * c_{t+H}``
(the last term only while ``t+H`` lies in the same episode and in the data; ``G_t = c_t`` at the
last step of an episode).

Episode ends and what is "ready":

* A **terminal** step (``terminated``) ends the episode: nothing after it counts, and the true
  cost-to-go beyond it is 0, so the target is exact.
* A **truncation** (``truncated`` and not ``terminated``) also ends the episode's data. There is
  **no bootstrapping beyond the data**: the target is the discounted sum of the costs up to and
  including the truncation step. With ``truncation="complete"`` (default) such a target counts
  as ready (it under-estimates the cost-to-go of states within ``H`` steps of a time limit, the
  usual time-limit bias); with ``truncation="drop"`` rows whose window was cut short by a
  truncation (fewer than ``H`` steps before it) are discarded instead.
* A row is **ready** once its target can no longer change: ``H`` steps of its episode have been
  seen (``t + H - 1 <= T - 1``), or its episode ended in the data within its window. Rows of an
  episode still running at the end of the block with fewer than ``H`` later steps are
  **pending**: their value in ``targets`` is the partial sum over the data so far. For each env,
  pending rows always form a suffix of the block, so a caller can keep that suffix and feed it
  again with the next steps (:class:`PendingCostToGo` does exactly that).
* ``valid=False`` marks rows that are not transitions (Gymnasium's ``NEXT_STEP`` autoreset
  step after an episode end): they are never ready, but they are pending like their neighbours,
  so the suffix property holds.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from gymcurric._checks import check_int, finite_reason, shown, too_large_int
from gymcurric.errors import ConfigError

__all__ = ["CostToGoTargets", "PendingCostToGo", "TruncationPolicy", "cost_to_go_targets"]

TruncationPolicy = Literal["complete", "drop"]
_TRUNCATION_POLICIES = ("complete", "drop")
_MAX_HORIZON = 2**62

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


_OPEN = 1 << 40  # "episode still open at the end of the block" for the distance counters


def _backward_scalar(
    c: FloatArray,
    link: FloatArray,
    keep: npt.NDArray[np.int64],
    tail: FloatArray,
    h: int,
    targets: FloatArray,
    dist: npt.NDArray[np.int64],
) -> None:
    """The backward recursion of :func:`cost_to_go_targets` for one env, on Python floats."""
    cl, ll, kl, tl = c.tolist(), link.tolist(), keep.tolist(), tail.tolist()
    out = [0.0] * len(cl)
    dl = [0] * len(cl)
    nxt, d = 0.0, _OPEN
    for t in range(len(cl) - 1, -1, -1):
        nxt = cl[t] + ll[t] * nxt - (tl[t] if d >= h else 0.0)
        d = d * kl[t] + 1
        out[t] = nxt
        dl[t] = d
    targets[:, 0] = out
    dist[:, 0] = dl


class CostToGoTargets(NamedTuple):
    """Result of :func:`cost_to_go_targets`, each array shaped like ``costs``.

    Attributes:
        targets: float64 discounted cost-to-go (partial sums for pending rows).
        ready: the rows whose target is final and usable as a training sample.
        pending: the rows that need more data (episode still running, fewer than ``H`` steps
            seen). Rows that are neither are discarded (invalid rows, dropped truncations).
    """

    targets: FloatArray
    ready: BoolArray
    pending: BoolArray


def check_target_params(gamma: float, horizon: int, truncation: str, source: str) -> None:
    """Validate ``gamma``, ``horizon`` and ``truncation``; raise :class:`ConfigError`."""
    # too_large_int first: float() raises OverflowError on an int too large for a float
    # numpy's numbers too (a value read from an array), read as the Python float they equal
    number = isinstance(gamma, int | float | np.integer | np.floating)
    number = number and not isinstance(gamma, bool | np.bool_)
    number = number and not too_large_int(gamma)
    if not (number and 0.0 <= float(gamma) <= 1.0):
        reason = finite_reason(gamma, "must be a number in [0, 1]")
        raise ConfigError("gamma", shown(gamma), reason, source=source)
    check_int("horizon", horizon, source=source, allow_numpy=True, reason="must be an integer >= 1")
    if horizon > _MAX_HORIZON:  # an int64 holds it (any horizon past an episode is its end)
        raise ConfigError(
            "horizon", shown(horizon), f"must be an integer from 1 to {_MAX_HORIZON}", source=source
        )
    if truncation not in _TRUNCATION_POLICIES:
        raise ConfigError(
            "truncation", truncation, f"expected one of {_TRUNCATION_POLICIES}", source=source
        )


def cost_to_go_targets(
    costs: npt.ArrayLike,
    terminated: npt.ArrayLike,
    truncated: npt.ArrayLike | None = None,
    *,
    gamma: float,
    horizon: int,
    valid: npt.ArrayLike | None = None,
    truncation: TruncationPolicy = "complete",
) -> CostToGoTargets:
    """Horizon-``H`` discounted cost-to-go targets for a time-major block, in one backward pass.

    Args:
        costs: ``[T]`` or ``[T, n_envs]`` step costs, time-major; must be finite.
        terminated: same shape, True where the step ended the episode in a terminal state.
        truncated: same shape, True where the step ended the episode by truncation (a time
            limit); ``None`` for no truncations.
        gamma: discount in ``[0, 1]``.
        horizon: ``H >= 1``, the number of steps summed (``H = 1``: the step's own cost).
        valid: same shape, False for rows that are not transitions (their target is never
            ready); ``None`` for all valid.
        truncation: ``"complete"`` (a truncated window is a ready target, no bootstrap) or
            ``"drop"`` (discard rows whose window a truncation cut short).

    Returns:
        :class:`CostToGoTargets` (``targets``, ``ready``, ``pending``), shaped like ``costs``.

    Examples:
        >>> out = cost_to_go_targets([1.0, 1.0, 1.0, 1.0], [False, True, False, False],
        ...                          gamma=0.5, horizon=2)
        >>> out.targets.tolist(), out.ready.tolist(), out.pending.tolist()
        ([1.5, 1.0, 1.5, 1.0], [True, True, True, False], [False, False, False, True])
    """
    check_target_params(gamma, horizon, truncation, "cost_to_go_targets")
    c = np.asarray(costs, dtype=np.float64)
    one_d = c.ndim == 1
    if one_d:
        c = c[:, None]
    if c.ndim != 2:
        raise ConfigError("costs", c.shape, "must have shape [T] or [T, n_envs]")
    if not np.isfinite(c).all():
        raise ConfigError("costs", "non-finite", "costs must be finite (sanitise them first)")

    def _mask(x: npt.ArrayLike | None, name: str, default: bool) -> BoolArray:
        if x is None:
            return np.full(c.shape, default, dtype=bool)
        m = np.asarray(x, dtype=bool)
        m = m[:, None] if one_d and m.ndim == 1 else m
        if m.shape != c.shape:
            raise ConfigError(name, m.shape, f"must have the shape of costs {c.shape}")
        return m

    term = _mask(terminated, "terminated", False)
    trunc = _mask(truncated, "truncated", False) & ~term  # a terminal wins over a time limit
    ok = _mask(valid, "valid", True)
    n_steps, n_envs = c.shape
    # a window longer than the block closes inside it for no row, so any horizon past
    # n_steps gives the same targets as n_steps + 1; the cap keeps the distance counters'
    # comparisons below _OPEN (a horizon past it took open episodes for ended ones)
    h = min(int(horizon), n_steps + 1)
    g = float(gamma)
    done = term | trunc
    # Per-row constants, computed vectorised so that the backward loop does only the
    # recursion: the discount that links row t to row t+1 (0 across an episode end) and the
    # term gamma**H * c_{t+H} that leaves the window when stepping back (0 past the data).
    link = np.where(done, 0.0, g)
    keep = (~done).astype(np.int64)
    tail = np.zeros_like(c)
    if h < n_steps:
        tail[: n_steps - h] = np.where(done[: n_steps - h], 0.0, g**h * c[h:])
    targets = np.empty_like(c)
    # dist[t]: steps from row t to the end of its episode, inclusive (_OPEN: not in the data)
    dist = np.empty(c.shape, dtype=np.int64)
    if n_envs == 1:  # plain floats: ~20x faster than numpy on one-element rows
        _backward_scalar(c[:, 0], link[:, 0], keep[:, 0], tail[:, 0], h, targets, dist)
    else:
        nxt = np.zeros(n_envs)
        d = np.full(n_envs, _OPEN, dtype=np.int64)
        for t in range(n_steps - 1, -1, -1):
            # c_{t+H} was inside row t+1's window iff t+H is in its episode (d >= H)
            nxt = c[t] + link[t] * nxt - tail[t] * (d >= h)
            d = d * keep[t] + 1
            targets[t] = nxt
            dist[t] = d

    rows = np.arange(n_steps)[:, None]
    decided = (dist <= h) | (rows + h - 1 <= n_steps - 1)
    pending = ~decided
    ready = decided & ok
    if truncation == "drop":
        ends = dist < _OPEN // 2
        end_row = np.where(ends, rows + dist - 1, 0)
        by_trunc = trunc[end_row, np.arange(n_envs)[None, :]] & ends
        ready &= ~(by_trunc & (dist < h))
    if one_d:
        return CostToGoTargets(targets[:, 0], ready[:, 0], pending[:, 0])
    return CostToGoTargets(targets, ready, pending)


class PendingCostToGo:
    """The pending window of an online learner: features and costs waiting for their targets.

    Append one row per vector step with :meth:`add` (the features of the state the step started
    from, the step's cost and end flags); :meth:`pop_ready` computes the targets of everything
    held with :func:`cost_to_go_targets`, returns the rows that became ready since the last call
    as training samples, and keeps only what is still pending. At most ``H`` plus the steps
    since the last :meth:`pop_ready` rows are held.

    Args:
        num_envs: number of parallel envs (1 for a single env).
        gamma: discount in ``[0, 1]``.
        horizon: ``H >= 1``.
        truncation: ``"complete"`` or ``"drop"`` (see :func:`cost_to_go_targets`).

    Examples:
        >>> buf = PendingCostToGo(1, gamma=1.0, horizon=2)
        >>> for cost in (1.0, 2.0, 3.0):
        ...     buf.add(np.array([[cost]], np.float32), [cost], [False], [False])
        >>> features, targets = buf.pop_ready()
        >>> features[:, 0].tolist(), targets.tolist()
        ([1.0, 2.0], [3.0, 5.0])
    """

    def __init__(
        self,
        num_envs: int,
        *,
        gamma: float,
        horizon: int,
        truncation: TruncationPolicy = "complete",
    ) -> None:
        check_int(
            "num_envs",
            num_envs,
            source="PendingCostToGo",
            allow_numpy=True,
            reason="must be an integer >= 1",
        )
        check_target_params(gamma, horizon, truncation, "PendingCostToGo")
        self.num_envs = int(num_envs)
        self.gamma = float(gamma)
        self.horizon = int(horizon)
        self.truncation: TruncationPolicy = truncation
        self.clear()

    def clear(self) -> None:
        """Forget every held row (e.g. after a full reset of all envs)."""
        self._features: list[npt.NDArray[np.float32]] = []
        self._costs: list[FloatArray] = []
        self._term: list[BoolArray] = []
        self._trunc: list[BoolArray] = []
        self._valid: list[BoolArray] = []
        self._start = np.zeros(self.num_envs, dtype=np.int64)  # first unconsumed row per env
        self._dim = getattr(self, "_dim", 0)  # feature size, known after the first add

    def __len__(self) -> int:
        """Number of rows (vector steps) held."""
        return len(self._costs)

    def add(
        self,
        features: npt.ArrayLike,
        costs: npt.ArrayLike,
        terminated: npt.ArrayLike,
        truncated: npt.ArrayLike,
        valid: npt.ArrayLike | None = None,
    ) -> None:
        """Append one step: ``features`` ``[n_envs, d]``, the rest ``[n_envs]``."""
        n = self.num_envs
        f = np.asarray(features, dtype=np.float32).reshape(n, -1)
        self._dim = f.shape[1]
        self._features.append(f)
        self._costs.append(np.asarray(costs, dtype=np.float64).reshape(n))
        self._term.append(np.asarray(terminated, dtype=bool).reshape(n))
        self._trunc.append(np.asarray(truncated, dtype=bool).reshape(n))
        ok = np.ones(n, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).reshape(n)
        self._valid.append(ok)

    def end_all(self, mask: npt.ArrayLike | None = None) -> None:
        """Close the running episodes (of the envs in ``mask``, or all) without a cost.

        For an explicit ``reset()`` in the middle of an episode: the last held row of each of
        those envs is marked truncated, so rows waiting on an episode that will never continue
        become ready (or dropped) at the next :meth:`pop_ready`.
        """
        if self._trunc:
            sel = np.ones(self.num_envs, bool) if mask is None else np.asarray(mask, bool)
            self._trunc[-1] = self._trunc[-1] | (sel.reshape(self.num_envs) & ~self._term[-1])

    def pop_ready(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]:
        """Return ``(features [m, d], targets [m])`` of the rows that became ready; trim."""
        if not self._costs:
            return np.zeros((0, self._dim), dtype=np.float32), np.zeros(0)
        res = cost_to_go_targets(
            np.stack(self._costs),
            np.stack(self._term),
            np.stack(self._trunc),
            gamma=self.gamma,
            horizon=self.horizon,
            valid=np.stack(self._valid),
            truncation=self.truncation,
        )
        n_rows = len(self._costs)
        first_pending = np.where(res.pending.any(axis=0), res.pending.argmax(axis=0), n_rows)
        rows = np.arange(n_rows)[:, None]
        take = res.ready & (rows >= self._start[None, :]) & (rows < first_pending[None, :])
        t_idx, e_idx = np.nonzero(take)
        if t_idx.size:
            try:
                feats = np.stack(self._features)[t_idx, e_idx]
            except ValueError:  # rows of another size (an embedding that failed): not taken
                feats = np.stack([self._features[t][e] for t, e in zip(t_idx, e_idx, strict=True)])
        else:
            feats = np.zeros((0, self._dim), dtype=np.float32)
        targets = res.targets[t_idx, e_idx]
        trim = int(first_pending.min())
        if trim:
            for held in (self._features, self._costs, self._term, self._trunc, self._valid):
                del held[:trim]
        self._start = first_pending - trim
        return feats, targets
