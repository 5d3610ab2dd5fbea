"""The ring's field layout: :class:`FieldSpec`, the standard fields, :class:`Transitions`.

Every other module of the ring reads its field names, dtypes and batch type from here, so this
module imports nothing else of the ring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gymcurric._checks import check_int
from gymcurric._torch_devices import usable_device
from gymcurric.errors import ConfigError

__all__ = [
    "FieldSpec",
    "Transitions",
    "STANDARD_FIELDS",
    "PACKED_COLUMNS",
    "RESERVED_NAMES",
    "RingLayout",
    "field_specs",
    "ring_layout",
    "space_fields",
    "space_spec",
]

#: The one-value-per-step fields every ring has, with their dtypes.
STANDARD_FIELDS: dict[str, torch.dtype] = {
    "reward": torch.float32,
    "cost": torch.float32,
    "is_first": torch.bool,
    "continue_": torch.float32,
    "episode_id": torch.int32,
}
#: Column of each field in the shared ``[capacity, num_envs, 3]`` float32 tensor.
PACKED_COLUMNS = {"reward": 0, "cost": 1, "continue_": 2}
#: Names the samplers use for what they return besides the fields.
RESERVED_NAMES = frozenset({"next_obs", "done", "valid", "t_index", "env_index", "step_index"})

#: Unsigned dtypes torch has few operations for: it cannot gather their one-value-per-step
#: fields (``index_select`` is not implemented for them on 1-D tensors; fields with a shape
#: work) nor copy rows of them by index (``index_copy_``), which the side store of ``obs``
#: needs. Such fields are refused at construction rather than at the first sample or episode
#: end; each maps to the signed dtype that holds all its values (uint64: up to 2**63 - 1).
UNGATHERABLE_DTYPES = {torch.uint16: "int32", torch.uint32: "int64", torch.uint64: "int64"}


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
    from :meth:`ReplayRing.sample_transitions` with the host index, only where no draw of the
    batch has one with the device index (see there), and where
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


def _check_dtype(name: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    if dtype in UNGATHERABLE_DTYPES and name == "obs":
        raise ConfigError(
            "fields['obs']",
            dtype,
            "torch cannot copy rows of this dtype by index (index_copy_), which the side store "
            "of terminal observations needs; store observations as "
            f"torch.{UNGATHERABLE_DTYPES[dtype]} (numpy arrays of the unsigned dtype are "
            "accepted and keep their values; from_spaces does this)",
            source="ReplayRing",
        )
    if dtype in UNGATHERABLE_DTYPES and shape == ():
        raise ConfigError(
            f"fields[{name!r}]",
            dtype,
            "torch cannot gather a shape-() field of this dtype (index_select is not "
            f"implemented for it); store it as torch.{UNGATHERABLE_DTYPES[dtype]}, or with "
            "shape (1,)",
            source="ReplayRing",
        )


def _field_spec(name: str, value: Any) -> FieldSpec:
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


def field_specs(fields: Any) -> dict[str, FieldSpec]:
    """Every field of a ring built with ``fields`` (``obs``, ``action``, standard, user).

    Raises:
        ConfigError: ``obs`` or ``action`` is missing, a spec is malformed, a dtype cannot be
            gathered, or a user field takes a standard or reserved name.
    """
    if not isinstance(fields, Mapping) or "obs" not in fields or "action" not in fields:
        raise ConfigError(
            "fields", fields, "must be a mapping with 'obs' and 'action'", source="ReplayRing"
        )
    specs = {
        "obs": _field_spec("obs", fields["obs"]),
        "action": _field_spec("action", fields["action"]),
    }
    specs.update({name: FieldSpec((), dtype) for name, dtype in STANDARD_FIELDS.items()})
    for name, value in fields.items():
        if name in ("obs", "action"):
            continue
        if name in STANDARD_FIELDS or name in RESERVED_NAMES or not str(name).isidentifier():
            raise ConfigError(
                f"fields[{name!r}]",
                value,
                "the name is reserved or not an identifier (standard fields: "
                f"{sorted(STANDARD_FIELDS)}; reserved: {sorted(RESERVED_NAMES)})",
                source="ReplayRing",
            )
        specs[name] = _field_spec(name, value)
    return specs


def space_spec(name: str, space: gym.Space[Any]) -> FieldSpec:
    """The field that stores a single-env Gymnasium ``space`` (see ``ReplayRing.from_spaces``).

    Raises:
        ConfigError: the space is not a Box, Discrete, MultiDiscrete or MultiBinary.
    """
    if isinstance(space, gym.spaces.Box):
        dt = np.dtype(space.dtype)
        if dt == np.float64:
            torch_dtype = torch.float32
        elif dt.kind == "u" and dt.itemsize > 1:  # see UNGATHERABLE_DTYPES
            torch_dtype = getattr(torch, UNGATHERABLE_DTYPES[getattr(torch, dt.name)])
        else:
            torch_dtype = torch.from_numpy(np.zeros(0, dt)).dtype
        _check_dtype(name, torch_dtype, tuple(space.shape))
        return FieldSpec(tuple(space.shape), torch_dtype)
    if isinstance(space, gym.spaces.Discrete):
        return FieldSpec((), torch.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return FieldSpec(tuple(space.shape), torch.int64)
    if isinstance(space, gym.spaces.MultiBinary):
        return FieldSpec(tuple(np.atleast_1d(space.n).tolist()), torch.int8)
    raise ConfigError(
        name, space, "supported spaces: Box, Discrete, MultiDiscrete, MultiBinary (flatten Dicts)"
    )


def space_fields(
    observation_space: gym.Space[Any], action_space: gym.Space[Any], extra: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``fields`` of a ring for single-env spaces (see ``ReplayRing.from_spaces``)."""
    fields: dict[str, Any] = {
        "obs": space_spec("observation_space", observation_space),
        "action": space_spec("action_space", action_space),
    }
    fields.update(extra or {})
    return fields


class RingLayout(NamedTuple):
    """A ring's checked fields, device and side-store size."""

    specs: dict[str, FieldSpec]
    device: torch.device
    side_capacity: int


def ring_layout(
    capacity: Any, num_envs: Any, fields: Any, device: Any, side_capacity: Any
) -> RingLayout:
    """Check the layout arguments of ``ReplayRing`` and fill in the defaults.

    ``"cuda"`` becomes the current CUDA device and ``"cpu:0"`` the CPU (a CPU tensor's device
    has no index: ``torch.device("cpu:0")`` is not its device, and ``.to`` it copies);
    ``side_capacity`` None becomes ``max(2 * num_envs, capacity * num_envs // 32)``.

    Raises:
        ConfigError: naming the argument at fault (a ``device`` torch does not know, or one
            this machine lacks: CUDA or MPS not available, a backend torch cannot allocate on).
    """
    check_int("capacity", capacity, minimum=2, source="ReplayRing", reason="must be an int >= 2")
    check_int("num_envs", num_envs, source="ReplayRing", reason="must be an int >= 1")
    specs = field_specs(fields)
    device = usable_device(device, source="ReplayRing")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    elif device.type == "cpu":
        device = torch.device("cpu")
    if side_capacity is None:
        side_capacity = max(2 * num_envs, capacity * num_envs // 32)
    check_int("side_capacity", side_capacity, source="ReplayRing", reason="must be an int >= 1")
    return RingLayout(specs, device, side_capacity)
