import csv
from functools import partial

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecMonitor,
    is_vecenv_wrapped,
)

from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError
from gymcurric.integrations.sb3 import EpisodeCostCallback, VecCostMonitor
from gymcurric.wrappers import AnnotateCost
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

LENGTHS = (2, 3)


def fns(**kwargs):
    return [partial(make_scripted, n, **kwargs) for n in LENGTHS]


def collect(venv, steps=12):
    venv.reset()
    episodes = []
    for _ in range(steps):
        _, rewards, dones, infos = venv.step(np.zeros(venv.num_envs, dtype=np.int64))
        for info in infos:
            assert isinstance(info["cost"], float)
        for i in np.flatnonzero(dones):
            ep = infos[i]["episode"]
            assert ep["c"] == pytest.approx(0.5 * ep["r"])
            episodes.append((int(i), ep["l"], ep["c"]))
    return episodes


def expected(steps=12):
    # SB3 vec envs reset in the same step: one episode every n steps
    return sorted(
        (i, n, 0.25 * n * (n + 1)) for i, n in enumerate(LENGTHS) for _ in range(steps // n)
    )


def test_dummy_vec_env_episode_cost(tmp_path):
    venv = VecCostMonitor(DummyVecEnv(fns()), filename=str(tmp_path / "monitor"))
    assert is_vecenv_wrapped(venv, VecMonitor)
    assert sorted(collect(venv)) == expected()
    venv.close()
    with open(tmp_path / "monitor.monitor.csv") as f:
        f.readline()  # json header
        rows = list(csv.DictReader(f))
    assert len(rows) == len(expected())
    assert all(float(r["c"]) == pytest.approx(0.5 * float(r["r"])) for r in rows)


@pytest.mark.parametrize(
    "start_method",
    [pytest.param(m, marks=pytest.mark.slow) for m in ("spawn", "forkserver")] + ["fork"],
)
def test_subproc_vec_env_episode_cost(start_method):
    venv = VecCostMonitor(SubprocVecEnv(fns(), start_method=start_method))
    try:
        assert sorted(collect(venv)) == expected()
    finally:
        venv.close()


def cost_above_one(obs, action, info):
    return float(obs[0] > 1)


def test_cost_fn_through_make_vec_env_with_monitor():
    # make_vec_env wraps each env in SB3's Monitor; VecCostMonitor supersedes it without noise
    venv = make_vec_env(
        make_scripted,
        n_envs=2,
        env_kwargs={"episode_len": 3, "mode": "none"},
        wrapper_class=AnnotateCost,
        wrapper_kwargs={"cost_fn": cost_above_one},
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv = VecCostMonitor(venv)
    venv.reset()
    for _ in range(3):
        _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
    assert dones.all()
    assert [info["episode"]["c"] for info in infos] == [2.0, 2.0]


def test_missing_cost_is_clear():
    venv = VecCostMonitor(DummyVecEnv(fns(mode="none")))
    venv.reset()
    with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\].*AnnotateCost"):
        venv.step(np.zeros(2, dtype=np.int64))


def test_nan_costs():
    venv = VecCostMonitor(DummyVecEnv(fns(nan_at=(2,))))
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    with pytest.warns(GymcurricWarning):
        _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
    assert [info["cost"] for info in infos] == [0.0, 0.0]
    assert infos[0]["episode"]["c"] == 0.5
    assert venv.nonfinite_count == 2

    strict = VecCostMonitor(DummyVecEnv(fns(nan_at=(1,))), nonfinite="raise")
    strict.reset()
    with pytest.raises(NonFiniteValueError):
        strict.step(np.zeros(2, dtype=np.int64))


def test_ppo_learn_logs_episode_cost(tmp_path):
    venv = VecCostMonitor(DummyVecEnv(fns()))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(64, callback=EpisodeCostCallback())
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and "rollout/ep_cost_mean" in rows[0]
    costs = [float(r["rollout/ep_cost_mean"]) for r in rows]
    rews = [float(r["rollout/ep_rew_mean"]) for r in rows]
    np.testing.assert_allclose(costs, 0.5 * np.array(rews), rtol=1e-5)


def test_monitor_header_names_the_env_id(tmp_path):
    import json

    import gymnasium as gym

    import gymcurric  # noqa: F401
    from gymcurric.wrappers import AnnotateCost

    venv = VecCostMonitor(
        DummyVecEnv([lambda: AnnotateCost(gym.make("gymcurric/HazardGrid-v0"))]),
        filename=str(tmp_path / "a"),
    )
    venv.close()
    header = json.loads((tmp_path / "a.monitor.csv").read_text().splitlines()[0][1:])
    assert header["env_id"] == "gymcurric/HazardGrid-v0"
    named = VecCostMonitor(DummyVecEnv(fns()), filename=str(tmp_path / "b"), env_id="mine")
    named.close()
    assert '"env_id": "mine"' in (tmp_path / "b.monitor.csv").read_text().splitlines()[0]
