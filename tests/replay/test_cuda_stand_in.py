"""Every copy of host data into a CUDA ring is non-blocking from pageable memory, blocking else.

No GPU here: a CPU ring stands in for a CUDA one (``copy_log.stand_in_ring``: the ring's
decision is CUDA's, True, and its writer copies host data as off the CPU), and every write
path runs on it: ``push_step`` with host or device flags, host reward and cost columns, a
mixed flag pair, an explicit ``is_first``, ``final_obs`` (the side store), ``attach_final_obs``,
``start_episodes_at_next_push``, ``extend_from_episodes`` (bfloat16 action rows included) and
``RecordToRing``'s observations.
Each copy of a caller's array in pinned memory (``CopyLog.pin``) must block, every other one
must not; with the CPU's own decision every copy blocks; and the stand-in stores what a plain
CPU ring stores. Each site that takes ``pageable(source)`` is reached with both kinds of
source, so a site made always blocking, or non-blocking from pinned memory, fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv

from gymcurric.replay import RecordToRing, ReplayRing
from gymcurric.replay.specs import space_fields
from tests.replay.copy_log import CopyLog, misdecided, record_copies, stand_in_ring
from tests.stubs import make_scripted

E = 3
CAPACITY = 6
FLOAT32 = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32), "aux": ((), torch.int32)}
BFLOAT16 = {"obs": ((3,), torch.float32), "action": ((2,), torch.bfloat16)}


def values(k: int, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """A fresh array of ``shape``: 10 * k + 0.25 * position, cast to ``dtype``."""
    return (10 * k + 0.25 * np.arange(int(np.prod(shape)))).reshape(shape).astype(dtype)


def flags(*ended: int) -> np.ndarray:
    return np.isin(np.arange(E), ended)


Pin = Callable[[np.ndarray], np.ndarray]


def push(ring: ReplayRing, k: int, *, device_flags=False, **given: Any) -> None:
    """Row ``k``: numpy data (what ``given`` replaces), host or device flags."""
    bfloat16 = ring.specs["action"].dtype == torch.bfloat16
    action = values(k, (E, 2))
    arguments: dict[str, Any] = {
        "obs": values(k, (E, 3)),
        "action": torch.tensor(action, dtype=torch.bfloat16) if bfloat16 else action,
        "reward": values(k, (E,), np.float64),
        "cost": values(k + 1, (E,)),
        "terminated": flags(),
        "truncated": flags(),
        **({"aux": values(k, (E,), np.int32)} if "aux" in ring.specs else {}),
    }
    arguments.update(given)
    if device_flags:
        arguments["terminated"] = torch.from_numpy(np.array(arguments["terminated"]))
        arguments["truncated"] = torch.from_numpy(np.array(arguments["truncated"]))
    obs, action, reward = (arguments.pop(n) for n in ("obs", "action", "reward"))
    ring.push_step(obs, action, reward, **arguments)


def episodes(k: int) -> list[dict[str, Any]]:
    """Episodes of unequal lengths for ``E`` columns: the last rows cut two columns."""
    found = []
    for i, length in enumerate((2, 4, 3, 5, 2)):
        found.append(
            {
                "obs": values(k + i, (length + 1, 3)),
                "action": values(k + i, (length, 2), np.float64),
                "reward": values(k + i, (length,), np.float64),
                "cost": values(k + i + 1, (length,)),
                "terminated": i % 2 == 0,
            }
        )
    return found


#: the write calls, in order: (name, call(ring, pin)); ``pin`` marks a caller's array as pinned
CALLS: list[tuple[str, Callable[[ReplayRing, Pin], None]]] = [
    (
        "host flags",
        lambda r, pin: push(r, 0, terminated=flags(1), final_obs=values(1, (E, 3))),
    ),
    (
        "pinned host data",  # float64 and int64 rows: cast by copy_, from the pinned array
        lambda r, pin: push(
            r,
            1,
            obs=pin(values(1, (E, 3), np.float64)),
            **({} if "aux" not in r.specs else {"aux": pin(values(1, (E,), np.int64))}),
            reward=pin(values(1, (E,), np.float32)),
            terminated=flags(0),
            final_obs=pin(values(2, (E, 3), np.float64)),
        ),
    ),
    (
        "pinned float32 rows",
        lambda r, pin: push(
            r,
            2,
            obs=pin(values(2, (E, 3))),
            **({} if "aux" not in r.specs else {"aux": pin(values(2, (E,), np.int32))}),
            truncated=flags(2),
            final_obs=values(3, (E, 3), np.float64),
        ),
    ),
    (
        "device flags, host reward and cost",
        lambda r, pin: push(
            r,
            3,
            device_flags=True,
            cost=pin(values(4, (E,), np.float64)),
            terminated=flags(1),
            final_obs=pin(values(4, (E, 3), np.float64)),
        ),
    ),
    (
        "device flags, pinned reward",
        lambda r, pin: push(
            r,
            4,
            device_flags=True,
            reward=pin(values(4, (E,), np.float64)),
            cost=values(5, (E,), np.float64),
            terminated=flags(0, 2),
            final_obs=values(5, (E, 3), np.float64),
        ),
    ),
    (
        "mixed flags",
        lambda r, pin: push(
            r, 5, terminated=torch.from_numpy(flags(2)), truncated=flags(), final_obs=None
        ),
    ),
    ("explicit is_first", lambda r, pin: push(r, 6, is_first=flags(1))),
    ("start_episodes_at_next_push", lambda r, pin: r.start_episodes_at_next_push(flags(0))),
    (
        "attach_final_obs",
        lambda r, pin: r.attach_final_obs(
            (r.head - 1) % r.capacity, values(7, (E, 3), np.float64), flags(0)
        ),
    ),
    (
        "attach_final_obs, pinned",
        lambda r, pin: r.attach_final_obs(
            (r.head - 2) % r.capacity, pin(values(8, (E, 3), np.float64)), flags(1, 2)
        ),
    ),
    ("extend_from_episodes", lambda r, pin: r.extend_from_episodes(episodes(9))),
    ("after the episodes", lambda r, pin: push(r, 20, terminated=flags(0, 1, 2))),
]


def written(ring: ReplayRing, log: CopyLog | None = None) -> dict[str, list]:
    """Run :data:`CALLS` on ``ring``; the copies of each call (none recorded: no ``log``)."""
    copies: dict[str, list] = {}
    for name, call in CALLS:
        if log is None:
            call(ring, lambda array: array)
            continue
        start = len(log.copies)
        call(ring, log.pin)
        copies[name] = log.copies[start:]
    return copies


def logged(ring: ReplayRing) -> tuple[CopyLog, dict[str, list]]:
    with record_copies() as log:
        copies = written(ring, log)
    return log, copies


# ---------------------------------------------------------------- the copies
@pytest.mark.parametrize("fields", [FLOAT32, BFLOAT16], ids=["float32", "bfloat16"])
def test_copies_to_a_cuda_stand_in_block_from_pinned_memory_only(fields):
    # on the old code extend_from_episodes decided for itself (non_blocking_copy of the
    # ring's device, False on the CPU) instead of taking the ring's decision: its bfloat16
    # action rows went over blocking where the ring's copies are non-blocking
    log, copies = logged(stand_in_ring(CAPACITY, E, fields, memory_budget=2**30))
    for name, made in copies.items():
        assert made, f"{name}: no copy of host data logged"
        wrong = misdecided(made, decision=True)
        assert not wrong, f"{name}: non_blocking should be (not pinned): {wrong}"
    assert log.copies == [c for made in copies.values() for c in made]


def test_every_copy_site_of_a_cuda_stand_in_is_reached_with_the_sources_it_may_get():
    """Where ``pageable`` is checked: pinned and pageable sources; elsewhere fresh buffers."""
    seen: set[tuple[str, str, bool]] = set()
    for fields in (FLOAT32, BFLOAT16):
        log, _ = logged(stand_in_ring(CAPACITY, E, fields, memory_budget=2**30))
        seen |= {(c.site, c.caller, c.pinned) for c in log.copies}
    checked = [  # (site, caller): its source may be a caller's pinned array
        ("_checks.py:copy_in", "device_writes.py:push"),
        ("device_writes.py:column", "device_writes.py:push"),
        ("indexing.py:store_final_observations", "ring.py:push_step"),
        ("indexing.py:store_final_observations", "ring.py:attach_final_obs"),
    ]
    fresh = [  # (site, caller): the ring's own buffer
        ("device_writes.py:push", "ring.py:push_step"),
        ("_checks.py:device_flags", "device_writes.py:push"),
        ("_checks.py:device_flags", "storage.py:start_episodes"),
        ("episodes.py:write_row", "episodes.py:extend_from_episodes"),
    ]
    # a copy site added to the package shows up here: list it, with the sources it may get
    expected = {(*s, True) for s in checked} | {(*s, False) for s in checked + fresh}
    assert seen == expected, (sorted(expected - seen), sorted(seen - expected))


@pytest.mark.parametrize("fields", [FLOAT32, BFLOAT16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("ring_kind", ["stand-in", "cpu-device", "cpu-host"])
def test_with_the_cpu_decision_every_copy_blocks(fields, ring_kind):
    if ring_kind == "stand-in":  # every site runs, with the CPU's decision (as on MPS)
        ring = stand_in_ring(CAPACITY, E, fields, decision=False, memory_budget=2**30)
    else:
        strategy = ring_kind.removeprefix("cpu-")
        ring = ReplayRing(CAPACITY, E, fields, "cpu", index_strategy=strategy)
    assert ring.non_blocking is False
    log, _ = logged(ring)
    if ring_kind == "stand-in":
        assert len(log.copies) > len(CALLS)
    wrong = misdecided(log.copies, decision=False)
    assert not wrong, wrong


def test_an_array_marked_pinned_keeps_its_address_to_itself():
    # CopyLog.pin kept the address range only: CALLS pass temporaries, freed after their call,
    # and numpy gave a later array of the same size (a caller's pageable reward column) the
    # same address, logged and copied as pinned (a copy_in of 12 bytes in the float32 run)
    with record_copies() as log:
        for k in range(50):
            log.pin(values(k, (E,)))  # a temporary, as in CALLS
            later = values(k, (E,))
            assert not log.is_pinned(torch.from_numpy(later)), k


@pytest.mark.parametrize("decision", [True, False], ids=["cuda-decision", "cpu-decision"])
def test_record_to_ring_copies_each_observation_as_the_ring_decides(decision):
    # RecordToRing.step copied the observations into ring.obs_slot with a plain copy_, which
    # blocks on CUDA whatever the ring decided: the host waited for the device at every step
    envs = SyncVectorEnv([partial(make_scripted, n) for n in (3, 4)])
    fields = space_fields(envs.single_observation_space, envs.single_action_space, None)
    ring = stand_in_ring(CAPACITY, 2, fields, decision=decision, memory_budget=2**30)
    recorder = RecordToRing(envs, ring)
    recorder.reset(seed=0)
    with record_copies() as log:
        for k in range(5):
            recorder.step(np.array([k % 2, 1 - k % 2]))
    recorder.close()
    observations = [c for c in log.copies if "recorder.py:step" in (c.site, c.caller)]
    assert len(observations) == 5, log.copies
    assert not misdecided(log.copies, decision), log.copies
    assert ring.total_steps == 5


# ---------------------------------------------------------------- the values
def contents(ring: ReplayRing) -> dict[str, torch.Tensor]:
    """The fields and every transition of the ring (``next_obs`` where valid, else 0)."""
    t, env = np.meshgrid(np.arange(ring.capacity), np.arange(E), indexing="ij")
    batch = ring.transitions_at(t.ravel(), env.ravel())
    found = {f"field.{name}": tensor.clone() for name, tensor in ring.fields.items()}
    found["next_obs"] = torch.where(batch.valid[:, None], batch.next_obs, 0.0)
    found["valid"] = batch.valid
    found["side_lost"] = torch.tensor(ring.side_lost)
    found["counters"] = torch.tensor([ring.head, ring.size, ring.total_steps])
    return found


@pytest.mark.parametrize("fields", [FLOAT32, BFLOAT16], ids=["float32", "bfloat16"])
def test_a_cuda_stand_in_stores_what_a_plain_cpu_ring_stores(fields):
    rings = {
        "cpu-host": ReplayRing(CAPACITY, E, fields, index_strategy="host"),
        "cpu-device": ReplayRing(CAPACITY, E, fields, index_strategy="device"),
        "stand-in": stand_in_ring(CAPACITY, E, fields, memory_budget=2**30),
        "stand-in, cpu decision": stand_in_ring(
            CAPACITY, E, fields, decision=False, memory_budget=2**30
        ),
    }
    for name, ring in rings.items():
        if name.startswith("stand-in"):
            logged(ring)  # pinned arrays marked, as in the tests above
        else:
            written(ring)
        ring.check_invariants()
    expected = contents(rings["cpu-host"])
    assert expected["valid"].any() and not expected["valid"].all()
    for name, ring in rings.items():
        found = contents(ring)
        for key, tensor in expected.items():
            assert torch.equal(found[key], tensor), (name, key)
    for name in ("stand-in", "stand-in, cpu decision"):  # the side store and tables too
        state, plain = rings[name].state_dict(), rings["cpu-device"].state_dict()
        assert state["meta"] == plain["meta"]
        for key, tensor in plain["tensors"].items():
            assert torch.equal(state["tensors"][key], tensor), (name, key)
