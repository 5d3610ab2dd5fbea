"""Worker functions for the shared-backend tests (a small module: spawn children import it)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from gymcurric.tasks import Curriculum, transport_for


def _report(q: Any, fn: Any, *args: Any) -> None:
    try:
        q.put(("ok", fn(*args)))
    except Exception as exc:  # sent back to the test, which asserts on it
        q.put(("error", type(exc).__name__, str(exc)))


def updates(cur: Curriculum, worker: int, n: int, n_tasks: int, q: Any) -> None:
    """``n`` updates round-robin over the tasks, with samples in between; half use batches."""

    def body() -> int:
        cur.reseed(worker)
        batch: list[int] = []
        for i in range(n):
            cur.sample(1 if i % 2 else 3)
            tid = (worker + i) % n_tasks
            if worker % 2:
                batch.append(tid)
                if len(batch) == 7 or i == n - 1:
                    cur.update_batch(batch, [1.0] * len(batch), [bool(i % 3)] * len(batch))
                    batch.clear()
            else:
                cur.update(tid, 1.0, success=bool(i % 3))
        cur.flush()  # a worker's last buffered episodes (worker_update_batch)
        return n

    _report(q, body)


def sample_after(cur: Curriculum, seed: int | None, n: int, ready: Any, go: Any, q: Any) -> None:
    """Signal ``ready``, wait for ``go``, then draw ``n`` ids (reseeded unless ``seed`` is None)."""

    def body() -> list[int]:
        if seed is not None:
            cur.reseed(seed)
        ready.set()
        go.wait(30)
        return [int(cur.sample()[0]) for _ in range(n)]

    _report(q, body)


def churn(cur: Curriculum, seed: int, q: Any, stop: Any = None) -> None:
    """Sample and report outcomes until ``stop`` is set, or until killed."""
    cur.reseed(seed)
    q.put(("ok", os.getpid()))
    i = 0
    while stop is None or not stop.is_set():
        tid = int(cur.sample()[0])
        cur.update(tid, float(i % 2), success=bool(i % 2))
        i += 1


def die_holding_lock(cur: Curriculum, held: Any) -> None:
    """Take the curriculum's write lock, set ``held`` and get killed while holding the lock."""
    with cur.backend.lock():
        held.set()
        os.kill(os.getpid(), signal.SIGKILL)


def die_holding_lock_until_killed(cur: Curriculum, held: Any, record_pid: bool) -> None:
    """Take the write lock, set ``held`` and wait to be killed (by the test) while holding it:
    inside the locked section, or (``record_pid=False``) at the worst moment, after taking the
    lock and before recording this process's pid in the header."""
    guard = cur.backend.lock()
    take = guard._acquire

    def take_and_stall(*args: Any) -> bool:
        took = take(*args)
        held.set()
        time.sleep(600)
        return took

    if not record_pid:
        guard._acquire = take_and_stall
    with guard:
        held.set()
        time.sleep(600)


def try_lock(cur: Curriculum, q: Any) -> None:
    """Report whether the write lock can be taken now (without waiting)."""

    def body() -> bool:
        guard = cur.backend.lock()
        took = guard.try_enter()
        if took:
            guard.__exit__(None, None, None)
        return took

    _report(q, body)


def use_copy(cur: Curriculum, what: str, q: Any) -> None:
    """Call ``sample`` or ``update`` on a curriculum that crossed into this process."""

    def body() -> Any:
        if what == "sample":
            return cur.sample().tolist()
        cur.update(0, 1.0)
        return None

    _report(q, body)


def mark(cur: Curriculum, task_id: int, q: Any) -> None:
    """Report ``task_id`` invalid from this process."""
    _report(q, cur.mark_invalid, task_id, "refused by the env")


def close_copy(cur: Curriculum, q: Any, samples: int = 0) -> None:
    """Draw ``samples`` ids, then close this attached copy (which must not unlink the segment)."""

    def body() -> None:
        for _ in range(samples):
            cur.sample()
        cur.close()

    _report(q, body)


def read_forever(cur: Curriculum, allowed: set[int], stop: Any, q: Any) -> None:
    """Sample until ``stop`` (an event) is set; report ids outside ``allowed`` (torn reads)
    and the draw count."""

    def body() -> tuple[int, list[int]]:
        cur.reseed(0)
        bad: list[int] = []
        n = 0
        while not stop.is_set():
            for tid in cur.sample(16).tolist():
                if tid not in allowed:
                    bad.append(tid)
            n += 16
        return n, bad[:20]

    _report(q, body)


def buffered(cur: Curriculum, n: int, q: Any, go: Any) -> None:
    """``n`` episodes of task 0 through the worker's transport, then report; flush only when
    ``go`` is set."""

    def body() -> int:
        transport = transport_for(cur)
        for _ in range(n):
            transport.report_episode(0, 1.0, True, None)
        q.put(("ok", "updated"))
        go.wait(30)
        transport.flush()
        return n

    _report(q, body)


def slow_updates(cur: Curriculum, q: Any) -> None:
    """One update, a pause longer than the buffer's age bound, one more update; no flush."""

    def body() -> str:
        transport = transport_for(cur)
        transport.report_episode(0, 1.0, None, None)
        time.sleep(1.1)
        # the oldest buffered episode is > 1 s old: both are applied
        transport.report_episode(0, 1.0, None, None)
        return "done"

    _report(q, body)


def timed_updates(cur: Curriculum, n: int, q: Any) -> None:
    """``n`` updates of task 0; report the seconds each call took, then flush on close."""

    def body() -> list[float]:
        transport = transport_for(cur)
        took = []
        for _ in range(n):
            t0 = time.monotonic()
            transport.report_episode(0, 1.0, True, None)
            took.append(time.monotonic() - t0)
        transport.release()  # flushes what is still buffered
        return took

    _report(q, body)


def tasks_ahead(cur: Curriculum, n: int, q: Any, go: Any) -> None:
    """``n`` sample_task calls, report; wait for ``go``; ``n`` more, report; close."""

    def body() -> list[int]:
        transport = transport_for(cur)
        transport.reseed(0)
        first = [transport.take_task()[0] for _ in range(n)]
        q.put(("ok", first))
        go.wait(30)
        second = [transport.take_task()[0] for _ in range(n)]
        transport.release()  # applies the sample counts
        return second

    _report(q, body)


def stream(cur: Curriculum, ids: list[int], returns: list[float], wins: list[Any], q: Any) -> None:
    """Report a fixed stream of episodes through the worker's transport (buffered), then flush."""

    def body() -> int:
        transport = transport_for(cur)
        for tid, r, s in zip(ids, returns, wins, strict=True):
            transport.report_episode(tid, r, s, None)
        transport.flush()
        return len(ids)

    _report(q, body)


def buffered_then_batch(cur: Curriculum, q: Any) -> None:
    """A buffered ``update`` of task 3, then ``update_batch`` of it: report its return EMA."""

    def body() -> float:
        cur.update(3, 1.0, success=True)  # buffered (worker_update_batch > 1)
        cur.update_batch([3], [0.0], [False])  # must come after the buffered one
        slot = cur.slot_of(3)
        assert slot is not None
        return float(cur.state.ret_ema[slot])

    _report(q, body)


def buffered_then_load(cur: Curriculum, saved: dict[str, Any], q: Any) -> None:
    """Buffer three episodes, load a state dict, flush: report the updates counted."""

    def body() -> float:
        for _ in range(3):
            cur.update(0, 1.0, success=True)
        cur.load_state_dict(saved)  # the buffered episodes belonged to the replaced state
        cur.flush()
        return cur.stats()["curriculum/updates"]

    _report(q, body)


def wrapper_episodes_then_stats(env: Any, cur: Curriculum, episodes: int, q: Any) -> None:
    """Run ``episodes`` episodes through a wrapper built in the parent; report ``cur.stats()``."""

    def body() -> float:
        env.reset(seed=0)
        done = 0
        while done < episodes:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                done += 1
                env.reset()
        return cur.stats()["curriculum/updates"]  # sees what the wrapper's transport buffered

    _report(q, body)
