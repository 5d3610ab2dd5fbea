"""``DeviceWriter``: the rows a ``ReplayRing`` without numpy views writes (the device index).

A push on the device index is a fixed sequence of torch operations that never reads a device
value on the host: one copy per given field, the packed row (reward, cost, ``continue_``), one
copy of ``is_first`` and one add for ``episode_id``. On a GPU such a push is bound by the host
(launches and Python), so this module does the checks of ``push_step`` with as little Python
as it can (issue 24): the usual inputs (dense tensors already on the device, numpy arrays of
the field's dtype and shape, numpy or device bool flags) pass identity and shape tests and
attribute reads (no Python call; ``not value.is_nested`` comes before the ``shape`` of a tensor,
which a nested one cannot give), anything else goes through the general checks of
:meth:`RingStorage.checked_tensor` and :func:`~gymcurric.replay._checks.device_flags`, which
raise the errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay._checks import STRIDED, copy_in, device_flags, pageable, reward_required

if TYPE_CHECKING:
    from gymcurric.replay.storage import RingStorage

__all__ = ["DeviceWriter"]

#: numpy's bool dtype (the builtin dtypes are singletons: ``arr.dtype is BOOL`` is the quick test)
BOOL = np.dtype(np.bool_)


def is_host_flag(value: Any, shape: tuple[int]) -> bool:
    """``value`` is a numpy bool array of ``shape`` (what envs give), as it is."""
    return type(value) is np.ndarray and value.dtype is BOOL and value.shape == shape


class DeviceWriter:
    """Checks and writes ``push_step``'s rows into a :class:`RingStorage` without numpy views.

    Flags given as host data (``terminated`` and ``truncated`` as numpy arrays, lists, CPU
    tensors) are staged on the host together with what follows from them (``continue_``, the
    episode ends, an explicit host ``is_first`` and, with host reward and cost, the whole packed
    row) and travel in one host-to-device copy of one buffer, which one ``split_with_sizes``
    cuts into the device tensors. Flags on the device stay there (``continue_`` and the episode
    ends are then computed there). The one host read is at the very first push with an explicit
    ``is_first`` tensor (every env must start there).
    """

    def __init__(self, storage: RingStorage) -> None:
        num_envs = storage.num_envs
        self.storage = storage
        self.device = storage.device
        self.flag_shape = (num_envs,)
        #: host data needs a copy to the ring's device (non-blocking on CUDA: see ``copy_in``)
        self.to_device = storage.device.type != "cpu"
        self.fields = storage.fields
        self.packed = storage.packed
        #: ``packed`` with one ``[num_envs * 3]`` row per step: a staged row is copied as it is
        self.packed_rows = storage.packed.view(storage.capacity, 3 * num_envs)
        #: by field: (torch dtype, numpy dtype or None, row shape) of a row pushed as it is
        self.kinds = storage.kinds
        self.zero_column = torch.zeros(num_envs, dtype=torch.float32, device=self.device)
        self.continue_scratch = torch.zeros(num_envs, dtype=torch.float32, device=self.device)
        #: the bytes of the staged buffer's parts, by (packed row staged, is_first staged): the
        #: float32 part first (so that its device view is aligned), then the bool flags
        self.split_sizes = {
            (packed, first): [(12 if packed else 4) * num_envs, num_envs] + [num_envs] * first
            for packed in (False, True)
            for first in (False, True)
        }

    # ------------------------------------------------------------------ checked inputs
    def source(self, name: str, value: Any, field: str | None = None) -> torch.Tensor:
        """``value`` checked as one row of ``field`` (default ``name``; ``checked_tensor``).

        A tensor on the ring's device is returned as it is; host data gives a CPU tensor.
        """
        dtype, numpy_dtype, shape = self.kinds[field or name]
        kind = type(value)
        if kind is torch.Tensor:
            if (
                value.dtype is dtype
                and value.layout is STRIDED  # sparse & co.: the general checks refuse them
                and not value.is_nested  # strided ones too (their .shape raises)
                and value.shape == shape
                and value.device == self.device
                and not value.requires_grad  # the general checks detach it
            ):
                return value
        elif (
            kind is np.ndarray
            and value.dtype is numpy_dtype
            and value.shape == shape
            and value.flags.writeable
        ):
            try:
                return torch.from_numpy(value)
            except ValueError:  # negative strides: the general checks copy
                pass
        return self.storage.checked_tensor(name, value, field)

    def column(self, name: str, value: Any) -> torch.Tensor:
        """A float32 ``[num_envs]`` column (reward or cost), checked, on the ring's device."""
        if (
            type(value) is torch.Tensor
            and value.dtype is torch.float32
            and value.layout is STRIDED
            and not value.is_nested
            and value.shape == self.flag_shape
            and value.device == self.device
            and not value.requires_grad
        ):
            return value
        if value is None:  # only reward gets here as None (a cost of None is a zero column)
            raise reward_required(self.flag_shape[0])
        column = self.storage.checked_tensor(name, value)
        if column.device != self.device or column.dtype != torch.float32:
            # a numpy view of pinned memory blocks (read after the call else: pageable)
            non_blocking = self.storage.non_blocking and pageable(column)
            column = column.to(self.device, torch.float32, non_blocking=non_blocking)
        return column

    # ------------------------------------------------------------------ the push
    def push(
        self,
        row: int,
        obs: Any,
        action: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        cost: Any,
        is_first: Any,
        final_obs: Any,
        extra: dict[str, Any],
        first_push: bool,
    ) -> torch.Tensor | None:
        """Check one ``push_step``, then write it at ``row``; nothing is written if it fails.

        The checks run in the order of the host index's: flags, ``is_first`` at the first
        push, action, obs, user fields, reward, cost, ``final_obs``.

        Returns:
            The checked ``final_obs`` when given and some episode may have ended (the side
            store's, for the ring's index with ``episode_ended`` as the mask), else None. A
            given ``final_obs`` is checked whether or not an episode ended.
        """
        storage = self.storage
        shape = self.flag_shape
        device = self.device
        host_terminated: np.ndarray | None
        host_truncated: np.ndarray | None
        host_first: np.ndarray | None = None
        device_first: torch.Tensor | None = None
        if (
            type(terminated) is np.ndarray
            and type(truncated) is np.ndarray
            and terminated.dtype is BOOL
            and truncated.dtype is BOOL
            and terminated.shape == shape
            and truncated.shape == shape
            and (is_first is None or is_host_flag(is_first, shape))
        ):  # what envs give: used as they are
            host_terminated, host_truncated, host_first = terminated, truncated, is_first
        elif (
            is_first is None
            and type(terminated) is torch.Tensor
            and type(truncated) is torch.Tensor
            and terminated.dtype is torch.bool
            and truncated.dtype is torch.bool
            and terminated.layout is STRIDED
            and truncated.layout is STRIDED
            and not terminated.is_nested
            and not truncated.is_nested
            and terminated.shape == shape
            and truncated.shape == shape
            and terminated.device == device
            and truncated.device == device
        ):  # on the device: used as they are
            host_terminated = host_truncated = None
        else:
            flags = device_flags(
                {"terminated": terminated, "truncated": truncated, "is_first": is_first},
                storage.num_envs,
                device,
                move_host=False,
            )
            host_terminated = flags.host.get("terminated")
            host_truncated = flags.host.get("truncated")
            host_first = flags.host.get("is_first")
            device_first = flags.tensors.get("is_first")
            if host_terminated is None or host_truncated is None:
                # a flag on the device: the host ones (if any) in one copy, the rest there
                moved = device_flags(
                    flags.host, storage.num_envs, device, non_blocking=storage.non_blocking
                ).tensors
                tensors = flags.tensors | moved
                terminated, truncated = tensors["terminated"], tensors["truncated"]
                device_first = tensors.get("is_first")
                host_terminated = host_truncated = host_first = None
        if first_push and is_first is not None:
            self.check_first(is_first, host_first, device_first)
        sources = [("action", action, self.source("action", action))]
        if obs is not None:
            sources.append(("obs", obs, self.source("obs", obs)))
        if extra:
            sources.extend((n, v, self.source(n, v)) for n, v in extra.items())
        # the packed row is staged whole when flags, reward and cost are all host data
        packed = (
            host_terminated is not None
            and not isinstance(reward, torch.Tensor)
            and not isinstance(cost, torch.Tensor)
        )
        if not packed:
            reward_column = self.column("reward", reward)
            cost_column = self.zero_column if cost is None else self.column("cost", cost)
        final = None
        if host_terminated is not None:
            assert host_truncated is not None  # both host data (else both were moved above)
            # continue_, the episode ends and a host is_first in one buffer (see the class)
            sizes = self.split_sizes[packed, host_first is not None]
            float_bytes, num_envs = sizes[0], shape[0]
            buffer = np.empty(sum(sizes), dtype=np.bool_)
            floats = buffer[:float_bytes].view(np.float32)
            if packed:
                storage.packed_row(reward, cost, ~host_terminated, out=floats.reshape(num_envs, 3))
            else:
                np.logical_not(host_terminated, out=floats)
            host_ended = buffer[float_bytes : float_bytes + num_envs]
            np.logical_or(host_terminated, host_truncated, out=host_ended)
            if host_first is not None:
                buffer[float_bytes + num_envs :] = host_first
            if final_obs is not None:  # checked even if no episode ended, as with device flags
                if host_ended.any():
                    final = self.source("final_obs", final_obs, "obs")
                else:  # nothing to store: only checked, the usual inputs without a call
                    obs_dtype, obs_numpy_dtype, obs_shape = self.kinds["obs"]
                    kind = type(final_obs)
                    usual = (
                        final_obs.dtype is obs_numpy_dtype
                        if kind is np.ndarray
                        else kind is torch.Tensor
                        and final_obs.dtype is obs_dtype
                        and final_obs.layout is STRIDED
                        and not final_obs.is_nested
                        and final_obs.device == device
                    )
                    if not (usual and final_obs.shape == obs_shape):  # the general checks raise
                        storage.checked_tensor("final_obs", final_obs, field="obs")
            staged = torch.from_numpy(buffer)
            if self.to_device:
                staged = staged.to(device, non_blocking=storage.non_blocking)
            parts = staged.split_with_sizes(sizes)
            continues, ended = parts[0].view(torch.float32), parts[1]  # packed: the whole row
            if host_first is not None:
                device_first = parts[2]
        else:
            if final_obs is not None:  # the ends are known on the device only: a masked write
                final = self.source("final_obs", final_obs, "obs")
            continues = torch.logical_not(terminated, out=self.continue_scratch)
            ended = torch.logical_or(terminated, truncated)
        # --- nothing above wrote to the ring (the last check is final_obs's)
        fields = self.fields
        for name, value, source in sources:
            if source is value or not self.to_device:  # on the ring's device already
                fields[name][row] = source
            else:
                copy_in(fields[name][row], source, non_blocking=storage.non_blocking)
        if packed:
            self.packed_rows[row] = continues  # the whole staged row
        else:
            torch.stack((reward_column, cost_column, continues), dim=-1, out=self.packed[row])
        # is_first and episode_id; the per-env bookkeeping is not copied: current_episode
        # becomes the written episode_id row and episode_ended the step's ends (references; the
        # storage's clear and restore point them back at tensors of their own)
        first = storage.episode_ended if device_first is None else device_first
        fields["is_first"][row] = first
        episode = fields["episode_id"][row]
        torch.add(storage.current_episode, first, out=episode)
        storage.current_episode = episode  # the newest row's ids (rows >= 2: not the next one)
        storage.episode_ended = ended
        if storage.row_has_side[row]:
            storage.side_slot[row].fill_(-1)
            storage.row_has_side[row] = False
        return final

    # ------------------------------------------------------------------ pieces
    def check_first(
        self, is_first: Any, host_first: np.ndarray | None, device_first: torch.Tensor | None
    ) -> None:
        """At the first push, an explicit ``is_first`` must start every env's episode."""
        if device_first is None:
            assert host_first is not None  # given, and not on the device
            all_first = bool(host_first.all())
        else:
            all_first = bool(device_first.all())
        if not all_first:
            raise ConfigError(
                "is_first",
                is_first,
                "the first step of every env must start an episode",
                source="ReplayRing",
            )
