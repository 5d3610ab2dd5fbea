"""Saving and restoring a ``ReplayRing``: state checks, ``.npz`` files and pickling.

Plain functions over a ring's public state (``ring.state_dict()``, its sizes and counters); the
ring's methods ``load_state_dict``, ``save``, ``load``, ``__getstate__`` and ``__setstate__``
call them. The file format is ``gymcurric.ReplayRing/1``: one array per state tensor, plus the
``meta`` dict as JSON bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from gymcurric._npz import read_npz
from gymcurric.errors import ConfigError, DataError
from gymcurric.replay._checks import check_invariants, dtype_from_name, dtype_name, numpy_dtype
from gymcurric.replay.specs import RESERVED_NAMES, STANDARD_FIELDS, FieldSpec

if TYPE_CHECKING:
    from gymcurric.replay.ring import ReplayRing

__all__ = [
    "FORMAT",
    "CheckedState",
    "RingArguments",
    "checked_state",
    "generator_state_problem",
    "load",
    "pickled_state",
    "ring_meta",
    "save",
    "unpickled_arguments",
]

FORMAT = "gymcurric.ReplayRing/1"

_BITCAST = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# (key, smallest value) of the ints the constructor needs from a file's metadata
_META_INTS = (("capacity", 2), ("num_envs", 1), ("side_capacity", 1), ("seed", None))
# the seeds torch.Generator.manual_seed accepts
_SEED_MIN, _SEED_END = -(2**63), 2**64


def generator_state_problem(state: torch.Tensor, device_type: str) -> str | None:
    """Why ``state`` cannot be a ``device_type`` generator's state, or None.

    ``torch.Generator.set_state`` checks a CPU (Mersenne Twister) state, but accepts any
    16 bytes on CUDA. A Philox state is a seed and an offset, and torch only ever advances the
    offset in multiples of 4. So a CUDA state whose offset is negative or not a multiple of 4
    was damaged, or was never a generator state.

    Examples:
        >>> good = torch.tensor([7, 8], dtype=torch.int64).view(torch.uint8)
        >>> generator_state_problem(good, "cuda") is None
        True
        >>> generator_state_problem(torch.tensor([7, 5]).view(torch.uint8), "cuda")
        'its Philox offset 5 is not a multiple of 4 >= 0'
    """
    if device_type != "cuda":
        return None  # set_state checks it
    if state.dtype != torch.uint8 or state.numel() != 16:
        return "a CUDA (Philox) state is 16 bytes, a seed and an offset"
    offset = int(state.detach().cpu().contiguous().view(torch.int64)[1])
    if offset < 0 or offset % 4:
        return f"its Philox offset {offset} is not a multiple of 4 >= 0"
    return None


def ring_meta(ring: ReplayRing) -> dict[str, Any]:
    """The JSON-safe ``meta`` of ``ring``'s state: its layout, counters and generator device."""
    return {
        "format": FORMAT,
        "capacity": ring.capacity,
        "num_envs": ring.num_envs,
        "side_capacity": ring.side_capacity,
        "seed": ring.seed,
        "specs": {n: [list(s.shape), dtype_name(s.dtype)] for n, s in ring.specs.items()},
        "head": ring.head,
        "size": ring.size,
        "total_steps": ring.total_steps,
        "generator_device": ring.device.type,
    }


class CheckedState(NamedTuple):
    """A state dict found fit for a ring, ready to restore."""

    tensors: Mapping[str, Any]
    counters: tuple[int, int, int]  #: head, size, total_steps
    seed: int
    generator_state: torch.Tensor | None  #: None: from another device type, re-seed instead


def checked_state(ring: ReplayRing, state: Mapping[str, Any]) -> CheckedState:
    """Validate a ``state_dict`` for ``ring`` without touching it.

    Raises:
        DataError: the state belongs to a ring of another shape, a tensor is missing, is not
            dense (sparse, nested...) or has the wrong shape/dtype, an index table or counter
            is out of range, the rows break the episode continuity, or the generator state is
            invalid.
    """
    where = "ReplayRing.load_state_dict"
    if not isinstance(state, Mapping):
        raise DataError(f"{where}: expected a mapping with 'meta' and 'tensors'; got {state!r}")
    for key in ("meta", "tensors"):
        if not isinstance(state.get(key), Mapping):
            raise DataError(f"{where}: state[{key!r}] must be a mapping; got {state.get(key)!r}")
    meta: Mapping[str, Any] = state["meta"]
    tensors: Mapping[str, Any] = state["tensors"]
    mine = ring_meta(ring)
    for key in ("format", "capacity", "num_envs", "side_capacity", "specs"):
        if meta.get(key) != mine[key]:
            raise DataError(
                f"{where}: {key!r} differs: ring has {mine[key]!r}, state has {meta.get(key)!r}"
            )
    counters = []
    for key in ("head", "size", "total_steps"):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataError(f"{where}: meta {key!r} must be an int >= 0; got {value!r}")
        counters.append(value)
    head, size, total = counters
    # push_step and clear keep exactly these relations; any other triple misorders the rows
    if size != min(total, ring.capacity) or head != total % ring.capacity:
        raise DataError(
            f"{where}: inconsistent counters head={head!r}, size={size!r}, "
            f"total_steps={total!r} (with capacity {ring.capacity}, expected "
            f"size == min(total_steps, capacity) and head == total_steps % capacity)"
        )
    seed = meta.get("seed", ring.seed)
    generator_device = meta.get("generator_device", ring.device.type)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataError(f"{where}: meta 'seed' must be an int; got {seed!r}")
    seed = int(seed)
    if not _SEED_MIN <= seed < _SEED_END:
        raise DataError(f"{where}: meta 'seed' must fit a torch seed (64 bits); got {seed!r}")
    if not isinstance(generator_device, str):
        raise DataError(f"{where}: meta 'generator_device' must be a str; got {generator_device!r}")

    own = ring.state_dict()["tensors"]
    # generator states are per device type (CPU Mersenne Twister vs CUDA Philox): a state
    # saved on another device type is not restored; the generator is re-seeded from `seed`
    same_generator = generator_device == ring.device.type
    if not same_generator:
        own.pop("generator")
    for name, target in own.items():
        source = tensors.get(name)
        if isinstance(source, torch.Tensor) and (
            source.layout is not torch.strided or source.is_nested
        ):
            # sparse, mkldnn, nested...: torch cannot copy them into the ring's dense tensors
            # (and a nested tensor has no shape to compare)
            kind = "a nested tensor" if source.is_nested else f"a tensor of layout {source.layout}"
            raise DataError(
                f"{where}: tensor {name!r} is {kind}; expected a dense (strided) tensor "
                f"{(tuple(target.shape), target.dtype)}"
            )
        if (
            not isinstance(source, torch.Tensor)
            or source.is_meta
            or source.shape != target.shape
            or source.dtype != target.dtype
        ):
            if isinstance(source, torch.Tensor):
                got: Any = (tuple(source.shape), source.dtype, source.device.type)
            else:
                got = "missing" if name not in tensors else type(source).__name__
            raise DataError(
                f"{where}: tensor {name!r} expected {(tuple(target.shape), target.dtype)}, "
                f"got {got}"
            )
    # index tables: out-of-range entries would index past the side store when sampling
    side_capacity, steps = ring.side_capacity, ring.capacity * ring.num_envs
    ranges = {
        "side.slot": (tensors["side.slot"][:steps], -1, side_capacity - 1),
        "side.owner": (tensors["side.owner"], -1, steps - 1),
        "side.ptr": (tensors["side.ptr"], 0, None),
        "side.lost": (tensors["side.lost"], 0, None),
        "state.cur_episode": (tensors["state.cur_episode"], -1, None),
    }
    for name, (t, low, high) in ranges.items():
        if t.numel() and (int(t.min()) < low or (high is not None and int(t.max()) > high)):
            span = f"[{low}, {high}]" if high is not None else f">= {low}"
            raise DataError(
                f"{where}: tensor {name!r} has entries outside {span}; "
                f"got min {int(t.min())}, max {int(t.max())}"
            )
    # the rows must read as episodes (what sampling relies on), as after any push_step
    episode_id = tensors["field.episode_id"]
    try:
        check_invariants(
            episode_id=episode_id,
            is_first=tensors["field.is_first"].to(episode_id.device),
            continue_=tensors["field.continue_"].to(episode_id.device),
            oldest=head if size == ring.capacity else 0,
            size=size,
            total_steps=total,
        )
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from exc
    probe = torch.Generator(device=ring.device)
    generator_state = None
    try:
        if same_generator:
            generator_state = tensors["generator"].detach().cpu()
            problem = generator_state_problem(generator_state, ring.device.type)
            if problem is not None:
                raise ValueError(problem)
            probe.set_state(generator_state)
        else:
            probe.manual_seed(seed)
    except (RuntimeError, ValueError) as exc:
        what = (
            "tensor 'generator' is not a valid generator state"
            if same_generator
            else f"meta 'seed' cannot seed a generator; got {seed!r}"
        )
        raise DataError(f"{where}: {what} ({exc})") from exc
    return CheckedState(tensors, (head, size, total), seed, generator_state)


# ---------------------------------------------------------------------- .npz files
def save(ring: ReplayRing, path: str | os.PathLike[str]) -> None:
    """Write ``ring`` to an uncompressed ``.npz`` without pickle (see ``ReplayRing.save``)."""
    state = ring.state_dict()
    arrays: dict[str, np.ndarray] = {}
    for name, t in state["tensors"].items():
        t = t.detach().cpu()
        if numpy_dtype(t.dtype) is None:
            bits = _BITCAST.get(t.element_size())
            t = t.view(bits) if bits else t.contiguous().unsqueeze(-1).view(torch.uint8)
        arrays[name] = t.numpy()
    meta = json.dumps(state["meta"]).encode()
    arrays["meta"] = np.frombuffer(meta, dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]


def load(
    ring_class: type[ReplayRing],
    path: str | os.PathLike[str],
    device: str | torch.device,
    **kwargs: Any,
) -> ReplayRing:
    """Read a ring written by :func:`save` onto ``device`` (see ``ReplayRing.load``)."""
    arrays = read_npz(path, "ReplayRing file")
    try:
        meta, specs = _read_meta(arrays.pop("meta", None))
    except (KeyError, ValueError, TypeError) as exc:
        raise DataError(f"{path}: malformed ReplayRing metadata ({exc})") from exc
    fields = {n: s for n, s in specs.items() if n not in STANDARD_FIELDS}
    fixed = sorted(set(kwargs) & {"capacity", "num_envs", "fields", "side_capacity", "seed"})
    if fixed:
        raise ConfigError(
            fixed[0],
            kwargs[fixed[0]],
            "comes from the saved ring and cannot be overridden when loading (load, then "
            "build a new ring and extend it to change the layout; reseed with "
            "ring.generator.manual_seed)",
            source="ReplayRing.load",
        )
    ring = ring_class(
        meta["capacity"],
        meta["num_envs"],
        fields,
        device,
        side_capacity=meta["side_capacity"],
        seed=meta["seed"],
        **kwargs,
    )
    own = ring.state_dict()["tensors"]
    tensors: dict[str, torch.Tensor] = {}
    for name, arr in arrays.items():
        try:
            # a file written on a machine of the other byte order reads as native values
            t = torch.from_numpy(np.array(arr, dtype=arr.dtype.newbyteorder("=")))
        except TypeError as exc:
            raise DataError(
                f"{path}: array {name!r} has dtype {arr.dtype}, which torch cannot read"
            ) from exc
        want = own.get(name)
        if want is not None and t.dtype != want.dtype and numpy_dtype(want.dtype) is None:
            t = _unbitcast(t, want)
        tensors[name] = t
    try:
        ring.load_state_dict({"meta": meta, "tensors": tensors})
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc
    return ring


def _read_meta(raw: np.ndarray | None) -> tuple[dict[str, Any], dict[str, FieldSpec]]:
    """Parse and check the ``meta`` array of a ring file (``ValueError`` names the key)."""
    if raw is None:
        raise ValueError("no 'meta' array in the file")
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"'meta' must be the JSON text as uint8 bytes; got {raw.dtype}{raw.shape}")
    meta = json.loads(bytes(raw).decode())
    if not isinstance(meta, dict):
        raise ValueError(f"expected a JSON object; got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise ValueError(f"format is {meta.get('format')!r}, expected {FORMAT!r}")
    missing = [k for k in (*(key for key, _ in _META_INTS), "specs") if k not in meta]
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise ValueError(f"missing key{'s' if len(missing) > 1 else ''} {names}")
    for key, low in _META_INTS:
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, int) or (low and value < low):
            raise ValueError(f"{key!r} must be an int{f' >= {low}' if low else ''}; got {value!r}")
    if not _SEED_MIN <= meta["seed"] < _SEED_END:
        raise ValueError(f"'seed' must fit a torch seed (64 bits); got {meta['seed']!r}")
    raw_specs = meta["specs"]
    if not isinstance(raw_specs, dict) or "obs" not in raw_specs or "action" not in raw_specs:
        raise ValueError(f"'specs' must be an object with 'obs' and 'action'; got {raw_specs!r}")
    specs = {}
    for name, entry in raw_specs.items():
        if name in RESERVED_NAMES or not name.isidentifier():
            raise ValueError(f"specs[{name!r}]: the field name is reserved or not an identifier")
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], list)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in entry[0])
            and isinstance(entry[1], str)
        ):
            raise ValueError(f"specs[{name!r}] must be [shape, dtype name]; got {entry!r}")
        specs[name] = FieldSpec(tuple(entry[0]), dtype_from_name(entry[1], f"specs[{name!r}]"))
    return meta, specs


def _unbitcast(t: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Undo :func:`save`'s bit-cast of a dtype numpy lacks.

    Also reads files from before the same-item-size bit-cast, which stored such tensors as
    ``uint8`` with the last axis multiplied by the item size. A tensor that does not fit is
    returned as it is and refused, with its shape, by ``load_state_dict``.
    """
    try:
        v = t.view(want.dtype)
    except RuntimeError:
        return t
    if tuple(v.shape) == (*want.shape, 1):
        v = v.squeeze(-1)
    return v if v.shape == want.shape else t


# ---------------------------------------------------------------------- pickling
def pickled_state(ring: ReplayRing) -> dict[str, Any]:
    """``ring.__getstate__()``: its state dict on the CPU, its device and its options."""
    state = ring.state_dict()
    return {
        "meta": state["meta"],
        "tensors": {k: v.cpu() for k, v in state["tensors"].items()},
        "device": str(ring.device),
        "debug_checks": ring.debug_checks,
        "index_strategy": ring.index_strategy,
        "cuda_graphs": ring.cuda_graphs,
    }


class RingArguments(NamedTuple):
    """The constructor arguments of an unpickled ring, and the state to load into it."""

    positional: tuple[int, int, dict[str, FieldSpec], str]  #: capacity, num_envs, fields, device
    options: dict[str, Any]  #: the keyword arguments
    state: dict[str, Any]  #: for ``load_state_dict``


def unpickled_arguments(state: Mapping[str, Any]) -> RingArguments:
    """Read a :func:`pickled_state`, also one of a version without ``cuda_graphs`` or earlier.

    Raises:
        DataError: a malformed state.
    """
    try:
        meta = state["meta"]
        specs = {
            n: FieldSpec(tuple(s), dtype_from_name(d, "pickle"))
            for n, (s, d) in meta["specs"].items()
        }
        fields = {n: s for n, s in specs.items() if n not in STANDARD_FIELDS}
        arguments = RingArguments(
            (meta["capacity"], meta["num_envs"], fields, state["device"]),
            {
                "side_capacity": meta["side_capacity"],
                "seed": meta["seed"],
                "debug_checks": state["debug_checks"],
                "index_strategy": state.get("index_strategy"),
                "cuda_graphs": state.get("cuda_graphs", False),
            },
            {"meta": meta, "tensors": state["tensors"]},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(
            f"malformed pickled ReplayRing state ({type(exc).__name__}: {exc})"
        ) from exc
    return arguments
