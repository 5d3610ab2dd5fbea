"""``gymcurric train`` whose sub-env fails mid-run: it ends with an error naming it, never hangs.

Run as users run it, in a new interpreter with a time limit: under ``subproc`` a worker's
exception (or its death by a signal) hung the run for ever; now it exits 2 within seconds,
naming the sub-env and the error, with the logs flushed and the last checkpoint loadable.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gymcurric import cli
from gymcurric.errors import ConfigError
from tests.faulty_envs import MAKE_ID, MESSAGE
from tests.train.run_harness import run_cli, run_config

# 2 sub-envs x n_steps 64: the checkpoint at 128 steps is written before sub-env 1's step 100
FAIL_AT = 100
LIMIT_S = 180  # a hang fails the test (subprocess.TimeoutExpired) instead of hanging it


def _config(tmp_path: Path, vectorization: str, **env: Any) -> Path:
    kwargs = {"fail_at": FAIL_AT, "fail_rank": 1, "size": 8, "max_steps": 40}
    kwargs.update(env.pop("kwargs", {}))
    cfg = run_config(
        512,
        env={"id": MAKE_ID, "vectorization": vectorization, "kwargs": kwargs, **env},
        curriculum={"enabled": False},
        run={"checkpoint_every": 128},
    )
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg.to_dict()))
    return path


def _train(tmp_path: Path, vectorization: str, **env: Any) -> Any:
    config = _config(tmp_path, vectorization, **env)
    args = ["train", "--config", str(config), "--run-dir", str(tmp_path / "run")]
    return run_cli(*args, check=False, timeout=LIMIT_S)


def _check_what_was_written(run: Path) -> None:
    """The checkpoint before the error is complete and loads; the logs are flushed."""
    from stable_baselines3 import PPO

    from gymcurric.train._checkpoint import recover

    ckpt, manifest = recover(run)
    assert manifest["num_timesteps"] == 128
    assert PPO.load(ckpt / "model.zip", device="cpu").num_timesteps == 128
    with open(run / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["time/total_timesteps"] for r in rows)
    assert not (run / "summary.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_a_sub_env_that_raises_under_subproc_ends_the_run_naming_it(tmp_path, start_method):
    out = _train(tmp_path, "subproc", start_method=start_method)
    assert out.returncode == 2, out.stderr
    first = (
        "gymcurric train: error: sub-env 1: step() raised builtins.ValueError: "
        f"{MESSAGE.format(FAIL_AT)} (the vector env cannot go on)"
    )
    assert out.stderr.startswith(first), out.stderr
    # the worker's traceback, down to the env's own line
    assert "In the sub-env's process:\nTraceback" in out.stderr
    assert "faulty_envs.py" in out.stderr and "raise ValueError(MESSAGE" in out.stderr
    _check_what_was_written(tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_a_worker_killed_by_a_signal_ends_the_run_naming_it(tmp_path, start_method):
    out = _train(tmp_path, "subproc", start_method=start_method, kwargs={"fail_mode": "kill"})
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        "gymcurric train: error: sub-env 1: its worker process died during step(): "
        "killed by signal SIGKILL (pid "
    ), out.stderr
    _check_what_was_written(tmp_path / "run")


@pytest.mark.slow
def test_a_sub_env_that_hangs_past_env_step_timeout_ends_the_run_naming_it(tmp_path):
    # without a timeout the run waited for the hung worker for ever
    kwargs = {"fail_mode": "hang"}
    out = _train(tmp_path, "subproc", start_method="fork", step_timeout=2, kwargs=kwargs)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        "gymcurric train: error: sub-env 1: step(): no reply within 2 s (the worker is alive: "
        "hung?); the vector env cannot go on"
    ), out.stderr
    _check_what_was_written(tmp_path / "run")


@pytest.mark.slow
def test_an_env_that_hangs_while_built_past_env_build_timeout_ends_the_run_naming_it(tmp_path):
    # without a limit the run waited for ever in the vector env's constructor
    kwargs = {"build_s": 60.0}  # every sub-env's constructor sleeps for a minute
    out = _train(tmp_path, "subproc", start_method="fork", build_timeout=2, kwargs=kwargs)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        "gymcurric train: error: sub-env 0: building the env: no reply within 2 s (the worker "
        "is alive: hung while building its env?); the vector env cannot go on"
    ), out.stderr
    assert not (tmp_path / "run").exists()


def test_a_sub_env_that_raises_under_dummy_ends_the_run_naming_it(tmp_path, capsys):
    config = _config(tmp_path, "dummy", kwargs={"fail_at": 70})  # in the second rollout
    assert cli.main(["train", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "gymcurric train: error: sub-env 1: step() raised builtins.ValueError: "
        f"{MESSAGE.format(70)} (the vector env cannot go on)\nIn the sub-env:\nTraceback"
    ), err
    assert "faulty_envs.py" in err
    _check_what_was_written(tmp_path / "run")


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_directory(tmp_path, capsys):
    config = _config(tmp_path, "dummy", kwargs={"fail_at": 5})
    assert cli.main(["train", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 2
    assert "sub-env 1: step() raised builtins.ValueError" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_naming_sb3s_dummy_vec_env_restores_onto_the_checked_one():
    # checkpoints written before the Checked vector envs name their base "DummyVecEnv"
    from gymcurric.train._runstate import capture_venv, restore_venv
    from gymcurric.train.build import build_run

    cfg = run_config(curriculum={"enabled": False})
    first, second = build_run(cfg), build_run(cfg)
    try:
        first.venv.reset()
        arrays: dict[str, Any] = {}
        saved = capture_venv(first.venv, arrays)
        assert saved["base"][0] == "CheckedDummyVecEnv"
        saved["base"][0] = "DummyVecEnv"
        assert restore_venv(second.venv, saved, arrays)
        # the base's own state (its observation buffer) came back too
        obs = first.venv.unwrapped.buf_obs[None]
        assert obs.any() and np.array_equal(second.venv.unwrapped.buf_obs[None], obs)
    finally:
        first.close()
        second.close()


@pytest.mark.slow
def test_resume_step_timeout_times_out_a_run_that_hung(tmp_path):
    # a run that hung without env.step_timeout could only be resumed with a limit by editing
    # its config.json by hand: `resume --step-timeout` sets it, and config.json keeps it
    from gymcurric.train.runner import load_run_config

    env = {"start_method": "fork", "kwargs": {"fail_mode": "hang"}}
    config = _config(tmp_path, "subproc", **env)
    run = tmp_path / "run"
    # the first part ends before sub-env 1's step 100 (64 steps each), without a limit
    argv = ["train", "--config", str(config), "--run-dir", str(run), "run.total_steps=128"]
    assert cli.main(argv) == 0
    assert load_run_config(run).env.step_timeout is None
    # the resumed workers count their steps from 0 again: sub-env 1 hangs at its step 100
    args = ["resume", str(run), "--step-timeout", "2", "--total-steps", "512"]
    out = run_cli(*args, check=False, timeout=LIMIT_S)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        "gymcurric resume: error: sub-env 1: step(): no reply within 2 s (the worker is alive: "
        "hung?); the vector env cannot go on"
    ), out.stderr
    assert json.loads((run / "config.json").read_text())["env"]["step_timeout"] == 2.0
    assert load_run_config(run).env.step_timeout == 2.0  # what a later resume runs with
    assert load_run_config(run, step_timeout=None).env.step_timeout is None  # --step-timeout none


@pytest.mark.slow
def test_resume_build_timeout_ends_a_resume_whose_envs_hang_while_rebuilt(tmp_path):
    # a resume builds its envs again (a simulator's licence server gone, say): without
    # --build-timeout it waited for ever, unless config.json was edited by hand
    env = {"start_method": "fork", "kwargs": {"fail_at": 10**6}}
    config = _config(tmp_path, "subproc", **env)
    run = tmp_path / "run"
    argv = ["train", "--config", str(config), "--run-dir", str(run), "run.total_steps=128"]
    assert cli.main(argv) == 0
    saved = json.loads((run / "config.json").read_text())
    saved["env"]["kwargs"]["build_s"] = 60.0  # every sub-env's constructor now hangs
    (run / "config.json").write_text(json.dumps(saved))
    before = (run / "config.json").read_text()
    args = ["resume", str(run), "--build-timeout", "2", "--total-steps", "512"]
    out = run_cli(*args, check=False, timeout=LIMIT_S)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        "gymcurric resume: error: sub-env 0: building the env: no reply within 2 s (the worker "
        "is alive: hung while building its env?); the vector env cannot go on"
    ), out.stderr
    # config.json is written once the run is rebuilt: a resume that never started left it
    assert (run / "config.json").read_text() == before


@pytest.mark.parametrize("option", ["--step-timeout", "--build-timeout"])
@pytest.mark.parametrize(
    ("value", "vectorization", "message"),
    [
        ("0", "subproc", r"argument {option}: expected seconds > 0 and <= 1e\+06, or "
         r"'none' \(no limit\); got '0'"),
        ("nan", "subproc", "argument {option}: expected seconds > 0 .*; got 'nan'"),
        ("soon", "subproc", "argument {option}: expected seconds > 0 .*; got 'soon'"),
        ("5", "dummy", r"{config}: invalid value for '{option}': 5.0 \(only subproc "
         r"workers can be timed out; this run's env.vectorization is 'dummy'\)$"),
    ],
)  # fmt: skip
def test_resume_timeouts_refuse_what_the_config_keys_refuse(
    tmp_path, capsys, value, vectorization, message, option
):
    # checked before anything is built; the run's config.json is left as it was
    # (--build-timeout, for a resume whose envs hang while rebuilt, was an unknown option)
    run = tmp_path / "run"
    run.mkdir()
    cfg = run_config(env={"vectorization": vectorization}, curriculum={"enabled": False})
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    before = (run / "config.json").read_text()
    try:
        code = cli.main(["resume", str(run), option, value])
    except SystemExit as exit_:  # argparse's usage error
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    expected = message.format(config=run / "config.json", option=option)
    assert re.fullmatch(f"gymcurric resume: error: {expected}", err), err
    assert (run / "config.json").read_text() == before


def _subproc_run(tmp_path: Path) -> Path:
    """A run directory holding only the config.json of a subproc run (enough for the checks)."""
    run = tmp_path / "run"
    run.mkdir()
    cfg = run_config(env={"vectorization": "subproc"}, curriculum={"enabled": False})
    (run / "config.json").write_text(json.dumps(cfg.to_dict()))
    return run


def _resume_kwargs(monkeypatch, run: Path, *options: str) -> dict:
    """The keyword arguments `gymcurric resume RUN OPTIONS` passes to ``runner.resume``."""
    from gymcurric.train import runner

    calls = []

    def resume(run_dir, **kwargs):
        calls.append(kwargs)
        raise KeyboardInterrupt  # stop here: nothing to train

    monkeypatch.setattr(runner, "resume", resume)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["resume", str(run), *options])
    assert len(calls) == 1
    return calls[0]


@pytest.mark.parametrize(("value", "expected"), [("7.5", 7.5), ("none", None), ("NULL", None)])
def test_resume_step_timeout_reaches_resume(tmp_path, monkeypatch, value, expected):
    # the resume itself (which writes config.json before training) is the slow test above
    from gymcurric.train import runner

    run = _subproc_run(tmp_path)
    assert _resume_kwargs(monkeypatch, run, "--step-timeout", value)["step_timeout"] == expected
    assert _resume_kwargs(monkeypatch, run)["step_timeout"] == "keep"
    assert runner.load_run_config(run, step_timeout=expected).env.step_timeout == expected
    assert runner.load_run_config(run, step_timeout=3).env.step_timeout == 3.0


@pytest.mark.parametrize(("value", "expected"), [("300", 300.0), ("none", None)])
def test_resume_build_timeout_reaches_resume(tmp_path, monkeypatch, value, expected):
    # a resume builds the envs again: one that hangs there needed config.json edited by hand
    from gymcurric.train import runner

    run = _subproc_run(tmp_path)
    got = _resume_kwargs(monkeypatch, run, "--build-timeout", value, "--step-timeout", "9")
    assert (got["build_timeout"], got["step_timeout"]) == (expected, 9.0)
    assert _resume_kwargs(monkeypatch, run, "--step-timeout", "9")["build_timeout"] == "keep"
    both = runner.load_run_config(run, step_timeout=9, build_timeout=expected)
    assert (both.env.build_timeout, both.env.step_timeout) == (expected, 9.0)
    assert runner.load_run_config(run, build_timeout=3).env.step_timeout is None  # kept
    with pytest.raises(ConfigError, match=r"invalid value for 'build_timeout': 0 \(expected"):
        runner.load_run_config(run, build_timeout=0)
