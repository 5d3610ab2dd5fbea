"""The Stage 1 / Stage 2.4 merge: enrichments joined to datapacks by pack_id."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gymcurric import cli
from gymcurric.datapacks import DatapackTable, load_datapacks, validate_datapacks
from gymcurric.datapacks.merge import read_enrichments
from gymcurric.errors import DataError

from .spec import compute_urgency, spec_record


def _split(n=12, seed=0):
    """Stage 1 datapacks (no enrichment) and their Stage 2.4 enrichments, as the spec has them."""
    rng = np.random.default_rng(seed)
    full = [spec_record(f"pack_{i:03d}", rng) for i in range(n)]
    stage1 = [{k: v for k, v in r.items() if k != "enrichment"} for r in full]
    enrichments = [{"pack_id": r["pack_id"], "enrichment": r["enrichment"]} for r in full]
    return full, stage1, enrichments


def _write(folder, name, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_merged_datapacks_equal_the_enriched_records(tmp_path):
    full, stage1, enrichments = _split()
    # the enrichment either under "enrichment" or as the record's own keys
    flat = [{"pack_id": e["pack_id"], **e["enrichment"]} for e in enrichments[6:]]
    d = _write(tmp_path / "stage1", "datapacks.jsonl", stage1)
    e = _write(tmp_path / "stage2", "a.jsonl", enrichments[:6])
    _write(e, "b.json", [])
    (e / "b.json").write_text(json.dumps(flat))
    before = {p.name: p.read_text() for p in [*d.iterdir(), *e.iterdir()]}
    merged = load_datapacks(d, enrichment_dir=e)
    assert [p.to_dict() for p in merged] == [p.to_dict() for p in load_datapacks(_write(
        tmp_path / "whole", "w.jsonl", full))]  # fmt: skip
    table = DatapackTable(merged)
    assert table.tags.any()
    assert {p.name: p.read_text() for p in [*d.iterdir(), *e.iterdir()]} == before  # unchanged
    assert merged[0].enrichment.novelty_tags is not None
    urgency = [compute_urgency(r) for r in full]
    from gymcurric.datapacks import FrontierPrioritizedStrategy

    spec = FrontierPrioritizedStrategy(tier_weights={0: 0.2, 1: 0.5, 2: 1.0})
    assert spec.urgency(table) == pytest.approx(urgency)


def test_every_merge_problem_is_reported_with_file_line_and_id(tmp_path, capsys):
    _, stage1, enrichments = _split(6)
    d = _write(tmp_path / "stage1", "datapacks.jsonl", stage1)
    e = tmp_path / "stage2"
    bad = [
        *enrichments[:3],  # pack_003 .. pack_005 get none
        {"pack_id": "pack_999", "novelty_tags": []},  # line 4: no such datapack
        enrichments[1],  # line 5: a second enrichment for pack_001
        {"pack_id": "pack_004", "novelty_tags": [{"novelty_score": 2}]},  # line 6: invalid
        {"novelty_tags": []},  # line 7: no id
    ]
    _write(e, "enrichments.jsonl", bad)
    stage1[5]["enrichment"] = {"fragility": "low"}  # brings its own: not reported
    (d / "datapacks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stage1))
    packs, errors = validate_datapacks(d, enrichment_dir=e)
    ef, df = e / "enrichments.jsonl", d / "datapacks.jsonl"
    expect = [
        rf"{ef}, line 5: field 'pack_id': a second enrichment for this datapack \(the first at "
        rf"{ef}, line 2\); got 'pack_001'",
        rf"{ef}, line 6: field 'enrichment.novelty_tags\[0\].novelty_score': out of range .*"
        r"got 2$",
        rf"{ef}, line 7: field 'pack_id': required field is missing; got None",
        rf"{df}, line 4: field 'pack_id': datapack has no enrichment in {e}; got 'pack_003'",
        # pack_004's enrichment is invalid (line 6): that is its only error, not "no enrichment"
        rf"{ef}, line 4: field 'pack_id': enrichment matches no datapack in {d}; got 'pack_999'",
    ]
    assert len(errors) == len(expect), errors
    for line, pattern in zip(errors, expect, strict=True):
        assert re.search(pattern, line), (pattern, line)
    assert [p.pack_id for p in packs] == ["pack_000", "pack_001", "pack_002", "pack_005"]
    with pytest.raises(DataError, match="a second enrichment"):
        load_datapacks(d, enrichment_dir=e)  # the first problem raises
    # the CLI prints the same lines and exits 1
    assert cli.main(["datapacks", "validate", str(d), "--enrichment-dir", str(e)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == errors and "4 valid datapacks, 5 errors" in err
    # an invalid enrichment still counts for its id: a second one is a duplicate
    _write(e, "enrichments.jsonl", [bad[5], enrichments[4]])
    packs, errors = validate_datapacks(d, enrichment_dir=e)
    assert re.search(r"line 1: field 'enrichment.novelty_tags\[0\]", errors[0])
    assert re.search(
        r"line 2: .*a second enrichment .*first at .*line 1\); got 'pack_004'", errors[1]
    )
    assert not any("pack_004" in m for m in errors[2:]) and "pack_004" not in {
        p.pack_id for p in packs
    }


def _validate_with_pack_001_enrichment_ending(tmp_path, tail):
    """Three packs validated with their enrichments, pack_001's (line 2) written with ``tail``
    added at the end of its enrichment object; returns the enrichment folder, packs and errors."""
    _, stage1, enrichments = _split(3)
    d = _write(tmp_path / "stage1", "datapacks.jsonl", stage1)
    e = _write(tmp_path / "stage2", "enrichments.jsonl", enrichments)
    lines = (e / "enrichments.jsonl").read_text().splitlines()
    assert lines[1].endswith("}}")
    lines[1] = lines[1][:-2] + tail + "}}"
    (e / "enrichments.jsonl").write_text("\n".join(lines) + "\n")
    return e, *validate_datapacks(d, enrichment_dir=e)


def test_a_key_given_twice_in_an_enrichment_is_its_one_error(tmp_path):
    twice = ', "novelty_tags": [{"novelty_score": 0.5}]'  # pack_001's novelty_tags, again
    e, packs, errors = _validate_with_pack_001_enrichment_ending(tmp_path, twice)
    assert [p.pack_id for p in packs] == ["pack_000", "pack_002"]
    assert len(errors) == 1, errors  # not also "pack_001 has no enrichment"
    assert errors[0].startswith(
        f"{e / 'enrichments.jsonl'}, line 2: field 'enrichment.novelty_tags': given twice in "
        "one JSON "
        "object, whose reader keeps only the later; got "
    ) and errors[0].endswith(", then [{'novelty_score': 0.5}]")


def test_a_number_past_a_floats_range_in_an_enrichment_is_its_one_error(tmp_path):
    # json read 1e400 as inf: refused as "got inf", a value the file does not say
    e, packs, errors = _validate_with_pack_001_enrichment_ending(tmp_path, ', "risk": 1e400')
    assert [p.pack_id for p in packs] == ["pack_000", "pack_002"]
    assert errors == [  # not also "pack_001 has no enrichment"
        f"{e / 'enrichments.jsonl'}, line 2: field 'enrichment.risk': a number too large for a "
        "float, which would read as infinity; write Infinity where infinity is meant; got '1e400'"
    ]


def test_a_conflicting_inline_enrichment_is_an_error_an_equal_one_is_not(tmp_path):
    _, stage1, enrichments = _split(2)
    stage1[0]["enrichment"] = {"coherence_score": 0.5, "extra_note": "kept"}
    stage1[1]["enrichment"] = {"coherence_score": 0.93}
    d = _write(tmp_path / "d", "p.jsonl", stage1)
    e = _write(tmp_path / "e", "e.jsonl", enrichments)
    packs, errors = validate_datapacks(d, enrichment_dir=e)
    assert len(errors) == 1 and re.search(
        rf"{d / 'p.jsonl'}, line 1: field 'enrichment.coherence_score' of datapack 'pack_000' "
        rf"differs from the enrichment at {e / 'e.jsonl'}, line 1 \(0.93\); got 0.5",
        errors[0],
    ), errors
    assert packs[0].enrichment.extra["coherence_score"] == 0.93


def test_enrichment_dir_problems_of_shape(tmp_path):
    with pytest.raises(DataError, match="no such file or directory"):
        read_enrichments(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \.json or \.jsonl enrichment files found"):
        read_enrichments(tmp_path / "empty")
    e = tmp_path / "e"
    e.mkdir()
    (e / "a.json").write_text(json.dumps([{"pack_id": "a", "enrichment": [1]}, 5, "{"]))
    (e / "b.jsonl").write_text('{"pack_id": "b", "enrichment": {"x": 1}, "x": 2}\n{oops\n')
    errors = [str(x) for x in read_enrichments(e).errors]
    assert [re.sub(r"^.*/", "", m)[:50] for m in errors] == [
        "a.json, record 0: field 'enrichment': expected a J",
        "a.json, record 1: field '<record>': expected a JSO",
        "a.json, record 2: field '<record>': expected a JSO",
        "b.jsonl, line 1: field 'x': given both inside 'enr",
        "b.jsonl, line 2: invalid JSON (Expecting property ",
    ]
