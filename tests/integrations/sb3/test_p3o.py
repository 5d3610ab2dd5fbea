import csv
from functools import partial

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.p3o import P3O, kappa_schedule, p3o_cost_loss
from tests.integrations.sb3.hazard_runs import (
    SMALL,
    assert_same,
    continue_here,
    continue_in_new_interpreter,
    hazard_vec,
    logged,
    no_cost_vec,
    policy_params,
    silent,
)
from tests.integrations.sb3.poison import Poison
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3


# ---------------------------------------------------------------- the loss, by hand
RATIO = [1.5, 0.5, 1.1]  # above 1 + ε, below 1 - ε, inside
ADV_C = [2.0, 2.0, -1.0]


def loss_and_grad(gap, clip_range, kappa=3.0):
    ratio = th.tensor(RATIO, requires_grad=True)
    penalty, l_c = p3o_cost_loss(
        ratio, th.tensor(ADV_C), gap=gap, kappa=kappa, clip_range=clip_range
    )
    penalty.backward()
    return penalty.item(), l_c.item(), ratio.grad.tolist()


def test_cost_loss_paper_open_with_clipping_by_hand():
    # ratio·A_c = [3.0, 1.0, -1.1]; clip(ratio)·A_c = [2.4, 1.6, -1.1]; max = [3.0, 1.6, -1.1]
    penalty, l_c, grad = loss_and_grad(gap=0.1, clip_range=0.2)
    assert l_c == pytest.approx(3.5 / 3 + 0.1)
    assert penalty == pytest.approx(3.0 * (3.5 / 3 + 0.1))
    # d/dratio of κ·mean(.): the unclipped term passes κ·A_c/n, the clipped one (ratio 0.5
    # outside 1 ± ε) nothing, the tie inside the range κ·A_c/n
    assert grad == pytest.approx([3.0 * 2.0 / 3, 0.0, 3.0 * -1.0 / 3])


def test_cost_loss_omnisafe_has_no_clipping():
    penalty, l_c, grad = loss_and_grad(gap=0.1, clip_range=None)
    assert l_c == pytest.approx((3.0 + 1.0 - 1.1) / 3 + 0.1)
    assert penalty == pytest.approx(3.0 * l_c)
    assert grad == pytest.approx([2.0, 2.0, -1.0])  # κ·A_c/n everywhere


def test_cost_loss_clipping_inactive_equals_plain_surrogate():
    ratio = th.tensor([0.9, 1.1, 1.0])
    adv = th.tensor([1.0, -2.0, 0.5])
    a = p3o_cost_loss(ratio, adv, gap=0.2, kappa=2.0, clip_range=0.2)
    b = p3o_cost_loss(ratio, adv, gap=0.2, kappa=2.0, clip_range=None)
    assert float(a[1]) == pytest.approx((0.9 - 2.2 + 0.5) / 3 + 0.2) == float(b[1])


def test_cost_loss_closed_relu_is_zero_with_zero_gradient():
    penalty, l_c, grad = loss_and_grad(gap=-2.0, clip_range=0.2)
    assert l_c == pytest.approx(3.5 / 3 - 2.0) and l_c < 0
    assert penalty == 0.0 and grad == [0.0, 0.0, 0.0]


def test_kappa_schedule_by_hand():
    assert kappa_schedule(1.0, 2.0, 5.0, 4) == [1.0, 2.0, 4.0, 5.0]
    assert kappa_schedule(3.0, 1.0, 20.0, 3) == [3.0, 3.0, 3.0]


# ----------------------------------------------------------- parity and the schedule
@pytest.mark.parametrize("variant", ["paper", "omnisafe"])
def test_parity_with_ppo_when_the_relu_stays_closed(variant):
    # 3 rollouts of 2 x 32 steps; episodes end at step 50, so J_c = 0 is known from the second
    # update on and the cost term is computed (closed: d = 25) in two of the three updates.
    ppo = PPO("MlpPolicy", no_cost_vec(), seed=3, **SMALL).learn(192)
    p3o = silent(P3O("MlpPolicy", no_cost_vec(), seed=3, variant=variant, **SMALL)).learn(192)
    log = logged(p3o)
    gap = {"paper": 0.01 * -25.0, "omnisafe": -25.0}[variant]
    assert log["train/constraint_gap"] == pytest.approx(gap)  # the cost term was live...
    assert log["train/relu_open"] == 0.0 and log["train/cost_penalty"] == 0.0  # ...and closed
    a, b = policy_params(ppo), policy_params(p3o)
    for k in a:
        assert th.equal(a[k], b[k]), k
    # the test can fail: with costs over the limit the ReLU opens and the update differs
    pen = silent(
        P3O("MlpPolicy", hazard_vec(), seed=3, variant=variant, cost_limit=0.0, **SMALL)
    ).learn(192)
    assert logged(pen)["train/relu_open"] > 0.0
    c = policy_params(pen)
    ppo2 = PPO("MlpPolicy", hazard_vec(), seed=3, **SMALL).learn(192)
    assert not all(th.equal(policy_params(ppo2)[k], c[k]) for k in a)


def test_increasing_kappa_per_pass_and_its_early_stop():
    kw = {**SMALL, "n_epochs": 4, "cost_limit": 0.0, "seed": 0}
    model = silent(
        P3O("MlpPolicy", hazard_vec(), kappa_schedule="increase", kappa_init=1.0,
            kappa_growth=2.0, kappa=5.0, **kw)
    ).learn(192)  # fmt: skip
    assert logged(model)["train/kappa"] == 5.0  # passes used 1, 2, 4, 5
    assert model._n_updates == 3 * 4
    # kappa_tol above any relative move: one pass per update (Algorithm 2's stop)
    stop = silent(
        P3O("MlpPolicy", hazard_vec(), kappa_schedule="increase", kappa_tol=10.0, **kw)
    ).learn(192)
    assert stop._n_updates == 3
    assert logged(stop)["train/kappa"] == 1.0 == stop.last_kappa
    fixed = silent(P3O("MlpPolicy", hazard_vec(), kappa=7.0, **kw)).learn(192)
    assert logged(fixed)["train/kappa"] == 7.0 and fixed._n_updates == 12


def test_there_is_no_lagrange_multiplier_only_kappa():
    model = silent(P3O("MlpPolicy", hazard_vec(), seed=0, kappa=7.0, **SMALL))
    assert model.last_kappa == 7.0  # before any update: the configured κ
    model.learn(64)
    # as CPO: no λ to read (not a λ of 0), and the logs hold κ, not a multiplier
    assert getattr(model, "lagrange_multiplier", None) is None
    assert not hasattr(model, "lagrange_multipliers")
    with pytest.raises(AttributeError, match="last_kappa"):
        model.lagrange_multiplier  # noqa: B018
    assert model.last_kappa == logged(model)["train/kappa"] == 7.0
    assert not any("lagrange" in key for key in logged(model))


# ------------------------------------------------------------------ save / load / resume
def test_save_load_in_a_new_interpreter_continues_as_uninterrupted(tmp_path):
    kw = {**SMALL, "seed": 1, "cost_limit": 0.5, "cost_window": 5}
    a = silent(P3O("MlpPolicy", hazard_vec(seed=1), **kw)).learn(320)
    a.save(tmp_path / "p3o.zip")
    b = continue_in_new_interpreter(P3O, tmp_path / "p3o.zip", tmp_path / "b.zip", 320)
    continue_here(a, 320)
    assert logged(a)["train/relu_open"] > 0.0  # the penalty acted during the continuation
    assert a.num_timesteps == b.num_timesteps == 640
    assert list(a.ep_cost_buffer) == list(b.ep_cost_buffer)
    assert a._cost_rng.bit_generator.state == b._cost_rng.bit_generator.state
    assert_same(policy_params(a), policy_params(b))
    for opt in ("optimizer", "cost_optimizer"):
        assert_same(getattr(a.policy, opt).state_dict(), getattr(b.policy, opt).state_dict())
    assert (b.variant, b.kappa, b.kappa_schedule) == ("paper", 20.0, "fixed")


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"variant": "cleanrl"}, "'paper' or 'omnisafe'"),
        ({"kappa_schedule": "adaptive"}, "'fixed' or 'increase'"),
        ({"kappa": 0.0}, "kappa"),
        ({"kappa_growth": 0.5}, "kappa_growth"),
        ({"kappa_init": float("nan")}, "kappa_init"),
        ({"risk_modulation": True}, "risk_modulation"),
        ({"cost_limit": -1.0}, "cost_limit"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        P3O("MlpPolicy", hazard_vec(1), **SMALL, **kwargs)


@pytest.mark.parametrize("field", ["advantages", "cost_advantages"])
def test_nonfinite_loss_skips_the_step_and_counts_it(field):
    model = silent(P3O("MlpPolicy", hazard_vec(), cost_limit=0.0, seed=0, **SMALL))
    model.learn(128)  # episodes end (J_c known), so the cost term is live below
    before = policy_params(model)
    adam = model.policy.optimizer.state_dict()
    model.learn(64, callback=Poison(field), reset_num_timesteps=False)
    # every minibatch (2 per pass) holds NaN: nothing was stepped
    assert model.nonfinite_skipped == 2 * SMALL["n_epochs"]
    assert logged(model)["train/nonfinite_skipped"] == 2 * SMALL["n_epochs"]
    after = policy_params(model)
    for k in before:
        if not k.startswith("cost_value"):  # the cost critic fits its own (finite) targets
            assert th.equal(before[k], after[k]), k
    assert_same(adam, model.policy.optimizer.state_dict())
    assert all(th.isfinite(v).all() for v in after.values())


# ------------------------------------------------------------------------ real runs
def test_learn_on_hazard_nav_logs(tmp_path):
    model = P3O("MlpPolicy", hazard_vec(), seed=0, cost_limit=2.0, **SMALL)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(320)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    keys = set(rows[-1])
    for key in (
        "rollout/ep_cost_mean",
        "train/kappa",
        "train/cost_penalty",
        "train/cost_surrogate",
        "train/relu_open",
        "train/constraint_gap",
        "train/cost_limit",
        "train/cost_value_loss",
        "train/cost_explained_variance",
        "train/nonfinite_skipped",
        "train/policy_gradient_loss",
        "train/approx_kl",
    ):
        assert key in keys, key
    # the last update's values (SB3 dumps a row before each update)
    jc = float(np.mean(model.ep_cost_buffer))
    assert logged(model)["train/constraint_gap"] == pytest.approx(0.01 * (jc - 2.0))
    assert float(rows[-1]["train/kappa"]) == 20.0


def test_costs_bypass_vec_normalize():
    venv = VecNormalize(DummyVecEnv([partial(make_scripted, 4)] * 2), norm_reward=True)
    model = silent(P3O("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0))
    model.learn(32)
    assert list(model.ep_cost_buffer) == [5.0] * 8  # 0.5 + 1 + 1.5 + 2 per episode, raw
    assert venv.ret_rms.count > 1
