"""RingReplayBuffer with ``storage_device="cuda"``: the same buffer as one stored on the CPU.

The same ``add`` calls into a buffer stored on the CPU and one stored on another device give the
same state (compared on the CPU), the same transitions at every (row, env), the same batches of
SB3's ``_get_samples`` hook for the same NumPy seed, and batches of ``sample()`` drawn from those
transitions (a CUDA ring draws with its own CUDA generator, so its draws are not the CPU's; two
rings on the same device and index draw the same batches). They survive SB3's
``save_to_pkl``/``load_from_pkl`` (what ``save_replay_buffer``/``load_replay_buffer`` run) alike,
refuse the same bad ``add`` with the same message, and SAC learns with the buffer on the GPU.

The pairs: ``cpu`` twice (runs everywhere: proves the test), ``cpu`` against a CPU ring that
runs the device index's code paths (what a CUDA ring runs; its batches are only checked to be
stored transitions, as across devices), and ``cpu`` against ``cuda`` (skipped without CUDA).
"""

import copy
import functools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl

import gymcurric.integrations.sb3.replay as replay_module
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.replay import RingReplayBuffer
from gymcurric.replay import ReplayRing
from tests.integrations.replay_states import assert_same

pytestmark = pytest.mark.sb3
torch.set_num_threads(1)

NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

#: (storage device of the twin, its index strategy: None for the device's default)
PAIRS = [
    pytest.param(("cpu", None), id="cpu-vs-cpu"),
    pytest.param(("cpu", "device"), id="cpu-vs-cpu_device_index"),
    pytest.param(("cuda", None), id="cpu-vs-cuda", marks=NO_CUDA),
]
N = 4  # envs
ROWS = 6  # rows per env: the streams below wrap the ring
OBS = {
    "box": spaces.Box(-10, 10, (3,), np.float32),
    "image": spaces.Box(0, 255, (8, 8, 3), np.uint8),
}
ACT = {"discrete": spaces.Discrete(3), "box": spaces.Box(-1, 1, (2,), np.float32)}


def stream(obs_space, act_space, steps=15, seed=0):
    """SB3-style add() arguments with episodes ending by termination and by truncation.

    As SB3's off-policy ``_store_transition`` passes them: ``next_obs[i]`` is the terminal
    observation where ``done[i]``, which ``infos[i]["terminal_observation"]`` also holds.
    """
    rng = np.random.default_rng(seed)
    obs_space.seed(seed)
    act_space.seed(seed)
    obs = np.stack([obs_space.sample() for _ in range(N)])
    for k in range(steps):
        nxt = np.stack([obs_space.sample() for _ in range(N)])
        # env 0 terminates every 4 steps, env 1 is truncated every 5, envs 2-3 at random
        terminated = np.array([k % 4 == 3, False, *(rng.random(2) < 0.2)])
        truncated = np.array([False, k % 5 == 4, *(rng.random(2) < 0.2)]) & ~terminated
        done = terminated | truncated
        next_obs = nxt.copy()
        infos = []
        for e in range(N):
            info = {}
            if done[e]:
                next_obs[e] = obs_space.sample()  # the terminal observation
                info["terminal_observation"] = next_obs[e].copy()
                info["TimeLimit.truncated"] = bool(truncated[e])
            infos.append(info)
        action = np.stack([act_space.sample() for _ in range(N)])
        reward = rng.normal(size=N).astype(np.float32)
        yield obs, next_obs, action, reward, done, infos
        obs = nxt  # the reset observation where done, else the next one


def make(obs_space, act_space, placement=("cpu", None), **kwargs):
    """A buffer on ``placement`` (its ring's generator seeded from NumPy's, as SB3 seeds it)."""
    device, strategy = placement
    np.random.seed(0)  # noqa: NPY002 (the ring's generator is seeded from it)
    with pytest.MonkeyPatch.context() as patch:
        if strategy is not None:  # the adapter does not pass one: its ring class does
            ring_class = functools.partial(ReplayRing, index_strategy=strategy)
            patch.setattr(replay_module, "ReplayRing", ring_class)
        return RingReplayBuffer(
            ROWS * N, obs_space, act_space, "cpu", N, storage_device=device, **kwargs
        )


def on_cpu(value):
    if isinstance(value, dict):
        return {k: on_cpu(v) for k, v in value.items()}
    return value.cpu() if isinstance(value, torch.Tensor) else value


def snapshot(buf):
    """The buffer's state on the CPU, without what depends on the device (generator)."""
    state = buf.ring.state_dict()
    meta = {k: v for k, v in state["meta"].items() if k != "generator_device"}
    tensors = {k: v for k, v in state["tensors"].items() if k != "generator"}
    # without the trash row of masked-out writes, which holds anything (the device index's)
    tensors["side.obs"] = tensors["side.obs"][:-1]
    return copy.deepcopy(
        on_cpu(
            {
                "meta": meta,
                "tensors": tensors,
                "dones": buf.dones,
                "next_obs": buf._next_np,
                "prev_done": np.array(buf._prev_done),
                "counters": (buf.pos, buf.full, buf.size(), buf.ring.side_lost),
            }
        )
    )


def everything(buf):
    """The transitions at every stored (row, env), on the CPU."""
    rows = np.repeat(np.arange(buf.size()), N)
    envs = np.tile(np.arange(N), buf.size())
    return on_cpu(buf.transitions_at(rows, envs)._asdict())


def assert_batches_equal(a, b):
    for name in a._fields:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            torch.testing.assert_close(x.cpu(), y.cpu(), rtol=0, atol=0, msg=name)


def assert_drawn_from(batch, table):
    """Every transition of ``batch`` is one of ``table`` (observation, action, ... together)."""
    names = [n for n in batch._fields if getattr(batch, n) is not None]

    def rows(source):
        return torch.cat([source[n].cpu().reshape(len(source[n]), -1).double() for n in names], 1)

    got = rows({n: getattr(batch, n) for n in names})
    known = rows(table)
    hits = (got[:, None, :] == known[None, :, :]).all(dim=2).any(dim=1)
    assert bool(hits.all()), f"{int((~hits).sum())} sampled transitions are not stored ones"


def assert_twins(buf, twin):
    """Same state and transitions; SB3's hook and sample() as the devices allow."""
    if twin._next_dev is not None:  # the mirror of the pending next observation
        assert np.array_equal(twin._next_dev.cpu().numpy(), twin._stored(twin._next_np))
    assert_same(snapshot(buf), snapshot(twin))
    table = everything(buf)
    assert_same(table, everything(twin))
    rows = np.repeat(np.arange(buf.size()), 2)
    np.random.seed(5)  # noqa: NPY002 (SB3's hook draws env indices from it)
    want = buf._get_samples(rows)
    np.random.seed(5)  # noqa: NPY002
    assert_batches_equal(want, twin._get_samples(rows))
    a, b = buf.sample(64), twin.sample(64)
    assert a.observations.device == b.observations.device == buf.device  # SB3's device
    assert_drawn_from(a, table)
    assert_drawn_from(b, table)
    same_draws = (buf.ring.device.type, buf.ring.index_strategy) == (
        twin.ring.device.type,
        twin.ring.index_strategy,
    )
    if same_draws:  # the same generator and index: the same batches
        assert_batches_equal(a, b)
    buf.ring.check_invariants()
    twin.ring.check_invariants()


@pytest.mark.parametrize("timeouts", [True, False], ids=["timeouts", "no_timeouts"])
@pytest.mark.parametrize("act", sorted(ACT))
@pytest.mark.parametrize("obs", sorted(OBS))
@pytest.mark.parametrize("placement", PAIRS)
def test_twin_buffers_on_two_devices_hold_and_return_the_same(
    placement, obs, act, timeouts, tmp_path
):
    obs_space, act_space = OBS[obs], ACT[act]
    options = {"handle_timeout_termination": timeouts}
    buf = make(obs_space, act_space, **options)
    twin = make(obs_space, act_space, placement, **options)
    assert twin.ring.device.type == placement[0]
    for args in stream(obs_space, act_space):
        buf.add(*args)
        twin.add(*args)
    assert buf.full and bool((buf.ring["continue_"] == 0).any())  # terminations stored
    assert int((buf.ring._storage.side_slot >= 0).sum()) > 0  # terminal obs in the side store
    assert_twins(buf, twin)
    # SB3's save_replay_buffer / load_replay_buffer pickle the buffer with these
    loaded = []
    for name, b in (("cpu", buf), ("twin", twin)):
        save_to_pkl(tmp_path / f"{name}.pkl", b)
        loaded.append(load_from_pkl(tmp_path / f"{name}.pkl"))
    for original, back in zip((buf, twin), loaded, strict=True):
        assert isinstance(back, RingReplayBuffer)
        assert back.ring.device == original.ring.device
        assert back.ring.index_strategy == original.ring.index_strategy
        assert_same(snapshot(back), snapshot(original))
        # the generator state travelled: the loaded buffer draws what the original draws next
        assert_batches_equal(back.sample(32), original.sample(32))
    assert_twins(*loaded)
    # and both go on alike
    for args in stream(obs_space, act_space, steps=4, seed=1):
        for b in loaded:
            b.add(*args)
    assert_twins(*loaded)


def sparse_obs(space):
    return torch.ones((N, *space.shape), dtype=torch.float32).to_sparse()


#: (parameter, bad value of it, a piece of the message)
REFUSED = {
    "reward_strings": ("reward", np.array(["a"] * N), "dtype <U1"),
    "reward_none": ("reward", None, "None"),
    "reward_shape": ("reward", np.zeros(N + 1, np.float32), "shape (5,)"),
    "obs_sparse": ("obs", "sparse", "layout torch.sparse_coo"),
    "next_obs_sparse": ("next_obs", "sparse", "layout torch.sparse_coo"),
}
PARAMS = ("obs", "next_obs", "action", "reward", "done", "infos")


@pytest.mark.parametrize("bad", sorted(REFUSED))
@pytest.mark.parametrize("obs", sorted(OBS))
@pytest.mark.parametrize("placement", PAIRS)
def test_a_refused_add_leaves_both_alike_with_the_same_message(placement, obs, bad):
    obs_space, act_space = OBS[obs], ACT["box"]
    buf = make(obs_space, act_space)
    twin = make(obs_space, act_space, placement)
    steps = list(stream(obs_space, act_space, steps=12))
    for args in steps[:9]:  # wrapped, episodes ended
        buf.add(*args)
        twin.add(*args)
    param, value, received = REFUSED[bad]
    args = list(steps[9])
    args[PARAMS.index(param)] = sparse_obs(obs_space) if isinstance(value, str) else value
    messages = []
    for b in (buf, twin):
        before = snapshot(b)
        generator = b.ring.generator.get_state().clone()
        with pytest.raises(ConfigError) as info:
            b.add(*args)
        assert info.value.key == param
        assert received in str(info.value), str(info.value)
        messages.append(str(info.value))
        assert_same(snapshot(b), before)
        assert torch.equal(b.ring.generator.get_state(), generator)
    assert messages[0] == messages[1]
    for args in steps[9:]:  # the good step and after: still twins
        buf.add(*args)
        twin.add(*args)
    assert_twins(buf, twin)


@NO_CUDA
def test_sac_learns_with_the_buffer_on_the_gpu():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = SAC(
        "MlpPolicy",
        env,
        buffer_size=1000,
        learning_starts=50,
        batch_size=32,
        policy_kwargs={"net_arch": [32, 32]},
        replay_buffer_class=RingReplayBuffer,
        replay_buffer_kwargs={"storage_device": "cuda"},
        seed=0,
        device="cuda",
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(200)
    buf = model.replay_buffer
    assert isinstance(buf, RingReplayBuffer)
    assert buf.ring.device.type == "cuda" and buf._next_dev is not None
    assert buf.ring.total_steps == 200 and buf.size() == 200
    buf.ring.check_invariants()
    batch = buf.sample(64)
    for name in ("observations", "actions", "next_observations", "dones", "rewards"):
        assert getattr(batch, name).device.type == "cuda", name
    assert any(
        not torch.equal(p, q) for p, q in zip(before, model.policy.parameters(), strict=True)
    )
