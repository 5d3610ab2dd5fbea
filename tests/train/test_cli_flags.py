"""``gymcurric train`` / ``demo`` flags that stand for a config key: typed, never read as YAML.

A ``key=value`` override's value is YAML text; a flag's is not. These flags were once passed on
as ``f"run.out_dir={args.out_dir}"`` and read as YAML, so a folder named ``2024`` became an int,
``runs #2`` became ``runs`` (the rest a comment) and ``#runs`` was refused naming
``run.out_dir``; ``--seed 5 #x`` was 5 and ``--seed 017`` the octal 15.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gymcurric import cli
from gymcurric.train.config import load_config
from tests.train.run_harness import run_config, write_packs

pytestmark = pytest.mark.sb3

# folder names YAML reads as something else: an int, a comment, a mapping, null, a bool, ...
NAMES = ["2024", "runs #2", "#runs", "data: x", "null", "~", "true", "1e3", "[a]", "x=y", "'q'"]


def _base(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_config(256, curriculum={"enabled": False}).to_dict()))
    return path


def _dry_run(capsys, *argv: str) -> dict:
    assert cli.main(["train", *argv, "--dry-run"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", NAMES)
def test_a_datapack_dir_reaches_the_config_as_typed(tmp_path, capsys, monkeypatch, name):
    packs = write_packs(tmp_path)
    (tmp_path / name).mkdir()
    (tmp_path / name / "packs.jsonl").write_bytes((packs / "packs.jsonl").read_bytes())
    monkeypatch.chdir(tmp_path)  # the folder as a relative name, exactly as typed
    merged = _dry_run(capsys, "--config", str(_base(tmp_path)), "--datapack-dir", name)
    assert merged["datapacks"]["dir"] == name and merged["datapacks"]["enabled"] is True


def _fake_train(calls: list):
    def train(cfg, *, run_dir, progress, source):
        calls.append((cfg, run_dir))
        return {
            "run_dir": str(run_dir),
            "total_steps": cfg.run.total_steps,
            "algo": cfg.agent.algo,
            "env": cfg.env.id,
            "wall_seconds": 0.0,
            "steps_per_second": 0.0,
            "episodes_in_window": 0,
            "ep_return_mean": None,
            "ep_cost_mean": None,
            "success_rate": None,
        }

    return train


@pytest.mark.parametrize("name", NAMES)
def test_a_demo_out_dir_is_the_run_directorys_parent_as_typed(tmp_path, capsys, monkeypatch, name):
    # only the training itself is left out: the command line, the config and the run
    # directory are the demo's own
    calls: list = []
    monkeypatch.setattr("gymcurric.train.runner.train", _fake_train(calls))
    monkeypatch.chdir(tmp_path)
    argv = ["demo", "hazardgrid-quick", "--out-dir", name, "--steps", "300", "--no-progress"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    ((cfg, run_dir),) = calls
    assert cfg.run.out_dir == name and run_dir == Path(name) / "hazardgrid-quick"
    assert (cfg.run.total_steps, cfg.run.progress_bar) == (512, False)  # 300: whole rollouts
    assert f"run directory: {Path(name) / 'hazardgrid-quick'}" in capsys.readouterr().out


def test_a_demo_out_dir_with_a_byte_that_is_not_utf8_is_refused_naming_the_flag(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr("gymcurric.train.runner.train", _fake_train([]))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "hazardgrid-quick", "--out-dir", "caf\udce9"]) == 2
    err = capsys.readouterr().err
    assert "'--out-dir'" in err and "\\udce9" in err and "run.out_dir" not in err, err


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("--datapack-dir", "dir"),
        ("--enrichment-dir", "enrichment_dir"),
        ("--curriculum-config", "curriculum_config"),
        ("--sampling-strategy", "strategy"),
    ],
)
def test_every_text_flag_of_train_is_its_config_key_as_typed(flag, key):
    from gymcurric.train.cli_train import flag_settings

    empty = [""] if flag != "--datapack-dir" else []  # datapacks need a folder
    for text in [*NAMES, *empty, " spaced ", "!tag", "&anchor", "*.json"]:
        argv = ["train", "--datapack-dir", "packs", flag, text]
        args = cli.build_parser().parse_args(argv)
        cfg = load_config(None, args.overrides, flag_settings(args))
        assert getattr(cfg.datapacks, key) == text, (flag, text)


@pytest.mark.parametrize("flag", ["--seed", "--episodes"])
@pytest.mark.parametrize("text", ["1.5", "null", "~", "5 #x", "017", "0x10", "1e3", "abc", ""])
def test_a_number_flag_that_is_no_whole_number_is_refused_naming_the_flag(
    tmp_path, capsys, monkeypatch, flag, text
):
    # `--seed 5 #x` was seed 5, `--seed 017` seed 15 and `--episodes null` no limit, without a
    # word; `--seed 1.5` was refused naming run.seed
    write_packs(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--config", str(_base(tmp_path)), "--datapack-dir", "packs", flag, text]
    assert cli.main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"invalid value for '{flag}': {text!r}" in err and "command line" in err, err
    assert "whole number" in err or "leading 0" in err


@pytest.mark.parametrize(("text", "value"), [("42", 42), (" 7", 7), ("+5", 5), ("1_000", 1000)])
def test_a_whole_number_flag_is_read_as_before(tmp_path, capsys, monkeypatch, text, value):
    write_packs(tmp_path)
    monkeypatch.chdir(tmp_path)
    base = ["--config", str(_base(tmp_path)), "--datapack-dir", "packs"]
    merged = _dry_run(capsys, *base, "--seed", text, "--episodes", text)
    assert (merged["run"]["seed"], merged["datapacks"]["episodes"]) == (value, value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-1", "-1 (expected an int >= 0)"),
        # numpy's legacy seeding (SB3's set_random_seed) raised a raw ValueError traceback
        ("4294967296", "4294967296 (expected an int from 0 to 2**32 - 1 (4294967295)"),
        ("1" + "0" * 400, "'1" + "0" * 59 + "... (401 characters)' (expected an int from 0"),
    ],
)
def test_a_number_flag_out_of_range_is_refused_by_its_config_key(
    tmp_path, capsys, monkeypatch, text, expected
):
    write_packs(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--config", str(_base(tmp_path)), "--datapack-dir", "packs", "--seed", text]
    assert cli.main([*argv, "--dry-run"]) == 2
    assert f"invalid value for 'run.seed': {expected}" in capsys.readouterr().err


def test_a_flag_wins_over_an_override_of_its_key(tmp_path, capsys, monkeypatch):
    write_packs(tmp_path)
    monkeypatch.chdir(tmp_path)
    base = ["--config", str(_base(tmp_path)), "--datapack-dir", "packs"]
    merged = _dry_run(capsys, *base, "--seed", "3", "run.seed=9", "datapacks.dir=elsewhere")
    assert (merged["run"]["seed"], merged["datapacks"]["dir"]) == (3, "packs")


def test_an_override_with_a_comment_is_refused_where_a_flag_takes_the_text(tmp_path, capsys):
    # `run.name=runs #2` became 'runs'; a key=value override is still YAML, so it is refused
    argv = ["train", "--config", str(_base(tmp_path)), "run.name=runs #2", "--dry-run"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid value for 'run.name': 'runs #2'" in err and "as a comment" in err, err
    assert "quote it for a string" in err
