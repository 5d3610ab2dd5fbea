"""``ReplayRing`` state: invariant checks, ``state_dict``, ``.npz`` save/load and pickling."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from gymcurric._npz import read_npz
from gymcurric.errors import ConfigError, DataError
from gymcurric.replay._checks import check_invariants, dtype_from_name, dtype_name, numpy_dtype
from gymcurric.replay.ring import _RESERVED, _SCALARS, FieldSpec

if TYPE_CHECKING:
    from gymcurric.replay.ring import ReplayRing

_FORMAT = "gymcurric.ReplayRing/1"


_BITCAST = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# (key, smallest value) of the ints the constructor needs from a file's metadata
_META_INTS = (("capacity", 2), ("num_envs", 1), ("side_capacity", 1), ("seed", None))
# the seeds torch.Generator.manual_seed accepts
_SEED_MIN, _SEED_END = -(2**63), 2**64


def _read_meta(raw: np.ndarray | None) -> tuple[dict[str, Any], dict[str, FieldSpec]]:
    """Parse and check the ``meta`` array of a ring file (``ValueError`` names the key)."""
    if raw is None:
        raise ValueError("no 'meta' array in the file")
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"'meta' must be the JSON text as uint8 bytes; got {raw.dtype}{raw.shape}")
    meta = json.loads(bytes(raw).decode())
    if not isinstance(meta, dict):
        raise ValueError(f"expected a JSON object; got {type(meta).__name__}")
    if meta.get("format") != _FORMAT:
        raise ValueError(f"format is {meta.get('format')!r}, expected {_FORMAT!r}")
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
        if name in _RESERVED or not name.isidentifier():
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
    """Undo :meth:`RingPersistenceMixin.save`'s bit-cast of a dtype numpy lacks.

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


class RingPersistenceMixin:
    """Checking, saving and restoring a :class:`~gymcurric.replay.ring.ReplayRing`."""

    capacity: int
    num_envs: int
    device: torch.device
    specs: dict[str, FieldSpec]
    side_capacity: int
    seed: int
    debug_checks: bool
    head: int
    size: int
    total_steps: int
    generator: torch.Generator
    _data: dict[str, torch.Tensor]
    _side_obs: torch.Tensor
    _side_owner: torch.Tensor
    _side_slot_storage: torch.Tensor
    _side_slot: torch.Tensor
    _side_ptr: torch.Tensor
    _side_lost: torch.Tensor
    _cur_episode: np.ndarray
    _ended: np.ndarray
    _row_has_side: np.ndarray

    if TYPE_CHECKING:

        @property
        def oldest(self) -> int: ...

        def _rebuild_next(self) -> None: ...

    def check_invariants(self) -> None:
        """Check continuity over the chronological view, per env (O(size * num_envs)).

        For adjacent steps ``episode_id[t+1] == episode_id[t]`` or ``is_first[t+1]``;
        ``is_first[t+1]`` implies ``episode_id[t+1] == episode_id[t] + 1``; ``continue_`` is
        0.0 or 1.0.

        Raises:
            RingInvariantError: naming the env, the absolute step and the physical row.
        """
        check_invariants(
            episode_id=self._data["episode_id"],
            is_first=self._data["is_first"],
            continue_=self._data["continue_"],
            oldest=self.oldest,
            size=self.size,
            total_steps=self.total_steps,
        )

    # ------------------------------------------------------------------ state
    def _meta(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "capacity": self.capacity,
            "num_envs": self.num_envs,
            "side_capacity": self.side_capacity,
            "seed": self.seed,
            "specs": {n: [list(s.shape), dtype_name(s.dtype)] for n, s in self.specs.items()},
            "head": self.head,
            "size": self.size,
            "total_steps": self.total_steps,
            "generator_device": self.device.type,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: the tensors, counters and the generator state.

        Tensors are returned as they are (not copied); ``"meta"`` is JSON-safe.
        """
        tensors: dict[str, torch.Tensor] = {f"field.{n}": t for n, t in self._data.items()}
        tensors.update(
            {
                "side.obs": self._side_obs,
                "side.owner": self._side_owner,
                "side.slot": self._side_slot_storage,
                "side.ptr": self._side_ptr,
                "side.lost": self._side_lost,
                "state.cur_episode": torch.from_numpy(self._cur_episode),
                "state.ended": torch.from_numpy(self._ended),
                "generator": self.generator.get_state(),
            }
        )
        return {"meta": self._meta(), "tensors": tensors}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output into this ring (same fields and sizes).

        All or nothing: the whole state (keys, tensor shapes and dtypes, index tables, counters,
        seed and generator state) is checked before anything is written, so a refused state
        leaves the ring exactly as it was.

        Raises:
            DataError: the state belongs to a ring of another shape, a tensor is missing or has
                the wrong shape/dtype, an index table or counter is out of range, the rows break
                the episode continuity of :meth:`check_invariants`, or the generator state is
                invalid.
        """
        tensors, counters, seed, gen_state = self._checked_state(state)
        # --- nothing above writes to the ring; nothing below can fail on valid input
        for name, dst in self.state_dict()["tensors"].items():
            if name != "generator":
                dst.copy_(tensors[name])
        if gen_state is not None:
            self.generator.set_state(gen_state)
        else:
            self.generator.manual_seed(seed)
        self.head, self.size, self.total_steps = counters
        self.seed = seed
        self._row_has_side = (self._side_slot >= 0).any(dim=1).cpu().numpy()
        self._rebuild_next()

    def _checked_state(
        self, state: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any], tuple[int, int, int], int, torch.Tensor | None]:
        """Validate a :meth:`state_dict` without touching the ring.

        Returns the tensors, ``(head, size, total_steps)``, the seed and the generator state to
        restore (``None`` when the state comes from another device type: re-seed instead).
        """
        where = "ReplayRing.load_state_dict"
        if not isinstance(state, Mapping):
            raise DataError(f"{where}: expected a mapping with 'meta' and 'tensors'; got {state!r}")
        for key in ("meta", "tensors"):
            if not isinstance(state.get(key), Mapping):
                raise DataError(
                    f"{where}: state[{key!r}] must be a mapping; got {state.get(key)!r}"
                )
        meta: Mapping[str, Any] = state["meta"]
        tensors: Mapping[str, Any] = state["tensors"]
        mine = self._meta()
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
        if size != min(total, self.capacity) or head != total % self.capacity:
            raise DataError(
                f"{where}: inconsistent counters head={head!r}, size={size!r}, "
                f"total_steps={total!r} (with capacity {self.capacity}, expected "
                f"size == min(total_steps, capacity) and head == total_steps % capacity)"
            )
        seed = meta.get("seed", self.seed)
        gen_device = meta.get("generator_device", self.device.type)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise DataError(f"{where}: meta 'seed' must be an int; got {seed!r}")
        seed = int(seed)
        if not _SEED_MIN <= seed < _SEED_END:
            raise DataError(f"{where}: meta 'seed' must fit a torch seed (64 bits); got {seed!r}")
        if not isinstance(gen_device, str):
            raise DataError(f"{where}: meta 'generator_device' must be a str; got {gen_device!r}")

        own = self.state_dict()["tensors"]
        # generator states are per device type (CPU Mersenne Twister vs CUDA Philox): a state
        # saved on another device type is not restored; the generator is re-seeded from `seed`
        same_gen = gen_device == self.device.type
        if not same_gen:
            own.pop("generator")
        for name, dst in own.items():
            src = tensors.get(name)
            if (
                not isinstance(src, torch.Tensor)
                or src.is_meta
                or src.shape != dst.shape
                or src.dtype != dst.dtype
            ):
                if isinstance(src, torch.Tensor):
                    got: Any = (tuple(src.shape), src.dtype, src.device.type)
                else:
                    got = "missing" if name not in tensors else type(src).__name__
                raise DataError(
                    f"{where}: tensor {name!r} expected {(tuple(dst.shape), dst.dtype)}, got {got}"
                )
        # index tables: out-of-range entries would index past the side store when sampling
        P, CE = self.side_capacity, self.capacity * self.num_envs
        ranges = {
            "side.slot": (tensors["side.slot"][:CE], -1, P - 1),
            "side.owner": (tensors["side.owner"], -1, CE - 1),
            "side.ptr": (tensors["side.ptr"], 0, None),
            "side.lost": (tensors["side.lost"], 0, None),
            "state.cur_episode": (tensors["state.cur_episode"], -1, None),
        }
        for name, (t, lo, hi) in ranges.items():
            if t.numel() and (int(t.min()) < lo or (hi is not None and int(t.max()) > hi)):
                span = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
                raise DataError(
                    f"{where}: tensor {name!r} has entries outside {span}; "
                    f"got min {int(t.min())}, max {int(t.max())}"
                )
        # the rows must read as episodes (what sampling relies on), as after any push_step
        ep = tensors["field.episode_id"]
        try:
            check_invariants(
                episode_id=ep,
                is_first=tensors["field.is_first"].to(ep.device),
                continue_=tensors["field.continue_"].to(ep.device),
                oldest=head if size == self.capacity else 0,
                size=size,
                total_steps=total,
            )
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from exc
        probe = torch.Generator(device=self.device)
        gen_state = None
        try:
            if same_gen:
                gen_state = tensors["generator"].detach().cpu()
                probe.set_state(gen_state)
            else:
                probe.manual_seed(seed)
        except (RuntimeError, ValueError) as exc:
            what = (
                "tensor 'generator' is not a valid generator state"
                if same_gen
                else f"meta 'seed' cannot seed a generator; got {seed!r}"
            )
            raise DataError(f"{where}: {what} ({exc})") from exc
        return tensors, (head, size, total), seed, gen_state

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ring to an uncompressed ``.npz`` without pickle.

        ``np.load(path, allow_pickle=False)`` reads it; fields numpy lacks (bfloat16, uint32,
        complex) are stored bit-cast to an integer array of the same item size (a trailing
        byte axis for 16-byte items) and restored by :meth:`load`.
        """
        state = self.state_dict()
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

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        device: str | torch.device = "cpu",
        **kwargs: Any,
    ) -> ReplayRing:
        """Read a ring written by :meth:`save` onto ``device``.

        ``device`` need not be the one the ring was saved from; the generator state is then
        not restored (CPU and CUDA generators differ) and the generator is re-seeded from the
        saved ``seed``. ``kwargs`` go to the constructor (e.g. ``memory_budget``).

        Raises:
            FileNotFoundError: there is no file at ``path``.
            DataError: not a ring file, or a damaged or malformed one (empty, truncated, not an
                ``.npz``, pickled objects, bad metadata, wrong shapes or dtypes, index tables or
                episode continuity broken); the message names the file and the key, array or
                tensor at fault.
        """
        arrays = read_npz(path, "ReplayRing file")
        try:
            meta, specs = _read_meta(arrays.pop("meta", None))
        except (KeyError, ValueError, TypeError) as exc:
            raise DataError(f"{path}: malformed ReplayRing metadata ({exc})") from exc
        fields = {n: s for n, s in specs.items() if n not in _SCALARS}
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
        ring_cls = cast("type[ReplayRing]", cls)  # this mixin is only ever a base of ReplayRing
        ring = ring_cls(
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

    def __getstate__(self) -> dict[str, Any]:
        state = self.state_dict()
        return {
            "meta": state["meta"],
            "tensors": {k: v.cpu() for k, v in state["tensors"].items()},
            "device": str(self.device),
            "debug_checks": self.debug_checks,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from gymcurric.replay.ring import ReplayRing  # ring.py imports this module first

        try:
            meta = state["meta"]
            specs = {
                n: FieldSpec(tuple(s), dtype_from_name(d, "pickle"))
                for n, (s, d) in meta["specs"].items()
            }
            args = (meta["capacity"], meta["num_envs"], state["device"], state["tensors"])
            side, seed, debug = meta["side_capacity"], meta["seed"], state["debug_checks"]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(
                f"malformed pickled ReplayRing state ({type(exc).__name__}: {exc})"
            ) from exc
        fields = {n: s for n, s in specs.items() if n not in _SCALARS}
        ReplayRing.__init__(
            cast("ReplayRing", self),
            args[0],
            args[1],
            fields,
            args[2],
            side_capacity=side,
            seed=seed,
            debug_checks=debug,
        )
        self.load_state_dict({"meta": meta, "tensors": args[3]})
