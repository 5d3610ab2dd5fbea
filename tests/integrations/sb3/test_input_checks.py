"""Bad input to the safe-RL agents is a ConfigError naming it; NumPy scalars are numbers.

The audit's cases: a risk value or a cost that is not a number at rollout time,
``cost_max_grad_norm`` / ``update_cost_critic`` / ``center_cost_advantage`` of the wrong type,
``policy_kwargs['cost_net_arch']`` and ``policy_kwargs['n_costs']``, and numeric arguments
(NumPy scalars taken as the Python number of the same value, strings and bools refused).
"""

import math

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError
from gymcurric.integrations.sb3 import CPO, P3O, PPOLag, PPOPIDLag, PPOSimmer, TRPOLag
from gymcurric.integrations.sb3.common.constraints import read_costs
from gymcurric.integrations.sb3.common.multipliers import (
    LagrangeMultiplier,
    MultiplierSet,
    PIDLagrangeMultiplier,
    pid_kwargs_per_update,
)
from gymcurric.integrations.sb3.common.policies import CostActorCriticPolicy
from gymcurric.integrations.sb3.ppo_lag import ppo_lag
from gymcurric.safety import RiskModulation, modulation
from tests.integrations.sb3.hazard_runs import SMALL, hazard_vec, logged, make_hazard, silent
from tests.integrations.sb3.info_values import vec_with

CPO_SMALL = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}


def ppolag(env=None, **kw):
    return PPOLag("MlpPolicy", hazard_vec(1) if env is None else env, seed=0, **{**SMALL, **kw})


def refused(key, value=None, **kw):
    """The ConfigError that building a PPOLag with ``kw`` raises; it names ``key``."""
    with pytest.raises(ConfigError) as info:
        ppolag(**kw)
    assert info.value.key == key
    if value is not None:
        assert info.value.value == value
    return info.value


# --------------------------------------------------------------- 1. a risk that is not a number
RISK = {"min_episodes": 0, "reference_window": 20}


@pytest.mark.parametrize("bad", [None, "high", [0.1, 0.2]])
def test_a_risk_value_that_is_not_a_number_is_refused_naming_the_sub_env(bad):
    # before: float(None) stopped the rollout with a raw TypeError ("high": ValueError); read
    # as NaN instead, it would be left out of M as a NaN risk is: the sub-env would
    # never count, and with no readable risk M = 1, a modulated run training as plain PPOLag
    model = silent(ppolag(vec_with("risk", [0.5, bad]), risk_modulation=RISK))
    with pytest.raises(ConfigError) as err:
        model.learn(2 * SMALL["n_steps"] * 2)
    assert err.value.key == "info['risk']" and err.value.source == "PPOLag"
    assert err.value.value == bad
    assert f"sub-env 1: {bad!r})" in str(err.value) and "sub-env 0" not in str(err.value)


def test_every_unreadable_risk_is_named_and_a_nan_risk_is_left_out(monkeypatch):
    monkeypatch.setattr(modulation, "_NON_FINITE_WARNED", set(), raising=False)  # once a process
    model = silent(ppolag(vec_with("risk", [None, "x"]), risk_modulation=RISK))
    with pytest.raises(ConfigError, match=r"sub-env 0: None, sub-env 1: 'x'"):
        model.learn(2 * SMALL["n_steps"] * 2)
    nan = silent(ppolag(vec_with("risk", [0.5, math.nan]), risk_modulation=RISK))
    with pytest.warns(GymcurricWarning, match="left out"):
        nan.learn(2 * SMALL["n_steps"] * 2)  # a NaN is an anomaly, not an error
    # M from the finite values (all 0.5: q_p = mean, z = 0), not 1 while the NaN is in the window
    expected = RiskModulation(**RISK).modulation([0.5], [0.5]).scale
    assert logged(nan)["risk/modulation_scale"] == expected < 1.0


# ----------------------------------------------------------------------- 2. a None cost
def test_a_none_cost_is_not_a_real_number_not_a_nonfinite_one():
    infos = [{"cost": 1.0}, {"cost": None}]
    with pytest.raises(ConfigError, match=r"sub-envs \[1\] reported None") as info:
        read_costs(infos, n_costs=1, vector=False, keys=None, source="PPOLag")
    assert info.value.key == "info['cost']" and info.value.value == [1.0, None]
    with pytest.raises(ConfigError, match=r"sub-envs \[0\] reported None"):
        read_costs([{"a": None, "b": 1.0}], n_costs=2, vector=True, keys=("a", "b"), source="x")
    with pytest.raises(ConfigError, match=r"sub-env 1: entries \[0\] are None") as info:
        infos = [{"costs": [1.0, 2.0]}, {"costs": [None, 2.0]}]
        read_costs(infos, n_costs=2, vector=True, keys=None, source="x")
    assert info.value.key == "info['costs']"


def test_a_none_cost_stops_learning_with_a_config_error():
    model = silent(ppolag(vec_with("cost", [0.0, None])))
    with pytest.raises(ConfigError, match=r"info\['cost'\].*sub-envs \[1\]"):
        model.learn(SMALL["n_steps"] * 2)


def test_a_nan_scalar_cost_names_its_sub_envs():
    infos = [{"cost": 1.0}, {"cost": math.nan}, {"cost": math.inf}]
    with pytest.raises(NonFiniteValueError, match=r"sub-envs \[1, 2\]\); wrap the env"):
        read_costs(infos, n_costs=1, vector=False, keys=None, source="PPOLag")


# ------------------------------------------------------- 3. and 4. cost_max_grad_norm, flags
@pytest.mark.parametrize("bad", ["1", True, [1.0], math.nan, 0, -1.0])
def test_cost_max_grad_norm_is_a_positive_number(bad):
    refused("cost_max_grad_norm", cost_max_grad_norm=bad)


def test_cost_max_grad_norm_takes_numpy_numbers():
    assert ppolag(cost_max_grad_norm=np.float32(40)).cost_max_grad_norm == 40.0
    assert type(ppolag(cost_max_grad_norm=np.float32(40)).cost_max_grad_norm) is float
    assert ppolag(cost_max_grad_norm=40).cost_max_grad_norm == 40


@pytest.mark.parametrize("name", ["update_cost_critic", "center_cost_advantage"])
@pytest.mark.parametrize("bad", ["no", "False", 0, 1, None])
def test_the_cost_flags_are_bools(name, bad):
    # before: bool("no") is True, silently
    refused(name, bad, **{name: bad})


@pytest.mark.parametrize("name", ["update_cost_critic", "center_cost_advantage"])
def test_the_cost_flags_take_numpy_bools(name):
    model = ppolag(**{name: np.bool_(False)})
    assert getattr(model, name) is False


# ------------------------------------------------------------------------ 5. cost_net_arch
@pytest.mark.parametrize("bad", [64, "64", [64.5], [-1], [0], [True], {"vf": [64]}, (64, "a")])
def test_cost_net_arch_is_a_list_of_positive_ints(bad):
    error = refused("policy_kwargs['cost_net_arch']", policy_kwargs={"cost_net_arch": bad})
    assert error.reason == "expected a list of positive ints"
    assert error.source == "PPOLag"


@pytest.mark.parametrize("bad", [64, [0]])
def test_the_policy_itself_checks_cost_net_arch(bad):
    env = make_hazard()
    with pytest.raises(ConfigError, match="cost_net_arch"):
        CostActorCriticPolicy(
            env.observation_space, env.action_space, lambda _: 3e-4, cost_net_arch=bad
        )


@pytest.mark.parametrize("arch", [[8], (8, 4), [np.int64(8)], []])
def test_cost_net_arch_takes_sequences_of_ints(arch):
    model = ppolag(policy_kwargs={"cost_net_arch": arch})
    assert model.policy.cost_net_arch == [int(a) for a in arch]
    widths = [m.out_features for m in model.policy.cost_value_net if hasattr(m, "out_features")]
    assert widths == [*[int(a) for a in arch], 1]


# ------------------------------------------------------------------- 6. numbers and NumPy
def test_as_real_and_check_finite():
    from gymcurric.integrations.sb3.common.multiplier_checks import as_real, check_finite

    assert [as_real(v) for v in (2, 2.5, np.float32(0.5), np.int64(3))] == [2.0, 2.5, 0.5, 3.0]
    assert [as_real(v) for v in ("1", True, np.bool_(True), None, [1.0])] == [None] * 5
    assert type(check_finite("x", np.float64(1.5), source="t")) is float
    for bad in ("0.1", True):
        with pytest.raises(ConfigError, match="expected a real number"):
            check_finite("x", bad, source="t")


def numpy_and_python(**kw):
    """PPOLags built from ``kw`` as given and with NumPy scalars; their settings are equal."""
    as_numpy = {
        k: (np.float32(v) if isinstance(v, float) else np.int64(v)) if not isinstance(v, dict)
        else {kk: np.float64(vv) for kk, vv in v.items()}
        for k, v in kw.items()
    }  # fmt: skip
    return ppolag(**kw), ppolag(**as_numpy)


def test_numpy_scalars_are_numbers_of_the_same_value():
    # before: np.float32(5) "expected a number", np.int64 counts refused
    plain, numpy = numpy_and_python(
        cost_limit=5.0, cost_window=7, cost_n_epochs=3, lagrange_init=0.5, lagrange_lr=0.25,
        multiplier_kwargs={"upper_bound": 10.0}, cost_gamma=0.5, cost_gae_lambda=0.75,
    )  # fmt: skip
    assert numpy.cost_limit(1.0) == plain.cost_limit(1.0) == 5.0
    assert type(numpy.cost_limit.value) is float
    assert numpy.cost_window == 7 and type(numpy.cost_window) is int
    assert numpy.ep_cost_buffer.maxlen == 7
    assert numpy.cost_n_epochs == 3 and type(numpy.cost_n_epochs) is int
    assert numpy.lagrange.state_dict()["lambda"] == plain.lagrange.state_dict()["lambda"]
    assert numpy.lagrange.upper_bound == 10.0
    assert numpy.rollout_buffer.cost_gamma == 0.5 and numpy.rollout_buffer.cost_gae_lambda == 0.75


def test_numpy_scalars_in_the_pid_and_the_multipliers():
    model = PPOPIDLag(
        "MlpPolicy", hazard_vec(1), kd=np.float32(0.5), ki=np.int64(1),
        pid_epoch_steps=np.int64(64), multiplier_kwargs={"d_delay": np.int64(3)}, seed=0, **SMALL,
    )  # fmt: skip
    plain = PPOPIDLag(
        "MlpPolicy", hazard_vec(1), kd=0.5, ki=1, pid_epoch_steps=64,
        multiplier_kwargs={"d_delay": 3}, seed=0, **SMALL,
    )  # fmt: skip
    assert model.lagrange.state_dict() == plain.lagrange.state_dict()
    assert (model.lagrange.kd, model.lagrange.ki, model.lagrange.d_delay) == (0.5, 0.5, 6)
    assert type(model.pid_epoch_steps) is int
    assert PIDLagrangeMultiplier(d_delay=np.int64(3)).d_delay == 3
    assert len(MultiplierSet(np.int64(2), "sgd", init=0.0, lr=0.1)) == 2
    kw = pid_kwargs_per_update({}, epoch_steps=np.int64(20_000), update_steps=np.int64(2_000))
    assert kw == pid_kwargs_per_update({}, epoch_steps=20_000, update_steps=2_000)
    assert LagrangeMultiplier(init=np.float32(0.5), upper_bound=np.int64(2)).upper_bound == 2.0


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"cost_gamma": "0.9"}, "cost_gamma"),
        ({"cost_gae_lambda": "0.9"}, "cost_gae_lambda"),
        ({"cost_limit": "5"}, "cost_limit"),
        ({"lagrange_lr": "0.1"}, "lagrange_lr"),
        ({"lagrange_init": "0.1"}, "lagrange_init"),
        ({"multiplier_kwargs": {"upper_bound": "1"}}, "multiplier_kwargs['upper_bound']"),
        ({"cost_window": "5"}, "cost_window"),
        ({"cost_window": 5.0}, "cost_window"),
    ],
)
def test_strings_are_not_numbers(kw, key):
    refused(key, **kw)


@pytest.mark.parametrize("kw", [{"kd": "0.1"}, {"kp": "1"}, {"ki": True}])
def test_pid_gains_as_strings_are_refused(kw):
    # before: kd="0.1" was read by float()
    with pytest.raises(ConfigError) as info:
        PPOPIDLag("MlpPolicy", hazard_vec(1), seed=0, **kw, **SMALL)
    assert info.value.key == next(iter(kw))
    with pytest.raises(ConfigError, match="expected a real number"):
        PIDLagrangeMultiplier(**kw)


def test_the_other_safe_agents_take_numpy_scalars_and_refuse_strings():
    cpo = CPO(
        "MlpPolicy", hazard_vec(1), target_kl=np.float32(0.01), cg_damping=np.float64(0.1),
        cg_max_steps=np.int64(5), line_search_max_iter=np.int64(4),
        line_search_shrinking_factor=np.float32(0.5), cost_limit=np.float32(2), seed=0,
        **CPO_SMALL,
    )  # fmt: skip
    assert (cpo.cg_max_steps, cpo.line_search_max_iter) == (5, 4)
    assert type(cpo.cg_max_steps) is int
    for bad in ({"line_search_shrinking_factor": "0.8"}, {"target_kl": "0.01"}):
        with pytest.raises(ConfigError) as info:  # before: a raw TypeError for the first
            CPO("MlpPolicy", hazard_vec(1), seed=0, **bad, **CPO_SMALL)
        assert info.value.key == next(iter(bad))
    p3o = P3O("MlpPolicy", hazard_vec(1), kappa=np.float32(2), seed=0, **SMALL)
    assert p3o.kappa == 2.0
    simmer = PPOSimmer(
        "MlpPolicy", hazard_vec(1), safety_budget=np.float32(10), cost_window=np.int64(5),
        reference_steps=np.int64(100), max_episode_steps=50, seed=0, **SMALL,
    )  # fmt: skip
    assert simmer.simmer_kwargs["safety_budget"] == 10.0 and simmer.cost_window == 5
    assert type(simmer.reference_steps) is int
    trpo = TRPOLag("MlpPolicy", hazard_vec(1), cost_window=np.int64(3), seed=0, **CPO_SMALL)
    assert trpo.ep_cost_buffer.maxlen == 3


# ------------------------------------------------------------------------------- 7. nits
def test_policy_kwargs_n_costs_against_one_limit_is_named():
    # before: reported against 'policy' with "cost_limit has 1 limits"
    error = refused("policy_kwargs['n_costs']", 2, policy_kwargs={"n_costs": 2})
    assert "cost_limit has 1 limit, one per constraint, so the cost critic has 1 output:" in str(
        error
    )
    error = refused(
        "policy_kwargs['n_costs']", 3, policy_kwargs={"n_costs": 3}, cost_limit=[1.0, 2.0]
    )
    assert "2 limits, one per constraint, so the cost critic has 2 outputs" in str(error)
    refused("policy_kwargs['n_costs']", True, policy_kwargs={"n_costs": True})
    assert ppolag(policy_kwargs={"n_costs": 1}).policy.n_costs == 1


def test_the_docstring_counts_the_per_constraint_keys():
    doc = " ".join(ppo_lag.PPOLag.__doc__.split())
    assert "the first five" not in doc
    assert "train/cost_advantage_std" in doc
