"""RingReplayBuffer.add: a bad argument is refused before anything changes.

Each argument is checked before the adapter's own side effects (the final observation it
attaches to the previous row when the stream breaks, the reset of SB3's ``dones`` mark) and
before the ring's push: a refused ``add`` raises a ConfigError naming the parameter and leaves
the buffer as it was, and the buffer then goes on exactly as a twin that never saw the call.
"""

import copy
import warnings

import numpy as np
import pytest
import torch
from gymnasium import spaces

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.replay import RingReplayBuffer
from tests.integrations.replay_states import assert_same

pytestmark = pytest.mark.sb3

N = 2  # envs
OBS = spaces.Box(-1e6, 1e6, (3,), np.float32)
ACT = spaces.Box(-1, 1, (2,), np.float32)
PARAMS = ("obs", "next_obs", "action", "reward", "done", "infos")
REFUSED_AT = 6  # the step the bad call replaces (after the ring wrapped: 4 rows)


def sparse(*shape):
    return torch.ones(shape).to_sparse()


def nested(*shape):
    """A nested tensor of the older, strided kind (no shape: reading one raised RuntimeError)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The PyTorch API of nested tensors")
        return torch.nested.nested_tensor(list(torch.ones(shape)))


def conjugate(*shape):
    """A complex view with torch's conjugate bit, which numpy cannot read."""
    return torch.ones(shape, dtype=torch.complex64).conj()


#: bad values per parameter, with a piece of the message that names what was received
BAD = {
    "obs": {
        "none": (None, "None"),
        "shape": (np.zeros((N, 4), np.float32), "shape (2, 4)"),
        "objects": (np.full((N, 3), None, dtype=object), "dtype object"),
        "strings": (np.full((N, 3), "a"), "dtype <U1"),
        "sparse": (sparse(N, 3), "layout torch.sparse_coo"),
        "nested": (nested(N, 3), "'nested tensor'"),
        "conjugate": (conjugate(N, 3), "array of dtype complex64"),
        "ragged": ([[0.0, 1.0, 2.0], [0.0]], "list of length 2"),
    },
    "action": {
        "none": (None, "None"),
        "shape": (np.zeros((N, 3), np.float32), "shape (2, 3)"),
        "objects": (np.full((N, 2), None, dtype=object), "dtype object"),
        "strings": (np.full((N, 2), "a"), "dtype <U1"),
        "sparse": (sparse(N, 2), "layout torch.sparse_coo"),
        "nested": (nested(N, 2), "'nested tensor'"),
        "conjugate": (conjugate(N, 2), "array of dtype complex64"),
        "ragged": ([[0.0, 1.0], [0.0]], "list of length 2"),
    },
    "reward": {
        "none": (None, "None"),
        "shape": (np.zeros(N + 1, np.float32), "shape (3,)"),
        "objects": (np.array([None, None]), "dtype object"),
        "strings": (np.array(["a", "b"]), "dtype <U1"),
        "sparse": (sparse(N), "layout torch.sparse_coo"),
        "nested": (nested(N), "'nested tensor'"),
        "conjugate": (conjugate(N), "array of dtype complex64"),
        "ragged": ([[1.0], []], "list of length 2"),
    },
    "done": {
        "none": (None, "None"),
        "shape": (np.zeros(N + 1, bool), "shape (3,)"),
        "objects": (np.array([None, None]), "dtype object"),
        "strings": (np.array(["a", "b"]), "dtype <U1"),
        "sparse": (sparse(N), "layout torch.sparse_coo"),
        "nested": (nested(N), "'nested tensor'"),
        "conjugate": (conjugate(N), "array of dtype complex64"),
        "ragged": ([[True], []], "list of length 2"),
    },
    "infos": {
        "none": (None, "None"),
        "shape": ([{}, {}, {}], "list of length 3"),  # one dict is broadcast, as by SB3
        "objects": ([None, None], "list of length 2"),
        "strings": ("ab", "'ab'"),
        "sparse": (sparse(N), "tensor of dtype torch.float32 and shape (2,)"),
        "nested": (nested(N), "nested tensor of dtype torch.float32 on cpu"),
        "conjugate": (conjugate(N), "tensor of dtype torch.complex64 and shape (2,)"),
        "ragged": ([{}, {"TimeLimit.truncated": np.ones(2, bool)}], "list of length 2"),
    },
}
BAD["next_obs"] = BAD["obs"]

#: where the bad call comes: the stream continues; an episode ends at it (its final observation
#: goes to the ring); the stream breaks in env 0 without an end (the adapter attaches the
#: previous next_obs to the previous row first); SB3 marked the newest row done (as
#: learn(reset_num_timesteps=True) does: attached in every env, and the mark reset)
SITUATIONS = ("continues", "episode_ends", "stream_breaks", "marked_done")


def good_steps(situation, count=REFUSED_AT + 3):
    """SB3-style add() arguments; at REFUSED_AT the situation's step (ends also at step 2)."""
    steps = []
    obs = np.zeros((N, 3), np.float32)
    for k in range(count):
        nxt = np.full((N, 3), k + 1, np.float32) + np.arange(N, dtype=np.float32)[:, None]
        done = np.array([k == 2, situation == "episode_ends" and k == REFUSED_AT])
        infos = [{"TimeLimit.truncated": bool(d and e == 1)} for e, d in enumerate(done)]
        next_obs = np.where(done[:, None], -100.0 - k, nxt).astype(np.float32)
        if situation == "stream_breaks" and k == REFUSED_AT:
            obs = obs.copy()
            obs[0] = 500.0  # env 0 was reset without an episode end
        action = np.full((N, 2), 0.1 * k, np.float32)
        reward = np.arange(N, dtype=np.float32) + k
        steps.append((obs, next_obs, action, reward, done, infos))
        obs = nxt
    return steps


def make(**kwargs):
    np.random.seed(0)  # noqa: NPY002 (the ring's generator is seeded from it)
    return RingReplayBuffer(4 * N, OBS, ACT, "cpu", N, **kwargs)


def snapshot(buf):
    """Everything the buffer holds: the ring's state dict and the adapter's own state."""
    return copy.deepcopy(
        {
            "ring": buf.ring.state_dict(),
            "dones": buf.dones,
            "next_obs": buf._next_np,
            "prev_done": np.array(buf._prev_done),
            "counters": (buf.pos, buf.full, buf.size(), buf.ring.total_steps, buf.ring.side_lost),
        }
    )


def feed(bufs, steps, situation):
    for k, args in enumerate(steps):
        if situation == "marked_done" and k == REFUSED_AT:
            for buf in bufs:  # SB3's learn(reset_num_timesteps=True) with optimize_memory_usage
                buf.dones[(buf.pos - 1) % buf.buffer_size] = True
        for buf in bufs:
            buf.add(*args)


def twins_before_the_refusal(situation):
    """``situation``'s steps and two buffers fed the steps before ``REFUSED_AT`` alike."""
    steps = good_steps(situation)
    buf, twin = make(), make()
    feed([buf, twin], steps[:REFUSED_AT], situation)
    if situation == "marked_done":
        for b in (buf, twin):
            b.dones[(b.pos - 1) % b.buffer_size] = True
    return steps, buf, twin


def assert_twins(buf, twin):
    assert_same(snapshot(buf), snapshot(twin))
    rows = np.repeat(np.arange(buf.size()), N)
    envs = np.tile(np.arange(N), buf.size())
    for got, want in (
        (buf.transitions_at(rows, envs), twin.transitions_at(rows, envs)),
        (buf.sample(64), twin.sample(64)),
    ):
        for name, g, w in zip(want._fields, got, want, strict=True):
            assert (g is None) == (w is None), name
            if w is not None:
                torch.testing.assert_close(g, w, rtol=0, atol=0, msg=name)
    buf.ring.check_invariants()


@pytest.mark.parametrize("situation", SITUATIONS)
@pytest.mark.parametrize("bad", sorted(BAD["obs"]))
@pytest.mark.parametrize("param", PARAMS)
def test_a_refused_add_leaves_the_buffer_as_it_was(param, bad, situation):
    value, received = BAD[param][bad]
    steps, buf, twin = twins_before_the_refusal(situation)
    before = snapshot(buf)
    args = list(steps[REFUSED_AT])
    args[PARAMS.index(param)] = value
    with pytest.raises(ConfigError) as info:
        buf.add(*args)
    assert info.value.key == param
    assert received in str(info.value), str(info.value)
    assert "RingReplayBuffer.add" in str(info.value)
    assert_same(snapshot(buf), before)
    # the good step and the ones after it: exactly as the twin that never saw the bad call
    feed([buf, twin], steps[REFUSED_AT:], "continues")
    assert_twins(buf, twin)


def test_float_actions_of_a_discrete_space_are_refused_before_anything_changes():
    np.random.seed(0)  # noqa: NPY002
    buf = RingReplayBuffer(4 * N, OBS, spaces.Discrete(3), "cpu", N)
    obs = np.zeros((N, 3), np.float32)
    buf.add(obs, obs + 1, np.array([0, 1]), np.zeros(N), np.zeros(N, bool), [{}, {}])
    before = snapshot(buf)
    broken = obs + 7  # a stream break: the adapter would attach a final observation first
    with pytest.raises(ConfigError, match="float64") as info:
        buf.add(broken, obs, np.array([0.5, 1.0]), np.zeros(N), np.zeros(N, bool), [{}, {}])
    assert info.value.key == "action"
    assert_same(snapshot(buf), before)


def test_other_forms_of_good_inputs_are_stored_as_numpy_float32_ones():
    """Lists, float64, dense tensors, negative strides, [n_envs] Discrete actions and obs."""
    steps = good_steps("episode_ends")
    buf, twin = make(), make()
    for k, (obs, next_obs, action, reward, done, infos) in enumerate(steps):
        twin.add(obs, next_obs, action, reward, done, infos)
        reversed_twice = np.ascontiguousarray(action[::-1])[::-1]  # negative strides
        buf.add(
            obs.tolist(),
            torch.from_numpy(next_obs),
            action.astype(np.float64) if k % 2 else reversed_twice,
            reward.astype(np.float64).reshape(N, 1),
            done.tolist(),
            tuple(infos),
        )
    assert_twins(buf, twin)
    space = spaces.Discrete(5)
    np.random.seed(0)  # noqa: NPY002
    one = RingReplayBuffer(4 * N, space, spaces.Discrete(3), "cpu", N)
    np.random.seed(0)  # noqa: NPY002
    other = RingReplayBuffer(4 * N, space, spaces.Discrete(3), "cpu", N)
    for k in range(6):
        obs, nxt = np.array([k, k + 1]) % 5, np.array([k + 1, k + 2]) % 5
        one.add(obs, nxt, np.array([1, 2]), np.ones(N, np.float32), np.zeros(N, bool), [{}, {}])
        other.add(obs.tolist(), nxt.reshape(N, 1), [[1], [2]], [1, 1], [0, 0], [{}, {}])
    assert_same(snapshot(one), snapshot(other))


@pytest.mark.parametrize("situation", SITUATIONS)
@pytest.mark.parametrize(
    "flag",
    [torch.ones(N), torch.ones(1, device="meta")],
    ids=["tensor_of_several_values", "meta_tensor"],
)
def test_a_timeout_flag_that_bool_cannot_read_is_refused(flag, situation):
    # infos[e]["TimeLimit.truncated"] is read with bool(): a tensor of several values (or of no
    # data) raised a raw RuntimeError; refused as other infos SB3 cannot read
    steps, buf, twin = twins_before_the_refusal(situation)
    before = snapshot(buf)
    args = list(steps[REFUSED_AT])
    args[5] = [{"TimeLimit.truncated": flag}, {}]
    with pytest.raises(ConfigError, match="expected a list of 2 dicts") as info:
        buf.add(*args)
    assert (info.value.key, info.value.value) == ("infos", "list of length 2")
    assert_same(snapshot(buf), before)
    feed([buf, twin], steps[REFUSED_AT:], "continues")
    assert_twins(buf, twin)
