"""Stratified weighted sampling shared by the strategies (pure functions over arrays).

The rules are documented in :mod:`gymcurric.datapacks.strategies`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gymcurric.errors import ConfigError


def round_counts(expected: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to ``n`` with ``E[count_i] == expected_i`` (``sum == n``)."""
    total = expected.sum()
    if total <= 0:
        return np.zeros(expected.shape, np.int64)
    cum = np.concatenate(([0.0], np.cumsum(expected * (n / total))))
    cum[-1] = n  # absorb rounding error so the counts sum to exactly n
    u = rng.random()
    return np.diff(np.floor(cum + 1.0 - u)).astype(np.int64)


def allocate(
    ratios: np.ndarray,
    capacity: np.ndarray,
    n: int,
    rng: np.random.Generator,
    fallback: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``n`` over strata; returns (counts without replacement, extra counts with)."""
    if capacity.sum() <= 0:
        raise ConfigError("batch_size", n, "no eligible datapack has a positive weight")
    # Strata that cannot hold their share keep it in this first round, so that the shortfall
    # is visible and can go to the fallback stratum before anything else.
    first = ratios if ratios.sum() > 0 else capacity.astype(np.float64)
    live = np.where(capacity > 0, first, 0.0)
    if live.sum() <= 0:
        live = capacity.astype(np.float64)
    counts = np.minimum(round_counts(first, n, rng), capacity)
    short = n - int(counts.sum())
    if fallback is not None and short > 0:
        give = min(short, int(capacity[fallback] - counts[fallback]))
        counts[fallback] += give
        short -= give
    for _ in range(len(ratios)):
        room = capacity - counts
        active = np.where(room > 0, live, 0.0)
        if short <= 0 or active.sum() <= 0:
            break
        add = np.minimum(round_counts(active, short, rng), room)
        counts += add
        short -= int(add.sum())
    extra = round_counts(live, short, rng) if short > 0 else np.zeros_like(counts)
    return counts, extra


def _first_draws(
    weights: np.ndarray, k: int, rng: np.random.Generator, cdf: np.ndarray | None = None
) -> np.ndarray | None:
    """``k`` distinct indices by weighted draws with replacement, keeping first occurrences.

    The distinct values of an i.i.d. weighted sequence, in order of first occurrence, are a
    successive weighted sample without replacement, the same law as the exponential keys in
    :func:`pick`; for ``k`` much smaller than the stratum this avoids a key per row. Gives up
    (``None``) after a few rounds when the weights are so skewed that repeats dominate.
    """
    if cdf is None:
        cdf = np.cumsum(weights)
    got = np.empty(0, np.int64)
    for _ in range(6):
        draws = np.searchsorted(cdf, rng.random(2 * k) * cdf[-1], side="right")
        cat = np.concatenate([got, np.minimum(draws, weights.size - 1)])
        _, idx = np.unique(cat, return_index=True)
        got = cat[np.sort(idx)]
        if got.size >= k:
            return got[:k]
    return None


def pick(
    rows: np.ndarray,
    weights: np.ndarray,
    k: int,
    extra: int,
    rng: np.random.Generator,
    cdf: np.ndarray | None = None,
) -> np.ndarray:
    """``k`` distinct rows drawn in proportion to ``weights``, then ``extra`` with replacement.

    Without replacement uses exponential keys (Efraimidis & Spirakis, 2006): the ``k`` rows with
    the smallest ``Exp(1) / w`` are a weighted sample without replacement.
    """
    out = []
    if k > 0:
        first = _first_draws(weights, k, rng, cdf) if 4 * k <= rows.size else None
        if first is not None:
            out.append(rows[first])
        else:
            with np.errstate(divide="ignore"):
                keys = rng.standard_exponential(rows.size) / weights
            part = np.argpartition(keys, k - 1)[:k] if k < rows.size else np.arange(rows.size)
            out.append(rows[part[np.argsort(keys[part], kind="stable")]])
    if extra > 0:
        p = weights / weights.sum()
        out.append(rows[rng.choice(rows.size, size=extra, p=p)])
    return np.concatenate(out) if out else np.empty(0, np.int64)


class Prepared(NamedTuple):
    """Strata reduced to their positive-weight rows, with cumulative weights (read-only)."""

    rows: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    cdf: tuple[np.ndarray, ...]
    capacity: np.ndarray


def prepare(strata: list[tuple[np.ndarray, np.ndarray]]) -> Prepared:
    """The per-batch-independent part of :func:`stratified` (cacheable while weights hold)."""
    kept = [(r[w > 0], w[w > 0]) for r, w in strata]
    cdf = [np.cumsum(w) for _, w in kept]
    for arr in [a for pair in kept for a in pair] + cdf:
        arr.setflags(write=False)
    capacity = np.array([r.size for r, _ in kept], np.int64)
    capacity.setflags(write=False)
    return Prepared(tuple(r for r, _ in kept), tuple(w for _, w in kept), tuple(cdf), capacity)


def draw(
    prep: Prepared,
    ratios: np.ndarray,
    n: int,
    rng: np.random.Generator,
    fallback: int | None = None,
) -> np.ndarray:
    """Rows drawn from prepared strata as :func:`allocate` splits ``n``."""
    counts, extra = allocate(np.asarray(ratios, np.float64), prep.capacity, n, rng, fallback)
    parts = [
        pick(r, w, int(c), int(e), rng, cdf)
        for r, w, cdf, c, e in zip(prep.rows, prep.weights, prep.cdf, counts, extra, strict=True)
        if c or e
    ]
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


def stratified(
    strata: list[tuple[np.ndarray, np.ndarray]],
    ratios: np.ndarray,
    n: int,
    rng: np.random.Generator,
    fallback: int | None = None,
) -> np.ndarray:
    """Rows drawn from ``strata`` (``(rows, weights)`` pairs) as :func:`allocate` splits ``n``."""
    return draw(prepare(strata), ratios, n, rng, fallback)
