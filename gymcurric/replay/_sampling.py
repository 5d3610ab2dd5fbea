"""``ReplayRing`` sampling: sequence windows, uniform transitions and indexed transitions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, DataError
from gymcurric.replay._checks import NO_NEXT, PENDING, as_tensor_like
from gymcurric.replay.ring import _PACKED, FieldSpec, Transitions


class RingSamplingMixin:
    """Sampling from a :class:`~gymcurric.replay.ring.ReplayRing` (its state is set there)."""

    capacity: int
    num_envs: int
    device: torch.device
    specs: dict[str, FieldSpec]
    user_fields: tuple[str, ...]
    size: int
    total_steps: int
    _data: dict[str, torch.Tensor]
    _flat: dict[str, torch.Tensor]
    _scalars_flat: torch.Tensor
    _np: dict[str, np.ndarray]
    _np_scalars: np.ndarray
    _np_dtype: dict[str, Any]
    _sync_free: bool
    _side_obs: torch.Tensor
    _side_slot_storage: torch.Tensor
    _side_slot: torch.Tensor
    _next: np.ndarray
    _obs_all: torch.Tensor
    _time_arange: torch.Tensor

    if TYPE_CHECKING:

        @property
        def oldest(self) -> int: ...

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
        check_int("batch", batch, reason="must be an int >= 1")
        check_int("seq_len", seq_len, reason="must be an int >= 1")
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
        check_int("batch", batch, reason="must be an int >= 1")
        check_int("candidates", candidates, reason="must be an int >= 1")
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
        # CPU: one draw over (row, env) pairs; the next-observation table, kept at write time,
        # gives each drawn step's next-observation row in the shared obs/side-store tensor in
        # one lookup; steps without one are redrawn (exact). Index math in numpy (~1 us per
        # small op against ~4 us for torch), then one gather for obs and next obs together.
        E, C = self.num_envs, self.capacity
        CE = C * E
        shift = self.oldest * E
        nx = self._next
        pending = nxt_obs is not None  # only then is the newest row drawn (rows = size)
        pair = torch.randint(rows * E, (batch,), generator=gen).numpy()
        idx = np.empty(2 * batch, dtype=np.int64)
        flat, nxt = idx[:batch], idx[batch:]
        for _ in range(10_000):
            np.add(pair, shift, out=flat)
            if shift:
                flat %= CE
            np.take(nx, flat, out=nxt)
            if nxt.min() >= 0:
                break
            bad = np.flatnonzero(nxt == NO_NEXT if pending else nxt < 0)
            if not bad.size:
                break
            pair[bad] = torch.randint(rows * E, (bad.size,), generator=gen).numpy()
        else:
            raise DataError(
                "ReplayRing.sample_transitions: no valid transition found (every stored step "
                "lacks its next observation)"
            )
        t = flat // E
        env = flat - t * E
        at = np.flatnonzero(nxt == PENDING) if pending and nxt.min() < 0 else None
        if at is not None:
            nxt[at] = flat[at]  # a placeholder row, overwritten below
        both = torch.index_select(self._obs_all, 0, torch.from_numpy(idx))
        obs, next_o = both[:batch], both[batch:]
        if at is not None and at.size:
            assert nxt_obs is not None
            if self._np_dtype["obs"] is not None:
                both.numpy()[batch + at] = nxt_obs.numpy()[env[at]]
            else:
                rows_at = nxt_obs.index_select(0, torch.from_numpy(env[at]))
                next_o.index_copy_(0, torch.from_numpy(at), rows_at)
        flat_t = torch.from_numpy(flat)
        # reward, cost, continue_: one numpy gather, three zero-copy columns
        packed = np.take(self._np_scalars.reshape(CE, 3), flat, axis=0)
        return Transitions(
            obs=obs,
            action=torch.index_select(self._flat["action"], 0, flat_t),
            reward=torch.from_numpy(packed[:, 0]),
            cost=torch.from_numpy(packed[:, 1]),
            next_obs=next_o,
            done=torch.from_numpy(1.0 - packed[:, 2]),
            valid=torch.ones(batch, dtype=torch.bool),
            t_index=torch.from_numpy(t),
            env_index=torch.from_numpy(env),
            extras={n: torch.index_select(self._flat[n], 0, flat_t) for n in self.user_fields},
        )

    def transitions_at(self, t_index: Any, env_index: Any, *, next_obs: Any = None) -> Transitions:
        """The transitions at physical rows ``t_index`` of envs ``env_index`` (no sampling).

        Rows must lie in the ring's view; ``valid`` is False where a row has no successor (the
        newest row without ``next_obs``, next-step autoreset's final-observation rows, rows whose
        side-store entry was dropped); their ``next_obs`` is then meaningless.
        """
        self._check_index("t_index", t_index, self.capacity)
        self._check_index("env_index", env_index, self.num_envs)
        t = torch.as_tensor(t_index, dtype=torch.int64, device=self.device).view(-1)
        env = torch.as_tensor(env_index, dtype=torch.int64, device=self.device).view(-1)
        if t.shape != env.shape:
            raise ConfigError("env_index", tuple(env.shape), f"must match t_index {tuple(t.shape)}")
        nxt_obs = self._check_next_obs(next_obs)
        logical = (t - self.oldest) % self.capacity
        valid, flat, nxt, slot = self._validity(logical, env, nxt_obs is not None)
        valid = valid & (logical < self.size)
        return self._gather_transitions(logical, env, (valid, flat, nxt, slot), nxt_obs)

    @staticmethod
    def _check_index(name: str, value: Any, high: int) -> None:
        """Integer indices in ``[0, high)``; checked on the host (device tensors are trusted:
        reading them would sync)."""
        if isinstance(value, torch.Tensor):
            if value.device.type != "cpu":
                return
            value = value.numpy()
        a = np.asarray(value)
        if a.size and a.dtype.kind not in "iu":
            raise ConfigError(name, a.dtype, "expected integer indices", source="ReplayRing")
        if a.size and (a.min() < 0 or a.max() >= high):
            bad = a[(a < 0) | (a >= high)].ravel()[0]
            raise ConfigError(
                name, int(bad), f"indices must lie in [0, {high})", source="ReplayRing"
            )

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
