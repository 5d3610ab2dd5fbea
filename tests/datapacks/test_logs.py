"""Sampling-log entries under the specification's names, its JSON Schema, its §6.3 test 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from gymcurric import cli
from gymcurric.datapacks import (
    LOG_FILENAME,
    DataPack,
    DataPackCurriculum,
    DataPackRLSampler,
)
from gymcurric.datapacks.logschema import (
    log_entry_errors,
    sampling_log_schema,
    validate_sampling_log,
)
from gymcurric.errors import ConfigError

from .packs import minimal, record
from .spec import SPEC_YAML, spec_record

SPEC_FIELDS = [  # §7.2
    "sample_id",
    "timestamp",
    "episode_count",
    "curriculum_stage",
    "strategy",
    "batch_size",
    "seed",
    "sampled_episodes",
    "diagnostics",
]


def _datapacks(n=60):
    rng = np.random.default_rng(0)
    packs = [DataPack.from_dict(spec_record(f"pack_{i:03d}", rng)) for i in range(n)]
    packs += [DataPack.from_dict(record(f"r{i}", tier=i % 3)) for i in range(10)]
    return packs + [DataPack.from_dict(minimal(f"m{i}", i % 3)) for i in range(10)]


def _run(tmp_path, curriculum, strategy=None, batches=6):
    sampler = DataPackRLSampler(_datapacks(), curriculum, strategy, seed=42)
    for i in range(batches):
        sampler.sample_batch(16)
        if curriculum is not None:
            curriculum.update_diagnostics(success=True, error=i % 3 == 0)
    return sampler, sampler.write_logs(tmp_path)


@pytest.mark.parametrize("strategy", [None, "balanced", "frontier_prioritized", "tag_aware"])
def test_log_entries_carry_the_spec_fields_and_validate(tmp_path, strategy):
    cur = DataPackCurriculum(yaml.safe_load(SPEC_YAML))
    sampler, path = _run(tmp_path, cur if strategy != "tag_aware" else None, strategy)
    assert path.name == LOG_FILENAME
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(entries) == 6
    for e in entries:
        assert set(SPEC_FIELDS) <= set(e) and "strategy_params" in e
        assert set(e["sampled_episodes"][0]) == {"pack_id", "tier", "urgency_score", "weight"}
        d = e["diagnostics"]
        assert {"tier_distribution", "tag_coverage", "avg_urgency", "avg_novelty"} <= set(d)
        assert {"safety_critical_count", "fragile_object_count", "tag_family_counts"} <= set(d)
        assert all(0 <= v <= 1 for v in d["tag_coverage"].values())
        assert sum(d["tier_distribution"].values()) == e["batch_size"] == 16
    assert validate_sampling_log(path) == []
    if strategy is None:
        assert [e["episode_count"] for e in entries] == list(range(6))
        assert {e["curriculum_stage"] for e in entries} == {"warmup"}


def test_the_schema_catches_what_is_wrong(tmp_path):
    _, path = _run(tmp_path, None, "balanced", batches=1)
    good = json.loads(path.read_text())
    assert log_entry_errors(good) == []
    bad = json.loads(path.read_text())
    bad["sampled_episodes"][2]["urgency_score"] = 1.5
    bad["timestamp"] = 1795375785.08  # gymcurric's old epoch float
    del bad["curriculum_stage"]
    bad["diagnostics"]["tag_coverage"]["risk"] = 3
    bad["sampled_episodes"][0]["tier"] = 5
    assert sorted(log_entry_errors(bad)) == sorted(
        [
            "$: required field 'curriculum_stage' is missing",
            "$.timestamp: expected string; got 1795375785.08",
            "$.sampled_episodes[0].tier: expected one of [0, 1, 2]; got 5",
            "$.sampled_episodes[2].urgency_score: expected a number <= 1; got 1.5",
            "$.diagnostics.tag_coverage.risk: expected a number <= 1; got 3",
        ]
    )
    log = tmp_path / "bad.jsonl"
    log.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n{oops\n")
    errors = validate_sampling_log(log)
    assert len(errors) == 6 and all(e.startswith(f"{log}, line ") for e in errors)
    assert errors[-1].startswith(f"{log}, line 3: invalid JSON")
    assert cli.main(["datapacks", "validate-log", str(log)]) == 1
    assert cli.main(["datapacks", "validate-log", str(path)]) == 0


@pytest.mark.parametrize(("text", "what"), [("", "is empty"), (" \n\n\t\n", "only whitespace")])
def test_a_log_without_records_is_an_error_naming_the_file(tmp_path, capsys, text, what):
    # it used to read "valid: 0 errors": a run that drew no batch (or wrote its log elsewhere)
    # leaves such a file, and the validator is where that should show
    log = tmp_path / LOG_FILENAME
    log.write_text(text)
    [error] = validate_sampling_log(log)
    assert error.startswith(f"{log}: no records: the file ") and what in error
    assert cli.main(["datapacks", "validate-log", str(log)]) == 1
    out, err = capsys.readouterr()
    assert out == error + "\n" and err == f"{log}: invalid: 1 error\n"


def test_the_shipped_schema_with_jsonschema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = sampling_log_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    _, path = _run(tmp_path, DataPackCurriculum(yaml.safe_load(SPEC_YAML)))
    validator = jsonschema.Draft202012Validator(schema)
    for line in path.read_text().splitlines():
        assert list(validator.iter_errors(json.loads(line))) == []
    bad = json.loads(path.read_text().splitlines()[0])
    bad["sampled_episodes"][0]["urgency_score"] = -0.1
    assert len(list(validator.iter_errors(bad))) == 1


def test_spec_determinism_test_1_runs_as_written():
    datapacks = _datapacks()
    curriculum = DataPackCurriculum(yaml.safe_load(SPEC_YAML), datapacks)

    # §6.3, Test 1, verbatim
    def test_determinism():
        sampler1 = DataPackRLSampler(datapacks, curriculum, seed=42)
        batch1 = sampler1.sample_batch(64)

        sampler2 = DataPackRLSampler(datapacks, curriculum, seed=42)
        batch2 = sampler2.sample_batch(64)

        assert batch1 == batch2  # Exact match

    test_determinism()
    other = DataPackRLSampler(datapacks, curriculum, seed=43).sample_batch(64)
    assert other != DataPackRLSampler(datapacks, curriculum, seed=42).sample_batch(64)


def test_logs_are_deterministic_timestamps_aside(tmp_path):
    runs = []
    for k in range(2):
        _, path = _run(tmp_path / str(k), DataPackCurriculum(yaml.safe_load(SPEC_YAML)))
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        runs.append([{k: v for k, v in e.items() if k != "timestamp"} for e in lines])
    assert runs[0] == runs[1]


def test_strategy_params_by_name_and_their_errors():
    packs = _datapacks()
    s = DataPackRLSampler(packs, None, "frontier_prioritized", {"urgency_threshold": 0.5})
    assert s.strategy.urgency_threshold == 0.5
    with pytest.raises(ConfigError, match=r"DataPackRLSampler.*'urgency'"):
        DataPackRLSampler(packs, None, "frontier_prioritized", {"urgency": 0.5})
    with pytest.raises(ConfigError, match="needs a strategy given by name"):
        DataPackRLSampler(packs, None, None, {"urgency_threshold": 0.5})
