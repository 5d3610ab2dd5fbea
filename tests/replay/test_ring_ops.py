"""The device index's operation counts and host syncs, counted on CPU and on the meta device.

``count_ops`` counts the aten operations a call dispatches and lists those that would make the
host wait for a GPU. The ceilings below are today's counts (issue 24): a change that adds
launches to a push or a draw fails here and must say why. A ring on the ``meta`` device has no
data at all, so any host read of it fails: pushes there prove that no value goes back to the
host.
"""

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay import ReplayRing
from gymcurric.replay import storage as storage_module
from gymcurric.replay.opcount import count_ops
from tests.replay.ring_helpers import push

torch.set_num_threads(1)

E = 16
FIELDS = {"obs": ((8, 8, 3), torch.uint8), "action": ((6,), torch.float32)}

#: kernels (not views or allocations) per call, device index. Before issue 24's fused draw and
#: push they were 9 (push) / 10 (push, host flags) / 49 / 34 (uniform draw) / 43 / 12.
#: device flags: obs, action, logical_not + stack (packed row), logical_or (episode ends),
#: is_first, episode add
PUSH_KERNELS = 7
#: host flags: obs, action, one host-to-device copy of the staged flags (none on CPU), stack
#: (or the copy of a packed row staged with them), is_first, episode add
PUSH_HOST_FLAGS_KERNELS = 6
#: views (dispatches without a kernel, host work on a GPU) of those pushes: the five row
#: selects (obs, action, packed, is_first, episode_id) and, with host flags, the lift of the
#: staged buffer, its one split and the float view (with the detach torch dispatches for it);
#: before issue 24's lean push, host flags took 15 (two slices, two dtype views, two reshapes
#: and an unbind cut the buffer)
PUSH_VIEWS = 5
PUSH_HOST_FLAGS_VIEWS = 9
ROW_CLEAR_KERNELS = 1  # a fill clearing the side-store slots of a row that held some
#: the side-store write of a push with final_obs where an episode ended (and of
#: attach_final_obs), either flags: 40 before issue 24's fused write (cumsum and masks, a
#: gather and 2 masks per table, 6 scalar wraps, a trash fill), now 22: cat + cumsum of the
#: positions, kept test (2), slot and its target (2), previous owner and its slot (2 takes),
#: held, lost owners' reset, flat steps, 3 writes with their 2 masks, the ended envs' entries,
#: the loss count (3: dropped, or, sum + add), the pointer
SIDE_STORE_WRITE_KERNELS = 22
PUSH_FINAL_OBS_KERNELS = 30  # device flags + a row clear + the masked write (was 48)
#: uniform draw, full ring (oldest > 0), after the first draw of its shape (which allocates its
#: buffers: 4 more): randint, next row, wrap, 2 gathers of the flags, validity and next-obs
#: row (4), the choice (5), the chosen indices, obs and next obs, packed row, action, t, env,
#: done, valid
SAMPLE_TRANSITIONS_KERNELS = 22
SAMPLE_TRANSITIONS_NEXT_OBS_KERNELS = 28
SAMPLE_SEQUENCES_KERNELS = 12


def meta_ring(monkeypatch, capacity=8):
    """A device-index ring on ``meta`` (torch has no meta generator: the ring gets a CPU one).

    ``meta`` stands in for CUDA, so its host-to-device copies are CUDA's non-blocking ones
    (``non_blocking_copy`` makes them blocking on every other device).
    """
    cpu_generator = torch.Generator
    with monkeypatch.context() as m:
        m.setattr(torch, "Generator", lambda device=None: cpu_generator())
        m.setattr(storage_module, "non_blocking_copy", lambda device: device.type == "meta")
        return ReplayRing(capacity, E, FIELDS, "meta", index_strategy="device", memory_budget=2**40)


def step(device):
    obs = torch.zeros(E, 8, 8, 3, dtype=torch.uint8, device=device)
    flags = torch.zeros(E, dtype=torch.bool, device=device)
    return obs, torch.zeros(E, 6, device=device), torch.zeros(E, device=device), flags


def filled_cpu_ring(rows=40):
    ring = ReplayRing(32, E, FIELDS, index_strategy="device")
    obs, action, reward, _ = step("cpu")
    for k in range(rows):
        done = (np.arange(E) + k) % 7 == 0
        ring.push_step(
            obs, action, reward, terminated=done, truncated=np.zeros(E, bool), final_obs=obs
        )
    return ring


def test_push_with_device_flags_never_reads_the_device(monkeypatch):
    ring = meta_ring(monkeypatch)
    obs, action, reward, flags = step("meta")
    ring.push_step(obs, action, reward, terminated=flags, truncated=flags)  # is_first: default
    for k in range(20):  # wraps around, with every optional argument
        with count_ops(host_reads=True) as counted:
            ring.push_step(
                obs if k % 2 else None,
                action,
                reward,
                cost=reward,
                is_first=flags if k % 3 else None,
                terminated=flags,
                truncated=flags,
                final_obs=obs if k % 4 == 0 else None,
            )
        assert counted.syncs == [] and counted.transfers == [], counted
    ring.start_episodes_at_next_push(flags)
    with count_ops(host_reads=True) as counted:
        ring.push_step(obs, action, reward, terminated=flags, truncated=flags)
    assert counted.syncs == [] and counted.transfers == []
    assert counted.kernels <= PUSH_KERNELS + ROW_CLEAR_KERNELS, counted.ops  # final_obs above


def test_push_with_host_flags_copies_them_to_the_device_once(monkeypatch):
    ring = meta_ring(monkeypatch)
    obs, action, reward, _ = step("meta")
    none = np.zeros(E, bool)
    for _ in range(3):
        with count_ops(host_reads=True) as counted:
            ring.push_step(obs, action, reward, terminated=none, truncated=none, is_first=None)
        assert counted.syncs == [], counted.syncs
        assert len(counted.transfers) == 1, counted.transfers  # the flags, non-blocking
        assert counted.kernels <= PUSH_HOST_FLAGS_KERNELS, counted.ops


@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
def test_push_of_the_benchmark_has_pinned_kernels_and_views(flags_as, monkeypatch):
    """``benchmarks/replay.py --device cuda``'s push (obs, action and reward on the device; the
    flags numpy arrays or device tensors), on a meta ring: exactly these kernels (the
    device's launches), no more views, one host-to-device copy with numpy flags."""
    ring = meta_ring(monkeypatch)
    obs, action, reward, flags = step("meta")
    if flags_as == "numpy":
        flags = np.zeros(E, bool)
    kernels, views = (
        (PUSH_HOST_FLAGS_KERNELS, PUSH_HOST_FLAGS_VIEWS)
        if flags_as == "numpy"
        else (PUSH_KERNELS, PUSH_VIEWS)
    )
    for _ in range(3):
        with count_ops(host_reads=True) as counted:
            ring.push_step(obs, action, reward, terminated=flags, truncated=flags)
        assert counted.syncs == [], counted.syncs
        assert len(counted.transfers) == (flags_as == "numpy"), counted.transfers
        assert counted.kernels == kernels, counted.ops
        assert counted.views <= views, counted.ops


@pytest.mark.parametrize("flags_as", ["tensor", "numpy"])
def test_push_kernels_and_no_syncs_on_cpu(flags_as):
    ring = filled_cpu_ring()
    obs, action, reward, flags = step("cpu")
    if flags_as == "numpy":
        flags = flags.numpy()
    # the filled ring's rows held side-store entries; host flags need no copy to a CPU ring
    push_kernels = ROW_CLEAR_KERNELS + (
        PUSH_KERNELS if flags_as == "tensor" else PUSH_HOST_FLAGS_KERNELS - 1
    )
    with count_ops(host_reads=flags_as == "tensor") as counted:
        ring.push_step(obs, action, reward, terminated=flags, truncated=flags)
    assert counted.syncs == []
    assert counted.kernels <= push_kernels, counted.ops
    with count_ops(host_reads=flags_as == "tensor") as counted:
        ring.push_step(obs, action, reward, terminated=flags, truncated=flags, final_obs=obs)
    assert counted.syncs == []
    assert counted.kernels <= (PUSH_FINAL_OBS_KERNELS if flags_as == "tensor" else push_kernels)


@pytest.mark.parametrize("flags_as", ["tensor", "numpy"])
def test_push_with_final_obs_where_episodes_end_kernels_and_no_syncs(flags_as, monkeypatch):
    """The side-store write, with numpy flags (written only when an episode ended) or device
    flags (always, masked): capped on CPU, and no host read of a meta-device ring."""
    ended = np.zeros(E, bool)
    ended[[2, 5, 11]] = True
    rings = [("cpu", filled_cpu_ring()), ("meta", meta_ring(monkeypatch))]
    for device, ring in rings:
        obs, action, reward, none = step(device)
        terminated = ended if flags_as == "numpy" else torch.from_numpy(ended).to(device)
        if flags_as == "numpy":
            none = np.zeros(E, bool)
        host_reads = device == "meta" or flags_as == "tensor"
        for _ in range(3):
            with count_ops(host_reads=host_reads) as counted:
                ring.push_step(
                    obs, action, reward, terminated=terminated, truncated=none, final_obs=obs
                )
            assert counted.syncs == [], counted.syncs
            # numpy flags: one copy to the device (none to a CPU ring)
            assert len(counted.transfers) == (flags_as == "numpy" and device == "meta")
            if device == "cpu":  # the filled ring's rows all held entries: a clear each
                ceiling = (
                    PUSH_FINAL_OBS_KERNELS
                    if flags_as == "tensor"  # host flags need no copy to a CPU ring: - 1
                    else PUSH_HOST_FLAGS_KERNELS - 1 + ROW_CLEAR_KERNELS + SIDE_STORE_WRITE_KERNELS
                )
                assert counted.kernels <= ceiling, counted.ops
        with count_ops(host_reads=True) as counted:  # the same write, for an older row
            ring.attach_final_obs(ring.head - 2, obs, ended)
        assert counted.syncs == [], counted.syncs
        assert counted.kernels <= SIDE_STORE_WRITE_KERNELS + (device == "meta"), counted.ops


def test_sampling_kernels_and_no_syncs_on_cpu():
    ring = filled_cpu_ring()
    gen = torch.Generator().manual_seed(0)
    obs = step("cpu")[0]
    cases = [
        (lambda: ring.sample_transitions(256, gen), SAMPLE_TRANSITIONS_KERNELS),
        (
            lambda: ring.sample_transitions(256, gen, next_obs=obs),
            SAMPLE_TRANSITIONS_NEXT_OBS_KERNELS,
        ),
        (lambda: ring.sample_sequences(16, 8, gen), SAMPLE_SEQUENCES_KERNELS),
    ]
    for draw, ceiling in cases:
        draw()  # the first draw of a shape allocates its buffers
        with count_ops(host_reads=True) as counted:
            draw()
        assert counted.syncs == [], counted.syncs
        assert counted.kernels <= ceiling, counted.ops


def test_device_flags_give_the_same_ring_as_host_flags():
    """Tensor flags (default is_first, explicit is_first, restarts) write what numpy flags do."""
    host = ReplayRing(6, 3, {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)})
    dev = ReplayRing(
        6,
        3,
        {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)},
        index_strategy="device",
    )
    final = torch.full((3, 3), 900.0)
    for k in range(15):
        term = np.array([k % 5 == 4, k % 3 == 2, False])
        trunc = np.array([False, False, k % 4 == 3])
        first = None if k % 6 else np.array([True, k == 0, True])
        push(host, k, term=term, trunc=trunc, final=final, is_first=first)
        dev.push_step(
            torch.full((3, 3), float(k)) + 100 * torch.arange(3.0).view(3, 1),
            torch.full((3, 2), -float(k)),
            torch.full((3,), float(k)),
            cost=torch.full((3,), k / 2),
            terminated=torch.from_numpy(term),
            truncated=torch.from_numpy(trunc),
            is_first=None if first is None else torch.from_numpy(first),
            final_obs=final,
        )
        if k == 9:
            for ring in (host, dev):
                ring.start_episodes_at_next_push(np.array([False, True, False]))
    for name, t in host.fields.items():
        assert torch.equal(dev[name], t), name
    state_h, state_d = host.state_dict()["tensors"], dev.state_dict()["tensors"]
    for key in ("state.cur_episode", "state.ended", "side.lost"):
        assert torch.equal(state_h[key], state_d[key]), key
    for key in ("side.slot", "side.owner"):
        assert torch.equal(state_h[key][:-1], state_d[key][:-1]), key  # [-1]: trash entries


def test_first_push_with_a_device_is_first_is_still_checked():
    ring = ReplayRing(4, 2, FIELDS, index_strategy="device")
    obs, action, reward, _ = step("cpu")
    flags = torch.zeros(2, dtype=torch.bool)
    with pytest.raises(ConfigError, match="first step of every env"):
        ring.push_step(
            obs[:2], action[:2], reward[:2], terminated=flags, truncated=flags, is_first=flags
        )
    assert ring.total_steps == 0
