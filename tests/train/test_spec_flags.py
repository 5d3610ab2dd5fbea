"""``gymcurric train`` with the specification's §4.4 flags, on files in its formats."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from gymcurric import cli
from tests.datapacks.spec import SPEC_YAML, spec_record
from tests.train.run_harness import run_config, write_packs

pytestmark = pytest.mark.sb3


def _spec_files(tmp_path, n=24):
    """Stage 1 datapacks (no env_id, no enrichment), Stage 2.4 enrichments, the §4.4 config."""
    rng = np.random.default_rng(0)
    full = [spec_record(f"pack_{i:03d}", rng) for i in range(n)]
    for r in full[: n // 2]:  # enough for the warmup stage's filters
        r["tier"] = 0
        h = r["enrichment"]["supervision_hints"]
        h["curriculum_stage"] = "early"
        r["enrichment"]["fragility_tags"] = []
        r["enrichment"]["affordance_tags"] = [{"demonstrated": True}]
    stage1, stage2 = tmp_path / "stage1", tmp_path / "stage2"
    stage1.mkdir()
    stage2.mkdir()
    (stage1 / "datapacks.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "enrichment"}) + "\n" for r in full)
    )
    (stage2 / "enrichments.jsonl").write_text(
        "".join(json.dumps({"pack_id": r["pack_id"], **r["enrichment"]}) + "\n" for r in full)
    )
    config = tmp_path / "curriculum_dishwashing.yaml"
    config.write_text(SPEC_YAML)
    base = tmp_path / "run.json"
    base.write_text(json.dumps(run_config(256, curriculum={"enabled": False}).to_dict()))
    return stage1, stage2, config, base


def _flags(stage1, stage2, config):
    return [
        "--datapack-dir", str(stage1),
        "--enrichment-dir", str(stage2),
        "--curriculum-config", str(config),
        "--sampling-strategy", "frontier_prioritized",
        "--curriculum-auto-advance",
        "--episodes", "20000",
        "--seed", "42",
    ]  # fmt: skip


def test_the_spec_flags_are_aliases_of_config_keys(tmp_path, capsys):
    stage1, stage2, config, base = _spec_files(tmp_path)
    argv = ["train", "--config", str(base), "--dry-run", *_flags(stage1, stage2, config)]
    assert cli.main(argv) == 0  # builds the envs and the sampler too
    merged = json.loads(capsys.readouterr().out)
    assert merged["datapacks"] == {
        "enabled": True,
        "dir": str(stage1),
        "enrichment_dir": str(stage2),
        "curriculum_config": str(config),
        "strategy": "frontier_prioritized",
        "auto_advance": True,
        "episodes": 20000,
    }
    assert merged["run"]["seed"] == 42
    # a bare --curriculum-auto-advance before an override leaves the override one
    argv = ["train", "--config", str(base), "--dry-run", "--datapack-dir", str(stage1)]
    argv += ["--enrichment-dir", str(stage2), "--curriculum-auto-advance", "run.seed=3"]
    assert cli.main(argv) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["datapacks"]["auto_advance"] is True and merged["run"]["seed"] == 3
    for flag, expect in (
        ("--no-curriculum-auto-advance", []),
        ("--curriculum-auto-advance", ["false"]),
    ):
        argv = ["train", "--config", str(base), "--dry-run", "--datapack-dir", str(stage1)]
        argv += ["--enrichment-dir", str(stage2), flag, *expect]
        assert cli.main(argv) == 0
        assert json.loads(capsys.readouterr().out)["datapacks"]["auto_advance"] is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--enrichment-dir", "stage2"], "datapacks.enrichment_dir"),
        (["--episodes", "10"], "datapacks.episodes"),
        (["--datapack-dir", "stage1", "--episodes", "0"], "datapacks.episodes"),
        (["--datapack-dir", "stage1", "--curriculum-auto-advance", "maybe"], "true or false"),
    ],
)
def test_bad_spec_flags_exit_2_naming_the_key(tmp_path, capsys, monkeypatch, extra, message):
    _, _, _, base = _spec_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) if "maybe" in extra else contextlib.nullcontext():
        assert cli.main(["train", "--config", str(base), "--dry-run", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_stage1_datapack_without_enrichment_fails_the_run_naming_it(tmp_path, capsys):
    stage1, stage2, config, base = _spec_files(tmp_path)
    lines = (stage2 / "enrichments.jsonl").read_text().splitlines()
    (stage2 / "enrichments.jsonl").write_text("\n".join(lines[1:]) + "\n")
    argv = ["train", "--config", str(base), "--dry-run", *_flags(stage1, stage2, config)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "datapacks.jsonl, line 1" in err and "no enrichment" in err and "pack_000" in err


@pytest.mark.parametrize("vectorization", ["dummy", "subproc"])
def test_a_task_the_env_refuses_fails_before_training_naming_the_datapack(
    tmp_path, capsys, vectorization
):
    # under subproc the refusal came from a worker's autoreset mid-run: the worker died and
    # the run waited for it forever; now the tasks are checked before any env is stepped
    packs = write_packs(tmp_path, n=4)
    lines = (packs / "packs.jsonl").read_text().splitlines()
    typo = json.loads(lines[2])
    typo["task_params"]["sizee"] = typo["task_params"].pop("size")
    lines[2] = json.dumps(typo)
    (packs / "packs.jsonl").write_text("\n".join(lines) + "\n")
    _, _, _, base = _spec_files(tmp_path)
    argv = ["train", "--config", str(base), "--datapack-dir", str(packs)]
    argv += [f"env.vectorization={vectorization}", f"run.out_dir={tmp_path / 'runs'}"]
    for extra in (["--dry-run"], []):
        assert cli.main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert f"{packs / 'packs.jsonl'}: datapack 'p2': task_params refused by " in err, err
        assert "invalid value for 'task_params.sizee': 8 (unknown task key" in err, err


def test_train_on_spec_files_stops_after_the_episodes(tmp_path, capsys):
    stage1, stage2, config, base = _spec_files(tmp_path)
    flags = _flags(stage1, stage2, config)
    flags[flags.index("--episodes") + 1] = "12"
    run_dir = tmp_path / "run"
    argv = [
        "train",
        "--config",
        str(base),
        "--run-dir",
        str(run_dir),
        *flags,
        "run.total_steps=4096",
    ]
    assert cli.main(argv) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 12 <= summary["datapack_episodes"] < 20 and summary["total_steps"] < 4096
    assert summary["datapack_episodes_target"] == 12
    assert summary["datapack_episodes_target_reached"] is True
    log = run_dir / "datapacks" / "datapack_samples.jsonl"
    assert cli.main(["datapacks", "validate-log", str(log)]) == 0
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    assert {e["curriculum_stage"] for e in entries} == {"warmup"}
    assert all(s["tier"] <= 1 for e in entries for s in e["sampled_episodes"])
    # --sampling-strategy is the default; the config's warmup stage names its own (§2.5)
    assert {e["strategy"] for e in entries} == {"balanced"}
    assert {json.dumps(e["strategy_params"]["tier_ratios"]) for e in entries} == {
        json.dumps({"0": 0.5, "1": 0.5, "2": 0.0})
    }


def test_an_episodes_target_cut_short_by_total_steps_is_said(tmp_path, capsys):
    from gymcurric.errors import GymcurricWarning

    stage1, stage2, config, base = _spec_files(tmp_path)
    flags = _flags(stage1, stage2, config)  # --episodes 20000: far more than 256 steps hold
    run_dir = tmp_path / "run"
    argv = ["train", "--config", str(base), "--run-dir", str(run_dir), *flags]
    with pytest.warns(GymcurricWarning, match=r"20000 datapack episodes.*run\.total_steps"):
        assert cli.main([*argv, "run.total_steps=256"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["datapack_episodes_target"] == 20000
    assert summary["datapack_episodes_target_reached"] is False
    assert summary["datapack_episodes"] < 20000 and summary["total_steps"] == 256
