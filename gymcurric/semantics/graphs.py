"""Static-buffer runs of a batched torch function, replayed as CUDA graphs (``graphs=True``).

Torch-level module: importing it imports torch (the ``semantic`` extra).

A ViT-B/32 forward pass of 64 frames on a fast GPU is launch-bound: the host spends about
10 µs dispatching each of its few hundred kernels, so the pass takes nearly the same time at
16 frames as at 64 (issue 24 measured 6.8 ms and 7.3 ms on an H200). A CUDA graph replays all
of them with one launch. :class:`StaticGraphRunner` does this for any function of a batch whose
rows are independent (the image embedder's preprocessing plus forward pass:
``HFVisionLanguageEmbedder(graphs=True)``):

1. **Buckets.** A batch of ``n`` rows is padded to ``bucket_size(n)``, the next power of two,
   so that a vector env whose sub-envs drop out for a reset step (63 frames instead of 64)
   reuses the graph of 64 instead of capturing a new one. One *slot* per ``(bucket, row
   shape, dtype)`` holds the static input on the device, a pinned host staging copy of it
   (CUDA only) and the static output. At most ``max_slots`` slots are kept, the least
   recently used one dropped first (with its graph and memory pool).
2. **Fill.** The ``n`` rows are copied into the static input: numpy arrays (and host tensors)
   through the pinned staging buffer with a non-blocking copy, device tensors device to
   device. Rows ``n`` to the bucket keep what they held; their outputs are dropped, so the
   function must treat rows independently (a ViT and the torch preprocessing do; batch norm
   in training mode would not).
3. **Run.** ``out.copy_(fn(inputs))`` on the static buffers. On CUDA the first call of a slot
   runs ``fn`` ``warmup`` times on a side stream (torch's recipe: lazy initialisation and
   cuBLAS workspaces happen outside the capture), then captures that line once with
   ``torch.cuda.CUDAGraph``; every call replays the graph. On any other device the same line
   runs eagerly, so a CPU run exercises the same buffers, padding and copies (only the
   capture and the replay are CUDA-only).
4. **Read.** :meth:`StaticGraphRunner.__call__` copies the first ``n`` output rows to a new
   host array: the call's only host synchronisation (the copy in and the replay are
   asynchronous), and the caller owns the array, which later calls do not touch.
   :meth:`StaticGraphRunner.run` returns the device rows instead: a view of the static output,
   overwritten by the next call.

Everything runs under ``torch.no_grad()`` rather than ``inference_mode()``: a graph captured
in inference mode can leave inference tensors behind that a later capture outside it may not
update (pytorch/pytorch#166792).

Example:
    >>> import numpy as np, torch
    >>> runner = StaticGraphRunner(lambda x: x.float().sum(dim=(1, 2)), "cpu")
    >>> runner.mode, bucket_size(3)
    ('eager', 4)
    >>> a = runner(np.ones((3, 2, 2), np.uint8))
    >>> b = runner(np.full((3, 2, 2), 2, np.uint8))  # same slot, refilled: a is untouched
    >>> a.tolist(), b.tolist(), runner.slot_keys()
    ([4.0, 4.0, 4.0], [8.0, 8.0, 8.0], [(4, (2, 2), torch.uint8)])
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric._optional import import_optional
from gymcurric.errors import ConfigError, GymcurricError
from gymcurric.semantics.base import is_oom_error

torch = import_optional("torch", "semantic", purpose="for static-buffer (CUDA graph) runs")

__all__ = ["GraphCaptureError", "StaticGraphRunner", "bucket_size"]

SlotKey = tuple[int, tuple[int, ...], Any]


class GraphCaptureError(GymcurricError, RuntimeError):
    """Capturing a CUDA graph failed (e.g. the function synchronises with the host)."""


def bucket_size(n: int) -> int:
    """The padded batch size for ``n`` rows: the next power of two ``≥ n`` (1 for 0 or 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


@functools.cache
def _torch_dtype(dtype: Any) -> Any:
    if isinstance(dtype, torch.dtype):
        return dtype
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _numpy_view(host: Any) -> np.ndarray | None:
    """A numpy view of ``host``, or None for a dtype numpy lacks (bfloat16).

    Such a slot is only ever filled from torch tensors: a numpy batch has a numpy dtype.
    """
    try:
        return host.numpy()
    except TypeError:
        return None


@dataclass
class _Slot:
    """The static buffers of one ``(bucket, row shape, dtype)``."""

    inputs: Any  # (bucket, *row) on the device
    host: Any  # host staging copy of ``inputs`` (pinned on CUDA); ``inputs`` itself on CPU
    host_array: np.ndarray | None  # numpy view of ``host``, taken once (None: bfloat16 etc.)
    out: Any = None  # (bucket, ...) on the device, written by every run
    graph: Any = None  # the captured torch.cuda.CUDAGraph (CUDA only)
    staged: Any = None  # CUDA event recorded after each copy out of ``host`` (CUDA only)


class StaticGraphRunner:
    """Run ``fn`` on static, padded buffers; on CUDA capture it per batch size and replay it.

    Args:
        fn: a function of one ``(b, *row)`` tensor on ``device`` returning a ``(b, ...)``
            tensor whose row ``i`` depends only on input row ``i``. It must not synchronise
            with the host (no ``.item()``, no data-dependent shapes) to be captured.
        device: where the buffers live and ``fn`` runs.
        capture: capture CUDA graphs (default: when ``device`` is a CUDA device). ``True`` on
            another device is refused.
        max_slots: the most batch sizes (buckets, per row shape) kept at once (≥ 1; a numpy
            integer is taken as the Python int of its value, as ``warmup``).
        warmup: eager runs on a side stream before a capture (≥ 1).

    Attributes:
        mode: ``"cuda"`` (graphs are captured and replayed) or ``"eager"``.
        captures: how many graphs were captured so far (a new bucket, or one dropped and
            needed again).

    Raises:
        ConfigError: ``capture=True`` on a device that is not CUDA, or a bad ``max_slots`` /
            ``warmup``.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        device: Any,
        *,
        capture: bool | None = None,
        max_slots: int = 4,
        warmup: int = 3,
    ) -> None:
        self.fn = fn
        self.device = torch.device(device)
        is_cuda = self.device.type == "cuda"
        if is_cuda and self.device.index is None:  # compare equal to the tensors' devices
            self.device = torch.device("cuda", torch.cuda.current_device())
        if capture and not is_cuda:
            raise ConfigError(
                "capture", capture, f"CUDA graphs need a CUDA device, not {self.device}"
            )
        for name, value in (("max_slots", max_slots), ("warmup", warmup)):
            src = "StaticGraphRunner"
            check_int(name, value, source=src, allow_numpy=True, reason="expected ≥ 1")
        self.capture = is_cuda if capture is None else bool(capture)
        self.mode = "cuda" if self.capture else "eager"
        self.max_slots, self.warmup = int(max_slots), int(warmup)  # numpy integers too
        self.captures = 0
        self._slots: OrderedDict[SlotKey, _Slot] = OrderedDict()

    def slot_keys(self) -> list[SlotKey]:
        """The slots held, least recently used first: ``(bucket, row shape, torch dtype)``."""
        return list(self._slots)

    def run(self, batch: Any) -> Any:
        """Fill, run and return the output rows of ``batch`` *on the device*.

        ``batch``: an ``(n, *row)`` numpy array or torch tensor (any device), ``n ≥ 1``.
        The result is a view of the static output: read it (or clone it) before the next
        call, which overwrites it. On CUDA nothing here waits for the device.
        """
        if batch.ndim < 1 or batch.shape[0] == 0:
            raise ValueError(f"expected a batch of at least one row, got shape {batch.shape}")
        n = int(batch.shape[0])
        row = tuple(int(s) for s in batch.shape[1:])
        key: SlotKey = (bucket_size(n), row, _torch_dtype(batch.dtype))
        with torch.no_grad():
            slot = self._slots.get(key)
            if slot is not None:
                self._slots.move_to_end(key)
                self._fill(slot, batch, n)
                self._replay(slot)
            else:
                slot = self._new_slot(key, batch, n)
            return slot.out[:n]

    def __call__(self, batch: Any) -> np.ndarray:
        """:meth:`run`, then the ``n`` output rows copied to a new host array (one sync)."""
        rows = self.run(batch)
        return rows.to("cpu", copy=True).numpy()

    # ------------------------------------------------------------------------------ slots
    def _fill(self, slot: _Slot, batch: Any, n: int) -> None:
        if isinstance(batch, torch.Tensor) and batch.device == self.device:
            slot.inputs[:n].copy_(batch)
            return
        if isinstance(batch, torch.Tensor) and batch.device.type != "cpu":
            slot.inputs[:n].copy_(batch)  # from another device: torch orders the copy
            return
        if slot.staged is not None:  # after a run() without a read, its copy may be pending
            slot.staged.synchronize()
        if isinstance(batch, torch.Tensor):
            slot.host[:n].copy_(batch)
        else:
            assert slot.host_array is not None  # a numpy batch's dtype is numpy's
            np.copyto(slot.host_array[:n], batch, casting="no")
        if slot.host is not slot.inputs:
            slot.inputs[:n].copy_(slot.host[:n], non_blocking=slot.staged is not None)
            if slot.staged is not None:
                slot.staged.record(torch.cuda.current_stream(self.device))

    def _step(self, slot: _Slot) -> None:
        # the one line that is captured on CUDA and run as is elsewhere
        slot.out.copy_(self.fn(slot.inputs))

    def _replay(self, slot: _Slot) -> None:
        if slot.graph is not None:
            slot.graph.replay()
        else:
            self._step(slot)

    def _new_slot(self, key: SlotKey, batch: Any, n: int) -> _Slot:
        bucket, row, dtype = key
        inputs = torch.zeros((bucket, *row), dtype=dtype, device=self.device)
        if self.capture:
            host = torch.zeros(inputs.shape, dtype=dtype, pin_memory=True)
        elif self.device.type == "cpu":
            host = inputs
        else:  # eager on another device (no capture): fill from numpy through a host copy
            host = torch.zeros(inputs.shape, dtype=dtype)
        slot = _Slot(inputs=inputs, host=host, host_array=_numpy_view(host))
        if self.capture:
            slot.staged = torch.cuda.Event()
        self._fill(slot, batch, n)
        if not self.capture:
            result = self.fn(inputs)
            slot.out = torch.empty_like(result)
            slot.out.copy_(result)  # this call's result: no second run
        else:
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                for _ in range(self.warmup):
                    result = self.fn(inputs)
            current.wait_stream(side)
            slot.out = torch.empty_like(result)
            del result
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    self._step(slot)
            except Exception as exc:
                if is_oom_error(exc):
                    raise
                why = f"{type(exc).__name__}: {exc}"[:300]
                raise GraphCaptureError(f"capturing {bucket} rows of {row} {dtype}: {why}") from exc
            slot.graph = graph
            self.captures += 1
            graph.replay()  # the capture only recorded the work
        self._slots[key] = slot
        while len(self._slots) > self.max_slots:
            self._slots.popitem(last=False)
        return slot
