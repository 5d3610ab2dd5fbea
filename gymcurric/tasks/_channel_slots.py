"""The shared-memory slots of a task channel, and what a sub-env does with its own slot.

:class:`ChannelSlots` allocates one slot per sub-env of a vector env (its next task, its spare
tasks and refusals, its last finished episode), maps them again in each worker it is pickled
into, and holds the sub-env side: take the waiting task or a spare, leave a refusal or a
finished episode. :class:`~gymcurric.tasks.channel.TaskChannel` extends it with the main
process's side (refills, results, checkpoints); :mod:`gymcurric.tasks.channel` tells how the
two sides share the slots without a lock.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.tasks.shared_backend import SharedMemoryBackend
from gymcurric.tasks.state import FieldSpec

__all__ = ["ChannelSlots"]

_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)
_FIELDS = {
    "given": _I64,  # next tasks written by the main process (a running count)
    "taken": _I64,  # next tasks taken by the sub-env (a running count)
    "next_id": _I64,
    "next_slot": _I64,  # the pool slot it was drawn from (for the sample count)
    "res_seq": _I64,  # results written by the sub-env (a running count)
    "res_id": _I64,
    "res_return": _F64,
    "res_success": _F64,  # NaN: none reported
    "res_cost": _F64,
}
# Also, for the retries after a refusal: "retries" (2, num_envs), per env since the main process
# last read them the refusals written (row 0) and the spares taken (row 1); "spare_id" and
# "spare_slot" (num_envs, spares); "refused_id" (num_envs, spares + 1) and "refused_why" (the
# reasons, UTF-8, zero-padded).
#: bytes kept of each refusal's reason (UTF-8, cut)
REASON_BYTES = 160


class ChannelSlots:
    """The slots of ``num_envs`` sub-envs in shared memory, and each sub-env's side of its slot.

    The base of :class:`~gymcurric.tasks.channel.TaskChannel` (see it for the arguments).
    Picklable into worker processes at their start: a worker maps the same memory.
    """

    def __init__(
        self,
        num_envs: int,
        *,
        episodes_in_main: bool = False,
        spares: int = 0,
        key_modulus: int = 0,
    ) -> None:
        check_int("num_envs", num_envs, source="TaskChannel")
        check_int("spares", spares, minimum=0, source="TaskChannel")
        check_int("key_modulus", key_modulus, minimum=0, source="TaskChannel")
        self.num_envs = num_envs
        self.episodes_in_main = bool(episodes_in_main)
        self.spares = spares
        self.key_modulus = key_modulus
        self._backend = SharedMemoryBackend()
        layout = {k: FieldSpec(d, (num_envs,)) for k, d in _FIELDS.items()}
        refusals = spares + 1 if spares else 0  # a reset tries its task and then every spare
        layout.update(
            retries=FieldSpec(_I64, (2, num_envs)),
            spare_id=FieldSpec(_I64, (num_envs, spares)),
            spare_slot=FieldSpec(_I64, (num_envs, spares)),
            refused_id=FieldSpec(_I64, (num_envs, refusals)),
            refused_why=FieldSpec(np.dtype(np.uint8), (num_envs, refusals, REASON_BYTES)),
        )
        arrays = self._backend.allocate(layout)
        arrays["spare_id"][:] = -1  # none yet
        self._bind(arrays)

    def _bind(self, arrays: dict[str, np.ndarray]) -> None:
        self._given, self._taken = arrays["given"], arrays["taken"]
        self._next_id, self._next_slot = arrays["next_id"], arrays["next_slot"]
        self._res_seq, self._res_id = arrays["res_seq"], arrays["res_id"]
        self._res_r, self._res_s = arrays["res_return"], arrays["res_success"]
        self._res_c = arrays["res_cost"]
        self._retries = arrays["retries"]
        self._refused, self._spare_used = self._retries[0], self._retries[1]
        self._spare_id, self._spare_slot = arrays["spare_id"], arrays["spare_slot"]
        self._refused_id, self._refused_why = arrays["refused_id"], arrays["refused_why"]
        # the sub-env side reads and writes single items: memoryviews of the same memory are
        # 2-3x cheaper per item than numpy scalar access
        self._mv: dict[str, Any] = {k: a.data for k, a in arrays.items()}
        mv = self._mv
        self._w_given, self._w_taken, self._w_next = mv["given"], mv["taken"], mv["next_id"]

    # ---------------------------------------------------------------- sub-env side
    def take(self, env: int) -> int | None:
        """The task id waiting for sub-env ``env`` (it is then taken), or None if none waits."""
        taken = self._w_taken
        t = taken[env]
        if t == self._w_given[env]:
            return None
        taken[env] = t + 1
        return self._w_next[env]

    def take_spare(self, env: int) -> int | None:
        """The next spare task of sub-env ``env`` (it is then taken), or None if none is left.

        A spare of a task (for spaces with variants: of a cell) that this env refused since
        the main process last read its slot is passed over: the spares were drawn before the
        refusal, which removes that task from the pool, so a draw made after it (the path
        without a channel) could not return it. Passed-over spares are not counted as
        samples.
        """
        used, spares = int(self._spare_used[env]), self.spares
        refused = self.refused_keys(env)
        modulus = self.key_modulus
        while used < spares:
            tid = int(self._spare_id[env, used])
            if tid < 0:
                break
            used += 1
            if (tid % modulus if modulus else tid) not in refused:
                self._spare_used[env] = used
                return tid
            self._spare_id[env, used - 1] = -1  # passed over: not counted at the next refill
        self._spare_used[env] = used
        return None

    def refused_keys(self, env: int) -> set[int]:
        """The keys of the tasks sub-env ``env`` refused since the main process last read them.

        Those refusals are not applied to the curriculum yet: the tasks are still in its pool.
        """
        n = int(self._refused[env])
        if not n:
            return set()
        ids = self._refused_id[env, :n].tolist()
        modulus = self.key_modulus
        return {t % modulus for t in ids} if modulus else set(ids)

    def refuse(self, env: int, task_id: int, reason: str) -> bool:
        """Leave sub-env ``env``'s refusal of ``task_id`` for the main process.

        Returns False (nothing written) when the channel keeps no refusals (no spares) or the
        env's refusals since the main process last read them fill its slot.
        """
        n = int(self._refused[env])
        if n >= self._refused_id.shape[1]:
            return False
        self._refused_id[env, n] = task_id
        why = reason.encode("utf-8", "replace")[:REASON_BYTES]
        row = self._refused_why[env, n]
        row[:] = 0
        row[: len(why)] = np.frombuffer(why, dtype=np.uint8)
        self._refused[env] = n + 1
        return True

    def put(self, env: int, task_id: int, return_: float, success: float | None, cost: float):
        """Leave sub-env ``env``'s finished episode (values already checked) for the main."""
        mv = self._mv
        mv["res_id"][env] = task_id
        mv["res_return"][env] = return_
        mv["res_success"][env] = math.nan if success is None else success
        mv["res_cost"][env] = cost
        seq = mv["res_seq"]
        seq[env] = seq[env] + 1

    def close(self) -> None:
        """Unlink the segment (creator) or drop this process's mapping (a worker)."""
        self._backend.close()

    @property
    def is_creator(self) -> bool:
        """True in the process that made the channel (the vector env's process)."""
        return self._backend.is_creator

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._backend.closed

    def __getstate__(self) -> dict[str, Any]:
        return {
            "num_envs": self.num_envs,
            "episodes_in_main": self.episodes_in_main,
            "spares": self.spares,
            "key_modulus": self.key_modulus,
            "backend": self._backend,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.num_envs, self._backend = state["num_envs"], state["backend"]
        self.episodes_in_main, self.spares = state["episodes_in_main"], state["spares"]
        self.key_modulus = state["key_modulus"]
        self._bind(self._backend.arrays())
