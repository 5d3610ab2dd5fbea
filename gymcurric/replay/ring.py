"""``ReplayRing``: a time-major, preallocated, device-agnostic replay ring (extra ``torch``).

Layout: every field is one tensor of shape ``[capacity, num_envs, *field_shape]`` on one device
(CPU or CUDA), written one vector step (one row) at a time at ``head``; observations are stored
once. **Row ``t`` of env ``e`` holds the step taken from observation ``obs[t]``:**

=============== ========= ===================================================================
field           dtype     meaning at row ``t``
=============== ========= ===================================================================
``obs``         (given)   the observation ``o_t`` the action was chosen from
``action``      (given)   the action ``a_t`` taken from ``o_t``
``reward``      float32   the reward of that step (``o_t, a_t -> o_{t+1}``)
``cost``        float32   the cost of that step (0 when none is given)
``continue_``   float32   0.0 iff that step *terminated* the episode; 1.0 for a truncation or
                          an ordinary step (truncated episodes bootstrap)
``is_first``    bool      ``o_t`` is the first observation of an episode (a reset observation)
``episode_id``  int32     per env, 0 for the first episode, +1 at every ``is_first``
(user fields)   (given)   whatever the user pushes with the step
=============== ========= ===================================================================

The next observation ``o_{t+1}`` is ``obs[t + 1]`` unless the episode ended at ``t`` and the
next row is the first row of a new episode (same-step autoreset: Gymnasium ``SAME_STEP``, SB3
``VecEnv``); the true final observation of such an episode is kept in a *side store* indexed by
``(t, e)`` (pass it as ``push_step(..., final_obs=...)``). With next-step autoreset (Gymnasium's
default ``NEXT_STEP``) the final observation is its own row (a row whose step is the ignored
reset step, reward 0, ``continue_`` 1) and the following row has ``is_first``; the transition out
of such a row has no successor and is never sampled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.replay._checks import (
    as_tensor_like,
    available_bytes,
    check_invariants,
    dtype_from_name,
    dtype_name,
    numpy_dtype,
)

__all__ = ["FieldSpec", "ReplayRing", "Transitions"]

_SCALARS: dict[str, torch.dtype] = {
    "reward": torch.float32,
    "cost": torch.float32,
    "is_first": torch.bool,
    "continue_": torch.float32,
    "episode_id": torch.int32,
}
_PACKED = {"reward": 0, "cost": 1, "continue_": 2}
_RESERVED = frozenset({"next_obs", "done", "valid", "t_index", "env_index", "step_index"})
_FORMAT = "gymcurric.ReplayRing/1"


@dataclass(frozen=True)
class FieldSpec:
    """Shape (per env, per step) and dtype of one ring field.

    Example:
        >>> import torch
        >>> FieldSpec((64, 64, 3), torch.uint8).nbytes_per_row(num_envs=16)
        196608
    """

    shape: tuple[int, ...]
    dtype: torch.dtype

    def nbytes_per_row(self, num_envs: int) -> int:
        """Bytes of one row (one step of ``num_envs`` envs)."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize * num_envs


class Transitions(NamedTuple):
    """A batch of uniformly sampled transitions ``(s, a, r, c, s', done)``.

    ``done`` is 1.0 only where the step *terminated* the episode (truncations bootstrap);
    ``next_obs`` is the true next observation (the final observation from the side store where
    the episode ended at that step). ``valid`` is False for entries without a successor: never
    from :meth:`ReplayRing.sample_transitions` on CPU, rarely on CUDA (see there), and where
    :meth:`ReplayRing.transitions_at` was asked for such a row. ``t_index`` is the physical
    row, ``env_index`` the env, ``extras`` the user fields of the rows.
    """

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    cost: torch.Tensor
    next_obs: torch.Tensor
    done: torch.Tensor
    valid: torch.Tensor
    t_index: torch.Tensor
    env_index: torch.Tensor
    extras: dict[str, torch.Tensor]


def _spec(name: str, value: Any) -> FieldSpec:
    if isinstance(value, FieldSpec):
        return value
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], torch.dtype)
    ):
        shape = tuple(int(s) for s in value[0])
        if any(s < 0 for s in shape):
            raise ConfigError(f"fields[{name!r}]", value, "shape entries must be >= 0")
        return FieldSpec(shape, value[1])
    raise ConfigError(
        f"fields[{name!r}]", value, "expected a FieldSpec or a (shape, torch.dtype) tuple"
    )


def _space_spec(name: str, space: gym.Space[Any]) -> FieldSpec:
    if isinstance(space, gym.spaces.Box):
        dt = np.dtype(space.dtype)
        torch_dt = torch.float32 if dt == np.float64 else torch.from_numpy(np.zeros(0, dt)).dtype
        return FieldSpec(tuple(space.shape), torch_dt)
    if isinstance(space, gym.spaces.Discrete):
        return FieldSpec((), torch.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return FieldSpec(tuple(space.shape), torch.int64)
    if isinstance(space, gym.spaces.MultiBinary):
        return FieldSpec(tuple(np.atleast_1d(space.n).tolist()), torch.int8)
    raise ConfigError(
        name, space, "supported spaces: Box, Discrete, MultiDiscrete, MultiBinary (flatten Dicts)"
    )


class ReplayRing:
    """Time-major preallocated replay ring for off-policy and sequence learners (CPU or CUDA).

    Every field is a ``[capacity, num_envs, *shape]`` tensor allocated (and zero-filled, so the
    memory is committed) at construction, after a check that it fits. One :meth:`push_step`
    writes one row for all envs; the ring keeps the newest ``capacity`` rows. The row
    convention is in the module docstring: row ``t`` = ``(o_t, a_t, r_t, c_t, continue_t,
    is_first_t, episode_id_t)`` with ``r_t``/``continue_t`` those of the step taken from ``o_t``.

    Sampling draws from the chronological view (oldest row to newest) with an explicit
    ``torch.Generator`` on the ring's device: :meth:`sample_sequences` returns contiguous windows
    ``[seq_len, batch, ...]`` (one env each) that never cross the write pointer and may contain
    ``is_first`` (episode starts inside a window are kept, not rejected);
    :meth:`sample_transitions` returns uniform transitions with ``s'`` read from row ``t + 1``
    (or the side store). Index math is O(1) per sample and stays on the device.

    Example:
        >>> import torch
        >>> ring = ReplayRing(5, 2, {"obs": ((3,), torch.float32), "action": ((), torch.int64)})
        >>> for k in range(7):
        ...     ring.push_step(torch.full((2, 3), float(k)), torch.zeros(2, dtype=torch.int64),
        ...                    torch.ones(2), terminated=[False, k == 3], truncated=[False, False])
        >>> ring.size, ring.head, ring.total_steps
        (5, 2, 7)
        >>> gen = torch.Generator().manual_seed(0)
        >>> seq = ring.sample_sequences(4, 3, gen)
        >>> seq["obs"].shape, seq["is_first"].dtype
        (torch.Size([3, 4, 3]), torch.bool)
        >>> bool((seq["obs"][1:, :, 0] - seq["obs"][:-1, :, 0] == 1).all())
        True
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        fields: Mapping[str, FieldSpec | tuple[tuple[int, ...], torch.dtype]],
        device: str | torch.device = "cpu",
        *,
        side_capacity: int | None = None,
        seed: int = 0,
        debug_checks: bool = False,
        memory_budget: int | None = None,
    ) -> None:
        """Allocate the ring.

        Args:
            capacity: rows (steps per env) kept, >= 2. Total transitions = ``capacity*num_envs``.
            num_envs: envs written per row, >= 1.
            fields: ``{"obs": spec, "action": spec, **user_fields}``; each spec a
                :class:`FieldSpec` or ``(shape, torch.dtype)``. The scalar fields ``reward``,
                ``cost`` (float32), ``is_first`` (bool), ``continue_`` (float32) and
                ``episode_id`` (int32) are added and may not be redefined.
            device: where the tensors live (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
            side_capacity: entries of the terminal-observation side store (one per episode
                that ended with ``final_obs`` while its row is still in the ring). Default
                ``max(2 * num_envs, capacity * num_envs // 32)``, enough for episodes of mean
                length >= 32; when it is too small the oldest entries are dropped, their
                transitions are no longer sampled, and :attr:`side_lost` counts them.
            seed: seed of :attr:`generator`, the ring's own generator (saved in
                :meth:`state_dict`; pass it, or any generator on the device, to the samplers).
            debug_checks: run :meth:`check_invariants` after every write (O(capacity) each).
            memory_budget: bytes the ring may use; default: the memory available on ``device``
                now (``MemAvailable`` or ``cudaMemGetInfo``).

        Raises:
            ConfigError: a bad argument, or the ring does not fit in ``memory_budget``.
        """
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 2:
            raise ConfigError("capacity", capacity, "must be an int >= 2", source="ReplayRing")
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError("num_envs", num_envs, "must be an int >= 1", source="ReplayRing")
        if not isinstance(fields, Mapping) or "obs" not in fields or "action" not in fields:
            raise ConfigError(
                "fields", fields, "must be a mapping with 'obs' and 'action'", source="ReplayRing"
            )
        specs: dict[str, FieldSpec] = {
            "obs": _spec("obs", fields["obs"]),
            "action": _spec("action", fields["action"]),
        }
        specs.update({name: FieldSpec((), dt) for name, dt in _SCALARS.items()})
        for name, value in fields.items():
            if name in ("obs", "action"):
                continue
            if name in _SCALARS or name in _RESERVED or not str(name).isidentifier():
                raise ConfigError(
                    f"fields[{name!r}]",
                    value,
                    "the name is reserved or not an identifier (standard fields: "
                    f"{sorted(_SCALARS)}; reserved: {sorted(_RESERVED)})",
                    source="ReplayRing",
                )
            specs[name] = _spec(name, value)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if side_capacity is None:
            side_capacity = max(2 * num_envs, capacity * num_envs // 32)
        if (
            isinstance(side_capacity, bool)
            or not isinstance(side_capacity, int)
            or side_capacity < 1
        ):
            raise ConfigError(
                "side_capacity", side_capacity, "must be an int >= 1", source="ReplayRing"
            )
        self.capacity = capacity
        self.num_envs = num_envs
        self.specs: dict[str, FieldSpec] = specs
        self.side_capacity = side_capacity
        self.seed = int(seed)
        self.debug_checks = bool(debug_checks)
        self.user_fields = tuple(
            n for n in specs if n not in _SCALARS and n not in ("obs", "action")
        )

        needed = self.nbytes_required(capacity, num_envs, specs, side_capacity)
        budget = available_bytes(self.device) if memory_budget is None else int(memory_budget)
        if needed > budget:
            per_field = ", ".join(
                f"{n}: {s.nbytes_per_row(num_envs) * capacity:,}" for n, s in specs.items()
            )
            raise ConfigError(
                "capacity",
                capacity,
                f"the ring needs {needed:,} bytes on {self.device} ({per_field}; side store "
                f"included) but only {budget:,} bytes are "
                f"{'allowed (memory_budget)' if memory_budget is not None else 'available'}; "
                "lower capacity or num_envs, store observations in a smaller dtype, or use "
                "another device",
                source="ReplayRing",
            )

        dev = self.device
        # reward, cost and continue_ share one [capacity, num_envs, 3] float32 tensor: one copy
        # per push and one gather per sample instead of three (per-step writes are
        # dispatch-bound); ring["reward"] etc. are (strided) views of it.
        self._scalars = torch.zeros((capacity, num_envs, 3), dtype=torch.float32, device=dev)
        self._scalars_flat = self._scalars.view(capacity * num_envs, 3)
        self._data: dict[str, torch.Tensor] = {}
        for name, spec in specs.items():
            if name in _PACKED:
                self._data[name] = self._scalars[..., _PACKED[name]]
            else:
                self._data[name] = torch.zeros(
                    (capacity, num_envs, *spec.shape), dtype=spec.dtype, device=dev
                )
        self._flat: dict[str, torch.Tensor] = {
            name: t.view(capacity * num_envs, *specs[name].shape)
            for name, t in self._data.items()
            if name not in _PACKED
        }
        self._np_dtype = {name: numpy_dtype(spec.dtype) for name, spec in specs.items()}
        # CUDA: sampling without host syncs (fixed-trip candidate draws, torch.where overrides)
        self._sync_free = dev.type != "cpu"
        # numpy views of the CPU tensors (shared memory) for the per-step writes
        self._np: dict[str, np.ndarray] = {}
        if dev.type == "cpu":
            self._np = {
                name: t.numpy()
                for name, t in self._data.items()
                if name not in _PACKED and self._np_dtype[name] is not None
            }
            self._np_scalars = self._scalars.numpy()
        self._row_shape = {name: (num_envs, *spec.shape) for name, spec in specs.items()}
        obs_spec = specs["obs"]
        # side store; the last entry of each tensor is a trash slot for masked-out writes
        self._side_obs = torch.zeros(
            (side_capacity + 1, *obs_spec.shape), dtype=obs_spec.dtype, device=dev
        )
        self._side_owner = torch.full((side_capacity + 1,), -1, dtype=torch.int64, device=dev)
        self._side_slot_storage = torch.full(
            (capacity * num_envs + 1,), -1, dtype=torch.int64, device=dev
        )
        self._side_slot = self._side_slot_storage[: capacity * num_envs].view(capacity, num_envs)
        self._side_ptr = torch.zeros((), dtype=torch.int64, device=dev)
        self._side_lost = torch.zeros((), dtype=torch.int64, device=dev)
        # per-step bookkeeping lives on the host (flags come from envs as numpy arrays)
        self._cur_episode = np.full(num_envs, -1, dtype=np.int32)
        self._ended = np.ones(num_envs, dtype=bool)
        self._row_has_side = np.zeros(capacity, dtype=bool)
        self._row_any_first = np.zeros(capacity, dtype=bool)
        # row r's successor (row r+1) starts an episode in some env; False for the newest row
        self._row_next_first = np.zeros(capacity, dtype=bool)
        self._env_arange = torch.arange(num_envs, dtype=torch.int64, device=dev)
        self._time_arange = torch.arange(capacity, dtype=torch.int64, device=dev)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(self.seed)
        self.head = 0
        self.size = 0
        self.total_steps = 0

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_spaces(
        cls,
        capacity: int,
        num_envs: int,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        device: str | torch.device = "cpu",
        *,
        extra_fields: Mapping[str, FieldSpec | tuple[tuple[int, ...], torch.dtype]] | None = None,
        **kwargs: Any,
    ) -> ReplayRing:
        """A ring whose ``obs``/``action`` fields match single-env Gymnasium spaces.

        Box keeps its dtype (float64 becomes float32); Discrete/MultiDiscrete are int64. Pass
        ``envs.single_observation_space`` / ``envs.single_action_space`` of a vector env.
        """
        fields: dict[str, Any] = {
            "obs": _space_spec("observation_space", observation_space),
            "action": _space_spec("action_space", action_space),
        }
        fields.update(extra_fields or {})
        return cls(capacity, num_envs, fields, device, **kwargs)

    @staticmethod
    def nbytes_required(
        capacity: int, num_envs: int, specs: Mapping[str, FieldSpec], side_capacity: int
    ) -> int:
        """Bytes a ring with these fields needs (fields, side store and index tables)."""
        total = sum(s.nbytes_per_row(num_envs) * capacity for s in specs.values())
        total += specs["obs"].nbytes_per_row(1) * (side_capacity + 1) + 8 * (side_capacity + 1)
        total += 8 * (capacity * num_envs + 1) + 64 * num_envs
        return int(total)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring's tensors."""
        tensors = [*self._data.values(), self._side_obs, self._side_owner, self._side_slot_storage]
        return int(sum(t.numel() * t.element_size() for t in tensors))

    @property
    def full(self) -> bool:
        """Whether ``capacity`` rows have been written (the next push overwrites the oldest)."""
        return self.size == self.capacity

    @property
    def oldest(self) -> int:
        """Physical row of the oldest step in the ring (``head`` once full, else 0)."""
        return self.head if self.size == self.capacity else 0

    @property
    def side_lost(self) -> int:
        """Terminal observations dropped from a full side store while their row was kept."""
        return int(self._side_lost)

    @property
    def fields(self) -> Mapping[str, torch.Tensor]:
        """The ring's tensors by name (``[capacity, num_envs, *shape]``, writable views)."""
        return dict(self._data)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._data[name]

    def __repr__(self) -> str:
        return (
            f"ReplayRing(capacity={self.capacity}, num_envs={self.num_envs}, "
            f"device={self.device}, size={self.size}, head={self.head}, "
            f"total_steps={self.total_steps})"
        )

    def obs_slot(self, row: int) -> torch.Tensor:
        """The ``[num_envs, *obs_shape]`` observations of physical ``row``, a contiguous view.

        Write the next observation straight into ``obs_slot(ring.head)`` (an env, a decoder, a
        GPU simulator) and then call ``push_step(None, ...)``: no intermediate copy. While the
        ring is full, that slot still holds the oldest row's observation until the push, so do
        not sample between the write and the push.
        """
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < self.capacity:
            raise ConfigError("row", row, f"must be an int in [0, {self.capacity})")
        return self._data["obs"][row]

    # ------------------------------------------------------------------ writing
    def _host_bool(self, name: str, value: Any) -> np.ndarray:
        if (
            type(value) is np.ndarray
            and value.dtype == np.bool_
            and value.shape == (self.num_envs,)
        ):
            return value
        if isinstance(value, torch.Tensor):
            if value.dtype != torch.bool or tuple(value.shape) != (self.num_envs,):
                raise ConfigError(
                    name,
                    f"tensor of dtype {value.dtype} and shape {tuple(value.shape)}",
                    f"expected dtype torch.bool and shape ({self.num_envs},)",
                    source="ReplayRing",
                )
            return value.cpu().numpy()  # a device sync for CUDA tensors (documented)
        arr = np.asarray(value)
        if arr.dtype != np.bool_ or arr.shape != (self.num_envs,):
            raise ConfigError(
                name,
                f"array of dtype {arr.dtype} and shape {arr.shape}",
                f"expected bool and shape ({self.num_envs},)",
                source="ReplayRing",
            )
        return arr

    def _src(self, name: str, value: Any, field: str | None = None) -> torch.Tensor:
        field = field or name
        # fast path: a writable numpy array of exactly the field's dtype and shape
        if (
            type(value) is np.ndarray
            and value.dtype == self._np_dtype[field]
            and value.shape == self._row_shape[field]
            and value.flags.writeable
        ):
            return torch.from_numpy(value)
        spec = self.specs[field]
        return as_tensor_like(name, value, self._row_shape[field], spec.dtype, self.device)

    def _prepare(self, name: str, value: Any) -> np.ndarray | torch.Tensor:
        # CPU ring + numpy input: checked here, written by numpy assignment (a numpy store costs
        # ~1 us against ~4-8 us for torch's indexing + copy_ on small rows)
        if name in self._np and type(value) is np.ndarray and value.shape == self._row_shape[name]:
            target = self._np_dtype[name]
            if value.dtype == target or (
                value.dtype != np.object_
                and target is not np.bool_
                and value.dtype != np.bool_
                and np.can_cast(value.dtype, target, "same_kind")
            ):
                return value
        return self._src(name, value)

    def _commit(self, name: str, row: int, src: np.ndarray | torch.Tensor) -> None:
        if isinstance(src, np.ndarray):
            self._np[name][row] = src
        else:
            self._data[name][row].copy_(src)

    def _scalar_row(self, reward: Any, cost: Any, cont: np.ndarray) -> np.ndarray | torch.Tensor:
        E = self.num_envs
        if isinstance(reward, torch.Tensor) and reward.device.type != "cpu":
            r = self._src("reward", reward)
            c = torch.zeros_like(r) if cost is None else self._src("cost", cost)
            k = torch.from_numpy(cont).to(self.device, non_blocking=True)
            return torch.stack((r, c, k), dim=-1)
        buf = np.empty((E, 3), dtype=np.float32)
        for col, name, value in ((0, "reward", reward), (1, "cost", cost)):
            if value is None:
                buf[:, col] = 0.0
                continue
            if isinstance(value, torch.Tensor):
                value = self._src(name, value).numpy()
            arr = np.asarray(value)
            if arr.shape != (E,) or arr.dtype.kind not in "biuf":
                raise ConfigError(
                    name,
                    f"array of dtype {arr.dtype} and shape {arr.shape}",
                    f"expected numbers of shape ({E},)",
                    source="ReplayRing",
                )
            buf[:, col] = arr
        buf[:, 2] = cont
        return buf

    def push_step(
        self,
        obs: Any,
        action: Any,
        reward: Any,
        *,
        terminated: Any,
        truncated: Any,
        cost: Any = None,
        is_first: Any = None,
        final_obs: Any = None,
        t: int | None = None,
        **extra: Any,
    ) -> None:
        """Write one row: the step every env took from its current observation.

        Args:
            obs: ``[num_envs, *obs_shape]`` observations ``o_t``, or ``None`` when they were
                already written into :meth:`obs_slot` ``(head)``.
            action: ``[num_envs, *action_shape]`` actions taken from ``o_t``.
            reward: ``[num_envs]`` rewards of the step.
            terminated: ``[num_envs]`` bool, the step ended the episode in a terminal state.
            truncated: ``[num_envs]`` bool, the step ended the episode by truncation.
            cost: ``[num_envs]`` costs of the step (default 0).
            is_first: ``[num_envs]`` bool, ``o_t`` is a reset observation. Default: True for the
                very first push and for envs whose previous step ended an episode (same-step
                autoreset). Pass it explicitly for next-step autoreset (the recorder does).
            final_obs: ``[num_envs, *obs_shape]`` true last observations of envs whose
                episode ended at this step (rows of other envs are ignored); kept in the side
                store so that :meth:`sample_transitions` returns them as ``next_obs``.
            t: optional explicit step index; must equal :attr:`total_steps`.
            **extra: one value per user field, ``[num_envs, *shape]``.

        Tensors must already have the field's dtype and the ring's device; numpy arrays are
        cast when the kind is kept (float64 -> float32) and copied over.

        Raises:
            ConfigError: a missing/unknown field, or a wrong shape, dtype or device (naming the
                field and what was received), or ``t != total_steps``.
        """
        if t is not None and t != self.total_steps:
            raise ConfigError(
                "t", t, f"must equal total_steps={self.total_steps} (rows are written in order)"
            )
        if set(extra) != set(self.user_fields):
            missing = sorted(set(self.user_fields) - set(extra))
            unknown = sorted(set(extra) - set(self.user_fields))
            raise ConfigError(
                "push_step(**extra)",
                sorted(extra),
                f"missing user fields {missing}, unknown fields {unknown}",
                source="ReplayRing",
            )
        row = self.head
        data = self._data
        term = self._host_bool("terminated", terminated)
        trunc = self._host_bool("truncated", truncated)
        if is_first is None:
            first = self._ended
        else:
            first = self._host_bool("is_first", is_first)
            if self.total_steps == 0 and not first.all():
                raise ConfigError(
                    "is_first", is_first, "the first step of every env must start an episode"
                )
        # check everything before writing anything, so a bad call leaves the ring unchanged
        srcs = [("action", self._prepare("action", action))]
        if obs is not None:
            srcs.append(("obs", self._prepare("obs", obs)))
        srcs.extend((name, self._prepare(name, v)) for name, v in extra.items())
        scalars = self._scalar_row(reward, cost, ~term)
        ended = term | trunc
        fo = None
        if final_obs is not None and ended.any():
            fo = self._src("final_obs", final_obs, field="obs")
        for name, src in srcs:
            self._commit(name, row, src)
        episode = self._cur_episode + first
        any_first = bool(first.any())
        self._row_any_first[row] = any_first
        self._row_next_first[row] = False
        if self.total_steps:
            self._row_next_first[row - 1 if row else self.capacity - 1] = any_first
        if self._np:
            self._np_scalars[row] = scalars
            self._np["is_first"][row] = first
            self._np["episode_id"][row] = episode
        else:
            self._scalars[row].copy_(
                torch.from_numpy(scalars) if isinstance(scalars, np.ndarray) else scalars
            )
            data["is_first"][row].copy_(torch.from_numpy(np.array(first)))
            data["episode_id"][row].copy_(torch.from_numpy(episode))
        self._cur_episode = episode
        self._ended = ended
        if self._row_has_side[row]:
            self._side_slot[row].fill_(-1)
            self._row_has_side[row] = False
        if fo is not None:
            self._store_final(row, fo, torch.from_numpy(ended).to(self.device))
        self.head = (row + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self.total_steps += 1
        if self.debug_checks:
            self.check_invariants()

    def attach_final_obs(self, row: int, final_obs: Any, mask: Any) -> None:
        """Record ``final_obs`` as the next observation of the already written ``row``.

        ``final_obs`` is ``[num_envs, *obs_shape]``; only envs where ``mask`` is True are kept
        (in the side store, as for an episode that ended at ``row``; ``continue_`` is left as
        it is, so the step bootstraps like a truncation). For streams that break without an
        episode end (e.g. an env reset between two ``learn()`` calls): push the next row with
        ``is_first`` set for those envs.
        """
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < self.capacity:
            raise ConfigError("row", row, f"must be an int in [0, {self.capacity})")
        fo = self._src("final_obs", final_obs, field="obs")
        m = torch.from_numpy(np.array(self._host_bool("mask", mask))).to(self.device)
        self._store_final(row, fo, m)

    def extend_from_episodes(self, episodes: Iterable[Any]) -> Any:
        """Append recorded episodes (e.g. datapacks' ``.npz``).

        See :func:`gymcurric.replay.episodes.extend_from_episodes` for the array layout.

        Returns:
            The :class:`~gymcurric.replay.episodes.EpisodeLoadReport`.
        """
        from gymcurric.replay.episodes import extend_from_episodes

        return extend_from_episodes(self, episodes)

    def _store_final(self, row: int, final_obs: torch.Tensor, mask: torch.Tensor) -> None:
        # Sync-free: slots come from a cumulative sum; masked-out envs write to the trash slot.
        self._row_has_side[row] = True
        P = self.side_capacity
        trash_owner = self.capacity * self.num_envs
        if final_obs.device != self.device:
            final_obs = final_obs.to(self.device)
        k = mask.to(torch.int64).cumsum(0)
        slot = torch.where(mask, (self._side_ptr + k - 1) % P, P)
        owner = self._side_owner.index_select(0, slot)
        owner_idx = torch.where(owner >= 0, owner, trash_owner)
        still = (owner >= 0) & (self._side_slot_storage.index_select(0, owner_idx) == slot)
        self._side_lost += still.sum()
        self._side_slot_storage.index_fill_(0, torch.where(still, owner_idx, trash_owner), -1)
        self._side_obs.index_copy_(0, slot, final_obs)
        flat_rows = row * self.num_envs + self._env_arange
        self._side_owner.index_copy_(0, slot, torch.where(mask, flat_rows, -1))
        self._side_owner[P] = -1
        self._side_slot_storage.index_copy_(0, torch.where(mask, flat_rows, trash_owner), slot)
        self._side_ptr += k[-1]

    def clear(self) -> None:
        """Forget every row (tensors keep their memory); the generator is left as it is."""
        for t in (self._side_owner, self._side_slot_storage):
            t.fill_(-1)
        self._cur_episode = np.full(self.num_envs, -1, dtype=np.int32)
        self._row_has_side[:] = False
        self._row_any_first[:] = False
        self._row_next_first[:] = False
        self._side_ptr.zero_()
        self._side_lost.zero_()
        self._ended = np.ones(self.num_envs, dtype=bool)
        self.head = self.size = self.total_steps = 0

    # ------------------------------------------------------------------ sampling
    def _check_gen(self, gen: Any) -> None:
        if not isinstance(gen, torch.Generator):
            raise ConfigError("gen", gen, "a torch.Generator is required (no global RNG is used)")
        if gen.device.type != self.device.type:
            raise ConfigError(
                "gen", gen, f"generator on {gen.device}, expected one on {self.device.type}"
            )

    def sample_sequences(
        self,
        batch: int,
        seq_len: int,
        gen: torch.Generator,
        *,
        force_first: bool = False,
        return_indices: bool = False,
        fields: tuple[str, ...] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Sample ``batch`` contiguous windows of ``seq_len`` steps, one env per window.

        Starts are uniform over the chronological view, so every window lies within the newest
        :attr:`size` rows and never crosses the write pointer (it may wrap the physical end of
        the tensors). Windows that contain an episode start are returned unchanged, with
        ``is_first`` marking it (non-strict sampling).

        Args:
            batch: number of windows.
            seq_len: steps per window, ``1 <= seq_len <= size``.
            gen: a ``torch.Generator`` on the ring's device.
            force_first: set ``is_first[0]`` of every window to True (Dreamer-style training).
            return_indices: also return ``t_index`` (``[seq_len, batch]`` physical rows),
                ``env_index`` (``[batch]``) and ``step_index`` (``[batch]``, absolute step of
                each window's first row).
            fields: the fields to gather (default all).

        Returns:
            ``{field: [seq_len, batch, *shape]}`` (contiguous, time-major), plus the indices.
        """
        self._check_gen(gen)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch", batch, "must be an int >= 1")
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
            raise ConfigError("seq_len", seq_len, "must be an int >= 1")
        if seq_len > self.size:
            raise ConfigError(
                "seq_len", seq_len, f"longer than the {self.size} steps stored per env"
            )
        names = tuple(self._data) if fields is None else fields
        for name in names:
            if name not in self._data:
                raise ConfigError("fields", name, f"unknown field; known: {sorted(self._data)}")
        dev = self.device
        start = torch.randint(self.size - seq_len + 1, (batch,), generator=gen, device=dev)
        env = torch.randint(self.num_envs, (batch,), generator=gen, device=dev)
        t = (self._time_arange[:seq_len, None] + (start + self.oldest)[None, :]) % self.capacity
        flat = (t * self.num_envs + env[None, :]).view(-1)
        out: dict[str, torch.Tensor] = {}
        packed = None
        for name in names:
            if name in _PACKED:
                if packed is None:
                    packed = self._scalars_flat.index_select(0, flat).view(seq_len, batch, 3)
                out[name] = packed[..., _PACKED[name]]
            else:
                out[name] = torch.index_select(self._flat[name], 0, flat).view(
                    seq_len, batch, *self.specs[name].shape
                )
        if force_first and "is_first" in out:
            out["is_first"][0] = True
        if return_indices:
            out["t_index"] = t
            out["env_index"] = env
            out["step_index"] = start + (self.total_steps - self.size)
        return out

    def _validity(
        self, logical: torch.Tensor, env: torch.Tensor, newest_ok: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        t = (logical + self.oldest) % self.capacity
        flat = t * self.num_envs + env
        slot = self._side_slot.view(-1).index_select(0, flat)
        has_side = slot >= 0
        nxt = ((t + 1) % self.capacity) * self.num_envs + env
        next_first = self._flat["is_first"].index_select(0, nxt)
        newest = logical == self.size - 1
        valid = has_side | (~next_first & ~newest)
        if newest_ok:
            valid = valid | newest
        return valid, flat, nxt, slot

    def sample_transitions(
        self,
        batch: int,
        gen: torch.Generator,
        *,
        next_obs: Any = None,
        candidates: int = 8,
    ) -> Transitions:
        """Sample ``batch`` transitions uniformly over envs and the stored steps that have one.

        A step has a transition when its next observation is known: ``obs[t+1]`` of the same
        episode, or the side store's final observation when the episode ended at ``t``. The
        newest row has one only when ``next_obs`` is given (and where the side store has it).
        Rows without a successor (next-step autoreset's final-observation rows, rows whose
        side-store entry was dropped) are never returned on CPU, where such draws are redrawn;
        on CUDA each batch entry is the first valid one of ``candidates`` uniform draws (no
        host sync), so an entry is invalid with probability ``p ** candidates`` (``p`` the
        fraction of rows without a successor: 0 for same-step autoreset without losses, about
        1 / episode length for next-step autoreset); ``valid`` masks it.

        Args:
            batch: number of transitions.
            gen: a ``torch.Generator`` on the ring's device.
            next_obs: ``[num_envs, *obs_shape]`` observations following the newest row (the
                SB3 adapter passes them so that the newest step is sampled, as SB3 does).
            candidates: draws per entry on CUDA (see above), >= 1.

        Returns:
            :class:`Transitions` with ``done = 1 - continue_`` (terminations only).
        """
        self._check_gen(gen)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError("batch", batch, "must be an int >= 1")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ConfigError("candidates", candidates, "must be an int >= 1")
        nxt_obs = self._check_next_obs(next_obs)
        rows = self.size - (0 if nxt_obs is not None else 1)
        if rows < 1:
            raise ConfigError("batch", batch, f"no transition stored yet (size={self.size})")
        dev = self.device
        newest_ok = nxt_obs is not None
        if not self._sync_free:
            return self._sample_transitions_host(batch, gen, rows, nxt_obs)
        # CUDA: the first valid of `candidates` draws per entry, no host sync
        k = candidates
        logical = torch.randint(rows, (k, batch), generator=gen, device=dev)
        env = torch.randint(self.num_envs, (k, batch), generator=gen, device=dev)
        valid = self._validity(logical.view(-1), env.view(-1), newest_ok)[0].view(k, batch)
        pick = valid.to(torch.int8).argmax(0)  # first valid candidate (0 if none)
        sel = pick * batch + torch.arange(batch, device=dev)
        logical_s = logical.view(-1).index_select(0, sel)
        env_s = env.view(-1).index_select(0, sel)
        checked = self._validity(logical_s, env_s, newest_ok)
        return self._gather_transitions(logical_s, env_s, checked, nxt_obs)

    def _sample_transitions_host(
        self, batch: int, gen: torch.Generator, rows: int, nxt_obs: torch.Tensor | None
    ) -> Transitions:
        # CPU: one draw over (row, env) pairs, index math in numpy (small arrays: ~1 us per op
        # against ~4 us for torch), entries without a successor redrawn (exact), torch gathers.
        # Per-row flags (rows followed by an episode start / rows with side-store entries)
        # keep the per-(row, env) lookups, which miss the cache on big rings, to the few rows
        # that need them.
        E, C = self.num_envs, self.capacity
        newest_ok = nxt_obs is not None
        slots = self._side_slot_storage.numpy()
        first = self._np["is_first"].reshape(-1)
        CE = C * E
        shift = self.oldest * E
        last = (self.size - 1) * E  # pairs >= last are on the newest row
        pair = torch.randint(rows * E, (batch,), generator=gen).numpy()
        for _ in range(10_000):
            flat_np = pair + shift
            flat_np[flat_np >= CE] -= CE
            t = flat_np // E
            newest = pair >= last
            valid = np.ones(batch, dtype=bool)
            suspect = np.flatnonzero(self._row_next_first[t] | newest)
            if suspect.size:
                fs = flat_np[suspect]
                ns = fs + E
                ns[ns >= CE] -= CE
                ok = (slots[fs] >= 0) | ~(first[ns] | newest[suspect])
                valid[suspect] = (ok | newest[suspect]) if newest_ok else ok
            if valid.all():
                break
            bad = np.flatnonzero(~valid)
            pair[bad] = torch.randint(rows * E, (bad.size,), generator=gen).numpy()
        else:
            raise DataError(
                "ReplayRing.sample_transitions: no valid transition found (every stored step "
                "lacks its next observation)"
            )
        env = flat_np - t * E
        nxt_np = flat_np + E
        nxt_np[nxt_np >= CE] -= CE
        flat = torch.from_numpy(flat_np)
        obs_flat = self._flat["obs"]
        obs = torch.index_select(obs_flat, 0, flat)
        next_o = torch.index_select(obs_flat, 0, torch.from_numpy(nxt_np))
        side_rows = np.flatnonzero(self._row_has_side[t])
        with_side = np.zeros(batch, dtype=bool)
        if side_rows.size:
            sl = slots[flat_np[side_rows]]
            keep = sl >= 0
            if keep.any():
                at = side_rows[keep]
                with_side[at] = True
                next_o.index_copy_(
                    0,
                    torch.from_numpy(at),
                    self._side_obs.index_select(0, torch.from_numpy(sl[keep])),
                )
        if nxt_obs is not None:
            at = np.flatnonzero(newest & ~with_side)
            if at.size:
                next_o.index_copy_(
                    0, torch.from_numpy(at), nxt_obs.index_select(0, torch.from_numpy(env[at]))
                )
        packed = self._scalars_flat.index_select(0, flat)
        return Transitions(
            obs=obs,
            action=torch.index_select(self._flat["action"], 0, flat),
            reward=packed[:, 0],
            cost=packed[:, 1],
            next_obs=next_o,
            done=1.0 - packed[:, 2],
            valid=torch.from_numpy(valid),
            t_index=torch.from_numpy(t),
            env_index=torch.from_numpy(env),
            extras={n: torch.index_select(self._flat[n], 0, flat) for n in self.user_fields},
        )

    def transitions_at(self, t_index: Any, env_index: Any, *, next_obs: Any = None) -> Transitions:
        """The transitions at physical rows ``t_index`` of envs ``env_index`` (no sampling).

        Rows must lie in the ring's view; ``valid`` is False where a row has no successor (the
        newest row without ``next_obs``, next-step autoreset's final-observation rows, rows whose
        side-store entry was dropped); their ``next_obs`` is then meaningless.
        """
        t = torch.as_tensor(t_index, dtype=torch.int64, device=self.device).view(-1)
        env = torch.as_tensor(env_index, dtype=torch.int64, device=self.device).view(-1)
        if t.shape != env.shape:
            raise ConfigError("env_index", tuple(env.shape), f"must match t_index {tuple(t.shape)}")
        nxt_obs = self._check_next_obs(next_obs)
        logical = (t - self.oldest) % self.capacity
        valid, flat, nxt, slot = self._validity(logical, env, nxt_obs is not None)
        valid = valid & (logical < self.size)
        return self._gather_transitions(logical, env, (valid, flat, nxt, slot), nxt_obs)

    def _check_next_obs(self, next_obs: Any) -> torch.Tensor | None:
        if next_obs is None:
            return None
        spec = self.specs["obs"]
        return as_tensor_like(
            "next_obs", next_obs, (self.num_envs, *spec.shape), spec.dtype, self.device
        ).to(self.device)

    def _gather_transitions(
        self,
        logical_s: torch.Tensor,
        env_s: torch.Tensor,
        checked: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
        nxt_obs: torch.Tensor | None,
    ) -> Transitions:
        valid_s, flat_s, nxt_s, slot_s = checked
        obs_flat = self._flat["obs"]
        obs = torch.index_select(obs_flat, 0, flat_s)
        next_o = torch.index_select(obs_flat, 0, nxt_s)
        has_side = slot_s >= 0
        if nxt_obs is not None:
            use_pending = (logical_s == self.size - 1) & ~has_side
            self._override(next_o, use_pending, nxt_obs, env_s)
        self._override(next_o, has_side, self._side_obs, slot_s.clamp(min=0))
        packed = self._scalars_flat.index_select(0, flat_s)
        return Transitions(
            obs=obs,
            action=torch.index_select(self._flat["action"], 0, flat_s),
            reward=packed[:, 0],
            cost=packed[:, 1],
            next_obs=next_o,
            done=1.0 - packed[:, 2],
            valid=valid_s,
            t_index=flat_s // self.num_envs,
            env_index=env_s,
            extras={n: torch.index_select(self._flat[n], 0, flat_s) for n in self.user_fields},
        )

    def _override(
        self, dst: torch.Tensor, mask: torch.Tensor, src: torch.Tensor, src_idx: torch.Tensor
    ) -> None:
        if not self._sync_free:
            if bool(mask.any()):
                where = mask.nonzero().view(-1)
                dst.index_copy_(0, where, src.index_select(0, src_idx.index_select(0, where)))
            return
        picked = src.index_select(0, src_idx)
        m = mask.view(-1, *([1] * (dst.dim() - 1)))
        dst.copy_(torch.where(m, picked, dst))

    # ------------------------------------------------------------------ invariants
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
        ring = cls(
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
        meta = state["meta"]
        specs = {
            n: FieldSpec(tuple(s), dtype_from_name(d, "pickle"))
            for n, (s, d) in meta["specs"].items()
        }
        fields = {n: s for n, s in specs.items() if n not in _SCALARS}
        ReplayRing.__init__(
            self,
            meta["capacity"],
            meta["num_envs"],
            fields,
            state["device"],
            side_capacity=meta["side_capacity"],
            seed=meta["seed"],
            debug_checks=state["debug_checks"],
        )
        self.load_state_dict({"meta": meta, "tensors": state["tensors"]})
