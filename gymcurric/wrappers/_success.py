"""An episode's success from its last step's info: the one reading every wrapper shares.

``info["is_success"]``, else ``info["success"]``, else ``None`` (none reported). A key whose
value is ``None`` counts as absent, as in SB3 and Gymnasium, where ``None`` means "not
reported": ``{"is_success": None, "success": True}`` is a success, not a failure. The
curriculum wrappers (single-env and vector) and the datapack wrappers (through
:func:`gymcurric.wrappers.datapack.report_episode`) all read success with these functions.

In a Gymnasium vector env's infos a ``None`` survives only where no other sub-env reports a
``bool`` under the same key in that step: the vector env types each info array by the first
sub-env that has the key, so ``[False, None]`` arrives as ``[False, False]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["success_of", "successes_of"]

# in increasing priority: a value found under a later key replaces one found under an earlier
_SUCCESS_KEYS = (("success", "_success"), ("is_success", "_is_success"))


def success_of(info: dict[str, Any]) -> Any:
    """``info["is_success"]``, else ``info["success"]``, else ``None``; a ``None`` value is absent.

    Examples:
        >>> success_of({"is_success": None, "success": True})
        True
        >>> success_of({"is_success": False, "success": True})
        False
        >>> success_of({}) is None
        True
    """
    value = info.get("is_success")
    return info.get("success") if value is None else value


def successes_of(infos: dict[str, Any], envs: npt.NDArray[np.intp]) -> Any:
    """:func:`success_of` for ``envs`` of a vector env's infos (dicts of arrays, ``_key`` masks).

    A float64 array (NaN: none) when every value found is a bool; else a list of the values
    (``None``: none) for the curriculum to check one by one. A sub-env whose ``is_success``
    is ``None`` takes its ``success``, as :func:`success_of` does.

    Examples:
        >>> infos = {"is_success": np.array([None, False], dtype=object),
        ...          "success": np.array([True, True])}
        >>> successes_of(infos, np.array([0, 1]))
        [True, False]
    """
    found: list[tuple[np.ndarray, np.ndarray | None]] = []  # (values, mask; None: all)
    plain = True
    for key, mask_key in _SUCCESS_KEYS:
        values = infos.get(key)
        if values is None:
            continue
        values = np.asarray(values)
        mask = infos.get(mask_key)
        found.append((values[envs], None if mask is None else np.asarray(mask, dtype=bool)[envs]))
        plain = plain and values.dtype == np.bool_
    if plain:  # bool arrays hold no None
        out = np.empty(len(envs))
        out.fill(np.nan)
        for values, has in found:
            if has is None:
                out[:] = values
            else:
                out[has] = values[has]
        return out
    objs: list[Any] = [None] * len(envs)
    for values, has in found:
        for j in range(len(envs)) if has is None else np.flatnonzero(has):
            value = values[j].item() if isinstance(values[j], np.generic) else values[j]
            if value is not None:  # not reported: the earlier key's value stands
                objs[j] = value
    return objs
