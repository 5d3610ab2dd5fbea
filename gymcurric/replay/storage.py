"""``RingStorage``: the preallocated tensors of a ``ReplayRing`` and the row writes into them.

One object owns every tensor of a ring: the fields, the side store of final observations with
its slot tables, and the per-env episode bookkeeping. The index strategies
(:mod:`gymcurric.replay.indexing`) read and update the side-store tables; the ring decides what
is written where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay._checks import (
    STRIDED,
    as_tensor_like,
    available_bytes,
    check_invariants,
    device_flags,
    host_flags,
    non_blocking_copy,
    numpy_dtype,
    reward_required,
    unreadable,
)
from gymcurric.replay.specs import PACKED_COLUMNS, STANDARD_FIELDS, FieldSpec

__all__ = ["CheckedStep", "RingStorage", "StepArgs", "check_memory_budget"]


class StepArgs(NamedTuple):
    """The arguments of one ``ReplayRing.push_step``, unchecked (``checked_step`` checks them)."""

    obs: Any  #: None: already written into the ring's ``obs_slot(head)``
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    cost: Any  #: None: 0
    is_first: Any  #: None: the envs whose previous step ended an episode (all at the first push)
    final_obs: Any
    extra: Mapping[str, Any]  #: one value per user field
    first_push: bool  #: nothing was pushed before this step


class CheckedStep(NamedTuple):
    """The inputs of one ``push_step``, checked and converted for the storage."""

    rows: list[tuple[str, np.ndarray | torch.Tensor]]  #: obs (if given), action, user fields
    packed: np.ndarray  #: ``[num_envs, 3]``: reward, cost, continue_
    is_first: np.ndarray
    ended: np.ndarray  #: terminated or truncated
    final_obs: torch.Tensor | None  #: given, and some episode ended


def check_memory_budget(
    capacity: int,
    num_envs: int,
    specs: Mapping[str, FieldSpec],
    side_capacity: int,
    device: torch.device,
    memory_budget: int | None,
) -> None:
    """Refuse a ring that needs more than ``memory_budget`` bytes.

    The default budget is what ``device`` has available now. The ``ConfigError`` gives the
    bytes per field.
    """
    needed = RingStorage.bytes_required(capacity, num_envs, specs, side_capacity)
    budget = available_bytes(device) if memory_budget is None else int(memory_budget)
    if needed > budget:
        per_field = ", ".join(
            f"{n}: {s.nbytes_per_row(num_envs) * capacity:,}" for n, s in specs.items()
        )
        raise ConfigError(
            "capacity",
            capacity,
            f"the ring needs {needed:,} bytes on {device} ({per_field}; side store "
            f"included) but only {budget:,} bytes are "
            f"{'allowed (memory_budget)' if memory_budget is not None else 'available'}; "
            "lower capacity or num_envs, store observations in a smaller dtype, or use "
            "another device",
            source="ReplayRing",
        )


class RingStorage:
    """The tensors of a ring of ``capacity`` rows of ``num_envs`` envs, allocated zero-filled.

    Layout:

    * every field is ``fields[name]``, ``[capacity, num_envs, *shape]``, and ``flat_fields[name]``
      is its ``[capacity * num_envs, *shape]`` view (row ``t``, env ``e`` at ``t * num_envs +
      e``), which the samplers gather from;
    * ``reward``, ``cost`` and ``continue_`` are columns of one ``packed`` tensor
      ``[capacity, num_envs, 3]``: one copy per push and one gather per sample instead of three
      (per-step writes are dispatch-bound);
    * observations and the side store share ``observations``: rows ``[0, capacity *
      num_envs)`` are the ring's, then ``side_capacity`` side-store rows and a trash row for
      masked-out writes, so every transition's next observation is one row of it;
    * side-store tables: ``side_owner[slot]`` is the flat step a slot serves (-1: none),
      ``side_slot_table[flat]`` the slot of a step (-1: none); the last entry of each is a
      trash entry for masked-out writes, which always holds -1 (the device index reads it;
      :meth:`restore` resets it). ``side_pointer`` is the next slot to fill and ``side_lost``
      counts entries dropped while their row was kept;
    * episode bookkeeping per env: ``current_episode`` (the newest row's ``episode_id``, -1
      before the first push) and ``episode_ended`` (the newest step ended its episode, so the
      next one starts one); and ``row_has_side[t]``, on the host (a row may hold side-store
      entries: a hint, exact after :meth:`restore`).

    With ``numpy_views`` (CPU only, the host index), ``numpy_fields`` and ``numpy_packed`` are
    numpy views of the tensors: numpy inputs are then written by numpy assignment (~1 us against
    ~4-8 us for torch's indexing and ``copy_`` on small rows), and the episode bookkeeping is
    numpy. Without them (the device index) the bookkeeping is tensors on the device and a push
    is a fixed sequence of torch operations that never reads a device value on the host (see
    :class:`~gymcurric.replay.device_writes.DeviceWriter`, which writes such rings).
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        specs: Mapping[str, FieldSpec],
        device: torch.device,
        side_capacity: int,
        numpy_views: bool,
    ) -> None:
        steps = capacity * num_envs
        self.capacity = capacity
        self.num_envs = num_envs
        self.specs = dict(specs)
        self.device = device
        #: host-to-device copies may be non-blocking (CUDA only: see ``non_blocking_copy``)
        self.non_blocking = non_blocking_copy(device)
        self.side_capacity = side_capacity
        self.packed = torch.zeros((capacity, num_envs, 3), dtype=torch.float32, device=device)
        self.packed_flat = self.packed.view(steps, 3)
        obs_spec = self.specs["obs"]
        self.observations = torch.zeros(
            (steps + side_capacity + 1, *obs_spec.shape), dtype=obs_spec.dtype, device=device
        )
        self.fields: dict[str, torch.Tensor] = {}
        for name, spec in self.specs.items():
            if name in PACKED_COLUMNS:
                self.fields[name] = self.packed[..., PACKED_COLUMNS[name]]
            elif name == "obs":
                self.fields[name] = self.observations[:steps].view(capacity, num_envs, *spec.shape)
            else:
                self.fields[name] = torch.zeros(
                    (capacity, num_envs, *spec.shape), dtype=spec.dtype, device=device
                )
        self.flat_fields = {
            name: t.view(steps, *self.specs[name].shape)
            for name, t in self.fields.items()
            if name not in PACKED_COLUMNS
        }
        self.user_fields = tuple(
            n for n in self.specs if n not in STANDARD_FIELDS and n not in ("obs", "action")
        )
        self.numpy_dtypes = {name: numpy_dtype(spec.dtype) for name, spec in self.specs.items()}
        self.row_shapes = {name: (num_envs, *spec.shape) for name, spec in self.specs.items()}
        #: by field: (torch dtype, numpy dtype or None, row shape) of a row that the general
        #: checks take as it is; the builtin numpy dtypes are singletons, so the quick tests of
        #: the pushes compare them by identity (``value.dtype is numpy_dtype``); an equal dtype
        #: that is another object (an unpickled array's) takes the general checks, same result
        self.kinds = {
            name: (
                spec.dtype,
                None if self.numpy_dtypes[name] is None else np.dtype(self.numpy_dtypes[name]),
                self.row_shapes[name],
            )
            for name, spec in self.specs.items()
        }
        self.numpy_fields: dict[str, np.ndarray] = {}
        self.numpy_packed: np.ndarray | None = None
        if numpy_views:
            self.numpy_fields = {
                name: t.numpy()
                for name, t in self.fields.items()
                if name not in PACKED_COLUMNS and self.numpy_dtypes[name] is not None
            }
            self.numpy_packed = self.packed.numpy()
        self.side_observations = self.observations[steps:]
        self.side_owner = torch.full((side_capacity + 1,), -1, dtype=torch.int64, device=device)
        self.side_slot_table = torch.full((steps + 1,), -1, dtype=torch.int64, device=device)
        self.side_slot = self.side_slot_table[:steps].view(capacity, num_envs)
        self.side_pointer = torch.zeros((), dtype=torch.int64, device=device)
        self.side_lost = torch.zeros((), dtype=torch.int64, device=device)
        self.no_entry = torch.full((), -1, dtype=torch.int64, device=device)
        self.row_has_side = np.zeros(capacity, dtype=bool)
        self.current_episode: Any = np.full(num_envs, -1, dtype=np.int32)
        self.episode_ended: Any = np.ones(num_envs, dtype=bool)
        if not numpy_views:
            #: the episode ids before the first push and after a clear or restore; after a
            #: push ``current_episode`` is the newest ``episode_id`` row itself
            self.episode_state = torch.from_numpy(self.current_episode).to(device)
            self.current_episode = self.episode_state
            self.episode_ended = torch.from_numpy(self.episode_ended).to(device)
        self.env_range = torch.arange(num_envs, dtype=torch.int64, device=device)
        self.time_range = torch.arange(capacity, dtype=torch.int64, device=device)

    @staticmethod
    def bytes_required(
        capacity: int, num_envs: int, specs: Mapping[str, FieldSpec], side_capacity: int
    ) -> int:
        """Bytes a ring with these fields needs (fields, side store and index tables)."""
        total = sum(s.nbytes_per_row(num_envs) * capacity for s in specs.values())
        total += specs["obs"].nbytes_per_row(1) * (side_capacity + 1) + 8 * (side_capacity + 1)
        total += 2 * 8 * (capacity * num_envs + 1) + 64 * num_envs
        return int(total)

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors (fields, side store, side-store tables)."""
        tensors = [
            *self.fields.values(),
            self.side_observations,
            self.side_owner,
            self.side_slot_table,
        ]
        return int(sum(t.numel() * t.element_size() for t in tensors))

    # ------------------------------------------------------------------ checked inputs
    def checked_tensor(self, name: str, value: Any, field: str | None = None) -> torch.Tensor:
        """``value`` checked as one row of ``field`` (default ``name``), as a tensor.

        A numpy input gives a CPU tensor sharing its memory, whatever the ring's device.
        """
        field = field or name
        # fast path: a writable numpy array of exactly the field's dtype and shape (a field
        # numpy lacks has None, which numpy's == takes for float64: such arrays were let
        # through, and the host index's side store refused them after the row was written)
        numpy_dtype = self.numpy_dtypes[field]
        if (
            type(value) is np.ndarray
            and numpy_dtype is not None
            and value.dtype == numpy_dtype
            and value.shape == self.row_shapes[field]
            and value.flags.writeable
        ):
            try:
                return torch.from_numpy(value)
            except ValueError:  # negative strides: as_tensor_like copies
                pass
        spec = self.specs[field]
        return as_tensor_like(name, value, self.row_shapes[field], spec.dtype, self.device)

    def checked_next_obs(self, next_obs: Any) -> torch.Tensor | None:
        """The observations following the newest row, on the ring's device (None stays None).

        In the obs field's dtype: a float64 array for a float32 ring is cast, as the host
        index's draws do (the device index's draws returned float64 observations).
        """
        if next_obs is None:
            return None
        checked = self.checked_tensor("next_obs", next_obs, field="obs")
        return checked.to(self.device, self.specs["obs"].dtype)

    def prepared_row(self, name: str, value: Any) -> np.ndarray | torch.Tensor:
        """``value`` checked as one row of field ``name``, ready for :meth:`write_step`.

        With numpy views a numpy input is kept as it is (numpy casts it on assignment).
        """
        if (
            name in self.numpy_fields
            and type(value) is np.ndarray
            and value.shape == self.row_shapes[name]
        ):
            target = self.numpy_dtypes[name]
            if value.dtype == target or (
                value.dtype != np.object_
                and target is not np.bool_
                and value.dtype != np.bool_
                and np.can_cast(value.dtype, target, "same_kind")
            ):
                return value
        return self.checked_tensor(name, value)

    def packed_row(
        self, reward: Any, cost: Any, continues: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """The ``[num_envs, 3]`` row of (reward, cost, continue_), checked (cost None: 0).

        Written into ``out`` (a float32 ``[num_envs, 3]`` array) when given. ``reward=None`` is
        refused (it is required), before anything is written into ``out``.
        """
        num_envs = self.num_envs
        if reward is None:
            raise reward_required(num_envs)
        row = np.empty((num_envs, 3), dtype=np.float32) if out is None else out
        for column, name, value in ((0, "reward", reward), (1, "cost", cost)):
            if value is None:
                row[:, column] = 0.0
                continue
            if isinstance(value, torch.Tensor):
                # resolve_neg: numpy() refuses a tensor with the negative bit (a view)
                value = self.checked_tensor(name, value).resolve_neg().numpy()
            try:
                arr = np.asarray(value)
            except (TypeError, ValueError, RuntimeError) as err:  # ragged lists...
                raise unreadable(name, value, f"expected numbers of shape ({num_envs},)") from err
            if arr.shape != (num_envs,) or arr.dtype.kind not in "biuf":
                raise ConfigError(
                    name,
                    f"array of dtype {arr.dtype} and shape {arr.shape}",
                    f"expected numbers of shape ({num_envs},)",
                    source="ReplayRing",
                )
            row[:, column] = arr
        row[:, 2] = continues
        return row

    def checked_step(self, args: StepArgs) -> CheckedStep:
        """The arguments of one ``push_step``, checked and converted; nothing is written.

        For a storage with numpy views (the host index); the device index's pushes are
        :class:`~gymcurric.replay.device_writes.DeviceWriter`'s.
        """
        terminated = host_flags("terminated", args.terminated, self.num_envs)
        truncated = host_flags("truncated", args.truncated, self.num_envs)
        if args.is_first is None:
            first = self.episode_ended
        else:
            first = host_flags("is_first", args.is_first, self.num_envs)
            if args.first_push and not first.all():
                raise ConfigError(
                    "is_first",
                    args.is_first,
                    "the first step of every env must start an episode",
                    source="ReplayRing",
                )
        rows = [("action", self.prepared_row("action", args.action))]
        if args.obs is not None:
            rows.append(("obs", self.prepared_row("obs", args.obs)))
        if args.extra:
            rows.extend((name, self.prepared_row(name, v)) for name, v in args.extra.items())
        packed = self.packed_row(args.reward, args.cost, ~terminated)
        ended = terminated | truncated
        final = None
        final_obs = args.final_obs
        if final_obs is not None:  # checked even if no episode ended, as the device index
            if ended.any():
                final = self.checked_tensor("final_obs", final_obs, field="obs")
            else:  # nothing to store: only checked, the usual inputs without a call
                obs_dtype, obs_numpy_dtype, obs_shape = self.kinds["obs"]
                kind = type(final_obs)
                usual = (
                    final_obs.dtype is obs_numpy_dtype
                    if kind is np.ndarray
                    else kind is torch.Tensor
                    and final_obs.dtype is obs_dtype
                    and final_obs.layout is STRIDED  # sparse & co.: the general checks raise
                    and not final_obs.is_nested  # strided ones too (their .shape raises)
                    and final_obs.device == self.device
                )
                if not (usual and final_obs.shape == obs_shape):  # the general checks raise
                    self.checked_tensor("final_obs", final_obs, field="obs")
        return CheckedStep(rows, packed, first, ended, final)

    # ------------------------------------------------------------------ writes
    def start_episodes(self, mask: Any) -> None:
        """Make the next push of the envs in ``mask`` (``[num_envs]`` bool) start an episode."""
        if isinstance(self.episode_ended, np.ndarray):
            self.episode_ended = self.episode_ended | host_flags("mask", mask, self.num_envs)
        else:
            flags = device_flags(
                {"mask": mask}, self.num_envs, self.device, non_blocking=self.non_blocking
            )
            ended = flags.tensors["mask"]
            self.episode_ended |= ended

    def write_step(self, row: int, step: CheckedStep) -> None:
        """Write a :meth:`checked_step` at physical ``row``; advance the episode bookkeeping.

        ``episode_id`` follows from ``is_first``; the side-store entries of the row's previous
        contents are forgotten (the index strategy stores the step's final observations).
        """
        assert self.numpy_packed is not None  # only rings with numpy views make a CheckedStep
        for name, source in step.rows:
            if isinstance(source, np.ndarray):
                self.numpy_fields[name][row] = source
            else:
                self.fields[name][row].copy_(source)
        episode = self.current_episode + step.is_first
        self.numpy_packed[row] = step.packed
        self.numpy_fields["is_first"][row] = step.is_first
        self.numpy_fields["episode_id"][row] = episode
        self.current_episode = episode
        self.episode_ended = step.ended
        if self.row_has_side[row]:
            self.side_slot[row].fill_(-1)
            self.row_has_side[row] = False

    def clear(self) -> None:
        """Forget every side-store entry and restart the episodes (the rows stay as they are)."""
        self.side_owner.fill_(-1)
        self.side_slot_table.fill_(-1)
        self.side_pointer.zero_()
        self.side_lost.zero_()
        self.row_has_side[:] = False
        if isinstance(self.current_episode, np.ndarray):
            self.current_episode = np.full(self.num_envs, -1, dtype=np.int32)
            self.episode_ended = np.ones(self.num_envs, dtype=bool)
        else:
            self.current_episode = self.episode_state.fill_(-1)
            self.episode_ended = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)

    # ------------------------------------------------------------------ reads
    def gather(self, names: tuple[str, ...], flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The steps at ``flat`` indices (``t * num_envs + e``) of fields ``names``.

        Each is ``[len(flat), *shape]``; the packed fields are strided columns of one gather.
        """
        out: dict[str, torch.Tensor] = {}
        packed = None
        for name in names:
            if name in PACKED_COLUMNS:
                if packed is None:
                    packed = self.packed_flat.index_select(0, flat)
                out[name] = packed[:, PACKED_COLUMNS[name]]
            else:
                out[name] = torch.index_select(self.flat_fields[name], 0, flat)
        return out

    # ------------------------------------------------------------------ state
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors of a state dict, by key (views: writing them writes the storage)."""
        tensors = {f"field.{n}": t for n, t in self.fields.items()}
        tensors.update(
            {
                "side.obs": self.side_observations,
                "side.owner": self.side_owner,
                "side.slot": self.side_slot_table,
                "side.ptr": self.side_pointer,
                "side.lost": self.side_lost,
                "state.cur_episode": torch.as_tensor(self.current_episode),
                "state.ended": torch.as_tensor(self.episode_ended),
            }
        )
        return tensors

    def restore(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Copy checked :meth:`state_tensors` in; ``row_has_side`` follows (exactly).

        A state tensor that requires grad gives its values: a copy of it would put the ring's
        tensors in its autograd graph, and a later copy then raised half-way through.
        """
        if isinstance(self.current_episode, torch.Tensor):
            self.current_episode = self.episode_state  # not the newest row: copies go here
        for name, target in self.state_tensors().items():
            target.copy_(tensors[name].detach())
        self.side_owner[-1:].fill_(-1)  # the trash entries (states may hold anything there)
        self.side_slot_table[-1:].fill_(-1)
        self.row_has_side = (self.side_slot >= 0).any(dim=1).cpu().numpy()

    def check_invariants(self, oldest: int, size: int, total_steps: int) -> None:
        """The episode continuity of the ``size`` rows from ``oldest`` (see ``_checks``)."""
        check_invariants(
            episode_id=self.fields["episode_id"],
            is_first=self.fields["is_first"],
            continue_=self.fields["continue_"],
            oldest=oldest,
            size=size,
            total_steps=total_steps,
        )
