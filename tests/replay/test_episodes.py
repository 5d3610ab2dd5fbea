"""Recorded episodes (datapacks' .npz) into a ReplayRing."""

import json
import weakref

import numpy as np
import pytest
import torch

from gymcurric.datapacks import iter_episodes, load_datapacks
from gymcurric.errors import ConfigError, DataError
from gymcurric.replay import ReplayRing
from gymcurric.replay.episodes import EpisodeLoadReport, extend_from_episodes
from gymcurric.replay.opcount import count_ops


def episode(k, length, terminated):
    """obs = 1000 * k + step (final obs included), action = step, reward = k + step / 10."""
    steps = np.arange(length + 1, dtype=np.float32)
    return {
        "obs": np.stack([1000 * k + steps, -steps], axis=1),
        "action": np.arange(length, dtype=np.int64),
        "reward": k + np.arange(length) / 10,
        "cost": np.full(length, 0.5),
        "terminated": terminated,
    }


def ring(num_envs=2, capacity=64):
    return ReplayRing(
        capacity, num_envs, {"obs": ((2,), torch.float32), "action": ((), torch.int64)}
    )


def write_packs(tmp_path, specs):
    (tmp_path / "ep").mkdir()
    records = []
    for k, (length, term) in enumerate(specs):
        np.savez(tmp_path / "ep" / f"e{k}.npz", **episode(k, length, term))
        records.append(
            {"pack_id": f"p{k}", "task_type": "t", "env_id": "gymcurric/Grid-v0", "tier": 1,
             "episode": f"ep/e{k}.npz"}
        )  # fmt: skip
    records.append({"pack_id": "none", "task_type": "t", "env_id": "x", "tier": 0})
    (tmp_path / "packs.json").write_text(json.dumps(records))
    return load_datapacks(tmp_path)


def test_datapack_episodes_into_a_two_env_ring(tmp_path):
    packs = write_packs(tmp_path, [(5, True), (3, False), (4, True), (2, False)])
    r = ring()
    report = r.extend_from_episodes(iter_episodes(packs))
    # columns: env0 gets p0 (5 steps), env1 gets p1 (3) + p2 (4) ... greedy by queued steps
    assert isinstance(report, EpisodeLoadReport)
    assert report.episodes == 4 and report.steps + report.dropped_steps == 14
    assert report.rows == r.total_steps and report.steps == 2 * report.rows
    r.check_invariants()
    n = r.size
    obs = r["obs"][:n, :, 0]
    k, step = obs // 1000, obs % 1000
    assert torch.equal(r["is_first"][:n], step == 0)
    assert torch.equal(r["action"][:n].float(), step)
    assert torch.allclose(r["reward"][:n], k + step / 10)
    assert bool((r["cost"][:n] == 0.5).all())
    lengths = torch.tensor([5, 3, 4, 2])
    terminal = torch.tensor([True, False, True, False])
    last = step == lengths[k.long()] - 1
    assert torch.equal(r["continue_"][:n] == 0, last & terminal[k.long()])
    # every transition's next obs is the recorded one, final observations included
    tr = r.sample_transitions(500, torch.Generator().manual_seed(0))
    assert torch.equal(tr.next_obs[:, 0], tr.obs[:, 0] + 1)
    assert torch.equal(tr.next_obs[:, 1], tr.obs[:, 1] - 1)
    ks = (tr.obs[:, 0] // 1000).long()
    ends = tr.obs[:, 0] % 1000 == lengths[ks] - 1
    assert torch.equal(tr.done.bool(), ends & terminal[ks])


def test_cut_column_keeps_its_next_obs_and_next_push_starts_an_episode():
    r = ring(num_envs=2)
    report = extend_from_episodes(r, [episode(0, 6, True), episode(1, 2, True)])
    assert report == EpisodeLoadReport(episodes=2, rows=2, steps=4, dropped_steps=4)
    tr = r.transitions_at([1, 1], [0, 1])
    assert tr.next_obs[:, 0].tolist() == [2.0, 1002.0]  # cut mid-episode / final obs
    assert tr.done.tolist() == [0.0, 1.0]
    r.push_step(
        np.zeros((2, 2), np.float32), np.zeros(2, np.int64), np.zeros(2),
        terminated=np.zeros(2, bool), truncated=np.zeros(2, bool),
    )  # fmt: skip
    assert r["is_first"][2].tolist() == [True, True]
    r.check_invariants()


def test_obs_plus_next_obs_layout_and_errors():
    ep = episode(0, 3, False)
    alt = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:])
    a, b = ring(1), ring(1)
    extend_from_episodes(a, [ep])
    extend_from_episodes(b, [alt])
    assert torch.equal(a["obs"], b["obs"])
    g = torch.Generator().manual_seed(0)
    assert torch.equal(
        a.sample_transitions(20, g).next_obs,
        b.transitions_at(
            a.sample_transitions(20, torch.Generator().manual_seed(0)).t_index, [0] * 20
        ).next_obs,
    )
    with pytest.raises(DataError, match="'obs' must have T \\+ 1 = 4 rows"):
        extend_from_episodes(ring(1), [dict(ep, obs=ep["obs"][:3])])
    with pytest.raises(DataError, match="'reward' is missing"):
        extend_from_episodes(ring(1), [{"obs": ep["obs"], "action": ep["action"]}])
    with pytest.raises(DataError, match="cannot be stored"):
        u8 = ReplayRing(8, 1, {"obs": ((2,), torch.uint8), "action": ((), torch.int64)})
        extend_from_episodes(u8, [ep])
    with pytest.raises(ConfigError, match="'action'"):
        extend_from_episodes(ring(1), [dict(ep, action=ep["action"].astype(np.float32))])


@pytest.mark.parametrize("key", ["obs", "next_obs", "action", "reward", "cost", "terminated"])
def test_a_sparse_array_of_an_episode_is_refused_naming_it(key):
    # np.asarray of a sparse tensor is a raw TypeError from torch; dense tensors are read
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    r = ring(1)
    extend_from_episodes(r, [{n: torch.as_tensor(v) for n, v in ep.items()}])
    before = {k: v.clone() for k, v in r.state_dict()["tensors"].items()}
    ep[key] = torch.as_tensor(ep[key]).to_sparse()
    with pytest.raises(DataError, match=rf"episode 0: array '{key}' is a tensor of layout torch"):
        extend_from_episodes(r, [ep])
    after = r.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("key", ["obs", "next_obs", "action", "reward", "cost"])
def test_a_nested_array_of_an_episode_is_refused_naming_it(key):
    # torch.nested.nested_tensor's default kind is strided: the layout test let it through to
    # np.asarray, a raw RuntimeError (it has no shape)
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    r = ring(1)
    extend_from_episodes(r, [ep])
    before = {k: v.clone() for k, v in r.state_dict()["tensors"].items()}
    ep[key] = torch.nested.nested_tensor(list(torch.as_tensor(ep[key])))
    with pytest.raises(DataError, match=rf"episode 0: array '{key}' is a nested tensor; expected"):
        extend_from_episodes(r, [ep])
    after = r.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_episode_tensors_with_the_negative_bit_are_read_as_their_values():
    # np.asarray refuses a tensor with torch's negative bit (a view, e.g. z.conj().imag): a raw
    # RuntimeError; the pushes store such tensors as their values (test_ring_odd_inputs.py)
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    views = {}
    for key in ("obs", "next_obs", "reward", "cost"):  # the float arrays (action: int64)
        value = torch.as_tensor(ep[key])
        views[key] = torch.complex(torch.zeros_like(value), -value).conj().imag
        assert views[key].is_neg() and torch.equal(views[key], value)
    plain, odd = ring(1), ring(1)
    extend_from_episodes(plain, [ep])
    extend_from_episodes(odd, [dict(ep, **views)])
    assert all(torch.equal(plain[name], odd[name]) for name in plain.fields)


def test_episode_tensors_that_require_grad_are_read_as_their_values():
    # np.asarray refuses a tensor that requires grad: a raw RuntimeError, while the pushes
    # store such tensors as data (test_ring_odd_inputs.py)
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    grad = {k: torch.tensor(ep[k], requires_grad=True) for k in ("obs", "reward", "cost")}
    grad["next_obs"] = torch.nn.Parameter(torch.as_tensor(ep["next_obs"]))
    plain, odd = ring(1), ring(1)
    extend_from_episodes(plain, [ep])
    extend_from_episodes(odd, [dict(ep, **grad)])
    assert all(torch.equal(plain[name], odd[name]) for name in plain.fields)
    assert not any(t.requires_grad for t in odd.state_dict()["tensors"].values())


def test_bfloat16_episode_tensors_are_read_as_their_values():
    # numpy lacks bfloat16: such tensors were refused as arrays numpy cannot read, though a
    # bfloat16 action ring's own actions are such tensors; float32 holds their values exactly
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    keys = ("obs", "next_obs", "reward", "cost")  # the float arrays (action: int64)
    bf16 = {k: torch.as_tensor(ep[k]).to(torch.bfloat16) for k in keys}
    plain, odd = ring(1), ring(1)
    extend_from_episodes(plain, [dict(ep, **{k: v.float().numpy() for k, v in bf16.items()})])
    extend_from_episodes(odd, [dict(ep, **bf16)])
    assert all(torch.equal(plain[name], odd[name]) for name in plain.fields)


def test_bfloat16_tensors_that_do_not_fit_are_named_as_given():
    # read as float32, such tensors were refused as 'array of dtype float32' / 'obs' of dtype
    # float32, a dtype they were not given in
    ep = episode(0, 3, True)
    r = ring(1)
    with pytest.raises(ConfigError, match=r"^episode 0: invalid value for 'action': 'tensor of "
                       r"dtype torch.bfloat16' \(cannot be stored as torch.int64"):  # fmt: skip
        extend_from_episodes(r, [dict(ep, action=torch.zeros(3, dtype=torch.bfloat16))])
    fields = {"obs": ((2,), torch.uint8), "action": ((), torch.int64)}
    uint8 = ReplayRing(8, 1, fields)
    with pytest.raises(DataError, match=r"^episode 0: 'obs' of dtype torch.bfloat16 cannot be "
                       r"stored in the ring's uint8 observations$"):  # fmt: skip
        extend_from_episodes(uint8, [dict(ep, obs=torch.zeros(4, 2, dtype=torch.bfloat16))])
    assert r.total_steps == uint8.total_steps == 0


UNREADABLE = {  # (bfloat16 tensors are read as float32: see below)
    "float8": (lambda v: torch.as_tensor(v).to(torch.float8_e4m3fn), "float8_e4m3fn on cpu"),
    "meta": (lambda v: torch.as_tensor(v).to("meta"), "on meta"),
    "ragged": (lambda v: [list(np.atleast_1d(v[0])), []], "a list that numpy cannot read"),
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
@pytest.mark.parametrize("key", ["obs", "next_obs", "action", "reward", "cost"])
def test_an_array_numpy_cannot_read_is_refused_naming_it(key, kind):
    # np.asarray raised a raw TypeError (a dtype numpy lacks, a tensor without data or on a
    # GPU) or ValueError (a ragged list)
    convert, received = UNREADABLE[kind]
    ep = episode(0, 3, True)
    ep = dict(ep, obs=ep["obs"][:3], next_obs=ep["obs"][1:], cost=np.ones(3), terminated=True)
    r = ring(1)
    extend_from_episodes(r, [ep])
    before = {k: v.clone() for k, v in r.state_dict()["tensors"].items()}
    with pytest.raises(DataError, match=rf"episode 0: array '{key}' is .*numpy cannot read") as e:
        extend_from_episodes(r, [dict(ep, **{key: convert(ep[key])})])
    assert received in str(e.value)
    # bfloat16 CPU tensors are read (as float32): the message said only "of a numpy dtype"
    assert str(e.value).endswith("a CPU tensor of a numpy dtype or bfloat16")
    after = r.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)


NOT_NUMBERS = {
    # a complex view with torch's conjugate bit is read as its values (0a808db), and complex
    # values were then stored as their real part (a ComplexWarning)
    "conjugate": lambda v: torch.as_tensor(v).to(torch.complex64).conj(),
    "complex": lambda v: np.asarray(v) + 1j,
    "objects": lambda v: np.asarray(v).astype(object),  # None would have been stored as NaN
    # parsed row by row: rows were written before the one that failed (a raw ValueError)
    "strings": lambda v: np.array([*map(str, v[:-1]), "x"]),
}


@pytest.mark.parametrize("kind", sorted(NOT_NUMBERS))
@pytest.mark.parametrize("key", ["reward", "cost"])
def test_rewards_and_costs_that_are_not_numbers_are_refused_naming_them(key, kind):
    ep = episode(0, 3, True)
    value = NOT_NUMBERS[kind](ep[key])
    r = ring(1)
    before = {k: v.clone() for k, v in r.state_dict()["tensors"].items()}
    with pytest.raises(
        DataError, match=rf"episode 0: array '{key}' has dtype .*; expected numbers"
    ):
        extend_from_episodes(r, [dict(ep, **{key: value})])
    after = r.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert r.total_steps == 0


@pytest.mark.parametrize("terminated", ["False", np.array([None]), np.array([0, 1j])])
def test_terminated_flags_that_are_not_numbers_are_refused_before_a_write(terminated):
    # the last value's bool() was taken: the string "False" (not empty) ended the episode in a
    # terminal state, an object whatever its bool() says, a complex number its truth
    r = ring(1)
    with pytest.raises(
        DataError, match=r"^episode 1: array 'terminated' has dtype .*; expected numbers"
    ):
        extend_from_episodes(
            r, [episode(0, 3, True), dict(episode(1, 2, False), terminated=terminated)]
        )
    assert r.total_steps == 0 and not r["obs"].any()


def test_terminated_none_reads_as_not_given():
    # bool(None) read it as False; requiring numbers (an object array) refused it, an input
    # accepted before: None is "not given", as a missing key, not an object flag
    eps = [episode(0, 3, True), episode(1, 2, False)]
    missing, none = ring(1), ring(1)
    extend_from_episodes(missing, [eps[0], {k: v for k, v in eps[1].items() if k != "terminated"}])
    extend_from_episodes(none, [eps[0], dict(eps[1], terminated=None)])
    assert all(torch.equal(missing[name], none[name]) for name in missing.fields)
    assert none["continue_"][:5, 0].tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]


def _raises_at_third(ep):
    yield ep
    yield ep
    raise DataError("packs/c.json: datapack 'c': cannot load its episode")


REFUSED_THIRD = {  # the third episode of three (or the input itself) refused, and how
    "reward rows": (lambda ep: dict(ep, reward=ep["reward"][:1]),
                    DataError, r"^episode 2: 'action' must have T >= 1 rows and 'reward'"),
    "obs rows broadcast": (lambda ep: dict(ep, obs=ep["obs"][:, :1]),  # (1,) into (2,)
                           DataError, r"^episode 2: 'obs' rows have shape \(1,\); the ring's "
                           r"observations have shape \(2,\)$"),
    "obs rows too wide": (lambda ep: dict(ep, obs=np.zeros((4, 3), np.float32)),
                          DataError, r"^episode 2: 'obs' rows have shape \(3,\)"),
    "action rows": (lambda ep: dict(ep, action=np.zeros((3, 2), np.int64)),
                    ConfigError, r"^episode 2: invalid value for 'action': 'array of shape \(2,\)"),
    "action dtype": (lambda ep: dict(ep, action=ep["action"].astype(np.float32)),
                     ConfigError, r"^episode 2: invalid value for 'action': .*float32.*kind"),
}  # fmt: skip


@pytest.mark.parametrize("case", [*sorted(REFUSED_THIRD), "input raises"])
def test_a_refused_episode_leaves_the_ring_as_it_was(case):
    # the rows of the episodes before it were written (a half-extended ring), a wrong obs or
    # action shape was a raw ValueError of numpy, and a (1,) obs row was broadcast silently
    ep = episode(0, 3, True)
    r = ring(num_envs=2)
    assert extend_from_episodes(r, [episode(5, 4, False), episode(6, 4, True)]).rows == 4
    before = {k: v.clone() for k, v in r.state_dict()["tensors"].items()}
    steps, head = r.total_steps, r.head
    if case == "input raises":
        with pytest.raises(DataError, match="cannot load its episode"):
            extend_from_episodes(r, _raises_at_third(ep))
    else:
        bad, error, message = REFUSED_THIRD[case]
        with pytest.raises(error, match=message):
            extend_from_episodes(r, [ep, ep, bad(ep)])
    assert (r.total_steps, r.head) == (steps, head)
    after = r.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    r.check_invariants()
    assert extend_from_episodes(r, [ep, ep]).rows == 3  # and it takes good episodes after


def test_an_input_larger_than_the_ring_is_not_held_whole():
    # all or nothing read every episode before writing the first row, so all of an input
    # larger than the ring (a folder of recorded episodes streamed from disk) was in memory at
    # once; the steps of rows that later rows of the call write over are let go on the way
    arrays = []  # weak references to each episode's arrays, as the input made them

    def stream(n):
        for k in range(n):
            ep = episode(k, 4, k % 3 == 0)
            arrays.append([weakref.ref(v) for v in ep.values() if isinstance(v, np.ndarray)])
            yield ep
            del ep
        alive = sum(any(ref() is not None for ref in refs) for refs in arrays)
        assert alive == 4, f"{alive} of {n} episodes still held"  # those the ring holds; 40

    r = ring(num_envs=2, capacity=8)  # 8 rows of 2 envs: 16 steps, 4 episodes of 4 steps
    report = extend_from_episodes(r, stream(40))
    assert report == EpisodeLoadReport(episodes=40, rows=80, steps=160, dropped_steps=0)
    r.check_invariants()
    # the rows the ring holds are the last ones, whole: the last 2 episodes of each column
    obs = r["obs"][:, :, 0]
    k, step = obs // 1000, obs % 1000
    assert sorted(set(k.flatten().tolist())) == [36.0, 37.0, 38.0, 39.0]
    assert torch.equal(r["action"].float(), step) and torch.equal(r["is_first"], step == 0)
    assert torch.allclose(r["reward"].double(), k.double() + step.double() / 10)
    assert r["episode_id"][:, 0].tolist() == [18, 18, 18, 18, 19, 19, 19, 19]  # every 2nd
    # each step's next observation (the side store's final one at an episode's end)
    batch = r.sample_transitions(256, torch.Generator().manual_seed(0))
    assert torch.equal(batch.next_obs, batch.obs + torch.tensor([1.0, -1.0]))


def test_final_observations_are_kept_only_while_the_side_store_may_hold_them():
    # of the episodes whose rows are written over, only the final observations the side store
    # keeps (its last side_capacity) are needed; all of them were kept: one row per episode
    import tracemalloc

    width = 4096  # 16 KiB observations: the side store holds 2, the input has 400
    r = ReplayRing(
        4, 1, {"obs": ((width,), torch.float32), "action": ((), torch.int64)}, side_capacity=2
    )

    def stream():
        for k in range(400):
            yield {"obs": np.full((2, width), k, np.float32), "action": np.zeros(1, np.int64),
                   "reward": np.zeros(1), "terminated": True}  # fmt: skip

    tracemalloc.start()
    try:
        extend_from_episodes(r, stream())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * width * 4, f"{peak:,} bytes at the peak"  # 400 * 16 KiB = 6.5 MB before
    assert r["obs"][:, 0, 0].tolist() == [396, 397, 398, 399]
    batch = r.sample_transitions(64, torch.Generator().manual_seed(0))
    assert torch.equal(batch.next_obs, batch.obs)  # the final observations: the same rows


def test_episodes_whose_actions_differ_in_dtype_share_a_row():
    # each episode's int64 or uint64 actions pass the ring's check alone, but np.stack of one
    # row of both gave float64, which push_step refused after the first row was written
    def ep(dtype, k):
        return {"obs": np.full((2, 2), k, np.float32), "action": np.full(1, k, dtype),
                "reward": np.zeros(1)}  # fmt: skip

    r = ring(num_envs=2, capacity=8)
    dtypes = [np.int64, np.int64, np.uint64, np.int64]
    report = extend_from_episodes(r, [ep(d, k) for k, d in enumerate(dtypes)])
    assert report == EpisodeLoadReport(episodes=4, rows=2, steps=4, dropped_steps=0)
    assert r["action"][:2].tolist() == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    "field,values,stored",
    [(torch.int8, [300, 0], [44, 0]), (torch.int64, [1, 2**63], [1, -(2**63)])],
)
def test_mixed_action_dtypes_in_a_row_are_cast_as_push_step_casts(field, values, stored):
    # an int64 and a uint64 episode share a row, cast env by env: an item assignment raised a
    # raw OverflowError naming no episode (one row already written) where push_step of the
    # same values wraps, as one dtype's episodes do
    r = ReplayRing(8, 2, {"obs": ((2,), torch.float32), "action": ((), field)})
    kinds = zip(values, [np.int64, np.uint64], strict=True)
    eps = [{"obs": np.zeros((2, 2), np.float32), "action": np.array([v], d),
            "reward": np.zeros(1)} for v, d in kinds]  # fmt: skip
    extend_from_episodes(r, eps)
    alone = ReplayRing(8, 2, {"obs": ((2,), torch.float32), "action": ((), field)})
    action = np.array(values, np.uint64).astype(np.int64)  # one dtype, as one push_step gets
    alone.push_step(np.zeros((2, 2), np.float32), action, np.zeros(2),
                    terminated=np.zeros(2, bool), truncated=np.zeros(2, bool))  # fmt: skip
    assert r["action"][:1].tolist() == [stored] == alone["action"][:1].tolist()


@pytest.mark.parametrize("action", [np.array([1], object), [2**64]])
def test_actions_that_are_not_numbers_are_refused_before_a_write(action):
    # an object array (or a list numpy makes one of) passed the scalar check on its first
    # item and then raised a raw AttributeError in the row, after earlier rows were written
    r = ReplayRing(8, 1, {"obs": ((2,), torch.float32), "action": ((), torch.int64)})
    eps = [{"obs": np.zeros((2, 2), np.float32), "action": a, "reward": np.zeros(1)}
           for a in (np.array([7], np.int64), action)]  # fmt: skip
    with pytest.raises(DataError, match=r"^episode 1: array 'action' has dtype object"):
        extend_from_episodes(r, eps)
    assert r.size == 0


ZERO_D = {  # a 0-d array (or a Python scalar) where rows are expected, and the error
    "action": (np.int64(3), r"'action' must have T >= 1 rows and 'reward' shape \(T,\); got \(\)"),
    "obs": (np.float32(1), r"'obs' must have T \+ 1 = 2 rows .*; got shape \(\)$"),
    "next_obs": (1.0, r"'next_obs' must be rows of shape \(2,\), as the 'obs' rows; got an "
                 r"array of shape \(\)$"),
    "next_obs rows": (np.zeros((1, 3)), r"'next_obs' must be rows of shape \(2,\), as the "
                      r"'obs' rows; got an array of shape \(1, 3\)$"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(ZERO_D))
def test_arrays_that_are_not_rows_are_refused_before_a_write(case):
    # len() of a 0-d action or obs raised a raw TypeError, a 0-d next_obs a raw IndexError and
    # next_obs rows of another shape a raw ValueError of np.concatenate, naming no episode
    value, message = ZERO_D[case]
    key = case.split()[0]
    bad = {"obs": np.zeros((2, 2), np.float32), "action": np.zeros(1, np.int64),
           "reward": np.zeros(1)}  # fmt: skip
    if key == "next_obs":
        bad["obs"] = bad["obs"][:1]
    bad[key] = value
    r = ring(1)
    with pytest.raises(DataError, match=rf"^episode 1: {message}"):
        extend_from_episodes(r, [episode(0, 3, True), bad])
    assert r.total_steps == 0 and not r["obs"].any()


def test_an_input_of_many_short_episodes_grows_by_bytes_per_episode():
    # of the episodes written over, only the length and end are kept (9 bytes): an object per
    # episode (about 260 bytes with a blank action) made a 10x input of one-step episodes
    # hold 20 times the ring's memory
    import tracemalloc

    def stream(n):
        for k in range(n):
            yield {"obs": np.full((2, 4), k, np.float32), "action": np.zeros(1, np.int64),
                   "reward": np.zeros(1), "terminated": bool(k % 2)}  # fmt: skip

    def peak(n):
        r = ReplayRing(64, 1, {"obs": ((4,), torch.float32), "action": ((), torch.int64)})
        tracemalloc.start()
        try:
            extend_from_episodes(r, stream(n))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    growth = (peak(1500) - peak(300)) / 1200
    assert growth < 32, f"{growth:.0f} bytes more at the peak per episode"


def test_a_ring_whose_observations_numpy_lacks_refuses_episodes_naming_them():
    # the rows were numpy arrays of dtype None (float64), written into the bfloat16 ring; the
    # side store refused the final observation with a raw RuntimeError, the first row written
    r = ReplayRing(8, 1, {"obs": ((2,), torch.bfloat16), "action": ((), torch.int64)})
    with pytest.raises(DataError, match=r"episode 0: the ring's observations have dtype "
                       r"torch.bfloat16, which numpy lacks"):  # fmt: skip
        extend_from_episodes(r, [episode(0, 3, True)])
    assert r.total_steps == 0


@pytest.mark.parametrize("index_strategy", ["host", "device"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.uint16, torch.uint32, torch.uint64])
def test_user_fields_numpy_lacks_are_written_as_zeros(index_strategy, dtype):
    # the zeros written into user fields were numpy arrays of dtype None (float64), which
    # push_step refuses for such a field since ef8502e: a ConfigError naming 'aux', no episode
    fields = {"obs": ((2,), torch.float32), "action": ((), torch.int64), "aux": ((2,), dtype)}
    r = ReplayRing(8, 2, fields, index_strategy=index_strategy)
    r["aux"].fill_(1)
    report = extend_from_episodes(r, [episode(0, 3, True), episode(1, 3, False)])
    assert report == EpisodeLoadReport(episodes=2, rows=3, steps=6, dropped_steps=0)
    assert r["aux"].dtype == dtype
    assert (r["aux"][:3] == 0).all() and (r["aux"][3:] == 1).all()
    r.check_invariants()


@pytest.mark.parametrize("index_strategy", ["host", "device"])
def test_a_bfloat16_action_field_takes_numbers_rounded_to_it_once(index_strategy):
    # numpy lacks bfloat16: every numpy action was refused ("pass a torch tensor", which
    # episodes could not do either). Numbers of any kind are rounded to the nearest bfloat16
    # from their own value: torch's float64 -> bfloat16 cast rounds twice, through float32
    # (1 + 2**-8 + 2**-30 is the tie 1 + 2**-8 in float32, then 1.0)
    fields = {"obs": ((2,), torch.float32), "action": ((2,), torch.bfloat16)}
    r = ReplayRing(8, 2, fields, index_strategy=index_strategy)
    tie = 1 + 2**-8 + 2**-30
    actions = [np.array([[tie, -tie], [0.1, 1e39]]), np.array([[3, -7], [2**40 + 1, 0]]),
               np.array([[0.1, 2.5], [1, 2]], np.float32), np.array([[True, False]] * 2),
               torch.tensor([[0.5, -3], [100, 2**-130]], dtype=torch.bfloat16),
               np.array([[1001, 1006], [0.5, -0.0]], np.float16)]  # fmt: skip
    eps = [{"obs": np.zeros((3, 2), np.float32), "action": a, "reward": np.zeros(2)}
           for a in actions]  # fmt: skip
    assert extend_from_episodes(r, eps).rows == 6
    # rows of env e: its episodes e, e + 2, e + 4 (each goes to the column with fewest steps);
    # float16 1006 is a tie in bfloat16, rounded to even (1008)
    stored = r["action"][:6].float().transpose(0, 1).reshape(6, 2, 2)[[0, 3, 1, 4, 2, 5]]
    expected = [[[1 + 2**-7, -1 - 2**-7], [0.10009765625, torch.inf]], [[3, -7], [2**40, 0]],
                [[0.10009765625, 2.5], [1, 2]], [[1, 0], [1, 0]], [[0.5, -3], [100, 2**-130]],
                [[1000, 1008], [0.5, -0.0]]]  # fmt: skip
    assert stored.tolist() == expected
    with pytest.raises(ConfigError, match=r"^episode 0: invalid value for 'action': 'array of "
                       r"shape \(3,\)' \(expected shape \(2,\)\)"):  # fmt: skip
        extend_from_episodes(r, [dict(eps[0], action=np.zeros((2, 3)))])
    r.check_invariants()


@pytest.mark.parametrize("index_strategy", ["host", "device"])
def test_a_bfloat16_action_field_rounds_each_episodes_actions_once_not_each_row(index_strategy):
    # each row's actions were rounded and cast to bfloat16 on their own, then copied to the
    # ring's device with a blocking copy (on CUDA the host waited for the device every row)
    fields = {"obs": ((2,), torch.float32), "action": ((3,), torch.bfloat16)}
    r = ReplayRing(64, 2, fields, index_strategy=index_strategy)
    # float32 values: torch's cast to bfloat16 rounds them once too (the reference below)
    actions = [np.random.default_rng(k).standard_normal((20, 3), np.float32) for k in range(4)]
    eps = [{"obs": np.zeros((21, 2), np.float32), "action": a, "reward": np.zeros(20)}
           for a in actions]  # fmt: skip
    with count_ops() as counted:
        assert extend_from_episodes(r, eps).rows == 40
    assert counted.ops["aten._to_copy.default"] == len(eps)  # was one per row (40)
    assert index_strategy == "host" or not counted.syncs
    stored = r["action"][:40].transpose(0, 1).reshape(4, 20, 3)[[0, 2, 1, 3]]
    assert torch.equal(stored, torch.from_numpy(np.stack(actions)).bfloat16())


@pytest.mark.parametrize("index_strategy", ["host", "device"])
def test_float64_actions_into_a_float16_field_are_stored_as_push_step_stores_them(index_strategy):
    # 1 + 2**-11 + 2**-30 is 1 + 2**-10 in float16 by numpy's cast, 1.0 by torch's (through
    # float32, where it is the tie 1 + 2**-11): the device index's push_step cast with torch
    # (until it cast with numpy too), and each env's action cast with numpy stored the other
    values = np.array([1 + 2**-11 + 2**-30, 0.1, -2.75, 65519.9])
    fields = {"obs": ((2,), torch.float32), "action": ((), torch.float16)}
    r = ReplayRing(8, 2, fields, index_strategy=index_strategy)
    pushed = ReplayRing(8, 2, fields, index_strategy=index_strategy)
    eps = [{"obs": np.zeros((5, 2), np.float32), "action": a, "reward": np.zeros(4)}
           for a in (values, values[::-1].copy())]  # fmt: skip
    extend_from_episodes(r, eps)
    for t in range(4):
        last = np.full(2, t == 3)
        pushed.push_step(np.zeros((2, 2), np.float32), np.stack([ep["action"][t] for ep in eps]),
                         np.zeros(2), terminated=np.zeros(2, bool), truncated=last,
                         final_obs=np.zeros((2, 2), np.float32) if t == 3 else None)  # fmt: skip
    assert torch.equal(r["action"][:4].view(torch.int16), pushed["action"][:4].view(torch.int16))
    stored = np.stack([ep["action"] for ep in eps], axis=1).astype(np.float16)  # both indexes
    assert torch.equal(r["action"][:4].view(torch.int16), torch.from_numpy(stored.view(np.int16)))
