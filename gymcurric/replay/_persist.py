"""``ReplayRing`` state: invariant checks, ``state_dict``, ``.npz`` save/load and pickling."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from gymcurric.errors import DataError
from gymcurric.replay._checks import check_invariants, dtype_from_name, dtype_name, numpy_dtype
from gymcurric.replay.ring import _SCALARS, FieldSpec

if TYPE_CHECKING:
    from gymcurric.replay.ring import ReplayRing

_FORMAT = "gymcurric.ReplayRing/1"


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
    _row_any_first: np.ndarray
    _row_next_first: np.ndarray

    if TYPE_CHECKING:

        @property
        def oldest(self) -> int: ...

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

        Raises:
            DataError: the state belongs to a ring of another shape, or a tensor is missing or
                has the wrong shape/dtype.
        """
        meta = dict(state.get("meta", {}))
        mine = self._meta()
        for key in ("format", "capacity", "num_envs", "side_capacity", "specs"):
            if meta.get(key) != mine[key]:
                raise DataError(
                    f"ReplayRing.load_state_dict: {key!r} differs: ring has {mine[key]!r}, "
                    f"state has {meta.get(key)!r}"
                )
        tensors = state["tensors"]
        own = self.state_dict()["tensors"]
        # generator states are per device type (CPU Mersenne Twister vs CUDA Philox): a state
        # saved on another device type is not restored; the generator is re-seeded from `seed`
        same_gen = meta.get("generator_device", self.device.type) == self.device.type
        if not same_gen:
            own.pop("generator")
        for name, dst in own.items():
            src = tensors.get(name)
            if (
                not isinstance(src, torch.Tensor)
                or src.shape != dst.shape
                or src.dtype != dst.dtype
            ):
                got = None if src is None else (tuple(src.shape), src.dtype)
                raise DataError(
                    f"ReplayRing.load_state_dict: tensor {name!r} expected "
                    f"{(tuple(dst.shape), dst.dtype)}, got {got}"
                )
        for name, dst in own.items():
            if name == "generator":
                self.generator.set_state(tensors[name].cpu())
            else:
                dst.copy_(tensors[name])
        if not same_gen:
            self.generator.manual_seed(int(meta.get("seed", self.seed)))
        for key in ("head", "size", "total_steps"):
            value = meta.get(key)
            if not isinstance(value, int) or value < 0:
                raise DataError(f"ReplayRing.load_state_dict: meta {key!r} invalid; got {value!r}")
        if meta["head"] >= self.capacity or meta["size"] > min(self.capacity, meta["total_steps"]):
            raise DataError(f"ReplayRing.load_state_dict: inconsistent counters; got {meta!r}")
        self.head, self.size, self.total_steps = meta["head"], meta["size"], meta["total_steps"]
        self._row_has_side = (self._side_slot >= 0).any(dim=1).cpu().numpy()
        self._row_any_first = self._data["is_first"].any(dim=1).cpu().numpy()
        self._row_next_first = np.roll(self._row_any_first, -1)
        if self.size:
            self._row_next_first[(self.head - 1) % self.capacity] = False
        self.seed = int(meta.get("seed", self.seed))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ring to an uncompressed ``.npz`` without pickle.

        ``np.load(path, allow_pickle=False)`` reads it; fields numpy lacks (bfloat16) are stored
        bit-cast and restored by :meth:`load`.
        """
        state = self.state_dict()
        arrays: dict[str, np.ndarray] = {}
        for name, t in state["tensors"].items():
            t = t.detach().cpu()
            if numpy_dtype(t.dtype) is None:
                t = t.view(torch.int16) if t.element_size() == 2 else t.view(torch.uint8)
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

        ``kwargs`` go to the constructor (e.g. ``memory_budget``).

        Raises:
            DataError: not a ring file, or a malformed one (the message names the file).
        """
        try:
            with np.load(path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot read a ReplayRing file ({exc})") from exc
        try:
            meta = json.loads(bytes(arrays.pop("meta")).decode())
            if meta.get("format") != _FORMAT:
                raise ValueError(f"format is {meta.get('format')!r}, expected {_FORMAT!r}")
            specs = {
                n: FieldSpec(tuple(shape), dtype_from_name(dt, str(path)))
                for n, (shape, dt) in meta["specs"].items()
            }
        except (KeyError, ValueError, TypeError) as exc:
            raise DataError(f"{path}: malformed ReplayRing metadata ({exc})") from exc
        fields = {n: s for n, s in specs.items() if n not in _SCALARS}
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
            t = torch.from_numpy(np.array(arr))
            want = own.get(name)
            if (
                want is not None
                and t.dtype != want.dtype
                and t.element_size() == want.element_size()
            ):
                t = t.view(want.dtype)
            tensors[name] = t
        ring.load_state_dict({"meta": meta, "tensors": tensors})
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

        meta = state["meta"]
        specs = {
            n: FieldSpec(tuple(s), dtype_from_name(d, "pickle"))
            for n, (s, d) in meta["specs"].items()
        }
        fields = {n: s for n, s in specs.items() if n not in _SCALARS}
        ReplayRing.__init__(
            cast("ReplayRing", self),
            meta["capacity"],
            meta["num_envs"],
            fields,
            state["device"],
            side_capacity=meta["side_capacity"],
            seed=meta["seed"],
            debug_checks=state["debug_checks"],
        )
        self.load_state_dict({"meta": meta, "tensors": state["tensors"]})
