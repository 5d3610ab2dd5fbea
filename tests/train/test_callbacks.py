"""``CurriculumHistory`` files: round trip, and damaged files written on disk."""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import DataError
from gymcurric.train._callbacks import CurriculumHistory
from tests.wrappers.checkpoint_files import rewrite

ROWS = [
    (128, np.array([0, 2]), np.array([0.25, 0.75]), 1.0),
    (256, np.array([0, 1, 2]), np.array([0.5, 0.25, 0.25]), 0.5),
]


def history(rows=ROWS):
    h = CurriculumHistory(curriculum=None)
    h.rows = list(rows)
    return h


def same_rows(a, b):
    return len(a) == len(b) and all(
        x[0] == y[0] and np.array_equal(x[1], y[1]) and np.allclose(x[2], y[2]) and x[3] == y[3]
        for x, y in zip(a, b, strict=True)
    )


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "curriculum_history.npz"
    history().save(path)
    back = history(rows=[])
    back.load(path)
    assert same_rows(back.rows, ROWS)


def _truncate(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _change(**changes):
    return lambda path: rewrite(path, **changes)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda p: p.write_bytes(b""), r"the file is empty"),
        (_truncate, r"damaged or truncated"),
        (lambda p: p.write_bytes(b"steps,keys\n1,2\n"), r"not an \.npz \(zip\) archive"),
        (_change(probs=None), r"missing member\(s\) \['probs'\]"),
        (_change(probs=np.array([[None]], dtype=object)), r"'probs' holds Python objects"),
        (_change(probs=np.zeros((2, 2))), r"'probs' must be a float array of shape \(2, 3\)"),
        (_change(steps=np.array([1.5, 2.5])), r"'steps' must be a 1-D integer array"),
        (_change(steps=np.array([256, 128])), r"'steps' must be non-decreasing"),
        (_change(keys=np.array([0, 0, 2])), r"'keys' must be increasing task keys"),
        (_change(probs=np.full((2, 3), np.nan)), r"'probs' must hold finite probabilities"),
        (_change(probs=np.full((2, 3), 0.9)), r"summing to at most 1"),
        (_change(explore_ratio=np.array([2.0, 0.5])), r"'explore_ratio' must hold values in"),
    ],
)
def test_damaged_history_is_a_data_error_and_keeps_the_rows(tmp_path, damage, match):
    path = tmp_path / "curriculum_history.npz"
    history().save(path)
    damage(path)
    kept = [(7, np.array([1]), np.array([1.0]), 1.0)]
    h = history(rows=kept)
    with pytest.raises(DataError, match=match) as info:
        h.load(path)
    assert str(path) in str(info.value)
    assert same_rows(h.rows, kept)
