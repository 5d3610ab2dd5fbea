"""Valid safe-RL inputs that the input checks must keep taking, and their 0-d array forms.

``policy_kwargs['cost_net_arch'] = None`` is the policy's own default (the value net's layers);
a 0-d NumPy array (``np.load(...)["cost_gamma"]``) is a real number, as ``float()`` read it
before the checks took NumPy scalars. Odd shapes are a ConfigError naming the parameter.
"""

import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.integrations.sb3 import PPOLag
from tests.integrations.sb3.hazard_runs import SMALL, hazard_vec


def ppolag(**kw):
    return PPOLag("MlpPolicy", hazard_vec(1), seed=0, **{**SMALL, **kw})


@pytest.mark.parametrize("cost_limit", [1.0, [1.0, 2.0]])
def test_cost_net_arch_none_is_the_value_nets_layers(cost_limit):
    model = ppolag(cost_limit=cost_limit, policy_kwargs={"cost_net_arch": None})
    default = ppolag(cost_limit=cost_limit)
    assert model.policy.cost_net_arch is None
    assert str(model.policy.cost_value_net) == str(default.policy.cost_value_net)
