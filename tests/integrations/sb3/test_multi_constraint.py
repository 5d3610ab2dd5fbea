"""Several constraints in PPOLag / PPOPIDLag / TRPOLag (issue 25 item 4, OmniSafe #365).

``cost_limit`` as a sequence of ``K`` limits: ``K`` costs per step from ``info["costs"]`` or
from ``cost_keys``, ``K`` cost-critic outputs and GAEs, ``K`` windows and ``K`` multipliers.
"""

import csv
import io
import math
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError, GymcurricWarning, NonFiniteValueError
from gymcurric.integrations.sb3 import CPO, P3O, PPOLag, PPOPIDLag, TRPOLag
from gymcurric.integrations.sb3.common import (
    COST_CAP,
    CostRolloutBuffer,
    MultiplierSet,
    discounted_gae,
)
from tests.integrations.sb3.hazard_runs import TASK, assert_same, policy_params
from tests.new_interpreter import call_in_new_interpreter
from tests.safety_support import needs_safety

pytestmark = pytest.mark.sb3

PPO_SMALL = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "device": "cpu"}
TRPO_SMALL = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}


def small(cls: type) -> dict[str, Any]:
    return TRPO_SMALL if cls is TRPOLag else PPO_SMALL


# ------------------------------------------------------------------------------- test envs
class ConstantCostsEnv(gym.Env):
    """Episodes of ``length`` steps whose step costs are the constants ``costs``.

    Info: ``costs`` (the vector), ``cost_a`` / ``cost_b`` (its entries, by name) and ``cost``
    (their sum). ``bad`` replaces ``info["costs"]`` from step ``bad_at`` on.
    """

    def __init__(self, costs=(0.2, 0.05), length=10, bad=None, bad_at=1):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.step_costs = tuple(costs)
        self.length, self.bad, self.bad_at = length, bad, bad_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([self.t / self.length, float(action)], np.float32)
        costs = np.array(self.step_costs, dtype=np.float64)
        info = {"costs": costs, "cost": float(costs.sum())}
        info.update({f"cost_{name}": float(c) for name, c in zip("ab", costs, strict=False)})
        if self.bad is not None and self.t >= self.bad_at:
            info["costs"] = self.bad
        return obs, float(action), self.t >= self.length, False, info


def constant_vec(n=2, **kwargs):
    return DummyVecEnv([partial(ConstantCostsEnv, **kwargs)] * n)


class SpeedCost(gym.Wrapper):
    """HazardNav with a second cost source: moving faster than half the top speed.

    Info: ``cost_hazards`` (from HazardNav), ``cost_speed``, ``costs`` = both, ``cost`` = sum.
    ``only_hazards=True`` reports ``costs = [cost_hazards]`` (one constraint, as a vector).
    """

    def __init__(self, env, only_hazards=False):
        super().__init__(env)
        self.only_hazards = only_hazards

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        hazards = float(info["cost_hazards"])
        speed = float(np.hypot(obs[0], obs[1]) > 0.5)  # obs[0:2]: velocity / top speed
        info = dict(info, cost_speed=speed)
        if self.only_hazards:
            info["costs"] = np.array([hazards])
        else:
            info.update(costs=np.array([hazards, speed]), cost=hazards + speed)
        return obs, reward, terminated, truncated, info


def make_two_source(only_hazards=False):
    return SpeedCost(gym.make("gymcurric/HazardNav-v0", **TASK), only_hazards=only_hazards)


def two_source_vec(n=2, seed=0, only_hazards=False):
    venv = DummyVecEnv([partial(make_two_source, only_hazards)] * n)
    venv.seed(seed)
    return venv


class Grab(BaseCallback):
    """Copies of the cost arrays of every rollout, before training flattens them."""

    def __init__(self):
        super().__init__()
        self.rollouts = []

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        buf = self.model.rollout_buffer
        names = ("costs", "cost_values", "cost_advantages", "cost_returns", "episode_starts")
        self.rollouts.append({k: getattr(buf, k).copy() for k in names})
        self.rollouts[-1]["last"] = self.locals["last_cost_values"].numpy().copy()
        self.rollouts[-1]["dones"] = self.locals["dones"].copy()


def logged(model):
    return dict(model.logger.name_to_value)


# ------------------------------------------------------------ K = 1 as a sequence = scalar
@pytest.mark.parametrize("cls", [PPOLag, PPOPIDLag, TRPOLag])
@pytest.mark.parametrize("source", ["costs", "cost_keys"])
def test_one_limit_as_a_sequence_equals_the_scalar_path(cls, source):
    kw = {**small(cls), "seed": 3, "cost_window": 5}
    if cls is not PPOPIDLag:
        kw["lagrange_lr"] = 0.2
    scalar = cls("MlpPolicy", two_source_vec(only_hazards=True), cost_limit=0.5, **kw)
    keys = {"cost_keys": ("cost_hazards",)} if source == "cost_keys" else {}
    vector = cls("MlpPolicy", two_source_vec(only_hazards=True), cost_limit=[0.5], **keys, **kw)
    for m in (scalar, vector):
        th.manual_seed(0)
        np.random.seed(0)  # noqa: NPY002  (SB3 shuffles with the global RNG)
        m.learn(320)
    assert scalar.lagrange_multiplier > 0.01  # λ moved: the comparison below means something
    assert isinstance(vector.lagrange_multiplier, float)
    assert vector.n_costs == 1 and vector.vector_costs
    assert vector.lagrange_multipliers.tolist() == [scalar.lagrange_multiplier]
    assert list(vector.ep_cost_buffer) == list(scalar.ep_cost_buffer)
    assert_same(policy_params(vector), policy_params(scalar))
    assert_same(vector.lagrange.state_dict(), scalar.lagrange.state_dict())
    assert logged(vector) == pytest.approx(logged(scalar), rel=0, abs=0, nan_ok=True)
    # ... and the test can fail: the same model reading the speed cost learns otherwise
    other = cls("MlpPolicy", two_source_vec(), cost_limit=[0.5], cost_keys=("cost_speed",), **kw)
    th.manual_seed(0)
    np.random.seed(0)  # noqa: NPY002
    other.learn(320)
    assert list(other.ep_cost_buffer) != list(scalar.ep_cost_buffer)


# ----------------------------------------------------------- one λ per constraint, by hand
@pytest.mark.parametrize(
    ("cls", "extra"),
    [(PPOLag, {}), (PPOLag, {"multiplier": "sgd", "lagrange_lr": 0.1}), (PPOPIDLag, {}),
     (TRPOLag, {})],
)  # fmt: skip
@pytest.mark.parametrize("violated", [0, 1])
def test_only_the_violated_constraint_s_multiplier_grows(cls, extra, violated, tmp_path):
    # 10-step episodes, step costs (0.2, 0.05): J_c = (2.0, 0.5) exactly. One limit at 1.0
    # is violated, the other (limit 1.0 against J 0.5, or 3.0 against 2.0) is not.
    limits = [1.0, 1.0] if violated == 0 else [3.0, 0.25]
    model = cls(
        "MlpPolicy", constant_vec(), cost_limit=limits, seed=0, cost_window=4, **small(cls), **extra
    )
    grab = Grab()
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(32 * 2 * 4, callback=grab)
    lam = model.lagrange_multipliers
    assert lam.shape == (2,) and model.lagrange_multiplier.tolist() == lam.tolist()
    assert lam[violated] > 0.01, lam
    assert lam[1 - violated] == 0.0, lam
    np.testing.assert_allclose(np.mean(list(model.ep_cost_buffer), axis=0), [2.0, 0.5])
    with open(tmp_path / "progress.csv") as f:
        row = {k: float(v) for k, v in list(csv.DictReader(f))[-1].items() if v}
    assert row["rollout/ep_cost_mean_0"] == pytest.approx(2.0)
    assert row["rollout/ep_cost_mean_1"] == pytest.approx(0.5)
    assert row["rollout/ep_cost_mean"] == pytest.approx(2.5)  # the total
    logs = logged(model)  # the last update's train/ keys (dumped at the next rollout)
    assert logs["train/cost_limit_0"] == limits[0] and logs["train/cost_limit_1"] == limits[1]
    assert logs["train/cost_limit"] == pytest.approx(sum(limits))
    assert logs[f"train/lagrange_multiplier_{violated}"] == pytest.approx(lam[violated])
    assert logs["train/lagrange_multiplier"] == pytest.approx(lam.sum())
    for key in ("train/cost_value_loss", "train/cost_explained_variance"):
        assert {f"{key}_0", f"{key}_1", key} <= set(logs), key
    assert logs["train/cost_value_loss"] == pytest.approx(
        logs["train/cost_value_loss_0"] + logs["train/cost_value_loss_1"]
    )
    # the buffer: K costs per step, one GAE per constraint
    roll = grab.rollouts[-1]
    assert roll["costs"].shape == (32, 2, 2)
    np.testing.assert_array_equal(roll["costs"][..., 0], np.float32(0.2))
    np.testing.assert_array_equal(roll["costs"][..., 1], np.float32(0.05))
    for k in range(2):
        adv, ret = discounted_gae(
            roll["costs"][..., k],
            roll["cost_values"][..., k],
            roll["episode_starts"],
            roll["last"][:, k],
            roll["dones"],
            model.rollout_buffer.cost_gamma,
            model.rollout_buffer.cost_gae_lambda,
        )
        np.testing.assert_array_equal(roll["cost_advantages"][..., k], adv)
        np.testing.assert_array_equal(roll["cost_returns"][..., k], ret)


def test_penalised_advantage_with_two_constraints():
    obs = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    act = gym.spaces.Discrete(2)
    buf = CostRolloutBuffer(4, obs, act, device="cpu", n_envs=2, n_costs=2)
    rng = np.random.default_rng(1)
    for _ in range(4):
        buf.add(
            np.zeros((2, 1)),
            np.zeros(2),
            rng.normal(size=2),
            np.zeros(2),
            th.zeros(2),
            th.zeros(2),
            cost=rng.random((2, 2)),
            cost_value=th.zeros(2, 2),
        )
    buf.compute_returns_and_advantage(
        th.zeros(2), np.zeros(2, bool), last_cost_values=th.zeros(2, 2)
    )
    buf.penalty = np.array([2.0, 0.5])
    (batch,) = list(buf.get(None))
    a_r = th.tensor(buf.advantages).flatten()
    a_c = th.tensor(buf.cost_advantages).reshape(-1, 2)
    perm = [
        int(np.flatnonzero(buf.advantages.flatten() == v)[0])
        for v in (batch.returns - batch.old_values).numpy()
    ]
    a_r, a_c = a_r[perm], a_c[perm]
    a_c = a_c - a_c.mean(dim=0)  # each constraint's advantage centred on its own
    a_r = (a_r - a_r.mean()) / (a_r.std() + 1e-8)
    expected = (a_r - 2.0 * a_c[:, 0] - 0.5 * a_c[:, 1]) / (1.0 + 2.5)
    th.testing.assert_close(batch.advantages, expected)
    th.testing.assert_close(batch.cost_advantages, a_c)
    assert batch.cost_returns.shape == batch.old_cost_values.shape == (8, 2)
    # λ = 0 everywhere: the advantage is A_r's alone (PPO's)
    buf.penalty = np.zeros(2)
    (batch,) = list(buf.get(None))
    assert not th.equal(batch.advantages, expected)


def test_multiplier_set_state_round_trip_and_mismatch():
    a = MultiplierSet(2, "adam", init=0.001, lr=0.1)
    for _ in range(3):
        a.update([5.0, 0.0], [1.0, 1.0])
    b = MultiplierSet(2, "adam", init=0.001, lr=0.1)
    b.load_state_dict(a.state_dict())
    assert a.update([5.0, 2.0], [1.0, 1.0]).tolist() == b.update([5.0, 2.0], [1.0, 1.0]).tolist()
    with pytest.raises(ConfigError, match="2 multipliers cannot be loaded into 3"):
        MultiplierSet(3, "adam", init=0.0, lr=0.1).load_state_dict(a.state_dict())
    with pytest.raises(ConfigError, match="expected 2 episode costs and 2 limits, got 3 and 2"):
        a.update([1.0, 2.0, 3.0], [1.0, 1.0])


# ------------------------------------------------------ save, load elsewhere, continue
def continue_saved(name, path, out):
    """Load ``path`` into ``name``, continue 320 steps, save the :func:`snapshot` to ``out``."""
    cls = {"PPOLag": PPOLag, "PPOPIDLag": PPOPIDLag}[name]
    model = cls.load(path, env=two_source_vec(), device="cpu")
    model.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    model.learn(320, reset_num_timesteps=False)
    th.save(snapshot(model), out)


def snapshot(model):
    return {
        "policy": policy_params(model),
        "optimizer": model.policy.optimizer.state_dict(),
        "cost_optimizer": model.policy.cost_optimizer.state_dict(),
        "lagrange": model.lagrange.state_dict(),
        "lambdas": model.lagrange_multipliers.tolist(),
        "ep_cost": list(model.ep_cost_buffer),
        "steps": model.num_timesteps,
    }


@pytest.mark.parametrize("cls", [PPOLag, pytest.param(PPOPIDLag, marks=pytest.mark.slow)])
def test_save_load_in_a_new_interpreter_and_continue_equals_uninterrupted(tmp_path, cls):
    kw = {**PPO_SMALL, "seed": 1, "cost_limit": [0.5, 2.0], "cost_window": 5}
    if cls is PPOLag:
        kw["lagrange_lr"] = 0.2
    a = cls("MlpPolicy", two_source_vec(seed=1), **kw).learn(320)
    assert (a.lagrange_multipliers > 0.01).any()  # λ moved: its state matters below
    assert a.policy.predict_cost_values(th.zeros(1, 23)).shape == (1, 2)
    a.save(tmp_path / "model.zip")
    out = tmp_path / "resumed.pt"
    call_in_new_interpreter(
        "tests.integrations.sb3.test_multi_constraint", "continue_saved",
        cls.__name__, str(tmp_path / "model.zip"), str(out),
    )  # fmt: skip
    a.set_env(two_source_vec())  # continues from a fresh reset of the same seeded envs
    a.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    a.learn(320, reset_num_timesteps=False)
    resumed = th.load(out, weights_only=False)
    assert resumed["steps"] == 640 and len(resumed["lambdas"]) == 2
    assert_same(snapshot(a), resumed)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (np.array([1.0, 2.0, 3.0]), ConfigError, r"sub-env 0 reported 3 costs, but cost_limit "
         r"has 2 limits"),
        (np.array([1.0]), ConfigError, "reported 1 costs, but cost_limit has 2 limits"),
        (np.ones((2, 2)), ConfigError, r"an array of shape \(2, 2\)"),
        ("high", ConfigError, r"info\['costs'\].*'high'"),
        (np.array([0.0, math.nan]), NonFiniteValueError, r"non-finite info\['costs'\] "
         r"\[0.0, nan\] from sub-env 0 \(entries \[1\]\)"),
        (np.array([math.inf, 0.0]), NonFiniteValueError, r"info\['costs'\] \[inf, 0.0\]"),
    ],
)  # fmt: skip
def test_a_bad_costs_vector_raises_naming_the_key_and_value(bad, error, match):
    model = PPOLag("MlpPolicy", constant_vec(1, bad=bad), cost_limit=[1.0, 1.0], **PPO_SMALL)
    with pytest.raises(error, match=match):
        model.learn(32)
    assert model.num_timesteps == 0  # refused at the first step, nothing stored


def test_missing_costs_or_cost_keys_raise():
    class NoVector(ConstantCostsEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            del info["costs"]
            return obs, reward, terminated, truncated, info

    model = PPOLag("MlpPolicy", DummyVecEnv([NoVector]), cost_limit=[1.0, 1.0], **PPO_SMALL)
    with pytest.raises(ConfigError, match=r"sub-envs \[0\] reported no info\['costs'\]"):
        model.learn(32)
    model = PPOLag(
        "MlpPolicy",
        constant_vec(),
        cost_limit=[1.0, 1.0],
        cost_keys=("cost_a", "cost_vases"),
        **PPO_SMALL,
    )
    with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] reported no info\['cost_vases'\]"):
        model.learn(32)


def test_a_nonfinite_named_cost_raises():
    class NanB(ConstantCostsEnv):
        def step(self, action):
            out = super().step(action)
            out[-1]["cost_b"] = math.nan
            return out

    model = PPOLag(
        "MlpPolicy",
        DummyVecEnv([ConstantCostsEnv, NanB]),
        cost_limit=[1.0, 1.0],
        cost_keys=("cost_a", "cost_b"),
        **PPO_SMALL,
    )
    with pytest.raises(NonFiniteValueError, match=r"info\['cost_b'\] \[0.05, nan\] .*\[1\]"):
        model.learn(32)


def test_absurd_costs_are_saturated_per_entry_as_a_scalar_cost():
    model = PPOLag(
        "MlpPolicy",
        constant_vec(1, costs=(1e200, 0.5)),
        cost_limit=[1.0, 1.0],
        cost_window=2,
        **PPO_SMALL,
    )
    with pytest.warns(GymcurricWarning, match="saturated"):
        model.learn(64)
    assert model.cost_clipped == 64  # one entry per step
    assert np.isfinite(model.lagrange_multipliers).all()
    assert model.ep_cost_buffer[-1] == (10 * COST_CAP, 5.0)
    assert all(bool(th.isfinite(v).all()) for v in policy_params(model).values())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cost_limit": []}, "at least one limit"),
        ({"cost_limit": [1.0, -1.0]}, r"cost_limit\[1\]"),
        ({"cost_limit": [1.0, "2"]}, r"cost_limit\[1\]"),
        ({"cost_limit": [1.0, 2.0], "cost_keys": ("cost_a",)},
         "1 cost_keys for 2 cost limits"),
        ({"cost_limit": [1.0], "cost_keys": ("cost_a", "cost_b")},
         "2 cost_keys for 1 cost limits"),
        ({"cost_limit": 1.0, "cost_keys": ("cost_a", "cost_b")},
         r"one limit for 2 cost_keys \['cost_a', 'cost_b'\]"),
        ({"cost_limit": [1.0, 2.0], "cost_keys": "cost_a"}, "sequence of info keys"),
        ({"cost_limit": [1.0, 2.0], "cost_keys": ("cost_a", "cost_a")}, "distinct"),
        ({"cost_limit": [1.0, 2.0], "policy_kwargs": {"n_costs": 3}},
         r"policy_kwargs\['n_costs'\].*2 limits"),
    ],
)  # fmt: skip
def test_bad_limits_or_keys_are_config_errors_at_construction(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PPOLag("MlpPolicy", constant_vec(), **{**PPO_SMALL, **kwargs})


@pytest.mark.parametrize("cls", [CPO, P3O])
def test_cpo_and_p3o_refuse_several_constraints(cls):
    kw = TRPO_SMALL if cls is CPO else PPO_SMALL
    with pytest.raises(ConfigError, match=f"{cls.__name__} takes one constraint; 2 limits"):
        cls("MlpPolicy", constant_vec(), cost_limit=[1.0, 2.0], **kw)
    assert cls("MlpPolicy", constant_vec(), cost_limit=[1.0], **kw).n_costs == 1


# ----------------------------------------------------------------- learn, logs, VecNormalize
@pytest.mark.parametrize("cls", [PPOLag, PPOPIDLag, TRPOLag])
def test_learn_on_two_cost_sources_logs_each_constraint(cls, tmp_path):
    model = cls("MlpPolicy", two_source_vec(), cost_limit=[1.0, 5.0], seed=0, **small(cls))
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(320)
    with open(tmp_path / "progress.csv") as f:
        row = list(csv.DictReader(f))[-1]
    for key in (
        "rollout/ep_cost_mean",
        "train/lagrange_multiplier",
        "train/cost_limit",
        "train/cost_value_loss",
        "train/cost_explained_variance",
        "train/cost_advantage_std",
    ):
        for suffix in ("", "_0", "_1"):
            assert row.get(key + suffix) not in (None, ""), key + suffix
    assert float(row["train/cost_limit"]) == 6.0
    # ep_cost_mean_k are the windows' means of each source; both sources did cost something
    jc = np.mean(list(model.ep_cost_buffer), axis=0)
    assert float(row["rollout/ep_cost_mean_1"]) == pytest.approx(jc[1])
    assert (jc > 0).all(), jc


def test_costs_bypass_vec_normalize():
    grab = Grab()
    venv = VecNormalize(constant_vec(costs=(3.0, 7.0)), norm_reward=True, norm_obs=False)
    model = PPOLag("MlpPolicy", venv, cost_limit=[1.0, 1.0], seed=0, **PPO_SMALL)
    model.learn(64, callback=grab)
    costs = grab.rollouts[0]["costs"]
    np.testing.assert_array_equal(costs[..., 0], 3.0)
    np.testing.assert_array_equal(costs[..., 1], 7.0)
    assert model.ep_cost_buffer[0] == (30.0, 70.0)
    assert venv.ret_rms.count > 1  # rewards were normalised meanwhile


# ------------------------------------------------------------ Safety-Gymnasium: hazards + vases


@pytest.mark.safety
@pytest.mark.slow
def test_safety_gymnasium_hazards_and_vases():
    needs_safety()
    from gymcurric.envs.safety_gymnasium import make_safety_env

    keys = ("cost_hazards", "cost_vases_contact")
    seen: list[list[float]] = []

    class Infos(BaseCallback):
        def _on_step(self):
            seen.extend([float(i[k]) for k in keys] for i in self.locals["infos"])
            return True

    grab = Grab()
    venv = DummyVecEnv([partial(make_safety_env, "SafetyPointGoal2-v0")])
    venv.seed(0)
    model = PPOLag("MlpPolicy", venv, cost_limit=[10.0, 5.0], cost_keys=keys, seed=0, **PPO_SMALL)
    model.learn(64, callback=[grab, Infos()])
    costs = np.concatenate([r["costs"].reshape(-1, 2) for r in grab.rollouts])
    np.testing.assert_array_equal(costs, np.array(seen, dtype=np.float32))
    assert model.lagrange_multipliers.shape == (2,)
    venv.close()


def test_gymcurric_train_takes_one_limit_per_constraint(tmp_path):
    from gymcurric.train.cli_train import print_summary
    from gymcurric.train.config import TrainConfig
    from gymcurric.train.runner import train

    kwargs = {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "cost_limit": [1.0, 5.0]}
    cfg = TrainConfig.from_dict(
        {
            "env": {"id": "gymcurric/HazardNav-v0", "num_envs": 2, "kwargs": {"max_steps": 32}},
            "curriculum": {"enabled": False},
            "agent": {
                "algo": "ppolag",
                "kwargs": {**kwargs, "cost_keys": ["cost_hazards", "cost"]},
            },
            "run": {"total_steps": 256, "plots": False, "progress_bar": False},
        }
    )
    out = train(cfg, run_dir=tmp_path / "r")
    assert isinstance(out["lagrange_multiplier"], list) and len(out["lagrange_multiplier"]) == 2
    header = (tmp_path / "r" / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"train/lagrange_multiplier_0", "rollout/ep_cost_mean_1"} <= set(header)
    text = io.StringIO()
    print_summary(out, file=text)
    assert "lambda " in text.getvalue()
