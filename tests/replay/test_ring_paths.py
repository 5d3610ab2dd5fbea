"""ReplayRing code paths that must agree: the device index (CUDA's, run here on CPU) against the
host index, the host sampler against ``transitions_at``, the next-observation table against a
rebuild.
"""

import numpy as np
import pytest
import torch

from gymcurric.errors import DataError
from gymcurric.replay import ReplayRing
from tests.replay.ring_helpers import gen, make, push, step_of

torch.set_num_threads(1)


# ---------------------------------------------------------------- the CUDA code paths, on CPU


def test_device_code_paths_give_the_same_ring_and_valid_samples():
    """Torch-only writes and sync-free sampling (the CUDA paths) exercised on CPU."""
    a = make("cpu", capacity=12, num_envs=3)
    b = make("cpu", capacity=12, num_envs=3, index_strategy="device")
    assert (a.index_strategy, b.index_strategy) == ("host", "device")
    firsts = None
    for k in range(30):
        term = [k % 5 == 4, k % 7 == 6, False]
        trunc = [False, False, k % 4 == 3]
        final = torch.full((3, 3), 900.0)
        for ring in (a, b):
            push(ring, k, term=term, trunc=trunc, final=final, is_first=firsts)
    for name, t in a.fields.items():
        assert torch.equal(b[name], t), name
    tr = b.sample_transitions(1000, gen("cpu"), candidates=4)
    assert bool(tr.valid.all())
    s = step_of(tr.obs[:, 0])
    ended = torch.tensor([[k % 5 == 4, k % 7 == 6, k % 4 == 3] for k in range(30)])
    end_here = ended[s.long(), tr.env_index]
    assert bool((tr.next_obs[:, 0][end_here] == 900).all())
    assert bool((step_of(tr.next_obs[:, 0][~end_here]) == s[~end_here] + 1).all())


def test_no_transition_with_a_successor_raises_or_is_masked():
    """The host index refuses to sample; the device index (no host sync) marks every entry."""
    for index_strategy in ("host", "device"):
        ring = make("cpu", capacity=4, num_envs=1, index_strategy=index_strategy)
        push(ring, 0, is_first=[True])
        push(ring, 1, is_first=[True])  # row 0 ends without a final obs: it has no successor
        if index_strategy == "host":
            with pytest.raises(DataError, match="no valid transition"):
                ring.sample_transitions(3, gen("cpu"))
        else:
            assert not ring.sample_transitions(3, gen("cpu")).valid.any()


@pytest.mark.parametrize("candidates", [1, 3])
def test_device_index_entries_without_a_valid_draw_take_another_valid_draw(candidates):
    """With few candidates per entry and half the steps without a successor, many entries draw
    only invalid steps: each takes another valid draw of the batch instead (usually one no entry
    took), so all entries are valid and right, and no draw is repeated much."""
    ring = make("cpu", capacity=41, num_envs=2, side_capacity=2, index_strategy="device")
    final = torch.full((2, 3), 900.0)
    for k in range(41):
        ended = k % 2 == 1  # both envs end every other step; all but the newest entries lost
        push(ring, k, term=[ended, ended], final=final if ended else None)
    tr = ring.sample_transitions(4000, gen("cpu"), candidates=candidates)
    assert bool(tr.valid.all())
    s = step_of(tr.obs[:, 0])
    ended = s % 2 == 1
    assert set(s[ended].tolist()) == {39}  # the only end whose final observation is kept
    assert bool((tr.next_obs[:, 0][ended] == 900).all())
    assert bool((step_of(tr.next_obs[:, 0][~ended]) == s[~ended] + 1).all())
    assert set(s[~ended].tolist()) == set(range(0, 40, 2))  # 40, the newest, has no successor
    # 42 valid steps, ~95 draws each, although ~4000 / 2**candidates entries drew none
    counts = torch.unique(tr.t_index * 2 + tr.env_index, return_counts=True)[1]
    assert len(counts) == 42 and int(counts.max()) < 150


# ------------------------------------------------------- sampled transitions = transitions_at
@pytest.mark.parametrize("index_strategy", ["host", "device"])
@pytest.mark.parametrize("obs_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pending", [False, True])
def test_sampled_transitions_equal_transitions_at(obs_dtype, pending, index_strategy):
    """The sampler (host: numpy index math, numpy or torch next-obs overrides by dtype; device:
    candidate draws) returns, entry by entry, what ``transitions_at`` gives for its indices."""
    rng = np.random.default_rng(3)
    C, E = 23, 4
    fields = {"obs": ((3,), obs_dtype), "action": ((2,), torch.float32)}
    ring = ReplayRing(C, E, fields, side_capacity=6, index_strategy=index_strategy)
    for _ in range(57):  # wraps twice; terminals, truncations, side-store losses
        term = rng.random(E) < 0.15
        trunc = (rng.random(E) < 0.1) & ~term
        ended = term | trunc
        obs = torch.from_numpy(rng.standard_normal((E, 3)).astype(np.float32)).to(obs_dtype)
        final = torch.from_numpy(rng.standard_normal((E, 3)).astype(np.float32)).to(obs_dtype)
        ring.push_step(
            obs,
            rng.standard_normal((E, 2)).astype(np.float32),
            rng.standard_normal(E).astype(np.float32),
            cost=rng.random(E),
            terminated=term,
            truncated=trunc,
            final_obs=final if ended.any() else None,
        )
    nxt = torch.from_numpy(rng.standard_normal((E, 3)).astype(np.float32)).to(obs_dtype)
    nxt = nxt if pending else None
    got = ring.sample_transitions(512, torch.Generator().manual_seed(0), next_obs=nxt)
    ref = ring.transitions_at(got.t_index, got.env_index, next_obs=nxt)
    assert got.valid.all() and ref.valid.all()
    for name in ("obs", "action", "reward", "cost", "next_obs", "done"):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    # the draws cover terminal rows (side store) and, with next_obs, the newest row
    assert (got.done == 1).any()
    assert (got.t_index == (ring.head - 1) % C).any() == pending


def test_next_observation_table_kept_at_write_time_equals_a_rebuild(tmp_path):
    """The CPU sampler's per-step next-observation table, updated by every push and side-store
    write (wrap-around, explicit is_first, attach_final_obs, side-store losses), equals the
    table rebuilt from the stored rows; a saved and loaded ring samples identically."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        C, E = int(rng.integers(2, 12)), int(rng.integers(1, 5))
        ring = ReplayRing(
            C,
            E,
            {"obs": ((2,), torch.float32), "action": ((), torch.int64)},
            side_capacity=int(rng.integers(1, 5)),
        )
        for _ in range(int(rng.integers(1, 3 * C))):
            term = rng.random(E) < 0.2
            trunc = (rng.random(E) < 0.1) & ~term
            ended = term | trunc
            same_step = trial % 3 != 0
            ring.push_step(
                rng.standard_normal((E, 2)).astype(np.float32),
                np.zeros(E, np.int64),
                np.zeros(E, np.float32),
                terminated=term,
                truncated=trunc,
                final_obs=rng.standard_normal((E, 2)).astype(np.float32)
                if same_step and ended.any()
                else None,
                is_first=(
                    (rng.random(E) < 0.1) | ring._storage.episode_ended if trial % 4 == 1 else None
                ),
            )
            if rng.random() < 0.15:
                ring.attach_final_obs(
                    (ring.head - 1) % C,
                    rng.standard_normal((E, 2)).astype(np.float32),
                    rng.random(E) < 0.5,
                )
            live = ((ring.oldest + np.arange(ring.size)) % C)[:, None] * E + np.arange(E)
            kept = ring._index.next_rows[live.ravel()].copy()
            ring._index.rebuild(ring.head, ring.size)
            assert np.array_equal(kept, ring._index.next_rows[live.ravel()]), trial
        if ring.size > 1:
            ring.save(tmp_path / "r.npz")
            back = ReplayRing.load(tmp_path / "r.npz")
            a = ring.sample_transitions(32, torch.Generator().manual_seed(trial))
            b = back.sample_transitions(32, torch.Generator().manual_seed(trial))
            assert all(torch.equal(x, y) for x, y in zip(a[:-1], b[:-1], strict=True))


def test_host_side_store_writes_match_the_device_index():
    """The host index's side-store writes (numpy, ended envs only) leave the same slots, owners,
    losses and final observations as the device index's sync-free torch writes (CUDA's, run
    here on CPU); only the trash entries, which nothing reads, may differ."""
    rng = np.random.default_rng(2)
    for _ in range(60):
        C, E, P = int(rng.integers(2, 20)), int(rng.integers(1, 7)), int(rng.integers(1, 6))

        def mk(index_strategy, C=C, E=E, P=P):
            fields = {"obs": ((2,), torch.float32), "action": ((), torch.int64)}
            return ReplayRing(C, E, fields, side_capacity=P, index_strategy=index_strategy)

        host, sync_free = mk("host"), mk("device")
        for _ in range(int(rng.integers(1, 4 * C))):
            term = rng.random(E) < 0.3
            trunc = (rng.random(E) < 0.2) & ~term
            step = (
                rng.standard_normal((E, 2)).astype(np.float32),
                np.zeros(E, np.int64),
                np.zeros(E),
            )
            final = rng.standard_normal((E, 2)).astype(np.float32)
            for r in (host, sync_free):
                r.push_step(
                    *step,
                    terminated=term,
                    truncated=trunc,
                    final_obs=final if (term | trunc).any() else None,
                )
            if rng.random() < 0.2:
                mask, late = rng.random(E) < 0.5, rng.standard_normal((E, 2)).astype(np.float32)
                for r in (host, sync_free):
                    r.attach_final_obs((r.head - 1) % C, late, mask)
        a, b = host.state_dict()["tensors"], sync_free.state_dict()["tensors"]
        for key in a:
            if key != "generator":
                x, y = a[key], b[key]
                if key in ("side.obs", "side.slot"):  # without the trash entry
                    x, y = x[:-1], y[:-1]
                assert torch.equal(x, y), key
        assert host.side_lost == sync_free.side_lost
