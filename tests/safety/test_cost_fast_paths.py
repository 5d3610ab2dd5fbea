"""The fast paths of the cost and risk readers against their slow paths, input by input.

``check_cost_values`` passes a number scalar by its type and a list of numbers with one
``np.asarray`` (``numbers_only``); the SB3 readers (``check_sub_env_costs``, ``read_risks``)
pass a step of numbers the same way. Each fast path must decide as the per-value check would:
every input refused there is refused with the same message, every other one gives the same
values. Here each input goes through each reader twice, with the fast paths and with them
turned off (``numbers_only`` always False, no scalar type known), and the outcomes compared.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
from typing import Any

import numpy as np
import pytest

from gymcurric.errors import ConfigError
from gymcurric.safety import costs

try:
    from gymcurric.integrations.sb3.common import constraints, risk_values
except ImportError:  # without the sb3 extra (torch): check_cost_values alone
    constraints = risk_values = None

TEXT_ALONE = [
    "0.5", b"1", bytearray(b"1"), bytearray(b""), np.str_("1"), np.bytes_(b"1"),
    np.array("1"), np.array(b"1"), np.array(["1", "2"]), np.array([b"1"]), np.array([["1"]]),
    np.array(["1", 0.5], dtype=object),
]  # fmt: skip
TEXT_IN_A_LIST = [
    [0.5, "1"], [0.5, b"1"], [0.5, bytearray(b"1")], [bytearray(b"1")], [bytearray(b"")],
    [bytearray(b"1"), bytearray(b"2")], [[0.5, "1"]], [[0.5], ["1"]], [["1"], ["2"]],
    [np.array("1")], [0.5, np.array("1")], [np.str_("1")], [np.bytes_(b"1")], ["1", "2"],
    [0.5, np.array(["1"])], [np.array(["1"]), np.array(["2"])], [None, "1"], ("1",), (0.5, "1"),
    [True, "1"], [np.array(["1"], dtype=object)], [np.array("1", dtype=object)], [""],
    [0.5, np.array("1", dtype=object)], [np.str_(""), 0.5], [[0.5, "1"], [1.0, 2.0]],
]  # fmt: skip
OTHERS = [  # no text: numbers, None, nested lists, 2-D, dates, complex, structured, objects
    [0.5, 1, True, np.float32(1), np.float16(2), np.longdouble(3), np.uint8(4), np.int64(5),
     np.bool_(True), np.array(2.0)],
    [], (), [0.5], (0.5, 1.0), [[0.5]], [[0.5, 1.0], [2.0, 3.0]], [np.array([0.5])],
    [np.array([0.5]), np.array([1.0])], [None], [None, 0.5], [np.nan, None],
    [float("nan"), float("inf")], [np.array([], dtype="U1")], [np.array(["1"])[:0], 0.5],
    [np.datetime64("2020")], [np.timedelta64(1)], [1 + 2j], [np.complex64(1)], [[], []],
    [datetime.datetime(2020, 1, 1)], [fractions.Fraction(1, 2)], [decimal.Decimal("0.5")],
    [10**400], [2**64, -1], [-1, 2**63], [{"a": 1}], [np.zeros(1, dtype=[("a", "f8")])],
    0.5, 1, True, np.float64(1), np.int8(1), np.longdouble(1), np.bool_(False), 1 + 2j,
    np.complex128(1), None, float("nan"), np.array(0.5), np.array([0.5]), np.zeros((2, 2)),
    np.array([[0.5, 1.0]]), np.array(["2020"], dtype="datetime64[D]"),
    np.array([1], dtype="timedelta64[s]"), np.array([1 + 2j]), np.zeros(2, dtype=[("a", "f8")]),
    # text in a structured array: no reader takes it as a number (float() refuses it)
    np.array([("x",)], dtype=[("a", "U3")]), [np.array([("x",)], dtype=[("a", "U3")])],
    [np.zeros(1, dtype=[("a", "U3")])],
]  # fmt: skip
INPUTS = TEXT_ALONE + TEXT_IN_A_LIST + OTHERS


def _outcome(read: Any, value: Any) -> tuple[str, str]:
    try:
        return "returned", repr(read(value))
    except Exception as exc:  # the type and the message are what is compared
        return type(exc).__name__, str(exc)


def _check(value: Any) -> None:
    costs.check_cost_values(value, "info['cost']", source="AnnotateCost")


def _check_sub_envs(value: Any) -> None:
    constraints.check_sub_env_costs(value, "info['cost']", "PPOLag")


def _read_risks(value: Any) -> list[float]:
    return risk_values.read_risks([{"risk": item} for item in value], "PPOLag")


READERS: dict[str, Any] = {"check_cost_values": _check}
LIST_READERS: dict[str, Any] = {}
if constraints is not None:
    LIST_READERS.update(check_sub_env_costs=_check_sub_envs, read_risks=_read_risks)


def _slow(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(values: Any) -> bool:
        return False

    monkeypatch.setattr(costs, "_NUMBER_TYPES", frozenset())
    for module in (costs, constraints, risk_values):
        if module is not None:
            monkeypatch.setattr(module, "numbers_only", never)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # float() of a complex
@pytest.mark.parametrize("value", INPUTS, ids=lambda v: repr(v)[:40])
def test_the_fast_paths_decide_as_the_per_value_check(value, monkeypatch):
    readers = dict(READERS)
    if isinstance(value, list | tuple):  # what the SB3 readers get: one entry per sub-env
        readers.update(LIST_READERS)
    fast = {name: _outcome(read, value) for name, read in readers.items()}
    _slow(monkeypatch)
    slow = {name: _outcome(read, value) for name, read in readers.items()}
    assert fast == slow


@pytest.mark.parametrize("value", TEXT_ALONE + TEXT_IN_A_LIST, ids=lambda v: repr(v)[:40])
def test_text_is_refused_by_the_fast_path_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"info\['cost'\].*written as text or bytes"):
        _check(value)


def test_a_step_of_numbers_takes_the_fast_path():
    step = [0.5, 1, True, np.float32(1), np.uint8(4), np.bool_(True), np.array(2.0)]
    assert costs.numbers_only(step)
    assert not any(costs.numbers_only(value) for value in TEXT_IN_A_LIST)
