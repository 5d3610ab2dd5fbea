"""RingReplayBuffer.add takes what SB3's ReplayBuffer.add takes, and keeps nothing of the caller's.

- ``infos`` are read as SB3 reads them: only with ``handle_timeout_termination``, as any iterable
  of dicts, one per env or one for all (SB3's buffer broadcasts it). Without timeout handling
  they are not read at all.
- The ``done`` array is copied: a caller that reuses or changes its array after ``add`` does not
  change the episode starts of the next step.
- The stream check compares the observation with the previous step's next observation; NaNs at
  the same places are the same observation (no stream break, no side-store slot, no new episode).
- Float tensors with torch's negative bit (views numpy cannot read) and tensors that require
  grad are stored as their values, as the ring's pushes store them.
"""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from gymcurric.integrations.sb3.replay import RingReplayBuffer
from tests.integrations.replay_states import assert_same

pytestmark = pytest.mark.sb3

N = 2  # envs
OBS = spaces.Box(-1e6, 1e6, (3,), np.float32)
ACT = spaces.Box(-1, 1, (2,), np.float32)


def make(cls=RingReplayBuffer, obs_space=OBS, **kwargs):
    np.random.seed(0)  # noqa: NPY002 (the ring's generator is seeded from it)
    return cls(16 * N, obs_space, ACT, "cpu", N, **kwargs)


def steps(count=9, nan_at=None, dtype=np.float32):
    """SB3-style add() arguments; both envs end at step 3 (env 0 by a timeout)."""
    out = []
    obs = np.zeros((N, 3), dtype)
    for k in range(count):
        nxt = np.full((N, 3), k + 1, dtype) + np.arange(N, dtype=dtype)[:, None]
        if nan_at is not None:
            nxt[:, nan_at] = np.nan
        done = np.array([k == 3, k == 3])
        infos = [{"TimeLimit.truncated": bool(d and e == 0)} for e, d in enumerate(done)]
        action = np.full((N, 2), 0.1 * k, np.float32)
        out.append((obs, nxt, action, np.arange(N, dtype=np.float32) + k, done, infos))
        obs = nxt
    return out


def assert_same_buffers(buf, twin):
    assert_same(buf.ring.state_dict(), twin.ring.state_dict())
    np.testing.assert_array_equal(buf._prev_done, twin._prev_done)
    rows = np.repeat(np.arange(buf.size()), N)
    envs = np.tile(np.arange(N), buf.size())
    got, want = buf.transitions_at(rows, envs), twin.transitions_at(rows, envs)
    for name, g, w in zip(want._fields, got, want, strict=True):
        assert (g is None) == (w is None), name
        if w is not None:
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True, msg=name)
    buf.ring.check_invariants()


INFOS_WITHOUT_TIMEOUTS = {
    "none": None,
    "empty": [],
    "dict": {},
    "one": [{}],
    "too_many": [{}, {}, {}],
}


@pytest.mark.parametrize("form", sorted(INFOS_WITHOUT_TIMEOUTS))
def test_infos_are_not_read_without_timeout_handling_as_by_sb3(form):
    value = INFOS_WITHOUT_TIMEOUTS[form]
    buf, twin = make(handle_timeout_termination=False), make(handle_timeout_termination=False)
    sb3 = make(ReplayBuffer, handle_timeout_termination=False)
    for obs, nxt, action, reward, done, infos in steps():
        sb3.add(obs, nxt, action, reward, done, value)  # SB3 takes it
        buf.add(obs, nxt, action, reward, done, value)
        twin.add(obs, nxt, action, reward, done, infos)
    assert_same_buffers(buf, twin)


@pytest.mark.parametrize("form", ["one_for_all", "object_array", "generator"])
def test_infos_with_timeout_handling_take_the_forms_sb3_takes(form):
    """One dict for all envs is broadcast (SB3 assigns it to its [n_envs] timeouts row)."""
    buf, twin, sb3 = make(), make(), make(ReplayBuffer)
    for obs, nxt, action, reward, done, infos in steps():
        if form == "one_for_all":
            infos = [{"TimeLimit.truncated": bool(done[0])}]
            given = [infos[0]] * N
        else:
            given = [infos[0], infos[1]]
            infos = np.array(given, dtype=object) if form == "object_array" else iter(given)
        if form != "generator":  # a generator can be read once
            sb3.add(obs, nxt, action, reward, done, infos)
        buf.add(obs, nxt, action, reward, done, infos)
        twin.add(obs, nxt, action, reward, done, given)
    assert_same_buffers(buf, twin)
    if form == "one_for_all":  # both envs' ends at step 3 are timeouts: not terminal
        assert float(buf.ring["continue_"][3].min()) == 1.0
        assert sb3.timeouts[3].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("shape", ["flat", "column"])
def test_changing_the_done_array_after_add_changes_nothing(shape):
    buf, twin = make(), make()
    for obs, nxt, action, reward, done, infos in steps():
        mine = done.copy() if shape == "flat" else done.reshape(N, 1).copy()
        buf.add(obs, nxt, action, reward, mine, infos)
        twin.add(obs, nxt, action, reward, done, infos)
        mine[...] = ~mine  # the caller reuses its array
    assert_same_buffers(buf, twin)
    assert buf.ring["is_first"][:6, 0].tolist() == [True, False, False, False, True, False]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nans_at_the_same_places_do_not_break_the_stream(dtype):
    space = spaces.Box(-1e6, 1e6, (3,), dtype)
    buf, finite = make(obs_space=space), make(obs_space=space)
    for (obs, nxt, *rest), (obs_f, nxt_f, *_) in zip(
        steps(nan_at=1, dtype=dtype), steps(dtype=dtype), strict=True
    ):
        buf.add(obs, nxt, *rest)
        finite.add(obs_f, nxt_f, *rest)
    ring = buf.ring
    # episodes start at step 0 and after the ends at step 3, as in the stream without NaNs
    assert ring["is_first"][:, 0].tolist() == finite.ring["is_first"][:, 0].tolist()
    assert ring["is_first"][:6, 1].tolist() == [True, False, False, False, True, False]
    assert torch.equal(ring["episode_id"], finite.ring["episode_id"])
    assert torch.equal(ring._storage.side_slot >= 0, finite.ring._storage.side_slot >= 0)
    assert ring.side_lost == 0
    ring.check_invariants()
    # the transitions are those of the finite stream, with the NaNs where they were given
    rows = np.repeat(np.arange(buf.size()), N)
    envs = np.tile(np.arange(N), buf.size())
    got, want = buf.transitions_at(rows, envs), finite.transitions_at(rows, envs)
    assert torch.isnan(got.next_observations[:, 1]).all()
    for name in ("observations", "next_observations"):
        g, w = getattr(got, name), getattr(want, name)
        torch.testing.assert_close(g[:, [0, 2]], w[:, [0, 2]], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(got.dones, want.dones, rtol=0, atol=0)


def test_nans_at_other_places_still_break_the_stream():
    buf = make()
    for k, (obs, nxt, *rest) in enumerate(steps(count=3, nan_at=1)):
        if k == 2:  # env 0 was reset: its NaN moved
            obs = obs.copy()
            obs[0] = [np.nan, 2.0, 2.0]
        buf.add(obs, nxt, *rest)
    assert buf.ring["is_first"][:3].tolist() == [[True, True], [False, False], [True, False]]
    next_obs = buf.transitions_at(np.array([1]), np.array([0])).next_observations
    assert torch.isnan(next_obs[0, 1]) and float(next_obs[0, 0]) == 2.0  # SB3's next obs kept
    buf.ring.check_invariants()


def test_tensors_with_the_negative_bit_are_stored_as_their_values():
    # a float tensor may be a view with torch's negative bit (z.conj().imag): numpy cannot read
    # it, so add() refused it ('a tensor numpy can read'); the ring's pushes store such
    # tensors as their values (tests/replay/test_ring_odd_inputs.py), and so does add()
    def negative_bit(value):
        value = torch.as_tensor(value)
        view = torch.complex(torch.zeros_like(value), -value).conj().imag
        assert view.is_neg() and torch.equal(view, value)
        return view

    buf, twin = make(), make()
    for obs, nxt, action, reward, done, infos in steps():
        twin.add(obs, nxt, action, reward, done, infos)
        given = (negative_bit(v) for v in (obs, nxt, action, reward))
        buf.add(*given, done, infos)
    assert_same_buffers(buf, twin)
    # float64 ones too (cast as numpy arrays of float64 are)
    buf, twin = make(), make()
    for obs, nxt, action, reward, done, infos in steps():
        twin.add(obs, nxt, action, reward.astype(np.float64), done, infos)
        buf.add(obs, nxt, action, negative_bit(reward.astype(np.float64)), done, infos)
    assert_same_buffers(buf, twin)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tensors_that_require_grad_are_stored_as_their_values(dtype):
    # numpy cannot read a tensor that requires grad: add() refused it ('a tensor numpy can
    # read') while the ring's pushes store such tensors as data (detached); so does add() now,
    # for every numeric argument, a negative-bit view and an nn.Parameter included
    def grad(value, k):
        value = torch.tensor(np.asarray(value), dtype=dtype, requires_grad=True)
        if k % 3 == 1:  # a view with torch's negative bit, in the graph
            value = torch.complex(torch.zeros_like(value), -value).conj().imag
            assert value.is_neg()
        elif k % 3 == 2:
            value = torch.nn.Parameter(value.detach())
        assert value.requires_grad
        return value

    buf, twin = make(), make()
    for k, (obs, nxt, action, reward, done, infos) in enumerate(steps()):
        twin.add(obs, nxt, action, reward, done, infos)
        given = [grad(v, k) for v in (obs, nxt, action, reward, done)]
        buf.add(*given, infos)
    assert_same_buffers(buf, twin)
    assert not any(t.requires_grad for t in buf.ring.state_dict()["tensors"].values())
    assert not buf.sample(8).observations.requires_grad


def test_read_only_actions_are_stored_without_wrapping_them_in_a_tensor(monkeypatch):
    # a float32 action array that is read-only (np.asarray of a JAX array, np.broadcast_to)
    # was wrapped with torch.from_numpy, which warns ('The given NumPy array is not writable
    # ... undefined behavior'; once per process, so the wrapping itself is checked)
    from_numpy = torch.from_numpy

    def writable_only(array):
        assert array.flags.writeable, "torch.from_numpy of a read-only array"
        return from_numpy(array)

    buf, twin = make(), make()
    monkeypatch.setattr(torch, "from_numpy", writable_only)
    for obs, nxt, action, reward, done, infos in steps():
        twin.add(obs, nxt, action, reward, done, infos)
        read_only = action.copy()
        read_only.flags.writeable = False
        buf.add(obs, nxt, read_only, reward, done, infos)
    monkeypatch.undo()
    assert_same_buffers(buf, twin)
