"""The device index's uniform draw: a fixed sequence of torch operations, and its CUDA graphs.

:func:`draw_transitions` is what :meth:`DeviceIndex.sample_transitions
<gymcurric.replay.indexing.DeviceIndex.sample_transitions>` runs (see there for the rule that
picks each entry among its candidate draws). It never reads a device value on the host, keeps
its intermediate results in the preallocated :class:`DrawBuffers` of its batch shape, and runs
the same operations whatever the data, so it can be captured in a CUDA graph:
:class:`GraphedDraws` (``ReplayRing(..., cuda_graphs=True)``) captures one draw per batch shape
and generator and replays it, with the ring's oldest row as a device scalar. On CPU it runs the
same captured-form function eagerly, which is how the tests check that a replay draws exactly
what the ordinary draw does.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import torch

from gymcurric.replay.specs import Transitions
from gymcurric.replay.storage import RingStorage

__all__ = ["DrawBuffers", "DrawOutputs", "GraphedDraws", "draw_transitions"]

#: draw shapes whose buffers a ring keeps (the least recently used one is dropped beyond)
KEPT_SHAPES = 4


class DrawBuffers:
    """Intermediate results of one ``(batch, candidates)`` draw shape, reused by every draw.

    ``index`` holds each candidate's flat step (row 0) and the row of ``storage.observations``
    with its next observation (row 1); the rest are per-candidate flags and the choice.
    """

    def __init__(self, batch: int, candidates: int, device: torch.device) -> None:
        pool = batch * candidates
        self.batch, self.candidates, self.pool = batch, candidates, pool

        def longs(*shape: int) -> torch.Tensor:
            return torch.empty(shape, dtype=torch.int64, device=device)

        def flags(*shape: int) -> torch.Tensor:
            return torch.empty(shape, dtype=torch.bool, device=device)

        #: candidate-major positions: candidate c of entry j is at c * batch + j
        self.positions = torch.arange(pool, device=device).view(candidates, batch)
        #: the positions of two passes over the candidates (the fallback's cyclic search)
        self.positions_twice = torch.arange(2 * pool, device=device).view(2, pool)
        self.minus_one = torch.full((), -1, dtype=torch.int64, device=device)
        self.one = torch.ones((), dtype=torch.float32, device=device)
        self.index = longs(2, pool)
        self.slot = longs(pool)
        self.side_row = longs(pool)
        self.next_first = flags(pool)
        self.has_side = flags(pool)
        self.valid = flags(pool)
        self.newest = flags(pool)
        self.marked = longs(2, pool)
        self.last_valid = longs(2 * pool)
        self.last_valid_at = longs(2 * pool)
        self.keyed = longs(candidates, batch)
        self.chosen = longs(batch)


class DrawOutputs(NamedTuple):
    """Preallocated outputs of a captured draw (:func:`static_outputs`), rewritten by each."""

    taken: torch.Tensor  #: ``[2, batch]``: the chosen flat steps and next-observation rows
    observations: torch.Tensor  #: ``[2 * batch, *obs_shape]``: obs, then next obs
    packed: torch.Tensor  #: ``[batch, 3]``: reward, cost, continue_
    action: torch.Tensor
    done: torch.Tensor
    valid: torch.Tensor
    t_index: torch.Tensor
    env_index: torch.Tensor
    extras: dict[str, torch.Tensor]


def static_outputs(storage: RingStorage, batch: int) -> DrawOutputs:
    """Empty :class:`DrawOutputs` for draws of ``batch`` transitions from ``storage``."""
    device = storage.device

    def rows_of(source: torch.Tensor, count: int = batch) -> torch.Tensor:
        return torch.empty((count, *source.shape[1:]), dtype=source.dtype, device=device)

    return DrawOutputs(
        taken=torch.empty((2, batch), dtype=torch.int64, device=device),
        observations=rows_of(storage.observations, 2 * batch),
        packed=rows_of(storage.packed_flat),
        action=rows_of(storage.flat_fields["action"]),
        done=torch.empty(batch, dtype=torch.float32, device=device),
        valid=torch.empty(batch, dtype=torch.bool, device=device),
        t_index=torch.empty(batch, dtype=torch.int64, device=device),
        env_index=torch.empty(batch, dtype=torch.int64, device=device),
        extras={n: rows_of(storage.flat_fields[n]) for n in storage.user_fields},
    )


def draw_transitions(
    storage: RingStorage,
    buffers: DrawBuffers,
    generator: torch.Generator,
    *,
    rows: int,
    shift: int | torch.Tensor,
    size: int,
    next_obs: torch.Tensor | None = None,
    out: DrawOutputs | None = None,
) -> Transitions:
    """Draw ``buffers.batch`` transitions from the first ``rows`` chronological rows, sync-free.

    ``shift`` is ``oldest * num_envs``: a Python int, or a 0-dim device tensor in the captured
    form (then ``next_obs`` must be None). The draw is ``randint`` over ``rows * num_envs``
    (row-major ``(chronological row, env)`` pairs) either way, so both forms draw the same
    transitions from the same generator state. With ``out`` every result is written into it
    (the captured form); without, the transitions are new tensors.
    """
    num_envs = storage.num_envs
    steps = storage.capacity * num_envs
    batch, pool = buffers.batch, buffers.pool
    index = buffers.index
    flat, following = index[0], index[1]  # following: next_flat, then the next obs's row
    high = rows * num_envs
    if isinstance(shift, torch.Tensor):
        torch.randint(high, (pool,), generator=generator, out=flat)
        flat.add_(shift)
        wraps = True
    else:  # randint(low, high) draws what randint(high - low) + low does
        torch.randint(shift, shift + high, (pool,), generator=generator, out=flat)
        wraps = shift + high + num_envs > steps
    newest = None
    if next_obs is not None:  # the newest row's successor is next_obs (rows == size)
        assert not isinstance(shift, torch.Tensor)
        newest = torch.ge(flat, shift + (size - 1) * num_envs, out=buffers.newest)
    torch.add(flat, num_envs, out=following)  # row t + 1, env e
    if wraps:
        index.remainder_(steps)
    slot = torch.index_select(storage.side_slot_table, 0, flat, out=buffers.slot)
    next_first = torch.index_select(
        storage.flat_fields["is_first"], 0, following, out=buffers.next_first
    )
    has_side = torch.ge(slot, 0, out=buffers.has_side)
    # a side-store entry, or the next row continues the episode
    valid = torch.ge(has_side, next_first, out=buffers.valid)
    if newest is not None:
        valid.logical_or_(newest)
    side_row = torch.add(slot, steps, out=buffers.side_row)
    torch.where(has_side, side_row, following, out=following)
    chosen = choose(buffers, valid)
    taken = torch.index_select(index, 1, chosen, out=None if out is None else out.taken)
    flat = taken[0]
    # obs and next observations in one gather
    both = torch.index_select(
        storage.observations, 0, taken.view(-1), out=None if out is None else out.observations
    )
    obs, next_observations = both[:batch], both[batch:]
    env_index = torch.remainder(flat, num_envs, out=None if out is None else out.env_index)
    if newest is not None:
        assert next_obs is not None
        pending = torch.gt(newest, has_side).index_select(0, chosen)
        picked = next_obs.index_select(0, env_index)
        mask = pending.view(-1, *([1] * (picked.dim() - 1)))
        next_observations = torch.where(mask, picked, next_observations)
    packed = torch.index_select(
        storage.packed_flat, 0, flat, out=None if out is None else out.packed
    )
    return Transitions(
        obs=obs,
        action=torch.index_select(
            storage.flat_fields["action"], 0, flat, out=None if out is None else out.action
        ),
        reward=packed[:, 0],
        cost=packed[:, 1],
        next_obs=next_observations,
        done=torch.sub(buffers.one, packed[:, 2], out=None if out is None else out.done),
        # invalid only when no draw at all is valid (then the fallback is invalid too)
        valid=torch.index_select(valid, 0, chosen, out=None if out is None else out.valid),
        t_index=torch.div(
            flat,
            num_envs,
            rounding_mode="floor",
            out=None if out is None else out.t_index,
        ),
        env_index=env_index,
        extras={
            n: torch.index_select(
                storage.flat_fields[n], 0, flat, out=None if out is None else out.extras[n]
            )
            for n in storage.user_fields
        },
    )


def choose(buffers: DrawBuffers, valid: torch.Tensor) -> torch.Tensor:
    """Each entry's candidate position (``[batch]``), given which candidates are ``valid``.

    The first valid of its own candidates; an entry without one takes the last valid candidate
    of the pool before its own last one, cyclically (the last of two passes over the pool:
    ``marked`` numbers them ``0..2*pool``, and its running maximum at the second pass's last
    row is that draw). That fallback lies in the second pass whenever the entry has a valid
    candidate, so it never beats one in the minimum. Five operations, no host read.
    """
    batch, candidates, pool = buffers.batch, buffers.candidates, buffers.pool
    marked = torch.where(
        valid.view(1, pool), buffers.positions_twice, buffers.minus_one, out=buffers.marked
    )
    torch.cummax(marked.view(-1), 0, out=(buffers.last_valid, buffers.last_valid_at))
    fallback = buffers.last_valid[-batch:].view(1, batch)
    keyed = torch.where(
        valid.view(candidates, batch), buffers.positions, fallback, out=buffers.keyed
    )
    return torch.amin(keyed, 0, out=buffers.chosen).remainder_(pool)


class CapturedDraw(NamedTuple):
    """One draw shape: its generator, buffers, outputs and graph (None: it runs eagerly)."""

    generator: torch.Generator
    buffers: DrawBuffers
    outputs: DrawOutputs
    graph: torch.cuda.CUDAGraph | None
    transitions: Transitions  #: views of ``outputs``: what every draw of the shape returns


def output_transitions(outputs: DrawOutputs) -> Transitions:
    """The :class:`Transitions` views of ``outputs`` (what a captured draw returns)."""
    batch = outputs.valid.shape[0]
    return Transitions(
        obs=outputs.observations[:batch],
        action=outputs.action,
        reward=outputs.packed[:, 0],
        cost=outputs.packed[:, 1],
        next_obs=outputs.observations[batch:],
        done=outputs.done,
        valid=outputs.valid,
        t_index=outputs.t_index,
        env_index=outputs.env_index,
        extras=outputs.extras,
    )


class GraphedDraws:
    """Uniform draws of a full ring, each shape captured once and replayed (``cuda_graphs=True``).

    A draw shape is ``(batch, candidates, rows, generator)``; ``rows`` is fixed once the ring is
    full, and the oldest row travels as the device scalar :attr:`shift`, rewritten (one fill)
    only when it changed since the last draw. On CUDA the first draw of a shape runs the
    captured form once on a side stream (lazy initialisation; the generator state is put back
    after it), then captures it in a ``torch.cuda.CUDAGraph`` with the generator registered, so
    that a replay draws what the eager call would and advances the generator as much; on other
    devices the captured form runs eagerly. Either way a draw returns views of the shape's
    outputs, which its next draw rewrites.
    """

    def __init__(self, storage: RingStorage) -> None:
        self.storage = storage
        self.shift = torch.zeros((), dtype=torch.int64, device=storage.device)
        self.shift_value = 0  #: what :attr:`shift` holds, on the host
        self.draws: OrderedDict[tuple[int, int, int, int], CapturedDraw] = OrderedDict()

    def draw(
        self, batch: int, candidates: int, generator: torch.Generator, rows: int, oldest: int
    ) -> Transitions:
        """One draw of ``batch`` transitions (see the class): one fill at most and one replay."""
        shift = oldest * self.storage.num_envs
        if shift != self.shift_value:
            self.shift.fill_(shift)
            self.shift_value = shift
        key = (batch, candidates, rows, id(generator))
        captured = self.draws.get(key)
        if captured is None or captured.generator is not generator:
            captured = self.prepare(batch, candidates, generator, rows)
            self.draws[key] = captured
            while len(self.draws) > KEPT_SHAPES:
                self.draws.popitem(last=False)
        self.draws.move_to_end(key)
        if captured.graph is not None:
            captured.graph.replay()
        else:
            self.run(captured.buffers, captured.outputs, generator, rows)
        return captured.transitions

    def run(
        self, buffers: DrawBuffers, outputs: DrawOutputs, generator: torch.Generator, rows: int
    ) -> None:
        """The captured form of the draw, run eagerly into ``outputs``."""
        draw_transitions(
            self.storage,
            buffers,
            generator,
            rows=rows,
            shift=self.shift,
            size=self.storage.capacity,
            out=outputs,
        )

    def prepare(
        self, batch: int, candidates: int, generator: torch.Generator, rows: int
    ) -> CapturedDraw:
        """A new draw shape: buffers, outputs and, on CUDA, the graph (nothing is drawn)."""
        device = self.storage.device
        buffers = DrawBuffers(batch, candidates, device)
        outputs = static_outputs(self.storage, batch)
        graph = None
        if device.type == "cuda":
            state = generator.get_state()
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                self.run(buffers, outputs, generator, rows)
            torch.cuda.current_stream(device).wait_stream(side)
            generator.set_state(state)  # that run was initialisation, not a draw
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(generator)
            with torch.cuda.graph(graph):
                self.run(buffers, outputs, generator, rows)
        return CapturedDraw(generator, buffers, outputs, graph, output_transitions(outputs))
