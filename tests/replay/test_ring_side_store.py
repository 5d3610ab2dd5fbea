"""The side-store write of pushes with ``final_obs`` (issue 24 item 2): results pinned, ops capped.

The write was fused from about 40 operations to about 20 (``tests/replay/test_ring_ops.py``
caps it). Rings must stay bit-identical: ``DIGESTS`` were recorded with the implementation
before that change (commit 2a54daa) on the rings of :func:`scenario`, which end many episodes
per push into small side stores (entries lost and dropped, ``attach_final_obs`` on new and old
rows) through every flag path, then draw transitions (with and without ``next_obs``),
sequences, every stored transition by ``transitions_at``, and go through save, load and more
pushes. The trash entries of ``side.slot`` and ``side.owner`` (where masked-out writes go; no
read depends on them) are left out of the state digests.
"""

import hashlib

import numpy as np
import pytest
import torch

from gymcurric.replay import ReplayRing
from tests.replay.ring_helpers import digest

torch.set_num_threads(1)

FIELDS = {"obs": ((2, 3), torch.float32), "action": ((), torch.int64)}

#: (index strategy, flags, cuda_graphs, seed) -> digests of the state, the draws and the state
#: after save, load and more pushes; recorded at commit 2a54daa
DIGESTS: dict[tuple[str, str, bool, int], tuple[str, str, str]] = {
    ("device", "numpy", False, 0): ("da551519054bbbf1", "5ca5b8aa4c96a308", "a07750190c870bc1"),
    ("device", "numpy", False, 1): ("1ef0430a0c0e976d", "c105fd3d5990f196", "7b2a1aed81159b0a"),
    ("device", "numpy", False, 2): ("b2571950f1a3598d", "2acd424a4c9a4b39", "89c088a21bf58a37"),
    ("device", "numpy", False, 3): ("af5a9a36da24a9e4", "13d8cd657c66bfe8", "2fbf46f38dde48dc"),
    ("device", "numpy", False, 4): ("198f0c085ba194cb", "b3e229f93f52ab63", "4b85623ad17fb73a"),
    ("device", "numpy", False, 5): ("7ee99d6350409426", "f16244dbfd7b854c", "dd9c453a2de22340"),
    ("device", "numpy", False, 6): ("204c289c747e9236", "0267959e622b58c9", "5b9747c8fc6ac405"),
    ("device", "numpy", False, 7): ("2221abf00d477e24", "6d5459bd170ba72b", "95b2fb135e55291f"),
    ("device", "numpy", False, 8): ("5a96cf564379e410", "4262793ff04774c8", "beb711da743e20bf"),
    ("device", "numpy", False, 9): ("4723ec8410f8000a", "28f04d87a5355ae9", "5a05832be22db857"),
    ("device", "numpy", False, 10): ("ff5e6246472a0bfa", "c7efa49342acb3ba", "7f5299f723359998"),
    ("device", "numpy", False, 11): ("4f7156a8d2880781", "713b3e464e92dc9d", "394ec59940305ccf"),
    ("device", "tensor", False, 0): ("da551519054bbbf1", "5ca5b8aa4c96a308", "a07750190c870bc1"),
    ("device", "tensor", False, 1): ("1ef0430a0c0e976d", "c105fd3d5990f196", "7b2a1aed81159b0a"),
    ("device", "tensor", False, 2): ("b2571950f1a3598d", "2acd424a4c9a4b39", "e504c2bca874eaa4"),
    ("device", "tensor", False, 3): ("e32bcf1b5df98b7a", "13d8cd657c66bfe8", "2fbf46f38dde48dc"),
    ("device", "tensor", False, 4): ("198f0c085ba194cb", "b3e229f93f52ab63", "4b85623ad17fb73a"),
    ("device", "tensor", False, 5): ("7ee99d6350409426", "f16244dbfd7b854c", "dd9c453a2de22340"),
    ("device", "tensor", False, 6): ("204c289c747e9236", "0267959e622b58c9", "5b9747c8fc6ac405"),
    ("device", "tensor", False, 7): ("2221abf00d477e24", "6d5459bd170ba72b", "95b2fb135e55291f"),
    ("device", "tensor", False, 8): ("9e3961c31a83cff5", "4262793ff04774c8", "3b334cf28e2cbd8f"),
    ("device", "tensor", False, 9): ("4723ec8410f8000a", "28f04d87a5355ae9", "5a05832be22db857"),
    ("device", "tensor", False, 10): ("ff5e6246472a0bfa", "c7efa49342acb3ba", "7f5299f723359998"),
    ("device", "tensor", False, 11): ("e0096a3c2b03baf0", "713b3e464e92dc9d", "41429025d579579d"),
    ("device", "mixed", True, 0): ("144a6bb8b4d9c9ec", "f2bc797eae3c2698", "2b5917ce389cdac4"),
    ("device", "mixed", True, 1): ("783d12e6e3decac7", "fe69704be3267faa", "54f5ddfcb8ff3e0d"),
    ("device", "mixed", True, 2): ("05b86a554fe54819", "7e658377cecbe106", "be605f06f217cf1b"),
    ("device", "mixed", True, 3): ("a942979fd7064a29", "d51ae75013cbd80e", "0eb2890055ad1ae1"),
    ("device", "mixed", True, 4): ("c712585116db7d26", "a281b5f07f1cdfbc", "3b92f2549ed10b3a"),
    ("device", "mixed", True, 5): ("bb9ccbb936dd07c4", "a1de8aafda140f86", "cbd5d15fcc02f657"),
    ("device", "mixed", True, 6): ("cf8362ea938157a3", "4c2eaa5e177629f7", "864834c1c8674e92"),
    ("device", "mixed", True, 7): ("a29132f8b0117324", "07aa1d56f2d6f33e", "45d137e388d513ee"),
    ("device", "mixed", True, 8): ("32a3e69c064abc56", "039295c855faa12e", "64b39daa143b34d2"),
    ("device", "mixed", True, 9): ("3e1b235325fbe1ec", "83b4fa74878f25b4", "7944c8b7d2fee660"),
    ("device", "mixed", True, 10): ("b7c5a357796dad79", "0fae44032d3488d5", "bf7a8cdad4226b80"),
    ("device", "mixed", True, 11): ("c18e01ee9bf2d6f5", "2ec32ad85d5b885d", "dae248796cbb3981"),
    ("host", "numpy", False, 0): ("b8404fe9d0f6df69", "7bf7374c56e18306", "faf8ce7ae56dffc0"),
    ("host", "numpy", False, 1): ("7c5eefc1ae6e315f", "a6cd1d9e0d0820ed", "61311cddbb3e1e01"),
    ("host", "numpy", False, 2): ("105a1e3a88bf58af", "1af39255677e8a81", "c530dbea79b8d0a9"),
    ("host", "numpy", False, 3): ("af5a9a36da24a9e4", "2b96e22f4891b4de", "414d9cb979f73cc1"),
    ("host", "numpy", False, 4): ("ad8a739498ae55f0", "16adbcd770f1b108", "aa3741c6d39abdb9"),
    ("host", "numpy", False, 5): ("a3e7e37f2ef49923", "0bc8db29b007f62b", "486863da0fd6d0dc"),
    ("host", "numpy", False, 6): ("f4728e68ff81a3d7", "95bd16c5912209e9", "f18a51ef9a600b36"),
    ("host", "numpy", False, 7): ("5d671c22e8703237", "7b5a123b84aaf17f", "c6eb2befe3189cf8"),
    ("host", "numpy", False, 8): ("198a967924fdacb6", "07bf8e6dc7286615", "a5f551b7202785bb"),
    ("host", "numpy", False, 9): ("9e5e8e580d7a308e", "c81c1c835d6b7185", "e1d768e61af29d03"),
    ("host", "numpy", False, 10): ("50427f3729ffdeb0", "2804993b2fcc1b41", "28fa109afbb3e6e7"),
    ("host", "numpy", False, 11): ("4f7156a8d2880781", "74273b54d580e1ab", "f0629fce9e3199a8"),
}


def pushes(ring, rng, count, flags_as):
    E, C = ring.num_envs, ring.capacity
    for _ in range(count):
        term = rng.random(E) < 0.35
        trunc = (rng.random(E) < 0.2) & ~term
        first = rng.random(E) < 0.3 if ring.total_steps and rng.random() < 0.15 else None
        final = rng.standard_normal((E, 2, 3)).astype(np.float32) if rng.random() < 0.8 else None
        flags = {"terminated": term, "truncated": trunc, "is_first": first}
        kind = flags_as if flags_as != "mixed" else ("numpy", "tensor")[int(rng.integers(2))]
        if kind == "tensor":
            flags = {n: None if v is None else torch.from_numpy(v) for n, v in flags.items()}
        ring.push_step(
            rng.standard_normal((E, 2, 3)).astype(np.float32),
            rng.integers(0, 9, E),
            rng.standard_normal(E).astype(np.float32),
            final_obs=None if final is None else torch.from_numpy(final),
            **flags,
        )
        if rng.random() < 0.15:  # the newest row or an older one
            row = (ring.head - 1 - int(rng.integers(0, ring.size))) % C
            obs = rng.standard_normal((E, 2, 3)).astype(np.float32)
            ring.attach_final_obs(row, obs, rng.random(E) < 0.6)
        if rng.random() < 0.05:
            ring.start_episodes_at_next_push(rng.random(E) < 0.5)


def scenario(index_strategy, flags_as, cuda_graphs, seed):
    rng = np.random.default_rng(seed)
    C, E = int(rng.integers(2, 12)), int(rng.integers(1, 7))
    side = int(rng.integers(1, 6))
    ring = ReplayRing(
        C,
        E,
        FIELDS,
        index_strategy=index_strategy,
        side_capacity=side,
        seed=seed,
        cuda_graphs=cuda_graphs,
    )
    pushes(ring, rng, int(rng.integers(2, 4 * C + 2)), flags_as)
    return ring, rng


def state_digest(ring):
    state = ring.state_dict()["tensors"]
    trash = ("side.slot", "side.owner")
    return digest(
        [state[k][:-1] if k in trash else state[k] for k in sorted(state) if k != "generator"]
        + [torch.tensor([ring.head, ring.size, ring.total_steps, ring.side_lost])]
    )


def draws(ring, rng, seed):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for batch, candidates in ((1, 1), (9, 3), (64, 8)):
        if ring.size >= 2:
            tr = ring.sample_transitions(batch, gen, candidates=candidates)
            out += [*tr[:-1], *tr.extras.values()]
        nxt = torch.from_numpy(rng.standard_normal((ring.num_envs, 2, 3)).astype(np.float32))
        tr = ring.sample_transitions(batch, gen, candidates=candidates, next_obs=nxt)
        out += [*tr[:-1], *tr.extras.values()]
    seq_len = int(rng.integers(1, ring.size + 1))
    out += list(ring.sample_sequences(5, seq_len, gen, return_indices=True).values())
    rows = (ring.oldest + torch.arange(ring.size)).remainder(ring.capacity)
    t_index = rows.repeat_interleave(ring.num_envs)
    env_index = torch.arange(ring.num_envs).repeat(ring.size)
    at = ring.transitions_at(t_index, env_index, next_obs=nxt)
    valid = at.valid
    out += [valid, at.next_obs[valid], at.obs, at.reward, at.done]
    out.append(gen.get_state())
    return digest(out)


def run(key, tmp_path):
    index_strategy, flags_as, cuda_graphs, seed = key
    ring, rng = scenario(*key)
    before = state_digest(ring)
    drawn = draws(ring, rng, seed)
    path = tmp_path / "ring.npz"
    ring.save(path)
    loaded = ReplayRing.load(path, index_strategy=index_strategy, cuda_graphs=cuda_graphs)
    assert state_digest(loaded) == state_digest(ring)
    state = np.random.default_rng(seed + 1000).bit_generator.state
    after = []
    for r in (ring, loaded):  # the same pushes into the ring and its loaded copy
        rng2 = np.random.default_rng()
        rng2.bit_generator.state = state
        pushes(r, rng2, int(rng2.integers(1, 2 * ring.capacity + 2)), flags_as)
        after.append(state_digest(r) + draws(r, rng2, seed))
    assert after[0] == after[1]
    return before, drawn, hashlib.sha256(after[0].encode()).hexdigest()[:16]


KEYS = [
    (strategy, flags_as, graphs, seed)
    for strategy, flags_as, graphs in (
        ("device", "numpy", False),
        ("device", "tensor", False),
        ("device", "mixed", True),
        ("host", "numpy", False),
    )
    for seed in range(12)
]


@pytest.mark.parametrize("key", KEYS, ids=lambda k: "-".join(map(str, k)))
def test_side_store_writes_are_those_recorded_before_the_fused_write(key, tmp_path):
    assert run(key, tmp_path) == DIGESTS[key]


@pytest.mark.parametrize("index_strategy", ["device", "host"])
def test_trash_entries_of_a_loaded_state_do_not_matter(index_strategy):
    """States hold anything in the trash entries (the write before issue 24's fused one left
    the last masked-out slot there); a loaded ring resets them and then writes as the ring it
    came from."""
    ring, rng = scenario(index_strategy, "numpy", False, 4)
    state = ring.state_dict()
    tensors = {k: v.clone() for k, v in state["tensors"].items()}
    tensors["side.slot"][-1] = ring.side_capacity  # what the former write left there
    tensors["side.owner"][-1] = ring.capacity * ring.num_envs - 1  # a step: in range
    copy = ReplayRing(
        ring.capacity,
        ring.num_envs,
        FIELDS,
        index_strategy=index_strategy,
        side_capacity=ring.side_capacity,
    )
    copy.load_state_dict({"meta": state["meta"], "tensors": tensors})
    loaded = copy.state_dict()["tensors"]
    assert int(loaded["side.slot"][-1]) == -1 and int(loaded["side.owner"][-1]) == -1
    seeded = np.random.default_rng(7).bit_generator.state
    for r in (ring, copy):
        rng2 = np.random.default_rng()
        rng2.bit_generator.state = seeded
        pushes(r, rng2, 3 * ring.capacity, "mixed" if index_strategy == "device" else "numpy")
    assert state_digest(copy) == state_digest(ring)
