import csv
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3.simmer import PPOSimmer, VecSimmer
from gymcurric.safety.budget_control import (
    PIBudgetController,
    QBudgetController,
    reference_schedule,
)
from tests.integrations.sb3.hazard_runs import (
    ENV_ID,
    assert_same,
    continue_here,
    continue_in_new_interpreter,
    hazard_vec,
    logged,
    policy_params,
    silent,
)
from tests.integrations.sb3.poison import Poison
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "n_epochs": 2, "device": "cpu", "max_episode_steps": 50}


# --------------------------------------------------------------------- PI controller
def test_pi_controller_steps_by_hand_with_anti_windup_and_clipping():
    pi = PIBudgetController(
        [10.0, 20.0], kp=0.1, ki=0.01, kaw=0.05, polyak=0.5, window=2, action_bound=1.0
    )
    assert pi.budget == 10.0 and pi.budget_bounds == (0.0, 20.0)
    # ref 10, y 4: e = 0.5·6 = 3, I = 3, raw = 0.3 + 0.03 = 0.33
    assert pi.step(4.0, 1.0) == pytest.approx(10.33)
    # y 30: e = 0.5·(-20) + 0.5·3 = -8.5, I = -5.5, raw = -0.85 - 0.055 + 0.05·(0.33 - 0.33)
    assert pi.step(30.0, 1.0) == pytest.approx(10.0 - 0.905)
    # ref 20 (p = 0.4): e = 0.5·20 + 0.5·(-8.5) = 5.75, window [-8.5, 5.75], raw = 0.5475:
    # the budget 20.5475 is clipped to 20, so the applied action is 0
    assert pi.step(0.0, 0.4) == 20.0
    assert (pi.prev_action, pi.prev_raw_action) == (0.0, pytest.approx(0.5475))
    # e = 12.875, I = 18.625, raw = 1.2875 + 0.18625 + 0.05·(0 - 0.5475) = 1.446375:
    # the action is clipped to 1 and the budget to 20 again
    assert pi.step(0.0, 0.4) == 20.0
    assert pi.prev_raw_action == pytest.approx(1.446375)
    # y 40: e = -10 + 6.4375 = -3.5625, I = 9.3125, anti-windup 0.05·(0 - 1.446375)
    raw = -0.35625 + 0.093125 - 0.05 * 1.446375
    assert pi.step(40.0, 0.4) == pytest.approx(20.0 + raw)
    assert pi.last_reference == 20.0 and list(pi.errors) == pytest.approx([12.875, -3.5625])


def original_reference(levels, n_epochs, t):
    # HEBO SIMMER reference_generator, "increase": max(0, n - (n_epochs - t) // L - 1)
    n, length = len(levels), n_epochs // len(levels)
    return levels[max(0, n - (n_epochs - t) // length - 1)]


@pytest.mark.parametrize(("n_levels", "n_epochs"), [(3, 6), (4, 12), (6, 30)])
def test_reference_schedule_matches_the_original_generator(n_levels, n_epochs):
    levels = np.linspace(10.0, 30.0, n_levels)
    for t in range(n_epochs):
        p = (n_epochs - t) / n_epochs  # the progress at the start of epoch t
        assert reference_schedule(levels, "increase", p) == original_reference(levels, n_epochs, t)
    assert reference_schedule(levels, "decrease", 1.0) == 30.0


def test_pi_controller_state_dict_round_trip():
    a = PIBudgetController([10.0, 20.0], window=3)
    for y in (4.0, 30.0, 12.0, 0.0):
        a.step(y, 0.5)
    b = PIBudgetController([10.0, 20.0], window=3)
    b.load_state_dict(a.state_dict())
    assert b.budget == a.budget
    assert b.step(7.0, 0.3) == a.step(7.0, 0.3)
    assert b.state_dict() == a.state_dict()


# ---------------------------------------------------------------------- Q controller
def test_q_controller_update_by_hand():
    q = QBudgetController([10.0, 20.0, 30.0], lr=0.5, gamma=0.9, epsilon_greedy=1.0, polyak=1.0)
    assert q.reward_thresh == 5.0 and q.budget == 10.0
    # all Q equal: argmax takes the first action (-1), clipped at the lowest level;
    # y 0 is under budget: reward -1; Q[0,-1] = 0.5·(-1 + 0.9·0)
    assert q.step(0.0) == 10.0
    assert q.last_action == -1 and q.q_table[0, 0] == -0.5
    q.q_table[0] = [0.0, 0.0, 1.0]  # make +1 greedy
    # under budget, +1: reward 2; Q[0,+1] = 0.5·1 + 0.5·(2 + 0.9·max Q[1] = 0) = 1.5
    assert q.step(0.0) == 20.0 and q.q_table[0, 2] == 1.5
    # y 22 within ±5 of 20: Q[1] all 0, so -1: reward -1; Q[1,-1] = 0.5·(-1 + 0.9·1.5)
    assert q.step(22.0) == 10.0 and q.q_table[1, 0] == pytest.approx(0.175)
    # y 40 over 10: +1 (greedy) is rewarded -1; Q[0,+1] = 0.5·1.5 + 0.5·(-1 + 0.9·0.175)
    assert q.step(40.0) == 20.0 and q.q_table[0, 2] == pytest.approx(0.32875)
    assert q.reward(1, -1, 40.0) == 2.0 and q.reward(1, 0, 40.0) == -1.0  # over: go down


def test_q_controller_filters_its_observation():
    q = QBudgetController([10.0, 20.0], polyak=0.01, seed=0)
    q.step(100.0)
    q.step(100.0)
    assert q.filtered_cost == pytest.approx(0.01 * 100 + 0.99 * 1.0)


def test_q_controller_epsilon_greedy_with_a_seeded_generator():
    q = QBudgetController([10.0, 20.0, 30.0], epsilon_greedy=0.5, seed=3)
    rng = np.random.default_rng(3)
    chosen, expected = [], []
    for y in (0.0, 50.0, 15.0, 0.0, 0.0, 30.0, 5.0, 25.0):
        greedy = q.ACTIONS[int(np.argmax(q.q_table[q.level]))]
        take_greedy = rng.random() < 0.5
        expected.append(greedy if take_greedy else q.ACTIONS[int(rng.integers(3))])
        q.step(y)
        chosen.append(q.last_action)
    assert chosen == expected
    assert len(set(chosen)) > 1
    twin = QBudgetController([10.0, 20.0, 30.0], epsilon_greedy=0.5, seed=99)
    twin.load_state_dict(q.state_dict())  # the generator's state travels too
    assert [q.step(12.0) for _ in range(5)] == [twin.step(12.0) for _ in range(5)]


# ---------------------------------------------------------------------------- VecSimmer
@pytest.mark.parametrize(
    ("budget_step", "zs", "rewards"),
    [
        ("max", [0.375, 0.125, -0.25, -0.75], [1.0, 2.0, -1.0, -1.0]),  # c / B, B = 4
        ("current", [0.25, -0.25, -1.0, -2.0], [1.0, -1.0, -1.0, -1.0]),  # c / b, b = 2
    ],
)
def test_vec_simmer_spends_the_budget_by_hand(budget_step, zs, rewards):
    # costs 0.5, 1, 1.5, 2 per 4-step episode; z₀ = b / B = 0.5; saute_gamma 1
    venv = VecSimmer(
        DummyVecEnv([partial(make_scripted, 4)]),
        4.0,
        budget=2.0,
        saute_gamma=1.0,
        max_episode_steps=4,
        budget_step=budget_step,
    )
    assert float(venv.reset()[0, -1]) == 0.5
    venv.set_budget(4.0)  # from the next episode on
    seen_z, seen_r = [], []
    for _ in range(4):
        obs, reward, done, info = venv.step(np.array([0]))
        seen_z.append(info[0]["saute_state"])
        seen_r.append(float(reward[0]))
    assert seen_z == pytest.approx(zs) and seen_r == rewards
    assert done[0] and info[0]["terminal_observation"][-1] == pytest.approx(max(zs[-1], -1.0))
    assert float(obs[0, -1]) == 1.0  # the new episode starts with the new budget: 4 / 4


def test_vec_simmer_bad_input():
    base = DummyVecEnv([partial(make_scripted, 4)])
    with pytest.raises(ConfigError, match="max_episode_steps"):
        VecSimmer(base, 4.0)  # the scripted env has no spec horizon
    with pytest.raises(ConfigError, match="budget_step"):
        VecSimmer(base, 4.0, max_episode_steps=4, budget_step="omnisafe")
    venv = VecSimmer(base, 4.0, max_episode_steps=4)
    with pytest.raises(ConfigError, match="budget"):
        venv.set_budget(5.0)


# ---------------------------------------------------------------------------- PPOSimmer
@pytest.mark.parametrize("controller", ["pi", "q"])
def test_learn_on_hazard_nav_moves_and_logs_the_budget(tmp_path, controller):
    model = PPOSimmer(
        "MlpPolicy", hazard_vec(), seed=0, safety_budget=10.0, controller=controller, **SMALL
    )
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(320)
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    keys = set(rows[-1])
    name = {"pi": "simmer/reference", "q": "simmer/level"}[controller]
    for key in ("simmer/budget", "simmer/observed_cost", name, "rollout/ep_cost_mean"):
        assert key in keys, key
    budgets = [float(r["simmer/budget"]) for r in rows if r.get("simmer/budget")]
    assert all(0.0 <= b <= 10.0 for b in budgets)
    assert model.simmer_env().budget == model.budget == model.budget_controller.budget
    assert model.observation_space.shape == (24,)  # 23 + the safety state
    if controller == "pi":
        assert len(set(budgets)) > 1  # the PI budget moves every epoch


def test_the_controller_sees_the_epochs_max_or_mean_raw_cost():
    def run(observation):
        venv = VecNormalize(DummyVecEnv([partial(make_scripted, 4)] * 2), norm_reward=True)
        model = silent(
            PPOSimmer("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0,
                      safety_budget=10.0, max_episode_steps=4, cost_observation=observation)
        )  # fmt: skip
        model.learn(16)
        return model

    model = run("max")
    assert logged(model)["simmer/observed_cost"] == 5.0  # raw episode cost, not normalised
    assert list(model.ep_cost_buffer) == [5.0] * 4
    assert logged(run("mean"))["simmer/observed_cost"] == 5.0


def test_a_vec_simmer_already_in_the_stack_is_driven_not_doubled():
    inner = VecSimmer(DummyVecEnv([partial(make_scripted, 4)] * 2), 10.0, max_episode_steps=4)
    outer = VecNormalize(inner)
    model = silent(PPOSimmer("MlpPolicy", outer, n_steps=8, batch_size=16, n_epochs=1, seed=0,
                             safety_budget=10.0))  # fmt: skip
    assert model.simmer_env() is inner and model.observation_space.shape == (2,)
    model.learn(16)
    assert inner.budget == model.budget


def test_no_finished_episode_means_no_controller_step():
    model = silent(PPOSimmer("MlpPolicy", hazard_vec(), seed=0, **{**SMALL, "n_steps": 16}))
    start = model.budget
    model.learn(64)  # two rollouts of 16 steps; episodes last 50
    assert model.controller_skipped == 2 and model.budget == start


def progress_trace(model):
    """The progress each controller step of ``model`` is given, as a list that grows."""
    seen = []
    step = model.budget_controller.step

    def recording(cost, progress):
        seen.append(progress)
        return step(cost, progress)

    model.budget_controller.step = recording
    return seen


def test_the_reference_schedule_spans_the_run_not_each_learn_call():
    kw = {**SMALL, "seed": 0, "safety_budget": 10.0, "reference_steps": 384}
    whole = silent(PPOSimmer("MlpPolicy", hazard_vec(), **kw))
    seen_whole = progress_trace(whole)
    whole.learn(384)
    halves = silent(PPOSimmer("MlpPolicy", hazard_vec(), **kw))
    seen_halves = progress_trace(halves)
    halves.learn(192).learn(192, reset_num_timesteps=False)
    assert whole.num_timesteps == halves.num_timesteps == 384
    # rollouts of 2 x 32 steps start at 0, 64, ..., 320: progress 1 - start / 384
    assert seen_whole == seen_halves and len(seen_whole) >= 3
    assert all(min(abs(p - (1 - k / 6)) for k in range(6)) < 1e-12 for p in seen_whole)
    assert whole.budget_controller.state_dict() == halves.budget_controller.state_dict()
    assert_same(policy_params(whole), policy_params(halves))
    # by default the span is the total of the learn() call that started the run
    default = silent(PPOSimmer("MlpPolicy", hazard_vec(), **{**kw, "reference_steps": None}))
    seen_default = progress_trace(default)
    default.learn(384)
    assert default.reference_horizon == 384 and seen_default == seen_whole
    short = silent(PPOSimmer("MlpPolicy", hazard_vec(), **{**kw, "reference_steps": None}))
    seen_short = progress_trace(short)
    short.learn(128).learn(256, reset_num_timesteps=False)
    # kept by the second call: past its end the reference stays at the top level
    assert short.reference_horizon == 128 and seen_short[-1] == 0.0
    assert short.budget_controller.last_reference == 10.0


@pytest.mark.parametrize("controller", ["pi", pytest.param("q", marks=pytest.mark.slow)])
def test_save_load_in_a_new_interpreter_continues_as_uninterrupted(tmp_path, controller):
    kw = {**SMALL, "seed": 1, "safety_budget": 10.0, "controller": controller}
    a = silent(PPOSimmer("MlpPolicy", hazard_vec(seed=1), **kw)).learn(320)
    a.save(tmp_path / "simmer.zip")
    b = continue_in_new_interpreter(PPOSimmer, tmp_path / "simmer.zip", tmp_path / "b.zip", 320)
    continue_here(a, 320)
    assert a.num_timesteps == b.num_timesteps == 640
    assert (
        a.controller_skipped == b.controller_skipped < 10
    )  # of 10 rollouts; episodes last 50 steps
    assert_same(
        {k: np.asarray(v).tolist() for k, v in a.budget_controller.state_dict().items()},
        {k: np.asarray(v).tolist() for k, v in b.budget_controller.state_dict().items()},
    )
    assert list(a.ep_cost_buffer) == list(b.ep_cost_buffer)
    assert_same(policy_params(a), policy_params(b))
    assert_same(a.policy.optimizer.state_dict(), b.policy.optimizer.state_dict())
    # load with an env: wrapped with the saved settings, budget from the controller
    c = PPOSimmer.load(tmp_path / "b.zip", env=hazard_vec(), device="cpu")
    simmer = c.simmer_env()
    assert simmer.budget == b.budget and simmer.safety_budget == 10.0
    assert simmer.saute.max_episode_steps == 50


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"controller": "pid"}, "'pi' or 'q'"),
        ({"controller_kwargs": {"kd": 0.1}}, "unknown keys \\['kd'\\]"),
        ({"controller": "q", "reference": "decrease"}, "reference"),
        ({"cost_observation": "cvar"}, "'max' or 'mean'"),
        ({"budget_step": "b"}, "'max' or 'current'"),
        ({"budget_levels": [5.0, 30.0]}, "budget_levels"),
        ({"risk_modulation": True}, "risk_modulation"),
        ({"max_episode_steps": None}, "max_episode_steps"),
        ({"controller_kwargs": {"polyak": 0.0}}, "polyak"),
        ({"controller_kwargs": {"budget_bounds": (0.0, 40.0)}}, "budget_bounds"),
        ({"reference_steps": 0}, "reference_steps"),
        ({"reference_steps": 1.5e6}, "reference_steps"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PPOSimmer("MlpPolicy", hazard_vec(1), **{**SMALL, **kwargs})


def test_nonfinite_loss_skips_the_step_and_counts_it():
    model = silent(PPOSimmer("MlpPolicy", hazard_vec(), seed=0, **SMALL)).learn(64)
    before = policy_params(model)
    model.learn(64, callback=Poison("advantages"), reset_num_timesteps=False)
    assert model.nonfinite_skipped == 2 * SMALL["n_epochs"]  # 2 minibatches per pass
    assert_same(before, policy_params(model))


def test_omnisafe_budget_step_is_an_option():
    model = PPOSimmer(
        "MlpPolicy", gym.make(ENV_ID, max_steps=50), budget_step="current", seed=0, **SMALL
    )
    assert model.simmer_env().budget_step == "current"
