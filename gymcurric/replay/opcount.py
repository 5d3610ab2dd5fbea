"""Count the torch operations and host synchronisations a block of code dispatches.

:func:`count_ops` is a context manager built on a ``TorchDispatchMode``: every aten operation
the block runs is counted, and the ones that make the host wait for a device are listed as
*syncs*. The replay tests use it to put a ceiling on the operations of a push or a draw and to
assert that the device path never reads a device value on the host; ``benchmarks/replay.py``
reports its counts beside the timings. It works on any device: on CPU nothing actually
synchronises, but the same operations would on CUDA, so a CPU run finds them without a GPU.

A sync is one of:

* an operation that returns a device value to Python (``.item()``, ``bool(t)``, ``int(t)``:
  ``aten._local_scalar_dense``), or whose output shape depends on the data (``nonzero``,
  ``masked_select``, ``unique``, boolean-mask indexing, ``repeat_interleave`` without its
  output size);
* a copy from a device to the host, or a blocking copy from the host to a device (torch
  synchronises the stream after it);
* with ``host_reads=True``, a ``Tensor.numpy()``/``Tensor.tolist()`` call (``np.asarray(t)``
  included), which dispatches nothing on CPU but copies out of a CUDA tensor. Leave it off
  where the code legitimately converts host tensors.

Copies from the host to a device are also listed as ``transfers`` (non-blocking ones are not
syncs, but each is a launch and a staging copy).

Examples:
    >>> import torch
    >>> x = torch.arange(6)
    >>> with count_ops() as counted:
    ...     y = (x * 2).view(2, 3)
    ...     flag = bool(y.any())
    >>> counted.kernels, counted.views, counted.syncs
    (3, 1, ['aten._local_scalar_dense.default'])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["OpCount", "count_ops"]

#: operations whose output shape depends on the values (the host must read them first)
_DATA_DEPENDENT = frozenset(
    {
        "_local_scalar_dense",
        "item",
        "nonzero",
        "masked_select",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "equal",
    }
)
#: operations that allocate or relabel memory without launching a kernel
_NO_KERNEL = frozenset(
    {"empty", "empty_strided", "empty_like", "_unsafe_view", "lift_fresh", "set_", "resize_"}
)


@dataclass
class OpCount:
    """What a :func:`count_ops` block dispatched.

    Attributes:
        ops: every aten operation, by overload name (``"aten.index_select.default"``).
        kernels: operations that launch work (not views, allocations or relabellings): the
            figure to compare with a device's kernel launches.
        views: view operations (no work on any device).
        syncs: the operations that would make the host wait for a device (see the module).
        transfers: host-to-device copies, ``"<op> <source> -> <destination>"``.
    """

    ops: Counter[str] = field(default_factory=Counter)
    kernels: int = 0
    views: int = 0
    syncs: list[str] = field(default_factory=list)
    transfers: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: kernels, views, syncs and transfers."""
        return (
            f"{self.kernels} kernels, {self.views} views, {len(self.syncs)} syncs, "
            f"{len(self.transfers)} host->device copies"
        )


def _device_of(value: Any) -> torch.device | None:
    return value.device if isinstance(value, torch.Tensor) else None


def _has_bool_index(indices: Any) -> bool:
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
        for i in (indices or ())
    )


class _Counter(TorchDispatchMode):
    def __init__(self, counted: OpCount) -> None:
        super().__init__()
        self.counted = counted

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        counted = self.counted
        name = str(func)
        base = func.overloadpacket.__name__  # "add" for aten::add.Tensor
        counted.ops[name] += 1
        if func.is_view or base in ("detach", "alias"):
            counted.views += 1
        elif base not in _NO_KERNEL:
            counted.kernels += 1
        sync = base in _DATA_DEPENDENT
        if base in ("index", "index_put", "index_put_", "_index_put_impl_"):
            sync = _has_bool_index(args[1] if len(args) > 1 else kwargs.get("indices"))
        elif base == "repeat_interleave" and isinstance(args[0], torch.Tensor):
            sync = kwargs.get("output_size") is None
        elif base in ("copy_", "_to_copy"):
            if base == "copy_":
                source, target = _device_of(args[1]), _device_of(args[0])
                blocking = not (args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
                scalar = isinstance(args[1], torch.Tensor) and args[1].dim() == 0
            else:
                source, target = _device_of(args[0]), kwargs.get("device")
                blocking = not kwargs.get("non_blocking", False)
                scalar = False
            if source is not None and target is not None and source.type != target.type:
                if target.type == "cpu":
                    sync = True  # the host waits for the device's data
                elif source.type == "cpu" and not scalar:  # a 0-dim host source is a fill
                    counted.transfers.append(f"{name} {source} -> {target}")
                    sync = blocking
        if sync:
            counted.syncs.append(name)
        return func(*args, **kwargs)


@contextmanager
def count_ops(*, host_reads: bool = False) -> Iterator[OpCount]:
    """Count what the block dispatches (see the module docstring).

    Args:
        host_reads: also count ``Tensor.numpy()`` and ``Tensor.tolist()`` calls as syncs.

    Yields:
        An :class:`OpCount`, filled in as the block runs.
    """
    counted = OpCount()
    patched: dict[str, Any] = {}  # method -> what torch.Tensor's own dict held (None: nothing)
    if host_reads:
        for method in ("numpy", "tolist"):
            original = getattr(torch.Tensor, method)

            def reading(
                self: torch.Tensor, *a: Any, _m: Any = original, _n: str = method, **k: Any
            ) -> Any:
                counted.syncs.append(f"Tensor.{_n}")
                return _m(self, *a, **k)

            patched[method] = torch.Tensor.__dict__.get(method)
            setattr(torch.Tensor, method, reading)
    try:
        with _Counter(counted):
            yield counted
    finally:
        for method, own in patched.items():
            if own is None:
                delattr(torch.Tensor, method)  # inherited from torch._C.TensorBase again
            else:
                setattr(torch.Tensor, method, own)
