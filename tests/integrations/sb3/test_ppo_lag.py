import csv
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError, NonFiniteValueError
from gymcurric.integrations.sb3.cost import VecCostMonitor
from gymcurric.integrations.sb3.ppo_lag import PPOLag, PPOPIDLag
from gymcurric.integrations.sb3.trpo_lag import TRPOLag
from gymcurric.safety import RiskModulation
from tests.integrations.sb3.hazard_runs import (
    ENV_ID,
    SMALL,
    TASK,
    assert_same,
    hazard_vec,
    make_hazard,
    policy_params,
)
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3


def test_parity_with_ppo_when_lambda_is_fixed_at_zero():
    ppo = PPO("MlpPolicy", hazard_vec(), seed=3, **SMALL).learn(256)
    lag = PPOLag(
        "MlpPolicy",
        hazard_vec(),
        seed=3,
        lagrange_init=0.0,
        lagrange_lr=0.0,
        update_cost_critic=False,
        **SMALL,
    ).learn(256)
    a, b = policy_params(ppo), policy_params(lag)
    assert set(b) - set(a) == {k for k in b if k.startswith("cost_value_net")}
    for k in a:
        assert th.equal(a[k], b[k]), k
    assert lag.lagrange_multiplier == 0.0
    # ... and the test can fail: a positive λ changes the policy
    pen = PPOLag(
        "MlpPolicy", hazard_vec(), seed=3, lagrange_init=5.0, lagrange_lr=0.0, **SMALL
    ).learn(256)
    c = policy_params(pen)
    assert not all(th.equal(a[k], c[k]) for k in a)


def snapshot(model):
    return (
        policy_params(model),
        model.lagrange.state_dict(),
        model.policy.cost_optimizer.state_dict(),
        model.policy.optimizer.state_dict(),
    )


@pytest.mark.parametrize(
    ("cls", "extra"),
    [(PPOLag, {"lagrange_lr": 0.2}), (PPOPIDLag, {}), (PPOPIDLag, {"pid_epoch_steps": 640})],
)
def test_save_load_continue_equals_uninterrupted(tmp_path, cls, extra):
    kw = {**SMALL, "seed": 1, "cost_limit": 0.5, "cost_window": 5, **extra}
    a = cls("MlpPolicy", hazard_vec(seed=1), **kw).learn(320)
    assert a.lagrange_multiplier > 0.01  # λ moved: its state matters below
    a.save(tmp_path / "model.zip")
    b = cls.load(tmp_path / "model.zip", env=hazard_vec(), device="cpu")
    a.set_env(hazard_vec())  # both continue from a fresh reset of the same seeded envs
    for m in (a, b):
        m.get_env().seed(7)
        th.manual_seed(11)
        np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
        m.learn(320, reset_num_timesteps=False)
    assert a.num_timesteps == b.num_timesteps == 640
    assert list(a.ep_cost_buffer) == list(b.ep_cost_buffer)
    assert a.lagrange_multiplier == b.lagrange_multiplier
    assert vars(a.lagrange).keys() == vars(b.lagrange).keys()
    for key in ("kp", "ki", "kd", "d_delay", "p_ema_alpha", "d_ema_alpha", "penalty_max"):
        assert getattr(a.lagrange, key, None) == getattr(b.lagrange, key, None), key
    assert_same(snapshot(a), snapshot(b))


def test_costs_bypass_vec_normalize():
    seen = []

    class Grab(BaseCallback):
        def _on_step(self):
            return True

        def _on_rollout_end(self):
            seen.append(self.model.rollout_buffer.costs.copy())

    venv = VecNormalize(DummyVecEnv([partial(make_scripted, 4)] * 2), norm_reward=True)
    model = PPOLag("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(16, callback=Grab())
    t = np.arange(8) % 4 + 1  # terminal episodes of 4 steps: cost = 0.5 * step index
    np.testing.assert_array_equal(seen[0], np.stack([0.5 * t, 0.5 * t], axis=1))
    assert list(model.ep_cost_buffer) == [5.0] * 4
    assert venv.ret_rms.count > 1  # rewards were normalised meanwhile


def test_logs_and_ep_cost(tmp_path):
    model = PPOLag("MlpPolicy", VecCostMonitor(hazard_vec()), seed=0, **SMALL)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(320)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    keys = set(rows[-1])
    for key in (
        "rollout/ep_cost_mean",
        "rollout/ep_rew_mean",
        "train/lagrange_multiplier",
        "train/cost_value_loss",
        "train/cost_explained_variance",
        "train/cost_advantage_std",
        "train/cost_limit",
        "train/policy_gradient_loss",
        "train/value_loss",
        "train/approx_kl",
        "time/fps",
    ):
        assert key in keys, key
    # ep_cost_mean is the mean over the same episodes VecCostMonitor counts
    costs = [ep["c"] for ep in model.ep_info_buffer]
    assert float(rows[-1]["rollout/ep_cost_mean"]) == pytest.approx(np.mean(costs), rel=1e-5)
    assert float(rows[-1]["train/lagrange_multiplier"]) >= 0.0
    assert "risk/modulation_scale" not in keys  # the risk hook is off by default
    # the last update's values stay in the logger: the cost advantages of the last rollout
    logged = model.logger.name_to_value["train/cost_advantage_std"]
    assert logged == pytest.approx(float(np.std(model.rollout_buffer.cost_advantages)))
    assert logged > 0.0


def test_lambda_rises_when_over_the_limit_and_falls_when_under():
    over = PPOLag(
        "MlpPolicy",
        hazard_vec(),
        seed=0,
        cost_limit=0.0,
        multiplier="sgd",
        lagrange_init=0.0,
        lagrange_lr=0.1,
        **SMALL,
    ).learn(320)
    assert over.lagrange_multiplier > 0.1
    under = PPOLag(
        "MlpPolicy", hazard_vec(), seed=0, cost_limit=1000.0, lagrange_init=1.0, **SMALL
    ).learn(320)
    assert under.lagrange_multiplier < 1.0


def test_schedules_for_cost_limit_and_lr():
    seen = []

    def limit(progress):
        seen.append(progress)
        return 10.0 * progress

    model = PPOLag(
        "MlpPolicy",
        hazard_vec(),
        seed=0,
        cost_limit=limit,
        lagrange_lr=lambda p: 0.01 * p,
        lagrange_init=lambda p: 0.5,
        **SMALL,
    )
    assert model.lagrange_multiplier == 0.5
    model.learn(192)
    assert min(seen) < 1.0  # evaluated at the current progress


def test_subproc_vec_env_and_progress_bar():
    pytest.importorskip("tqdm")
    pytest.importorskip("rich")
    venv = SubprocVecEnv([make_hazard] * 2)
    try:
        model = PPOLag("MlpPolicy", venv, seed=0, **SMALL).learn(128, progress_bar=True)
        assert model.num_timesteps == 128
    finally:
        venv.close()


def test_missing_cost_is_a_clear_error():
    venv = DummyVecEnv([partial(make_scripted, 3, mode="none")])
    model = PPOLag("MlpPolicy", venv, n_steps=8, batch_size=8, device="cpu")
    with pytest.raises(ConfigError, match=r"sub-envs \[0\] reported no info\['cost'\]"):
        model.learn(8)


def test_nonfinite_cost_raises():
    venv = DummyVecEnv([partial(make_scripted, 3, nan_at=(2,))])
    model = PPOLag("MlpPolicy", venv, n_steps=8, batch_size=8, device="cpu")
    with pytest.raises(NonFiniteValueError, match="non-finite"):
        model.learn(8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cost_limit": -1.0}, "cost_limit"),
        ({"cost_limit": "25"}, "cost_limit"),
        ({"cost_limit": lambda p: -p}, "cost_limit"),
        ({"lagrange_lr": lambda p: None}, "lagrange_lr"),
        ({"lagrange_init": -0.5}, "lagrange_init"),
        ({"multiplier": "newton"}, "multiplier"),
        ({"multiplier_kwargs": {"d_delay": 0}, "multiplier": "pid"}, "d_delay"),
        ({"cost_window": 0}, "cost_window"),
        ({"pid_epoch_steps": 20_000}, r"pid_epoch_steps.*only applies to multiplier='pid'"),
        ({"pid_epoch_steps": 0, "multiplier": "pid"}, r"'pid_epoch_steps': 0 \(expected"),
        ({"pid_epoch_steps": 2e4, "multiplier": "pid"}, r"pid_epoch_steps.*20000\.0"),
        ({"cost_gamma": 2.0}, "cost_gamma"),
        ({"cost_n_epochs": 0}, r"'cost_n_epochs': 0 \(expected"),
        ({"cost_n_epochs": 2.0}, r"cost_n_epochs.*2\.0"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PPOLag("MlpPolicy", hazard_vec(1), **SMALL, **kwargs)


@pytest.mark.parametrize(("cost_n_epochs", "passes"), [(None, 2), (5, 5)])
def test_cost_n_epochs_sets_the_cost_critic_passes(cost_n_epochs, passes):
    # 2 envs x 32 steps in minibatches of 32: 2 cost-critic steps per pass, 2 rollouts.
    model = PPOLag("MlpPolicy", hazard_vec(), seed=0, cost_n_epochs=cost_n_epochs, **SMALL)
    steps = []
    model.policy.cost_optimizer.register_step_post_hook(lambda *_: steps.append(1))
    policy_steps = []
    model.policy.optimizer.register_step_post_hook(lambda *_: policy_steps.append(1))
    model.learn(128)
    assert len(steps) == 2 * 2 * passes
    assert len(policy_steps) == 2 * 2 * SMALL["n_epochs"]  # the policy's passes are unchanged


def test_schedule_going_negative_mid_training_is_reported():
    model = PPOLag("MlpPolicy", hazard_vec(1), cost_limit=lambda p: p - 0.5, **SMALL)
    with pytest.raises(ConfigError, match=r"cost_limit.*progress_remaining"):
        model.learn(320)


def test_pid_variant_defaults():
    model = PPOPIDLag("MlpPolicy", hazard_vec(), seed=0, cost_limit=0.0, **SMALL).learn(128)
    assert (model.lagrange.kp, model.lagrange.ki, model.lagrange.kd) == (0.1, 0.01, 0.01)
    assert model.lagrange_multiplier > 0.0


def test_pid_epoch_steps_converts_the_constants_per_rollout():
    # 2 envs x 32 steps = 64 env steps per rollout, epochs of 640: r = 0.1
    model = PPOPIDLag(
        "MlpPolicy",
        hazard_vec(),
        seed=0,
        cost_limit=0.0,
        kp=0.2,
        ki=0.02,
        multiplier_kwargs={"d_delay": 4, "p_ema_alpha": 0.9},
        pid_epoch_steps=640,
        **SMALL,
    )
    pid = model.lagrange
    assert (pid.kp, pid.kd) == (0.2, 0.01)
    assert pid.ki == pytest.approx(0.002)
    assert pid.p_ema_alpha == pytest.approx(0.9**0.1)
    assert pid.d_ema_alpha == pytest.approx(0.95**0.1)
    assert pid.d_delay == 40
    assert model.multiplier_kwargs == {"kp": 0.2, "ki": 0.02, "kd": 0.01, "d_delay": 4,
                                       "p_ema_alpha": 0.9}  # fmt: skip
    model.learn(128)
    assert model.lagrange_multiplier > 0.0
    # the same model without the flag keeps the constants per rollout
    plain = PPOPIDLag("MlpPolicy", hazard_vec(), seed=0, ki=0.02, **SMALL)
    assert (plain.lagrange.ki, plain.lagrange.d_delay) == (0.02, 10)


class AddRisk(gym.Wrapper):
    """Annotates every step with info['risk'] = the step index (a stand-in for the risk head)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "risk": float(self.env.unwrapped.t)}


def risk_run(tmp_path, with_risk, risk_modulation):
    make = (lambda: AddRisk(make_scripted(4))) if with_risk else partial(make_scripted, 4)
    model = PPOLag(
        "MlpPolicy",
        DummyVecEnv([make]),
        n_steps=8,
        batch_size=8,
        n_epochs=1,
        seed=0,
        device="cpu",
        cost_limit=0.0,
        multiplier="sgd",
        lagrange_init=0.0,
        lagrange_lr=1.0,
        risk_modulation=risk_modulation,
    )
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(8)
    # recorded by train() after the (only) dump: still in the logger
    return model, dict(model.logger.name_to_value)


def test_risk_hook_scales_the_multiplier_step(tmp_path):
    from gymcurric.safety.modulation import lagrange_modulation

    settings = {"min_episodes": 0, "alpha": 1.0, "quantile_p": 0.5}
    model, rows = risk_run(tmp_path / "a", True, settings)
    logged = rows["risk/modulation_scale"]
    risks = [1.0, 2.0, 3.0, 4.0] * 2
    scale = lagrange_modulation(risks, risks, episodes_seen=2, **settings).scale
    assert 0.5 < scale < 1.0
    # two episodes of cost 0.5·(1+2+3+4) = 5 each; SGD: λ = lr·M·(J_c - d)
    assert model.lagrange_multiplier == pytest.approx(5.0 * scale, rel=1e-6)
    assert logged == pytest.approx(scale, rel=1e-6)
    model2, rows2 = risk_run(tmp_path / "b", False, settings)  # no info['risk']: M = 1
    assert model2.lagrange_multiplier == pytest.approx(5.0)
    model3, rows3 = risk_run(tmp_path / "c", True, False)  # hook off
    assert model3.lagrange_multiplier == pytest.approx(5.0)
    assert "risk/modulation_scale" not in rows3
    assert rows3["train/lagrange_multiplier"] == pytest.approx(5.0)
    # the dataclass is the dict's twin: the same step, the same log
    model4, rows4 = risk_run(tmp_path / "d", True, RiskModulation(**settings))
    assert model4.lagrange_multiplier == model.lagrange_multiplier
    assert rows4["risk/modulation_scale"] == logged
    assert model4.risk_modulation == model.risk_modulation == RiskModulation(**settings)


@pytest.mark.parametrize("off", [None, False])
def test_risk_hook_is_off_by_default_and_with_none_or_false(off):
    assert PPOLag("MlpPolicy", hazard_vec(1), **SMALL).risk_modulation is None
    assert PPOLag("MlpPolicy", hazard_vec(1), risk_modulation=off, **SMALL).risk_modulation is None
    on = PPOLag("MlpPolicy", hazard_vec(1), risk_modulation=True, **SMALL)
    assert on.risk_modulation == RiskModulation() and on._risk_reference.maxlen == 10_000


def test_risk_hook_settings_are_checked():
    with pytest.raises(ConfigError, match="unknown keys"):
        PPOLag("MlpPolicy", hazard_vec(1), risk_modulation={"gain": 2.0}, **SMALL)
    with pytest.raises(ConfigError, match="alpha") as err:
        PPOLag("MlpPolicy", hazard_vec(1), risk_modulation={"alpha": -1.0}, **SMALL)
    assert err.value.key == "risk_modulation.alpha" and err.value.source == "PPOLag"
    with pytest.raises(ConfigError, match="expected a RiskModulation"):
        TRPOLag("MlpPolicy", hazard_vec(1), risk_modulation="on", n_steps=32, device="cpu")


def test_risk_hook_settings_survive_save_and_load_also_from_a_dict(tmp_path):
    settings = RiskModulation(alpha=2.0, reference_window=50)
    model = PPOLag("MlpPolicy", hazard_vec(1), risk_modulation=settings, **SMALL)
    model.save(tmp_path / "new.zip")
    assert PPOLag.load(tmp_path / "new.zip", device="cpu").risk_modulation == settings
    # a model saved before RiskModulation held the settings as a dict
    model.risk_modulation = {"alpha": 2.0, "reference_window": 50}  # type: ignore[assignment]
    model.save(tmp_path / "old.zip")
    assert PPOLag.load(tmp_path / "old.zip", device="cpu").risk_modulation == settings


def test_cnn_policy_on_pixels():
    from gymnasium.wrappers import AddRenderObservation

    def make():
        env = gym.make(ENV_ID, render_mode="rgb_array", render_size=48, **TASK)
        return AddRenderObservation(env, render_only=True)

    model = PPOLag(
        "CnnPolicy",
        DummyVecEnv([make]),
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device="cpu",
        cost_limit=0.0,
    )
    model.learn(32)
    assert type(model.policy.cost_value_extractor).__name__ == "NatureCNN"
    assert model.policy.cost_value_extractor is not model.policy.features_extractor
    assert np.isfinite(model.rollout_buffer.cost_values).all()


LEARN_TASK = {
    "num_hazards": 12,
    "hazard_radius": 0.25,
    "hazard_placement": "random",
    "max_steps": 100,
    "goal_distance": 2.5,
}


def learn_run(cls, steps, **kwargs):
    venv = DummyVecEnv([lambda: gym.make(ENV_ID, **LEARN_TASK)] * 4)
    venv.seed(0)
    model = cls(
        "MlpPolicy",
        VecCostMonitor(venv),
        n_steps=256,
        batch_size=256,
        n_epochs=10,
        learning_rate=1e-3,
        seed=0,
        device="cpu",
        **kwargs,
    )
    model.learn(steps)
    last = list(model.ep_info_buffer)[-40:]
    return model, np.mean([e["r"] for e in last]), np.mean([e["c"] for e in last])


@pytest.mark.slow
def test_ppolag_keeps_the_cost_near_the_limit_where_ppo_exceeds_it():
    # 12 hazards in a 4x4 arena, goal 2.5 away: the straight path crosses hazards, so PPO
    # collects ~3 cost per episode; PPOLag (limit 1) learns to go around them.
    th.set_num_threads(1)
    limit, steps = 1.0, 60_000
    _, ppo_ret, ppo_cost = learn_run(PPO, steps)
    lag, lag_ret, lag_cost = learn_run(
        PPOLag,
        steps,
        cost_limit=limit,
        multiplier="sgd",
        lagrange_init=0.0,
        lagrange_lr=0.05,
        cost_window=20,
    )
    print(
        f"PPO return {ppo_ret:.2f} cost {ppo_cost:.2f}; PPOLag return {lag_ret:.2f} "
        f"cost {lag_cost:.2f} lambda {lag.lagrange_multiplier:.2f}"
    )
    assert ppo_cost > 2.0 * limit
    assert lag_cost < 1.6 * limit
    assert lag_cost < 0.6 * ppo_cost
    assert lag_ret > 1.0  # still reaches the goal (reward 1 + distance progress)
