"""benchmarks/safety_gym.py runs end to end on the built-in env (structure only, no timings)."""

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from tests.benchmarks import load_script

pytest.importorskip("sb3_contrib")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
# --algos nine: OmniSafe's nine baselines, in this order
ALGOS = ["ppo", "trpo", "ppolag", "trpolag", "cpo", "p3o", "pidlag", "pposaute", "pposimmer"]


def test_safety_gym_benchmark_quick(tmp_path):
    """The nine baselines, two runs at a time (--jobs 2); then --summarize-only rebuilds the
    same summary."""
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "safety_gym.py"),
            "--algos",
            "nine",
            "--saute-horizon",  # HazardNav has no time limit of its own
            "200",
            "--envs",
            "gymcurric/HazardNav-v0",
            "--steps",
            "128",
            "--seeds",
            "0",
            "--n-steps",
            "64",
            "--speed-steps",
            "64",
            "--speed-repeats",
            "1",
            "--jobs",
            "2",
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for algo in ALGOS:
        for seed in (0,):
            with open(tmp_path / "runs" / f"{algo}__HazardNav-v0__s{seed}.csv") as f:
                rows = list(csv.DictReader(f))
            assert [int(r["timesteps"]) for r in rows] == [64, 128]
            assert {"ep_return", "ep_cost", "lagrange_multiplier", "wall_s"} <= set(rows[0])
    with open(tmp_path / "summary.csv") as f:
        summary = list(csv.DictReader(f))
    assert [r["algo"] for r in summary] == ALGOS
    # no episode of 200 steps ends within 128 steps: "n/a", else "mean ± std"
    assert all(r["cost"] == "n/a" or "±" in r["cost"] for r in summary)
    assert (tmp_path / "curves_HazardNav-v0.png").stat().st_size > 1000
    speed = json.loads((tmp_path / "speed.json").read_text())
    assert speed["ratio_wall"] > 0 and speed["ratio_cpu"] > 0
    with open(tmp_path / "runs" / "ppolag__HazardNav-v0__s0_episodes.csv") as f:
        assert next(csv.reader(f)) == ["timesteps", "return", "cost"]
    before = (tmp_path / "summary.csv").read_text()
    (tmp_path / "summary.csv").unlink()
    # the script's main() here: the run above already started it as a script
    argv = [
        *("--algos", *ALGOS, "--envs", "gymcurric/HazardNav-v0", "--steps", "128"),
        *("--seeds", "0", "--summarize-only", "--out", str(tmp_path)),
    ]
    assert load_script("safety_gym").main(argv) == 0
    assert (tmp_path / "summary.csv").read_text() == before


def test_omnisafe_style_settings_reach_the_models(tmp_path):
    """--norm-obs / --lr-decay / --target-kl / --lagrange-lr / --pid-gains / --pid-epoch-steps
    reach the models."""
    from stable_baselines3.common.vec_env import VecNormalize

    mod = load_script("safety_gym")
    args = SimpleNamespace(
        n_steps=64, batch_size=32, n_epochs=1, cost_limit=25.0, cost_window=20,
        target_kl=0.02, lr_decay=True, norm_obs=True, lagrange_lr=0.1, lagrange_init=2.0,
        pid_gains=[0.2, 0.001, 0.03], pid_epoch_steps=None, n_envs=1,
        cost_limit_start=None, cost_limit_anneal=0.4, cost_n_epochs=7, lagrange_max=3.0,
    )  # fmt: skip
    venv = mod.make_venv("gymcurric/HazardNav-v0", 1, 0, norm_obs=True)
    try:
        assert isinstance(venv, VecNormalize) and venv.norm_obs and not venv.norm_reward
        for algo in ("ppo", "ppolag", "pidlag"):
            model = mod.make_model(algo, venv, 0, args)
            assert model.target_kl == 0.02
            assert model.lr_schedule(1.0) == pytest.approx(3e-4)
            assert model.lr_schedule(0.25) == pytest.approx(7.5e-5)
            if algo == "ppolag":
                assert model.lagrange_lr(1.0) == 0.1
                assert model.lagrange_multiplier == pytest.approx(2.0)
                assert model.lagrange.upper_bound == 3.0
            if algo != "ppo":
                assert model.cost_n_epochs == 7
            if algo == "pidlag":
                gains = model.multiplier_kwargs
                assert [gains[k] for k in ("kp", "ki", "kd")] == [0.2, 0.001, 0.03]
        # OmniSafe's per-epoch PID constants converted to rollouts of 64 steps (r = 0.0032)
        args.pid_epoch_steps = 20_000
        pid_model = mod.make_model("pidlag", venv, 0, args)
        assert pid_model.lagrange.d_delay == 3125  # the multiplier itself, not only the kwargs
        pid = pid_model.lagrange
        assert pid.ki == pytest.approx(0.001 * 0.0032)
        assert pid.kp == 0.2 and pid.kd == 0.03
        assert pid.p_ema_alpha == pid.d_ema_alpha == pytest.approx(0.95**0.0032)
        args.pid_epoch_steps = None
        # the limit annealed from 75 to 25 over the first 40 % of training
        args.cost_limit_start = 75.0
        annealed = mod.make_model("ppolag", venv, 0, args)
        assert [annealed.cost_limit(p) for p in (1.0, 0.8, 0.6, 0.1)] == pytest.approx(
            [75.0, 50.0, 25.0, 25.0]
        )
        args.cost_limit_start = None
        assert mod.make_model("ppolag", venv, 0, args).cost_limit(1.0) == 25.0
        trpo = mod.make_model("trpolag", venv, 0, args)
        assert trpo.target_kl == 0.01  # TRPO's own trust region, untouched
        assert trpo.lagrange_lr(1.0) == 0.1
    finally:
        venv.close()
    subprocess.run(
        [
            *(sys.executable, str(ROOT / "benchmarks" / "safety_gym.py"), "--algos", "ppolag"),
            *("--envs", "gymcurric/HazardNav-v0", "--steps", "128", "--seeds", "0"),
            *("--n-steps", "64", "--norm-obs", "--lr-decay", "--target-kl", "0.02"),
            *("--out", str(tmp_path)),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    config = json.loads((tmp_path / "config.json").read_text())
    assert [config[k] for k in ("norm_obs", "lr_decay", "target_kl")] == ["True", "True", "0.02"]
    with open(tmp_path / "runs" / "ppolag__HazardNav-v0__s0.csv") as f:
        assert [int(r["timesteps"]) for r in csv.DictReader(f)] == [64, 128]


def test_bad_cost_limit_anneal_is_refused_before_any_run(tmp_path, capsys):
    argv = ["--steps", "0", "--cost-limit-start", "75", "--cost-limit-anneal", "1.5"]
    with pytest.raises(SystemExit) as exited:  # main() here: argparse's exit, as in the script
        load_script("safety_gym").main([*argv, "--out", str(tmp_path)])
    assert exited.value.code == 2
    assert "--cost-limit-anneal must be in (0, 1], got 1.5" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_rollout_rows_carry_the_update_diagnostics_of_their_own_update():
    """Row k holds the policy std that collected rollout k and the train/* values of the update
    that used rollout k (SB3 logs them one rollout later); the last row gets the last update."""
    mod = load_script("_safety_runs")
    from stable_baselines3.common.callbacks import BaseCallback

    from gymcurric.integrations.sb3.ppo_lag import PPOLag

    seen: list[dict[str, float]] = []

    class AfterTrain(BaseCallback):
        """Reads the logger at the next rollout start, i.e. right after each update."""

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            logged = self.model.logger.name_to_value
            if "train/approx_kl" in logged:
                seen.append({k: logged.get(f"train/{k}", np.nan) for k in mod.UPDATE_DIAGNOSTICS})

    model = PPOLag(
        "MlpPolicy", "gymcurric/HazardNav-v0", n_steps=64, batch_size=32, n_epochs=2,
        policy_kwargs={"log_std_init": -0.7}, seed=0,
    )  # fmt: skip
    rec = mod.Recorder()
    model.learn(64 * 3, callback=[rec, AfterTrain()])
    rows = rec.rows
    assert len(rows) == 3
    assert rows[0]["std"] == pytest.approx(np.exp(-0.7), rel=1e-6)  # before any update
    assert rows[1]["std"] != rows[0]["std"]
    last = model.logger.name_to_value  # a defaultdict: .get keeps an unlogged key NaN, as the CSV
    seen.append({k: last.get(f"train/{k}", np.nan) for k in mod.UPDATE_DIAGNOSTICS})
    assert len(seen) == 3
    for row, logged in zip(rows, seen, strict=True):
        for key in mod.UPDATE_DIAGNOSTICS:
            assert row[key] == pytest.approx(logged[key], nan_ok=True), key
    assert all(np.isfinite(row["cost_explained_variance"]) for row in rows)
    assert all(np.isnan(row["kappa"]) for row in rows)  # PPOLag logs no κ


def test_costonly_ppo_is_trained_on_minus_the_cost_and_records_the_env_return():
    """ppo-costonly: the model sees reward = -info["cost"]; the monitor keeps the env's return."""
    mod = load_script("safety_gym")
    args = SimpleNamespace(
        n_steps=64, batch_size=32, n_epochs=1, cost_limit=25.0, cost_window=20, target_kl=None,
        lr_decay=False, norm_obs=False, lagrange_lr=0.035, lagrange_init=0.001,
        pid_gains=[0.1, 0.01, 0.01], pid_epoch_steps=None, n_envs=2,
        cost_limit_start=None, cost_limit_anneal=0.4, cost_n_epochs=None, lagrange_max=None,
    )  # fmt: skip
    venv = mod.make_venv("gymcurric/HazardNav-v0", 2, 0)
    model = mod.make_model("ppo-costonly", venv, 0, args)
    env = model.get_env()
    env.reset()
    seen_cost = 0.0
    for _ in range(200):
        actions = np.stack([env.action_space.sample() for _ in range(2)])
        _, rewards, _, infos = env.step(actions)
        costs = np.array([info["cost"] for info in infos])
        np.testing.assert_array_equal(rewards, -costs.astype(np.float32))
        seen_cost += costs.sum()
    assert seen_cost > 0  # the check above compared some non-zero costs
    rec = mod.Recorder()
    model.learn(64 * 8, callback=rec)  # 256 steps per env: past the 200-step time limit
    assert rec.episodes
    # the recorded return is HazardNav's own reward (goal progress), not minus the cost
    assert any(abs(ret + cost) > 1e-6 for _, ret, cost in rec.episodes)
    env.close()


def test_a_run_csv_interrupted_while_written_keeps_the_previous_complete_file(tmp_path):
    """write_run_csv renames a finished file over the old one: a failure mid-write (here a
    row DictWriter refuses) leaves the last complete CSV, not a truncated one."""
    mod = load_script("safety_gym")
    path = tmp_path / "ppolag__X__s0"
    rec = SimpleNamespace(rows=[{"timesteps": 64}, {"timesteps": 128}], episodes=[(64, 1.0, 2.0)])
    mod.write_run_csv(path, rec)
    before = path.with_suffix(".csv").read_text()
    rec.rows[1] = {"timesteps": 128, "not_in_header": 1.0}  # fails after the first row
    with pytest.raises(ValueError, match="not_in_header"):
        mod.write_run_csv(path, rec)
    assert path.with_suffix(".csv").read_text() == before == "timesteps\n64\n128\n"
    assert (tmp_path / "ppolag__X__s0_episodes.csv").read_text().splitlines()[1] == "64,1.0,2.0"


def live_processes_in_group(pgid: int) -> list[int]:
    """The pids of process group ``pgid`` that have not exited (zombies left out), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        state, _, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    """--jobs workers (children of the forkserver) stop training once the main process dies:
    every process of the run (its own session) ends, so none can write another row."""
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "safety_gym.py"), "--algos", "ppolag",
        "--envs", "gymcurric/HazardNav-v0", "--steps", "10000000", "--seeds", "0",
        "--n-steps", "64", "--batch-size", "64", "--n-epochs", "1", "--jobs", "1",
        "--out", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    csv_path = tmp_path / "runs" / "ppolag__HazardNav-v0__s0.csv"

    def rows() -> int:
        try:
            return len(csv_path.read_text().splitlines())
        except FileNotFoundError:
            return 0

    try:
        deadline = time.monotonic() + 120
        while rows() < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rows() >= 3, "the worker never wrote its CSV"
        assert len(live_processes_in_group(proc.pid)) >= 2  # the main process and its worker
        proc.kill()  # SIGKILL: the main process gets no chance to shut the pool down
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60  # the watchdog polls every 2 s
        while live_processes_in_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = live_processes_in_group(proc.pid)
        assert not left, f"processes of the run kept running after it was killed: {left}"
        before = rows()
        time.sleep(0.5)
        assert rows() == before, "a worker kept training after the main process was killed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the run


def test_pposaute_trains_on_the_saute_env_and_records_the_env_return():
    """pposaute: PPO sees z and the unsafe reward; the recorded return/cost are the env's own."""
    mod = load_script("safety_gym")
    # HazardNav's horizon is a task parameter, not in its spec: given here
    saute = {
        "safety_budget": 0.5,
        "saute_gamma": 1.0,
        "unsafe_reward": -5.0,
        "max_episode_steps": 200,
    }
    venv = mod.make_venv("gymcurric/HazardNav-v0", 1, 3, saute=saute)
    raw = gym.make("gymcurric/HazardNav-v0")
    raw_obs, _ = raw.reset(seed=3)  # DummyVecEnv.seed(3) seeds sub-env 0 with 3
    obs = venv.reset()
    assert obs.shape[1] == raw_obs.shape[0] + 1 and obs[0, -1] == 1.0  # z = the whole budget
    np.testing.assert_array_equal(obs[0, :-1], raw_obs)
    rng = np.random.default_rng(0)
    spent = 0  # episodes whose budget was spent, where the Saute reward differs from the env's
    for _ in range(10):  # episodes; DummyVecEnv and `raw` reset alike (seeded once)
        raw_ret = raw_cost = saute_ret = 0.0
        for _ in range(1000):
            action = rng.uniform(-1, 1, size=raw.action_space.shape).astype(np.float32)
            _, r, term, trunc, info = raw.step(action)
            raw_ret, raw_cost = raw_ret + float(r), raw_cost + float(info["cost"])
            _, rewards, dones, infos = venv.step(action[None])
            saute_ret += float(rewards[0])
            assert dones[0] == (term or trunc)
            if dones[0]:
                break
        ep = infos[0]["episode"]
        assert ep["r"] == pytest.approx(raw_ret) and ep["c"] == pytest.approx(raw_cost)
        if raw_cost > 0.5:
            spent += 1
            assert infos[0]["saute_state"] < 0 and saute_ret != pytest.approx(raw_ret)
        raw.reset()
    assert spent >= 2
    venv.close()

    args = SimpleNamespace(
        n_steps=64, batch_size=32, n_epochs=1, cost_limit=25.0, target_kl=None, lr_decay=False,
        norm_obs=False, n_envs=1, saute_gamma=0.9999, unsafe_reward=-0.2, cost_window=20,
        cost_limit_start=None, cost_n_epochs=None, saute_horizon=200,
    )  # fmt: skip
    rec = mod.train("pposaute", "gymcurric/HazardNav-v0", 0, args, 64 * 4)
    assert rec.episodes and all(np.isfinite([r, c]).all() for _, r, c in rec.episodes)
    saute = {"safety_budget": 25.0, "max_episode_steps": 200}
    model = mod.make_model(
        "pposaute", mod.make_venv("gymcurric/HazardNav-v0", 1, 0, saute=saute), 0, args
    )
    model_space = model.observation_space
    assert model_space.shape[0] == raw.observation_space.shape[0] + 1
