"""Curriculum checkpoints: the state-dict format tag and the checks a loaded state dict passes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gymcurric.errors import DataError

__all__ = ["STATE_FORMAT", "check_state_dict"]

#: Format tag written into every state dict.
STATE_FORMAT = "gymcurric.curriculum/1"


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def check_state_dict(
    spec: Mapping[str, Any], own: Mapping[str, np.ndarray], state: Any
) -> Mapping[str, Any]:
    """Check ``state`` against a curriculum's config ``spec`` and arrays; return its arrays.

    Args:
        spec: the curriculum's ``config_spec()``.
        own: the curriculum's state arrays (names, shapes and dtypes to match).
        state: what was passed to ``load_state_dict``.

    Raises:
        DataError: the state dict is malformed or comes from another configuration (the message
            lists the differing keys).
    """
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise DataError(f"not a curriculum state dict (format {got!r}, expected {STATE_FORMAT!r})")
    mine, theirs = _flatten(spec), _flatten(state.get("config", {}))
    diff = [
        f"{k}: saved {theirs.get(k, '<missing>')!r}, current {mine.get(k, '<missing>')!r}"
        for k in sorted(set(mine) | set(theirs))
        if mine.get(k) != theirs.get(k)
    ]
    if diff:
        raise DataError(
            "curriculum state dict comes from another configuration: " + "; ".join(diff)
        )
    arrays = state.get("arrays")
    if not isinstance(arrays, Mapping) or set(arrays) != set(own):
        raise DataError(
            f"curriculum state dict arrays {sorted(arrays or [])} != expected {sorted(own)}"
        )
    for name, dst in own.items():
        src = np.asarray(arrays[name])
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise DataError(
                f"curriculum state array {name!r}: saved {src.dtype}{src.shape}, "
                f"expected {dst.dtype}{dst.shape}"
            )
    return arrays
