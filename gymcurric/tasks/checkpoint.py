"""Curriculum checkpoints: the state-dict format tag and the checks a loaded state dict passes.

:func:`save_state` makes a state dict and :func:`load_state` writes a checked one back: plain
functions behind :meth:`Curriculum.state_dict <gymcurric.tasks.Curriculum.state_dict>` and
:meth:`Curriculum.load_state_dict <gymcurric.tasks.Curriculum.load_state_dict>`.

A state dict is checked whole before anything is written (so a refused one leaves the curriculum
as it was): its format and configuration, the names, shapes and dtypes of its arrays, the
invariants the arrays keep (:func:`state_problems`), the generator state and the disabled keys.

Older formats load: a state dict saved before a config key or a state array existed is read
as the state it was (:data:`ADDED_KEYS`, :data:`ADDED_ARRAYS`, :data:`EARLIER_COUNTERS`), and
behaves as it did when it was saved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from gymcurric.errors import DataError
from gymcurric.tasks.state import EMPTY, SLOT_FIELDS, CurriculumState, K, S

if TYPE_CHECKING:
    from gymcurric.tasks.links import StateLink
    from gymcurric.tasks.membership import Membership
    from gymcurric.tasks.pools import Pool

__all__ = [
    "ADDED_ARRAYS",
    "ADDED_KEYS",
    "EARLIER_COUNTERS",
    "EARLIER_FORMATS",
    "STATE_FORMAT",
    "check_state_dict",
    "load_state",
    "save_state",
    "state_problems",
    "upgrade_arrays",
]

#: Format tag written into every state dict.
STATE_FORMAT = "gymcurric.curriculum/2"
#: Format tags of earlier state dicts that still load. ``/1``: before the regret scores (no
#: ``score``, ``scored`` and ``last_sampled`` arrays; 21 counters).
EARLIER_FORMATS = ("gymcurric.curriculum/1",)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


#: Config keys added after states were first saved, with the value that reproduces what those
#: states were made with: a saved config without the key matches a current config holding it.
ADDED_KEYS: dict[str, Any] = {
    "scorer.noise_z": 0.0,
    "scorer.weighting": "sigmoid",
    "scorer.fallback": "uniform",
}

#: Per-slot arrays added after states were first saved, with the value every slot of a state
#: without them gets: no score and a staleness clock at 0 (read by no scorer those states
#: could be saved with, so they behave as before).
ADDED_ARRAYS: dict[str, float | int] = {"score": 0.0, "scored": 0, "last_sampled": 0}
#: Lengths of the ``counters`` vector in earlier formats: a saved vector of one of these lengths
#: is padded with zeros (the counters added since, all of events those states never saw).
EARLIER_COUNTERS = (21,)


def upgrade_arrays(arrays: Mapping[str, Any], own: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The arrays of an earlier-format state dict in the current layout (copies where changed).

    Arrays listed in :data:`ADDED_ARRAYS` that ``arrays`` lacks are filled in, and ``counters``
    of an earlier length is padded; anything else is left for :func:`check_state_dict` to judge.
    """
    out = dict(arrays)
    for name, value in ADDED_ARRAYS.items():
        if name not in out and name in own:
            out[name] = np.full(own[name].shape, value, dtype=own[name].dtype)
    counters = np.asarray(out.get("counters"))
    if counters.ndim == 1 and counters.shape[0] in EARLIER_COUNTERS and "counters" in own:
        padded = np.zeros(own["counters"].shape, dtype=own["counters"].dtype)
        padded[: counters.shape[0]] = counters
        out["counters"] = padded
    return out


def check_state_dict(
    spec: Mapping[str, Any],
    own: Mapping[str, np.ndarray],
    state: Any,
    *,
    key_limit: int | None = None,
    pool: Pool | None = None,
) -> dict[str, np.ndarray]:
    """Check ``state`` against a curriculum's config ``spec`` and arrays; return its arrays.

    Args:
        spec: the curriculum's ``config_spec()``.
        own: the curriculum's state arrays (names, shapes and dtypes to match).
        state: what was passed to ``load_state_dict``.
        key_limit: task keys lie in ``[0, key_limit)``; ``None``: not checked.
        pool: the curriculum's pool, for its part of the invariants (labels, ``rho``).

    Raises:
        DataError: the state dict is malformed, comes from another configuration (the message
            lists the differing keys), or its arrays break the state's invariants (the message
            names the array, the entry and the value).
    """
    fmt = state.get("format") if isinstance(state, Mapping) else None
    if not isinstance(state, Mapping) or (fmt != STATE_FORMAT and fmt not in EARLIER_FORMATS):
        got = fmt if isinstance(state, Mapping) else type(state).__name__
        raise DataError(
            f"not a curriculum state dict (format {got!r}, expected {STATE_FORMAT!r} or one of "
            f"the earlier {list(EARLIER_FORMATS)})"
        )
    mine, theirs = _flatten(spec), _flatten(state.get("config", {}))
    for key, value in ADDED_KEYS.items():
        if key in mine and key not in theirs and mine[key] == value:
            theirs[key] = value
    diff = [
        f"{k}: saved {theirs.get(k, '<missing>')!r}, current {mine.get(k, '<missing>')!r}"
        for k in sorted(set(mine) | set(theirs))
        if mine.get(k) != theirs.get(k)
    ]
    if diff:
        hint = ""
        saved = theirs.get("scorer.weighting", "sigmoid" if "scorer.theta" in theirs else None)
        if saved == "sigmoid" and mine.get("scorer.weighting") == "proportional":
            hint = (
                " (a state saved with gymcurric 0.1's learning-progress defaults loads into a"
                " curriculum built with scorer=LearningProgressScorer.v1() and"
                " signal=SignalConfig(alpha=0.1))"
            )
        raise DataError(
            "curriculum state dict comes from another configuration: " + "; ".join(diff) + hint
        )
    arrays = state.get("arrays")
    if fmt != STATE_FORMAT and isinstance(arrays, Mapping):
        arrays = upgrade_arrays(arrays, own)
    if not isinstance(arrays, Mapping) or set(arrays) != set(own):
        names = sorted(arrays) if isinstance(arrays, Mapping) else type(arrays).__name__
        raise DataError(f"curriculum state dict arrays {names} != expected {sorted(own)}")
    checked: dict[str, np.ndarray] = {}
    for name, dst in own.items():
        src = np.asarray(arrays[name])
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise DataError(
                f"curriculum state array {name!r}: saved {src.dtype}{src.shape}, "
                f"expected {dst.dtype}{dst.shape}"
            )
        checked[name] = src
    problems = state_problems(CurriculumState(checked), key_limit=key_limit, pool=pool)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise DataError("curriculum state breaks its invariants: " + "; ".join(problems[:3]) + more)
    if "rng" not in state:
        raise DataError("curriculum state dict has no 'rng' (the sampling generator's state)")
    try:
        np.random.PCG64().state = state["rng"]
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise DataError(
            f"curriculum state 'rng' is not a PCG64 generator state ({type(exc).__name__}: {exc})"
        ) from exc
    disabled = state.get("disabled", [])
    limit = key_limit if key_limit is not None else np.iinfo(np.int64).max
    if not isinstance(disabled, list | tuple) or not all(
        isinstance(k, int | np.integer) and not isinstance(k, bool) and 0 <= k < limit
        for k in disabled
    ):
        raise DataError(
            f"curriculum state 'disabled' must be a list of task keys in [0, {limit}); "
            f"got {disabled!r}"[:300]
        )
    return checked


def save_state(
    spec: Mapping[str, Any],
    st: CurriculumState,
    rng: np.random.Generator,
    disabled: Iterable[int],
) -> dict[str, Any]:
    """A state dict: copies of the arrays, the generator state, the disabled keys and ``spec``.

    Called under the curriculum's lock, with its ``config_spec()``.
    """
    return {
        "format": STATE_FORMAT,
        "config": spec,
        "arrays": {k: v.copy() for k, v in st.arrays().items()},
        "rng": rng.bit_generator.state,
        "disabled": sorted(disabled),
    }


def load_state(
    link: StateLink,
    members: Membership,
    rng: np.random.Generator,
    own: Mapping[str, np.ndarray],
    arrays: Mapping[str, np.ndarray],
    state: Mapping[str, Any],
) -> None:
    """Write a state dict that :func:`check_state_dict` passed, under the link's lock.

    Args:
        link: how this process reaches the state (for a shared one, every process sees the
            new arrays and disabled keys).
        members: the curriculum's slots (their disabled keys and id map are rebuilt).
        rng: the generator that takes the saved state (this process's).
        own: the live state arrays, overwritten.
        arrays: what :func:`check_state_dict` returned for ``state``.
        state: the state dict (its generator state and disabled keys).
    """
    with link.lock:
        link.enter("load_state_dict")
        with link.publish():
            for name, dst in own.items():
                np.copyto(dst, arrays[name])
        rng.bit_generator.state = state["rng"]
        members.reset_disabled(state.get("disabled", []))
        link.share_all_disabled()


# Slack for values that rounding may push a hair past their bounds (EMAs of values in [0, 1]).
_TOL = 1e-9


def _first(name: str, values: np.ndarray, bad: np.ndarray, expected: str) -> list[str]:
    """``["name[i] = v (expected ...)"]`` for the first ``bad`` entry, or ``[]``."""
    hits = np.flatnonzero(bad)
    if not hits.size:
        return []
    i = int(hits[0])
    more = f", {hits.size - 1} more" if hits.size > 1 else ""
    return [f"{name}[{i}] = {values.flat[i].item()!r} ({expected}{more})"]


def state_problems(
    st: CurriculumState, *, key_limit: int | None = None, pool: Pool | None = None
) -> list[str]:
    """What is wrong with a curriculum state's arrays (empty: nothing); nothing is written.

    Checked: every float is finite (only the running return bounds start at +-inf); task keys
    are -1 (empty slot) or in ``[0, key_limit)``, unique, and empty exactly where the pool label
    is; counters (and the per-slot counts) are non-negative, and a task's ``last_sampled`` is
    at most the sample counter; the EMAs of signals in [0, 1] stay in [0, 1]; ``prob`` is a
    distribution over the slots consistent with the cumulative arrays ``cdf_a``/``cdf_b`` it
    is drawn from; the promotion window holds 0/1 outcomes that its counters add up; and the
    pool's own invariants (:meth:`~gymcurric.tasks.pools.Pool.state_problems`).
    """
    out: list[str] = []
    cap = st.capacity
    for name in SLOT_FIELDS:
        values = getattr(st, name)
        if values.dtype.kind == "f":
            out += _first(name, values, ~np.isfinite(values), "expected a finite number")
    if out:
        return out  # the range checks below assume finite values
    ids, labels = st.task_id, st.pool
    limit = key_limit if key_limit is not None else np.iinfo(np.int64).max
    out += _first(
        "task_id", ids, (ids < -1) | (ids >= limit), f"expected -1 or a task key in [0, {limit})"
    )
    live = ids >= 0
    keys, counts = np.unique(ids[live], return_counts=True)
    if (counts > 1).any():
        out.append(f"task_id: key {int(keys[counts > 1][0])} is held by more than one slot")
    out += _first("pool", labels, (labels < EMPTY) | (labels > 1), "expected a label -1, 0 or 1")
    out += _first("pool", labels, (labels == EMPTY) != ~live, "empty exactly where task_id is -1")
    for name in ("count", "age", "samples", "scored"):
        out += _first(name, getattr(st, name), getattr(st, name) < 0, "expected a count >= 0")
    clock, stamps = int(st.counters[K.SAMPLES]), st.last_sampled
    out += _first(
        "last_sampled",
        stamps,
        (stamps < 0) | (stamps > clock),
        f"expected a sample count in [0, counters[SAMPLES] = {clock}]",
    )
    for name in ("fast", "slow", "base", "w2", "prob"):  # EMAs of [0, 1] signals, weights
        v = getattr(st, name)
        out += _first(name, v, (v < -_TOL) | (v > 1.0 + _TOL), "expected a value in [0, 1]")
    c, sc = st.counters, st.scalars
    named = {v: k for k, v in vars(K).items() if isinstance(v, int) and k != "N"}
    for i in range(K.N):
        hi: int | None
        lo, hi = (-1, cap - 1) if i in (K.LAST_A, K.LAST_B) else (0, None)
        if i in (K.PHASE, K.DIRTY):
            hi = 1
        if c[i] < lo or (hi is not None and c[i] > hi):
            span = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            out.append(f"counters[{named[i]}] = {int(c[i])} (expected {span})")
    win = st.window
    out += _first("window", win, (win != 0) & (win != 1), "expected 0 or 1 outcomes")
    fill, pos = int(c[K.WIN_FILL]), int(c[K.WIN_POS])
    if fill > win.size or pos >= win.size or int(c[K.WIN_SUM]) != int(win.sum()):
        out.append(
            f"promotion window counters fill={fill}, pos={pos}, sum={int(c[K.WIN_SUM])} do not "
            f"fit a window of {win.size} holding {int(win.sum())} promotions"
        )
    names_s = {v: k for k, v in vars(S).items() if isinstance(v, int) and k != "N"}
    for i in range(S.N):
        value = float(sc[i])
        if i in (S.RHO, S.PROMO_RATE, S.STAGE_SUCCESS):
            if not -_TOL <= value <= 1.0 + _TOL:
                out.append(f"scalars[{names_s[i]}] = {value!r} (expected a value in [0, 1])")
        elif i not in (S.RET_LO, S.RET_HI) and not np.isfinite(value):
            out.append(f"scalars[{names_s[i]}] = {value!r} (expected a finite number)")
    ret_lo, ret_hi = float(sc[S.RET_LO]), float(sc[S.RET_HI])
    if not (ret_lo == np.inf and ret_hi == -np.inf) and not (
        np.isfinite(ret_lo) and np.isfinite(ret_hi) and ret_lo <= ret_hi
    ):
        out.append(
            f"return bounds scalars[RET_LO] = {ret_lo!r}, scalars[RET_HI] = {ret_hi!r} "
            "(expected finite lo <= hi, or inf and -inf before the first episode)"
        )
    if out:
        return out
    # prob and the cumulative arrays sample() reads: each cdf is the running sum of one pool's
    # distribution (total 1, or 0 for an empty pool), prob their explore-probability mixture
    pdf = []
    for name, total in (("cdf_a", S.TOTAL_A), ("cdf_b", S.TOTAL_B)):
        cdf = getattr(st, name)
        step = np.diff(cdf, prepend=0.0)
        out += _first(name, cdf, step < -_TOL, "expected a non-decreasing running sum >= 0")
        last = float(cdf[-1])
        if not (abs(last) <= 1e-6 or abs(last - 1.0) <= 1e-6) or sc[total] != last:
            out.append(
                f"{name} ends at {last!r} with scalars[{names_s[total]}] = "
                f"{float(sc[total])!r} (expected equal totals of 1, or 0 for an empty pool)"
            )
        pdf.append(step)
    if out:
        return out
    rho = pool.explore_probability(st) if pool is not None else 1.0
    mix = rho * pdf[0] + (1.0 - rho) * pdf[1]
    out += _first(
        "prob",
        st.prob,
        np.abs(st.prob - mix) > 1e-6,
        "expected the distribution the cumulative arrays cdf_a/cdf_b encode",
    )
    if pool is not None:
        out += pool.state_problems(st)
    return out
