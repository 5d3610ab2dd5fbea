"""Which casts of numpy inputs the ring leaves to torch's ``copy_`` and which numpy makes.

Both index strategies must store the values numpy's assignment into the host index's rows
stores. ``as_tensor_like`` casts with numpy only where torch's cast differs or is missing
(float64 -> float16 rounds twice in torch, through float32; float16 -> float32/64 loses NaN
payloads; longdouble, uint16/32/64): every other cast is left to ``copy_``, without the extra
copy of the input a numpy cast makes (a float64 observation into a float32 ring, what MuJoCo
envs give, is the common case).
"""

import tracemalloc
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv

from gymcurric.replay import RecordToRing
from gymcurric.replay._checks import TORCH_CASTS, as_tensor_like
from tests.replay.ring_helpers import make

#: the ring's fields that numpy has, as (torch dtype, numpy dtype)
TARGETS = [
    (torch.bool, np.bool_),
    (torch.uint8, np.uint8),
    (torch.int8, np.int8),
    (torch.int16, np.int16),
    (torch.int32, np.int32),
    (torch.int64, np.int64),
    (torch.float16, np.float16),
    (torch.float32, np.float32),
    (torch.float64, np.float64),
]
#: a float64 tie of float16 that torch's cast through float32 rounds the other way
TIES = np.array([1 + 2**-11 + 2**-30, 2049 + 2**-20, -1 - 2**-11 - 2**-30])


def values(dtype, n=20_000, seed=0):
    """Random bit patterns of ``dtype`` (finite), its limits and values around float16's."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([True, False])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8).view(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        edges = [info.min, info.max, 0, 1, -1, 2049, 65504, 65519, 65520, 2**24 + 1, 2**53 + 1]
        return np.concatenate([bits, np.array([v for v in edges if info.min <= v <= info.max])])
    limit = min(70_000.0, float(np.finfo(dtype).max))
    near = rng.uniform(-limit, limit, n).astype(dtype)
    tiny = rng.uniform(-1e-4, 1e-4, n).astype(dtype)  # float16's subnormals
    return np.concatenate([bits[np.isfinite(bits)], near, tiny, [np.inf, -np.inf, 0.0, -0.0]])


def nans(dtype, shape, seed=0, quiet=False):
    """NaNs of ``dtype`` with random payloads and signs, quiet and signaling ones (or quiet)."""
    dtype = np.dtype(dtype)
    width, mantissa = dtype.itemsize * 8, np.finfo(dtype).nmant
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    payload = rng.integers(1, 2**mantissa, n, dtype=np.uint64).astype(uint)  # 0 would be inf
    if quiet:
        payload |= uint(1 << (mantissa - 1))
    sign = rng.integers(0, 2, n).astype(uint) << uint(width - 1)
    exponent = uint((2 ** (width - 1 - mantissa) - 1) << mantissa)
    return (payload | exponent | sign).view(dtype).reshape(shape)


def torch_cast(array, dtype):
    out = torch.empty(array.shape, dtype=dtype)
    out.copy_(torch.from_numpy(array))
    return out.numpy()


@pytest.mark.parametrize("source", sorted(TORCH_CASTS, key=lambda t: np.dtype(t).num))
def test_torch_casts_left_to_copy_store_what_numpy_casts_store(source):
    given = values(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow into the narrower dtypes
        for dtype, target in TARGETS:
            # as_tensor_like's test: bool only from bool, else numpy's same_kind
            same_kind = np.can_cast(source, target, "same_kind")
            taken = source is np.bool_ if target is np.bool_ else same_kind
            if source is target or not taken:
                continue
            if (source, target) == (np.float64, np.float16):  # the one numpy casts itself
                assert not np.array_equal(torch_cast(TIES, dtype), TIES.astype(target))
                continue
            got, want = torch_cast(given, dtype), given.astype(target)
            assert got.tobytes() == want.tobytes(), (source, dtype)  # -0.0 too (no NaN given)
            if np.dtype(target).kind == "f" and np.dtype(source).kind == "f":
                # a quiet NaN's payload is kept (or cut) as numpy does; a signaling NaN stays
                # a NaN (torch's float32 -> float16 sets its quiet bit, numpy's keeps it)
                quiet = nans(source, 4096, quiet=True)
                assert torch_cast(quiet, dtype).tobytes() == quiet.astype(target).tobytes()
                assert np.isnan(torch_cast(nans(source, 4096), dtype)).all()


def test_a_float64_array_for_a_float32_slot_is_cast_by_copy_not_copied_by_numpy():
    cpu = torch.device("cpu")
    obs = np.random.default_rng(0).standard_normal((2, 3))
    src = as_tensor_like("obs", obs, (2, 3), torch.float32, cpu)
    assert src.data_ptr() == obs.ctypes.data and src.dtype == torch.float64  # shares memory
    # the casts numpy makes: float64 -> float16 (torch rounds twice) and longdouble (torch
    # cannot read it)
    half = as_tensor_like("obs", TIES, (3,), torch.float16, cpu)
    assert np.array_equal(half.numpy(), TIES.astype(np.float16))
    long = as_tensor_like("obs", TIES.astype(np.longdouble), (3,), torch.float64, cpu)
    assert long.dtype == torch.float64 and torch.equal(long, torch.from_numpy(TIES))


def peak_bytes(call):
    """The most bytes traced by tracemalloc (numpy's buffers included) while ``call`` runs."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_float64_pushes_into_float32_fields_make_no_numpy_copy(device):
    # since 5397a8e every cast of a numpy input was numpy's astype on the device index: a
    # float64 push into a float32 ring allocated a float32 copy of its observations first
    E, D = 4, 4096
    fields = {"obs": ((D,), torch.float32)}
    ring = make(device, capacity=4, num_envs=E, fields=fields)
    obs = np.random.default_rng(0).standard_normal((E, D))
    step = (obs, np.zeros((E, 2)), np.zeros(E))
    flags = {"terminated": np.zeros(E, bool), "truncated": np.zeros(E, bool)}
    ring.push_step(*step, **flags)
    assert peak_bytes(lambda: ring.push_step(*step, **flags)) < E * D * 4 // 4
    assert torch.equal(ring["obs"][1].cpu(), torch.from_numpy(obs.astype(np.float32)))


class Float64Obs(gym.Env):
    """Float64 observations (as MuJoCo envs give), one preallocated array, never ending."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4096,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self):
        self.obs = np.full(4096, 0.5)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.obs, {}

    def step(self, action):
        return self.obs, 0.0, False, False, {}


def test_record_to_ring_copies_float64_observations_into_a_float32_ring_without_a_numpy_copy():
    E, D = 2, 4096
    envs = SyncVectorEnv([Float64Obs] * E, copy=False)
    ring = make("cpu", capacity=4, num_envs=E, fields={"obs": ((D,), torch.float32)},
                index_strategy="device")  # fmt: skip
    envs = RecordToRing(envs, ring)
    envs.reset(seed=0)
    actions = np.zeros((E, 2), np.float32)
    envs.step(actions)
    assert peak_bytes(lambda: envs.step(actions)) < E * D * 4 // 4
    assert torch.equal(ring["obs"][:2], torch.full((2, E, D), 0.5))


def test_a_float64_value_beyond_float16s_range_warns_on_both_index_strategies(device):
    # numpy casts float64 into float16 on both (docs/replay.md): its overflow warning too
    half = ((2,), torch.float16)
    ring = make(device, capacity=4, num_envs=1, fields={"obs": half, "aux": half})
    too_big = np.array([[1e6, 1.0]])
    flags = {"terminated": [False], "truncated": [False]}
    for given in (too_big, too_big.tolist()):
        with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
            ring.push_step(given, np.zeros((1, 2)), [0.0], aux=given, **flags)
    for name in ("obs", "aux"):
        assert ring[name][:2].cpu().tolist() == [[[float("inf"), 1.0]]] * 2


def test_float16_nans_are_stored_with_numpys_bits_on_both_index_strategies(device):
    # 2d16788 left float16 -> float32/float64 to torch's copy_, which keeps a NaN's payload in
    # its vectorised loop but not in the elements after it (each became 0x7fffffff) and sets
    # a signaling NaN's quiet bit: the device index stored other bits than the host index's
    # numpy assignment (6 values: torch's loop for the elements after the vectorised part)
    E = 2
    fields = {"obs": ((3,), torch.float32), "aux": ((3,), torch.float64)}
    ring = make(device, capacity=4, num_envs=E, fields=fields)
    given = nans(np.float16, (E, 3))
    ends = {"terminated": np.ones(E, bool), "truncated": np.zeros(E, bool)}
    ring.push_step(given, given[:, :2], [0.0, 0.0], aux=given, final_obs=given[::-1], **ends)
    # flags on the device: the device index casts reward and cost on their own
    flags = {k: torch.from_numpy(v).to(device) for k, v in ends.items()}
    ring.push_step(given, given[:, 1:], given[:, 0], cost=given[:, 2], aux=given, **flags)
    ring.attach_final_obs(1, given, [True, True])

    def bits(tensor):
        return tensor.cpu().numpy().tobytes()

    assert bits(ring["obs"][:2]) == np.stack([given, given]).astype(np.float32).tobytes()
    assert bits(ring["aux"][:2]) == np.stack([given, given]).astype(np.float64).tobytes()
    action = np.stack([given[:, :2], given[:, 1:]]).astype(np.float32)
    assert bits(ring["action"][:2]) == action.tobytes()
    assert bits(ring["reward"][1]) == given[:, 0].astype(np.float32).tobytes()
    assert bits(ring["cost"][1]) == given[:, 2].astype(np.float32).tobytes()
    final = np.stack([given[::-1], given]).astype(np.float32)
    assert bits(ring.transitions_at([0, 0, 1, 1], [0, 1, 0, 1]).next_obs) == final.tobytes()


WIDE = np.finfo(np.longdouble).nmant >= 63  # x87's 80-bit long double: int64 fits exactly


@pytest.mark.skipif(not WIDE, reason="numpy's longdouble is float64 here")
def test_bfloat16_actions_wider_than_float64_are_rounded_to_it_once(device):
    # extend_from_episodes read every action as float64 before rounding it to bfloat16: a
    # longdouble or an int64 beyond 2**53 was rounded twice, first to float64, where it became
    # a tie that went to even (1 + 2**-8 + 2**-60 gave 1.0, not 1 + 2**-7)
    one = np.longdouble(1)
    longdouble = np.array([[1 + one / 2**8 + one / 2**60, -(1 + one / 2**8 + one / 2**60)],
                           [np.longdouble("1e4000"), one / 2**200]])  # fmt: skip
    integers = np.array([[2**60 + 2**52 + 1, -(2**60 + 2**52 + 1)], [2**62 - 1, 3]], np.int64)
    fields = {"action": ((2,), torch.bfloat16)}
    ring = make(device, capacity=4, num_envs=2, fields=fields)
    eps = [{"obs": np.zeros((3, 3), np.float32), "action": a, "reward": np.zeros(2)}
           for a in (longdouble, integers)]  # fmt: skip
    assert ring.extend_from_episodes(eps).rows == 2
    expected = [
        [[1 + 2**-7, -1 - 2**-7], [2**60 + 2**53, -(2**60 + 2**53)]],
        [[float("inf"), 0.0], [2**62, 3]],
    ]
    assert ring["action"][:2].float().tolist() == expected
