"""A CUDA stand-in on the CPU: rings that copy host data as CUDA rings do, and a log of it.

A ring copies host data to its device with ``non_blocking=storage.non_blocking and
pageable(source)`` (``non_blocking_copy`` decides once per ring: CUDA only). No test here has
a GPU, and a ring on the meta device (``test_ring_ops.py``) stores no values, so
:func:`stand_in_ring` makes a CPU ring (device index) take CUDA's path at every copy site: its
decision is True (``non_blocking_copy`` as ``RingStorage`` sees it while the ring is made) and
its writer copies host data as it does off the CPU (``DeviceWriter.to_device``). On the CPU
those copies store what a plain ring stores (``.to`` of a CPU tensor to the CPU is the tensor).

:func:`record_copies` logs every copy of host data to the ring's device: each ``Tensor.to``
given a device, and each ``Tensor.copy_`` into other memory, whose source is host memory (a
tensor ``torch.from_numpy`` made in the block: the ring's view of a caller's array, or of a
buffer of its own). ``count_ops`` (``gymcurric/replay/opcount.py``) sees copies as torch
dispatches them, but the ``.to`` of a CPU tensor to the CPU dispatches nothing, so the log is
kept at the Python calls. :meth:`CopyLog.pin` marks a caller's array as pinned memory
(``Tensor.is_pinned`` is True for tensors over it, as it is for a numpy view of a pinned
staging tensor on CUDA).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gymcurric.replay import ReplayRing
from gymcurric.replay import storage as storage_module
from gymcurric.replay.device_writes import DeviceWriter


def stand_in_ring(*args: Any, decision: bool = True, **kwargs: Any) -> ReplayRing:
    """A CPU ring on the device index that copies host data at every site CUDA's copies it.

    ``decision`` is the ring's ``non_blocking``: True as on CUDA (``non_blocking_copy`` is
    patched while the ring is made, nowhere else: later copies must use the ring's decision),
    False the CPU's own (as on MPS or xpu).
    """
    write_as_off_cpu = DeviceWriter.__init__

    def init(writer: DeviceWriter, storage: Any) -> None:
        write_as_off_cpu(writer, storage)
        writer.to_device = True  # copy_in and the staged row's .to run, as off the CPU

    with pytest.MonkeyPatch.context() as m:
        m.setattr(DeviceWriter, "__init__", init)
        if decision:
            m.setattr(storage_module, "non_blocking_copy", lambda device: True)
        ring = ReplayRing(*args, index_strategy="device", **kwargs)
    assert ring.device.type == "cpu" and ring.non_blocking is decision
    return ring


@dataclass(frozen=True)
class Copy:
    """One copy of host data to the ring's device."""

    site: str  #: ``file:function`` of the call
    caller: str  #: ``file:function`` that called the site
    pinned: bool  #: the source is (a view of) a pinned array
    non_blocking: bool  #: what the call passed


@dataclass
class CopyLog:
    """What :func:`record_copies` saw."""

    copies: list[Copy] = field(default_factory=list)
    #: (start, end) addresses of the arrays :meth:`pin` marked
    pinned: list[tuple[int, int]] = field(default_factory=list)
    #: those arrays, kept alive: a later array at a freed one's address would count as pinned
    pinned_arrays: list[np.ndarray] = field(default_factory=list)
    #: the tensors ``torch.from_numpy`` made in the block (kept alive: no address is reused)
    host: list[torch.Tensor] = field(default_factory=list)

    def pin(self, array: np.ndarray) -> np.ndarray:
        """Mark ``array`` as pinned memory (its tensors' ``is_pinned()`` is True); returned."""
        start = array.__array_interface__["data"][0]
        self.pinned.append((start, start + array.nbytes))
        self.pinned_arrays.append(array)
        return array

    def is_pinned(self, tensor: torch.Tensor) -> bool:
        address = tensor.data_ptr()
        return tensor.device.type == "cpu" and any(a <= address < b for a, b in self.pinned)

    def is_host(self, tensor: Any) -> bool:
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu":
            return False
        address = tensor.data_ptr()
        for made in self.host:
            storage = made.untyped_storage()
            if storage.data_ptr() <= address < storage.data_ptr() + storage.nbytes():
                return True
        return False

    def add(self, source: torch.Tensor, non_blocking: Any) -> None:
        site, caller = sys._getframe(2), sys._getframe(3)
        self.copies.append(
            Copy(
                f"{Path(site.f_code.co_filename).name}:{site.f_code.co_name}",
                f"{Path(caller.f_code.co_filename).name}:{caller.f_code.co_name}",
                self.is_pinned(source),
                bool(non_blocking),
            )
        )


def misdecided(copies: list[Copy], decision: bool) -> list[Copy]:
    """The ``copies`` that break the rule: non-blocking iff the ring's ``decision`` and the
    source is pageable (not pinned)."""
    return [c for c in copies if c.non_blocking != (decision and not c.pinned)]


@contextmanager
def record_copies() -> Iterator[CopyLog]:
    """Log the copies of host data to the ring's device made in the block (see the module)."""
    log = CopyLog()
    to, copy_, from_numpy = torch.Tensor.to, torch.Tensor.copy_, torch.from_numpy

    def logged_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, torch.device | str) and log.is_host(self):
            # to(device, dtype=None, non_blocking=False, copy=False)
            log.add(self, kwargs.get("non_blocking", len(args) > 2 and args[2]))
        return to(self, *args, **kwargs)

    def logged_copy_(self: torch.Tensor, source: Any, non_blocking: bool = False) -> Any:
        if log.is_host(source) and not log.is_host(self):
            log.add(source, non_blocking)
        return copy_(self, source, non_blocking)

    def logged_from_numpy(array: np.ndarray) -> torch.Tensor:
        tensor = from_numpy(array)
        log.host.append(tensor)
        return tensor

    with pytest.MonkeyPatch.context() as m:
        m.setattr(torch.Tensor, "to", logged_to)
        m.setattr(torch.Tensor, "copy_", logged_copy_)
        m.setattr(torch.Tensor, "is_pinned", lambda self, device=None: log.is_pinned(self))
        m.setattr(torch, "from_numpy", logged_from_numpy)
        yield log
