import json
from dataclasses import FrozenInstanceError

import pytest

from gymcurric.datapacks import DataPack, DatapackTable
from gymcurric.errors import DataError

from .packs import minimal, record


def test_full_record_fields():
    p = DataPack.from_dict(record(), source="f.json")
    assert (p.pack_id, p.task_type, p.env_id, p.tier, p.seed) == (
        "p0",
        "pick_place",
        "gymcurric/HazardNav-v0",
        1,
        7,
    )
    assert (p.trust_score, p.sampling_weight, p.mpl_gain) == (0.9, 2.0, 4.0)
    assert p.objective_vector == (1.0, 0.25)
    assert p.task_params["goals"] == (1, 2)
    e = p.enrichment
    assert (e.fragility, e.risk, e.novelty, e.interventions) == ("high", 0.4, 0.7, 2)
    assert (e.efficiency_time, e.efficiency_energy) == (0.8, 0.3)
    assert e.affordances[0].name == "grasp" and not e.affordances[0].demonstrated
    h = p.supervision_hints
    assert h.safety_critical and h.curriculum_stage == "frontier"
    assert h.prerequisite_tags == ("reach",)
    assert p.timestamp == "2026-11-01T12:00:00Z" and p.source == "f.json"


def test_defaults_of_a_minimal_record():
    p = DataPack.from_dict(minimal("a", 0))
    assert (p.trust_score, p.sampling_weight, p.mpl_gain, p.seed) == (1.0, 1.0, 0.0, None)
    assert p.objective_vector == () and dict(p.task_params) == {}
    assert p.enrichment.fragility == "none" and p.enrichment.efficiency_energy is None
    assert not p.supervision_hints.safety_critical and p.episode is None


def test_round_trip_keeps_unknown_fields_at_every_level():
    d = record(
        colour="red",
        economics={"cost_usd": 3.5},
        enrichment={
            **record()["enrichment"],
            "lighting": "dim",
            "efficiency": {"time": 0.5, "water": 0.1},
            "affordances": [{"name": "push", "demonstrated": True, "force": 3}],
        },
        supervision_hints={"safety_critical": False, "reviewer": "ann"},
    )
    p = DataPack.from_dict(d)
    assert p.extra["colour"] == "red" and p.extra["economics"]["cost_usd"] == 3.5
    out = p.to_dict()
    assert out["colour"] == "red" and out["economics"] == {"cost_usd": 3.5}
    assert out["enrichment"]["lighting"] == "dim"
    assert out["enrichment"]["efficiency"] == {"time": 0.5, "water": 0.1}
    assert out["enrichment"]["affordances"] == [{"name": "push", "demonstrated": True, "force": 3}]
    assert out["supervision_hints"]["reviewer"] == "ann"
    again = DataPack.from_dict(json.loads(json.dumps(out)))
    assert again == p and again.to_dict() == out


def test_records_are_immutable():
    p = DataPack.from_dict(record(extra_field={"a": [1]}))
    with pytest.raises(FrozenInstanceError):
        p.tier = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.task_params["hazard_radius"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        p.extra["extra_field"]["a"] = 2  # type: ignore[index]
    # to_dict hands out a copy: changing it leaves the record alone
    d = p.to_dict()
    d["task_params"]["hazard_radius"] = 9.0
    d["objective_vector"][0] = -1.0
    assert p.task_params["hazard_radius"] == 0.3 and p.objective_vector == (1.0, 0.25)


@pytest.mark.parametrize(
    "change,field,value",
    [
        ({"tier": 3}, "tier", "3"),
        ({"tier": "1"}, "tier", "'1'"),
        ({"tier": True}, "tier", "True"),
        ({"trust_score": 1.5}, "trust_score", "1.5"),
        ({"trust_score": -0.1}, "trust_score", "-0.1"),
        ({"sampling_weight": -1}, "sampling_weight", "-1"),
        ({"pack_id": 5}, "pack_id", "5"),
        ({"pack_id": ""}, "pack_id", "''"),
        ({"task_params": [1]}, "task_params", "[1]"),
        ({"objective_vector": [1, "x"]}, "objective_vector", "[1, 'x']"),
        ({"seed": 1.5}, "seed", "1.5"),
        ({"seed": -1}, "seed", "-1"),  # a reset seed; Gymnasium refuses a negative one
        ({"timestamp": [2026]}, "timestamp", "[2026]"),
        ({"enrichment": {"fragility": "brittle"}}, "enrichment.fragility", "'brittle'"),
        ({"enrichment": {"novelty": 2}}, "enrichment.novelty", "2"),
        (
            {"enrichment": {"efficiency": {"energy": "low"}}},
            "enrichment.efficiency.energy",
            "'low'",
        ),
        ({"enrichment": {"interventions": -1}}, "enrichment.interventions", "-1"),
        (
            {"enrichment": {"affordances": [{"demonstrated": True}]}},
            "enrichment.affordances[0].name",
            "None",
        ),
        (
            {"supervision_hints": {"safety_critical": "yes"}},
            "supervision_hints.safety_critical",
            "'yes'",
        ),
        (
            {"supervision_hints": {"prerequisite_tags": "reach"}},
            "supervision_hints.prerequisite_tags",
            "'reach'",
        ),
    ],
)
def test_invalid_field_names_file_line_field_and_value(change, field, value):
    with pytest.raises(DataError) as info:
        DataPack.from_dict(record(**change), source="packs.jsonl", line=12)
    msg = str(info.value)
    assert msg.startswith("packs.jsonl, line 12: ")
    assert f"field {field!r}" in msg
    assert msg.endswith(f"got {value}")


@pytest.mark.parametrize("missing", ["pack_id", "task_type", "tier"])
def test_missing_required_field(missing):
    d = minimal("a", 1)
    del d[missing]
    with pytest.raises(DataError, match=f"f.json: field '{missing}': required field is missing"):
        DataPack.from_dict(d, source="f.json")


def test_env_id_may_be_omitted_and_stays_omitted():
    # the specification's records name no env: such a datapack runs where it is presented
    d = minimal("a", 1)
    del d["env_id"]
    pack = DataPack.from_dict(d, source="f.json")
    assert pack.env_id is None and "env_id" not in pack.to_dict()
    with pytest.raises(DataError, match="field 'env_id': expected a string or null; got 3"):
        DataPack.from_dict({**d, "env_id": 3}, source="f.json")


def test_not_an_object():
    with pytest.raises(DataError, match="expected a JSON object; got \\[1, 2\\]"):
        DataPack.from_dict([1, 2], source="f.json")


def test_table_columns_and_tags():
    packs = [
        DataPack.from_dict(record("a")),
        DataPack.from_dict(
            minimal(
                "b", 0, enrichment={"affordances": [{"name": "push"}], "efficiency": {"time": 0.2}}
            )
        ),
        DataPack.from_dict(minimal("c", 2, enrichment={"efficiency": {"energy": 0.5}})),
    ]
    t = DatapackTable(packs)
    assert t.tier.tolist() == [1, 0, 2] and t.index("c") == 2
    assert t.trust.tolist() == [0.9, 1.0, 1.0] and t.sampling_weight.tolist() == [2.0, 1.0, 1.0]
    assert t.safety_critical.tolist() == [True, False, False]
    expect = {
        "safety_critical": [True, False, False],
        "fragile_objects": [True, False, False],
        "high_energy_cost": [True, False, False],  # energy 0.5 is not < 0.5
        "novel_affordance": [True, False, False],
        "intervention": [True, False, False],
        "demonstrated_affordance": [False, True, False],
        "efficiency_time": [True, True, False],
        "efficiency_energy": [True, False, True],
        "baseline": [False, True, True],
    }
    for fam, mask in expect.items():
        assert t.has_tag(fam).tolist() == mask, fam
    with pytest.raises(ValueError):
        t.tier[0] = 2
    codes, values = t.codes("curriculum_stage")
    assert values == ("", "frontier") and codes.tolist() == [1, 0, 0]


def test_table_rejects_duplicates_and_unknown_tags():
    p = DataPack.from_dict(minimal("a", 0))
    with pytest.raises(ValueError, match="'a'"):
        DatapackTable([p, p])
    with pytest.raises(ValueError, match="'shiny'"):
        DatapackTable([p]).has_tag("shiny")
    with pytest.raises(ValueError, match="'colour'"):
        DatapackTable([p]).codes("colour")


def test_table_and_sampler_refuse_what_is_not_datapack_records(tmp_path):
    from gymcurric.datapacks import DataPackRLSampler
    from gymcurric.errors import ConfigError

    p = DataPack.from_dict(minimal("a", 0))
    for packs, value in (
        ("packs/", "packs/"),  # a folder's path: load_datapacks reads it
        (tmp_path, str(tmp_path)),
        ([p, minimal("b", 1)], minimal("b", 1)),  # a raw record, not a DataPack
    ):
        for build in (DatapackTable, DataPackRLSampler):
            with pytest.raises(ConfigError, match=r"DatapackTable: .*'packs'") as info:
                build(packs)
            assert info.value.value == value


def test_direct_construction_is_checked_and_frozen():
    params = {"a": [1, 2]}
    p = DataPack("x", "reach", "E-v0", 2, task_params=params, extra={"k": {"v": 1}})
    params["a"].append(3)
    assert p.task_params["a"] == (1, 2)
    with pytest.raises(TypeError):
        p.extra["k"]["v"] = 2  # type: ignore[index]
    for kw, field in (
        ({"tier": 3}, "tier"),
        ({"tier": True}, "tier"),
        ({"trust_score": 2.0}, "trust_score"),
        ({"sampling_weight": -1.0}, "sampling_weight"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
    ):
        args = {"pack_id": "x", "task_type": "reach", "env_id": "E-v0", "tier": 1, **kw}
        with pytest.raises(DataError, match=f"field '{field}'"):
            DataPack(**args)


def test_datapack_pickles_through_its_json_form():
    import pickle

    pack = DataPack.from_dict(record("px", colour={"r": [1, 2]}), source="dir/a.jsonl")
    back = pickle.loads(pickle.dumps(pack))
    assert back == pack and back.to_dict() == pack.to_dict()
    assert back.source == "dir/a.jsonl"  # episode paths still resolve
    with pytest.raises(TypeError):
        back.task_params["hazard_radius"] = 1.0  # still read-only
