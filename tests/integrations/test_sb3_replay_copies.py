"""RingReplayBuffer copies host data into a CUDA ring as the ring decides (the CUDA stand-in).

A buffer stored off the CPU keeps a mirror of the pending next observation on the ring's device
(``_next_dev``) and copies the host one into it at every ``add``. That copy must follow the
ring's decision as the ring's own writes do (``copy_in``): non-blocking where the ring's
copies are (CUDA: pageable memory is staged before the call returns, and a blocking copy would
synchronise the stream at every env step), blocking from pinned memory, and blocking wherever
the ring decided so (MPS, pytorch/pytorch#189690).

No GPU here: :func:`stand_in_buffer` is a buffer whose ring is ``copy_log.stand_in_ring`` (a
CPU ring that copies host data as a CUDA ring does, with CUDA's decision or the CPU's) and
which takes the adapter's off-CPU path (the mirror, actions handed over as numpy arrays).
``copy_log.record_copies`` logs every copy of host data; ``CopyLog.pin`` marks the buffer's
host array as pinned memory, as a view of a pinned staging tensor would be.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from gymnasium import spaces

import gymcurric.integrations.sb3.replay as replay_module
from gymcurric.integrations.sb3.replay import RingReplayBuffer
from tests.integrations.replay_states import assert_same
from tests.replay.copy_log import misdecided, record_copies, stand_in_ring

pytestmark = pytest.mark.sb3

N = 3  # envs
ROWS = 5  # rows per env: the stream wraps the ring
OBS = spaces.Box(-10, 10, (2,), np.float32)
ACT = spaces.Box(-1, 1, (2,), np.float32)
#: where the adapter copies the pending next observation (the site, or copy_in's caller)
SITE = "replay.py:add"


def stand_in_buffer(decision: bool | None) -> RingReplayBuffer:
    """A buffer on a CUDA stand-in ring (``decision``: the ring's), or a plain CPU one (None).

    The stand-in's ring is on the CPU, so the buffer is given the mirror that its constructor
    makes for a ring on any other device, and hands float32 actions over as numpy arrays.
    """
    np.random.seed(0)  # noqa: NPY002 (the ring's generator is seeded from it)
    with pytest.MonkeyPatch.context() as patch:
        if decision is not None:
            ring_class = functools.partial(stand_in_ring, decision=decision)
            patch.setattr(replay_module, "ReplayRing", ring_class)
        buf = RingReplayBuffer(ROWS * N, OBS, ACT, "cpu", N, memory_budget=2**30)
    if decision is not None:  # what the constructor does off the CPU
        assert buf._cpu_ring and buf._next_dev is None and buf.ring.non_blocking is decision
        buf._cpu_ring = False
        buf._next_dev = torch.zeros((N, *OBS.shape), dtype=buf.ring.specs["obs"].dtype)
    return buf


def stream(steps: int = 12):
    """``add`` arguments: terminations, truncations, and one break of the observation stream."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(N, 2)).astype(np.float32)
    for k in range(steps):
        nxt = rng.normal(size=(N, 2)).astype(np.float32)
        done = np.array([k % 4 == 3, k % 5 == 4, False])
        next_obs = nxt.copy()
        next_obs[done] = rng.normal(size=(int(done.sum()), 2))  # the terminal observations
        infos = [{"TimeLimit.truncated": e == 1} if done[e] else {} for e in range(N)]
        action = rng.uniform(-1, 1, size=(N, 2)).astype(np.float32)
        reward = rng.normal(size=N).astype(np.float32)
        yield obs, next_obs, action, reward, done, infos
        # at step 6 the envs were reset without an episode end (a new learn()): the next add
        # attaches the kept next observation as a final one and starts new episodes
        obs = rng.normal(size=(N, 2)).astype(np.float32) if k == 6 else nxt


@pytest.mark.parametrize("source", ["pageable", "pinned"])
@pytest.mark.parametrize("decision", [True, False], ids=["cuda-decision", "cpu-decision"])
def test_add_copies_the_pending_next_observation_as_the_ring_decides(decision, source):
    # add() copied the host next observation into its device mirror with a plain copy_, which
    # blocks on CUDA whatever the ring decided: the stream synchronised at every env step
    buf = stand_in_buffer(decision)
    steps = list(stream())
    with record_copies() as log:
        if source == "pinned":  # the host array as a view of pinned memory: blocking
            log.pin(buf._next_np)
        for args in steps:
            buf.add(*args)
    mirrored = [c for c in log.copies if SITE in (c.site, c.caller)]
    assert len(mirrored) == len(steps), log.copies
    assert all(c.pinned is (source == "pinned") for c in mirrored), mirrored
    assert not misdecided(log.copies, decision), log.copies
    sites = {(c.site, c.caller) for c in log.copies}  # the stream break reached the ring
    assert ("indexing.py:store_final_observations", "ring.py:attach_final_obs") in sites
    assert np.array_equal(buf._next_dev.numpy(), buf._next_np)


@pytest.mark.parametrize("decision", [True, False], ids=["cuda-decision", "cpu-decision"])
def test_a_stand_in_buffer_holds_and_returns_what_a_cpu_buffer_does(decision):
    plain, buf = stand_in_buffer(None), stand_in_buffer(decision)
    for args in stream():
        plain.add(*args)
        buf.add(*args)
    assert plain.full and buf.full
    assert bool((plain.ring["continue_"] == 0).any())  # episode ends stored
    state, expected = buf.ring.state_dict(), plain.ring.state_dict()
    for tensors in (state["tensors"], expected["tensors"]):
        # without the trash row of masked-out writes, which holds anything (the device index's)
        tensors["side.obs"] = tensors["side.obs"][:-1]
    assert_same(state, expected)
    assert_same(buf.dones, plain.dones)
    rows = np.repeat(np.arange(ROWS), N)
    envs = np.tile(np.arange(N), ROWS)
    assert_same(
        buf.transitions_at(rows, envs)._asdict(), plain.transitions_at(rows, envs)._asdict()
    )
    assert_same(buf._pending(), plain._pending())
