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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.replay._checks import NO_NEXT, available_bytes, numpy_dtype

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


@dataclass(frozen=True)
class FieldSpec:
    """Shape (per env, per step) and dtype of one ring field.

    Examples:
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


#: Unsigned dtypes torch has few operations for: it cannot gather their one-value-per-step
#: fields (``index_select`` is not implemented for them on 1-D tensors; fields with a shape
#: work) nor copy rows of them by index (``index_copy_``), which the side store of ``obs``
#: needs. Such fields are refused at construction rather than at the first sample or episode
#: end; each maps to the signed dtype that holds all its values (uint64: up to 2**63 - 1).
_UNGATHERABLE = {torch.uint16: "int32", torch.uint32: "int64", torch.uint64: "int64"}


def _check_dtype(name: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    if dtype in _UNGATHERABLE and name == "obs":
        raise ConfigError(
            "fields['obs']",
            dtype,
            "torch cannot copy rows of this dtype by index (index_copy_), which the side store "
            f"of terminal observations needs; store observations as torch.{_UNGATHERABLE[dtype]}"
            " (numpy arrays of the unsigned dtype are accepted and keep their values; "
            "from_spaces does this)",
            source="ReplayRing",
        )
    if dtype in _UNGATHERABLE and shape == ():
        raise ConfigError(
            f"fields[{name!r}]",
            dtype,
            "torch cannot gather a shape-() field of this dtype (index_select is not "
            f"implemented for it); store it as torch.{_UNGATHERABLE[dtype]}, or with shape (1,)",
            source="ReplayRing",
        )


def _spec(name: str, value: Any) -> FieldSpec:
    if isinstance(value, FieldSpec):
        _check_dtype(name, value.dtype, tuple(value.shape))
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
        _check_dtype(name, value[1], shape)
        return FieldSpec(shape, value[1])
    raise ConfigError(
        f"fields[{name!r}]", value, "expected a FieldSpec or a (shape, torch.dtype) tuple"
    )


def _space_spec(name: str, space: gym.Space[Any]) -> FieldSpec:
    if isinstance(space, gym.spaces.Box):
        dt = np.dtype(space.dtype)
        if dt == np.float64:
            torch_dt = torch.float32
        elif dt.kind == "u" and dt.itemsize > 1:  # see _UNGATHERABLE
            torch_dt = getattr(torch, _UNGATHERABLE[getattr(torch, dt.name)])
        else:
            torch_dt = torch.from_numpy(np.zeros(0, dt)).dtype
        _check_dtype(name, torch_dt, tuple(space.shape))
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


# The mixins import FieldSpec, Transitions and the field constants above, so they come after them.
from gymcurric.replay._persist import RingPersistenceMixin  # noqa: E402
from gymcurric.replay._sampling import RingSamplingMixin  # noqa: E402
from gymcurric.replay._writes import RingWritesMixin  # noqa: E402


class ReplayRing(RingWritesMixin, RingSamplingMixin, RingPersistenceMixin):
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

    Examples:
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
        check_int(
            "capacity", capacity, minimum=2, source="ReplayRing", reason="must be an int >= 2"
        )
        check_int("num_envs", num_envs, source="ReplayRing", reason="must be an int >= 1")
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
        check_int("side_capacity", side_capacity, source="ReplayRing", reason="must be an int >= 1")
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
        obs_spec = specs["obs"]
        CE = capacity * num_envs
        # Observations and the side store share one tensor: rows [0, C·E) are the ring's
        # (time-major), then side_capacity side-store rows and a trash row for masked-out
        # writes. Every transition's next observation is then one row of it, wherever it lives.
        self._obs_all = torch.zeros(
            (CE + side_capacity + 1, *obs_spec.shape), dtype=obs_spec.dtype, device=dev
        )
        self._data: dict[str, torch.Tensor] = {}
        for name, spec in specs.items():
            if name in _PACKED:
                self._data[name] = self._scalars[..., _PACKED[name]]
            elif name == "obs":
                self._data[name] = self._obs_all[:CE].view(capacity, num_envs, *spec.shape)
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
        # side store; the last entry of each tensor is a trash slot for masked-out writes
        self._side_obs = self._obs_all[CE:]
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
        # CPU sampler: per (row, env) the _obs_all row of the transition's next observation,
        # NO_NEXT (none known) or PENDING (the newest row's, not written yet); kept at write
        # time so that a uniform draw needs one lookup (entry C·E: trash for masked writes)
        self._next = np.full(0 if self._sync_free else CE + 1, NO_NEXT, dtype=np.int64)
        self._env_arange_np = np.arange(num_envs, dtype=np.int64)
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

        Box keeps its dtype, except that float64 becomes float32 and uint16/uint32/uint64
        become int32/int64/int64 (torch lacks the operations the ring needs on them; uint64
        values above ``2**63 - 1`` wrap); Discrete/MultiDiscrete are int64. Pass
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
        total += 2 * 8 * (capacity * num_envs + 1) + 64 * num_envs
        return int(total)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring's tensors."""
        tensors = [*self._data.values(), self._side_obs, self._side_owner, self._side_slot_storage]
        return int(sum(t.numel() * t.element_size() for t in tensors)) + self._next.nbytes

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
