"""How episode results become per-task statistics (the O(1) part of every ``update``).

Each reported episode gives a *signal* ``s`` in ``[0, 1]``:

* **success** (``success=`` a bool or a float in ``[0, 1]``) is used as is. With
  ``source="auto"`` (default) it is preferred whenever it is given.
* **return** is min-max normalised: ``s = clip((R - lo) / (hi - lo), 0, 1)`` with
  ``return_range=(lo, hi)`` when given, otherwise with the lowest and highest returns seen so far
  by the curriculum (``s = 0.5`` until two different returns were seen). The running range only
  widens, so early EMAs are in slightly different units than late ones; give ``return_range``
  (or ``success``) when the scale is known.
* **cost** is kept as an EMA of the raw episode cost per task. Scorers that use it normalise it
  by ``cost_limit`` (or by the largest episode cost seen) and clip to ``[0, 1]``.

Per slot the update writes, for the n-th episode of the task, with ``a = alpha`` and
``k = slow_factor``::

    fast += max(a, 1/n) * (s - fast)          slow += max(a * k, 1/n) * (s - slow)
    w2 = (1 - b)^2 * w2 + b^2,  b = max(a, 1/n)    (sum of squared weights behind ``fast``)
    first m (= baseline_episodes) episodes:  base = running mean of s
    ret_ema, cost_ema: EMAs of the raw return / cost with rate a (the first episode sets them)

Both EMAs run on the *same* signal at two timescales (not an EMA of an EMA). The ``max(., 1/n)``
rate makes each an exact running mean until it has seen its horizon (1/a, 1/(a k) episodes),
then an EMA: a task's first 0/1 outcome does not dominate either average, so a young task shows
no spurious ``|fast - slow|`` and its learning progress reads 0 until ``n > 1/a``. Pools should
therefore judge a task only after ~``2/a`` episodes (``DualPool.min_samples``). Scorers apply the
per-task random-baseline normalisation ``x = clip((v - base) / (1 - min(base, cap)), 0, 1)`` to the
EMA values ``v`` when they score; since the normalisation is affine inside the clip this equals
EMAs of the normalised signal, while letting the baseline settle over its first ``m`` episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gymcurric._checks import check_int, finite_reason, shown, too_large_int
from gymcurric.errors import ConfigError, NonFiniteValueError
from gymcurric.tasks.state import CurriculumState, K, S

__all__ = [
    "SignalConfig",
    "check_episode",
    "check_episode_arrays",
    "check_episodes",
    "normalised_cost",
    "record_episode",
    "record_episodes",
]

_SOURCES = ("auto", "success", "return")


def _num(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _finite(value: Any) -> bool:
    """Whether ``value`` is a number (numpy's too; no bool) a float holds, finite."""
    return _num(value) and not too_large_int(value) and math.isfinite(value)


@dataclass(frozen=True)
class SignalConfig:
    """How episode results are turned into the per-task statistics scorers read.

    Attributes:
        source: ``"auto"`` (success when given, else normalised return), ``"success"``
            (``success`` required in every update) or ``"return"`` (always the return).
        return_range: ``(lo, hi)`` fixed return bounds for normalisation, or ``None`` for the
            running range.
        alpha: rate of the fast EMA (and of the return/cost EMAs), in ``(0, 1]``. The
            default 0.3 (gymcurric 0.1: 0.1) lets learning progress read a task after about
            three episodes instead of ten (see :class:`~gymcurric.tasks.LearningProgressScorer`).
        slow_factor: the slow EMA's rate is ``alpha * slow_factor``, in ``(0, 1)``.
        baseline_episodes: episodes averaged into the per-task random baseline (0 disables it).
        cost_limit: cost normalisation scale (e.g. the episode cost budget), or ``None`` for the
            largest episode cost seen.
    """

    source: str = "auto"
    return_range: tuple[float, float] | None = None
    alpha: float = 0.3
    slow_factor: float = 0.2
    baseline_episodes: int = 5
    cost_limit: float | None = None

    def __post_init__(self) -> None:
        src = "SignalConfig"
        if self.source not in _SOURCES:
            raise ConfigError("source", self.source, f"expected one of {_SOURCES}", source=src)
        if self.return_range is not None:
            rr = self.return_range
            if (
                not isinstance(rr, tuple | list)
                or len(rr) != 2
                or not all(map(_finite, rr))
                or not rr[0] < rr[1]
            ):
                reason = "expected (lo, hi) finite with lo < hi"
                if isinstance(rr, tuple | list):  # say why an int too large for a float is not
                    big = [v for v in rr if too_large_int(v)]
                    reason = finite_reason(big[0], reason) if big else reason
                raise ConfigError("return_range", shown(rr), reason, source=src)
            object.__setattr__(self, "return_range", (float(rr[0]), float(rr[1])))
        if not _num(self.alpha) or not 0.0 < self.alpha <= 1.0:
            raise ConfigError("alpha", self.alpha, "expected a float in (0, 1]", source=src)
        if not _num(self.slow_factor) or not 0.0 < self.slow_factor < 1.0:
            raise ConfigError(
                "slow_factor", self.slow_factor, "expected a float in (0, 1)", source=src
            )
        check_int("baseline_episodes", self.baseline_episodes, minimum=0, source=src)
        if self.cost_limit is not None and (
            not _finite(self.cost_limit) or self.cost_limit <= 0.0
        ):  # 10**400 is below inf, but no float holds it: refused here, not where it divides
            reason = finite_reason(self.cost_limit, "expected a float > 0 or None")
            raise ConfigError("cost_limit", shown(self.cost_limit), reason, source=src)


def check_episodes(
    task_ids: Any, returns: Any, successes: Any, costs: Any, *, source: str | None = None
) -> tuple[list[Any], list[tuple[float, float | None, float]]]:
    """Validate a batch of episode reports (``update_batch``); nothing is applied here.

    Returns:
        ``(task_ids, checked)``: the ids as a list and ``check_episode``'s result for each.

    Raises:
        ConfigError: the four sequences differ in length, or as :func:`check_episode`.
        NonFiniteValueError: as :func:`check_episode`.
    """
    ids = list(task_ids)
    n = len(ids)
    succ = [None] * n if successes is None else list(successes)
    cst = [None] * n if costs is None else list(costs)
    rets = list(returns)
    if not len(rets) == len(succ) == len(cst) == n:
        raise ConfigError(
            "update_batch",
            (n, len(rets), len(succ), len(cst)),
            "task_ids, returns, successes and costs differ in length",
            source=source,
        )
    return ids, [check_episode(ids[i], rets[i], succ[i], cst[i]) for i in range(n)]


def check_episode_arrays(
    task_ids: Any, returns: Any, successes: Any, costs: Any, *, source: str | None = None
) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of episode reports into arrays; nothing is applied here.

    Returns:
        ``(task_ids, returns, successes, costs)``: the ids as given (the curriculum checks
        them), then float64 arrays, with NaN in ``successes`` where none was given and 0 in
        ``costs`` where none was given.

    Raises:
        ConfigError, NonFiniteValueError: as :func:`check_episodes`, for the first bad entry.

    Numeric arrays and lists of plain numbers are checked as arrays; anything else (``None``
    entries, mixed types) or any bad value goes through :func:`check_episode` one by one, which
    names the offending entry.
    """
    fast = _fast_arrays(task_ids, returns, successes, costs)
    if fast is not None:
        return (task_ids, *fast)
    ids, checked = check_episodes(task_ids, returns, successes, costs, source=source)
    n = len(checked)
    r = np.fromiter((x[0] for x in checked), np.float64, n)
    s = np.fromiter((math.nan if x[1] is None else x[1] for x in checked), np.float64, n)
    c = np.fromiter((x[2] for x in checked), np.float64, n)
    return ids, r, s, c


def _numeric(values: Any) -> np.ndarray | None:
    """``values`` as a 1-D float64 array if it is a plain numeric sequence (no bools), else None."""
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, list | tuple) and all(
        type(v) is float or type(v) is int for v in values
    ):
        arr = np.asarray(values, dtype=np.float64)
    else:
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        return None
    return arr.astype(np.float64, copy=False)


def _fast_arrays(
    task_ids: Any, returns: Any, successes: Any, costs: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    try:
        n = len(task_ids)
    except TypeError:
        return None
    r = _numeric(returns)
    if r is None or len(r) != n or not np.isfinite(r).all():
        return None
    s: np.ndarray | None
    if successes is None:
        s = np.full(n, math.nan)
    elif isinstance(successes, np.ndarray) and successes.dtype == np.bool_:
        s = successes.astype(np.float64)
    elif isinstance(successes, list | tuple) and all(type(v) is bool for v in successes):
        s = np.asarray(successes, dtype=np.float64)
    else:
        s = _numeric(successes)  # floats in [0, 1]; NaN fails the range test
        if s is None or not ((s >= 0.0) & (s <= 1.0)).all():
            return None
    if s.ndim != 1 or len(s) != n:
        return None
    c: np.ndarray | None = np.zeros(n) if costs is None else _numeric(costs)
    if c is None or len(c) != n or not np.isfinite(c).all():
        return None
    return r, s, c


def check_episode(
    task_id: Any, return_: Any, success: Any, cost: Any
) -> tuple[float, float | None, float]:
    """Validate one episode report; return ``(return, success or None, cost)`` as floats.

    Raises:
        NonFiniteValueError: the return or cost is NaN/inf, or success is NaN.
        ConfigError: a value has the wrong type, or success is outside ``[0, 1]``.
    """
    # Fast path for the common types: this runs once per episode.
    tr, ts, tc = type(return_), type(success), type(cost)
    if (
        (tr is float or tr is int)
        and (ts is bool or success is None)
        and (cost is None or tc is float or tc is int)
    ):
        r = float(return_)
        c = 0.0 if cost is None else float(cost)
        if math.isfinite(r) and math.isfinite(c):
            return r, (None if success is None else float(success)), c
    if not _num(return_):
        raise ConfigError("return_", return_, f"expected a number (task_id={task_id})")
    r = float(return_)
    if not math.isfinite(r):
        raise NonFiniteValueError(
            f"episode return of task_id={task_id} is {r}; the curriculum needs finite returns"
        )
    s: float | None = None
    if success is not None:
        if not (_num(success) or isinstance(success, bool | np.bool_)):
            raise ConfigError(
                "success", success, f"expected a bool or a float in [0, 1] (task_id={task_id})"
            )
        s = float(success)
        if math.isnan(s):
            raise NonFiniteValueError(f"success of task_id={task_id} is NaN")
        if not 0.0 <= s <= 1.0:
            raise ConfigError("success", success, f"expected a value in [0, 1] (task_id={task_id})")
    c = 0.0
    if cost is not None:
        if not _num(cost):
            raise ConfigError("cost", cost, f"expected a number (task_id={task_id})")
        c = float(cost)
        if not math.isfinite(c):
            raise NonFiniteValueError(f"episode cost of task_id={task_id} is {c}")
    return r, s, c


def record_episode(
    st: CurriculumState, cfg: SignalConfig, slot: int, r: float, success: float | None, c: float
) -> float:
    """Write one episode's statistics into ``slot``; return the signal ``s`` in ``[0, 1]``."""
    # Scalar reads use ``.item()`` (a Python float/int): ~3x faster than numpy scalars here.
    sc = st.scalars
    if success is not None and cfg.source != "return":
        s = success
    elif cfg.source == "success":
        raise ConfigError(
            "success", None, "SignalConfig(source='success') needs success= in every update"
        )
    elif cfg.return_range is not None:
        lo, hi = cfg.return_range
        s = min(max((r - lo) / (hi - lo), 0.0), 1.0)
    else:
        lo, hi = sc.item(S.RET_LO), sc.item(S.RET_HI)
        if r < lo:
            sc[S.RET_LO] = lo = r
        if r > hi:
            sc[S.RET_HI] = hi = r
        s = (r - lo) / (hi - lo) if hi > lo else 0.5
    if c > sc.item(S.COST_HI):
        sc[S.COST_HI] = c
    n = st.count.item(slot) + 1
    st.count[slot] = n
    st.age[slot] = st.age.item(slot) + 1
    if n == 1:
        st.fast[slot] = s
        st.slow[slot] = s
        st.w2[slot] = 1.0
        st.ret_ema[slot] = r
        st.cost_ema[slot] = c
    else:
        a = cfg.alpha
        inv = 1.0 / n
        b = a if a > inv else inv
        f = st.fast.item(slot)
        st.fast[slot] = f + b * (s - f)
        st.w2[slot] = (1.0 - b) * (1.0 - b) * st.w2.item(slot) + b * b
        ak = a * cfg.slow_factor
        w = st.slow.item(slot)
        st.slow[slot] = w + (ak if ak > inv else inv) * (s - w)
        g = st.ret_ema.item(slot)
        st.ret_ema[slot] = g + a * (r - g)
        if c != 0.0 or st.cost_ema.item(slot) != 0.0:
            h = st.cost_ema.item(slot)
            st.cost_ema[slot] = h + a * (c - h)
    if n <= cfg.baseline_episodes:
        m = st.base.item(slot)
        st.base[slot] = m + (s - m) / n
    cnt = st.counters
    cnt[K.UPDATES] = cnt.item(K.UPDATES) + 1
    return s


def episode_signals(
    st: CurriculumState, cfg: SignalConfig, r: np.ndarray, success: np.ndarray
) -> np.ndarray:
    """The signals of several episodes, as :func:`record_episode` computes them one by one.

    The running return range is advanced as it would be, episode by episode.

    ``success`` holds NaN where an episode gave none. The caller has checked that
    ``source="success"`` episodes all have one.
    """
    sc = st.scalars
    given = ~np.isnan(success) if cfg.source != "return" else np.zeros(len(r), dtype=bool)
    s = np.where(given, success, 0.0)
    rest = ~given
    if rest.any():
        rr = r[rest]
        if cfg.return_range is not None:
            lo, hi = cfg.return_range
            s[rest] = np.minimum(np.maximum((rr - lo) / (hi - lo), 0.0), 1.0)
        else:
            # the range seen *including* each episode: running min / max, started at the stored
            low = np.minimum.accumulate(np.concatenate(([sc.item(S.RET_LO)], rr)))[1:]
            high = np.maximum.accumulate(np.concatenate(([sc.item(S.RET_HI)], rr)))[1:]
            wide = high > low
            with np.errstate(invalid="ignore", divide="ignore"):
                s[rest] = np.where(wide, (rr - low) / np.where(wide, high - low, 1.0), 0.5)
            sc[S.RET_LO], sc[S.RET_HI] = low[-1], high[-1]
    return s


def record_episodes(
    st: CurriculumState,
    cfg: SignalConfig,
    slots: np.ndarray,
    r: np.ndarray,
    success: np.ndarray,
    c: np.ndarray,
) -> None:
    """Write several episodes' statistics, in order, vectorised.

    Gives the same state, bit for bit, as calling :func:`record_episode` for each
    (``success`` holds NaN for "not given").

    Vectorised: the episodes are applied in rounds, the k-th round holding every slot's k-th
    episode of the batch, so each round touches distinct slots and runs as a few array
    operations however many episodes it holds.
    """
    n_ep = len(slots)
    if n_ep == 0:
        return
    s = episode_signals(st, cfg, r, success)
    sc = st.scalars
    cmax = float(c.max())
    if cmax > sc.item(S.COST_HI):
        sc[S.COST_HI] = cmax
    # rank of each episode among the batch's episodes of its slot (0 for the first)
    order = np.argsort(slots, kind="stable")
    ss = slots[order]
    head = np.ones(n_ep, dtype=bool)
    head[1:] = ss[1:] != ss[:-1]
    start = np.flatnonzero(head)
    rank = np.empty(n_ep, dtype=np.int64)
    rank[order] = np.arange(n_ep) - np.repeat(start, np.diff(np.append(start, n_ep)))
    a, ak, m = cfg.alpha, cfg.alpha * cfg.slow_factor, cfg.baseline_episodes
    count, fast, slow, w2 = st.count, st.fast, st.slow, st.w2
    ret_ema, cost_ema, base = st.ret_ema, st.cost_ema, st.base
    top = int(rank.max())
    for k in range(top + 1):
        if top == 0:
            sl, sv, rv, cv = slots, s, r, c
        else:
            pick = rank == k
            sl, sv, rv, cv = slots[pick], s[pick], r[pick], c[pick]
        n = count[sl] + 1
        count[sl] = n
        st.age[sl] += 1
        first = n == 1
        inv = 1.0 / n
        b = np.where(a > inv, a, inv)
        f, w, g, h, q = fast[sl], slow[sl], ret_ema[sl], cost_ema[sl], w2[sl]
        fast[sl] = np.where(first, sv, f + b * (sv - f))
        w2[sl] = np.where(first, 1.0, (1.0 - b) * (1.0 - b) * q + b * b)
        slow[sl] = np.where(first, sv, w + np.where(ak > inv, ak, inv) * (sv - w))
        ret_ema[sl] = np.where(first, rv, g + a * (rv - g))
        moved = (cv != 0.0) | (h != 0.0)
        cost_ema[sl] = np.where(first, cv, np.where(moved, h + a * (cv - h), h))
        if m:
            early = n <= m
            if early.any():
                bs = sl[early]
                mb = base[bs]
                base[bs] = mb + (sv[early] - mb) / n[early]
    cnt = st.counters
    cnt[K.UPDATES] = cnt.item(K.UPDATES) + n_ep


def normalised_cost(st: CurriculumState, cfg: SignalConfig) -> np.ndarray:
    """Per-slot cost EMA divided by ``cost_limit`` (or the largest cost seen), clipped to [0, 1]."""
    scale = cfg.cost_limit if cfg.cost_limit is not None else float(st.scalars[S.COST_HI])
    if scale <= 0.0:
        return np.zeros_like(st.cost_ema)
    return np.clip(st.cost_ema / scale, 0.0, 1.0)
