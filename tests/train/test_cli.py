"""``gymcurric train | resume | demo``: exit codes, help, dry runs, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gymcurric import cli
from tests.train.run_harness import ROOT, run_config, write_packs


def _write(tmp_path, cfg):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg.to_dict()))
    return path


@pytest.mark.parametrize("command", ["train", "resume", "demo"])
def test_help_exits_zero(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert f"usage: gymcurric {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"lagrange_multiplier": 0.25}, "lambda 0.25"),
        ({"kappa": 20.0}, "kappa 20"),  # P3O: no λ, so none is shown (not "lambda 0")
        ({}, "no curriculum, no Lagrange multiplier"),
    ],
)
def test_the_summary_shows_lambda_or_kappa_only_where_there_is_one(extra, shown):
    import io

    from gymcurric.train.cli_train import print_summary

    result = {
        "run_dir": "r",
        "algo": "p3o",
        "env": "e",
        "total_steps": 256,
        "wall_seconds": 1.0,
        "steps_per_second": 256.0,
        "episodes_in_window": 0,
        "ep_return_mean": None,
        "ep_cost_mean": None,
        "success_rate": None,
        **extra,
    }
    out = io.StringIO()
    print_summary(result, file=out)
    lines = out.getvalue().splitlines()
    assert lines[3] == shown and ("lambda" in out.getvalue()) == ("lagrange_multiplier" in extra)


def test_dry_run_prints_the_merged_config(tmp_path, capsys, monkeypatch):
    write_packs(tmp_path)
    monkeypatch.chdir(tmp_path)  # "packs" below is relative
    path = _write(tmp_path, run_config())
    assert (
        cli.main(
            [
                "train",
                "--config",
                str(path),
                "--dry-run",
                "run.seed=7",
                "--datapack-dir",
                "packs",
                "curriculum.enabled=false",
            ]
        )
        == 0
    )
    merged = json.loads(capsys.readouterr().out)
    assert merged["run"]["seed"] == 7
    assert merged["datapacks"]["enabled"] is True and merged["datapacks"]["dir"] == "packs"


def test_bad_values_exit_2_and_name_key_and_value(tmp_path, capsys):
    path = _write(tmp_path, run_config())
    assert cli.main(["train", "--config", str(path), "env.num_envs=-1"]) == 2
    err = capsys.readouterr().err
    assert "env.num_envs" in err and "-1" in err and "run.json" in err
    assert cli.main(["train", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_train_then_resume_through_the_cli(tmp_path, capsys):
    path = _write(tmp_path, run_config(256))
    run_dir = tmp_path / "run"
    assert cli.main(["train", "--config", str(path), "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"run directory: {run_dir}" in out and "256 steps" in out
    assert cli.main(["train", "--config", str(path), "--run-dir", str(run_dir)]) == 2
    assert "resume" in capsys.readouterr().err  # the existing run is kept
    assert cli.main(["resume", str(run_dir), "--total-steps", "512"]) == 0
    assert "256 steps (to 512 in all)" in capsys.readouterr().out
    assert cli.main(["resume", str(tmp_path / "empty")]) == 2


def test_demo_list_and_unknown_name(capsys):
    assert cli.main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "hazardnav-ppolag" in out and "(default)" in out and "safety-pointgoal1" in out
    assert cli.main(["demo", "no-such-demo"]) == 2
    err = capsys.readouterr().err
    assert "no-such-demo" in err and err.count("gymcurric demo") == 1, err  # named once


def test_demo_runs_a_shipped_config_without_overwriting(tmp_path, capsys):
    args = ["demo", "hazardgrid-quick", "--steps", "256", "--out-dir", str(tmp_path)]
    args.append("--no-progress")
    # the first run as a user starts it; the second (the same code path, a taken name) in-process
    proc = subprocess.run(
        [sys.executable, "-m", "gymcurric", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert f"run directory: {tmp_path / 'hazardgrid-quick'}" in proc.stdout
    assert (tmp_path / "hazardgrid-quick" / "plots" / "return_cost.png").is_file()
    assert cli.main(args) == 0
    assert f"run directory: {tmp_path / 'hazardgrid-quick-2'}" in capsys.readouterr().out
    assert (tmp_path / "hazardgrid-quick-2" / "plots" / "return_cost.png").is_file()


def test_bench_list_and_unknown_names(capsys):
    from gymcurric.train.cli_bench import BENCHES

    assert cli.main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in BENCHES)
    assert cli.main(["bench", "no-such-bench"]) == 2
    err = capsys.readouterr().err
    assert "no-such-bench" in err and err.count("gymcurric bench") == 1, err  # named once


def test_bench_records_the_latest_run_and_leaves_benchmarks_md_alone(tmp_path, capsys):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "env_speed.py").write_text("print('ratio 1.23x')\n")
    (tmp_path / "BENCHMARKS.md").write_text("# Benchmarks\n\nkeep me\n")
    assert cli.main(["bench", "env_speed", "--root", str(tmp_path)]) == 0
    latest = tmp_path / "benchmarks" / "reference" / "env_speed" / "latest.md"
    assert "ratio 1.23x" in latest.read_text() and "commit" in latest.read_text()
    assert (tmp_path / "BENCHMARKS.md").read_text() == "# Benchmarks\n\nkeep me\n"
    (tmp_path / "benchmarks" / "env_speed.py").write_text("raise SystemExit(3)\n")
    assert cli.main(["bench", "env_speed", "--root", str(tmp_path)]) == 1
    assert "ratio 1.23x" in latest.read_text()  # kept on failure


DRY_RUN_MISTAKES = {
    "unknown agent kwarg": (["agent.kwargs.n_step=128"], "agent.kwargs.n_step"),
    "unregistered env": (["env.id=NoSuchEnv-v9", "curriculum.enabled=false"], "env.id"),
    "nan learning rate": (["agent.kwargs.learning_rate=.nan"], "agent.kwargs.learning_rate"),
    "infinite learning rate": (["agent.kwargs.learning_rate=.inf"], "agent.kwargs.learning_rate"),
    # math.isfinite raised OverflowError: int too large to convert to float
    "integer learning rate too large for a float": (
        ["agent.kwargs.learning_rate=1" + "0" * 400],
        "agent.kwargs.learning_rate",
    ),
    "nan anywhere": (["cost.nonfinite_value=.nan"], "cost.nonfinite_value"),
    "impossible date": (["env.kwargs.start=2020-02-30"], "env.kwargs.start"),
    # an argv byte that is not UTF-8: a raw UnicodeEncodeError when the run directory was made
    "lone surrogate": (["run.name=run-\udcff"], "run.name"),
    "unknown wrapper param": (
        ["saute.enabled=true", "saute.params.budget=3"],
        "saute.params.budget",
    ),
}


@pytest.mark.parametrize("mistake", list(DRY_RUN_MISTAKES))
def test_dry_run_builds_and_names_the_dotted_key(tmp_path, capsys, mistake):
    overrides, key = DRY_RUN_MISTAKES[mistake]
    path = _write(tmp_path, run_config())
    assert cli.main(["train", "--config", str(path), "--dry-run", *overrides]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err
    # and the real start fails the same way, leaving no run directory behind
    run = tmp_path / "r"
    assert cli.main(["train", "--config", str(path), "--run-dir", str(run), *overrides]) == 2
    assert key in capsys.readouterr().err
    assert not run.exists()


def test_a_run_dir_with_a_byte_that_is_not_utf8_is_refused_naming_it(tmp_path, capsys):
    # tensorboard's writer encodes its path as strict UTF-8: a raw UnicodeEncodeError once the
    # run had started, after --dry-run passed (run.name with one is refused since f5bd086)
    path = _write(tmp_path, run_config())
    run = tmp_path / "r\udce9"
    for extra in (["--dry-run"], []):
        assert cli.main(["train", "--config", str(path), "--run-dir", str(run), *extra]) == 2
        err = capsys.readouterr().err
        assert "'--run-dir'" in err and "\\udce9" in err and "Traceback" not in err
    assert not run.exists()


def test_a_bucketed_space_without_a_pool_names_the_key_to_set(tmp_path, capsys):
    data = run_config().to_dict()
    data["curriculum"]["config"] = {}
    data["curriculum"]["space"]["params"]["goal_distance"] = [{"min": 1, "max": 7}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    assert cli.main(["train", "--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "curriculum.config.pool.capacity" in err
    # the key named is the one that fixes it
    fixed = ["curriculum.config.pool.capacity=4"]
    assert cli.main(["train", "--config", str(path), "--dry-run", *fixed]) == 0


@pytest.mark.parametrize("flag", ["--config", "--curriculum-config"])
def test_an_empty_config_file_exits_2_naming_it(tmp_path, capsys, flag):
    # an empty file ran the defaults (the shipped datapack curriculum) without a word
    packs = write_packs(tmp_path)
    path = _write(tmp_path, run_config())
    empty = tmp_path / "empty.yaml"
    empty.write_text("# to do\n")
    args = ["train", "--config", str(path), "--dry-run", "--datapack-dir", str(packs)]
    assert cli.main([*args, "curriculum.enabled=false"]) == 0  # no file: the defaults
    capsys.readouterr()
    if flag == "--config":
        args[2] = str(empty)
    else:
        args += ["--curriculum-config", str(empty)]
    assert cli.main([*args, "curriculum.enabled=false"]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "the file is empty" in err and "Traceback" not in err


FULL = "/dev/full"  # every write fails with ENOSPC


@pytest.mark.slow  # two new interpreters and a short run: ~12 s on a loaded machine
@pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")
def test_a_stderr_that_cannot_be_written_leaves_out_the_bar_and_the_run_goes_on(tmp_path):
    # `gymcurric train ... 2>/dev/full`: the progress bar's write error (and the rounding
    # notice's) ended the run with exit 1 before it started; now it trains to the end
    cfg = run_config(100, curriculum={"enabled": False}, run={"progress_bar": True})
    path, run = _write(tmp_path, cfg), tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "gymcurric", "train", "--config", str(path)]
    with open(FULL, "w") as full:
        done = subprocess.run(
            [*argv, "--run-dir", str(run)],
            stdout=subprocess.PIPE, stderr=full, text=True, timeout=300, env=env, cwd=ROOT,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith(f"run directory: {run}\n"), done.stdout
    assert "128 steps" in done.stdout  # 100 rounded up to whole rollouts, said on stdout only
    assert (run / "summary.json").is_file() and (run / "checkpoint").is_dir()
    # an error line that cannot be written: still exit 2, not a traceback's exit 1
    with open(FULL, "w") as full:
        done = subprocess.run(
            [*argv, "--run-dir", str(run)],
            stdout=subprocess.PIPE, stderr=full, text=True, timeout=300, env=env, cwd=ROOT,
        )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""  # the run is there: resume it
    assert (run / "summary.json").is_file()  # and it is kept


def test_without_a_stderr_the_rounding_notice_is_left_out_not_printed_on_stdout(
    monkeypatch, capsys
):
    # started with 2>&- (sys.stderr None): print(file=None) wrote the notice on stdout, ahead
    # of the summary
    from gymcurric.train.cli_train import announce_rounding

    asked, rounded = run_config(100), run_config(128)
    monkeypatch.setattr(sys, "stderr", None)
    assert announce_rounding(asked, rounded) is rounded
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("stderr", [None, "full"], ids=["no stderr", "stderr full"])
def test_bench_without_a_stderr_to_take_its_notes_runs_the_others_and_keeps_stdout(
    tmp_path, monkeypatch, capsys, stderr
):
    # "NAME: benchmarks/X is missing; skipped" and a failed script's stderr: with 2>&-
    # print(file=None) wrote them on stdout among the results, and with 2>/dev/full the first
    # one's OSError ended the command (a traceback nowhere to go), the benchmarks after it not run
    import errno

    class FullStderr:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "BENCHMARKS.md").write_text("# Benchmarks\n")
    (tmp_path / "benchmarks" / "replay.py").write_text("print('ratio 1.23x')\n")
    monkeypatch.setattr(sys, "stderr", None if stderr is None else FullStderr())
    assert cli.main(["bench", "env_speed", "replay", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "missing" not in out and "ratio 1.23x" in out, out
    assert (tmp_path / "benchmarks" / "reference" / "replay" / "latest.md").is_file()
