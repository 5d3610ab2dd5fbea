"""Inputs that ``push_step`` and the final-observation writes accept but used to break a ring,
or that miss the pushes' quick identity tests and take the general checks.

Each test runs on both index strategies (and CUDA when present, see ``conftest.py``) and checks
that the ring stores what the same step given in the plain form stores, and stays usable: a
push that raised after writing part of a row (a dtype mismatch in the side store, an autograd
error) left ``head`` behind the written bookkeeping, and every later push broke the episode
continuity.
"""

import pickle

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError
from tests.replay.ring_helpers import gen, make

E = 2
FIELDS = {"aux": ((2,), torch.float16)}


def plain(k):
    """Step ``k`` as plain numpy arrays (env 0 terminates at odd steps)."""
    rng = np.random.default_rng(k)
    return {
        "obs": rng.standard_normal((E, 3)).astype(np.float32),
        "action": rng.standard_normal((E, 2)).astype(np.float32),
        "reward": rng.standard_normal(E).astype(np.float32),
        "terminated": np.array([k % 2 == 1, False]),
        "truncated": np.zeros(E, bool),
        "final_obs": rng.standard_normal((E, 3)).astype(np.float32),
        "aux": rng.standard_normal((E, 2)).astype(np.float16),
    }


def run(device, odd, steps=7):
    """Push ``steps`` steps, each through ``odd(step) -> step``; the ring (debug checks on)."""
    ring = make(device, capacity=4, num_envs=E, fields=FIELDS, debug_checks=True)
    for k in range(steps):
        step = odd(plain(k))
        ring.push_step(step.pop("obs"), step.pop("action"), step.pop("reward"), **step)
    return ring


def assert_same(ring, reference):
    assert (ring.head, ring.size, ring.total_steps) == (
        reference.head,
        reference.size,
        reference.total_steps,
    )
    for name, tensor in reference.fields.items():
        assert not ring[name].requires_grad, name
        assert torch.equal(ring[name], tensor), name
    draw = ring.sample_transitions(8, gen(ring.device), next_obs=np.ones((E, 3)))
    expected = reference.sample_transitions(8, gen(ring.device), next_obs=np.ones((E, 3)))
    for name in ("obs", "next_obs", "action", "reward"):
        got, want = getattr(draw, name), getattr(expected, name)
        assert got.dtype == want.dtype and torch.equal(got, want), name


def test_final_and_next_obs_of_another_float_dtype_are_cast(device):
    # float64 observations into a float32 ring (from_spaces makes float64 Boxes float32): the
    # device index's side-store write refused them after the row was written
    def float64(step):
        step["final_obs"] = step["final_obs"].astype(np.float64)
        return step

    ring = run(device, float64)
    assert_same(ring, run(device, lambda step: step))
    draw = ring.sample_transitions(8, gen(device), next_obs=np.ones((E, 3)))
    assert draw.next_obs.dtype == torch.float32
    ring.attach_final_obs(ring.head - 1, np.full((E, 3), 7.0), np.array([False, True]))
    ring.check_invariants()
    ring.push_step(**{n: v for n, v in plain(9).items()})
    ring.check_invariants()


def test_float64_values_of_float16_fields_are_stored_as_numpy_casts_them(device):
    # torch's float64 -> float16 cast rounds twice, through float32, where these values are
    # ties (1 + 2**-11, 2049): the device index (and the host index for lists) stored 1.0 and
    # 2048.0, the host index's numpy assignment of an array 1 + 2**-10 and 2050.0
    values = np.array([[1 + 2**-11 + 2**-30, 2049 + 2**-20, -1 - 2**-11 - 2**-30]])
    expected = torch.from_numpy(values.astype(np.float16)).view(torch.int16)
    assert not torch.equal(torch.from_numpy(values).half().view(torch.int16), expected)
    half = ((3,), torch.float16)
    ring = make(device, capacity=4, num_envs=1, fields={"obs": half, "action": half, "aux": half})
    for given in (values, values.tolist()):  # the quick path (arrays) and the general checks
        ring.push_step(given, given, [0.0], terminated=[True], truncated=[False],
                       final_obs=given, aux=given)  # fmt: skip
    for name in ("obs", "action", "aux"):
        assert torch.equal(ring[name][:2].cpu().view(torch.int16), expected.expand(2, 1, 3)), name
    zeros = torch.zeros(1, 3, dtype=torch.float16, device=device)
    ring.push_step(zeros, zeros, [0.0], terminated=[False], truncated=[False], aux=zeros)
    draw = ring.sample_transitions(8, gen(device))  # rows 0 and 1: next_obs from the side store
    assert draw.valid.all() and set(draw.t_index.tolist()) <= {0, 1}
    assert torch.equal(draw.next_obs.cpu().view(torch.int16), expected.expand(8, 3))


def test_tensors_that_require_grad_are_stored_as_data(device):
    # a policy's output pushed without detach() put the ring's tensors in an autograd graph
    # (every later push failed), or failed in the middle of a device-index write
    def with_grad(step):
        for name in ("obs", "action", "reward", "final_obs"):
            step[name] = torch.from_numpy(step[name]).to(device).requires_grad_(True)
        step["aux"] = torch.from_numpy(step["aux"]).to(device).requires_grad_(True)
        return step

    def as_tensors(step):
        for name in ("obs", "action", "reward", "final_obs", "aux"):
            step[name] = torch.from_numpy(step[name]).to(device)
        return step

    assert_same(run(device, with_grad), run(device, as_tensors))


def test_tensors_with_the_negative_bit_are_stored_as_their_values(device):
    # a dense float tensor may be a view with torch's negative bit (z.conj().imag, strided):
    # numpy() refuses it, so the host index raised a raw RuntimeError for reward and cost, for
    # final_obs after the side-store bookkeeping had changed, and for a draw's next_obs
    def negative_bit(value):
        value = torch.as_tensor(value, device=device)
        view = torch.complex(torch.zeros_like(value), -value).conj().imag
        assert view.is_neg() and torch.equal(view, value)
        return view

    def odd(step, convert):
        step["cost"] = np.abs(step["reward"])
        for name in ("obs", "action", "reward", "cost", "final_obs"):
            step[name] = convert(step[name])
        return step

    ring = run(device, lambda step: odd(step, negative_bit))
    reference = run(device, lambda step: odd(step, lambda v: torch.as_tensor(v, device=device)))
    assert_same(ring, reference)
    assert torch.equal(ring["cost"], reference["cost"])
    final, mask = np.full((E, 3), 7.0, np.float32), np.array([False, True])
    for one in (ring, reference):
        one.attach_final_obs(one.head - 1, negative_bit(final) if one is ring else final, mask)
    assert_same(ring, reference)
    nxt = np.arange(E * 3, dtype=np.float32).reshape(E, 3)
    draw = ring.sample_transitions(64, gen(device), next_obs=negative_bit(nxt))
    expected = reference.sample_transitions(64, gen(device), next_obs=nxt)
    assert torch.equal(draw.next_obs, expected.next_obs)
    ring.check_invariants()


@pytest.mark.parametrize("layout", ["negative_strides", "big_endian"])
def test_numpy_arrays_torch_cannot_wrap_are_copied(device, layout):
    # flipped arrays (arr[::-1], np.flip) and non-native byte order: numpy assignment took
    # them on the host index, torch.from_numpy raised ValueError on the device index (and for
    # final_obs on both)
    def odd(step):
        for name in ("obs", "action", "final_obs", "aux"):
            value = step[name]
            if layout == "negative_strides":
                step[name] = np.ascontiguousarray(value[::-1])[::-1]
            else:
                step[name] = value.astype(value.dtype.newbyteorder(">"))
        return step

    assert_same(run(device, odd), run(device, lambda step: step))


def test_numpy_arrays_of_an_equal_dtype_that_is_another_object_are_stored_the_same(device):
    # the quick tests of the pushes compare numpy dtypes by identity (RingStorage.kinds); an
    # unpickled array's dtype is equal but another object: it takes the general checks, at
    # steps where an episode ended (final_obs stored) and where none did (only checked)
    def unpickled(step):
        return {name: pickle.loads(pickle.dumps(value)) for name, value in step.items()}

    step = unpickled(plain(0))
    assert step["obs"].dtype == np.float32 and step["obs"].dtype is not np.dtype(np.float32)
    assert_same(run(device, unpickled), run(device, lambda step: step))


def refused_by_the_other_entry_points(device, convert):
    """The ``(argument, ConfigError)`` of each entry point besides ``push_step`` given
    ``convert(value)``; the ring is asserted unchanged (and with no episode start marked)."""
    ring = run(device, lambda step: step)
    before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
    obs, mask, rows = np.ones((E, 3), np.float32), np.array([False, True]), np.array([0, 1])
    newest = (ring.head - 1) % ring.capacity
    calls = [
        ("final_obs", lambda: ring.attach_final_obs(newest, convert(obs), mask)),
        ("mask", lambda: ring.attach_final_obs(newest, obs, convert(mask))),
        ("mask", lambda: ring.start_episodes_at_next_push(convert(mask))),
        ("next_obs", lambda: ring.sample_transitions(4, gen(device), next_obs=convert(obs))),
        ("next_obs", lambda: ring.transitions_at(rows, rows, next_obs=convert(obs))),
        ("t_index", lambda: ring.transitions_at(convert(rows), rows)),
        ("env_index", lambda: ring.transitions_at(rows, convert(rows))),
    ]
    errors = []
    for name, call in calls:
        with pytest.raises(ConfigError, match=r"expected a dense \(strided\) tensor") as refused:
            call()
        errors.append((name, refused.value))
    after = ring.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    # nor did they mark episode starts: the next push continues every env's episode
    row = ring.head
    ring.push_step(**{**plain(8), "terminated": np.zeros(E, bool)})
    assert not ring["is_first"][row].any()
    return errors


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_sparse_tensors_are_refused_by_the_other_entry_points(device, layout):
    # besides push_step (test_ring_push_paths.py): the final-observation write, the episode
    # starts and the draws' next_obs and indices took a sparse tensor on to a raw torch error
    def sparse(value):  # CSR needs two dimensions: the masks and indices are COO
        dense = torch.as_tensor(value, device=device)
        csr = layout == "sparse_csr" and dense.dim() == 2
        return dense.to_sparse_csr() if csr else dense.to_sparse()

    for name, err in refused_by_the_other_entry_points(device, sparse):
        assert err.key == name
        assert err.value.startswith("tensor of layout torch.sparse_")


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nested_tensors_are_refused_by_the_other_entry_points(device):
    # torch.nested.nested_tensor's default kind is strided: the layout tests let it through to
    # a raw RuntimeError where its shape was read (it has none)
    def nested(value):
        return torch.nested.nested_tensor(list(torch.as_tensor(value, device=device)))

    for name, err in refused_by_the_other_entry_points(device, nested):
        assert (err.key, err.value) == (name, "nested tensor")


def test_index_tensors_numpy_cannot_read_are_checked_by_their_values(device):
    # check_indices read a CPU index tensor with .numpy(): one with torch's negative bit was a
    # raw RuntimeError (the draw takes it as its values), one that requires grad too (it is
    # refused as float indices are)
    ring = run(device, lambda step: step)
    rows, envs = np.array([1, 2, 3]), np.array([0, 1, 1])

    def negative_bit(value):  # int tensors get the bit only from torch's own views
        view = torch._neg_view(-torch.as_tensor(value, device=device))
        assert view.is_neg() and torch.equal(view, torch.as_tensor(value, device=device))
        return view

    want = ring.transitions_at(rows, envs)
    for got in (
        ring.transitions_at(negative_bit(rows), envs),
        ring.transitions_at(rows, negative_bit(envs)),
    ):
        for name in ("obs", "action", "reward", "next_obs", "done", "valid", "t_index"):
            assert torch.equal(getattr(got, name), getattr(want, name)), name
    if device.type == "cpu":  # indices on a GPU are trusted (reading them would sync)
        floats = torch.tensor([1.0, 2.0], requires_grad=True)
        for call in (
            lambda: ring.transitions_at(floats, envs[:2]),
            lambda: ring.transitions_at(rows[:2], floats),
        ):
            with pytest.raises(ConfigError, match="expected integer indices"):
                call()


def test_values_numpy_cannot_read_are_refused_by_the_other_entry_points(device):
    # np.asarray (or a copy to the host) raised a raw ValueError on a ragged list,
    # RuntimeError on a list of tensors that require grad, NotImplementedError on a tensor
    # without data (meta): refused naming the parameter, the ring left as it was
    ring = run(device, lambda step: step)
    before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
    obs, mask, rows = np.ones((E, 3), np.float32), np.array([False, True]), np.array([0, 1])
    ragged_obs = [[1.0, 2.0, 3.0], [1.0]]
    grad_obs = list(torch.ones(E, 3, requires_grad=True))
    meta_mask = torch.ones(E, dtype=torch.bool, device="meta")
    newest = (ring.head - 1) % ring.capacity
    calls = [
        ("final_obs", "list of length 2", lambda: ring.attach_final_obs(newest, ragged_obs, mask)),
        ("final_obs", "list of length 2", lambda: ring.attach_final_obs(newest, grad_obs, mask)),
        ("mask", "list of length 2", lambda: ring.attach_final_obs(newest, obs, [True, [False]])),
        ("mask", "on meta", lambda: ring.attach_final_obs(newest, obs, meta_mask)),
        ("mask", "list of length 2", lambda: ring.start_episodes_at_next_push([[True], []])),
        ("mask", "on meta", lambda: ring.start_episodes_at_next_push(meta_mask)),
        (
            "next_obs",
            "list of length 2",
            lambda: ring.sample_transitions(4, gen(device), next_obs=grad_obs),
        ),
        (
            "next_obs",
            "list of length 2",
            lambda: ring.transitions_at(rows, rows, next_obs=ragged_obs),
        ),
        ("t_index", "list of length 2", lambda: ring.transitions_at([[0], [0, 1]], rows)),
        ("env_index", "list of length 2", lambda: ring.transitions_at(rows, [[0], [0, 1]])),
        (
            "t_index",
            "on meta",
            lambda: ring.transitions_at(torch.tensor(rows, device="meta"), rows),
        ),
    ]
    for name, received, call in calls:
        with pytest.raises(ConfigError, match="numpy can read") as refused:
            call()
        assert refused.value.key == name
        assert received in refused.value.value
    after = ring.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    row = ring.head  # nor did they mark episode starts
    ring.push_step(**{**plain(8), "terminated": np.zeros(E, bool)})
    assert not ring["is_first"][row].any()


def test_numpy_observations_for_a_field_numpy_lacks_are_refused_before_a_write(device):
    # numpy's dtype == takes None (no numpy dtype: bfloat16) for float64, so float64 arrays
    # took the quick path: the device index stored them, the host index's side store raised a
    # raw RuntimeError (index_copy_) after the row and the episode bookkeeping were written
    ring = make(device, capacity=4, num_envs=E, fields={"obs": ((3,), torch.bfloat16)})
    step = plain(1)
    del step["aux"]
    step["obs"] = step["final_obs"] = step["obs"].astype(np.float64)
    before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
    with pytest.raises(ConfigError, match="which numpy lacks") as refused:
        ring.push_step(step.pop("obs"), step.pop("action"), step.pop("reward"), **step)
    assert refused.value.key == "obs"
    assert ring.total_steps == 0
    after = ring.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    obs = torch.ones(E, 3, dtype=torch.bfloat16, device=device)
    with pytest.raises(ConfigError, match="which numpy lacks") as refused:
        ring.attach_final_obs(0, np.ones((E, 3)), np.ones(E, bool))
    assert refused.value.key == "final_obs"
    ring.push_step(obs, np.zeros((E, 2), np.float32), np.zeros(E), terminated=[True, False],
                   truncated=[False, False], final_obs=obs)  # fmt: skip
    assert ring["is_first"][0].all()
    ring.check_invariants()
