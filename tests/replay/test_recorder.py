"""RecordToRing: real Gymnasium vector envs (Sync and Async), both autoreset modes."""

from functools import partial

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from gymcurric.errors import ConfigError
from gymcurric.replay import RecordToRing, ReplayRing
from tests.stubs import make_scripted

torch.set_num_threads(1)

# env 0: episodes of 3 steps that terminate; env 1: episodes of 4 steps that are truncated
LENS = (3, 4)
TRUNC = (False, True)


def make_envs(kind, mode):
    fns = [partial(make_scripted, n, truncate=tr) for n, tr in zip(LENS, TRUNC, strict=True)]
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    return AsyncVectorEnv(fns, autoreset_mode=mode, context="spawn")


def record(kind, mode, steps=25, capacity=64):
    envs = make_envs(kind, mode)
    ring = ReplayRing.from_spaces(
        capacity, 2, envs.single_observation_space, envs.single_action_space, debug_checks=True
    )
    envs = RecordToRing(envs, ring)
    envs.reset(seed=0)
    try:
        for k in range(steps):
            envs.step(np.array([k % 2, 1 - k % 2]))
    finally:
        envs.close()
    return ring


def expected_obs(mode, env, steps):
    """The obs sequence o_0, o_1, ... each env sees (obs = step index in the episode)."""
    n = LENS[env]
    cycle = list(range(n)) if mode == AutoresetMode.SAME_STEP else list(range(n + 1))
    return [cycle[k % len(cycle)] for k in range(steps)]


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("sync", AutoresetMode.SAME_STEP),
        ("sync", AutoresetMode.NEXT_STEP),
        ("async", AutoresetMode.SAME_STEP),
        ("async", AutoresetMode.NEXT_STEP),
    ],
)
def test_rows_match_the_episodes(kind, mode):
    steps = 25
    ring = record(kind, mode, steps)
    assert ring.total_steps == steps
    ring.check_invariants()
    for e in range(2):
        obs = ring["obs"][:steps, e, 0].tolist()
        exp = expected_obs(mode, e, steps)
        assert obs == exp
        n = LENS[e]
        o = np.array(exp)
        dummy = o == n  # NEXT_STEP: the final obs row, its step is the ignored reset step
        np.testing.assert_array_equal(ring["reward"][:steps, e].numpy(), np.where(dummy, 0, o + 1))
        np.testing.assert_array_equal(
            ring["cost"][:steps, e].numpy(), np.where(dummy, 0, 0.5 * (o + 1))
        )
        np.testing.assert_array_equal(ring["is_first"][:steps, e].numpy(), o == 0)
        terminal = (o == n - 1) & (not TRUNC[e])
        np.testing.assert_array_equal(ring["continue_"][:steps, e].numpy(), 1.0 - terminal)
        np.testing.assert_array_equal(ring["episode_id"][:steps, e].numpy(), np.cumsum(o == 0) - 1)
        np.testing.assert_array_equal(
            ring["action"][:steps, e].numpy(), [(k + e) % 2 for k in range(steps)]
        )


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_transitions_have_true_next_obs_and_terminal_done(mode):
    ring = record("sync", mode, steps=40, capacity=16)  # wrapped 2.5 times
    tr = ring.sample_transitions(2000, torch.Generator().manual_seed(0))
    o = tr.obs[:, 0]
    e = tr.env_index
    lens = torch.tensor(LENS)[e]
    assert bool(tr.valid.all())
    assert not bool((o == lens).any())  # NEXT_STEP final-obs rows are never sources
    assert torch.equal(tr.next_obs[:, 0], o + 1)  # final obs included (from the side store)
    terminal = (o == lens - 1) & ~torch.tensor(TRUNC)[e]
    assert torch.equal(tr.done, terminal.float())
    truncated_end = (o == lens - 1) & torch.tensor(TRUNC)[e]
    assert bool(truncated_end.any()) and bool(terminal.any())
    assert torch.equal(tr.reward, o + 1)
    seq = ring.sample_sequences(64, 8, torch.Generator().manual_seed(1))
    steps = seq["obs"][..., 0]
    same_ep = ~seq["is_first"][1:]
    assert bool(((steps[1:] == steps[:-1] + 1) | ~same_ep).all())


def test_user_fields_through_extra_fn():
    envs = SyncVectorEnv([partial(make_scripted, 3)] * 2)
    ring = ReplayRing.from_spaces(
        8,
        2,
        envs.single_observation_space,
        envs.single_action_space,
        extra_fields={"prev_obs_sum": ((), torch.float32)},
    )
    with pytest.raises(ConfigError, match="extra_fn"):
        RecordToRing(envs, ring)
    envs = RecordToRing(envs, ring, extra_fn=lambda obs, a, i: {"prev_obs_sum": obs.sum(axis=1)})
    envs.reset(seed=0)
    for _ in range(4):
        envs.step(np.zeros(2, np.int64))
    assert torch.equal(ring["prev_obs_sum"][:4], ring["obs"][:4, :, 0])


def test_refuses_mismatched_ring_and_disabled_autoreset():
    envs = SyncVectorEnv([partial(make_scripted, 3)] * 2)
    ring = ReplayRing.from_spaces(8, 3, envs.single_observation_space, envs.single_action_space)
    with pytest.raises(ConfigError, match="num_envs=3"):
        RecordToRing(envs, ring)
    disabled = SyncVectorEnv([partial(make_scripted, 3)] * 3, autoreset_mode=AutoresetMode.DISABLED)
    with pytest.raises(ConfigError, match="autoreset"):
        RecordToRing(disabled, ring)
    with pytest.raises(ConfigError, match="reset"):
        RecordToRing(SyncVectorEnv([partial(make_scripted, 3)] * 3), ring).step(np.zeros(3))


def test_cartpole_copy_false_obs_buffers():
    """With copy=False the env reuses its obs buffer: rows must still hold o_t, not o_{t+1}."""
    envs = gym.make_vec(
        "CartPole-v1", num_envs=2, vectorization_mode="sync", vector_kwargs={"copy": False}
    )
    ring = ReplayRing.from_spaces(50, 2, envs.single_observation_space, envs.single_action_space)
    envs = RecordToRing(envs, ring)
    obs, _ = envs.reset(seed=1)
    seen = [obs.copy()]
    for _ in range(10):
        obs, *_ = envs.step(np.ones(2, np.int64))
        seen.append(obs.copy())
    np.testing.assert_array_equal(ring["obs"][:10].numpy(), np.stack(seen[:10]))
