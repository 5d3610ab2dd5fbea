"""The device index's pushes (``DeviceWriter``): every way of giving a step writes what the
host index writes, and the usual pushes stay lean in Python.

A push on a GPU is bound by the host, so the device index checks the usual inputs (tensors on
the device, numpy arrays of the field's dtype and shape, numpy or device bool flags) with
identity and shape tests and stages host flags in one buffer (issue 24); anything else takes
the general checks. Each variant below takes one of those branches.
"""

import os
import sys

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError
from gymcurric.replay import ReplayRing

torch.set_num_threads(1)

E = 4
FIELDS = {"obs": ((3,), torch.float32), "action": ((2,), torch.int64), "aux": ((2,), torch.float16)}


def arguments(k, variant, host=False):
    """Step ``k`` of a stream, given as ``variant`` says (``host``: its values as numpy arrays).

    The values depend on ``k`` only; the variant picks their types and whether ``cost`` and
    ``is_first`` are given.
    """
    rng = np.random.default_rng(k)
    obs = rng.standard_normal((E, 3)).astype(np.float32)
    action = rng.integers(0, 9, (E, 2))
    reward = rng.standard_normal(E).astype(np.float32)
    cost = rng.random(E).astype(np.float32)
    terminated = rng.random(E) < 0.2
    truncated = rng.random(E) < 0.1
    is_first = (rng.random(E) < 0.3) | (k == 0)
    aux = rng.standard_normal((E, 2)).astype(np.float16)
    kw = {"terminated": terminated, "truncated": truncated, "aux": aux, "final_obs": obs + 100}
    t = torch.from_numpy
    if variant == "numpy":  # the packed row staged with the flags
        kw.update(cost=cost, is_first=is_first)
        given = obs, action, reward.astype(np.float64)
    elif variant == "tensor_reward":  # numpy flags, a stack on the device, cost 0
        given = t(obs), t(action), t(reward)
    elif variant == "tensor_reward_numpy_cost":
        kw.update(cost=cost, aux=t(aux))
        given = t(obs), action, t(reward)
    elif variant == "device_is_first":  # numpy terminated and truncated, a tensor is_first
        kw.update(is_first=t(is_first))
        given = obs, action, reward
    elif variant == "lists":  # the general checks
        kw.update(terminated=list(terminated), truncated=list(truncated), is_first=is_first)
        given = obs, action.tolist(), reward.tolist()
    elif variant == "tensor_flags":
        kw.update(terminated=t(terminated), truncated=t(truncated), cost=t(cost))
        given = t(obs), t(action), reward
    else:
        assert variant == "mixed_flags"  # one flag on the device, the others host data
        kw.update(truncated=t(truncated), is_first=is_first, cost=cost)
        given = obs, action, t(reward)
    if host:
        given = tuple(np.asarray(v) for v in given)
        kw = {n: v if v is None else np.asarray(v) for n, v in kw.items()}
    return given, kw


VARIANTS = [
    "numpy",
    "tensor_reward",
    "tensor_reward_numpy_cost",
    "device_is_first",
    "lists",
    "tensor_flags",
    "mixed_flags",
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_way_of_giving_a_step_writes_what_the_host_index_writes(variant):
    host = ReplayRing(5, E, FIELDS, side_capacity=6)
    dev = ReplayRing(5, E, FIELDS, side_capacity=6, index_strategy="device")
    for k in range(13):
        given, kw = arguments(k, variant, host=True)
        host.push_step(*given, **kw)
        given, kw = arguments(k, variant)
        dev.push_step(*given, **kw)
        if k == 6:
            for ring in (host, dev):
                ring.start_episodes_at_next_push(np.array([True, False, False, True]))
    for name, t in host.fields.items():
        assert torch.equal(dev[name], t), name
    state_h, state_d = host.state_dict()["tensors"], dev.state_dict()["tensors"]
    for key in ("state.cur_episode", "state.ended", "side.lost", "side.ptr"):
        assert torch.equal(state_h[key], state_d[key]), key
    for key in ("side.obs", "side.slot", "side.owner"):
        assert torch.equal(state_h[key][:-1], state_d[key][:-1]), key  # [-1]: trash entries


#: Python frames of gymcurric per push of the benchmark's step (obs, action and reward tensors on
#: the ring's device, numpy or device flags): push_step, DeviceWriter.push, the two row checks
#: (action, obs) and the reward column. Before issue 24's lean push there were 26 (numpy flags)
#: and 23 (device flags): StepArgs and DeviceStep, device_flags and host_flags per flag, the
#: staging function, checked_tensor and as_tensor_like per field, copy_in and the write helpers.
PUSH_FRAMES = 5


def gymcurric_frames(call):
    """The names of the gymcurric functions that ``call()`` enters, in order."""
    package = os.sep + "gymcurric" + os.sep
    frames = []

    def profile(frame, event, arg):
        if event == "call" and package in frame.f_code.co_filename:
            frames.append(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return frames


def benchmark_ring(strategy="device"):
    """A small ring of the benchmark's fields (uint8 frames, six float32 actions), 16 envs."""
    fields = {"obs": ((8, 8, 3), torch.uint8), "action": ((6,), torch.float32)}
    return ReplayRing(8, 16, fields, index_strategy=strategy)


@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
def test_the_usual_push_takes_few_python_frames(flags_as):
    ring = benchmark_ring()
    obs = torch.zeros(16, 8, 8, 3, dtype=torch.uint8)
    action, reward = torch.zeros(16, 6), torch.zeros(16)
    flags = np.zeros(16, bool) if flags_as == "numpy" else torch.zeros(16, dtype=torch.bool)
    for _ in range(3):
        frames = gymcurric_frames(
            lambda: ring.push_step(obs, action, reward, terminated=flags, truncated=flags)
        )
        assert len(frames) <= PUSH_FRAMES, frames


@pytest.mark.parametrize("strategy", ["host", "device"])
@pytest.mark.parametrize("final_as", ["numpy", "tensor"])
def test_a_final_obs_where_no_episode_ended_is_checked_without_a_python_frame(strategy, final_as):
    # a given final_obs is checked whether or not an episode ended (05d7099); at a step where
    # none did, the usual final_obs (the obs field's dtype and shape, a tensor on the ring's
    # device or a numpy array) passes identity and shape tests in the push itself, as before
    # that check: the general checks (checked_tensor, as_tensor_like) cost 1-2 frames a push
    ring = benchmark_ring(strategy)
    obs = torch.zeros(16, 8, 8, 3, dtype=torch.uint8)
    action, reward = torch.zeros(16, 6), torch.zeros(16)
    flags = np.zeros(16, bool)
    final = obs.numpy().copy() if final_as == "numpy" else obs.clone()

    def push(final_obs):
        ring.push_step(obs, action, reward, terminated=flags, truncated=flags, final_obs=final_obs)

    push(None)
    without = gymcurric_frames(lambda: push(None))
    with_final = gymcurric_frames(lambda: push(final))
    assert with_final == without


def test_the_device_flag_push_with_final_obs_checks_it_with_the_usual_tests():
    # with device flags the side-store write always runs (the ends are known on the device
    # only); the final_obs it stores passes DeviceWriter.source's identity tests (one frame)
    # rather than the general checks (two)
    ring = benchmark_ring()
    obs = torch.zeros(16, 8, 8, 3, dtype=torch.uint8)
    action, reward = torch.zeros(16, 6), torch.zeros(16)
    flags = torch.zeros(16, dtype=torch.bool)
    for _ in range(3):
        frames = gymcurric_frames(
            lambda: ring.push_step(
                obs, action, reward, terminated=flags, truncated=flags, final_obs=obs
            )
        )
        assert len(frames) <= PUSH_FRAMES + 2, frames  # + source(final_obs), the side store
        assert "checked_tensor" not in frames


def bad_steps():
    """push_step arguments that both indexes refuse, some with several bad inputs at once."""
    rng = np.random.default_rng(0)
    good = {
        "obs": rng.standard_normal((E, 3)).astype(np.float32),
        "action": rng.integers(0, 9, (E, 2)),
        "reward": np.zeros(E, np.float32),
        "terminated": np.array([True, False, False, False]),
        "truncated": np.zeros(E, bool),
        "aux": np.zeros((E, 2), np.float16),
        "final_obs": np.zeros((E, 3), np.float32),
    }
    t = torch.from_numpy
    none = np.zeros(E, bool)
    cases = {
        "uint8 flags": {"terminated": np.zeros(E, np.uint8)},
        "flag shape": {"truncated": np.zeros((E, 1), bool)},
        "tensor flag dtype": {"terminated": torch.zeros(E, dtype=torch.uint8)},
        "is_first dtype": {"is_first": np.ones(E, np.uint8)},
        "is_first tensor shape": {"is_first": torch.ones(E, 1, dtype=torch.bool)},
        "action kind, obs shape, reward shape": {
            "action": np.zeros((E, 2)),
            "obs": np.zeros((E, 2), np.float32),
            "reward": np.zeros(2),
        },
        "int32 action tensor": {"action": t(np.zeros((E, 2), np.int32))},
        "obs 1-d": {"obs": np.zeros(E, np.float32)},
        "aux shape, reward tensor shape": {"aux": np.zeros((E, 1)), "reward": torch.zeros(2)},
        "reward kind, cost shape": {"reward": np.array(["x"] * E), "cost": np.zeros(2)},
        "cost tensor dtype": {"reward": torch.zeros(E), "cost": torch.zeros(E, dtype=torch.int64)},
        "final_obs shape": {"final_obs": np.zeros((E, 2), np.float32)},
        # checked whether or not an episode ended: the host index and the device index's host
        # flags checked it only when one did, its device flags always (they cannot tell)
        "final_obs shape, no end": {"terminated": none, "final_obs": np.zeros((E, 2))},
        "final_obs shape, no end, tensor flags": {
            "terminated": t(none),
            "truncated": t(none),
            "final_obs": np.zeros((E, 2), np.float32),
        },
        "final_obs kind, no end": {"terminated": none, "final_obs": np.full((E, 3), "x")},
        # tensors at a step where no episode ended: the quick tests of the push (a926b91) take
        # only the obs dtype, shape and the ring's device ("meta" stands in for another device)
        "final_obs tensor dtype, no end": {
            "terminated": none,
            "final_obs": torch.zeros(E, 3, dtype=torch.float64),
        },
        "final_obs tensor shape, no end": {"terminated": none, "final_obs": torch.zeros(E, 2)},
        "final_obs tensor device, no end": {
            "terminated": none,
            "final_obs": torch.zeros(E, 3, device="meta"),
        },
        "missing user field": {"aux": None},
        "t": {"t": 1},
        # reward is required: None was 0 on the host index and on the device index's staged
        # row (host flags, host cost), and refused only on its other branches
        "reward None": {"reward": None},
        "reward None, numpy cost": {"reward": None, "cost": np.ones(E, np.float32)},
        "reward None, tensor cost": {"reward": None, "cost": torch.ones(E)},
        "reward None, tensor flags": {
            "reward": None,
            "terminated": t(good["terminated"]),
            "truncated": t(good["truncated"]),
        },
        "aux shape before reward None": {"aux": np.zeros((E, 1)), "reward": None},
        "reward None before cost shape": {"reward": None, "cost": np.zeros(2)},
    }
    steps = []
    for name, change in cases.items():
        step = {**good, **change}
        if step.get("aux", 0) is None:
            del step["aux"]
        steps.append(pytest.param(step, id=name))
    return steps


@pytest.mark.parametrize("step", bad_steps())
@pytest.mark.parametrize("pushed", [0, 3])
def test_refused_steps_raise_the_host_index_error_and_leave_the_ring_as_it_was(step, pushed):
    # the lean push's general checks: the same ConfigError (the first bad input, in the host
    # index's order) and nothing written
    messages = []
    for strategy in ("host", "device"):
        ring = ReplayRing(5, E, FIELDS, side_capacity=6, index_strategy=strategy)
        for k in range(pushed):
            given, kw = arguments(k, "numpy")
            ring.push_step(*given, **kw)
        before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
        args = dict(step)
        with pytest.raises(ConfigError) as refused:
            ring.push_step(args.pop("obs"), args.pop("action"), args.pop("reward"), **args)
        messages.append(str(refused.value))
        after = ring.state_dict()["tensors"]
        assert all(torch.equal(before[k], after[k]) for k in before), strategy
        assert ring.total_steps == pushed
    assert messages[0] == messages[1]


@pytest.mark.parametrize("strategy", ["host", "device"])
@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
@pytest.mark.parametrize("cost", [None, "numpy", "tensor"])
@pytest.mark.parametrize("pushed", [0, 3])
def test_reward_none_is_refused_and_nothing_is_written(strategy, flags_as, cost, pushed):
    ring = ReplayRing(5, E, FIELDS, side_capacity=6, index_strategy=strategy)
    for k in range(pushed):
        given, kw = arguments(k, "numpy")
        ring.push_step(*given, **kw)
    before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
    given, kw = arguments(pushed, "numpy")
    flags = {n: kw[n] for n in ("terminated", "truncated")}
    if flags_as == "tensor":
        flags = {n: torch.from_numpy(v) for n, v in flags.items()}
    costs = {"numpy": np.ones(E, np.float32), "tensor": torch.ones(E), None: None}
    with pytest.raises(ConfigError) as refused:
        ring.push_step(
            given[0], given[1], None, cost=costs[cost], aux=kw["aux"], is_first=None, **flags
        )
    err = refused.value
    assert (err.key, err.value, err.source) == ("reward", None, "ReplayRing.push_step")
    assert str(err).startswith("ReplayRing.push_step: invalid value for 'reward': None (")
    assert f"({E},)" in str(err)
    after = ring.state_dict()["tensors"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert (ring.total_steps, ring.head) == (pushed, pushed)


#: (parameter, layout) of the sparse values below: every argument of a push, user field and
#: flags included; CSR needs two dimensions (the flags, reward and cost have one)
SPARSE = [
    *((name, "sparse_coo") for name in ("obs", "action", "reward", "cost", "final_obs", "aux")),
    *((name, "sparse_coo") for name in ("terminated", "truncated", "is_first")),
    *((name, "sparse_csr") for name in ("obs", "action", "final_obs", "aux")),
]
#: every argument of a push, user field and flags included
ARGUMENTS = [
    *("obs", "action", "reward", "cost", "final_obs", "aux"),
    *("terminated", "truncated", "is_first"),
]


def refused_pushes(name, convert, flags_as, ended, pushed):
    """The errors of a push with ``convert(dense)`` as argument ``name``, on both indexes.

    ``dense`` has the field's own dtype and shape; the ring (empty, or full: the push would
    overwrite a row) is asserted unchanged after each refused push.
    """
    errors = []
    for strategy in ("host", "device"):
        ring = ReplayRing(5, E, FIELDS, side_capacity=6, index_strategy=strategy)
        for k in range(pushed):  # 6: the ring is full, the push would overwrite a row
            given, kw = arguments(k, "numpy")
            ring.push_step(*given, **kw)
        before = {k: v.clone() for k, v in ring.state_dict()["tensors"].items()}
        given, kw = arguments(pushed + 1, "numpy")
        step = dict(zip(("obs", "action", "reward"), given, strict=True), **kw)
        step.update(
            terminated=np.array([ended, False, False, False]),
            truncated=np.zeros(E, bool),
            cost=np.full(E, 0.5, np.float32),
            # given only when it is the refused one (device flags without it take the quick
            # path of DeviceWriter.push); all True is valid at the first push too
            is_first=np.ones(E, bool) if name == "is_first" else None,
        )
        if flags_as == "tensor":
            for flag in ("terminated", "truncated", "is_first"):
                if step[flag] is not None:
                    step[flag] = torch.from_numpy(step[flag])
        dense = torch.as_tensor(step[name])
        dense = dense.to(torch.float32) if name == "reward" else dense  # given as float64
        step[name] = convert(dense)
        with pytest.raises(ConfigError) as refused:
            ring.push_step(step.pop("obs"), step.pop("action"), step.pop("reward"), **step)
        errors.append(refused.value)
        after = ring.state_dict()["tensors"]
        assert all(torch.equal(before[k], after[k]) for k in before), strategy
        assert (ring.total_steps, ring.head) == (pushed, pushed % 5), strategy
    return errors


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize(("name", "layout"), SPARSE)
@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
@pytest.mark.parametrize("ended", [True, False], ids=["ended", "no_end"])
@pytest.mark.parametrize("pushed", [0, 6])
def test_sparse_tensors_are_refused_and_leave_the_ring_as_it_was(
    name, layout, flags_as, ended, pushed
):
    # a sparse tensor has the dtype, shape and device the checks looked at, so it went on to
    # a raw TypeError, RuntimeError or NotImplementedError in torch's copies (on the host index
    # a final_obs after its row was written: the oldest row of a full ring overwritten), or,
    # as a final_obs at a step where no episode ended, was accepted on both indexes
    def sparse(dense):
        return dense.to_sparse() if layout == "sparse_coo" else dense.to_sparse_csr()

    errors = refused_pushes(name, sparse, flags_as, ended, pushed)
    for err in errors:
        assert (err.key, err.value) == (name, f"tensor of layout torch.{layout}")
        assert "expected a dense (strided) tensor" in str(err)
    assert str(errors[0]) == str(errors[1])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("name", ARGUMENTS)
@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
@pytest.mark.parametrize("ended", [True, False], ids=["ended", "no_end"])
@pytest.mark.parametrize("pushed", [0, 6])
def test_nested_tensors_are_refused_and_leave_the_ring_as_it_was(name, flags_as, ended, pushed):
    # torch.nested.nested_tensor's default kind is strided, with the dtype and device the
    # checks compare, but it has no shape: reading it was a raw RuntimeError in every check of
    # both indexes (the quick tests of DeviceWriter and of a final_obs where no episode ended
    # read .shape, the general ones tuple(.shape)); refused as sparse tensors are
    def nested(dense):
        value = torch.nested.nested_tensor(list(dense))
        assert value.is_nested and value.layout is torch.strided
        return value

    errors = refused_pushes(name, nested, flags_as, ended, pushed)
    for err in errors:
        assert (err.key, err.value, err.source) == (name, "nested tensor", "ReplayRing")
        assert "expected a dense (strided) tensor" in str(err)
    assert str(errors[0]) == str(errors[1])


@pytest.mark.parametrize("name", ARGUMENTS)
@pytest.mark.parametrize("kind", ["ragged", "tensors"])
@pytest.mark.parametrize("flags_as", ["numpy", "tensor"])
@pytest.mark.parametrize("ended", [True, False], ids=["ended", "no_end"])
def test_lists_numpy_cannot_read_are_refused_and_leave_the_ring_as_it_was(
    name, kind, flags_as, ended
):
    # the general checks read a list with np.asarray: a ragged one was a raw ValueError, a list
    # of tensors numpy cannot read (requiring grad, or with torch's negative bit) a raw
    # RuntimeError, on both indexes and for every argument
    given = []

    def unreadable(dense):
        if kind == "ragged" or dense.dtype == torch.bool:  # a bool tensor has no such views
            value = [dense.tolist()[0], []]
        elif dense.is_floating_point():
            value = list(dense.clone().requires_grad_(True))
        else:
            value = list(torch._neg_view(-dense))  # the int actions: torch's negative bit
        given.append(value)
        return value

    errors = refused_pushes(name, unreadable, flags_as, ended, 6)
    for value, err in zip(given, errors, strict=True):
        assert (err.key, err.source) == (name, "ReplayRing")
        assert err.value == f"list of length {len(value)}"
        assert "numpy can read" in str(err)
    assert str(errors[0]) == str(errors[1])
