"""What a ``ReplayRing``'s samplers share, whatever its index strategy.

Sequence windows (:func:`sample_sequences`), the rows of transitions and their gather
(:func:`transition_rows`, :func:`gather_transitions`, :func:`transitions_at`) and the checks of
``sample_transitions``' arguments (:func:`transition_draw`). The strategies themselves
(:class:`~gymcurric.replay.indexing.HostIndex`, :class:`~gymcurric.replay.indexing.DeviceIndex`)
are in :mod:`gymcurric.replay.indexing`; they pass their ``override`` in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError
from gymcurric.replay._checks import check_generator, check_indices
from gymcurric.replay.specs import Transitions
from gymcurric.replay.storage import RingStorage

__all__ = [
    "Override",
    "TransitionRows",
    "gather_transitions",
    "sample_sequences",
    "transition_draw",
    "transition_rows",
    "transitions_at",
]

#: ``override(target, mask, source, source_index)``: ``target[i] = source[source_index[i]]``
#: where ``mask[i]`` (the strategy's ``override``).
Override = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None]


class TransitionRows(NamedTuple):
    """Where the parts of some transitions are, as flat indices ``t * num_envs + e``."""

    valid: torch.Tensor  #: the step has a known next observation
    flat: torch.Tensor  #: the step
    next_flat: torch.Tensor  #: the next row of the same env (its observation, if no side entry)
    side_slot: torch.Tensor  #: the side-store slot of the step's final observation (-1: none)


def transition_rows(
    storage: RingStorage,
    logical: torch.Tensor,
    env: torch.Tensor,
    *,
    oldest: int,
    size: int,
    newest_ok: bool,
) -> TransitionRows:
    """The rows of the transitions at chronological rows ``logical`` of envs ``env``.

    A step has a next observation when the side store holds one for it, or when the next row
    continues its episode and is stored (the newest row's only when ``newest_ok``).
    """
    num_envs, capacity = storage.num_envs, storage.capacity
    flat = ((logical + oldest) % capacity) * num_envs + env
    slot = storage.side_slot_table.index_select(0, flat)
    next_flat = (flat + num_envs) % (capacity * num_envs)  # row t + 1 (mod capacity), env e
    next_first = storage.flat_fields["is_first"].index_select(0, next_flat)
    newest = logical == size - 1
    valid = (slot >= 0) | ~(next_first | newest)
    if newest_ok:
        valid = valid | newest
    return TransitionRows(valid, flat, next_flat, slot)


def gather_transitions(
    storage: RingStorage,
    logical: torch.Tensor,
    env: torch.Tensor,
    rows: TransitionRows,
    next_obs: torch.Tensor | None,
    *,
    size: int,
    override: Override,
) -> Transitions:
    """The transitions at ``rows``.

    The next observation comes from the side store where it has an entry, else from
    ``next_obs`` (for the newest row) or the next row.
    """
    observations = storage.flat_fields["obs"]
    obs = torch.index_select(observations, 0, rows.flat)
    next_observations = torch.index_select(observations, 0, rows.next_flat)
    has_side = rows.side_slot >= 0
    if next_obs is not None:
        pending = (logical == size - 1) & ~has_side
        override(next_observations, pending, next_obs, env)
    override(next_observations, has_side, storage.side_observations, rows.side_slot.clamp(min=0))
    packed = storage.packed_flat.index_select(0, rows.flat)
    return Transitions(
        obs=obs,
        action=torch.index_select(storage.flat_fields["action"], 0, rows.flat),
        reward=packed[:, 0],
        cost=packed[:, 1],
        next_obs=next_observations,
        done=1.0 - packed[:, 2],
        valid=rows.valid,
        t_index=rows.flat // storage.num_envs,
        env_index=env,
        extras={
            n: torch.index_select(storage.flat_fields[n], 0, rows.flat) for n in storage.user_fields
        },
    )


def sample_sequences(
    storage: RingStorage,
    batch: int,
    seq_len: int,
    generator: torch.Generator,
    fields: tuple[str, ...] | None,
    force_first: bool,
    return_indices: bool,
    oldest: int,
    size: int,
    total_steps: int,
) -> dict[str, torch.Tensor]:
    """``ReplayRing.sample_sequences`` (see there), with the ring's counters passed in."""
    check_generator(generator, storage.device)
    check_int("batch", batch, reason="must be an int >= 1")
    check_int("seq_len", seq_len, reason="must be an int >= 1")
    if seq_len > size:
        raise ConfigError("seq_len", seq_len, f"longer than the {size} steps stored per env")
    names = tuple(storage.fields) if fields is None else fields
    for name in names:
        if name not in storage.fields:
            raise ConfigError("fields", name, f"unknown field; known: {sorted(storage.fields)}")
    device, capacity, num_envs = storage.device, storage.capacity, storage.num_envs
    start = torch.randint(size - seq_len + 1, (batch,), generator=generator, device=device)
    env = torch.randint(num_envs, (batch,), generator=generator, device=device)
    t = (storage.time_range[:seq_len, None] + (start + oldest)[None, :]) % capacity
    flat = (t * num_envs + env[None, :]).view(-1)
    out = {
        name: rows.view(seq_len, batch, *storage.specs[name].shape)
        for name, rows in storage.gather(names, flat).items()
    }
    if force_first and "is_first" in out:
        out["is_first"][0] = True
    if return_indices:
        out["t_index"] = t
        out["env_index"] = env
        out["step_index"] = start + (total_steps - size)
    return out


def transition_draw(
    storage: RingStorage,
    batch: int,
    generator: torch.Generator,
    next_obs: Any,
    candidates: int,
    size: int,
) -> tuple[int, torch.Tensor | None]:
    """Check ``ReplayRing.sample_transitions``' arguments.

    Returns:
        The chronological rows to draw from (the newest only with ``next_obs``) and
        ``next_obs`` on the ring's device.
    """
    check_generator(generator, storage.device)
    check_int("batch", batch, reason="must be an int >= 1")
    check_int("candidates", candidates, reason="must be an int >= 1")
    newest = storage.checked_next_obs(next_obs)
    rows = size - (0 if newest is not None else 1)
    if rows < 1:
        raise ConfigError("batch", batch, f"no transition stored yet (size={size})")
    return rows, newest


def transitions_at(
    storage: RingStorage,
    t_index: Any,
    env_index: Any,
    next_obs: Any,
    oldest: int,
    size: int,
    override: Override,
) -> Transitions:
    """The transitions at physical rows ``t_index`` of envs ``env_index`` (checked here).

    ``valid`` is False where a row has no next observation or lies outside the ``size`` rows
    stored.
    """
    check_indices("t_index", t_index, storage.capacity)
    check_indices("env_index", env_index, storage.num_envs)
    t = torch.as_tensor(t_index, dtype=torch.int64, device=storage.device).view(-1)
    env = torch.as_tensor(env_index, dtype=torch.int64, device=storage.device).view(-1)
    if t.shape != env.shape:
        raise ConfigError("env_index", tuple(env.shape), f"must match t_index {tuple(t.shape)}")
    newest = storage.checked_next_obs(next_obs)
    logical = (t - oldest) % storage.capacity
    rows = transition_rows(
        storage, logical, env, oldest=oldest, size=size, newest_ok=newest is not None
    )
    rows = rows._replace(valid=rows.valid & (logical < size))
    return gather_transitions(storage, logical, env, rows, newest, size=size, override=override)
