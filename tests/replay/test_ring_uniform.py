"""The device index's uniform draw (``gymcurric/replay/uniform.py``) and device-path pushes.

Issue 24 fused the draw's index operations and the push's host-flag copies. The draws and the
written rings must stay bit-identical for a given generator state: ``DIGESTS`` were recorded
with the implementation before that change (commit 52cb3b6) on the rings of ``scenario``, which
go through every push path. ``cuda_graphs=True`` must draw exactly what the ordinary draw does:
on CPU its captured form runs eagerly, on CUDA (skipped without a GPU) it replays graphs.
"""

import pickle
import threading

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay import ReplayRing
from gymcurric.replay.opcount import count_ops
from gymcurric.replay.uniform import DrawBuffers, choose
from tests.replay.ring_helpers import digest

torch.set_num_threads(1)

FIELDS = {"obs": ((2, 3), torch.float32), "action": ((), torch.int64), "u": ((2,), torch.int16)}

#: seed -> digests of (the ring's state, its draws, the generator state after them), recorded
#: before the fused draw and push (commit 52cb3b6)
DIGESTS = {
    0: ("aa1cc7c7429a5c63", "ee5e9c1aac0c0d0a", "19111bd877b084d4"),
    1: ("ad54c80b2e678398", "cdbdfed07cc198da", "ddfa67b0867f679f"),
    2: ("3fd4e576df49b64e", "7e5a685ae9a9ade9", "bbd4b974ae3ce428"),
    3: ("9cc084097d86bfae", "b1c0e3d5e08c6ec6", "23d6bfffd59ed515"),
    4: ("a3463cce6c5bf1d9", "8ad07857170ed583", "86a6ddada5878873"),
    5: ("8f0838c18f60a4ed", "de4b1eea26c9c197", "fbfc70044088dc04"),
    6: ("900dff3a7649f899", "17bbc1a2772c15b9", "4b92e44506e8a9c0"),
    7: ("95793e746dfd6f68", "9551db9c002e4fbe", "a771a34acaf7855a"),
    8: ("7dccdccd02bf8a27", "566e2ca0dfb95226", "947d201c564cb2b7"),
    9: ("83d150d3e82d357d", "62b973851b7fab2d", "e54d51ccc9000754"),
    10: ("2c6c91d42a25a33b", "9e688be37feedcc1", "6669d4b02e21cccf"),
    11: ("7ea9156f269512ac", "fb779bff540209b3", "2df02882e50b6b4f"),
    12: ("fb38335c75663fcf", "18e92e08cc212d20", "6cc76b53c2bb7e4a"),
    13: ("94218e793c5890dc", "4490408ed52d73cc", "e03c6e11d29ab477"),
    14: ("85bc56dd69baf8ae", "d326682100b2326d", "fa06d4c60e575c94"),
    15: ("7c89ca891db4e9c1", "741fa79b93148642", "7499d7da6792b3f6"),
    16: ("193d54915f33fff2", "9d0b9bfb84af02b9", "55d8ee83c562b1a8"),
    17: ("b80648f263c63efa", "bd9f3eaffd87e1c6", "b17611377f5a1859"),
    18: ("a06ed272a51d248b", "03af9251e9f75bc6", "f5a746d885c29f62"),
    19: ("545d031fc329e387", "9c161e4ffd5b6c71", "c895914c611a77ed"),
    20: ("3368d64baa61383a", "a232d30c4c5cfbc5", "640c007614ce9a8d"),
    21: ("658ebcab7dcf381e", "82373c02cbbe2f33", "08bb0e76fd1ca052"),
    22: ("4136e1d375f40a4d", "934853625bbdd8c0", "415a82e5ddaeec6b"),
    23: ("e56bb74a781a64e1", "bf8d6e8f60a9fe35", "8105f67d1926a6f2"),
}


def scenario(seed, **options):
    """A device-index CPU ring written through every push path (host flags with host or tensor
    reward, tensor flags, mixed), with episode ends, side-store losses, explicit restarts and
    rows without a successor."""
    rng = np.random.default_rng(seed)
    C, E = int(rng.integers(2, 14)), int(rng.integers(1, 6))
    side = int(rng.integers(1, 5))
    ring = ReplayRing(
        C, E, FIELDS, index_strategy="device", side_capacity=side, seed=seed, **options
    )
    for k in range(int(rng.integers(2, 3 * C + 2))):
        term = rng.random(E) < 0.15
        trunc = (rng.random(E) < 0.1) & ~term
        first = rng.random(E) < 0.3 if k and rng.random() < 0.2 else None
        obs = rng.standard_normal((E, 2, 3)).astype(np.float32)
        reward = rng.standard_normal(E).astype(np.float32)
        cost = None if rng.random() < 0.5 else rng.random(E).astype(np.float32)
        final = rng.standard_normal((E, 2, 3)).astype(np.float32) if rng.random() < 0.7 else None
        flags = {"terminated": term, "truncated": trunc, "is_first": first}
        kind = k % 4  # host flags and reward, host flags, tensor flags, mixed flags
        if kind >= 1:
            reward = torch.from_numpy(reward)
            cost = None if cost is None else torch.from_numpy(cost)
        if kind == 2:
            flags = {n: None if v is None else torch.from_numpy(v) for n, v in flags.items()}
        if kind == 3:
            flags["truncated"] = torch.from_numpy(trunc)
        ring.push_step(
            obs if k % 5 else torch.from_numpy(obs),
            rng.integers(0, 9, E),
            reward,
            cost=cost,
            final_obs=final,
            u=rng.integers(-50, 50, (E, 2)).astype(np.int16),
            **flags,
        )
        if rng.random() < 0.1:
            obs = rng.standard_normal((E, 2, 3)).astype(np.float32)
            mask = rng.random(E) < 0.5
            ring.attach_final_obs((ring.head - 1) % C, obs, mask)
        if rng.random() < 0.1:
            ring.start_episodes_at_next_push(rng.random(E) < 0.5)
    return ring, rng


def parts(tr):
    return [*tr[:-1], *tr.extras.values()]


@pytest.mark.parametrize("seed", sorted(DIGESTS))
def test_pushes_and_draws_are_those_recorded_before_the_fused_draw(seed):
    ring, rng = scenario(seed)
    state = ring.state_dict()["tensors"]
    keys = sorted(k for k in state if k != "generator")
    trash = ("side.slot", "side.owner")  # their last entries take masked-out writes
    kept = [state[k][:-1] if k.startswith(trash) else state[k] for k in keys]
    gen = torch.Generator().manual_seed(seed)
    draws = []
    for batch, candidates in ((1, 1), (7, 3), (64, 8), (33, 1)):
        if ring.size >= 2:
            draws += parts(ring.sample_transitions(batch, gen, candidates=candidates))
        nxt = torch.from_numpy(rng.standard_normal((ring.num_envs, 2, 3)).astype(np.float32))
        draws += parts(ring.sample_transitions(batch, gen, candidates=candidates, next_obs=nxt))
    assert (digest(kept), digest(draws), digest([gen.get_state()])) == DIGESTS[seed]


def reference_choice(valid, batch, candidates):
    """The choice rule as first written (before the fused form): ``(chosen, valid out)``."""
    pool = batch * candidates
    positions = torch.arange(pool)
    first = torch.where(valid, positions, pool).view(candidates, batch).amin(0)
    last_valid = torch.where(valid, positions, -1).cummax(0).values
    before = last_valid[-batch:]
    fallback = torch.where(before >= 0, before, last_valid[-1:]).remainder_(pool)
    found = first < pool
    return torch.where(found, first, fallback), found | (last_valid[-1] >= 0)


def test_choice_matches_the_first_formulation_on_random_masks():
    """Every entry's chosen candidate (first valid, else the cyclic fallback) and its validity,
    over shapes and densities that make fallbacks, wrapped fallbacks and empty pools common."""
    rng = np.random.default_rng(0)
    wrapped = 0
    for _ in range(400):
        batch, candidates = int(rng.integers(1, 10)), int(rng.integers(1, 5))
        density = float(rng.choice([0.0, 0.05, 0.2, 0.5, 0.95, 1.0]))
        valid = torch.from_numpy(rng.random(batch * candidates) < density)
        chosen = choose(DrawBuffers(batch, candidates, torch.device("cpu")), valid)
        want, want_valid = reference_choice(valid, batch, candidates)
        assert torch.equal(chosen, want)
        assert torch.equal(valid[chosen], want_valid)
        own_last = (candidates - 1) * batch + torch.arange(batch)
        wrapped += int(((chosen > own_last) & want_valid).sum())
    assert wrapped > 20  # the cyclic case is exercised


def devices():
    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    return [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=cuda)]


@pytest.mark.parametrize("device", devices())
def test_cuda_graphs_draw_what_the_ordinary_draw_does(device):
    """Same pushes, generators seeded alike: equal draws and generator states, while the ring
    fills (eager), once full (graphs on CUDA, the captured form on CPU) as the oldest row moves,
    over several shapes, with eager next_obs draws in between."""
    fields = {"obs": ((4,), torch.float32), "action": ((2,), torch.float32)}
    fields["u"] = ((), torch.int32)
    rings = [
        ReplayRing(9, 3, fields, device, index_strategy="device", cuda_graphs=graphs)
        for graphs in (True, False)
    ]
    gens = [torch.Generator(device=device).manual_seed(1) for _ in rings]
    rng = np.random.default_rng(0)
    for k in range(40):
        term = rng.random(3) < 0.2
        obs, action = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
        final = rng.standard_normal((3, 4)).astype(np.float32)
        for ring in rings:
            ring.push_step(
                obs, action, np.full(3, float(k)), terminated=term,
                truncated=np.zeros(3, bool), final_obs=final, u=np.full(3, k, np.int32),
            )  # fmt: skip
        if rings[0].size < 2:
            continue
        pairs = list(zip(rings, gens, strict=True))
        for batch, candidates in ((5, 1), (16, 4), (5, 1)):
            a, b = (r.sample_transitions(batch, g, candidates=candidates) for r, g in pairs)
            assert all(torch.equal(x, y) for x, y in zip(parts(a), parts(b), strict=True)), k
            assert torch.equal(gens[0].get_state(), gens[1].get_state())
        if k % 7 == 0:
            nxt = torch.zeros(3, 4, device=device)
            a, b = (r.sample_transitions(8, g, next_obs=nxt) for r, g in pairs)
            assert all(torch.equal(x, y) for x, y in zip(parts(a), parts(b), strict=True)), k


def test_cuda_graph_draws_return_the_same_output_tensors():
    """A graphed draw returns its shape's static outputs (the next draw rewrites them), and its
    captured form neither allocates nor reads the device."""
    ring = scenario(3, cuda_graphs=True)[0]
    while not ring.full:
        zero_step(ring)
    gen = torch.Generator().manual_seed(0)
    first = ring.sample_transitions(32, gen)
    kept = first.t_index.clone()
    with count_ops(host_reads=True) as counted:
        second = ring.sample_transitions(32, gen)
    assert second.obs is first.obs and second.t_index is first.t_index
    assert counted.syncs == [] and not any("empty" in op for op in counted.ops), counted.ops
    assert not torch.equal(second.t_index, kept) or ring.size * ring.num_envs == 1
    other = ring.sample_transitions(16, gen)  # another shape: outputs of its own
    assert other.obs.data_ptr() != first.obs.data_ptr()


def test_cuda_graphs_need_the_device_index_and_survive_pickling():
    with pytest.raises(ConfigError, match=r"cuda_graphs.*device index"):
        ReplayRing(4, 2, FIELDS, cuda_graphs=True)  # the host index, CPU's default
    ring = ReplayRing(4, 2, FIELDS, index_strategy="device", cuda_graphs=True)
    assert pickle.loads(pickle.dumps(ring)).cuda_graphs is True


def zero_step(ring, **flags):
    E = ring.num_envs
    ring.push_step(
        np.zeros((E, 2, 3), np.float32), np.zeros(E, np.int64), np.zeros(E),
        terminated=np.zeros(E, bool), truncated=np.zeros(E, bool), u=np.zeros((E, 2), np.int16),
        **flags,
    )  # fmt: skip


def test_clear_and_load_never_write_rows_through_the_episode_bookkeeping():
    """After a device-path push the current episode ids are the newest ``episode_id`` row
    itself; load_state_dict() and clear() must point them back at storage of their own."""
    ring, _ = scenario(5)
    saved = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
    meta = ring.state_dict()["meta"]
    for _ in range(3):  # new episodes everywhere: the newest row's ids differ from the saved
        zero_step(ring, is_first=np.ones(ring.num_envs, bool))
    ring.load_state_dict({"meta": meta, "tensors": saved})
    assert torch.equal(ring["episode_id"], saved["field.episode_id"])
    zero_step(ring)
    episode_ids = ring["episode_id"].clone()
    ring.clear()
    assert torch.equal(ring["episode_id"], episode_ids)
    zero_step(ring)
    assert bool((ring["episode_id"][0] == 0).all())  # a first episode again after clear()


def test_draws_running_at_once_in_two_threads_do_not_share_intermediate_results(monkeypatch):
    """Each thread (and, on CUDA, each stream) draws into buffers of its own: a draw that runs
    while another thread's draw of the same shape is half done leaves that draw as it would be
    alone (a learner prefetching batches in a thread, with a generator of its own)."""
    from gymcurric.replay import uniform

    ring, _ = scenario(3)
    while not ring.full:
        zero_step(ring)
    shape = {"batch": 32, "candidates": 2}
    alone = [ring.sample_transitions(gen=torch.Generator().manual_seed(s), **shape) for s in (1, 2)]
    paused, resume = threading.Event(), threading.Event()
    real_choose = uniform.choose

    def choose_after_the_other_draw(buffers, valid):
        if threading.current_thread() is worker:  # validity computed, choice not made yet
            paused.set()
            assert resume.wait(30)
        return real_choose(buffers, valid)

    monkeypatch.setattr(uniform, "choose", choose_after_the_other_draw)
    out = []
    worker = threading.Thread(
        target=lambda: out.append(
            ring.sample_transitions(gen=torch.Generator().manual_seed(1), **shape)
        )
    )
    worker.start()
    assert paused.wait(30)
    other = ring.sample_transitions(gen=torch.Generator().manual_seed(2), **shape)
    resume.set()
    worker.join(30)
    for got, want in zip((out[0], other), alone, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(parts(got), parts(want), strict=True))
