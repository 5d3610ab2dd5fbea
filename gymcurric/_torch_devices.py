"""One check of a torch device argument: one torch knows, on a backend this machine has.

``torch.device`` takes any backend's name, and the first allocation on a device the machine
lacks fails deep in torch (``AssertionError: Torch not compiled with CUDA enabled``). Imports
torch: only the modules that need it (the replay ring, the Hugging Face embedders) import this.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gymcurric._checks import cut, shown
from gymcurric.errors import ConfigError

__all__ = ["usable_device"]


def usable_device(device: Any, source: str | None = None, hint: str = "'cpu'") -> torch.device:
    """``torch.device(device)``, or a ConfigError naming ``device`` where it cannot be used here.

    CUDA and MPS are asked whether they are there (and a CUDA index whether the machine has
    it); any other backend but the CPU and ``meta`` is tried with an empty tensor.

    Args:
        device: what the caller was given (``"cuda:1"``, a ``torch.device``, an index).
        source: who was given it, named in the error.
        hint: what to use instead, named in the error (``"'cpu'"``).

    Raises:
        ConfigError: ``device`` is not a torch device, or one this machine lacks.
    """
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        said = cut(str(exc).splitlines()[0])
        why = f"not a torch device ({said})"
        index = isinstance(device, int | np.integer) and not isinstance(device, bool)
        if index and device >= 0 and isinstance(exc, RuntimeError):
            # torch reads an int as an index of the machine's accelerator (CUDA's): none here
            why = f"an accelerator's index, but this machine has none ({said}); use {hint}"
        raise ConfigError("device", shown(device), why, source=source) from None
    missing = None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        missing = "CUDA is not available here"
    elif resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        missing = f"this machine has {torch.cuda.device_count()} CUDA device(s)"
    elif resolved.type == "mps" and not torch.backends.mps.is_available():
        missing = "MPS is not available here"
    elif resolved.type not in ("cpu", "meta", "cuda", "mps"):  # 'xpu', 'hpu', 'vulkan'...
        try:  # torch asserts or raises at the first allocation on a backend it lacks
            torch.empty(0, device=resolved)
        except (AssertionError, ImportError, NotImplementedError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            missing = f"torch cannot allocate on it here ({cut(first)})"
    if missing is not None:
        why = f"{missing} (torch {torch.__version__}); use {hint}"
        raise ConfigError("device", shown(device), why, source=source)
    return resolved
