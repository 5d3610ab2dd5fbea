"""Load recorded episodes (e.g. datapacks' ``.npz`` episodes) into a :class:`ReplayRing`.

An episode is a mapping of arrays (what :func:`gymcurric.datapacks.load_episode` returns):

================= ============ ==========================================================
key               shape        meaning
================= ============ ==========================================================
``obs``           ``[T+1, ...]`` observations ``o_0 .. o_T`` (``o_T`` the final one), or
                  ``[T, ...]``   with ``next_obs`` ``[T, ...]`` (then ``o_T = next_obs[-1]``)
``action``        ``[T, ...]``   actions
``reward``        ``[T]``        rewards
``cost``          ``[T]``        optional, default 0
``terminated``    scalar/``[T]`` optional: the episode ended in a terminal state (the last
                                 value counts); default (or None) False
``truncated``     scalar/``[T]`` optional, informative: an episode that did not terminate is
                                 written as truncated (it bootstraps)
================= ============ ==========================================================

Episodes are dealt into the ring's ``num_envs`` columns (each episode goes to the column
with the fewest queued steps) and written in lock-step rows with the same-step layout: the final
observation of each episode goes to the side store and the next episode of the column starts
with ``is_first``. When the input ends, the steps that cannot fill a whole row are dropped; a
column cut in the middle of an episode keeps the next observation of its last written step (so
that step bootstraps, like a truncation).

All or nothing: every episode is read and checked (arrays, lengths, and that its observations
and actions fit the ring's fields) before the first row is written, so an episode that is
refused leaves the ring as it was. Meanwhile only what the ring will hold is kept: the arrays of
an episode whose rows later rows of the same call write over (an input larger than the ring)
are let go as soon as that is known, keeping its length and its end (9 bytes) and, until
``side_capacity`` later episode ends would write its side-store slot over, a copy of its final
observation; the rows are written as before. The arrays of the episodes kept are the input's
own (not copied): an input that reuses its arrays for the next episode must yield copies.
A row's actions are stacked as ``np.stack`` stacks them and cast by ``push_step`` as any
row; where their stacked dtype would not fit the action field (``int64`` and ``uint64`` stack
to ``float64``), each env's action is cast to the field's dtype, so episodes whose actions
have different dtypes of one kind may share a row. A bfloat16 action field (numpy lacks it)
takes numbers of any dtype, each rounded once to the nearest bfloat16 (torch's float64 cast
rounds twice, through float32; where numpy's longdouble is float64, values of 64-bit dtypes
beyond ``2**53`` are rounded to float64 first), an episode's actions as a whole when its rows
come to be written (a bfloat16 copy then replaces the input's array); bfloat16 tensors are read
as their float32 values.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.replay._checks import UNSIGNED, as_tensor_like, numpy_dtype

if TYPE_CHECKING:  # ring.py imports this module (ReplayRing.extend_from_episodes)
    from gymcurric.replay.ring import ReplayRing

__all__ = ["EpisodeLoadReport", "extend_from_episodes"]


@dataclass(frozen=True)
class EpisodeLoadReport:
    """What :func:`extend_from_episodes` wrote.

    Attributes:
        episodes: episodes read.
        rows: ring rows written (each holds one step of every env).
        steps: steps written (``rows * num_envs``).
        dropped_steps: steps left over at the end that did not fill a whole row.
    """

    episodes: int
    rows: int
    steps: int
    dropped_steps: int


@dataclass
class _Episode:
    """A checked episode; its steps are None once later rows of the call write over them."""

    obs: np.ndarray | None  # [T+1, ...]
    action: np.ndarray | None
    reward: np.ndarray | None
    cost: np.ndarray | None
    terminated: bool
    length: int
    final_obs: np.ndarray | None  # obs[T]; None where a later end writes its side slot over

    def final_only(self) -> _Episode:
        """This episode as its length, its end and a copy of its final observation only.

        A copy, not a view that would keep all of ``obs`` alive.
        """
        assert self.final_obs is not None
        final = self.final_obs.copy()
        return _Episode(None, None, None, None, self.terminated, self.length, final)


def _array(where: str, key: str, value: Any) -> np.ndarray:
    """``value`` (array ``key`` of an episode) as a numpy array.

    A sparse or nested tensor is refused, as is what numpy cannot read (a ragged list, a tensor
    on a GPU or of a dtype numpy lacks); a tensor that requires grad or has torch's negative or
    conjugate bit (a view numpy cannot read) gives its values, as the ring's pushes store them,
    and a bfloat16 one its values as float32 (a copy).
    """
    if isinstance(value, torch.Tensor):
        if value.layout is not torch.strided or value.is_nested:
            kind = (
                f"a tensor of layout {value.layout}"
                if value.layout is not torch.strided
                else "a nested tensor"
            )
            raise DataError(
                f"{where}: array {key!r} is {kind}; expected a dense (strided) tensor or a "
                "numpy array"
            )
        value = value.detach().resolve_conj().resolve_neg()  # no-ops without grad and bits
        if value.dtype == torch.bfloat16 and value.device.type == "cpu":
            value = value.float()  # numpy lacks bfloat16: its values, exactly, as float32
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:
        got = (
            f"a tensor of dtype {value.dtype} on {value.device}"
            if isinstance(value, torch.Tensor)
            else f"a {type(value).__name__}"
        )
        raise DataError(
            f"{where}: array {key!r} is {got} that numpy cannot read; expected a numpy array, "
            "or a CPU tensor of a numpy dtype or bfloat16"
        ) from err


def _numbers(where: str, key: str, value: np.ndarray) -> np.ndarray:
    """``value`` (actions, rewards, costs or terminated flags) if it holds numbers.

    Complex ones lost their imaginary part (a ``ComplexWarning``), objects became NaN, and
    strings were parsed row by row until one failed (a raw ``ValueError``, rows written).
    """
    if value.dtype.kind not in "biuf":
        raise DataError(
            f"{where}: array {key!r} has dtype {value.dtype}; expected numbers (bool, int or float)"
        )
    return value


def _as_episode(item: Any, index: int, ring: ReplayRing) -> _Episode:
    where = f"episode {index}"
    arrays = item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping):
        pack, arrays = item
        where = f"{getattr(pack, 'source', None)}: datapack {getattr(pack, 'pack_id', '?')!r}"
    if not isinstance(arrays, Mapping):
        raise DataError(f"{where}: expected a mapping of arrays; got {type(arrays).__name__}")
    for key in ("obs", "action", "reward"):
        if key not in arrays:
            raise DataError(f"{where}: array {key!r} is missing; got keys {sorted(arrays)}")
    action = _numbers(where, "action", _array(where, "action", arrays["action"]))
    reward = _numbers(where, "reward", _array(where, "reward", arrays["reward"]))
    T = len(action) if action.ndim else 0  # len() of a 0-d array raised a raw TypeError
    if T < 1 or reward.shape != (T,):
        raise DataError(
            f"{where}: 'action' must have T >= 1 rows and 'reward' shape (T,); got "
            f"{action.shape} and {reward.shape}"
        )
    obs = _array(where, "obs", arrays["obs"])
    rows = len(obs) if obs.ndim else -1  # a 0-d array: len() raised a raw TypeError
    if "next_obs" in arrays and rows == T:
        next_obs = _array(where, "next_obs", arrays["next_obs"])
        # a 0-d array raised a raw IndexError, other rows a raw ValueError of np.concatenate
        if next_obs.ndim == 0 or next_obs.shape[1:] != obs.shape[1:]:
            raise DataError(
                f"{where}: 'next_obs' must be rows of shape {obs.shape[1:]}, as the 'obs' "
                f"rows; got an array of shape {next_obs.shape}"
            )
        obs = np.concatenate([obs, next_obs[-1:]], axis=0)
        rows = len(obs)
    if rows != T + 1:
        raise DataError(
            f"{where}: 'obs' must have T + 1 = {T + 1} rows (the final observation last), or "
            f"T rows plus 'next_obs'; got "
            + (f"{rows} rows" if rows >= 0 else f"shape {obs.shape}")
        )
    obs_dtype = numpy_dtype(ring.specs["obs"].dtype)
    if obs_dtype is None:  # the rows are written as numpy arrays
        raise DataError(
            f"{where}: the ring's observations have dtype {ring.specs['obs'].dtype}, which "
            "numpy lacks; episodes are written into rings whose observations numpy can hold "
            "(e.g. float32)"
        )
    if not np.can_cast(obs.dtype, obs_dtype, "same_kind"):
        # a bfloat16 tensor is read as float32: the message names the dtype it was given
        bfloat16 = _bfloat16(arrays["obs"]) and obs.dtype == np.float32
        got = "torch.bfloat16" if bfloat16 else obs.dtype
        raise DataError(
            f"{where}: 'obs' of dtype {got} cannot be stored in the ring's "
            f"{np.dtype(obs_dtype)} observations"
        )
    # numpy broadcast a (1,) row into the ring's (2,) observations without a word
    if obs.shape[1:] != tuple(ring.specs["obs"].shape):
        raise DataError(
            f"{where}: 'obs' rows have shape {obs.shape[1:]}; the ring's observations have "
            f"shape {tuple(ring.specs['obs'].shape)}"
        )
    _check_action(where, action, ring, _bfloat16(arrays["action"]))
    cost = _numbers(where, "cost", _array(where, "cost", arrays.get("cost", np.zeros(T))))
    if cost.shape != (T,):
        raise DataError(f"{where}: 'cost' must have shape ({T},); got {cost.shape}")
    # bool() of a string is whether it is empty ("False" terminated), of an object anything;
    # None is "not given", as a missing key (it read as False before numbers were required)
    given = arrays.get("terminated")
    term = _array(where, "terminated", False if given is None else given)
    term = _numbers(where, "terminated", term).reshape(-1)
    terminated = bool(term[-1]) if term.size else False
    return _Episode(obs, action, reward, cost, terminated, T, obs[T])


def _bfloat16(value: Any) -> bool:
    """Whether ``value`` is a bfloat16 tensor (which :func:`_array` reads as float32)."""
    return isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16


def _check_action(where: str, action: np.ndarray, ring: ReplayRing, bfloat16: bool) -> None:
    """Refuse ``action`` rows that ``push_step`` would refuse (the ring's own check, one row).

    Rows of the wrong shape were a raw ``ValueError`` of ``np.stack`` (or a ``ConfigError``
    without the episode's name), raised after the rows of earlier episodes were written.
    ``bfloat16``: the actions were a bfloat16 tensor (``action`` holds them as float32).
    """
    spec = ring.specs["action"]
    if bfloat16 and not spec.dtype.is_floating_point:  # named as given, not as float32
        raise ConfigError(
            "action",
            "tensor of dtype torch.bfloat16",
            f"cannot be stored as {spec.dtype} without changing its kind",
            source=where,
        )
    # a bfloat16 field takes numbers of any kind (rounded to it by _bfloat16_bits): checked as
    # float32 would be; push_step refused all but bfloat16 tensors ("pass a torch tensor")
    dtype = torch.float32 if spec.dtype == torch.bfloat16 else spec.dtype
    try:
        as_tensor_like("action", action[0], tuple(spec.shape), dtype, ring.device)
    except ConfigError as err:
        raise ConfigError(err.key, err.value, err.reason, source=where) from None


@dataclass
class _Input:
    """Every episode's length and end; the steps and final observations the writes need."""

    lengths: array  # of "q"
    terminated: bytearray
    held: dict[int, _Episode]  # by the episode's index: the others are written over


def _read_all(ring: ReplayRing, episodes: Iterable[Any]) -> _Input:
    """Every episode, checked, keeping only what this call's later rows do not write over.

    The writes deal each episode to the column with the fewest steps (ties: the first), and
    column ``e``'s ``k``-th step goes into the ``k``-th row written, so where each step lands
    follows from the lengths alone: once every column holds ``n`` steps, ``n`` rows will be
    written, and the rows before ``n - capacity`` are written over by the rows after them.
    The side store's slots are taken in turn by the episode ends, in the order rows and envs
    are written, so a final observation with ``side_capacity`` ends after it is written over.
    An episode whose rows and final observation are both written over is kept as its length
    and end only (9 bytes), so that an input of many short episodes does not grow either.
    """
    E, capacity = ring.num_envs, ring.capacity
    read = _Input(array("q"), bytearray(), {})
    dealt = np.zeros(E, dtype=np.int64)  # steps dealt to each column so far
    columns: list[deque[tuple[int, int]]] = [deque() for _ in range(E)]  # (index, 1st row)
    finals: deque[int] = deque()  # episodes let go of, in the order their ends are written
    for index, item in enumerate(episodes):
        ep = _as_episode(item, index, ring)
        read.lengths.append(ep.length)
        read.terminated.append(ep.terminated)
        read.held[index] = ep
        e = int(np.argmin(dealt))  # as the writes deal it
        columns[e].append((index, int(dealt[e])))
        dealt[e] += ep.length
        written_over = int(dealt.min()) - capacity  # rows before it: written over later
        gone = []  # every end here comes before those of episodes let go later
        for column_index, column in enumerate(columns):
            while column and column[0][1] + read.lengths[column[0][0]] <= written_over:
                old, start = column.popleft()
                gone.append((start + read.lengths[old], column_index, old))
        for _, _, old in sorted(gone):
            read.held[old] = read.held[old].final_only()
            finals.append(old)
        while len(finals) > ring.side_capacity:
            del read.held[finals.popleft()]
    return read


def _action_dtype(ring: ReplayRing) -> Any:
    """The numpy dtype of the ring's action field (``None`` for bfloat16, which numpy lacks).

    The rows of a bfloat16 field are gathered from each episode's :func:`_bfloat16_bits`.
    """
    dtype = ring.specs["action"].dtype
    unsigned = UNSIGNED.get(dtype)
    return unsigned[0] if unsigned is not None else numpy_dtype(dtype)


def _bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to the nearest bfloat16 (ties to even), once: their bits, as int16.

    torch's float64 -> bfloat16 cast rounds twice, through float32 (``1 + 2**-8 + 2**-30``
    became 1.0, not ``1 + 2**-7``). Here each value is read as float64, which holds the numbers
    of the other dtypes the field takes exactly, or, for longdouble, int64 and uint64, as
    numpy's longdouble (exact where it is x87's 80 bits; where it is float64, as on arm64 or
    Windows, those beyond ``2**53`` are rounded to float64 first), and rounded in that dtype to
    a multiple of the spacing of bfloat16 at its magnitude (8 significant bits; ``2**-133``
    below ``2**-126``), exactly; float32 holds the result exactly (beyond bfloat16's largest
    finite value it is infinite, as a rounding to bfloat16 gives), so torch's cast from
    float32 keeps it. Called once per episode (a row gathers its envs' bits with numpy).
    """
    wide = values.dtype == np.longdouble or (values.dtype.kind in "iu" and values.itemsize == 8)
    x = np.asarray(values, dtype=np.longdouble if wide else np.float64)
    _, exponent = np.frexp(x)  # x = m * 2**exponent, 0.5 <= |m| < 1
    spacing = np.ldexp(x.dtype.type(1), np.maximum(exponent, -125) - 8)
    with np.errstate(over="ignore"):  # beyond bfloat16's range: inf, the rounding's result
        rounded = (np.round(x / spacing) * spacing).astype(np.float32)
    return torch.from_numpy(rounded).to(torch.bfloat16).view(torch.int16).numpy()


def _row_dtype(dtypes: set[np.dtype], field: Any) -> Any:
    """The dtype of one row of actions whose episodes' actions have ``dtypes``.

    What ``np.stack`` of them gives, which ``push_step`` then casts as any row (to the values
    numpy's cast gives, on either index: what a push of the same actions stores); the field's
    own dtype where that would not fit the field (``int64`` and ``uint64`` stack to
    ``float64``, which ``push_step`` refuses for an integer field), each env's actions cast to
    it.
    """
    if not dtypes:
        return field
    dtype = np.result_type(*dtypes)
    if field is np.bool_:
        fits = dtype == np.bool_
    else:
        fits = field is not None and np.can_cast(dtype, field, "same_kind")
    return dtype if fits else field


def extend_from_episodes(ring: ReplayRing, episodes: Iterable[Any]) -> EpisodeLoadReport:
    """Append recorded episodes to ``ring`` (see the module docstring for the array layout).

    All or nothing: every episode is read and checked before the first row is written, and a
    refused one leaves the ring unchanged. Of an input larger than the ring, only the steps
    the ring will hold are kept meanwhile (see the module docstring).

    Args:
        ring: the ring to fill (its user fields, if any, are written as zeros).
        episodes: mappings of arrays, or ``(pack, arrays)`` pairs as yielded by
            :func:`gymcurric.datapacks.iter_episodes`.

    Returns:
        An :class:`EpisodeLoadReport`.

    Raises:
        DataError: an episode lacks an array, has inconsistent lengths or arrays that are not
            rows (0-d), holds a sparse or nested tensor or an array numpy cannot read,
            actions, rewards, costs or terminated flags that are not numbers, or observations
            that do not fit the ring's (dtype kind, shape; a ring whose observations numpy
            lacks, bfloat16, takes none) (names the datapack, or the episode's index).
        ConfigError: an episode's actions do not fit the ring's action field (shape or dtype
            kind, any number for a bfloat16 field; names the datapack, or the episode's
            index).

    Examples:
        >>> import numpy as np, torch
        >>> from gymcurric.replay import ReplayRing
        >>> ring = ReplayRing(16, 1, {"obs": ((2,), torch.float32), "action": ((), torch.int64)})
        >>> ep = {"obs": np.zeros((4, 2), np.float32), "action": np.zeros(3, np.int64),
        ...       "reward": np.ones(3), "terminated": True}
        >>> extend_from_episodes(ring, [ep, ep])
        EpisodeLoadReport(episodes=2, rows=6, steps=6, dropped_steps=0)
        >>> ring["continue_"][:6, 0].tolist(), ring["episode_id"][:6, 0].tolist()
        ([1.0, 1.0, 0.0, 1.0, 1.0, 0.0], [0, 0, 0, 1, 1, 1])
    """
    E = ring.num_envs
    queues: list[deque[list[Any]]] = [deque() for _ in range(E)]  # [episode, next index]
    queued = np.zeros(E, dtype=np.int64)
    # a field numpy lacks (bfloat16, uint16/32/64) takes a tensor: numpy zeros of dtype None
    # were float64, which push_step refuses for such a field
    zeros_extra: dict[str, Any] = {
        n: np.zeros((E, *ring.specs[n].shape), dtype=numpy_dtype(ring.specs[n].dtype))
        if numpy_dtype(ring.specs[n].dtype) is not None
        else torch.zeros((E, *ring.specs[n].shape), dtype=ring.specs[n].dtype, device=ring.device)
        for n in ring.user_fields
    }
    obs_shape = (E, *ring.specs["obs"].shape)
    obs_dtype = numpy_dtype(ring.specs["obs"].dtype)
    # checked before the first write: a refused episode leaves the ring as it was
    checked = _read_all(ring, episodes)
    actions_shape = (E, *ring.specs["action"].shape)
    # a row of actions as np.stack gives it, or each env's cast to the field's dtype where
    # that does not fit: np.stack of int64 and uint64 actions gave float64, which the ring
    # refused half-way through the writes
    actions_dtype = _action_dtype(ring)
    # a bfloat16 field: each episode's actions are rounded once, as they are queued, and a row
    # gathers their bits, copied to the ring's device without blocking on CUDA (a blocking copy
    # per row made the host wait for the device at every row; from pageable memory the driver
    # stages the bits before the call returns, as copy_in relies on), blocking elsewhere (MPS
    # reads the freed row later: non_blocking_copy); the ring's own decision, made once
    to_bfloat16 = ring.specs["action"].dtype == torch.bfloat16
    non_blocking = to_bfloat16 and ring.non_blocking
    last_written: list[tuple[_Episode, int] | None] = [None] * E
    rows = 0

    def write_row() -> None:
        obs = np.zeros(obs_shape, dtype=obs_dtype)
        final = np.zeros_like(obs)
        row_actions = []  # (env, action) of the envs whose row is kept
        rewards, costs = np.zeros(E), np.zeros(E)
        term = np.zeros(E, dtype=bool)
        trunc = np.zeros(E, dtype=bool)
        first = np.zeros(E, dtype=bool)
        for e in range(E):
            entry = queues[e][0]
            ep, i = entry
            if ep.action is not None:  # else a row written over later: only its flags count
                assert ep.obs is not None and ep.reward is not None and ep.cost is not None
                obs[e] = ep.obs[i]
                row_actions.append((e, ep.action[i]))
                rewards[e] = ep.reward[i]
                costs[e] = ep.cost[i]
            first[e] = i == 0
            if i == ep.length - 1:
                term[e] = ep.terminated
                trunc[e] = not ep.terminated
                if ep.final_obs is not None:  # else: zeros, into a slot written over later
                    final[e] = ep.final_obs
                queues[e].popleft()
            else:
                entry[1] = i + 1
            last_written[e] = (ep, i)
            queued[e] -= 1
        actions: np.ndarray | torch.Tensor
        if to_bfloat16:
            bits = np.zeros(actions_shape, dtype=np.int16)  # bfloat16 0.0 where written over
            for e, a in row_actions:
                bits[e] = a
            actions = torch.from_numpy(bits).view(torch.bfloat16)
            actions = actions.to(ring.device, non_blocking=non_blocking)  # CPU: the tensor itself
        else:
            dtype = _row_dtype({a.dtype for _, a in row_actions}, actions_dtype)
            actions = np.zeros(actions_shape, dtype=dtype)
            for e, a in row_actions:  # cast as push_step casts a row (wrapping, same_kind):
                actions[e] = a.astype(dtype, copy=False)  # an item assignment raises on overflow
        ring.push_step(
            obs,
            actions,
            rewards,
            cost=costs,
            terminated=term,
            truncated=trunc,
            is_first=first,
            final_obs=final if (term | trunc).any() else None,
            **zeros_extra,
        )

    for index, length in enumerate(checked.lengths):
        ep = checked.held.pop(index, None)  # let go of as soon as it is written
        if ep is None:  # written over later, its final observation too
            ep = _Episode(None, None, None, None, bool(checked.terminated[index]), length, None)
        elif to_bfloat16 and ep.action is not None:
            ep.action = _bfloat16_bits(ep.action)  # the whole episode's, once
        e = int(np.argmin(queued))
        queues[e].append([ep, 0])
        queued[e] += length
        while queued.min() > 0:
            write_row()
            rows += 1
    # a column cut mid-episode: keep the next observation of its last written step
    cut = np.zeros(E, dtype=bool)
    nxt = np.zeros(obs_shape, dtype=obs_dtype)
    for e in range(E):
        last = last_written[e]
        if rows and last is not None and last[1] < last[0].length - 1:
            cut[e] = True
            assert last[0].obs is not None  # the last row is never written over
            nxt[e] = last[0].obs[last[1] + 1]
    if cut.any():
        ring.attach_final_obs((ring.head - 1) % ring.capacity, nxt, cut)
        ring.start_episodes_at_next_push(cut)
    return EpisodeLoadReport(len(checked.lengths), rows, rows * E, int(queued.sum()))
