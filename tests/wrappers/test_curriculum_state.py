"""Damaged and malformed curriculum checkpoint files (``load_curriculum_state``).

Every file is written on disk, damaged there, and loaded: each must be a ``DataError`` that names
the file and what is wrong, and must leave the curriculum (and the env) exactly as it was.
"""

import json

import numpy as np
import pytest

from gymcurric.errors import DataError
from gymcurric.tasks import Curriculum, DualPool
from gymcurric.wrappers import SampleCurriculumTask, load_curriculum_state, save_curriculum_state
from tests.curriculum_stubs import TaskStubEnv, levels
from tests.wrappers.checkpoint_files import members, rewrite

DUAL = DualPool(explore_size=3, exploit_size=5, min_samples=2, window=4)


def trained(seed=0, pool=None, episodes=60):
    """A curriculum that has seen some episodes (so its arrays are not the initial ones)."""
    kw = {"pool": pool} if pool is not None else {}
    cur = Curriculum(levels(8), seed=seed, recompute_every=2, **kw)
    rng = np.random.default_rng(seed)
    for _ in range(episodes):
        tid, _ = cur.sample_task()
        cur.update(tid, return_=float(rng.normal()), success=bool(rng.random() < 0.5))
    return cur


def snapshot(cur):
    state = cur.state_dict()
    return state["arrays"], state["rng"], state["disabled"]


def unchanged(cur, before):
    arrays, rng, disabled = snapshot(cur)
    return (
        all(np.array_equal(arrays[k], before[0][k], equal_nan=True) for k in arrays)
        and rng == before[1]
        and disabled == before[2]
    )


def edit_array(path, name, change):
    a = members(path)[f"arrays/{name}"].copy()
    change(a)
    rewrite(path, **{f"arrays/{name}": a})


def edit_meta(path, change):
    meta = json.loads(str(members(path)["meta"][()]))
    change(meta)
    rewrite(path, meta=np.array(json.dumps(meta)))


@pytest.fixture
def saved(tmp_path):
    """A good checkpoint file and a fresh curriculum of the same configuration to load it into."""
    path = save_curriculum_state(tmp_path / "cur.npz", trained(seed=0))
    target = trained(seed=7, episodes=30)
    return path, target


def assert_refused(path, target, match, **kw):
    before = snapshot(target)
    with pytest.raises(DataError, match=match) as info:
        load_curriculum_state(path, target, **kw)
    assert str(path) in str(info.value)
    assert "Traceback" not in str(info.value)
    assert unchanged(target, before), "a refused load changed the curriculum"


# ---------------------------------------------------------------- damaged files


def test_an_empty_file_is_a_data_error_naming_it(saved):
    path, target = saved
    path.write_bytes(b"")
    assert_refused(path, target, r"cur\.npz: not a gymcurric curriculum checkpoint: .*empty")


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99])
def test_a_truncated_file_is_a_data_error_naming_it(saved, keep):
    path, target = saved
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * keep)])
    assert_refused(path, target, r"cur\.npz: not a gymcurric curriculum checkpoint")


def test_garbage_and_a_single_npy_are_data_errors(saved):
    path, target = saved
    path.write_bytes(b"\x00\x01garbage" * 50)
    assert_refused(path, target, r"not an \.npz \(zip\) archive")
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))
    assert_refused(path, target, r"not an \.npz \(zip\) archive")


def test_a_corrupt_member_is_a_data_error(saved):
    path, target = saved
    raw = bytearray(path.read_bytes())
    at = raw.index(b"arrays/prob.npy") + 150  # inside that member's data: the CRC fails
    raw[at : at + 8] = b"\xff" * 8
    path.write_bytes(bytes(raw))
    assert_refused(path, target, r"cur\.npz: not a gymcurric curriculum checkpoint")


def test_pickled_objects_are_refused(saved):
    path, target = saved
    rewrite(path, **{"arrays/prob": np.array([{"a": 1}, None], dtype=object)})
    assert_refused(path, target, r"member 'arrays/prob' holds Python objects.*allow_pickle=False")


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        (np.array("{not json"), r"member 'meta' is not valid JSON"),
        (np.array("[1, 2]"), r"expected file_format"),
        (np.frombuffer(b"{}", dtype=np.uint8), r"member 'meta' must be one JSON string"),
        (None, r"no 'meta' member"),
    ],
)
def test_bad_meta_is_a_data_error(saved, meta, match):
    path, target = saved
    rewrite(path, meta=meta)
    assert_refused(path, target, match)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda m: m.pop("rng"), r"no 'rng'"),
        (lambda m: m.update(rng={"bit_generator": "PCG64"}), r"'rng' is not a PCG64"),
        (lambda m: m.update(rng="seed"), r"'rng' is not a PCG64"),
        (lambda m: m.update(disabled=["x"]), r"'disabled' must be a list of task keys"),
        (lambda m: m.update(disabled=[99]), r"'disabled' must be a list of task keys in \[0, 8\)"),
        (lambda m: m.update(format="other/1"), r"not a curriculum state dict"),
    ],
)
def test_bad_meta_fields_are_data_errors(saved, change, match):
    path, target = saved
    edit_meta(path, change)
    assert_refused(path, target, match)


def test_missing_or_reshaped_arrays_are_data_errors(saved):
    path, target = saved
    rewrite(path, **{"arrays/fast": None})
    assert_refused(path, target, r"arrays .* != expected")
    path2 = save_curriculum_state(path.with_name("b.npz"), trained())
    edit = members(path2)
    rewrite(path2, **{"arrays/fast": edit["arrays/fast"].astype(np.float32)})
    assert_refused(path2, target, r"'fast': saved float32\(8,\), expected float64\(8,\)")
    rewrite(path2, **{"arrays/fast": edit["arrays/fast"][:4]})
    assert_refused(path2, target, r"'fast': saved float64\(4,\)")


# ---------------------------------------------------------------- invariants of the arrays


def _set(index, value):
    def change(a):
        a[index] = value

    return change


@pytest.mark.parametrize(
    ("name", "change", "match"),
    [
        ("prob", _set(0, np.nan), r"prob\[0\] = nan \(expected a finite number"),
        ("fast", _set(2, np.inf), r"fast\[2\] = inf"),
        ("prob", _set(1, -0.5), r"prob\[1\] = -0\.5 \(expected a value in \[0, 1\]"),
        ("prob", lambda a: a.__imul__(0.5), r"prob\[0\] = .*cumulative arrays"),
        ("cdf_a", lambda a: a.__imul__(2.0), r"cdf_a ends at (2\.0|1\.99)"),
        ("slow", _set(0, 1.5), r"slow\[0\] = 1\.5 \(expected a value in \[0, 1\]"),
        ("count", _set(3, -1), r"count\[3\] = -1 \(expected a count >= 0"),
        ("samples", _set(0, -7), r"samples\[0\] = -7"),
        ("counters", _set(0, -5), r"counters\[UPDATES\] = -5"),
        ("counters", _set(18, 99), r"counters\[LAST_A\] = 99 \(expected \[-1, 7\]\)"),
        ("task_id", _set(0, 99), r"task_id\[0\] = 99 \(expected -1 or a task key in \[0, 8\)"),
        ("task_id", _set(0, -3), r"task_id\[0\] = -3"),
        ("task_id", _set(1, 0), r"key 0 is held by more than one slot"),
        ("task_id", _set(1, -1), r"pool\[1\] = 0 \(empty exactly where task_id is -1"),
        ("pool", _set(1, 1), r"pool\[1\] = 1 \(ReplacementPool has one pool"),
        ("pool", _set(1, 5), r"pool\[1\] = 5 \(expected a label -1, 0 or 1"),
        ("scalars", _set(2, np.nan), r"scalars\[RET_LO\] = nan"),
        ("scalars", _set(0, np.nan), r"scalars\[RHO\] = nan"),
    ],
)
def test_values_breaking_the_invariants_are_refused(saved, name, change, match):
    path, target = saved
    edit_array(path, name, change)
    assert_refused(path, target, r"cur\.npz: curriculum state breaks its invariants: .*" + match)


@pytest.mark.parametrize(
    ("name", "change", "match"),
    [
        ("window", _set(0, 2), r"window\[0\] = 2 \(expected 0 or 1"),
        ("counters", _set(15, 99), r"promotion window counters .*sum=99"),
        ("scalars", _set(0, 0.99), r"scalars\[RHO\] = 0\.99 \(expected a value in \[rho_min"),
        ("pool", lambda a: a.fill(1), r"8 exploit tasks \(DualPool exploit_size=5\)"),
    ],
)
def test_dual_pool_invariants_are_checked(tmp_path, name, change, match):
    path = save_curriculum_state(tmp_path / "dual.npz", trained(pool=DUAL, episodes=200))
    target = trained(seed=3, pool=DUAL, episodes=10)
    edit_array(path, name, change)
    assert_refused(path, target, match)


def test_saved_env_task_ids_are_checked_against_the_space(saved):
    path, target = saved
    env = SampleCurriculumTask(TaskStubEnv(), target)
    save_curriculum_state(path, trained(), env=env)
    rewrite(path, env_task_ids=np.array([42]))
    assert_refused(path, target, r"member 'env_task_ids': .*42", env=env)
    rewrite(path, env_task_ids=np.array([0.5]))
    assert_refused(path, target, r"'env_task_ids' must be a 1-D array of task ids", env=env)
    assert env.pending_task_id is None


def test_an_env_count_mismatch_changes_nothing(saved):
    path, target = saved  # saved without env=: the tasks of 0 envs
    assert_refused(
        path, target, r"saved the tasks of 0 envs", env=SampleCurriculumTask(TaskStubEnv(), target)
    )


def test_after_refusals_a_good_file_still_loads(saved):
    path, target = saved
    source = trained(seed=0)
    edit_array(path, "prob", _set(0, np.nan))
    with pytest.raises(DataError):
        load_curriculum_state(path, target)
    save_curriculum_state(path, source)
    load_curriculum_state(path, target)
    assert unchanged(target, snapshot(source))
    assert [target.sample_task()[0] for _ in range(20)] == [
        source.sample_task()[0] for _ in range(20)
    ]
