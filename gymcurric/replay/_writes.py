"""``ReplayRing`` writes: the observation slot, per-step checks and commits, the side store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay._checks import NO_NEXT, PENDING, as_tensor_like

if TYPE_CHECKING:
    from gymcurric.replay.ring import FieldSpec, ReplayRing


class RingWritesMixin:
    """Writing rows into a :class:`~gymcurric.replay.ring.ReplayRing` (its state is set there)."""

    capacity: int
    num_envs: int
    device: torch.device
    specs: dict[str, FieldSpec]
    side_capacity: int
    debug_checks: bool
    user_fields: tuple[str, ...]
    head: int
    size: int
    total_steps: int
    _data: dict[str, torch.Tensor]
    _scalars: torch.Tensor
    _np: dict[str, np.ndarray]
    _np_scalars: np.ndarray
    _np_dtype: dict[str, Any]
    _row_shape: dict[str, tuple[int, ...]]
    _side_obs: torch.Tensor
    _side_owner: torch.Tensor
    _side_slot_storage: torch.Tensor
    _side_slot: torch.Tensor
    _side_ptr: torch.Tensor
    _side_lost: torch.Tensor
    _cur_episode: np.ndarray
    _ended: np.ndarray
    _row_has_side: np.ndarray
    _next: np.ndarray
    _env_arange_np: np.ndarray
    _sync_free: bool
    _env_arange: torch.Tensor

    if TYPE_CHECKING:

        def check_invariants(self) -> None: ...

    def obs_slot(self, row: int) -> torch.Tensor:
        """The ``[num_envs, *obs_shape]`` observations of physical ``row``, a contiguous view.

        Write the next observation straight into ``obs_slot(ring.head)`` (an env, a decoder, a
        GPU simulator) and then call ``push_step(None, ...)``: no intermediate copy. While the
        ring is full, that slot still holds the oldest row's observation until the push, so do
        not sample between the write and the push.
        """
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < self.capacity:
            raise ConfigError(
                "row", row, f"must be an int in [0, {self.capacity})", source="ReplayRing"
            )
        return self._data["obs"][row]

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
                "t",
                t,
                f"must equal total_steps={self.total_steps} (rows are written in order)",
                source="ReplayRing",
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
                    "is_first",
                    is_first,
                    "the first step of every env must start an episode",
                    source="ReplayRing",
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
        if not self._sync_free:
            self._link_rows(row, first)
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
            self._store_final(row, fo, torch.from_numpy(ended).to(self.device), newest=row)
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
            raise ConfigError(
                "row", row, f"must be an int in [0, {self.capacity})", source="ReplayRing"
            )
        fo = self._src("final_obs", final_obs, field="obs")
        m = torch.from_numpy(np.array(self._host_bool("mask", mask))).to(self.device)
        self._store_final(row, fo, m, newest=(self.head - 1) % self.capacity)

    def extend_from_episodes(self, episodes: Iterable[Any]) -> Any:
        """Append recorded episodes (e.g. datapacks' ``.npz``).

        See :func:`gymcurric.replay.episodes.extend_from_episodes` for the array layout.

        Returns:
            The :class:`~gymcurric.replay.episodes.EpisodeLoadReport`.
        """
        from gymcurric.replay.episodes import extend_from_episodes

        return extend_from_episodes(cast("ReplayRing", self), episodes)

    def _store_final(
        self, row: int, final_obs: torch.Tensor, mask: torch.Tensor, *, newest: int
    ) -> None:
        self._row_has_side[row] = True
        if not self._sync_free:
            self._store_final_host(row, final_obs, mask.numpy(), newest)
            return
        # Sync-free: slots come from a cumulative sum; masked-out envs write to the trash slot.
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

    def _store_final_host(
        self, row: int, final_obs: torch.Tensor, mask: np.ndarray, newest: int
    ) -> None:
        # CPU: the same slots, owners and losses as the sync-free path, in numpy, copying only
        # the ended envs' final observations (usually one or two of num_envs).
        envs = np.flatnonzero(mask)
        if not envs.size:
            return
        P = self.side_capacity
        slots = (int(self._side_ptr) + np.arange(envs.size)) % P
        owner_np = self._side_owner.numpy()
        slot_np = self._side_slot_storage.numpy()
        owners = owner_np[slots]
        held = owners >= 0
        held[held] = slot_np[owners[held]] == slots[held]  # the slot still serves its owner
        lost = owners[held]
        if lost.size:
            self._side_lost += int(lost.size)
            slot_np[lost] = -1
        if self._np_dtype["obs"] is not None:
            self._side_obs.numpy()[slots] = final_obs.numpy()[envs]
        else:
            picked = final_obs.index_select(0, torch.from_numpy(envs))
            self._side_obs.index_copy_(0, torch.from_numpy(slots), picked)
        flats = row * self.num_envs + envs
        owner_np[slots] = flats
        slot_np[flats] = slots
        self._side_ptr += int(envs.size)
        self._relink(np.concatenate((flats, lost)), newest)  # steps that gained or lost one

    def _link_rows(self, row: int, first: np.ndarray) -> None:
        """Next-observation table for a push of ``row``: its steps are pending; the previous
        row's steps (those without a side-store entry) link to ``row`` unless an episode starts
        there, where no next observation is known."""
        E = self.num_envs
        nx = self._next
        nx[row * E : (row + 1) * E] = PENDING
        if self.total_steps:
            p = row - 1 if row else self.capacity - 1
            prev = nx[p * E : (p + 1) * E]
            if not self._row_has_side[p] and not first.any():  # the usual step: all link
                np.add(self._env_arange_np, row * E, out=prev)
                return
            linked = np.where(first, NO_NEXT, row * E + self._env_arange_np)
            np.copyto(prev, linked, where=prev < self.capacity * E)

    def _relink(self, flats: np.ndarray, newest: int) -> None:
        """Recompute the next-observation table at steps ``flats`` (flat row·E + env) from the
        side store and ``is_first`` (the same rule as the sampler's validity check)."""
        if flats.size == 0:
            return
        E, C = self.num_envs, self.capacity
        CE = C * E
        flats = flats[flats < CE]  # the trash entry
        t = flats // E
        env = flats - t * E
        nt = t + 1
        nt[nt == C] = 0
        linked = np.where(self._np["is_first"][nt, env], NO_NEXT, nt * E + env)
        linked[t == newest] = PENDING
        slot = self._side_slot_storage.numpy()[flats]
        self._next[flats] = np.where(slot >= 0, CE + slot, linked)

    def _rebuild_next(self) -> None:
        """The whole next-observation table, from the stored rows (after a load)."""
        if self._sync_free:
            return
        self._next.fill(NO_NEXT)
        if self.size:
            self._relink(np.arange(self.capacity * self.num_envs), (self.head - 1) % self.capacity)

    def clear(self) -> None:
        """Forget every row (tensors keep their memory); the generator is left as it is."""
        for t in (self._side_owner, self._side_slot_storage):
            t.fill_(-1)
        self._cur_episode = np.full(self.num_envs, -1, dtype=np.int32)
        self._row_has_side[:] = False
        self._next.fill(NO_NEXT)
        self._side_ptr.zero_()
        self._side_lost.zero_()
        self._ended = np.ones(self.num_envs, dtype=bool)
        self.head = self.size = self.total_steps = 0
