"""Unknown multiplier options are ConfigErrors naming the parameter, the value and the choices.

They were TypeErrors from a constructor's ``**kwargs`` (``multiplier_kwargs={"kq": 1}``) or,
for ``PPOPIDLag(multiplier="adam")``, a TypeError about ``kp`` the user never passed. Values a
multiplier refuses (``PPOPIDLag(kp=-1)``) name the algorithm and the argument the user passed,
not the internal ``PIDLagrangeMultiplier(...)``.
"""

import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import PPOLag, PPOPIDLag, TRPOLag
from gymcurric.integrations.sb3.common.multipliers import MultiplierSet, make_multiplier
from tests.integrations.sb3.hazard_runs import hazard_vec

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "device": "cpu"}
PID_KEYS = ["d_delay", "d_ema_alpha", "kd", "ki", "kp", "p_ema_alpha", "penalty_max"]


@pytest.mark.parametrize(
    ("kind", "kwargs", "known"),
    [
        ("pid", {"kq": 0.1}, PID_KEYS),
        ("pid", {"init": 0.5}, PID_KEYS),  # λ's start is lagrange_init, not a PID constant
        ("adam", {"kp": 0.1}, ["upper_bound"]),
        ("sgd", {"optimizer": "adam"}, ["upper_bound"]),
    ],
)
def test_unknown_multiplier_kwargs_name_the_keys_and_the_choices(kind, kwargs, known):
    with pytest.raises(ConfigError) as err:
        make_multiplier(kind, init=0.0, lr=0.1, kwargs=kwargs)
    assert err.value.key == "multiplier_kwargs" and err.value.value == kwargs
    message = str(err.value)
    assert f"unknown keys {sorted(kwargs)} for multiplier={kind!r}" in message
    assert f"known: {known}" in message
    with pytest.raises(ConfigError, match="multiplier_kwargs"):
        MultiplierSet(2, kind, init=0.0, lr=0.1, kwargs=kwargs)


@pytest.mark.parametrize("cls", [PPOLag, TRPOLag])
def test_the_algorithms_refuse_unknown_multiplier_kwargs(cls):
    with pytest.raises(
        ConfigError, match=r"'multiplier_kwargs': \{'kq': 1\}.*unknown keys \['kq'\]"
    ):
        cls("MlpPolicy", hazard_vec(1), multiplier="pid", multiplier_kwargs={"kq": 1}, **SMALL)
    # the known keys still work
    model = cls(
        "MlpPolicy", hazard_vec(1), multiplier="pid", multiplier_kwargs={"kp": 0.5}, **SMALL
    )
    assert model.lagrange.kp == 0.5


@pytest.mark.parametrize("multiplier", ["adam", "sgd", "bogus"])
def test_ppopidlag_refuses_another_multiplier(multiplier):
    with pytest.raises(ConfigError) as err:
        PPOPIDLag("MlpPolicy", hazard_vec(1), multiplier=multiplier, **SMALL)
    assert err.value.key == "multiplier" and err.value.value == multiplier
    assert "'pid'" in str(err.value) and "PPOLag" in str(err.value)
    assert PPOPIDLag("MlpPolicy", hazard_vec(1), multiplier="pid", **SMALL).multiplier == "pid"


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (PPOLag, {"multiplier": "pid"}),
        (PPOPIDLag, {}),
        (TRPOLag, {"multiplier": "adam"}),
    ],
)
def test_unknown_multiplier_kwargs_name_the_algorithm(cls, kwargs):
    with pytest.raises(ConfigError) as err:
        cls("MlpPolicy", hazard_vec(1), multiplier_kwargs={"kq": 1}, **kwargs, **SMALL)
    assert err.value.source == cls.__name__ and err.value.key == "multiplier_kwargs"
    assert str(err.value).startswith(f"{cls.__name__}: invalid value for 'multiplier_kwargs'")


def test_make_multiplier_names_its_caller():
    with pytest.raises(ConfigError, match=r"^MyAgent: .*unknown keys \['kq'\]") as err:
        make_multiplier("pid", init=0.0, lr=0.1, kwargs={"kq": 1}, source="MyAgent")
    assert err.value.source == "MyAgent"
    with pytest.raises(ConfigError, match=r"^MyAgent: .*'multiplier': 'lbfgs'"):
        make_multiplier("lbfgs", init=0.0, lr=0.1, source="MyAgent")


@pytest.mark.parametrize("value", ["kp", 5, [1, 2]])
@pytest.mark.parametrize("cls", [PPOLag, PPOPIDLag, TRPOLag])
def test_multiplier_kwargs_that_is_not_a_dict_is_a_config_error(cls, value):
    # dict(value) raised a bare ValueError / TypeError ("dictionary update sequence element
    # #0 has length 1; 2 is required"), naming neither the parameter nor the algorithm
    with pytest.raises(ConfigError) as err:
        cls("MlpPolicy", hazard_vec(1), multiplier_kwargs=value, **SMALL)
    assert err.value.key == "multiplier_kwargs" and err.value.value == value
    assert err.value.source == cls.__name__
    with pytest.raises(ConfigError, match=r"^MyAgent: invalid value for 'multiplier_kwargs'"):
        make_multiplier("pid", init=0.0, lr=0.1, kwargs=value, source="MyAgent")  # type: ignore[arg-type]


def test_multiplier_set_names_its_caller():
    # MultiplierSet's ConfigErrors name the caller, as make_multiplier's (default: itself)
    with pytest.raises(ConfigError, match=r"^MyAgent: .*'multiplier_kwargs': \{'kq': 1\}") as err:
        MultiplierSet(2, "pid", init=0.0, lr=0.1, kwargs={"kq": 1}, source="MyAgent")
    assert (err.value.source, err.value.value) == ("MyAgent", {"kq": 1})
    with pytest.raises(ConfigError, match=r"^MyAgent: .*'multiplier': 'lbfgs'"):
        MultiplierSet(2, "lbfgs", init=0.0, lr=0.1, source="MyAgent")
    with pytest.raises(ConfigError, match=r"^MultiplierSet: .*unknown keys \['kq'\]") as err:
        MultiplierSet(2, "adam", init=0.0, lr=0.1, kwargs={"kq": 1})
    assert err.value.source == "MultiplierSet"


@pytest.mark.parametrize("given", [{"kq": 1}, {"kq": 1, "penalty_max": 5.0}, [("kq", 1)]])
def test_ppopidlag_shows_the_multiplier_kwargs_the_user_passed(given):
    # not the dict merged with its PID gains ({'kp': 0.1, 'ki': 0.01, 'kd': 0.01, 'kq': 1})
    with pytest.raises(ConfigError) as err:
        PPOPIDLag("MlpPolicy", hazard_vec(1), kp=0.2, multiplier_kwargs=given, **SMALL)
    assert (err.value.key, err.value.value, err.value.source) == (
        "multiplier_kwargs",
        given,
        "PPOPIDLag",
    )
    assert str(err.value).startswith(f"PPOPIDLag: invalid value for 'multiplier_kwargs': {given!r}")
    model = PPOPIDLag("MlpPolicy", hazard_vec(1), kp=0.2, multiplier_kwargs={"kd": 0.5}, **SMALL)
    assert (model.lagrange.kp, model.lagrange.kd, model.multiplier_kwargs["kd"]) == (0.2, 0.5, 0.5)


@pytest.mark.parametrize(
    ("cls", "kwargs", "key", "value"),
    [
        (PPOPIDLag, {"kp": -1}, "kp", -1),
        (PPOPIDLag, {"kd": "x"}, "kd", "x"),
        (
            PPOPIDLag,
            {"multiplier_kwargs": {"penalty_max": -2.0}},
            "multiplier_kwargs['penalty_max']",
            -2.0,
        ),
        (PPOPIDLag, {"multiplier_kwargs": {"d_delay": 0}}, "multiplier_kwargs['d_delay']", 0),
        (PPOPIDLag, {"ki": -1, "pid_epoch_steps": 20_000}, "ki", -1),
        (
            PPOLag,
            {"multiplier_kwargs": {"upper_bound": -1.0}},
            "multiplier_kwargs['upper_bound']",
            -1.0,
        ),
        (
            PPOLag,
            {"multiplier": "pid", "multiplier_kwargs": {"p_ema_alpha": 1.5}},
            "multiplier_kwargs['p_ema_alpha']",
            1.5,
        ),
        (PPOLag, {"lagrange_lr": -1.0}, "lagrange_lr", -1.0),
        (
            TRPOLag,
            {"multiplier": "sgd", "multiplier_kwargs": {"upper_bound": float("inf")}},
            "multiplier_kwargs['upper_bound']",
            float("inf"),
        ),
        (TRPOLag, {"lagrange_init": -1.0}, "lagrange_init", -1.0),
    ],
)
def test_refused_multiplier_values_name_the_algorithm_and_the_argument(cls, kwargs, key, value):
    with pytest.raises(ConfigError) as err:
        cls("MlpPolicy", hazard_vec(1), **kwargs, **SMALL)
    assert (err.value.source, err.value.key, err.value.value) == (cls.__name__, key, value)
    assert str(err.value).startswith(f"{cls.__name__}: invalid value for {key!r}: {value!r} (")
    assert "LagrangeMultiplier" not in str(err.value)


def test_a_gain_multiplier_kwargs_overrides_is_not_checked():
    # as before: multiplier_kwargs' gain is the one used, so kp=-1 is not refused
    model = PPOPIDLag("MlpPolicy", hazard_vec(1), kp=-1, multiplier_kwargs={"kp": 0.5}, **SMALL)
    assert model.lagrange.kp == 0.5


def test_refused_values_name_the_caller_of_make_multiplier_and_multiplier_set():
    bad = {"kp": -1}
    with pytest.raises(
        ConfigError, match=r"""^MyAgent: invalid value for "multiplier_kwargs\['kp'\]": -1"""
    ):
        make_multiplier("pid", init=0.0, lr=0.1, kwargs=bad, source="MyAgent")
    with pytest.raises(ConfigError, match=r"^MultiplierSet: invalid value for 'lagrange_lr': -1"):
        MultiplierSet(2, "adam", init=0.0, lr=-1)
    # without a caller, the multiplier's own error as before
    with pytest.raises(ConfigError, match=r"^PIDLagrangeMultiplier\(\.\.\.\): .*'kp': -1"):
        make_multiplier("pid", init=0.0, lr=0.1, kwargs=bad)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"kp": -1, "cost_limit": -1.0}, "cost_limit"),
        ({"kd": "x", "lagrange_init": -1.0}, "lagrange_init"),
        ({"ki": -1, "lagrange_lr": -1.0}, "lagrange_lr"),
        # the multiplier checks kp before kd, whichever argument each came from
        ({"kd": -1, "multiplier_kwargs": {"kp": -1}}, "multiplier_kwargs['kp']"),
    ],
)
def test_ppopidlag_reports_the_first_bad_argument_in_the_order_of_ppolag(kwargs, key):
    # two bad arguments: the one reported is the one PPOLag(multiplier="pid") reports first
    # (PPOPIDLag checked its gains before PPOLag's own arguments)
    with pytest.raises(ConfigError) as err:
        PPOPIDLag("MlpPolicy", hazard_vec(1), **kwargs, **SMALL)
    assert (err.value.source, err.value.key) == ("PPOPIDLag", key)
