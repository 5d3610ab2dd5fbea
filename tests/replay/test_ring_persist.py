"""ReplayRing persistence: state dicts, ``save``/``load`` files, pickling, malformed inputs.

Tests taking the ``device`` fixture run on CPU with each index strategy, and on CUDA when a GPU
is present (see ``conftest.py``).
"""

import json
import pickle

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.replay import ReplayRing
from gymcurric.replay.persist import generator_state_problem
from tests.replay.ring_helpers import filled, gen, make, push, strategy

torch.set_num_threads(1)


# ---------------------------------------------------------------- state and files


def test_state_dict_round_trip_continues_identically(device):
    ring = filled(device)
    ring.generator.manual_seed(11)
    ring.sample_sequences(3, 2, ring.generator)  # advance the generator
    state = ring.state_dict()
    clone = make(device, capacity=6, num_envs=2)
    clone.load_state_dict(state)
    for k in range(9, 12):
        push(ring, k, term=[k == 10, False], final=torch.ones(2, 3, device=device))
        push(clone, k, term=[k == 10, False], final=torch.ones(2, 3, device=device))
    a = ring.sample_sequences(5, 3, ring.generator, return_indices=True)
    b = clone.sample_sequences(5, 3, clone.generator, return_indices=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    ta = ring.sample_transitions(50, ring.generator)
    tb = clone.sample_transitions(50, clone.generator)
    assert torch.equal(ta.next_obs, tb.next_obs)
    with pytest.raises(DataError, match="'capacity' differs"):
        make(device, capacity=7, num_envs=2).load_state_dict(state)


def test_save_load_without_pickle(device, tmp_path):
    ring = filled(device)
    path = tmp_path / "ring.npz"
    ring.save(path)
    with np.load(path, allow_pickle=False) as npz:
        assert "field.obs" in npz.files and npz["field.obs"].shape == (6, 2, 3)
    back = ReplayRing.load(path, device, index_strategy=ring.index_strategy)
    assert back.index_strategy == ring.index_strategy
    assert (back.head, back.size, back.total_steps) == (ring.head, ring.size, ring.total_steps)
    for name, t in ring.fields.items():
        assert torch.equal(back[name], t), name
    assert torch.equal(back.generator.get_state(), ring.generator.get_state())
    g1, g2 = gen(device, 1), gen(device, 1)
    assert torch.equal(
        ring.sample_transitions(40, g1).next_obs, back.sample_transitions(40, g2).next_obs
    )
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"bad\.npz"):
        ReplayRing.load(tmp_path / "bad.npz")


def test_bfloat16_user_field_survives_save_load(tmp_path):
    ring = make("cpu", fields={"h": ((2,), torch.bfloat16)})
    push(ring, 0, h=torch.full((2, 2), 1.5, dtype=torch.bfloat16))
    ring.save(tmp_path / "r.npz")
    back = ReplayRing.load(tmp_path / "r.npz")
    assert back["h"].dtype == torch.bfloat16 and torch.equal(back["h"], ring["h"])


def test_pickle_round_trip(device):
    ring = filled(device)
    back = pickle.loads(pickle.dumps(ring))
    assert back.device == ring.device and torch.equal(back["obs"], ring["obs"])
    assert back.index_strategy == ring.index_strategy
    assert back.total_steps == ring.total_steps


def test_state_from_another_device_type_reseeds_the_generator():
    ring = filled("cpu")
    state = ring.state_dict()
    state["meta"] = dict(state["meta"], generator_device="cuda")
    state["tensors"] = dict(state["tensors"], generator=torch.zeros(16, dtype=torch.uint8))
    clone = make("cpu", capacity=6, num_envs=2, seed=5)
    clone.load_state_dict(state)
    assert torch.equal(clone["obs"], ring["obs"])
    assert torch.equal(clone.generator.get_state(), torch.Generator().manual_seed(0).get_state())


# ---------------------------------------------------------------- malformed files and states


def rewrite_meta(path, *, drop=(), arrays_update=None, **changes):
    """Rewrite the ``meta`` array (and optionally other arrays) of a saved ring file."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    meta.update(changes)
    for key in drop:
        del meta[key]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    arrays.update(arrays_update or {})
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.mark.parametrize("key", ["capacity", "num_envs", "side_capacity", "seed"])
def test_load_metadata_missing_a_key_names_file_and_key(tmp_path, key):
    path = tmp_path / "ring_meta.npz"
    filled("cpu").save(path)
    rewrite_meta(path, drop=[key])
    with pytest.raises(DataError, match=rf"ring_meta\.npz: malformed .*missing key '{key}'"):
        ReplayRing.load(path)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"capacity": 1}, r"'capacity' must be an int >= 2; got 1"),
        ({"num_envs": "2"}, r"'num_envs' must be an int >= 1; got '2'"),
        ({"seed": 1.5}, r"'seed' must be an int; got 1\.5"),
        ({"specs": {"obs": [[3], "float32"]}}, r"'specs' must be an object with 'obs' and"),
        ({"specs": {"obs": [[3], "float32"], "action": [2, "float32"]}}, r"specs\['action'\]"),
        ({"specs": {"obs": [[3], "float32"], "action": [[2], "nope"]}}, r"dtype; got 'nope'"),
        ({"head": 99}, r"inconsistent counters head=99"),
    ],
)
def test_load_other_malformed_metadata_names_file_and_key(tmp_path, changes, match):
    path = tmp_path / "ring_meta.npz"
    filled("cpu").save(path)
    rewrite_meta(path, **changes)
    with pytest.raises(DataError, match=rf"ring_meta\.npz: .*{match}"):
        ReplayRing.load(path)


def snapshot(ring):
    """Every tensor, counter, host-side flag, index table and the generator state, copied."""
    state = ring.state_dict()
    storage = ring._storage
    flags = {
        "row_has_side": storage.row_has_side,
        "current_episode": storage.current_episode,
        "episode_ended": storage.episode_ended,
    }
    if ring.index_strategy == "host":
        flags["next_rows"] = ring._index.next_rows
    return {
        "tensors": {k: v.detach().cpu().clone() for k, v in state["tensors"].items()},
        "counters": (ring.head, ring.size, ring.total_steps, ring.seed, ring.side_lost),
        # numpy with the host index, tensors on the ring's device with the device index
        "flags": {name: torch.as_tensor(v).cpu().clone().numpy() for name, v in flags.items()},
    }


def same_snapshot(a, b, *, exact_side_flag=True):
    """Equal snapshots; ``row_has_side`` may be skipped: writes leave it True for a row whose
    side entries were all dropped (a hint to look), load_state_dict recomputes it exactly."""
    flags = [n for n in a["flags"] if exact_side_flag or n != "row_has_side"]
    return (
        a["tensors"].keys() == b["tensors"].keys()
        and all(torch.equal(a["tensors"][k], b["tensors"][k]) for k in a["tensors"])
        and a["counters"] == b["counters"]
        and all(np.array_equal(a["flags"][n], b["flags"][n]) for n in flags)
    )


def other_ring(device):
    """A ring with the same layout as ``filled`` but other contents and generator state."""
    ring = make(device, capacity=6, num_envs=2, seed=3)
    for k in range(4):
        push(ring, 50 + k, term=[False, k == 1], final=torch.full((2, 3), 7.0, device=device))
    ring.sample_sequences(3, 2, ring.generator)
    return ring


def _bump(t, row, env):
    out = t.clone()
    out[row, env] += 5
    return out


def _invalid_generator_state(state):
    """A state of the generator's own size that no generator of its device has.

    All zeros is no CPU (Mersenne Twister) state; on CUDA, where any 16 bytes pass
    ``set_state``, a Philox offset that is not a multiple of 4.
    """
    if state.numel() == 16:  # CUDA: seed, offset
        return torch.tensor([0, 1], dtype=torch.int64).view(torch.uint8)
    return torch.zeros_like(state)


def test_a_cuda_generator_state_is_checked_on_every_machine():
    good = torch.tensor([123, 4096], dtype=torch.int64).view(torch.uint8)
    assert generator_state_problem(good, "cuda") is None
    assert "offset 1 " in generator_state_problem(_invalid_generator_state(good), "cuda")
    assert "offset -4 " in generator_state_problem(
        torch.tensor([1, -4], dtype=torch.int64).view(torch.uint8), "cuda"
    )
    assert "16 bytes" in generator_state_problem(good[:8], "cuda")
    assert generator_state_problem(torch.zeros(5056, dtype=torch.uint8), "cpu") is None


def _bad_tensor(name, value):
    def change(state):
        state["tensors"][name] = value(state["tensors"][name])

    return change


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda s: s["meta"].update(head=99), r"inconsistent counters head=99"),
        (lambda s: s["meta"].update(size=2), r"inconsistent counters .*size=2"),
        (lambda s: s["meta"].update(head=-1), r"meta 'head' must be an int >= 0; got -1"),
        (lambda s: s["meta"].update(total_steps=True), r"'total_steps' must be an int"),
        (lambda s: s["meta"].update(seed="x"), r"meta 'seed' must be an int; got 'x'"),
        (
            _bad_tensor("field.obs", lambda t: t[:, :, :2].clone()),
            r"tensor 'field\.obs' expected .*got \(\(6, 2, 2\)",
        ),
        (
            _bad_tensor("field.episode_id", lambda t: t.to(torch.int64)),
            r"tensor 'field\.episode_id' expected .*torch\.int32.*got .*torch\.int64",
        ),
        (lambda s: s["tensors"].pop("side.slot"), r"tensor 'side\.slot' expected .*got missing"),
        (lambda s: s["tensors"].pop("generator"), r"tensor 'generator' .*got missing"),
        (lambda s: s.pop("tensors"), r"state\['tensors'\] must be a mapping"),
        (
            _bad_tensor("side.slot", lambda t: t.clone().fill_(1000)),
            r"'side\.slot' has entries outside \[-1, 3\]",
        ),
        (
            _bad_tensor("generator", _invalid_generator_state),
            r"'generator' is not a valid generator state",
        ),
        (
            _bad_tensor("field.episode_id", lambda t: _bump(t, 2, 0)),
            r"invariant violated at env 0, step 8 \(row 2\): episode_id changed without is_first",
        ),
        (
            _bad_tensor("field.continue_", lambda t: t.clone().fill_(0.5)),
            r"invariant violated .*continue_ must be 0\.0 or 1\.0, got 0\.5",
        ),
        (lambda s: s["meta"].update(seed=2**70), r"meta 'seed' must fit a torch seed"),
        # other layouts than dense: shape and dtype fit, torch's copies into the ring did not
        # (a raw error after the tensors before it were restored)
        (
            _bad_tensor("field.obs", lambda t: t.to_sparse()),
            r"tensor 'field\.obs' is a tensor of layout torch\.sparse_coo; expected a dense "
            r"\(strided\) tensor \(\(6, 2, 3\), torch\.float32\)",
        ),
        pytest.param(
            _bad_tensor("field.continue_", lambda t: t.to_sparse_csr()),
            r"tensor 'field\.continue_' is a tensor of layout torch\.sparse_csr; expected a dense",
            marks=pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta"),
            id="sparse_csr continue_",
        ),
        (_bad_tensor("side.slot", lambda t: t.to_sparse()), r"'side\.slot' is a tensor of layout"),
        (_bad_tensor("generator", lambda t: t.to_sparse()), r"'generator' is a tensor of layout"),
        pytest.param(
            _bad_tensor("field.obs", lambda t: torch.nested.nested_tensor(list(t))),
            r"tensor 'field\.obs' is a nested tensor; expected a dense \(strided\) tensor",
            marks=pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors"),
            id="nested obs",
        ),
    ],
)
def test_refused_state_leaves_the_ring_unchanged(device, change, match):
    source = filled(device)
    state = source.state_dict()
    state = {"meta": dict(state["meta"]), "tensors": dict(state["tensors"])}
    change(state)
    ring = other_ring(device)
    before = snapshot(ring)
    assert not same_snapshot(before, snapshot(source))  # a partial write would show
    with pytest.raises(DataError, match=match):
        ring.load_state_dict(state)
    assert same_snapshot(snapshot(ring), before)
    ring.load_state_dict(source.state_dict())  # the ring still accepts a good state
    assert same_snapshot(snapshot(ring), snapshot(source), exact_side_flag=False)


# ---------------------------------------------------------------- save/load round trips


def test_save_load_round_trips_user_fields_and_side_store(device, tmp_path):
    fields = {
        "logp": ((), torch.float64),
        "h": ((2,), torch.bfloat16),
        "u": ((2,), torch.uint32),  # not (): torch's CPU index_select lacks 1-D uint32
        "z": ((2,), torch.complex64),
    }
    ring = make(device, capacity=6, num_envs=2, side_capacity=3, fields=fields)
    for k in range(9):
        extra = {
            "logp": np.full(2, k / 3),
            "h": torch.full((2, 2), k + 0.5, dtype=torch.bfloat16, device=device),
            "u": torch.full((2, 2), 4_000_000_000 + k, dtype=torch.uint32, device=device),
            "z": torch.full((2, 2), complex(k, -k), dtype=torch.complex64, device=device),
        }
        final = torch.full((2, 3), 900.0 + k, device=device)
        push(ring, k, term=[k % 3 == 2, k % 4 == 3], final=final, **extra)
    assert ring.side_lost > 0  # the side store wrapped: its pointer and loss count matter
    ring.save(tmp_path / "r.npz")
    back = ReplayRing.load(tmp_path / "r.npz", device, **strategy())
    assert same_snapshot(snapshot(back), snapshot(ring), exact_side_flag=False)
    has_side = (ring._storage.side_slot >= 0).any(dim=1).cpu().numpy()
    assert np.array_equal(back._storage.row_has_side, has_side)
    assert (ring._storage.row_has_side >= has_side).all()
    assert back.user_fields == ring.user_fields and back.specs == ring.specs
    a = ring.sample_transitions(60, gen(device, 2))
    b = back.sample_transitions(60, gen(device, 2))
    assert torch.equal(a.next_obs, b.next_obs) and torch.equal(a.done, b.done)
    assert all(torch.equal(a.extras[k], b.extras[k]) for k in fields)


def test_load_reads_files_bitcast_to_bytes_by_earlier_versions(tmp_path):
    ring = make("cpu", fields={"u": ((1,), torch.uint32)})
    push(ring, 0, u=torch.full((2, 1), 3_000_000_000, dtype=torch.uint32))
    ring.save(tmp_path / "r.npz")
    old = ring["u"].view(torch.uint8).numpy()  # how save() stored 4-byte dtypes numpy lacks
    rewrite_meta(tmp_path / "r.npz", arrays_update={"field.u": old})
    assert torch.equal(ReplayRing.load(tmp_path / "r.npz")["u"], ring["u"])


def test_load_a_file_saved_from_another_device_type(tmp_path):
    ring = filled("cpu")
    ring.sample_sequences(3, 2, ring.generator)
    path = tmp_path / "from_cuda.npz"
    ring.save(path)
    # as a CUDA ring writes it: a 16-byte Philox state instead of the CPU generator's
    rewrite_meta(path, generator_device="cuda", arrays_update={"generator": np.zeros(16, np.uint8)})
    back = ReplayRing.load(path, "cpu")
    assert all(torch.equal(back[n], t) for n, t in ring.fields.items())
    assert (back.head, back.size, back.total_steps) == (ring.head, ring.size, ring.total_steps)
    assert torch.equal(back.generator.get_state(), torch.Generator().manual_seed(0).get_state())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize(("src", "dst"), [("cpu", "cuda"), ("cuda", "cpu")])
def test_save_on_one_device_load_on_the_other(tmp_path, src, dst):
    ring = filled(src)
    ring.save(tmp_path / "r.npz")
    back = ReplayRing.load(tmp_path / "r.npz", dst)
    assert back.device.type == dst
    assert all(torch.equal(back[n].cpu(), t.cpu()) for n, t in ring.fields.items())
    assert torch.equal(back._storage.side_observations.cpu(), ring._storage.side_observations.cpu())
    back.sample_transitions(8, back.generator)


def test_load_refuses_to_override_saved_layout_keywords(tmp_path):
    filled("cpu").save(tmp_path / "r.npz")
    for key, value in (("seed", 3), ("side_capacity", 4), ("capacity", 9)):
        with pytest.raises(ConfigError, match=rf"'{key}'.*cannot be overridden"):
            ReplayRing.load(tmp_path / "r.npz", **{key: value})
    assert ReplayRing.load(tmp_path / "r.npz", memory_budget=10**9).size == filled("cpu").size


def test_unpickling_a_malformed_state_is_a_data_error():
    ring = filled("cpu")
    state = ring.__getstate__()
    no_meta = {k: v for k, v in state.items() if k != "meta"}
    no_capacity = {**state, "meta": {k: v for k, v in state["meta"].items() if k != "capacity"}}
    for broken in (no_meta, no_capacity):
        fresh = ReplayRing.__new__(ReplayRing)
        with pytest.raises(DataError, match="malformed pickled ReplayRing state"):
            fresh.__setstate__(broken)
    back = pickle.loads(pickle.dumps(ring))
    assert torch.equal(back["obs"], ring["obs"])


def test_unpickling_a_state_with_a_sparse_tensor_is_a_data_error():
    # a pickled ring whose state holds a sparse tensor (shape and dtype fit): refused, as a
    # damaged file is, rather than a raw error from torch's copy into the new ring
    state = filled("cpu").__getstate__()
    state["tensors"] = {**state["tensors"], "side.obs": state["tensors"]["side.obs"].to_sparse()}
    fresh = ReplayRing.__new__(ReplayRing)
    with pytest.raises(DataError, match=r"'side\.obs' is a tensor of layout torch\.sparse_coo"):
        fresh.__setstate__(state)


# ---------------------------------------------------------------- damaged files on disk


def _damage_empty(path):
    path.write_bytes(b"")


def _damage_truncate(keep):
    def damage(path):
        raw = path.read_bytes()
        path.write_bytes(raw[: int(len(raw) * keep)])

    return damage


def _damage_garbage(path):
    path.write_bytes(b"\x00garbage\xff" * 40)


def _damage_npy(path):
    with open(path, "wb") as fh:
        np.save(fh, np.zeros(3))


def _damage_member(path):
    raw = bytearray(path.read_bytes())
    at = raw.index(b"field.obs.npy") + 150  # inside that member's data: its CRC fails
    raw[at : at + 8] = b"\xff" * 8
    path.write_bytes(bytes(raw))


def _replace_member(name, value):
    def damage(path):
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays[name] = value
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)

    return damage


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (_damage_empty, r"not a ReplayRing file: the file is empty \(0 bytes\)"),
        (_damage_truncate(0.3), r"not a ReplayRing file: the file is damaged or truncated"),
        (_damage_truncate(0.97), r"not a ReplayRing file: the file is damaged or truncated"),
        (_damage_garbage, r"not a ReplayRing file: the file is not an \.npz \(zip\) archive"),
        (_damage_npy, r"not a ReplayRing file: the file is not an \.npz \(zip\) archive"),
        (
            _damage_member,
            r"not a ReplayRing file: member 'field\.obs' is damaged \(BadZipFile: Bad CRC",
        ),
        (
            _replace_member("field.obs", np.array([None] * 36, dtype=object).reshape(6, 2, 3)),
            r"member 'field\.obs' holds Python objects, which are refused \(allow_pickle=False\)",
        ),
        (
            _replace_member("meta", np.array("{}")),
            r"malformed ReplayRing metadata \('meta' must be the JSON text as uint8 bytes",
        ),
        (
            _replace_member("field.episode_id", np.full((6, 2), 3, np.int32)),
            r"invariant violated at env 0",
        ),
    ],
)
def test_damaged_files_are_data_errors_naming_the_file(tmp_path, damage, match):
    path = tmp_path / "ring.npz"
    filled("cpu").save(path)
    damage(path)
    with pytest.raises(DataError, match=rf"ring\.npz: .*{match}") as info:
        ReplayRing.load(path)
    assert str(path) in str(info.value)


def test_load_metadata_seed_outside_64_bits_is_a_data_error(tmp_path):
    path = tmp_path / "ring_meta.npz"
    filled("cpu").save(path)
    rewrite_meta(path, seed=2**70)
    with pytest.raises(
        DataError, match=r"ring_meta\.npz: malformed .*'seed' must fit a torch seed"
    ):
        ReplayRing.load(path)


def test_a_file_of_the_other_byte_order_loads(tmp_path):
    ring = filled("cpu")
    path = tmp_path / "ring.npz"
    ring.save(path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    swapped = {
        k: v.astype(v.dtype.newbyteorder(">" if v.dtype.byteorder != ">" else "<"))
        for k, v in arrays.items()
    }
    with open(path, "wb") as fh:
        np.savez(fh, **swapped)
    back = ReplayRing.load(path)
    assert torch.equal(back["obs"], ring["obs"]) and torch.equal(
        back["episode_id"], ring["episode_id"]
    )


def test_a_state_whose_tensors_require_grad_is_loaded_as_its_values(device):
    # restore copied each state tensor into the ring's: one that requires grad put the ring's
    # tensors in its autograd graph, and a later copy raised a raw RuntimeError ('a leaf
    # Variable that requires grad ...') half-way through the load, the ring partly overwritten
    ring = filled(device)
    state = ring.state_dict()
    graded = {
        k: v.clone().requires_grad_(True) if v.is_floating_point() else v
        for k, v in state["tensors"].items()
    }
    clone, plain = other_ring(device), other_ring(device)
    clone.load_state_dict({**state, "tensors": graded})
    plain.load_state_dict(state)
    assert same_snapshot(snapshot(clone), snapshot(plain))
    assert not any(t.requires_grad for t in clone.state_dict()["tensors"].values())
    for one in (clone, plain):
        push(one, 20, term=[True, False], final=torch.ones(2, 3, device=device))
    assert same_snapshot(snapshot(clone), snapshot(plain))
