import itertools
import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from gymcurric.errors import ConfigError, TaskError
from gymcurric.tasks import BoxTaskSpace, BucketedTaskSpace, FixedTaskSpace, Span

# ---------------------------------------------------------------- FixedTaskSpace


def test_fixed_ids_are_indices_and_tasks_are_copies():
    space = FixedTaskSpace([{"level": 1, "opts": {"a": 1}}, {"level": 2, "opts": {"a": 2}}])
    assert space.size == 2
    t = space.task(1)
    assert t == {"level": 2, "opts": {"a": 2}}
    t["opts"]["a"] = 99
    assert space.task(1)["opts"]["a"] == 2


@pytest.mark.parametrize("tasks", [[], ()])
def test_fixed_empty_space_is_a_clear_error(tasks):
    with pytest.raises(ConfigError, match="empty task space"):
        FixedTaskSpace(tasks)


@pytest.mark.parametrize("bad", [[{"x": {1, 2}}], [{"x": float("nan")}], ["not a dict"]])
def test_fixed_rejects_non_json_tasks(bad):
    with pytest.raises(TaskError, match="task 0"):
        FixedTaskSpace(bad)


def test_fixed_validator_rejection_names_the_task():
    with pytest.raises(TaskError, match="validator rejected task 1") as exc:
        FixedTaskSpace([{"n": 1}, {"n": -1}], validator=lambda t: t["n"] > 0)
    assert exc.value.value == {"n": -1}


@pytest.mark.parametrize("bad", [-1, 2, 1.0, "0", True])
def test_fixed_bad_ids(bad):
    with pytest.raises(ConfigError, match="task_id"):
        FixedTaskSpace([{"n": 1}, {"n": 2}]).task(bad)


def test_finite_draw_key_never_returns_a_taken_key():
    space = FixedTaskSpace([{"i": i} for i in range(50)])
    rng = np.random.default_rng(0)
    taken: set[int] = set()
    for _ in range(50):
        res = space.draw_key(rng, taken)
        assert res is not None
        assert res[0] not in taken
        taken.add(res[0])
    assert taken == set(range(50))
    assert space.draw_key(rng, taken) is None


# ---------------------------------------------------------------- Span / BucketedTaskSpace


def test_span_draws_in_range_with_the_bound_types():
    rng = np.random.default_rng(0)
    ints = {Span(1, 3).draw(rng) for _ in range(200)}
    assert ints == {1, 2, 3}
    floats = [Span(0.5, 0.6).draw(rng) for _ in range(200)]
    assert all(isinstance(v, float) and 0.5 <= v <= 0.6 for v in floats)


@pytest.mark.parametrize("lo,hi", [(2, 1), (0.0, float("inf")), ("a", 1)])
def test_span_bad_bounds(lo, hi):
    with pytest.raises(ConfigError):
        Span(lo, hi)


def _bucketed(seed=0, **kw):
    return BucketedTaskSpace(
        {"hazards": [Span(1, 8), 0], "goal.dist": [Span(1.0, 3.0)], "layout": ["a", "b"]},
        base={"goal": {"kind": "circle"}, "size": 10},
        seed=seed,
        **kw,
    )


def test_bucketed_is_deterministic_per_id_and_seed():
    a, b = _bucketed(seed=3), _bucketed(seed=3)
    ids = [0, 1, 12345, 2**52 + 7]
    assert [a.task(i) for i in ids] == [b.task(i) for i in ids]
    c = _bucketed(seed=4)
    assert [a.task(i) for i in range(20)] != [c.task(i) for i in range(20)]


def test_bucketed_tasks_are_json_safe_nested_and_in_range():
    space = _bucketed()
    for i in range(200):
        t = space.task(i)
        assert json.loads(json.dumps(t)) == t
        assert t["size"] == 10 and t["goal"]["kind"] == "circle"
        assert 1.0 <= t["goal"]["dist"] <= 3.0
        assert t["hazards"] in range(0, 9) and type(t["hazards"]) is int
        assert t["layout"] in ("a", "b")


def test_bucketed_regenerates_identically_in_another_process():
    # Different PYTHONHASHSEED: a task must not depend on Python's salted hash().
    space = _bucketed(seed=11)
    ids = [5, 77, 2**40]
    code = (
        "import json; from gymcurric.tasks import BucketedTaskSpace, Span;"
        "s = BucketedTaskSpace({'hazards': [Span(1, 8), 0], 'goal.dist': [Span(1.0, 3.0)],"
        " 'layout': ['a', 'b']}, base={'goal': {'kind': 'circle'}, 'size': 10}, seed=11);"
        f"print(json.dumps([s.task(i) for i in {ids!r}]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(out.stdout) == [space.task(i) for i in ids]


@pytest.mark.parametrize("params", [{}, {"x": []}, {"x": "abc"}, {"x": [{1, 2}]}])
def test_bucketed_empty_or_bad_params(params):
    with pytest.raises((ConfigError, TaskError)):
        BucketedTaskSpace(params)


def test_bucketed_retries_rejected_draws_and_counts_them():
    space = _bucketed(validator=lambda t: t["layout"] == "a", max_retries=50)
    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(40):
        key, r = space.draw_key(rng, set())
        assert space.task(key)["layout"] == "a"
        rejected += r
    assert rejected > 0


def test_bucketed_exhausted_retries_is_a_clear_error():
    space = _bucketed(validator=lambda t: False, max_retries=3)
    with pytest.raises(TaskError, match="rejected 4 generated tasks in a row"):
        space.draw_key(np.random.default_rng(0), set())


# ---------------------------------------------------------------- BoxTaskSpace


def test_box_cells_keys_and_variants():
    space = BoxTaskSpace([0.0, -1.0], [1.0, 1.0], bins=(4, 2), names=["friction", "tilt"])
    assert space.size == 8
    rng = np.random.default_rng(0)
    keys = np.arange(8, dtype=np.int64)
    ids = space.expand(keys, rng)
    assert np.array_equal(ids % 8, keys) and np.all(ids >= 8)
    for tid in ids.tolist():
        lo, hi = space.cell_bounds(space.key(tid))
        t = space.task(tid)
        x = np.array([t["friction"], t["tilt"]])
        assert np.all(lo <= x) and np.all(x <= hi)
    assert space.task(int(ids[3])) == space.task(int(ids[3]))
    assert space.task(3 + 8) != space.task(3 + 16)  # same cell, fresh parameters


def test_box_validator_redraws_inside_the_cell_and_gives_up_clearly():
    space = BoxTaskSpace([0.0], [1.0], bins=1, validator=lambda t: t["x0"] < 0.3, max_retries=200)
    task, rejected = space.generate(12)
    assert task["x0"] < 0.3
    never = BoxTaskSpace([0.0], [1.0], bins=2, validator=lambda t: False, max_retries=2)
    with pytest.raises(TaskError, match="rejected 3 draws in cell 1"):
        never.task(5)


@pytest.mark.parametrize(
    "low,high,bins",
    [
        ([], [], 2),
        ([0.0], [0.0], 2),
        ([0.0], [1.0], 0),
        ([0.0, 0.0], [1.0], 2),
        ([0.0], [np.inf], 2),
    ],
)
def test_box_bad_config(low, high, bins):
    with pytest.raises(ConfigError):
        BoxTaskSpace(low, high, bins)


def test_box_from_gymnasium_space():
    box = gym.spaces.Box(
        low=np.array([0.0, 1.0], dtype=np.float32), high=np.array([1.0, 2.0], dtype=np.float32)
    )
    space = BoxTaskSpace.from_space(box, bins=3, names=["a", "b"])
    assert space.size == 9
    assert set(space.task(4)) == {"a", "b"}


def test_copy_task_rebuilds_every_container_and_keeps_scalars():
    from collections import OrderedDict

    from gymcurric.tasks.spaces import copy_task

    inner = {"speed": 1.5, "tags": ["a", "b"]}
    task = {"level": 3, "name": "x", "on": True, "none": None, "agent": inner, "pair": (1, [2])}
    out = copy_task(task)
    assert out == task and out is not task
    assert out["agent"] is not inner and out["agent"]["tags"] is not inner["tags"]
    assert out["pair"][1] is not task["pair"][1] and isinstance(out["pair"], tuple)
    out["agent"]["tags"].append("c")
    assert inner["tags"] == ["a", "b"]  # the original is untouched
    ordered = OrderedDict(b=[1], a=2)
    copied = copy_task(ordered)
    assert copied == ordered and copied["b"] is not ordered["b"]
    flat = {"level": 1, "x": 0.5}
    assert copy_task(flat) == flat and copy_task(flat) is not flat


def test_copy_task_rebuilds_lists_in_lists_and_plain_copies_list_subclasses():
    from gymcurric.tasks.spaces import copy_task

    class Tags(list):
        pass

    task = {"grid": [[0, 1], [2, {"k": [3]}]], "tags": Tags(["a"]), "xs": [1, 2.5, "s", None]}
    out = copy_task(task)
    assert out == task
    assert out["grid"] is not task["grid"] and out["grid"][0] is not task["grid"][0]
    assert out["grid"][1][1]["k"] is not task["grid"][1][1]["k"]
    assert type(out["tags"]) is list and out["tags"] is not task["tags"]
    assert copy_task([1, [2]]) == [1, [2]]


# ---------------------------------------------------------------- BoxTaskSpace: integer dims


def _grid_box(**kw):
    return BoxTaskSpace(
        [2, 0.0],
        [36, 0.3],
        bins=(4, 2),
        names=["goal_distance", "slip_prob"],
        integers=["goal_distance"],
        base={"size": 20, "max_steps": 120},
        **kw,
    )


def test_box_integer_cells_partition_the_integers_and_draws_stay_inside():
    space = _grid_box()
    seen = {}
    for cell in range(space.size):
        lo, hi = space.cell_bounds(cell)
        first, last = int(lo[0]), int(hi[0])
        seen.setdefault(first, last)
        for variant in range(40):
            task = space.task(cell + space.size * (variant + 1))
            d = task["goal_distance"]
            assert type(d) is int and first <= d <= last
            assert lo[1] <= task["slip_prob"] <= hi[1]
            assert task["size"] == 20 and task["max_steps"] == 120  # the base
    # the 35 integers 2..36 split into 4 cells of 8 or 9, each integer in exactly one cell
    spans = sorted(seen.items())
    assert spans[0][0] == 2 and spans[-1][1] == 36
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    assert sorted(last - first + 1 for first, last in spans) == [8, 9, 9, 9]


def test_box_integer_draws_reach_every_integer_of_a_cell():
    space = BoxTaskSpace([0], [5], bins=2, integers=["x0"])  # cells {0, 1, 2} and {3, 4, 5}
    drawn = {space.task(0 + 2 * v)["x0"] for v in range(1, 200)}
    assert drawn == {0, 1, 2}
    nested = BoxTaskSpace([0], [5], bins=2, names=["agent.speed"], integers=["agent.speed"])
    assert set(nested.task(3)) == {"agent"} and type(nested.task(3)["agent"]["speed"]) is int


def test_box_integer_tasks_run_on_hazard_grid_and_a_curriculum_pools_per_cell():
    import gymnasium as gym

    import gymcurric  # noqa: F401
    from gymcurric.tasks import Curriculum

    space = _grid_box()
    env = gym.make("gymcurric/HazardGrid-v0")
    cur = Curriculum(space, seed=0)
    for tid in cur.sample(8).tolist():
        task = space.task(tid)
        env.reset(seed=0, options={"task": task})
        assert env.unwrapped.task["goal_distance"] == task["goal_distance"]
        cur.update(tid, 0.0, success=False)
    assert cur.probabilities()[0].tolist() == list(range(space.size))  # keys are the cells
    env.close()


def test_box_spec_names_integers_and_base_only_when_used():
    plain = BoxTaskSpace([0.0], [1.0], bins=2)
    assert "integers" not in plain.spec() and "base" not in plain.spec()
    spec = _grid_box().spec()
    assert spec["integers"] == ["goal_distance"] and spec["base"]["size"] == 20


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"low": [0.5], "high": [4], "integers": ["x0"]}, "low/high of 'x0'"),
        ({"low": [0], "high": [2], "bins": 4, "integers": ["x0"]}, "low/high of 'x0'"),
        ({"low": [0], "high": [2], "integers": ["y"]}, "integers"),
        ({"low": [0], "high": [2], "integers": "x0"}, "integers"),
        ({"low": [0], "high": [2], "base": [1]}, "base"),
    ],
)
def test_box_integer_and_base_errors_name_the_parameter(kw, key):
    kw = {"bins": 1, **kw}
    with pytest.raises(ConfigError) as exc:
        BoxTaskSpace(**kw)
    assert exc.value.key == key
