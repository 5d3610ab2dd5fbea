"""Read and rewrite the members of a curriculum checkpoint file (an ``.npz``) on disk.

Shared by the tests that damage or inspect saved checkpoints: ``test_curriculum_state.py``,
``test_curriculum_resave.py``, the vector resume tests and ``tests/train/test_callbacks.py``.
"""

import numpy as np


def members(path):
    """Every member of the checkpoint at ``path``, by name."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def rewrite(path, **changes):
    """Rewrite the checkpoint at ``path`` with some members replaced (``None``: dropped)."""
    m = members(path)
    for key, value in changes.items():
        if value is None:
            m.pop(key)
        else:
            m[key] = value
    with open(path, "wb") as f:
        np.savez(f, **m)
