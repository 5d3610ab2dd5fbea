"""The success reading every wrapper shares: ``is_success``, else ``success``; None is absent."""

import numpy as np
import pytest

from gymcurric.wrappers._success import success_of, successes_of


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"is_success": True, "success": False}, True),
        ({"is_success": False, "success": True}, False),
        ({"is_success": None, "success": True}, True),  # None: not reported (SB3)
        ({"is_success": None, "success": 0.5}, 0.5),
        ({"is_success": None}, None),
        ({"success": None}, None),
        ({}, None),
    ],
)
def test_success_of(info, expected):
    assert success_of(info) == expected


def test_successes_of_reads_success_where_is_success_is_none():
    infos = {
        "is_success": np.array([None, True, None, None], dtype=object),
        "_is_success": np.array([True, True, True, False]),
        "success": np.array([False, False, True, True]),
        "_success": np.array([True, True, False, True]),
    }
    assert successes_of(infos, np.array([0, 1, 2, 3])) == [False, True, None, True]
    assert successes_of(infos, np.array([3, 0])) == [True, False]


def test_successes_of_plain_bools_stay_an_array():
    infos = {"is_success": np.array([True, False]), "_is_success": np.array([True, False])}
    out = successes_of(infos, np.array([0, 1]))
    assert isinstance(out, np.ndarray) and out[0] == 1.0 and np.isnan(out[1])
