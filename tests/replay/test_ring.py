"""ReplayRing core: layout, writes, wrap-around, sampling, invariants, terminal semantics, state.

Every test takes the ``device`` fixture: CPU always, CUDA when a GPU is present (skipped else).
"""

import json
import pickle

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.replay import FieldSpec, ReplayRing, RingInvariantError

torch.set_num_threads(1)

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def gen(device, seed=0):
    return torch.Generator(device=device).manual_seed(seed)


def make(device, capacity=5, num_envs=2, **kw):
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)}
    fields.update(kw.pop("fields", {}))
    return ReplayRing(capacity, num_envs, fields, device, **kw)


def push(ring, k, *, term=None, trunc=None, final=None, is_first=None, **kw):
    """Row k: obs = k (+100 * env), action = -k, reward = k, cost = k / 2."""
    E = ring.num_envs
    obs = torch.full((E, 3), float(k), device=ring.device) + 100 * torch.arange(
        E, device=ring.device
    ).view(E, 1)
    ring.push_step(
        obs,
        torch.full((E, 2), -float(k), device=ring.device),
        np.full(E, float(k)),
        cost=np.full(E, k / 2),
        terminated=np.zeros(E, bool) if term is None else np.asarray(term),
        truncated=np.zeros(E, bool) if trunc is None else np.asarray(trunc),
        final_obs=final,
        is_first=is_first,
        **kw,
    )


def step_of(obs_value):
    return obs_value % 100


# ---------------------------------------------------------------- layout and writes


def test_shapes_dtypes_and_standard_fields(device):
    ring = make(device, capacity=7, num_envs=3, fields={"logp": ((), torch.float64)})
    expect = {
        "obs": ((7, 3, 3), torch.float32),
        "action": ((7, 3, 2), torch.float32),
        "reward": ((7, 3), torch.float32),
        "cost": ((7, 3), torch.float32),
        "is_first": ((7, 3), torch.bool),
        "continue_": ((7, 3), torch.float32),
        "episode_id": ((7, 3), torch.int32),
        "logp": ((7, 3), torch.float64),
    }
    got = {n: (tuple(t.shape), t.dtype) for n, t in ring.fields.items()}
    assert got == expect
    assert all(t.device.type == device.type for t in ring.fields.values())
    assert ring.user_fields == ("logp",)
    assert (ring.head, ring.size, ring.total_steps) == (0, 0, 0)
    assert ring.nbytes >= sum(t.numel() * t.element_size() for t in ring.fields.values())


def test_from_spaces(device):
    import gymnasium as gym

    obs_space = gym.spaces.Box(0, 255, (4, 4, 3), np.uint8)
    ring = ReplayRing.from_spaces(4, 2, obs_space, gym.spaces.Discrete(3), device)
    assert ring["obs"].dtype == torch.uint8 and ring["obs"].shape == (4, 2, 4, 4, 3)
    assert ring["action"].dtype == torch.int64 and ring["action"].shape == (4, 2)
    box64 = gym.spaces.Box(-1, 1, (2,), np.float64)
    ring = ReplayRing.from_spaces(4, 2, box64, box64, device)
    assert ring["obs"].dtype == torch.float32 and ring["action"].dtype == torch.float32


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"obs": ((3,), torch.float32)}, "'obs' and 'action'"),
        ({"obs": (3, torch.float32), "action": ((), torch.int64)}, "FieldSpec"),
        ({"obs": ((3,), "float32"), "action": ((), torch.int64)}, "FieldSpec"),
        (
            {"obs": ((3,), torch.float32), "action": ((), torch.int64), "reward": ((), torch.int8)},
            "reserved",
        ),
        (
            {
                "obs": ((3,), torch.float32),
                "action": ((), torch.int64),
                "next_obs": ((3,), torch.float32),
            },
            "reserved",
        ),
    ],
)
def test_bad_fields_are_refused(fields, match):
    with pytest.raises(ConfigError, match=match):
        ReplayRing(4, 1, fields)


@pytest.mark.parametrize(
    ("kw", "match"), [({"capacity": 1}, "capacity"), ({"num_envs": 0}, "num_envs")]
)
def test_bad_sizes_are_refused(kw, match):
    args = {"capacity": 4, "num_envs": 1} | kw
    with pytest.raises(ConfigError, match=match):
        ReplayRing(
            args["capacity"],
            args["num_envs"],
            {"obs": ((1,), torch.float32), "action": ((), torch.int64)},
        )


def test_write_checks_name_field_and_value(device):
    ring = make(device)
    E = 2
    ok = {
        "obs": torch.zeros(E, 3, device=device),
        "action": torch.zeros(E, 2, device=device),
        "reward": np.zeros(E),
    }
    flags = {"terminated": np.zeros(E, bool), "truncated": np.zeros(E, bool)}
    with pytest.raises(ConfigError, match=r"'obs'.*shape \(2, 4\).*expected shape \(2, 3\)"):
        ring.push_step(**(ok | {"obs": torch.zeros(E, 4, device=device)}), **flags)
    with pytest.raises(ConfigError, match=r"'action'.*torch.float64.*expected dtype torch.float32"):
        ring.push_step(
            **(ok | {"action": torch.zeros(E, 2, dtype=torch.float64, device=device)}), **flags
        )
    with pytest.raises(ConfigError, match=r"'obs'.*tensor on meta.*device"):
        ring.push_step(**(ok | {"obs": torch.zeros(E, 3, device="meta")}), **flags)
    with pytest.raises(ConfigError, match=r"'terminated'.*float64"):
        ring.push_step(**ok, terminated=np.zeros(E), truncated=np.zeros(E, bool))
    with pytest.raises(ConfigError, match=r"'reward'.*shape \(3,\)"):
        ring.push_step(**(ok | {"reward": np.zeros(3)}), **flags)
    with pytest.raises(ConfigError, match=r"'t'.*total_steps=0"):
        ring.push_step(**ok, **flags, t=1)
    with pytest.raises(ConfigError, match=r"unknown fields \['logp'\]"):
        ring.push_step(**ok, **flags, logp=np.zeros(E))
    with pytest.raises(ConfigError, match="first step of every env"):
        ring.push_step(**ok, **flags, is_first=np.array([True, False]))
    assert ring.total_steps == 0  # failed writes change nothing
    ring.push_step(**ok, **flags, t=0)
    ring.push_step(**ok, **flags, t=1)
    assert ring.total_steps == 2


def test_uint8_obs_refuse_float_arrays(device):
    ring = ReplayRing(3, 1, {"obs": ((2,), torch.uint8), "action": ((), torch.int64)}, device)
    with pytest.raises(ConfigError, match=r"'obs'.*float64.*uint8"):
        ring.push_step(
            np.zeros((1, 2)),
            np.zeros(1, np.int64),
            np.zeros(1),
            terminated=[False],
            truncated=[False],
        )
    ring.push_step(
        np.full((1, 2), 7, np.uint8),
        np.zeros(1, np.int64),
        [0.5],
        terminated=[False],
        truncated=[False],
    )
    assert ring["obs"][0].tolist() == [[7, 7]] and ring["reward"][0].item() == 0.5


def test_obs_slot_is_a_view_that_writes_through(device):
    ring = make(device)
    slot = ring.obs_slot(ring.head)
    assert slot.is_contiguous() and slot.data_ptr() == ring["obs"][0].data_ptr()
    slot.copy_(torch.full((2, 3), 42.0, device=device))
    ring.push_step(
        None,
        torch.zeros(2, 2, device=device),
        np.zeros(2),
        terminated=np.zeros(2, bool),
        truncated=np.zeros(2, bool),
    )
    assert bool((ring["obs"][0] == 42).all())
    with pytest.raises(ConfigError, match="row"):
        ring.obs_slot(5)


# ---------------------------------------------------------------- wrap-around


def test_wrap_around_capacity_5_samples_only_newest_steps(device):
    ring = make(device, capacity=5, num_envs=2)
    for k in range(12):
        push(ring, k)
    assert (ring.size, ring.head, ring.total_steps, ring.oldest) == (5, 2, 12, 2)
    # physical rows: 10, 11, 7, 8, 9
    assert ring["obs"][:, 0, 0].tolist() == [10, 11, 7, 8, 9]
    g = gen(device)
    for seq_len in (1, 3, 5):
        seq = ring.sample_sequences(64, seq_len, g, return_indices=True)
        steps = step_of(seq["obs"][..., 0]).cpu()
        assert steps.min() >= 7 and steps.max() <= 11
        # contiguous in time: never across the write pointer (11 -> 7)
        assert bool((steps[1:] - steps[:-1] == 1).all())
        env = seq["env_index"].cpu()
        assert bool((seq["obs"][0, :, 0].cpu() // 100 == env).all())
        assert bool((seq["step_index"].cpu() == steps[0]).all())
    # 5 windows of length 1 cover all 5 newest steps
    seen = set(step_of(ring.sample_sequences(200, 1, g)["obs"][0, :, 0]).cpu().tolist())
    assert seen == {7, 8, 9, 10, 11}
    with pytest.raises(ConfigError, match="seq_len"):
        ring.sample_sequences(2, 6, g)
    tr = ring.sample_transitions(500, g)
    s = step_of(tr.obs[:, 0]).cpu()
    assert set(s.tolist()) == {7, 8, 9, 10}  # the newest step has no successor yet
    assert bool((step_of(tr.next_obs[:, 0]).cpu() == s + 1).all())
    assert bool((tr.reward.cpu() == s).all()) and bool((tr.action[:, 0].cpu() == -s).all())
    assert bool((tr.cost.cpu() == s / 2).all()) and bool((tr.done == 0).all())
    assert bool(tr.valid.all())


def test_sequences_before_full_start_at_row_zero(device):
    ring = make(device, capacity=8, num_envs=1)
    for k in range(3):
        push(ring, k)
    seq = ring.sample_sequences(50, 3, gen(device))
    assert bool((seq["obs"][:, :, 0].cpu() == torch.tensor([[0.0], [1.0], [2.0]])).all())


# ---------------------------------------------------------------- sampling


def test_same_generator_seed_gives_identical_samples(device):
    ring = make(device, capacity=16, num_envs=3)
    for k in range(40):
        push(
            ring,
            k,
            term=[k % 7 == 6, False, k % 5 == 4],
            final=torch.zeros(3, 3, device=device) + 1000,
        )
    a = ring.sample_sequences(8, 4, gen(device, 3), return_indices=True)
    b = ring.sample_sequences(8, 4, gen(device, 3), return_indices=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = ring.sample_sequences(8, 4, gen(device, 4), return_indices=True)
    assert not torch.equal(a["t_index"], c["t_index"]) or not torch.equal(
        a["env_index"], c["env_index"]
    )
    ta, tb = (
        ring.sample_transitions(32, gen(device, 5)),
        ring.sample_transitions(32, gen(device, 5)),
    )
    assert torch.equal(ta.obs, tb.obs) and torch.equal(ta.next_obs, tb.next_obs)
    with pytest.raises(ConfigError, match=r"torch\.Generator is required"):
        ring.sample_sequences(2, 2, None)
    with pytest.raises(ConfigError, match=r"torch\.Generator is required"):
        ring.sample_transitions(2, np.random.default_rng(0))


def test_windows_with_is_first_are_returned_unchanged(device):
    ring = make(device, capacity=20, num_envs=1)
    for k in range(20):
        push(ring, k, term=[k % 4 == 3], final=torch.zeros(1, 3, device=device))
    seq = ring.sample_sequences(200, 6, gen(device), return_indices=True)
    steps = step_of(seq["obs"][..., 0]).cpu()
    first = seq["is_first"].cpu()
    # row k starts an episode iff k % 4 == 0: kept as is, anywhere in the window
    assert bool((first == (steps % 4 == 0)).all())
    assert bool(first[1:].any()) and not bool(first[0].all())
    ep = seq["episode_id"].cpu()
    assert bool((ep == steps // 4).all())
    forced = ring.sample_sequences(200, 6, gen(device), force_first=True)
    assert bool(forced["is_first"][0].all())
    assert torch.equal(forced["is_first"][1:].cpu(), first[1:])  # same draws, only row 0 changed
    assert ring["is_first"][1].item() is False  # the ring itself is untouched


def test_fields_subset_and_unknown_field(device):
    ring = make(device)
    push(ring, 0)
    push(ring, 1)
    out = ring.sample_sequences(3, 2, gen(device), fields=("obs", "reward"))
    assert sorted(out) == ["obs", "reward"]
    with pytest.raises(ConfigError, match="unknown field"):
        ring.sample_sequences(3, 2, gen(device), fields=("nope",))


# ---------------------------------------------------------------- terminal vs truncation


def test_terminal_and_truncation_semantics_same_step_layout(device):
    """Same-step autoreset: env 0 terminates at step 2, env 1 truncates at step 2."""
    ring = make(device, capacity=8, num_envs=2)
    final = torch.full((2, 3), 500.0, device=device) + torch.tensor([[0.0], [1.0]], device=device)
    for k in range(5):
        ended = k == 2
        push(ring, k, term=[ended, False], trunc=[False, ended], final=final if ended else None)
    assert ring["continue_"][:, 0][:5].tolist() == [1, 1, 0, 1, 1]
    assert ring["continue_"][:, 1][:5].tolist() == [1, 1, 1, 1, 1]  # truncation continues
    assert ring["is_first"][:5].tolist() == [
        [True, True],
        [False, False],
        [False, False],
        [True, True],
        [False, False],
    ]
    assert ring["episode_id"][:5].tolist() == [[0, 0], [0, 0], [0, 0], [1, 1], [1, 1]]
    ring.check_invariants()
    tr = ring.sample_transitions(400, gen(device))
    s = step_of(tr.obs[:, 0]).cpu()
    e = tr.env_index.cpu()
    at2 = s == 2
    assert bool(at2.any())
    # the final observation comes from the side store, never the reset obs of row 3
    assert bool((tr.next_obs[:, 0].cpu()[at2] == 500 + e[at2]).all())
    done = tr.done.cpu()
    assert bool((done[at2 & (e == 0)] == 1).all())  # termination: done
    assert bool((done[at2 & (e == 1)] == 0).all())  # truncation: bootstrap
    assert bool((done[~at2] == 0).all())
    assert bool((step_of(tr.next_obs[:, 0]).cpu()[~at2] == s[~at2] + 1).all())


def test_next_step_layout_final_row_is_never_a_transition_source(device):
    """Next-step autoreset: step 2 terminates, row 3 holds the final obs, row 4 is_first."""
    ring = make(device, capacity=8, num_envs=1)
    firsts = [True, False, False, False, True, False]
    for k in range(6):
        push(ring, k, term=[k == 2], is_first=[firsts[k]])
    assert ring["episode_id"][:6, 0].tolist() == [0, 0, 0, 0, 1, 1]
    ring.check_invariants()
    tr = ring.sample_transitions(300, gen(device))
    s = step_of(tr.obs[:, 0]).cpu()
    assert set(s.tolist()) == {0, 1, 2, 4}
    assert bool((step_of(tr.next_obs[:, 0]).cpu() == s + 1).all())
    assert bool((tr.done.cpu() == (s == 2).float()).all())


def test_newest_step_is_sampled_with_next_obs(device):
    ring = make(device, capacity=4, num_envs=1)
    for k in range(6):
        push(ring, k)
    nxt = torch.full((1, 3), 6.0, device=device)
    tr = ring.sample_transitions(300, gen(device), next_obs=nxt)
    s = step_of(tr.obs[:, 0]).cpu()
    assert set(s.tolist()) == {2, 3, 4, 5}
    assert bool((step_of(tr.next_obs[:, 0]).cpu() == s + 1).all())


def test_side_store_loss_excludes_transitions_and_is_counted(device):
    ring = make(device, capacity=50, num_envs=2, side_capacity=3)
    final = torch.full((2, 3), 900.0, device=device)
    for k in range(40):
        ended = k % 2 == 1  # both envs end every other step: 2 entries per end
        push(ring, k, term=[ended, ended], final=final if ended else None)
    # 40 entries written into 3 slots, all rows still in the ring: 37 lost
    assert ring.side_lost == 37
    tr = ring.sample_transitions(2000, gen(device))
    s = step_of(tr.obs[:, 0]).cpu()
    ended = s % 2 == 1
    assert bool((tr.next_obs[:, 0].cpu()[ended] == 900).all())
    assert int(ended.sum()) > 0 and set(s[ended].tolist()) <= {37, 39}
    assert bool((step_of(tr.next_obs[:, 0]).cpu()[~ended] == s[~ended] + 1).all())


def test_side_entries_of_overwritten_rows_are_not_reported_lost(device):
    ring = make(device, capacity=4, num_envs=1, side_capacity=2)
    for k in range(30):
        push(ring, k, term=[k % 4 == 3], final=torch.full((1, 3), 900.0, device=device))
    assert ring.side_lost == 0
    tr = ring.sample_transitions(200, gen(device))
    s = step_of(tr.obs[:, 0]).cpu()
    assert bool((tr.next_obs[:, 0].cpu()[s == 27] == 900).all())


def test_no_transition_yet(device):
    ring = make(device)
    push(ring, 0)
    with pytest.raises(ConfigError, match="no transition stored yet"):
        ring.sample_transitions(4, gen(device))


# ---------------------------------------------------------------- invariants


def filled(device, debug=False):
    ring = make(device, capacity=6, num_envs=2, debug_checks=debug)
    for k in range(9):
        push(ring, k, term=[k % 3 == 2, False], final=torch.zeros(2, 3, device=device))
    return ring


def test_invariants_pass_on_good_data(device):
    ring = filled(device, debug=True)
    ring.check_invariants()


@pytest.mark.parametrize(
    ("corrupt", "what", "env", "step"),
    [
        # physical row 4 = step 4 (oldest row is 3); env 1 never ends
        (lambda r: r["episode_id"][4, 1].fill_(5), "changed without is_first", 1, 4),
        (lambda r: r["is_first"][4, 1].fill_(True), "not the previous episode_id \\+ 1", 1, 4),
        (lambda r: r["continue_"][5, 0].fill_(0.5), "continue_ must be 0.0 or 1.0", 0, 5),
        # step 6 starts episode 2 of env 0: its id must be 1 + 1
        (lambda r: r["episode_id"][0, 0].fill_(3), "not the previous episode_id \\+ 1", 0, 6),
    ],
)
def test_each_invariant_violation_raises_with_env_and_step(device, corrupt, what, env, step):
    ring = filled(device)
    corrupt(ring)
    with pytest.raises(RingInvariantError, match=f"env {env}, step {step}.*{what}") as info:
        ring.check_invariants()
    assert (info.value.env, info.value.step) == (env, step)
    assert isinstance(info.value, DataError)


def test_debug_checks_raise_on_the_next_write(device):
    ring = filled(device, debug=True)
    ring["episode_id"][4, 1] = 7
    with pytest.raises(RingInvariantError, match="env 1"):
        push(ring, 9)


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
    back = ReplayRing.load(path, device)
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
    assert back.total_steps == ring.total_steps


def test_memory_budget_refuses_clearly():
    fields = {"obs": FieldSpec((64, 64, 3), torch.uint8), "action": FieldSpec((6,), torch.float32)}
    need = ReplayRing.nbytes_required(
        1000, 16, {**fields, "reward": FieldSpec((), torch.float32)}, 10
    )
    with pytest.raises(ConfigError, match=r"needs [\d,]+ bytes.*only 1,000,000 bytes are allowed"):
        ReplayRing(1000, 16, fields, memory_budget=1_000_000)
    assert need > 1000 * 16 * 64 * 64 * 3
    with pytest.raises(ConfigError, match="available"):
        ReplayRing(10**9, 16, fields)  # ~200 TB


def test_clear_keeps_memory_and_restarts_episodes(device):
    ring = filled(device)
    ptr = ring["obs"].data_ptr()
    ring.clear()
    assert (ring.size, ring.head, ring.total_steps) == (0, 0, 0)
    push(ring, 0)
    assert ring["obs"].data_ptr() == ptr and ring["episode_id"][0].tolist() == [0, 0]
    assert ring["is_first"][0].tolist() == [True, True]


# ---------------------------------------------------------------- the CUDA code paths, on CPU


def test_device_code_paths_give_the_same_ring_and_valid_samples():
    """Torch-only writes and sync-free sampling (the CUDA paths) exercised on CPU."""
    a = make("cpu", capacity=12, num_envs=3)
    b = make("cpu", capacity=12, num_envs=3)
    b._np.clear()  # no numpy write path: every write goes through torch copy_
    b._sync_free = True  # candidate draws + torch.where, as on CUDA
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


def test_no_transition_with_a_successor_raises():
    ring = make("cpu", capacity=4, num_envs=1)
    push(ring, 0, is_first=[True])
    push(ring, 1, is_first=[True])  # row 0 ends without a final obs: it has no successor
    with pytest.raises(DataError, match="no valid transition"):
        ring.sample_transitions(3, gen("cpu"))


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
    """Every tensor, counter, host-side flag and the generator state of a ring, copied."""
    state = ring.state_dict()
    return {
        "tensors": {k: v.detach().cpu().clone() for k, v in state["tensors"].items()},
        "counters": (ring.head, ring.size, ring.total_steps, ring.seed, ring.side_lost),
        "flags": {
            name: getattr(ring, name).copy()
            for name in (
                "_row_has_side",
                "_next",
                "_cur_episode",
                "_ended",
            )
        },
    }


def same_snapshot(a, b, *, exact_side_flag=True):
    """Equal snapshots; ``_row_has_side`` may be skipped: writes leave it True for a row whose
    side entries were all dropped (a hint to look), load_state_dict recomputes it exactly."""
    flags = [n for n in a["flags"] if exact_side_flag or n != "_row_has_side"]
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
            _bad_tensor("generator", lambda t: torch.zeros_like(t)),
            r"'generator' is not a valid generator state",
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


def test_config_errors_of_writes_name_the_ring_as_source(device):
    ring = make(device)
    E = 2
    ok = {
        "obs": torch.zeros(E, 3, device=device),
        "action": torch.zeros(E, 2, device=device),
        "reward": np.zeros(E),
        "terminated": np.zeros(E, bool),
        "truncated": np.zeros(E, bool),
    }
    calls = {
        "t": lambda: ring.push_step(**ok, t=3),
        "is_first": lambda: ring.push_step(**ok, is_first=np.array([True, False])),
        "row": lambda: ring.obs_slot(-1),
    }
    for key, call in calls.items():
        with pytest.raises(ConfigError) as info:
            call()
        assert (info.value.key, info.value.source) == (key, "ReplayRing")
        assert str(info.value).startswith(f"ReplayRing: invalid value for {key!r}")
    with pytest.raises(ConfigError) as info:
        ring.attach_final_obs(5, torch.zeros(E, 3, device=device), np.ones(E, bool))
    assert (info.value.key, info.value.value, info.value.source) == ("row", 5, "ReplayRing")


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
    back = ReplayRing.load(tmp_path / "r.npz", device)
    assert same_snapshot(snapshot(back), snapshot(ring), exact_side_flag=False)
    has_side = (ring._side_slot >= 0).any(dim=1).cpu().numpy()
    assert np.array_equal(back._row_has_side, has_side) and (ring._row_has_side >= has_side).all()
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
    assert torch.equal(back._side_obs.cpu(), ring._side_obs.cpu())
    back.sample_transitions(8, back.generator)


# ------------------------------------------------------- sampled transitions = transitions_at
@pytest.mark.parametrize("obs_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pending", [False, True])
def test_sampled_transitions_equal_transitions_at(obs_dtype, pending):
    """The CPU sampler (numpy index math; numpy or torch next-obs overrides by dtype) returns,
    entry by entry, what ``transitions_at`` (the device-generic path) gives for its indices."""
    rng = np.random.default_rng(3)
    C, E = 23, 4
    ring = ReplayRing(
        C, E, {"obs": ((3,), obs_dtype), "action": ((2,), torch.float32)}, side_capacity=6
    )
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
                is_first=(rng.random(E) < 0.1) | ring._ended if trial % 4 == 1 else None,
            )
            if rng.random() < 0.15:
                ring.attach_final_obs(
                    (ring.head - 1) % C,
                    rng.standard_normal((E, 2)).astype(np.float32),
                    rng.random(E) < 0.5,
                )
            live = ((ring.oldest + np.arange(ring.size)) % C)[:, None] * E + np.arange(E)
            kept = ring._next[live.ravel()].copy()
            ring._rebuild_next()
            assert np.array_equal(kept, ring._next[live.ravel()]), trial
        if ring.size > 1:
            ring.save(tmp_path / "r.npz")
            back = ReplayRing.load(tmp_path / "r.npz")
            a = ring.sample_transitions(32, torch.Generator().manual_seed(trial))
            b = back.sample_transitions(32, torch.Generator().manual_seed(trial))
            assert all(torch.equal(x, y) for x, y in zip(a[:-1], b[:-1], strict=True))


def test_cpu_side_store_writes_match_the_sync_free_path():
    """The CPU side-store writes (numpy, ended envs only) leave the same slots, owners, losses
    and final observations as the sync-free torch path used on CUDA (run here on CPU); only
    the trash entries, which nothing reads, may differ."""
    rng = np.random.default_rng(2)
    for _ in range(60):
        C, E, P = int(rng.integers(2, 20)), int(rng.integers(1, 7)), int(rng.integers(1, 6))

        def mk(C=C, E=E, P=P):
            return ReplayRing(
                C, E, {"obs": ((2,), torch.float32), "action": ((), torch.int64)}, side_capacity=P
            )

        host, sync_free = mk(), mk()
        sync_free._sync_free = True
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


def test_transitions_at_rejects_out_of_range_or_float_indices():
    ring = filled("cpu")
    ok = ring.transitions_at([0, 1], [0, 1])
    assert ok.obs.shape[0] == 2
    for kw, match in (
        ({"t_index": [ring.capacity], "env_index": [0]}, "t_index"),
        ({"t_index": [-1], "env_index": [0]}, "t_index"),
        ({"t_index": [0], "env_index": [ring.num_envs]}, "env_index"),
        ({"t_index": np.array([0.5]), "env_index": [0]}, "integer"),
        ({"t_index": torch.tensor([0]), "env_index": torch.tensor([-3])}, "env_index"),
    ):
        with pytest.raises(ConfigError, match=match):
            ring.transitions_at(kw["t_index"], kw["env_index"])


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_shape_free_unsigned_fields_torch_cannot_gather_are_refused_up_front(dtype):
    with pytest.raises(ConfigError, match=r"fields\['u'\].*shape \(1,\)"):
        make("cpu", fields={"u": ((), dtype)})
    ring = make("cpu", fields={"u": ((1,), dtype)})  # with a shape torch gathers it
    for k in range(3):
        push(ring, k, u=torch.full((2, 1), 7, dtype=dtype))
    assert ring.sample_transitions(4, ring.generator).extras["u"].dtype == dtype


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
