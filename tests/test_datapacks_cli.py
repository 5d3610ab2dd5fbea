"""``gymcurric datapacks validate | sample`` and the train options' sampler builder."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gymcurric import cli
from gymcurric.datapacks import DataPackRLSampler
from gymcurric.datapacks.cli import add_train_arguments, build_sampler, sampler_from_args
from gymcurric.errors import ConfigError, DataError
from tests.datapacks.packs import minimal, record

ROOT = Path(__file__).resolve().parents[1]


def write_packs(folder: Path, n: int = 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            record(
                f"p{i}",
                tier=i % 3,
                supervision_hints={"safety_critical": i % 4 == 0},
                enrichment={"novelty": (i % 5) / 5},
            )
        )
        for i in range(n)
    ]
    (folder / "packs.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_validate_valid_dir_exits_0(tmp_path, capsys):
    d = write_packs(tmp_path / "ok")
    assert cli.main(["datapacks", "validate", str(d)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "valid: 30 valid datapacks, 0 errors" in err


def test_validate_lists_every_error_with_file_line_field(tmp_path, capsys):
    d = write_packs(tmp_path / "bad", n=3)
    with (d / "packs.jsonl").open("a") as f:
        f.write(json.dumps(minimal("t", 5)) + "\n")  # line 4: tier out of range
        f.write("{not json\n")  # line 5
        f.write(json.dumps({"pack_id": "m", "env_id": "x", "tier": 1}) + "\n")  # no task_type
        f.write(json.dumps(minimal("p0", 1)) + "\n")  # line 7: duplicate
        f.write(json.dumps(minimal("w", 1, trust_score="high")) + "\n")  # line 8: wrong type
    (d / "list.json").write_text(json.dumps([minimal("ok", 0), minimal("r", 1, seed=1.5)]))
    assert cli.main(["datapacks", "validate", str(d)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 6, out
    expect = [
        r"list\.json, record 1: field 'seed': expected an integer; got 1\.5",
        r"packs\.jsonl, line 4: field 'tier': expected one of \[0, 1, 2\]; got 5",
        r"packs\.jsonl, line 5: invalid JSON",
        r"packs\.jsonl, line 6: field 'task_type': required field is missing",
        r"packs\.jsonl, line 7: field 'pack_id': duplicate of the record at .*"
        r"packs\.jsonl, line 1; got 'p0'",
        r"packs\.jsonl, line 8: field 'trust_score': expected a finite number; got 'high'",
    ]
    for line, pattern in zip(lines, expect, strict=True):
        assert re.search(pattern, line), (pattern, line)
    assert "invalid: 4 valid datapacks, 6 errors" in err


def test_validate_checks_episodes_and_config(tmp_path, capsys):
    d = write_packs(tmp_path / "ep", n=2)
    (d / "more.json").write_text(json.dumps(minimal("e", 0, episode="missing.npz")))
    assert cli.main(["datapacks", "validate", str(d)]) == 0
    assert cli.main(["datapacks", "validate", str(d), "--check-episodes"]) == 1
    assert "missing.npz" in capsys.readouterr().out
    cfg = tmp_path / "cur.json"
    cfg.write_text(json.dumps({"window": 1}))
    assert cli.main(["datapacks", "validate", str(d), "--config", str(cfg)]) == 1
    assert "window" in capsys.readouterr().out


def test_validate_missing_dir_exits_1(tmp_path, capsys):
    assert cli.main(["datapacks", "validate", str(tmp_path / "nope")]) == 1
    assert "no such file or directory" in capsys.readouterr().out


def test_sample_prints_the_log_entry(tmp_path, capsys):
    d = write_packs(tmp_path / "s")
    args = ["datapacks", "sample", str(d), "--batch-size", "10", "--seed", "3"]
    assert cli.main([*args, "--strategy", "frontier_prioritized"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["strategy"] == "frontier_prioritized" and entry["batch_size"] == 10
    assert (
        entry["seed"] == 3
        and entry["curriculum_stage"] == "warmup"
        and len(entry["sampled_episodes"]) == 10
    )
    # the same as the library call with the same inputs
    ref = build_sampler(d, sampling_strategy="frontier_prioritized", seed=3)
    ref.sample_batch(10)
    assert [s["pack_id"] for s in entry["sampled_episodes"]] == [
        s["pack_id"] for s in ref.logs[-1]["sampled_episodes"]
    ]
    assert cli.main(args) == 0  # the stage's own strategy
    assert json.loads(capsys.readouterr().out)["strategy"] == "balanced"


def test_sample_with_yaml_config_stage_and_run_dir(tmp_path, capsys):
    pytest.importorskip("yaml")
    d = write_packs(tmp_path / "s")
    cfg = tmp_path / "cur.yaml"
    cfg.write_text(
        "window: 5\n"
        "stages:\n"
        "  - {name: easy, strategy: balanced,\n"
        "     strategy_params: {tier_ratios: {0: 1.0}}, filters: {max_tier: 0}}\n"
        "  - name: hard\n"
        "    strategy: tag_aware\n"
        "    strategy_params: {tag_quotas: {safety_critical: 0.5, baseline: 0.5}}\n"
    )
    run = tmp_path / "run"
    base = ["datapacks", "sample", str(d), "--config", str(cfg), "--batch-size", "4"]
    assert cli.main([*base, "--run-dir", str(run)]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["curriculum_stage"] == "easy" and {
        s["tier"] for s in entry["sampled_episodes"]
    } == {0}
    logged = (run / "datapack_samples.jsonl").read_text().splitlines()
    assert json.loads(logged[0]) == entry
    assert cli.main([*base, "--stage", "hard"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["curriculum_stage"] == "hard" and entry["strategy"] == "tag_aware"


def test_sample_strategy_with_a_spec_format_config_is_the_stages_default(tmp_path, capsys):
    pytest.importorskip("yaml")
    d = write_packs(tmp_path / "s")
    cfg = tmp_path / "cur.yaml"
    cfg.write_text(
        "stages:\n"
        "  warmup: {strategy: balanced, strategy_params: {tier_ratios: {0: 1.0}}}\n"
        "  frontier: {weight_multipliers: {tier_2: 2.0}}\n"
    )
    base = ["datapacks", "sample", str(d), "--config", str(cfg), "--strategy"]
    assert cli.main([*base, "frontier_prioritized", "--batch-size", "4"]) == 0
    entry = json.loads(capsys.readouterr().out)  # the stage's own strategy wins
    assert entry["strategy"] == "balanced" and {s["tier"] for s in entry["sampled_episodes"]} == {0}
    assert cli.main([*base, "frontier_prioritized", "--stage", "frontier"]) == 0
    entry = json.loads(capsys.readouterr().out)  # a stage that names none takes it
    assert entry["strategy"] == "frontier_prioritized"
    assert entry["strategy_params"]["tier_weights"] == {"0": 0.2, "1": 0.5, "2": 1.0}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategy", "greedy"], "greedy"),
        (["--stage", "nope"], "nope"),
        (["--batch-size", "0"], "batch_size"),
        (["--seed", "-1"], "'seed': -1"),
        (["--run-dir", "{blocker}"], "'run_dir': '{blocker}' (cannot write the sampling log"),
        (["--config", "{latin1}"], "cannot read"),
    ],
)
def test_sample_usage_errors_exit_2(tmp_path, capsys, extra, message):
    d = write_packs(tmp_path / "s")
    blocker = tmp_path / "a_file"  # a run dir that is a file
    blocker.write_text("kept")
    latin1 = tmp_path / "cur.json"  # a config that is not UTF-8
    latin1.write_bytes(b'{"window": "\xe9"}')
    paths = {"blocker": blocker, "latin1": latin1}
    extra = [a.format(**paths) for a in extra]
    assert cli.main(["datapacks", "sample", str(d), *extra]) == 2  # not a traceback
    assert message.format(**paths) in capsys.readouterr().err
    assert blocker.read_text() == "kept"


def test_sample_invalid_dir_exits_2_naming_the_line(tmp_path, capsys):
    d = tmp_path / "b"
    d.mkdir()
    (d / "a.jsonl").write_text(json.dumps(minimal("a", 0)) + "\n" + json.dumps(minimal("b", 9)))
    assert cli.main(["datapacks", "sample", str(d)]) == 2
    assert "a.jsonl, line 2: field 'tier'" in capsys.readouterr().err


def test_train_options_build_the_sampler(tmp_path):
    d = write_packs(tmp_path / "t")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"window": 7, "auto_advance": True}))
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    args = parser.parse_args(
        [
            "--datapack-dir", str(d), "--curriculum-config", str(cfg),
            "--sampling-strategy", "tag_aware", "--no-curriculum-auto-advance",
        ]
    )  # fmt: skip
    sampler = sampler_from_args(args, seed=5)
    assert isinstance(sampler, DataPackRLSampler) and len(sampler.table) == 30
    assert sampler.seed == 5 and sampler.strategy is not None
    assert sampler.strategy.name == "tag_aware"
    assert sampler.curriculum is not None
    assert sampler.curriculum.config.window == 7
    assert sampler.curriculum.config.auto_advance is False
    assert sampler_from_args(parser.parse_args([])) is None
    with pytest.raises(ConfigError, match="needs --datapack-dir"):
        sampler_from_args(parser.parse_args(["--sampling-strategy", "balanced"]))
    with pytest.raises(ConfigError, match="sampling_strategy"):
        build_sampler(d, sampling_strategy="nope")
    with pytest.raises(DataError, match="no such file"):
        build_sampler(tmp_path / "absent")


def test_python_dash_m_datapacks(tmp_path):
    d = write_packs(tmp_path / "m")
    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", "datapacks", "sample", str(d), "--batch-size", "5"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["sampled_episodes"]) == 5
    (d / "x.jsonl").write_text('{"pack_id": "z"}\n')
    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", "datapacks", "validate", str(d)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 1
    assert "x.jsonl, line 1: field 'task_type': required field is missing" in out.stdout
