import csv
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.risk import RiskCallback
from gymcurric.wrappers.risk import AnnotateRisk
from gymcurric.wrappers.semantic import ShapeRewardSemantic
from tests.semantics.stubs import STUB_CONFIG, caption_embedder
from tests.wrappers.cost_envs import make_walk

pytestmark = pytest.mark.sb3


def risky(seed, **kwargs):
    return AnnotateRisk(
        make_walk(episode_len=20),
        horizon=5,
        seed=seed,
        train_every=16,
        risk_min_samples=32,
        risk_batch_size=32,
        **kwargs,
    )


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(
    "vec",
    [DummyVecEnv, pytest.param(SubprocVecEnv, marks=pytest.mark.slow)],  # spawn: ~13 s
)
def test_ppo_learn_logs_risk_metrics(vec, tmp_path):
    kwargs = {"start_method": "spawn"} if vec is SubprocVecEnv else {}
    venv = vec([partial(risky, 0), partial(risky, 1)], **kwargs)
    try:
        model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.set_logger(configure(str(tmp_path), ["csv"]))
        callback = RiskCallback(min_episodes=2)
        model.learn(256, callback=callback)
    finally:
        venv.close()
    rows = read_csv(tmp_path / "progress.csv")
    assert {"risk/loss", "risk/corr", "risk/modulation_scale", "risk/train_samples"} <= set(rows[0])
    last = rows[-1]
    assert float(last["risk/train_samples"]) > 100
    assert float(last["risk/nan_events"]) == 0
    assert np.isfinite(float(last["risk/loss"]))
    scale = float(last["risk/modulation_scale"])
    assert 0.5 <= scale < 1.0 and scale == callback.modulation_scale  # gate open, q_p > 0
    assert float(rows[0]["risk/modulation_scale"]) <= 1.0


def test_no_risk_wrapper_is_a_clear_error():
    venv = DummyVecEnv([partial(make_walk, episode_len=20)])
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, device="cpu")
    with pytest.raises(ConfigError, match="AnnotateRisk"):
        model.learn(32, callback=RiskCallback())


def test_invalid_modulation_arguments():
    with pytest.raises(ConfigError) as err:
        RiskCallback(quantile_p=1.5)
    assert err.value.key == "quantile_p"


class StatsAbove(gym.Wrapper):
    """An outer wrapper with ``stats()`` and ``modulation()`` of its own (not the risk head's)."""

    def stats(self):
        return {"risk/loss": -1.0}

    def modulation(self, **kwargs):
        raise AssertionError("the callback read an outer wrapper's modulation()")


def semantic_over_risk(seed):
    env = risky(seed)
    return ShapeRewardSemantic(env, caption_embedder(), STUB_CONFIG)


@pytest.mark.parametrize("outer", ["semantic", "stats_above"])
def test_risk_metrics_of_annotate_risk_under_a_wrapper_with_stats(outer, tmp_path):
    # SB3's env_method resolves a name on the outermost wrapper that has it: the callback must
    # reach AnnotateRisk's own metrics, not ShapeRewardSemantic's (a string status) or another's
    make = semantic_over_risk if outer == "semantic" else (lambda s: StatsAbove(risky(s)))
    venv = DummyVecEnv([partial(make, 0), partial(make, 1)])
    try:
        model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.set_logger(configure(str(tmp_path), ["csv"]))
        callback = RiskCallback(min_episodes=2)
        model.learn(128, callback=callback)
        inner = [e.get_wrapper_attr("annotator").stats() for e in venv.envs]
    finally:
        venv.close()
    rows = read_csv(tmp_path / "progress.csv")
    assert "semantics/status" not in rows[-1]
    last = rows[-1]
    assert float(last["risk/train_samples"]) == sum(s["risk/train_samples"] for s in inner) > 0
    assert float(last["risk/loss"]) != -1.0


class _StatsFail(AnnotateRisk):
    def risk_stats(self):
        raise OSError("disk gone")


def _failing(seed):
    return _StatsFail(make_walk(episode_len=20), horizon=5, seed=seed, train_every=16)


def test_a_sub_env_whose_risk_stats_raise_keeps_its_worker(tmp_path):
    from gymcurric.errors import SubEnvCallError

    venv = SubprocVecEnv([partial(_failing, 0), partial(_failing, 1)], start_method="fork")
    try:
        model = PPO("MlpPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
        with pytest.raises(SubEnvCallError, match=r"risk_stats.*sub-env 0|sub-env 0.*risk_stats"):
            model.learn(32, callback=RiskCallback())
        venv.reset()  # the workers went on (an env_method that raised used to end them)
        venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
    finally:
        venv.close()
