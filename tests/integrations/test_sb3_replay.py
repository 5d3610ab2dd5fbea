"""RingReplayBuffer: same transitions as SB3's ReplayBuffer; real SAC/TD3/DQN learn(); save/load."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.env_util import make_vec_env

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.replay import RingReplayBuffer

pytestmark = pytest.mark.sb3
torch.set_num_threads(1)

SPACES = {
    "box": (spaces.Box(-5, 5, (4,), np.float32), spaces.Box(-1, 1, (2,), np.float32)),
    "pixels_discrete": (spaces.Box(0, 255, (3, 3, 1), np.uint8), spaces.Discrete(3)),
    "uint16_discrete": (spaces.Box(0, 65535, (4,), np.uint16), spaces.Discrete(3)),
}


def stream(obs_space, act_space, n_envs, steps, seed):
    """SB3-style add() arguments: next_obs[i] is the terminal obs where done[i]."""
    rng = np.random.default_rng(seed)
    obs_space.seed(seed)
    act_space.seed(seed)
    obs = np.stack([obs_space.sample() for _ in range(n_envs)])
    for _ in range(steps):
        nxt = np.stack([obs_space.sample() for _ in range(n_envs)])
        done = rng.random(n_envs) < 0.25
        timeout = done & (rng.random(n_envs) < 0.5)
        terminal = np.stack([obs_space.sample() for _ in range(n_envs)])
        next_obs = np.where(done.reshape(-1, *[1] * (obs.ndim - 1)), terminal, nxt)
        action = np.stack([act_space.sample() for _ in range(n_envs)])
        reward = rng.normal(size=n_envs).astype(np.float32)
        infos = [{"TimeLimit.truncated": bool(t)} for t in timeout]
        yield obs, next_obs, action, reward, done, infos
        obs = nxt  # the reset obs for done envs, the next obs otherwise


def same_batch(a, b):
    return all((x is None and y is None) or torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("space", sorted(SPACES))
@pytest.mark.parametrize("timeouts", [True, False])
@pytest.mark.parametrize("steps", [5, 31])  # not full / wrapped 4 times
def test_same_transitions_as_sb3_replay_buffer(space, timeouts, steps):
    obs_space, act_space = SPACES[space]
    n_envs, size = 3, 3 * 7
    sb3 = ReplayBuffer(
        size, obs_space, act_space, "cpu", n_envs, handle_timeout_termination=timeouts
    )
    ring = RingReplayBuffer(
        size, obs_space, act_space, "cpu", n_envs, handle_timeout_termination=timeouts
    )
    for args in stream(obs_space, act_space, n_envs, steps, seed=steps):
        sb3.add(*args)
        ring.add(*args)
    assert (ring.pos, ring.full, ring.size()) == (sb3.pos, sb3.full, sb3.size())
    rows = np.repeat(np.arange(sb3.size()), n_envs)
    np.random.seed(1)  # noqa: NPY002 (SB3 draws env indices from it)
    want = sb3._get_samples(rows)
    np.random.seed(1)  # noqa: NPY002 (SB3 draws env indices from it)
    got = ring._get_samples(rows)
    for name in want._fields:
        w, g = getattr(want, name), getattr(got, name)
        if w is None:  # optional fields of ReplayBufferSamples (e.g. n-step discounts)
            assert g is None, name
            continue
        assert w.dtype == g.dtype and w.shape == g.shape, name
        assert torch.equal(w, g), name
    assert ring.ring.side_lost == 0
    ring.ring.check_invariants()
    # uniform sampling covers the same set of (row, env) pairs
    batch = ring.sample(2000)
    assert batch.observations.shape == (2000, *ring.obs_shape)


def test_stream_break_between_learn_calls_keeps_sb3s_next_obs():
    obs_space, act_space = SPACES["box"]
    buf = RingReplayBuffer(20, obs_space, act_space, "cpu", 1)
    a = np.zeros((1, 2), np.float32)
    o = [np.full((1, 4), float(k), np.float32) for k in range(6)]
    buf.add(o[0], o[1], a, np.zeros(1), np.array([False]), [{}])
    buf.add(o[1], o[2], a, np.zeros(1), np.array([False]), [{}])
    # env reset without an episode end: the next obs SB3 gave (o[2]) must stay the successor
    buf.add(o[4], o[5], a, np.zeros(1), np.array([False]), [{}])
    got = buf.transitions_at(np.array([0, 1, 2]), np.array([0, 0, 0]))
    assert got.next_observations[:, 0].tolist() == [1.0, 2.0, 5.0]
    assert got.dones.view(-1).tolist() == [0.0, 0.0, 0.0]
    assert buf.ring["is_first"][:3, 0].tolist() == [True, False, True]
    buf.ring.check_invariants()


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_observations_come_back_exact_in_their_dtype_like_sb3s(dtype):
    top = np.iinfo(dtype).max  # values whose top bit is set: negative as the signed dtype
    obs_space, act_space = spaces.Box(0, top, (2,), dtype), spaces.Discrete(2)
    sb3 = ReplayBuffer(12, obs_space, act_space, "cpu", 2)
    ring = RingReplayBuffer(12, obs_space, act_space, "cpu", 2)
    o = [np.array([[top - k, k], [k, top - 2 * k]], dtype=dtype) for k in range(6)]
    for k in range(5):
        done = np.array([k == 2, False])  # env 0's episode ends: its next obs is terminal
        args = (o[k], o[k + 1], np.array([0, 1]), np.ones(2), done, [{}, {}])
        sb3.add(*args)
        ring.add(*args)
    rows = np.repeat(np.arange(5), 2)
    np.random.seed(0)  # noqa: NPY002 (SB3 draws env indices from it)
    want = sb3._get_samples(rows)
    np.random.seed(0)  # noqa: NPY002
    got = ring._get_samples(rows)
    for name in ("observations", "next_observations"):
        w, g = getattr(want, name), getattr(got, name)
        assert w.dtype == g.dtype == getattr(torch, np.dtype(dtype).name), name
        assert np.array_equal(w.numpy(), g.numpy()), name


def test_seeded_buffers_sample_identically():
    obs_space, act_space = SPACES["box"]
    bufs = []
    for _ in range(2):
        np.random.seed(123)  # noqa: NPY002 (SB3 seeds this way)
        buf = RingReplayBuffer(40, obs_space, act_space, "cpu", 2)
        for args in stream(obs_space, act_space, 2, 15, seed=0):
            buf.add(*args)
        bufs.append(buf)
    a, b = bufs[0].sample(32), bufs[1].sample(32)
    assert same_batch(a, b)


def test_dict_observations_are_refused():
    with pytest.raises(ConfigError, match="DictReplayBuffer"):
        RingReplayBuffer(10, spaces.Dict({"a": spaces.Discrete(2)}), spaces.Discrete(2))


def test_memory_is_half_of_sb3_for_pixels():
    obs_space = spaces.Box(0, 255, (64, 64, 3), np.uint8)
    act_space = spaces.Box(-1, 1, (6,), np.float32)
    sb3 = ReplayBuffer(4000, obs_space, act_space, "cpu", 4)
    ring = RingReplayBuffer(4000, obs_space, act_space, "cpu", 4)
    sb3_bytes = sum(
        getattr(sb3, n).nbytes
        for n in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    )
    assert ring.ring.nbytes < 0.55 * sb3_bytes


ALGOS = {
    "SAC": (SAC, "Pendulum-v1", {}),
    "TD3": (TD3, "Pendulum-v1", {}),
    "DQN": (DQN, "CartPole-v1", {"target_update_interval": 50, "exploration_fraction": 0.5}),
}


def small_model(name, seed=0, **kw):
    cls, env_id, extra = ALGOS[name]
    env = make_vec_env(env_id, n_envs=2, seed=seed)
    return cls(
        "MlpPolicy",
        env,
        buffer_size=600,
        learning_starts=100,
        batch_size=32,
        train_freq=4,
        gradient_steps=1,
        policy_kwargs={"net_arch": [32, 32]},
        replay_buffer_class=RingReplayBuffer,
        seed=seed,
        device="cpu",
        **extra,
        **kw,
    )


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_learn_with_ring_buffer(name):
    model = small_model(name)
    model.learn(400)
    buf = model.replay_buffer
    assert isinstance(buf, RingReplayBuffer)
    assert buf.ring.total_steps == 200 and buf.size() == 200  # 400 steps over 2 envs
    buf.ring.check_invariants()
    assert buf.ring.side_lost == 0
    if name == "DQN":  # CartPole episodes end (terminate or truncate): terminal obs kept
        assert bool((buf.ring["continue_"] == 0).any())
        assert int((buf.ring._storage.side_slot >= 0).sum()) > 0
    # the policy was trained: parameters moved away from their initial values
    fresh = small_model(name)
    moved = [
        not torch.equal(p, q)
        for p, q in zip(model.policy.parameters(), fresh.policy.parameters(), strict=True)
    ]
    assert any(moved)


class UInt16Env(gym.Env):
    """Observations in uint16 over its whole range (above 32767 too); 9-step episodes."""

    def __init__(self, discrete=True):
        self.observation_space = spaces.Box(0, 65535, (4,), np.uint16)
        self.action_space = spaces.Discrete(2) if discrete else spaces.Box(-1, 1, (1,), np.float32)
        self.t = 0

    def _obs(self):
        return self.np_random.integers(0, 65536, 4).astype(np.uint16)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        reward = float(np.asarray(action).sum() > 0)
        return self._obs(), reward, self.t == 9, False, {}


@pytest.mark.parametrize("cls", [DQN, SAC])
def test_learn_on_uint16_observations(cls):
    """SB3's own buffer learns on them; ours refused them at the first add()."""
    env = make_vec_env(UInt16Env, n_envs=2, seed=0, env_kwargs={"discrete": cls is DQN})
    model = cls(
        "MlpPolicy",
        env,
        buffer_size=400,
        learning_starts=40,
        batch_size=16,
        train_freq=4,
        policy_kwargs={"net_arch": [16]},
        replay_buffer_class=RingReplayBuffer,
        seed=0,
        device="cpu",
    )
    before = [p.clone() for p in model.policy.parameters()]
    model.learn(120)
    buf = model.replay_buffer
    buf.ring.check_invariants()
    batch = buf.sample(64)
    assert batch.observations.dtype == batch.next_observations.dtype == torch.uint16
    assert batch.observations.numpy().max() > 32767  # the values, not their signed bits
    assert any(
        not torch.equal(p, q) for p, q in zip(before, model.policy.parameters(), strict=True)
    )


def test_optimize_memory_usage_is_accepted_across_learn_calls():
    """SB3 writes replay_buffer.dones[pos] = True before learn(reset_num_timesteps=True) with
    optimize_memory_usage: the newest step keeps its next obs, new episodes start after it."""
    model = small_model("DQN", optimize_memory_usage=True)
    model.learn(200)
    buf = model.replay_buffer
    assert buf.optimize_memory_usage is False and model.optimize_memory_usage is True
    last, pending = buf.pos - 1, buf._next_np.copy()
    with pytest.warns(UserWarning, match="last trajectory in the replay buffer will be truncated"):
        model.learn(200, reset_num_timesteps=True)
    assert buf.ring.total_steps == 200 and buf.ring["is_first"][last + 1].all()
    ended = buf.transitions_at(np.array([last, last]), np.array([0, 1]))
    assert np.array_equal(ended.next_observations.numpy(), pending)
    continue_ = buf.ring["continue_"][last]
    assert ended.dones.view(-1).tolist() == (1.0 - continue_).tolist()  # not made terminal
    buf.ring.check_invariants()
    with pytest.warns(UserWarning, match="truncated"):
        model.learn(100, reset_num_timesteps=True)  # and again
    assert buf.ring.total_steps >= 250 and buf.ring.side_lost == 0


def test_save_and_load_replay_buffer(tmp_path):
    model = small_model("SAC")
    model.learn(150)
    model.save_replay_buffer(tmp_path / "rb.pkl")
    other = small_model("SAC", seed=1)
    other.load_replay_buffer(tmp_path / "rb.pkl")
    a, b = model.replay_buffer, other.replay_buffer
    assert isinstance(b, RingReplayBuffer)
    assert (b.pos, b.full, b.size()) == (a.pos, a.full, a.size())
    for name, t in a.ring.fields.items():
        assert torch.equal(b.ring[name], t), name
    x, y = a.sample(16), b.sample(16)  # generator state travelled with the buffer
    assert same_batch(x, y)
    other.learn(50, reset_num_timesteps=False)
    assert b.ring.total_steps > a.ring.total_steps  # appended after the loaded rows
    b.ring.check_invariants()


def test_vec_normalize_is_applied_like_sb3():
    from stable_baselines3.common.vec_env import VecNormalize

    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    venv.obs_rms.mean = np.array([0.5, -0.5, 1.0])
    venv.obs_rms.var = np.array([4.0, 2.0, 9.0])
    venv.ret_rms.var = np.array(3.0)
    obs_space, act_space = venv.observation_space, venv.action_space
    sb3 = ReplayBuffer(40, obs_space, act_space, "cpu", 2)
    ring = RingReplayBuffer(40, obs_space, act_space, "cpu", 2)
    for args in stream(obs_space, act_space, 2, 12, seed=3):
        sb3.add(*args)
        ring.add(*args)
    rows = np.repeat(np.arange(sb3.size()), 2)
    np.random.seed(2)  # noqa: NPY002 (SB3 draws env indices from it)
    want = sb3._get_samples(rows, env=venv)
    np.random.seed(2)  # noqa: NPY002
    got = ring._get_samples(rows, env=venv)
    for name in ("observations", "next_observations", "rewards", "dones", "actions"):
        w, g = getattr(want, name), getattr(got, name)
        assert w.dtype == g.dtype, name
        assert torch.allclose(w, g), name
    venv.close()
