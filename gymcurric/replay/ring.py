"""``ReplayRing``: a time-major, preallocated, device-agnostic replay ring (extra ``torch``).

The class docstring has the layout; ``docs/replay.md`` has the guide.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay import persist
from gymcurric.replay._checks import check_push_arguments, check_row, host_flags
from gymcurric.replay.device_writes import DeviceWriter
from gymcurric.replay.episodes import EpisodeLoadReport, extend_from_episodes
from gymcurric.replay.indexing import DeviceIndex, index_strategy_class
from gymcurric.replay.sampling import sample_sequences, transition_draw, transitions_at
from gymcurric.replay.specs import FieldSpec, Transitions, ring_layout, space_fields
from gymcurric.replay.storage import RingStorage, StepArgs, check_memory_budget
from gymcurric.replay.uniform import GraphedDraws

__all__ = ["FieldSpec", "ReplayRing", "Transitions"]


class ReplayRing:
    """Time-major preallocated replay ring for off-policy and sequence learners (CPU or CUDA).

    Every field is a ``[capacity, num_envs, *shape]`` tensor allocated (and zero-filled, so the
    memory is committed) at construction, after a check that it fits. One :meth:`push_step`
    writes one row for all envs at ``head``; the ring keeps the newest ``capacity`` rows and
    stores observations once. **Row ``t`` of env ``e`` holds the step taken from ``obs[t]``:**

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

    The next observation ``o_{t+1}`` is ``obs[t + 1]`` unless the episode ended at ``t`` and
    the next row starts a new episode (same-step autoreset: Gymnasium ``SAME_STEP``, SB3
    ``VecEnv``); the true final observation is then kept in a *side store* indexed by ``(t, e)``
    (``push_step(..., final_obs=...)``). With next-step autoreset (Gymnasium's default
    ``NEXT_STEP``) the final observation is its own row (the ignored reset step: reward 0,
    ``continue_`` 1) and the following row has ``is_first``; the transition out of such a row
    has no successor and is never sampled.

    The samplers draw from the chronological view (oldest row to newest) with an explicit
    ``torch.Generator`` on the ring's device, in O(1) index math per sample on the device:
    contiguous windows (:meth:`sample_sequences`) or uniform transitions
    (:meth:`sample_transitions`).

    The ring is composed of a :class:`~gymcurric.replay.storage.RingStorage` (the tensors) and
    an index strategy from :mod:`gymcurric.replay.indexing` (``index_strategy``); saving and
    loading are the functions of :mod:`gymcurric.replay.persist`.

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
        index_strategy: str | None = None,
        cuda_graphs: bool = False,
    ) -> None:
        """Allocate the ring.

        Args:
            capacity: rows (steps per env) kept, >= 2. Total transitions = ``capacity*num_envs``.
            num_envs: envs written per row, >= 1.
            fields: ``{"obs": spec, "action": spec, **user_fields}``; each spec a
                :class:`FieldSpec` or ``(shape, torch.dtype)``. The scalar fields ``reward``,
                ``cost`` (float32), ``is_first`` (bool), ``continue_`` (float32) and
                ``episode_id`` (int32) are added and may not be redefined.
            device: where the tensors live (``"cpu"``, ``"cuda"``, ``"cuda:1"``; ``"cpu:0"`` is
                ``"cpu"``, the device of CPU tensors).
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
            index_strategy: ``"host"`` (numpy index tables, exact sampling; CPU only) or
                ``"device"`` (torch only, never reading the device on the host: what CUDA
                rings use, where host data goes over in non-blocking copies; to another device,
                MPS or xpu, those copies block; a CPU ring with it runs the CUDA code paths).
                Default: ``"host"`` on CPU, ``"device"`` elsewhere.
            cuda_graphs: replay :meth:`sample_transitions` of a full ring from CUDA graphs,
                one captured per batch size, ``candidates`` and generator (the device index
                only; see there). On other devices the same draw runs eagerly.

        Raises:
            ConfigError: a bad argument, or the ring does not fit in ``memory_budget``.
        """
        specs, self.device, side_capacity = ring_layout(
            capacity, num_envs, fields, device, side_capacity
        )
        index_class = index_strategy_class(index_strategy, self.device)
        if cuda_graphs and index_class is not DeviceIndex:
            raise ConfigError(
                "cuda_graphs",
                cuda_graphs,
                "needs the device index (index_strategy='device', the default off the CPU)",
                source="ReplayRing",
            )
        self.capacity = capacity
        self.num_envs = num_envs
        self.specs: dict[str, FieldSpec] = specs
        self.side_capacity = side_capacity
        self.seed = int(seed)
        self.debug_checks = bool(debug_checks)
        self.index_strategy: str = index_class.name
        self.cuda_graphs = bool(cuda_graphs)

        check_memory_budget(capacity, num_envs, specs, side_capacity, self.device, memory_budget)
        views = index_class.numpy_views
        self._storage = RingStorage(capacity, num_envs, specs, self.device, side_capacity, views)
        self._index = index_class(self._storage)
        #: the device index's pushes (None: the host index's checked_step and link_row)
        self._writer = None if views else DeviceWriter(self._storage)
        self._graphs = GraphedDraws(self._storage) if self.cuda_graphs else None
        self.user_fields = self._storage.user_fields
        self._user_field_set = frozenset(self.user_fields)
        self.generator = torch.Generator(device=self.device)
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
        fields = space_fields(observation_space, action_space, extra_fields)
        return cls(capacity, num_envs, fields, device, **kwargs)

    @staticmethod
    def nbytes_required(
        capacity: int, num_envs: int, specs: Mapping[str, FieldSpec], side_capacity: int
    ) -> int:
        """Bytes a ring with these fields needs (fields, side store and index tables)."""
        return RingStorage.bytes_required(capacity, num_envs, specs, side_capacity)

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring's tensors."""
        return self._storage.nbytes + self._index.nbytes

    @property
    def full(self) -> bool:
        """Whether ``capacity`` rows have been written (the next push overwrites the oldest)."""
        return self.size == self.capacity

    @property
    def oldest(self) -> int:
        """Physical row of the oldest step in the ring (``head`` once full, else 0)."""
        return self.head if self.size == self.capacity else 0

    @property
    def non_blocking(self) -> bool:
        """Whether host-to-device copies into the ring may be non-blocking (CUDA only).

        Decided once, when the ring is made (``non_blocking_copy`` in
        ``gymcurric/replay/_checks.py``); every copy of host data a write makes (the push and
        the other write methods, ``RecordToRing``, ``RingReplayBuffer.add``) takes it, and a
        caller's array in pinned memory is copied blocking even when it is True.
        :meth:`load_state_dict` copies block.
        """
        return self._storage.non_blocking

    @property
    def side_lost(self) -> int:
        """Terminal observations dropped from a full side store while their row was kept."""
        return int(self._storage.side_lost)

    @property
    def fields(self) -> Mapping[str, torch.Tensor]:
        """The ring's tensors by name (``[capacity, num_envs, *shape]``, writable views)."""
        return dict(self._storage.fields)

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._storage.fields[name]

    def __repr__(self) -> str:
        return (
            f"ReplayRing(capacity={self.capacity}, num_envs={self.num_envs}, "
            f"device={self.device}, size={self.size}, head={self.head}, "
            f"total_steps={self.total_steps})"
        )

    # ------------------------------------------------------------------ writes
    def obs_slot(self, row: int) -> torch.Tensor:
        """The ``[num_envs, *obs_shape]`` observations of physical ``row``, a contiguous view.

        Write the next observation straight into ``obs_slot(ring.head)`` (an env, a decoder, a
        GPU simulator) and then call ``push_step(None, ...)``: no intermediate copy. While the
        ring is full, that slot still holds the oldest row's observation until the push, so do
        not sample between the write and the push.
        """
        check_row(row, self.capacity)
        return self._storage.fields["obs"][row]

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
            reward: ``[num_envs]`` rewards of the step (required: ``None`` is refused).
            terminated: ``[num_envs]`` bool, the step ended the episode in a terminal state.
            truncated: ``[num_envs]`` bool, the step ended the episode by truncation.
            cost: ``[num_envs]`` costs of the step (default 0).
            is_first: ``[num_envs]`` bool, ``o_t`` is a reset observation. Default: True for the
                very first push and for envs whose previous step ended an episode (same-step
                autoreset). Pass it explicitly for next-step autoreset (the recorder does).
            final_obs: ``[num_envs, *obs_shape]`` true last observations of envs whose
                episode ended at this step (rows of other envs are ignored); kept in the side
                store so that :meth:`sample_transitions` returns them as ``next_obs``. Checked
                whenever given, even at a step where no episode ended.
            t: optional explicit step index; must equal :attr:`total_steps`.
            **extra: one value per user field, ``[num_envs, *shape]``.

        Tensors must be dense (strided and not nested: sparse, mkldnn, jagged and nested ones
        are refused) and already have the field's dtype and the ring's device; numpy arrays are
        cast when the kind is kept (float64 -> float32), to the values numpy's cast gives on
        either index strategy, and copied over.

        Raises:
            ConfigError: a missing/unknown field, ``reward=None``, or a wrong layout (nested
                included), shape, dtype or device (naming the field and what was received), or
                ``t != total_steps``.
        """
        if t is not None or extra.keys() != self._user_field_set:
            check_push_arguments(t, self.total_steps, extra, self.user_fields)
        row = self.head
        writer = self._writer
        if writer is not None:  # the device index: checks, then writes (nothing on failure)
            final = writer.push(
                row,
                obs,
                action,
                reward,
                terminated,
                truncated,
                cost,
                is_first,
                final_obs,
                extra,
                self.total_steps == 0,
            )
            if final is not None:
                mask = self._storage.episode_ended  # the step's episode ends, as just written
                self._index.store_final_observations(row, final, mask, newest=row)
        else:
            args = StepArgs(
                obs,
                action,
                reward,
                terminated=terminated,
                truncated=truncated,
                cost=cost,
                is_first=is_first,
                final_obs=final_obs,
                extra=extra,
                first_push=self.total_steps == 0,
            )
            step = self._storage.checked_step(args)
            # nothing above writes to the ring, so a bad call leaves it unchanged
            self._storage.write_step(row, step)
            self._index.link_row(row, step.is_first, self.total_steps)
            if step.final_obs is not None:
                self._index.store_final_observations(row, step.final_obs, step.ended, newest=row)
        self.head = row + 1 if row + 1 < self.capacity else 0
        if self.size < self.capacity:
            self.size += 1
        self.total_steps += 1
        if self.debug_checks:
            self.check_invariants()

    def attach_final_obs(self, row: int, final_obs: Any, mask: Any) -> None:
        """Record ``final_obs`` as the next observation of the already written ``row``.

        ``final_obs`` is ``[num_envs, *obs_shape]``; only envs where ``mask`` is True are kept
        (in the side store, as for an episode that ended at ``row``; ``continue_`` is left as
        it is, so the step bootstraps like a truncation). For streams that break without an
        episode end (e.g. an env reset between two ``learn()`` calls): push the next row with
        ``is_first`` set for those envs, or call :meth:`start_episodes_at_next_push`.
        """
        check_row(row, self.capacity)
        final = self._storage.checked_tensor("final_obs", final_obs, field="obs")
        mask = host_flags("mask", mask, self.num_envs)
        newest = (self.head - 1) % self.capacity
        self._index.store_final_observations(row, final, mask, newest=newest)

    def extend_from_episodes(self, episodes: Iterable[Any]) -> EpisodeLoadReport:
        """Append recorded episodes (e.g. datapacks' ``.npz``).

        See :func:`gymcurric.replay.episodes.extend_from_episodes` for the array layout.

        Returns:
            The :class:`~gymcurric.replay.episodes.EpisodeLoadReport`.
        """
        return extend_from_episodes(self, episodes)

    def start_episodes_at_next_push(self, mask: Any) -> None:
        """Mark the next push of the envs in ``mask`` as the first step of an episode.

        The default ``is_first`` of the next :meth:`push_step` becomes True for those envs, as
        after an episode end; a push that passes ``is_first`` explicitly decides for itself.
        Used where a stream breaks without an episode end, e.g. by
        :func:`~gymcurric.replay.episodes.extend_from_episodes` when it cuts an episode.

        Args:
            mask: ``[num_envs]`` bool, the envs whose next push starts an episode.

        Raises:
            ConfigError: ``mask`` is not ``[num_envs]`` bool.
        """
        self._storage.start_episodes(mask)

    def clear(self) -> None:
        """Forget every row (tensors keep their memory); the generator is left as it is."""
        self._storage.clear()
        self._index.clear()
        self.head = self.size = self.total_steps = 0

    # ------------------------------------------------------------------ sampling
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
        counters = (self.oldest, self.size, self.total_steps)
        return sample_sequences(
            self._storage, batch, seq_len, gen, fields, force_first, return_indices, *counters
        )

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
        side-store entry was dropped) are not returned. The host index (CPU) redraws them. The
        device index (CUDA; no host sync) takes the first valid of ``candidates`` draws per
        entry, and an entry without one takes another valid draw of the batch; ``valid`` masks
        entries only where none of the ``batch * candidates`` draws had a successor.

        With ``cuda_graphs=True``, a draw from a full ring without ``next_obs`` replays a CUDA
        graph (one launch, and one fill when the oldest row moved; the first draw of a batch
        size, ``candidates`` and generator captures it). It draws what the eager call would and
        advances ``gen`` as much, but returns the graph's own output tensors, which the next such
        draw rewrites: clone what must outlive it. Other draws run eagerly.

        Args:
            batch: number of transitions.
            gen: a ``torch.Generator`` on the ring's device.
            next_obs: ``[num_envs, *obs_shape]`` observations following the newest row (the
                SB3 adapter passes them so that the newest step is sampled, as SB3 does).
            candidates: draws per entry with the device index (see above), >= 1.

        Returns:
            :class:`Transitions` with ``done = 1 - continue_`` (terminations only).
        """
        rows, newest = transition_draw(self._storage, batch, gen, next_obs, candidates, self.size)
        if self._graphs is not None and newest is None and self.size == self.capacity:
            return self._graphs.draw(batch, candidates, gen, rows, self.oldest)
        index = self._index
        return index.sample_transitions(
            batch, gen, rows, newest, candidates, self.oldest, self.size
        )

    def transitions_at(self, t_index: Any, env_index: Any, *, next_obs: Any = None) -> Transitions:
        """The transitions at physical rows ``t_index`` of envs ``env_index`` (no sampling).

        Rows must lie in the ring's view; ``valid`` is False where a row has no successor (the
        newest row without ``next_obs``, next-step autoreset's final-observation rows, rows whose
        side-store entry was dropped); their ``next_obs`` is then meaningless.
        """
        storage, override = self._storage, self._index.override
        return transitions_at(
            storage, t_index, env_index, next_obs, self.oldest, self.size, override
        )

    # ------------------------------------------------------------------ invariants and state
    def check_invariants(self) -> None:
        """Check continuity over the chronological view, per env (O(size * num_envs)).

        For adjacent steps ``episode_id[t+1] == episode_id[t]`` or ``is_first[t+1]``;
        ``is_first[t+1]`` implies ``episode_id[t+1] == episode_id[t] + 1``; ``continue_`` is
        0.0 or 1.0.

        Raises:
            RingInvariantError: naming the env, the absolute step and the physical row.
        """
        self._storage.check_invariants(self.oldest, self.size, self.total_steps)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: the tensors, counters and the generator state.

        Tensors are returned as they are (not copied); ``"meta"`` is JSON-safe.
        """
        tensors = self._storage.state_tensors()
        tensors["generator"] = self.generator.get_state()
        return {"meta": persist.ring_meta(self), "tensors": tensors}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output into this ring (same fields and sizes).

        All or nothing: the whole state (keys, tensor shapes and dtypes, index tables, counters,
        seed and generator state) is checked before anything is written, so a refused state
        leaves the ring exactly as it was.

        Raises:
            DataError: the state belongs to a ring of another shape, a tensor is missing, is
                not dense (sparse, nested...) or has the wrong shape/dtype, an index table or
                counter is out of range, the rows break the episode continuity of
                :meth:`check_invariants`, or the generator state is invalid.
        """
        checked = persist.checked_state(self, state)
        # --- nothing above writes to the ring; nothing below can fail on valid input
        self._storage.restore(checked.tensors)
        if checked.generator_state is not None:
            self.generator.set_state(checked.generator_state)
        else:
            self.generator.manual_seed(checked.seed)
        self.head, self.size, self.total_steps = checked.counters
        self.seed = checked.seed
        self._index.rebuild(self.head, self.size)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ring to an uncompressed ``.npz`` without pickle.

        ``np.load(path, allow_pickle=False)`` reads it; fields numpy lacks (bfloat16, uint32,
        complex) are stored bit-cast to an integer array of the same item size (a trailing
        byte axis for 16-byte items) and restored by :meth:`load`.
        """
        persist.save(self, path)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], device: str | torch.device = "cpu", **kwargs: Any
    ) -> ReplayRing:
        """Read a ring written by :meth:`save` onto ``device``.

        ``device`` need not be the one the ring was saved from; the generator state is then
        not restored (CPU and CUDA generators differ) and the generator is re-seeded from the
        saved ``seed``. ``kwargs`` go to the constructor (e.g. ``memory_budget``,
        ``index_strategy``).

        Raises:
            FileNotFoundError: there is no file at ``path``.
            DataError: not a ring file, or a damaged or malformed one (empty, truncated, not an
                ``.npz``, pickled objects, bad metadata, wrong shapes or dtypes, index tables or
                episode continuity broken); the message names the file and the key, array or
                tensor at fault.
        """
        return persist.load(cls, path, device, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return persist.pickled_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        arguments = persist.unpickled_arguments(state)
        ReplayRing.__init__(self, *arguments.positional, **arguments.options)
        self.load_state_dict(arguments.state)
