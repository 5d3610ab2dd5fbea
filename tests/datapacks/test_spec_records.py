"""Datapacks in the specification's record form: the same columns, its urgency and tag formulas."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from gymcurric.datapacks import (
    DataPack,
    DatapackTable,
    FrontierPrioritizedStrategy,
    SupervisionHints,
    TagAwareStrategy,
    load_datapacks,
)
from gymcurric.errors import ConfigError, DataError

from .packs import record
from .spec import (
    SPEC_HINTS,
    SPEC_TAG_QUOTAS,
    compute_urgency,
    filter_by_tag,
    spec_record,
)

SPEC_TAG_KEYS = ["safety_critical", "fragile_objects", "high_energy_cost", "novel_affordance"]
SPEC_TAG_KEYS.append("intervention")


def _spec_records(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return [spec_record(f"pack_{i:03d}", rng) for i in range(n)]


def test_urgency_and_tag_matching_follow_the_document_on_its_tag_lists():
    recs = _spec_records()
    table = DatapackTable([DataPack.from_dict(r) for r in recs])
    spec_weights = FrontierPrioritizedStrategy(tier_weights={0: 0.2, 1: 0.5, 2: 1.0})
    assert spec_weights.urgency(table) == pytest.approx([compute_urgency(r) for r in recs])
    for key in SPEC_TAG_KEYS:
        expected = {r["pack_id"] for r in filter_by_tag(recs, key)}
        got = {table.records[i].pack_id for i in np.flatnonzero(table.has_tag(key))}
        assert got == expected, key
        assert 0 < len(expected) < len(recs), key  # the check can fail both ways


def test_both_forms_read_into_the_same_columns():
    flat = DataPack.from_dict(record("a"))  # gymcurric's flattened enrichment
    spec = DataPack.from_dict(
        record(
            "a",
            mpl_gain=0.0,
            supervision_hints=None,
            enrichment={
                "novelty_tags": [
                    {"novelty_score": 0.7, "expected_mpl_gain": 1.5},
                    {"novelty_score": 0.2, "expected_mpl_gain": 2.5},
                ],
                "fragility_tags": [{"fragility_level": "low"}, {"fragility_level": "high"}],
                "efficiency_tags": [
                    {"metric": "time", "score": 0.8},
                    {"metric": "energy", "score": 0.3},
                ],
                "affordance_tags": [{"name": "grasp", "demonstrated": False}],
                "intervention_tags": [{}, {}],
                "supervision_hints": {
                    "safety_critical": True,
                    "curriculum_stage": "frontier",
                    "prerequisite_tags": ["reach"],
                },
                "risk": 0.4,
            },
        )
    )
    a, b = DatapackTable([flat]), DatapackTable([spec])
    for col in ("tier", "trust", "sampling_weight", "novelty", "mpl_gain", "risk"):
        assert getattr(a, col).tolist() == getattr(b, col).tolist(), col
    for col in ("safety_critical", "tags", "kinds"):
        assert getattr(a, col).tolist() == getattr(b, col).tolist(), col
    assert spec.supervision_hints == flat.supervision_hints
    assert a.codes("fragility")[1] == b.codes("fragility")[1] == ("high",)
    assert a.prerequisites()[1] == b.prerequisites()[1] == ("reach",)


def test_a_record_is_kept_whole_and_written_back_in_its_own_form(tmp_path):
    rec = spec_record("pack_7", np.random.default_rng(3))
    rec["enrichment"]["supervision_hints"] = dict(SPEC_HINTS, safety_critical=False)
    before = copy.deepcopy(rec)
    (tmp_path / "p.jsonl").write_text(json.dumps(rec) + "\n")
    pack = load_datapacks(tmp_path)[0]
    assert rec == before  # reading changes nothing
    out = pack.to_dict()
    assert out["enrichment"] == rec["enrichment"]  # tag lists, extras, hints where they were
    assert "supervision_hints" not in out and "env_id" not in out
    assert (out["engine_type"], out["mpl_value"]) == ("mujoco", 12.5)
    assert DataPack.from_dict(out) == pack
    with pytest.raises(TypeError):
        pack.enrichment.novelty_tags[0]["novelty_score"] = 1.0  # read-only


def test_mixed_forms_count_the_flat_field_as_one_more_tag():
    rec = record(
        "m",
        mpl_gain=4.0,
        enrichment={"novelty": 0.5, "novelty_tags": [{"novelty_score": 0.9,
                                                      "expected_mpl_gain": 3.0}]},
    )  # fmt: skip
    pack = DataPack.from_dict(rec)
    assert (pack.enrichment.novelty_score, pack.expected_mpl_gain) == (0.9, 7.0)


NOV, FRAG, EFF = "enrichment.novelty_tags[0]", "enrichment.fragility_tags[0]", "enrichment."


@pytest.mark.parametrize(
    ("enrichment", "field", "value"),
    [
        ({"novelty_tags": [{"novelty_score": 1.5}]}, f"{NOV}.novelty_score", "1.5"),
        ({"novelty_tags": [{"expected_mpl_gain": 2}]}, f"{NOV}.novelty_score", "None"),
        ({"novelty_tags": [{"novelty_score": None}]}, f"{NOV}.novelty_score", "None"),
        ({"novelty_tags": [{"novelty_score": 0.1, "expected_mpl_gain": "lots"}]},
         f"{NOV}.expected_mpl_gain", "'lots'"),
        ({"fragility_tags": [{"fragility_level": "extreme"}]},
         f"{FRAG}.fragility_level", "'extreme'"),
        ({"fragility_tags": [{}]}, f"{FRAG}.fragility_level", "None"),
        ({"efficiency_tags": [{"metric": "energy"}]}, f"{EFF}efficiency_tags[0].score", "None"),
        ({"efficiency_tags": [{"metric": "energy", "score": None}]},
         f"{EFF}efficiency_tags[0].score", "None"),
        ({"efficiency_tags": [{"metric": 3, "score": 0.2}]},
         f"{EFF}efficiency_tags[0].metric", "3"),
        ({"affordance_tags": [{"demonstrated": "no"}]},
         f"{EFF}affordance_tags[0].demonstrated", "'no'"),
        ({"intervention_tags": {"kind": "x"}}, f"{EFF}intervention_tags", "{'kind': 'x'}"),
        ({"risk_tags": ["collision"]}, f"{EFF}risk_tags[0]", "'collision'"),
        ({"supervision_hints": {"prerequisite_tags": "basic_drawer_open"}},
         f"{EFF}supervision_hints.prerequisite_tags", "'basic_drawer_open'"),
    ],
)  # fmt: skip
def test_malformed_tag_lists_name_file_line_field_and_value(tmp_path, enrichment, field, value):
    rec = {"pack_id": "p", "task_type": "t", "tier": 1, "enrichment": enrichment}
    path = tmp_path / "packs.jsonl"
    path.write_text(json.dumps({"pack_id": "ok", "task_type": "t", "tier": 0}) + "\n")
    path.write_text(path.read_text() + json.dumps(rec) + "\n")
    with pytest.raises(DataError) as info:
        load_datapacks(tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"{path}, line 2: field {field!r}: "), msg
    assert msg.endswith(f"got {value}"), msg


def test_hints_given_twice_and_different_are_refused():
    rec = record("a", enrichment={"supervision_hints": {"safety_critical": False}})
    with pytest.raises(DataError, match="line 4: field 'supervision_hints': differs from enrich"):
        DataPack.from_dict(rec, source="f.jsonl", line=4)
    same = record("a", enrichment={"supervision_hints": record()["supervision_hints"]})
    assert DataPack.from_dict(same).supervision_hints.safety_critical
    # top-level hints with only unknown keys would be dropped beside the enrichment's
    extra = record(
        "a",
        supervision_hints={"curator": "bob"},
        enrichment={"supervision_hints": {"safety_critical": True}},
    )
    with pytest.raises(DataError, match=r"field 'supervision_hints': differs .*'curator'"):
        DataPack.from_dict(extra)
    with pytest.raises(DataError, match="field 'supervision_hints': differs"):
        DataPack(
            "a",
            "t",
            None,
            1,
            enrichment=DataPack.from_dict(same).enrichment,
            supervision_hints=SupervisionHints(extra={"curator": "bob"}),
        )
    defaults = record(
        "a", supervision_hints={"safety_critical": False}, enrichment=same["enrichment"]
    )
    assert DataPack.from_dict(defaults).supervision_hints.safety_critical  # gymcurric's defaults


def test_spec_tag_quotas_fill_a_batch_of_spec_records():
    table = DatapackTable([DataPack.from_dict(r) for r in _spec_records(400, seed=1)])
    strategy = TagAwareStrategy(tag_quotas=SPEC_TAG_QUOTAS, shuffle=False)
    rows = strategy.sample(table, 100, np.random.default_rng(0))
    assert len(set(rows.tolist())) == 100
    # allow_overlap false: each row counts for the first listed family it has
    taken = np.zeros(len(table), bool)
    for family, quota in SPEC_TAG_QUOTAS.items():
        member = table.has_tag(family) & ~taken
        taken |= member
        assert member[rows].sum() == pytest.approx(100 * quota, abs=1), family
    bad = dict(SPEC_TAG_QUOTAS, fragile_objects=0.25)
    with pytest.raises(ConfigError, match=r"tag_quotas.*must sum to 1"):
        TagAwareStrategy(tag_quotas=bad)
    with pytest.raises(ConfigError, match=r"tag_quotas\['fragile'\].*expected a selector among"):
        TagAwareStrategy(tag_quotas={"fragile": 1.0})
