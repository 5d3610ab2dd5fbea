"""Validation helpers of the replay ring: argument and write checks, invariants, memory budget."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np
import torch

from gymcurric.errors import ConfigError, DataError


class RingInvariantError(DataError):
    """A ``ReplayRing`` invariant does not hold; ``env`` and ``step`` locate the first violation.

    Attributes:
        env: the env (column) index.
        step: the absolute step index (``total_steps`` counter value when the row was written).
        row: the physical row of the ring.
    """

    def __init__(self, message: str, env: int = -1, step: int = -1, row: int = -1) -> None:
        super().__init__(message)
        self.env = env
        self.step = step
        self.row = row

    def __reduce__(self) -> tuple[Any, ...]:
        # the state (__notes__ included) travels too, as ConfigError's does
        return (type(self), (str(self), self.env, self.step, self.row), self.__dict__)


_NUMPY_OF: dict[torch.dtype, Any] = {
    torch.bool: np.bool_,
    torch.uint8: np.uint8,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
}


#: torch's unsigned dtypes wider than a byte -> (numpy's dtype, the signed one of the same width).
#: numpy has them, but torch builds them from numpy arrays only through a view of the signed
#: dtype (and lacks most other operations on them).
UNSIGNED: dict[torch.dtype, tuple[Any, Any]] = {
    torch.uint16: (np.uint16, np.int16),
    torch.uint32: (np.uint32, np.int32),
    torch.uint64: (np.uint64, np.int64),
}


#: numpy's dtypes whose arrays ``torch.from_numpy`` reads and whose casts by ``copy_`` into the
#: ring's other numpy dtypes store what numpy's casts store, bar float64 -> float16 and a
#: signaling NaN's quiet bit in float32 -> float16 (checked by
#: ``tests/replay/test_ring_casts.py``); :func:`as_tensor_like` casts the others with numpy.
#: Not float16: torch's float16 -> float32/float64 cast loses NaN payloads past its vectorised
#: loop (0x7fffffff) and quiets signaling NaNs, and float16 inputs are rare enough to copy.
TORCH_CASTS = frozenset(
    (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)
)


def numpy_dtype(dtype: torch.dtype) -> Any:
    """The numpy dtype the ring writes ``dtype`` with (``None`` for bfloat16, ``UNSIGNED``...)."""
    return _NUMPY_OF.get(dtype)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).removeprefix("torch.")


#: the layout of dense tensors, the only one the ring takes: the quick tests of the pushes
#: compare it by identity (``value.layout is STRIDED``) and read ``value.is_nested`` (a nested
#: tensor of the older kind has this layout too), anything else takes the general checks
STRIDED = torch.strided


def not_dense(name: str, value: torch.Tensor) -> ConfigError:
    """The error of a tensor that is not dense: another layout than :data:`STRIDED` (sparse,
    mkldnn, jagged...) or nested (``torch.nested.nested_tensor`` makes strided ones).

    Such tensors pass the dtype and device tests but not torch's copies into the ring's dense
    rows (``TypeError``, ``RuntimeError``, ``NotImplementedError``), and a strided nested tensor
    has no shape (reading it raises ``RuntimeError``); checked first.
    """
    return ConfigError(
        name,
        f"tensor of layout {value.layout}" if value.layout is not STRIDED else "nested tensor",
        "expected a dense (strided) tensor",
        source="ReplayRing",
    )


def described(value: Any) -> str:
    """``value`` for an error message: a tensor's dtype and device, else its type (and length)."""
    if isinstance(value, torch.Tensor):
        return f"tensor of dtype {value.dtype} on {value.device}"
    try:
        return f"{type(value).__name__} of length {len(value)}"
    except TypeError:
        return f"a {type(value).__name__}"


def unreadable(name: str, value: Any, expected: str) -> ConfigError:
    """The error of a ``value`` numpy cannot read as an array (``np.asarray`` raised on it).

    A ragged list, a list of tensors numpy cannot read (on a GPU, requiring grad, with torch's
    negative bit), a tensor without data (``meta``)...: named, not a raw numpy or torch error.
    """
    return ConfigError(
        name,
        described(value),
        f"{expected}: a numpy array, or a list or tensor numpy can read",
        source="ReplayRing",
    )


def dtype_from_name(name: str, where: str) -> torch.dtype:
    """Inverse of :func:`dtype_name`."""
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise DataError(f"{where}: unknown torch dtype; got {name!r}")
    return dt


def as_tensor_like(
    name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Check a write of ``value`` into a ``shape``/``dtype`` slot on ``device``.

    Tensors must be dense (:data:`STRIDED`, not nested) and match dtype and device exactly (no
    silent casts or transfers); numpy arrays and Python numbers are accepted when numpy's
    ``same_kind`` casting allows it (float64 rewards into float32, int64 actions into int32)
    and copied over, storing what numpy's assignment into the host index's rows stores (one
    rounding): cast by ``copy_`` (float64 -> float32, no extra copy), or by numpy where torch's
    cast differs or is missing (float64 -> float16, float16 NaNs, longdouble, uint16/32/64).
    Returns a tensor ready for ``copy_`` (a CPU tensor sharing memory with a numpy input, or
    with its numpy cast; a tensor that requires grad detached: the ring stores data, and a copy
    of it would put the ring's tensors in the autograd graph).
    """
    if isinstance(value, torch.Tensor):
        if value.layout is not STRIDED or value.is_nested:
            raise not_dense(name, value)
        if value.device != device:
            raise ConfigError(
                name,
                f"tensor on {value.device}",
                f"expected a tensor on the ring's device {device} (or a numpy array)",
                source="ReplayRing",
            )
        if value.dtype != dtype:
            raise ConfigError(
                name,
                f"tensor of dtype {value.dtype}",
                f"expected dtype {dtype}",
                source="ReplayRing",
            )
        if tuple(value.shape) != shape:
            raise ConfigError(
                name,
                f"tensor of shape {tuple(value.shape)}",
                f"expected shape {shape}",
                source="ReplayRing",
            )
        return value.detach() if value.requires_grad else value
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:  # ragged lists, lists of GPU tensors...
        raise unreadable(name, value, f"expected numbers of shape {shape}") from err
    if arr.shape != shape:
        raise ConfigError(
            name, f"array of shape {arr.shape}", f"expected shape {shape}", source="ReplayRing"
        )
    unsigned = UNSIGNED.get(dtype)
    target = unsigned[0] if unsigned is not None else numpy_dtype(dtype)
    if target is None:
        raise ConfigError(
            name,
            f"numpy array of dtype {arr.dtype}",
            f"the field has dtype {dtype}, which numpy lacks: pass a torch tensor",
            source="ReplayRing",
        )
    ok = (
        arr.dtype == np.bool_ if target is np.bool_ else np.can_cast(arr.dtype, target, "same_kind")
    )
    if not ok:
        raise ConfigError(
            name,
            f"array of dtype {arr.dtype}",
            f"cannot be stored as {dtype} without changing its kind",
            source="ReplayRing",
        )
    if arr.dtype == np.object_:
        raise ConfigError(name, "object array", "expected a numeric array", source="ReplayRing")
    if unsigned is not None:  # same bits, through the signed dtype torch converts from numpy
        signed = np.ascontiguousarray(arr, dtype=target).view(unsigned[1])
        if not signed.flags.writeable:
            signed = signed.copy()
        return torch.from_numpy(signed).view(dtype)
    if arr.dtype != target and (
        arr.dtype.type not in TORCH_CASTS or (target is np.float16 and arr.dtype.type is np.float64)
    ):
        # numpy casts where torch's copy_ would store other values than numpy's assignment into
        # the host index's rows: torch's float64 -> float16 cast rounds twice (through
        # float32; 1 + 2**-11 + 2**-30 gave 1.0, not 1 + 2**-10), its float16 -> float32/64
        # cast loses NaN payloads (TORCH_CASTS), and torch lacks longdouble arrays and
        # uint16/32/64 -> target copies. Every other cast (float64 -> float32, int64 ->
        # int32...) is left to copy_, which rounds once as numpy does: no extra copy
        arr = arr.astype(target)
    if not arr.flags.writeable or not arr.dtype.isnative or min(arr.strides, default=0) < 0:
        # torch.from_numpy warns on read-only arrays and refuses negative strides (arr[::-1],
        # np.flip) and another byte order: a native copy
        arr = np.array(arr, dtype=arr.dtype.newbyteorder("="))
    return torch.from_numpy(arr)


def host_flags(name: str, value: Any, num_envs: int) -> np.ndarray:
    """A ``[num_envs]`` bool array from a per-env flag argument (numpy, list or bool tensor).

    A CUDA tensor costs a device sync here (documented: flags come from envs as numpy arrays).
    """
    if type(value) is np.ndarray and value.dtype == np.bool_ and value.shape == (num_envs,):
        return value
    if isinstance(value, torch.Tensor):
        if value.layout is not STRIDED or value.is_nested:
            raise not_dense(name, value)
        if value.dtype != torch.bool or tuple(value.shape) != (num_envs,):
            raise ConfigError(
                name,
                f"tensor of dtype {value.dtype} and shape {tuple(value.shape)}",
                f"expected dtype torch.bool and shape ({num_envs},)",
                source="ReplayRing",
            )
        try:
            return value.cpu().numpy()
        except NotImplementedError as err:  # a meta tensor has no data to copy
            raise unreadable(name, value, f"expected bool of shape ({num_envs},)") from err
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:  # ragged lists, lists of GPU tensors...
        raise unreadable(name, value, f"expected bool of shape ({num_envs},)") from err
    if arr.dtype != np.bool_ or arr.shape != (num_envs,):
        raise ConfigError(
            name,
            f"array of dtype {arr.dtype} and shape {arr.shape}",
            f"expected bool and shape ({num_envs},)",
            source="ReplayRing",
        )
    return arr


class DeviceFlags(NamedTuple):
    """Per-env flags on a ring's device (:func:`device_flags`)."""

    tensors: dict[str, torch.Tensor]  #: every flag given, ``[num_envs]`` bool on the device
    host: dict[str, np.ndarray]  #: the flags that were given as host data, as they were


def device_flags(
    values: dict[str, Any],
    num_envs: int,
    device: torch.device,
    *,
    move_host: bool = True,
    non_blocking: bool = False,
) -> DeviceFlags:
    """Per-env flag arguments (``None`` values skipped) as bool tensors on ``device``, no sync.

    A bool tensor on the device is used as it is. Host flags (numpy, lists, bool tensors on
    the CPU, or on another device and read to the host) are checked as :func:`host_flags` does
    and travel together in one host-to-device copy, non-blocking if ``non_blocking`` (the
    ring's :func:`non_blocking_copy`; the source is a fresh numpy stack); with
    ``move_host=False`` they are only checked (``tensors`` then holds the device ones).
    """
    tensors: dict[str, torch.Tensor] = {}
    host: dict[str, np.ndarray] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, torch.Tensor) and value.device == device:
            if value.layout is not STRIDED or value.is_nested:
                raise not_dense(name, value)
            if value.dtype != torch.bool or tuple(value.shape) != (num_envs,):
                raise ConfigError(
                    name,
                    f"tensor of dtype {value.dtype} and shape {tuple(value.shape)}",
                    f"expected dtype torch.bool and shape ({num_envs},)",
                    source="ReplayRing",
                )
            tensors[name] = value
        else:
            host[name] = host_flags(name, value, num_envs)
    if host and move_host:
        staged = torch.from_numpy(np.stack(list(host.values())))
        # to a CPU ring: the staged tensor itself (no copy); called there too, so that a CPU
        # ring standing in for a CUDA one runs the copy (tests/replay/copy_log.py)
        staged = staged.to(device, non_blocking=non_blocking)
        tensors.update(zip(host, staged.unbind(0), strict=True))
    return DeviceFlags(tensors, host)


def non_blocking_copy(device: torch.device) -> bool:
    """Whether a copy from pageable host memory to ``device`` may be non-blocking: CUDA only.

    From pageable memory CUDA stages the data before the call returns, so the caller may free or
    reuse the array at once, and a blocking copy would only make torch synchronise the stream.
    Other backends promise no such thing: a non-blocking CPU -> MPS copy reads its source after
    the call returns, and stores garbage if that memory was freed or reused meanwhile
    (pytorch/pytorch#189690, torch 2.13); xpu and ``privateuseone`` backends document nothing.
    Their copies block. A ring decides once, at construction (``RingStorage.non_blocking``,
    public as ``ReplayRing.non_blocking``); a pinned source needs a blocking copy even on CUDA
    (:func:`pageable`).
    """
    return device.type == "cuda"


def pageable(source: torch.Tensor) -> bool:
    """Whether ``source`` is in pageable host memory, where CUDA stages a non-blocking copy.

    A caller's array in pinned memory (a numpy view of a pinned staging tensor) is not staged:
    a non-blocking copy reads it after the call returns, when its owner may have written it
    again, so it is copied blocking. Every copy of a caller's data to the ring's device takes
    ``non_blocking=storage.non_blocking and pageable(source)`` (:func:`copy_in`, the reward and
    cost column, the final observations); the ring's own fresh buffers need no such check.
    """
    return source.device.type == "cpu" and not source.is_pinned()


def copy_in(target: torch.Tensor, source: torch.Tensor, *, non_blocking: bool) -> None:
    """``target.copy_(source)``, non-blocking from pageable host memory where that is safe.

    ``non_blocking`` is the ring's :func:`non_blocking_copy` (CUDA). A blocking host-to-device
    copy makes torch synchronise the stream after it. From pageable memory CUDA stages the data
    before the call returns, so the caller may reuse the array; a pinned source is copied
    blocking (:func:`pageable`).
    """
    target.copy_(source, non_blocking=non_blocking and pageable(source))


def reward_required(num_envs: int) -> ConfigError:
    """The error of a ``push_step`` given ``reward=None`` (cost alone defaults to 0)."""
    return ConfigError(
        "reward",
        None,
        f"expected rewards of shape ({num_envs},); reward is required (only cost defaults to 0)",
        source="ReplayRing.push_step",
    )


def check_push_arguments(
    t: int | None, total_steps: int, extra: dict[str, Any], user_fields: tuple[str, ...]
) -> None:
    """``push_step``'s optional step index and its user fields."""
    if t is not None and t != total_steps:
        raise ConfigError(
            "t",
            t,
            f"must equal total_steps={total_steps} (rows are written in order)",
            source="ReplayRing",
        )
    if set(extra) != set(user_fields):
        missing = sorted(set(user_fields) - set(extra))
        unknown = sorted(set(extra) - set(user_fields))
        raise ConfigError(
            "push_step(**extra)",
            sorted(extra),
            f"missing user fields {missing}, unknown fields {unknown}",
            source="ReplayRing",
        )


def check_row(row: Any, capacity: int) -> None:
    """A physical row argument: an int in ``[0, capacity)``."""
    if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < capacity:
        raise ConfigError("row", row, f"must be an int in [0, {capacity})", source="ReplayRing")


def check_generator(generator: Any, device: torch.device) -> None:
    """The samplers' explicit generator: a ``torch.Generator`` on the ring's device type."""
    if not isinstance(generator, torch.Generator):
        raise ConfigError("gen", generator, "a torch.Generator is required (no global RNG is used)")
    if generator.device.type != device.type:
        raise ConfigError(
            "gen", generator, f"generator on {generator.device}, expected one on {device.type}"
        )


def check_indices(name: str, value: Any, high: int) -> None:
    """Integer indices in ``[0, high)``; checked on the host (device tensors are trusted:
    reading them would sync). A CPU tensor with torch's negative or conjugate bit, or one that
    requires grad, is checked by its values (numpy cannot read it as it is)."""
    if isinstance(value, torch.Tensor):
        if value.layout is not STRIDED or value.is_nested:
            raise not_dense(name, value)
        if value.device.type == "meta":  # no data: neither checked nor usable
            raise unreadable(name, value, "expected integer indices")
        if value.device.type != "cpu":
            return
        value = value.detach().resolve_conj().resolve_neg().numpy()
    try:
        a = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:  # ragged lists...
        raise unreadable(name, value, "expected integer indices") from err
    if a.size and a.dtype.kind not in "iu":
        raise ConfigError(name, a.dtype, "expected integer indices", source="ReplayRing")
    if a.size and (a.min() < 0 or a.max() >= high):
        bad = a[(a < 0) | (a >= high)].ravel()[0]
        raise ConfigError(name, int(bad), f"indices must lie in [0, {high})", source="ReplayRing")


def available_bytes(device: torch.device) -> int:
    """Memory available for a new allocation on ``device`` (host RAM or the CUDA device)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 1 << 62


def check_invariants(
    *,
    episode_id: torch.Tensor,
    is_first: torch.Tensor,
    continue_: torch.Tensor,
    oldest: int,
    size: int,
    total_steps: int,
) -> None:
    """Check the ring's continuity invariants over its chronological view (O(size * num_envs)).

    Raises:
        RingInvariantError: at the first (oldest) violation, naming env and step.
    """
    if size == 0:
        return
    capacity = episode_id.shape[0]
    order = (torch.arange(size, device=episode_id.device) + oldest) % capacity
    ep = episode_id.index_select(0, order).cpu()
    first = is_first.index_select(0, order).cpu()
    cont = continue_.index_select(0, order).cpu()
    first_step = total_steps - size

    # the earliest violation (in time, then env) of any kind is reported
    bad = torch.zeros(ep.shape, dtype=torch.int8)
    bad[~((cont == 0) | (cont == 1))] = 1
    if size > 1:
        same = ep[1:] == ep[:-1]
        nxt_first = first[1:]
        bad[1:][~(same | nxt_first) & (bad[1:] == 0)] = 2
        bad[1:][nxt_first & (ep[1:] != ep[:-1] + 1) & (bad[1:] == 0)] = 3
    hits = bad.nonzero()
    if hits.numel() == 0:
        return
    i, env = (int(v) for v in hits[0])
    what = {
        1: f"continue_ must be 0.0 or 1.0, got {float(cont[i, env])}",
        2: "episode_id changed without is_first "
        f"(expected episode_id[t+1] == episode_id[t] or is_first[t+1]; got "
        f"{int(ep[i - 1, env])} -> {int(ep[i, env])})",
        3: "is_first set but episode_id is not the previous episode_id + 1 (got "
        f"{int(ep[i - 1, env])} -> {int(ep[i, env])})",
    }[int(bad[i, env])]
    row = (oldest + i) % capacity
    raise RingInvariantError(
        f"ReplayRing invariant violated at env {env}, step {first_step + i} (row {row}): {what}",
        env=env,
        step=first_step + i,
        row=row,
    )
