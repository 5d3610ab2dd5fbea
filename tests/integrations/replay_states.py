"""Exact comparison of two RingReplayBuffer states, for the ``add`` tests.

Shared by ``test_sb3_replay_inputs.py`` and ``test_sb3_replay_refused.py``: :func:`assert_same`
compares nested dicts of tensors, numpy arrays and plain values to the bit (NaNs at the same
places are equal), naming the key that differs.
"""

from typing import Any

import numpy as np
import torch


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Assert ``a`` and ``b`` (a ``state_dict()``, a snapshot) hold the same values."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=where)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where
