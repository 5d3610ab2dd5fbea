"""An unknown policy name is a ConfigError naming ``policy``, the value and the choices.

SB3's own error was ``ValueError("Policy MlpPolicyy unknown")``: no parameter, no choices.
"""

import pytest

pytest.importorskip("sb3_contrib")

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import CPO, P3O, PPOLag, PPOPIDLag, TRPOLag
from gymcurric.integrations.sb3.simmer import PPOSimmer
from tests.integrations.sb3.hazard_runs import hazard_vec

pytestmark = pytest.mark.sb3


@pytest.mark.parametrize("cls", [CPO, P3O, PPOLag, PPOPIDLag, TRPOLag, PPOSimmer])
def test_an_unknown_policy_name_names_the_choices(cls):
    extra = {"max_episode_steps": 200} if cls is PPOSimmer else {}
    with pytest.raises(ConfigError) as err:
        cls("MlpPolicyy", hazard_vec(1), n_steps=32, batch_size=32, device="cpu", **extra)
    assert err.value.key == "policy" and err.value.value == "MlpPolicyy"
    assert "'MlpPolicy'" in str(err.value) and "'CnnPolicy'" in str(err.value)
    assert isinstance(err.value, ValueError)  # what SB3 raised before: callers keep working


@pytest.mark.parametrize("cls", [P3O, PPOLag, PPOPIDLag])
def test_a_batch_size_too_small_to_normalise_names_the_algorithm(cls):
    with pytest.raises(ConfigError) as err:
        cls("MlpPolicy", hazard_vec(1), n_steps=32, batch_size=1, device="cpu")
    assert err.value.key == "batch_size" and err.value.value == 1
    assert err.value.source == cls.__name__  # as the other ConfigErrors of these classes
    assert str(err.value).startswith(f"{cls.__name__}: invalid value for 'batch_size': 1")
