import json
import re

import numpy as np
import pytest

from gymcurric.datapacks import load_datapacks, load_episode, validate_datapacks
from gymcurric.errors import DataError

from .packs import minimal, record


def _write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")


def test_loads_a_directory_in_sorted_file_order(tmp_path):
    _write_jsonl(tmp_path / "b.jsonl", [minimal("b1", 0), "", minimal("b2", 1)])
    (tmp_path / "a.json").write_text(json.dumps([minimal("a1", 2), minimal("a2", 0)]))
    (tmp_path / "c.json").write_text(json.dumps(record("c1")))
    (tmp_path / "notes.txt").write_text("not a datapack")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "d.json").write_text(json.dumps(minimal("d1", 1)))
    packs = load_datapacks(tmp_path)
    assert [p.pack_id for p in packs] == ["a1", "a2", "b1", "b2", "c1"]
    assert packs[2].source == str(tmp_path / "b.jsonl")
    assert [p.pack_id for p in load_datapacks(tmp_path, recursive=True)][-1] == "d1"
    assert [p.pack_id for p in load_datapacks(tmp_path / "c.json")] == ["c1"]


def test_bad_json_names_file_and_line(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{\n  "pack_id": "a",\n  "tier": 1,,\n}')
    with pytest.raises(DataError, match=r"x\.json, line 3: invalid JSON"):
        load_datapacks(tmp_path)


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    f = tmp_path / "x.jsonl"
    _write_jsonl(f, [minimal("a", 0), "{not json", minimal("c", 0)])
    with pytest.raises(DataError, match=r"x\.jsonl, line 2: invalid JSON .*got '\{not json'"):
        load_datapacks(f)


def test_jsonl_line_with_bad_field(tmp_path):
    f = tmp_path / "x.jsonl"
    _write_jsonl(f, [minimal("a", 0), minimal("b", 1), minimal("c", 5)])
    with pytest.raises(DataError) as info:
        load_datapacks(tmp_path)
    assert str(info.value) == f"{f}, line 3: field 'tier': expected one of [0, 1, 2]; got 5"


def test_json_list_record_named_by_index(tmp_path):
    f = tmp_path / "x.json"
    f.write_text(json.dumps([minimal("a", 0), minimal("b", 1, trust_score="high")]))
    with pytest.raises(DataError, match=r"x\.json, record 1: field 'trust_score'.*got 'high'"):
        load_datapacks(f)


def test_a_key_given_twice_in_a_record_is_named_not_silently_dropped(tmp_path):
    # json.loads keeps the later of two equal keys without a word
    f = tmp_path / "x.jsonl"
    twice = '{"pack_id": "b", "task_type": "t", "tier": 0, "tier": 2}'
    nested = '{"pack_id": "c", "task_type": "t", "tier": 0, "enrichment": {"affordances": '
    nested += '[{"name": "grasp", "demonstrated": true, "demonstrated": false}]}}'
    _write_jsonl(f, [minimal("a", 0), twice, nested])
    packs, errors = validate_datapacks(f)
    assert [p.pack_id for p in packs] == ["a"]
    assert errors == [
        f"{f}, line 2: field 'tier': given twice in one JSON object, whose reader keeps only "
        "the later; got 0, then 2",
        f"{f}, line 3: field 'enrichment.affordances[0].demonstrated': given twice in one JSON "
        "object, whose reader keeps only the later; got True, then False",
    ]
    with pytest.raises(DataError, match=r"line 2: field 'tier': given twice"):
        load_datapacks(f)
    g = tmp_path / "list.json"  # in a JSON list: the record index, the others still load
    g.write_text(f"[{json.dumps(minimal('d', 0))}, {twice}]")
    packs, errors = validate_datapacks(g)
    assert [p.pack_id for p in packs] == ["d"]
    assert len(errors) == 1 and errors[0].startswith(f"{g}, record 1: field 'tier': given twice")
    h = tmp_path / "one.json"
    h.write_text(twice)
    assert validate_datapacks(h)[1][0].startswith(f"{h}: field 'tier': given twice")


def test_a_number_past_a_floats_range_is_named_by_file_field_and_literal(tmp_path):
    # json read 1e400 as inf without a word: a timestamp, task_params or extra field kept it, a
    # number field was refused as "got inf", a value the file does not say; Infinity still reads
    f = tmp_path / "x.jsonl"
    speed = json.dumps(record("b", task_params={"speed": "X"})).replace('"X"', "1e400")
    stamp = json.dumps(minimal("c", 0, timestamp="X")).replace('"X"', "-1" + "0" * 400 + ".5")
    weight = json.dumps(minimal("d", 0, sampling_weight="X")).replace('"X"', "1E+0400")
    meant = json.dumps(record("e", task_params={"speed": "X"})).replace('"X"', "Infinity")
    _write_jsonl(f, [minimal("a", 0), speed, stamp, weight, meant])
    packs, errors = validate_datapacks(f)
    assert [p.pack_id for p in packs] == ["a", "e"] and packs[1].task_params["speed"] == np.inf
    why = "a number too large for a float, which would read as infinity; write Infinity where "
    why += "infinity is meant; got"
    assert errors == [
        f"{f}, line 2: field 'task_params.speed': {why} '1e400'",
        f"{f}, line 3: field 'timestamp': {why} '-1{'0' * 58}... (404 characters)'",
        f"{f}, line 4: field 'sampling_weight': {why} '1E+0400'",
    ]
    g = tmp_path / "list.json"  # in a JSON list: the record index, the others still load
    g.write_text(f"[{json.dumps(minimal('g', 0))}, {weight}]")
    packs, errors = validate_datapacks(g)
    assert [p.pack_id for p in packs] == ["g"]
    assert errors == [f"{g}, record 1: field 'sampling_weight': {why} '1E+0400'"]
    h = tmp_path / "one.json"
    h.write_text(speed)
    with pytest.raises(DataError, match=rf"^{re.escape(str(h))}: field 'task_params.speed': a "):
        load_datapacks(h)


@pytest.mark.parametrize(
    "literal",
    [
        "2" + "0" * 209 + "e99",
        "17976931348623159" + "0" * 292 + ".0",
        "1" + "0" * 400 + "e-50",
        "1e309",
    ],
)
def test_every_literal_past_a_floats_range_is_caught(tmp_path, literal):
    # a file is parsed with the marking float parser only where its text may hold one: the
    # fewest digits (210, or an exponent of 3) that can overflow, and the largest float, round up
    assert float(literal) == np.inf and float("9" * 209 + "e99") < np.inf
    f = tmp_path / "x.jsonl"
    _write_jsonl(f, [json.dumps(minimal("a", 0, mpl_gain="X")).replace('"X"', literal)])
    assert validate_datapacks(f)[1][0].startswith(f"{f}, line 1: field 'mpl_gain': a number too")


def test_records_are_read_with_one_json_decoder_per_file(tmp_path, monkeypatch):
    # the key-given-twice hook needs a decoder of its own: built once per file, not per record
    built = []

    class Counting(json.JSONDecoder):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(json, "JSONDecoder", Counting)
    f = tmp_path / "x.jsonl"
    _write_jsonl(f, [minimal(f"p{i}", i % 3) for i in range(50)])
    assert len(load_datapacks(f)) == 50
    assert len(built) == 1
    bom = tmp_path / "bom.jsonl"  # a UTF-8 BOM is still named as json.loads names it
    bom.write_text("\ufeff" + json.dumps(minimal("a", 0)) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bom\.jsonl, line 1: invalid JSON \(Unexpected UTF-8 BOM"):
        load_datapacks(bom)


def test_duplicate_pack_ids_name_both_files(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(minimal("same", 0)))
    _write_jsonl(tmp_path / "b.jsonl", [minimal("same", 1)])
    with pytest.raises(DataError, match=r"b\.jsonl.*'pack_id'.*a\.json; got 'same'"):
        load_datapacks(tmp_path)


def test_empty_or_missing_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.json").write_text(json.dumps(minimal("a", 0)))
    with pytest.raises(DataError) as caught:
        load_datapacks(tmp_path)
    assert str(caught.value) == (  # the folder, the suffixes looked for, and where
        f"{tmp_path}: no .json or .jsonl datapack files found (suffix in any case; "
        "subfolders not searched)"
    )
    (tmp_path / "sub" / "a.json").unlink()
    with pytest.raises(DataError, match=r"no \.json .*; subfolders searched too\)$"):
        load_datapacks(tmp_path, recursive=True)
    with pytest.raises(DataError, match="no such file"):
        load_datapacks(tmp_path / "nope")


def test_record_file_suffixes_are_read_in_any_case(tmp_path):
    # .JSON / .JSONL (which some exporters and Windows tools write) were skipped as if absent,
    # so a folder of them was "no .json or .jsonl files", as the config readers take .YAML
    _write_jsonl(tmp_path / "a.JSONL", [minimal("a1", 0), minimal("a2", 1)])
    (tmp_path / "b.Json").write_text(json.dumps([minimal("b1", 2)]))
    assert [p.pack_id for p in load_datapacks(tmp_path)] == ["a1", "a2", "b1"]
    # a single file given by name is read by its suffix too: one record per line
    assert [p.pack_id for p in load_datapacks(tmp_path / "a.JSONL")] == ["a1", "a2"]
    bad = tmp_path / "bad.JsonL"
    _write_jsonl(bad, [minimal("c1", 0), "{not json"])
    _, errors = validate_datapacks(tmp_path)
    assert [e.split(": invalid")[0] for e in errors] == [f"{bad}, line 2"]


def test_a_leading_bom_is_refused_naming_file_and_line(tmp_path):
    # deliberate (as json.loads): a BOM is an encoding mistake in a UTF-8 record file
    for name in ("bom.jsonl", "bom.json", "BOM.JSON"):
        f = tmp_path / name
        f.write_text("\ufeff" + json.dumps(minimal("a", 0)) + "\n", encoding="utf-8")
        with pytest.raises(DataError) as caught:
            load_datapacks(f)
        assert str(caught.value).startswith(
            f"{f}, line 1: invalid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig), column 1)"
        )
        f.unlink()


def test_episode_arrays_are_loaded_read_only(tmp_path):
    (tmp_path / "ep").mkdir()
    obs = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.savez(tmp_path / "ep" / "a.npz", obs=obs, reward=np.ones(4))
    (tmp_path / "a.json").write_text(json.dumps(minimal("a", 0, episode="ep/a.npz")))
    (pack,) = load_datapacks(tmp_path)
    ep = load_episode(pack)
    assert sorted(ep) == ["obs", "reward"] and np.array_equal(ep["obs"], obs)
    with pytest.raises(ValueError):
        ep["reward"][0] = 5.0


def test_episode_with_object_arrays_is_refused(tmp_path):
    np.savez(tmp_path / "bad.npz", obs=np.array([{"a": 1}, None], dtype=object))
    (tmp_path / "a.json").write_text(json.dumps(minimal("a", 0, episode="bad.npz")))
    (pack,) = load_datapacks(tmp_path)
    with pytest.raises(DataError, match=r"bad\.npz: array 'obs' of datapack 'a'.*allow_pickle"):
        load_episode(pack)


def test_missing_or_absent_episode(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps([minimal("a", 0, episode="gone.npz"), minimal("b", 0)])
    )
    a, b = load_datapacks(tmp_path)
    with pytest.raises(DataError, match=r"gone\.npz.*'a'.*cannot load"):
        load_episode(a)
    with pytest.raises(DataError, match="has no recorded episode"):
        load_episode(b)


def test_iter_episodes_skips_packs_without_one(tmp_path):
    np.savez(tmp_path / "e.npz", obs=np.zeros((2, 3)))
    (tmp_path / "a.json").write_text(
        json.dumps([minimal("a", 0), minimal("b", 1, episode="e.npz"), minimal("c", 2)])
    )
    from gymcurric.datapacks import iter_episodes

    got = list(iter_episodes(load_datapacks(tmp_path)))
    assert [p.pack_id for p, _ in got] == ["b"] and got[0][1]["obs"].shape == (2, 3)


def _episode(tmp_path, name, **arrays):
    np.savez(tmp_path / f"{name}.npz", **arrays)
    return minimal(name, 0, episode=f"{name}.npz")


def test_iter_episodes_require_checks_names_and_lengths(tmp_path):
    from gymcurric.datapacks import EPISODE_KEYS, DataPackRLSampler, iter_episodes

    assert EPISODE_KEYS == ("obs", "action", "reward")  # what gymcurric.replay reads
    good = {
        "obs": np.zeros((4, 2)),
        "action": np.zeros(3, np.int64),
        "reward": np.arange(3.0),
        "cost": np.zeros(3),
        "terminated": np.array([0, 0, 1], bool),
    }
    recs = [
        _episode(tmp_path, "a", **good),
        _episode(tmp_path, "b", **{**good, "obs": good["obs"][:3], "terminated": np.True_}),
    ]
    (tmp_path / "p.json").write_text(json.dumps(recs))
    packs = load_datapacks(tmp_path)
    before = [p.to_dict() for p in packs]
    got = list(iter_episodes(packs, require=EPISODE_KEYS))
    assert [p.pack_id for p, _ in got] == ["a", "b"]
    assert all(ep["reward"].tolist() == [0.0, 1.0, 2.0] for _, ep in got)
    # a sampled batch feeds the same iterator; nothing is changed
    batch = DataPackRLSampler(packs, seed=0).sample_batch(4)
    assert {p.pack_id for p, _ in iter_episodes(batch)} <= {"a", "b"}
    assert [p.to_dict() for p in packs] == before

    def bad(name, **arrays):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "p.json").write_text(json.dumps([_episode(folder, name, **arrays)]))
        return load_datapacks(folder)

    missing = bad("m", **{k: v for k, v in good.items() if k != "action"})
    with pytest.raises(DataError, match=r"m\.npz: episode of datapack 'm' has no array 'action'"):
        list(iter_episodes(missing, require=EPISODE_KEYS))
    assert len(list(iter_episodes(missing))) == 1  # no requirement: yielded as it is
    short = bad("s", **{**good, "cost": np.zeros(2)})
    with pytest.raises(DataError, match=r"'cost' of datapack 's' has 2 rows, expected 3"):
        list(iter_episodes(short, require=EPISODE_KEYS))
    long_obs = bad("o", **{**good, "obs": np.zeros((6, 2))})
    with pytest.raises(DataError, match=r"'obs' of datapack 'o' has 6 rows, expected 3 or 4"):
        list(iter_episodes(long_obs, require=EPISODE_KEYS))
    flags = bad("t", **{**good, "terminated": np.zeros(2, bool)})
    with pytest.raises(DataError, match=r"'terminated' of datapack 't' has 2 rows, expected a"):
        list(iter_episodes(flags, require=EPISODE_KEYS))


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
        lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"),
    ],
    ids=["empty", "truncated", "fake-zip"],
)
def test_a_damaged_episode_file_is_a_data_error_naming_it(tmp_path, damage):
    np.savez(tmp_path / "ep.npz", obs=np.zeros((40, 3)), reward=np.ones(40))
    damage(tmp_path / "ep.npz")
    (tmp_path / "a.json").write_text(json.dumps(minimal("a", 0, episode="ep.npz")))
    (pack,) = load_datapacks(tmp_path)
    with pytest.raises(DataError, match=r"ep\.npz.*'a'"):
        load_episode(pack)


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("ep.npy", lambda p: np.save(p, np.zeros(3))),  # one array, not an archive of them
        ("ep.npz", lambda p: p.write_text("obs,reward\n0,1\n")),  # numpy: 'pickled data'
    ],
)
def test_an_episode_that_is_not_an_npz_archive_is_named(tmp_path, name, write):
    write(tmp_path / name)
    (tmp_path / "a.json").write_text(json.dumps(minimal("a", 0, episode=name)))
    (pack,) = load_datapacks(tmp_path)
    with pytest.raises(DataError) as info:
        load_episode(pack)
    assert str(info.value) == (
        f"{tmp_path / name}: field 'episode' of datapack 'a': not a .npz archive (a zip of "
        f"named arrays, as np.savez writes); got {name!r}"
    )
