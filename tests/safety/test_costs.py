import numpy as np
import pytest

from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError
from gymcurric.safety.costs import EpisodeCostTracker, NonFiniteGuard, check_cost_values


def test_guard_array_replaces_and_names_indices():
    guard = NonFiniteGuard("cost", policy="warn", replacement=-1.0, source="test")
    with pytest.warns(GymcurricWarning, match=r"test: non-finite cost .*index \[1, 3\]"):
        out = guard.array([0.0, np.nan, 2.0, np.inf])
    assert out.tolist() == [0.0, -1.0, 2.0, -1.0]
    assert guard.count == 2
    # warned once only
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard.array([np.nan])
    assert guard.count == 3


def test_guard_does_not_mutate_input():
    values = np.array([np.nan, 1.0])
    NonFiniteGuard(policy="ignore").array(values)
    assert np.isnan(values[0])


def test_guard_raise_message_has_value():
    with pytest.raises(NonFiniteValueError, match="-inf"):
        NonFiniteGuard(policy="raise").scalar(float("-inf"))


def test_guard_bad_policy():
    with pytest.raises(ConfigError, match=r"'nonfinite'.*'loud'"):
        NonFiniteGuard(policy="loud")  # type: ignore[arg-type]


def test_tracker_masks_and_queue():
    t = EpisodeCostTracker(3, queue_length=2)
    t.add(np.array([1.0, 2.0, 3.0]), mask=np.array([True, False, True]))
    assert t.running.tolist() == [1.0, 0.0, 3.0]
    assert t.finish(np.array([False, False, True])).tolist() == [0.0, 0.0, 3.0]
    t.add(np.ones(3))
    t.finish(np.array([True, True, False]))
    assert list(t.cost_queue) == [2.0, 1.0]  # maxlen 2 keeps the newest
    assert t.running.tolist() == [0.0, 0.0, 1.0]
    t.reset(np.array([False, False, True]))
    assert t.running.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ConfigError):
        EpisodeCostTracker(0)


NUMBER_SCALARS = [0.5, 1, True, np.float16(1.5), np.float32(0.5), np.float64(2.0), np.int64(3)]
NUMBER_SCALARS += [np.uint8(1), np.bool_(True), np.longdouble(0.25)]


def test_check_cost_values_takes_a_number_scalar_without_looking_inside(monkeypatch):
    # the wrappers check every step's one cost (AnnotateCost, its guard, the episode
    # statistics): some 6 Python calls each, 3 per sub-env step, 8.6% of the calls of a 4-env
    # PPOLag rollout over AnnotateCost + RecordEpisodeStatisticsWithCost (cProfile)
    from gymcurric.safety import costs

    looked = []
    original = costs._not_a_cost
    monkeypatch.setattr(costs, "_not_a_cost", lambda value: looked.append(value) or original(value))
    for value in NUMBER_SCALARS:
        costs.check_cost_values(value, "info['cost']")
    assert looked == []
    for text in ["0.5", np.str_("1"), b"1", bytearray(b"1")]:  # text is still looked at
        with pytest.raises(ConfigError, match=r"invalid value for \"info\['cost'\]\""):
            costs.check_cost_values(text, "info['cost']")
    costs.check_cost_values(np.array(0.5), "info['cost']")  # arrays too, as before
    assert len(looked) == 5


def test_check_cost_values_takes_a_list_of_numbers_with_one_asarray(monkeypatch):
    # the SB3 VecCostMonitor checks a list of every sub-env's cost each step (NonFiniteGuard
    # .array): _not_a_cost looked at each item in Python, 3 calls per sub-env per step
    from gymcurric.safety import costs

    looked = []
    original = costs._not_a_cost
    monkeypatch.setattr(costs, "_not_a_cost", lambda value: looked.append(value) or original(value))
    costs.check_cost_values(NUMBER_SCALARS, "info['cost']")
    costs.check_cost_values(tuple(NUMBER_SCALARS), "info['cost']")
    guard = costs.NonFiniteGuard(policy="raise")
    assert guard.array(NUMBER_SCALARS).tolist() == [float(v) for v in NUMBER_SCALARS]
    assert looked == []
    for text in ["0.5", b"1", bytearray(b"1"), np.array("1")]:  # text among them: looked at
        with pytest.raises(ConfigError, match=r"at index 10: a cost written as text"):
            costs.check_cost_values([*NUMBER_SCALARS, text], "info['cost']")
    assert len(looked) == 4


def test_a_0d_array_replacement_is_its_number():
    # np.array(0.5) passed math.isfinite before the replacement was checked as a real number
    guard = NonFiniteGuard("cost", policy="warn", replacement=np.array(0.5), source="test")
    assert guard.replacement == 0.5 and type(guard.replacement) is float
    for bad in (np.array(np.nan), np.array([0.5]), np.array(True), np.array("0.5")):
        with pytest.raises(ConfigError, match="nonfinite_value"):
            NonFiniteGuard("cost", policy="warn", replacement=bad, source="test")
    assert EpisodeCostTracker(2, queue_length=None).cost_queue.maxlen is None


@pytest.mark.parametrize(
    "costs",
    [
        [0.5, np.array("1", dtype=object)],
        [np.array(["1"], dtype=object)],
        [0.5, [1.0, "2"]],
        [np.array([0.5, np.array("1")], dtype=object)],
    ],
    ids=repr,
)
def test_text_in_an_object_array_or_a_list_inside_the_list_is_refused(costs):
    # np.array(costs, float64) reads the text in them as a number: NonFiniteGuard.array (the
    # SB3 VecCostMonitor's list of sub-env costs) took [0.5, np.array("1", dtype=object)] as
    # [0.5, 1.0]
    guard = NonFiniteGuard(source="VecCostMonitor")
    with pytest.raises(ConfigError, match=r"info\['cost'\].*at index \d: a cost written as text"):
        guard.array(costs, where="info['cost']")


def _sb3_readers():
    pytest.importorskip("torch")
    from gymcurric.integrations.sb3.common.constraints import read_costs
    from gymcurric.integrations.sb3.common.risk_values import read_risks

    return read_costs, read_risks


@pytest.mark.parametrize("where", ["check", "scalar", "array", "read_costs", "read_risks"])
def test_an_int_too_large_for_a_float_is_refused_naming_the_key(where):
    # float() and np.array(..., float64) raised a bare OverflowError ('int too large to
    # convert to float'), naming neither the key nor the value
    big = 10**400
    guard = NonFiniteGuard(source="AnnotateCost")
    readers = {
        "check": lambda: check_cost_values(big, "info['cost']"),
        "scalar": lambda: guard.scalar(big, where="info['cost']"),
        "array": lambda: guard.array([0.5, big], where="info['cost']"),
    }
    if where.startswith("read_"):
        read_costs, read_risks = _sb3_readers()
        infos = [{"cost": 0.5, "risk": 0.5}, {"cost": big, "risk": big}]
        readers["read_costs"] = lambda: read_costs(
            infos, n_costs=1, vector=False, keys=None, source="PPOLag"
        )
        readers["read_risks"] = lambda: read_risks(infos, "PPOLag")
    key = "risk" if where == "read_risks" else "cost"
    with pytest.raises(ConfigError, match=rf"invalid value for \"info\['{key}'\]\": '?1000") as err:
        readers[where]()
    assert "too large" in str(err.value) and "(401 characters)" in str(err.value)


def test_ints_a_float_holds_are_costs_as_before():
    check_cost_values([2**1023, -(2**1023), 2**64], "info['cost']")
    assert NonFiniteGuard().array([2**64, 1]).tolist() == [2.0**64, 1.0]


@pytest.mark.parametrize(
    "values",
    [1 + 0j, np.complex128(0.5), np.array(0.5 + 1j), np.array([0.5, 1j]), [0.5, np.complex64(1)]],
)
def test_a_complex_cost_is_refused(values):
    # float() of a numpy complex keeps the real part under only NumPy's ComplexWarning
    from gymcurric.safety.costs import check_cost_values

    with pytest.raises(ConfigError, match=r"info\['cost'\].*expected a real number.*imaginary"):
        check_cost_values(values, "info['cost']", source="test")


@pytest.mark.parametrize("key", ["cost", "final_info"])
def test_a_complex_vector_info_array_is_refused_naming_the_sub_env(key):
    # read_step_costs (the vector cost wrappers, AnnotateRisk's twin, the replay recorder) took
    # a complex info array as numbers with no look inside: [0.5, 1+2j] read as [0.5, 1.0]; each
    # entry of it is a complex number, the first named
    from gymcurric.safety.costs import read_step_costs

    costs = np.array([0.5, 1 + 2j])
    infos = {"cost": costs, "_cost": np.ones(2, bool)}
    if key == "final_info":
        infos = {"final_info": infos, "_final_info": np.ones(2, bool)}
    dones = np.ones(2, bool)
    with pytest.raises(ConfigError, match=r"\[0\]\": np.complex128\(0.5\+0j\).*imaginary part"):
        read_step_costs(infos, 2, dones, np.zeros(2, bool), same_step=True, source="test")
    real = {"cost": np.array([0.5, 1.0]), "_cost": np.ones(2, bool)}
    read = read_step_costs(real, 2, np.zeros(2, bool), np.zeros(2, bool), False, source="test")
    assert read[0].tolist() == [0.5, 1.0]
