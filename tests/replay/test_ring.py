"""ReplayRing core: layout, writes, wrap-around, sampling, invariants, terminal semantics.

Persistence (state dicts, files, pickling, malformed inputs) is in ``test_ring_persist.py``.
Tests taking the ``device`` fixture run on CPU with each index strategy, and on CUDA when a GPU
is present (see ``conftest.py``).
"""

import pickle

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.replay import FieldSpec, ReplayRing, RingInvariantError
from tests.replay.ring_helpers import filled, gen, make, push, step_of, strategy

torch.set_num_threads(1)


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
    ring = ReplayRing.from_spaces(4, 2, obs_space, gym.spaces.Discrete(3), device, **strategy())
    assert ring["obs"].dtype == torch.uint8 and ring["obs"].shape == (4, 2, 4, 4, 3)
    assert ring["action"].dtype == torch.int64 and ring["action"].shape == (4, 2)
    box64 = gym.spaces.Box(-1, 1, (2,), np.float64)
    ring = ReplayRing.from_spaces(4, 2, box64, box64, device, **strategy())
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
    fields = {"obs": ((2,), torch.uint8), "action": ((), torch.int64)}
    ring = ReplayRing(3, 1, fields, device, **strategy())
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


def test_start_episodes_at_next_push_sets_the_default_is_first_once(device):
    ring = make(device, num_envs=3)
    push(ring, 0)
    ring.start_episodes_at_next_push(np.array([False, True, False]))
    push(ring, 1)
    push(ring, 2)
    assert ring["is_first"][:3].tolist() == [[True] * 3, [False, True, False], [False] * 3]
    assert ring["episode_id"][2].tolist() == [0, 1, 0]
    ring.start_episodes_at_next_push(np.ones(3, bool))
    push(ring, 3, is_first=np.zeros(3, bool))  # an explicit is_first decides
    assert not ring["is_first"][3].any()
    ring.check_invariants()
    with pytest.raises(ConfigError) as info:
        ring.start_episodes_at_next_push(np.ones(2, bool))
    assert (info.value.key, info.value.source) == ("mask", "ReplayRing")


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
    assert bool(tr.valid.all())  # about half the steps lost their entry: still never returned
    s = step_of(tr.obs[:, 0]).cpu()
    ended = s % 2 == 1
    assert bool((tr.next_obs[:, 0].cpu()[ended] == 900).all())
    assert int(ended.sum()) > 0 and set(s[ended].tolist()) <= {37, 39}
    assert bool((step_of(tr.next_obs[:, 0]).cpu()[~ended] == s[~ended] + 1).all())


def test_more_episode_ends_in_one_step_than_side_slots_drop_the_first_ones(device):
    """Five envs end at once into a side store of two: the first three entries are dropped and
    counted, never handed out with another env's final observation."""
    ring = make(device, capacity=8, num_envs=5, side_capacity=2)
    final = torch.full((5, 3), 900.0, device=device) + torch.arange(5.0, device=device)[:, None]
    for k in range(4):
        push(ring, k, term=[k == 1] * 5, final=final if k == 1 else None)
    assert ring.side_lost == 3
    at = ring.transitions_at([1] * 5, list(range(5)))
    assert at.valid.tolist() == [False, False, False, True, True]
    assert at.next_obs[3:, 0].tolist() == [903.0, 904.0]
    tr = ring.sample_transitions(500, gen(device))
    assert bool(tr.valid.all())
    s, e = step_of(tr.obs[:, 0]).cpu(), tr.env_index.cpu()
    assert set(e[s == 1].tolist()) == {3, 4}
    assert bool((tr.next_obs[:, 0].cpu()[s == 1] == 900 + e[s == 1]).all())
    ring.attach_final_obs(1, final + 50, np.ones(5, bool))  # the same through attach_final_obs
    at = ring.transitions_at([1] * 5, list(range(5)))
    assert at.valid.tolist() == [False, False, False, True, True]
    assert at.next_obs[3:, 0].tolist() == [953.0, 954.0]


def test_side_entries_of_overwritten_rows_are_not_reported_lost(device):
    ring = make(device, capacity=4, num_envs=1, side_capacity=2)
    for k in range(30):
        push(ring, k, term=[k % 4 == 3], final=torch.full((1, 3), 900.0, device=device))
    assert ring.side_lost == 0
    tr = ring.sample_transitions(200, gen(device))
    s = step_of(tr.obs[:, 0]).cpu()
    assert bool((tr.next_obs[:, 0].cpu()[s == 27] == 900).all())


def test_index_strategy_defaults_to_the_device_and_is_checked():
    fields = {"obs": ((1,), torch.float32), "action": ((), torch.int64)}
    assert ReplayRing(4, 1, fields).index_strategy == "host"
    assert ReplayRing(4, 1, fields, index_strategy="device").index_strategy == "device"
    with pytest.raises(ConfigError, match=r"'index_strategy'.*'nope'.*\['device', 'host'\]"):
        ReplayRing(4, 1, fields, index_strategy="nope")
    with pytest.raises(ConfigError, match=r"'index_strategy'.*needs a CPU ring, not meta"):
        ReplayRing(4, 1, fields, "meta", index_strategy="host")


def test_no_transition_yet(device):
    ring = make(device)
    push(ring, 0)
    with pytest.raises(ConfigError, match="no transition stored yet"):
        ring.sample_transitions(4, gen(device))


# ---------------------------------------------------------------- invariants


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


def test_invariant_error_keeps_its_fields_and_notes_through_pickle():
    error = RingInvariantError("env 1, step 4: changed without is_first", env=1, step=4, row=4)
    error.add_note("raised in the sampler's process")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert (again.env, again.step, again.row) == (1, 4, 4)
    assert again.__notes__ == ["raised in the sampler's process"]


def test_debug_checks_raise_on_the_next_write(device):
    ring = filled(device, debug=True)
    ring["episode_id"][4, 1] = 7
    with pytest.raises(RingInvariantError, match="env 1"):
        push(ring, 9)


# ---------------------------------------------------------------- memory budget, clear


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


# ---------------------------------------------------------------- argument checks


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


UNSIGNED = {
    torch.uint16: (np.uint16, torch.int16),
    torch.uint32: (np.uint32, torch.int32),
    torch.uint64: (np.uint64, torch.int64),
}


@pytest.mark.parametrize("dtype", list(UNSIGNED), ids=str)
def test_unsigned_fields_take_numpy_writes_and_unsigned_obs_are_refused_up_front(dtype):
    np_dtype, signed = UNSIGNED[dtype]
    top = np.iinfo(np_dtype).max
    ring = make("cpu", fields={"u": ((2,), dtype)})
    for k in range(3):  # numpy arrays of the field's dtype (refused: "numpy lacks" it)
        push(ring, k, u=np.array([[top - k, k], [k, top]], dtype=np_dtype))
    assert ring["u"].dtype == dtype
    stored = ring["u"][:3, 0].view(signed).numpy().view(np_dtype)  # the bits, read by numpy
    assert stored.tolist() == [[top - k, k] for k in range(3)]
    # obs: the side store copies rows by index, which torch lacks for these dtypes
    with pytest.raises(ConfigError, match=r"fields\['obs'\].*store observations as torch.int"):
        make("cpu", fields={"obs": ((3,), dtype)})


def test_from_spaces_widens_unsigned_boxes_and_keeps_their_values():
    import gymnasium as gym

    box = gym.spaces.Box(0, 65535, (2,), np.uint16)
    ring = ReplayRing.from_spaces(4, 2, box, gym.spaces.Discrete(2))
    assert ring["obs"].dtype == torch.int32
    obs = [np.array([[65530 + k, k], [40000, k]], np.uint16) for k in range(3)]
    for k in range(3):
        done = np.array([k == 1, False])
        ring.push_step(
            obs[k],
            np.zeros(2, np.int64),
            np.ones(2),
            terminated=done,
            truncated=np.zeros(2, bool),
            final_obs=obs[0],
        )
    assert ring["obs"][:3].tolist() == [o.tolist() for o in obs]
    ended = ring.transitions_at([1], [0])  # env 0's episode ended at row 1: its final obs
    assert ended.next_obs.tolist() == [[65530, 0]] and bool(ended.done[0])


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_shape_free_unsigned_fields_torch_cannot_gather_are_refused_up_front(dtype):
    with pytest.raises(ConfigError, match=r"fields\['u'\].*shape \(1,\)"):
        make("cpu", fields={"u": ((), dtype)})
    ring = make("cpu", fields={"u": ((1,), dtype)})  # with a shape torch gathers it
    for k in range(3):
        push(ring, k, u=torch.full((2, 1), 7, dtype=dtype))
    assert ring.sample_transitions(4, ring.generator).extras["u"].dtype == dtype
