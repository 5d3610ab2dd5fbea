from functools import partial

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.vec_env import DummyVecEnv

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.common import LagrangianMixin
from gymcurric.integrations.sb3.ppo_lag import PPOLag
from gymcurric.integrations.sb3.trpo_lag import TRPOLag
from tests.integrations.sb3.hazard_runs import assert_same, hazard_vec, policy_params
from tests.new_interpreter import call_in_new_interpreter
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}


def test_shares_the_lagrangian_code_with_ppolag():
    assert issubclass(TRPOLag, LagrangianMixin) and issubclass(PPOLag, LagrangianMixin)
    for name in ("collect_rollouts", "_update_lagrange", "_train_cost_critic", "dump_logs"):
        assert getattr(TRPOLag, name) is getattr(PPOLag, name) is getattr(LagrangianMixin, name)


def test_parity_with_trpo_when_lambda_is_fixed_at_zero():
    trpo = TRPO("MlpPolicy", hazard_vec(), seed=2, **SMALL).learn(256)
    lag = TRPOLag(
        "MlpPolicy", hazard_vec(), seed=2, lagrange_init=0.0, lagrange_lr=0.0, **SMALL
    ).learn(256)
    a, b = policy_params(trpo), policy_params(lag)
    for k in a:
        assert th.equal(a[k], b[k]), k
    pen = TRPOLag(
        "MlpPolicy", hazard_vec(), seed=2, lagrange_init=5.0, lagrange_lr=0.0, **SMALL
    ).learn(256)
    c = policy_params(pen)
    assert not all(th.equal(a[k], c[k]) for k in a)


def test_cost_critic_learns_and_stays_out_of_the_trust_region_step():
    model = TRPOLag("MlpPolicy", hazard_vec(), seed=0, update_cost_critic=False, **SMALL)
    before = policy_params(model)
    model.learn(128)
    after = policy_params(model)
    for k in before:
        if k.startswith("cost_value_net"):
            assert th.equal(before[k], after[k]), k  # TRPO's natural-gradient step skips V_c
    model2 = TRPOLag("MlpPolicy", hazard_vec(), seed=0, **SMALL).learn(128)
    assert not th.equal(
        policy_params(model2)["cost_value_net.0.weight"], before["cost_value_net.0.weight"]
    )


def test_lambda_rises_over_the_limit_and_save_load_continue(tmp_path):
    kw = {**SMALL, "seed": 1, "cost_limit": 0.0, "cost_window": 5, "lagrange_lr": 0.2}
    a = TRPOLag("MlpPolicy", hazard_vec(seed=1), **kw).learn(256)
    assert a.lagrange_multiplier > 0.1
    a.save(tmp_path / "trpo.zip")
    b = TRPOLag.load(tmp_path / "trpo.zip", env=hazard_vec(), device="cpu")
    a.set_env(hazard_vec())
    for m in (a, b):
        m.get_env().seed(3)
        th.manual_seed(4)
        np.random.seed(4)  # noqa: NPY002  (SB3 shuffles with the global RNG)
        m.learn(256, reset_num_timesteps=False)
    assert a.lagrange_multiplier == b.lagrange_multiplier
    assert_same(policy_params(a), policy_params(b))
    assert_same(a.lagrange.state_dict(), b.lagrange.state_dict())


def test_missing_cost_and_bad_limit():
    venv = DummyVecEnv([partial(make_scripted, 3, mode="none")])
    with pytest.raises(ConfigError, match="info\\['cost'\\]"):
        TRPOLag("MlpPolicy", venv, n_steps=8, batch_size=8, device="cpu").learn(8)
    with pytest.raises(ConfigError, match="cost_limit"):
        TRPOLag("MlpPolicy", hazard_vec(1), cost_limit=-3.0, **SMALL)


def test_pid_multiplier_with_per_epoch_constants():
    # 2 envs x 32 steps = 64 env steps per rollout, OmniSafe's 20,000-step epochs
    model = TRPOLag(
        "MlpPolicy", hazard_vec(), multiplier="pid", pid_epoch_steps=20_000, cost_limit=0.0,
        seed=0, **SMALL,
    )  # fmt: skip
    assert model.lagrange.ki == pytest.approx(0.01 * 64 / 20_000)
    assert model.lagrange.d_delay == round(10 * 20_000 / 64)
    model.learn(128)
    assert model.lagrange_multiplier > 0.0
    with pytest.raises(ConfigError, match="pid_epoch_steps"):
        TRPOLag("MlpPolicy", hazard_vec(1), pid_epoch_steps=20_000, **SMALL)


# ------------------------------------------------------------- save, load elsewhere, continue
def continue_here(model, steps):
    model.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    return model.learn(steps, reset_num_timesteps=False)


def continue_saved(path, out, steps):
    """Load ``path``, continue ``steps`` as :func:`continue_here`, save to ``out`` (new process)."""
    model = TRPOLag.load(path, env=hazard_vec(), device="cpu")
    continue_here(model, steps).save(out)
    return model.num_timesteps


def state(model):
    return {
        "policy": policy_params(model),
        "optimizer": model.policy.optimizer.state_dict(),
        "cost_optimizer": model.policy.cost_optimizer.state_dict(),
        "lagrange": model.lagrange.state_dict(),
        "lambda": model.lagrange_multiplier,
        "ep_cost": list(model.ep_cost_buffer),
        "cost_rng": model._cost_rng.bit_generator.state,
        "counts": [model.num_timesteps, model._n_updates, model.nonfinite_skipped],
    }


@pytest.mark.slow  # CPO (the same trust-region step) keeps its new-interpreter test by default
def test_save_load_in_a_new_interpreter_and_continue_equals_uninterrupted(tmp_path):
    kw = {**SMALL, "seed": 1, "cost_limit": 0.0, "cost_window": 5, "lagrange_lr": 0.2}
    a = TRPOLag("MlpPolicy", hazard_vec(seed=1), **kw).learn(320)
    assert a.lagrange_multiplier > 0.01  # λ moved: its state matters below
    a.save(tmp_path / "trpo.zip")
    steps = call_in_new_interpreter(
        "tests.integrations.sb3.test_trpo_lag", "continue_saved",
        str(tmp_path / "trpo.zip"), str(tmp_path / "resumed.zip"), 320,
    )  # fmt: skip
    a.set_env(hazard_vec())  # continues from a fresh reset of the same seeded envs
    continue_here(a, 320)
    b = TRPOLag.load(tmp_path / "resumed.zip", device="cpu")
    assert steps == a.num_timesteps == b.num_timesteps == 640
    assert_same(state(a), state(b))
