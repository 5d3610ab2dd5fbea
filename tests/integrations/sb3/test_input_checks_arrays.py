"""Valid safe-RL inputs that the input checks must keep taking, and their 0-d array forms.

``policy_kwargs['cost_net_arch'] = None`` is the policy's own default (the value net's layers);
a 0-d NumPy array (``np.load(...)["cost_gamma"]``) is a real number, as ``float()`` read it
before the checks took NumPy scalars. Odd shapes are a ConfigError naming the parameter.
"""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import CPO, PPOLag, PPOPIDLag
from gymcurric.integrations.sb3.common.multiplier_checks import as_real
from gymcurric.integrations.sb3.common.policies import check_cost_net_arch
from tests.integrations.sb3.hazard_runs import SMALL, hazard_vec


def ppolag(**kw):
    return PPOLag("MlpPolicy", hazard_vec(1), seed=0, **{**SMALL, **kw})


@pytest.mark.parametrize("cost_limit", [1.0, [1.0, 2.0]])
def test_cost_net_arch_none_is_the_value_nets_layers(cost_limit):
    model = ppolag(cost_limit=cost_limit, policy_kwargs={"cost_net_arch": None})
    default = ppolag(cost_limit=cost_limit)
    assert model.policy.cost_net_arch is None
    assert str(model.policy.cost_value_net) == str(default.policy.cost_value_net)


def test_a_0d_array_is_a_real_number():
    assert [as_real(np.array(v)) for v in (0.5, 3, np.float32(0.25))] == [0.5, 3.0, 0.25]
    assert type(as_real(np.array(0.5))) is float
    for bad in (np.array(True), np.array("0.5"), np.array([0.5]), np.array(1 + 2j)):
        assert as_real(bad) is None


def test_0d_arrays_are_taken_as_before():
    # float() read them before the checks took NumPy scalars (cost_gamma, the norm, the gains)
    model = ppolag(
        cost_gamma=np.array(0.5), cost_gae_lambda=np.array(0.75),
        cost_max_grad_norm=np.array(40.0), cost_limit=np.array(5.0), lagrange_lr=np.array(0.1),
        multiplier_kwargs={"upper_bound": np.array(10.0)},
    )  # fmt: skip
    assert model.rollout_buffer.cost_gamma == 0.5 and model.rollout_buffer.cost_gae_lambda == 0.75
    assert model.cost_max_grad_norm == 40.0 and type(model.cost_max_grad_norm) is float
    assert model.cost_limit(1.0) == 5.0 and model.n_costs == 1 and not model.vector_costs
    assert model.lagrange.upper_bound == 10.0
    pid = PPOPIDLag("MlpPolicy", hazard_vec(1), kd=np.array(0.5), seed=0, **SMALL)
    assert (
        pid.lagrange.kd
        == PPOPIDLag("MlpPolicy", hazard_vec(1), kd=0.5, seed=0, **SMALL).lagrange.kd
    )


def test_a_0d_cost_net_arch_is_a_config_error():
    # a bare int in an array: a raw "iteration over a 0-d array" TypeError before
    with pytest.raises(ConfigError, match="expected a list of positive ints"):
        check_cost_net_arch("cost_net_arch", np.array(64), source="t")
    with pytest.raises(ConfigError) as info:
        ppolag(policy_kwargs={"cost_net_arch": np.array(64)})
    assert info.value.key == "policy_kwargs['cost_net_arch']"


def test_cpo_keeps_numpy_numbers_as_python_floats():
    # docs/safe_rl.md: NumPy scalars are taken as the Python float of the same value; an
    # np.float32 kept as given compares in float32 with a Python float (NEP 50)
    small = {"n_steps": 32, "batch_size": 32, "device": "cpu"}
    given = {
        "target_kl": np.float32(0.01),
        "cg_damping": np.array(0.1),
        "line_search_shrinking_factor": np.float32(0.8),
    }
    cpo = CPO("MlpPolicy", hazard_vec(1), seed=0, **given, **small)
    for name, value in given.items():
        assert type(getattr(cpo, name)) is float and getattr(cpo, name) == float(value)
    plain = CPO("MlpPolicy", hazard_vec(1), target_kl=0.01, cg_damping=0, seed=0, **small)
    assert type(plain.cg_damping) is int and plain.target_kl == 0.01  # Python numbers as given
