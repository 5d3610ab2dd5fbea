"""Input limits on the JSON / YAML gymcurric reads from user files (issue 21, item 12).

Deeply nested JSON gave an uncaught ``RecursionError``; a few hundred bytes of YAML aliases
("billion laughs") took seconds and gigabytes before any error. Both now fail at once with a
``DataError`` / ``ConfigError`` that names the file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gymcurric.datapacks.loading import load_datapacks, validate_datapacks
from gymcurric.errors import ConfigError, DataError
from tests.datapacks.packs import record

pytest.importorskip("yaml")

DEEP = "[" * 100_000  # the JSON parser gave up with RecursionError
NESTED_OK = json.dumps({"a": [[[[{"b": [1]}]]]]})


def billion_laughs() -> str:
    """9 levels of 9 aliases each: a few hundred bytes, 9**9 = 387,420,489 strings expanded."""
    lines = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# ``python -m gymcurric ARGS`` with 1 GiB of address space, set inside the child (preexec_fn is
# unsafe once the test process has threads): a blow-up fails there instead of filling the machine
_LIMITED_MAIN = (
    "import resource, runpy, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "sys.argv[0] = 'gymcurric'\n"
    "runpy.run_module('gymcurric', run_name='__main__')\n"
)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LIMITED_MAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ------------------------------------------------------------------------------ the helper
def test_json_depth_is_bounded_with_a_clear_error():
    from gymcurric._parsing import MAX_JSON_DEPTH, loads_json

    assert loads_json(NESTED_OK, source="ok.json") == json.loads(NESTED_OK)
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_json(at_limit, source="x.json") is not None
    over = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    for text in (over, DEEP):
        with pytest.raises(DataError, match=rf"x\.json: .*nest.*{MAX_JSON_DEPTH}"):
            loads_json(text, source="x.json")
    with pytest.raises(json.JSONDecodeError):  # syntax errors are left to the caller
        loads_json("{not json", source="x.json")


def test_json_keys_given_twice_are_refused_after_the_syntax_and_depth_errors():
    # one parse does what a bounded parse and then a second, duplicate-checking parse did
    from gymcurric._parsing import MAX_JSON_DEPTH, loads_json_unique

    assert loads_json_unique(NESTED_OK, source="ok.json") == json.loads(NESTED_OK)
    with pytest.raises(ConfigError) as info:  # the inner object is decoded first
        loads_json_unique('{"a": 1, "b": {"c": 1, "d": 0, "c": 2}, "a": 3}', source="x.json")
    # named by its dotted path as a YAML duplicate is (the key alone, 'c', before)
    assert (info.value.key, info.value.value, info.value.source) == ("b.c", "c", "x.json")
    assert str(info.value) == (
        "x.json: invalid value for 'b.c': 'c' (duplicate key: given twice in one JSON object, "
        "whose reader keeps only the later; give it once)"
    )
    with pytest.raises(json.JSONDecodeError):  # invalid JSON first, wherever the duplicate is
        loads_json_unique('{"a": 1, "a": 2} x', source="x.json")
    deep = "[" * MAX_JSON_DEPTH + '{"a": 1, "a": 2}' + "]" * MAX_JSON_DEPTH
    with pytest.raises(DataError, match=rf"x\.json: .*nest.*{MAX_JSON_DEPTH}"):  # then depth
        loads_json_unique(deep, source="x.json")
    with pytest.raises(json.JSONDecodeError, match="BOM"):  # as json.loads
        loads_json_unique('\ufeff{"a": 1}')


@pytest.mark.parametrize(
    "text,key",
    [
        ('{"lr": 1, "lr": 2}', "lr"),
        ('{"stages": [{"name": "a"}, {"name": "b", "w": 1, "w": 2}]}', "stages[1].w"),
        ('[[0, {"x": {"y": 1, "y": 2}}]]', "[0][1].x.y"),
        # the object with "c" twice is dropped (the first "b"): the one that dropped it is named
        ('{"a": 0, "b": {"c": 1, "c": 2}, "b": 3}', "b"),
        # an empty key keeps its place in the path: 'x' alone named a top-level key not there
        ('{"": {"x": 1, "x": 2}}', ".x"),
        ('{"a": {"": [{"x": 1, "x": 2}]}}', "a.[0].x"),
    ],
)
def test_a_json_key_given_twice_is_named_by_its_path_as_in_yaml(text, key):
    from gymcurric._parsing import load_yaml_unique, loads_json_unique

    with pytest.raises(ConfigError) as info:
        loads_json_unique(text, source="x.json")
    assert (info.value.key, info.value.value) == (key, key.rpartition(".")[2].rpartition("]")[2])
    if key in ("stages[1].w", ".x", "a.[0].x"):  # the same document in YAML: the same notation
        pytest.importorskip("yaml")
        with pytest.raises(ConfigError) as yaml_info:
            load_yaml_unique(text, source="x.yaml")
        assert yaml_info.value.key == key


@pytest.mark.parametrize(
    "text,got",
    [
        ("a:\n  b: 2020-02-30\n", "line 2: cannot read '2020-02-30' (day is out of range"),
        ("a: [" + "9" * 5000 + "]\n", "line 1: cannot read '99999"),
        # a KeyError, an IndexError and an AttributeError from PyYAML's constructors before
        ("a: !!bool maybe\n", "line 1: cannot read 'maybe' (not a valid !!bool value)"),
        ("a:\n  - !!float ''\n", "line 2: cannot read '' (not a valid !!float value)"),
        ("a: !!timestamp soon\n", "line 1: cannot read 'soon' (not a valid !!timestamp value)"),
        # not base 10: built past Python's digit limit, then a ValueError wherever printed
        ("a: 0x" + "f" * 3600 + "\n", "line 1: cannot read '0xfff"),
        ("a: -0b" + "1" * 14300 + "\n", "line 1: cannot read '-0b111"),
        ("a: " + ":".join(["59"] * 2500) + "\n", "line 1: cannot read '59:59"),
        # a sexagesimal float past float's range: a raw OverflowError before ("int too large
        # to convert to float"), implicit (an unquoted run.name, say) or tagged
        ("a: 1" + ":30" * 200 + ".5\n", "line 1: cannot read '1:30:30"),
        ("a: !!float -1" + ":59" * 200 + "\n", "line 1: cannot read '-1:59:59"),
    ],
)
def test_a_yaml_value_its_constructor_refuses_is_a_data_error_naming_the_line(text, got):
    # a raw ValueError from PyYAML's constructor before (a traceback from gymcurric train)
    from gymcurric._parsing import load_yaml, load_yaml_unique

    for load in (load_yaml, load_yaml_unique):
        with pytest.raises(DataError, match="^" + re.escape(f"x.yaml: {got}")):
            load(text, source="x.yaml")


@pytest.mark.parametrize(
    "value,shown",
    [
        ("0x" + "f" * 3600, "0x" + "f" * 58 + "... (3,602 characters)"),
        ("1" + ":30" * 200 + ".5", "1" + ":30" * 19 + ":3... (603 characters)"),
        ("2020-02-30", "2020-02-30"),
        ("!!bool " + "y" * 80, "y" * 80),  # 80 characters: shown whole, as cut shows them
        ("!!bool " + "y" * 81, "y" * 60 + "... (81 characters)"),
    ],
    ids=["hex past digit limit", "sexagesimal past float", "short", "80 characters", "81"],
)
def test_a_value_yaml_cannot_read_is_cut_as_every_other_message_cuts_text(value, shown):
    # _unreadable cut at its own 40 characters where every other message uses _checks.cut
    from gymcurric._parsing import load_yaml

    with pytest.raises(DataError) as info:
        load_yaml(f"a: {value}\n", source="x.yaml")
    assert str(info.value).startswith(f"x.yaml: line 1: cannot read {shown!r} (")


@pytest.mark.parametrize(
    "fmt,text,key,literal",
    [
        ("yaml", "a:\n  b: [1, -1.0e+400]\n", "a.b[1]", "-1.0e+400"),
        ("yaml", "a: !!float 1e400\n", "a", "1e400"),
        ("yaml", "a: &x 1.0e+400\nb: *x\n", "a", "1.0e+400"),
        ("yaml", "? 1.0e+400\n: x\n", "1.0e+400", "1.0e+400"),
        ("yaml", "a: [1, !!set {x, 1.0e+400}]\n", "a[1]", "1.0e+400"),  # named by the set
        ("json", '{"a": {"b": [0.5, 1e400]}}', "a.b[1]", "1e400"),
        ("json", '{"a": -1.5E+999}', "a", "-1.5E+999"),
    ],
)
def test_a_number_literal_past_a_floats_range_is_refused_naming_its_key(fmt, text, key, literal):
    # it was read as inf without a word: a typo (1e400 for 1e-400) became infinity
    from gymcurric._parsing import load_yaml, load_yaml_unique, loads_json_unique

    for read in (load_yaml, load_yaml_unique) if fmt == "yaml" else (loads_json_unique,):
        with pytest.raises(ConfigError, match=r"too large for a float.*write \.inf") as info:
            read(text, source="x")
        assert (info.value.key, info.value.value, info.value.source) == (key, literal, "x")
        assert ("(line 1" in str(info.value)) == (fmt == "yaml" and key != "a.b[1]")


def test_a_lone_surrogate_in_yaml_text_is_pyyamls_error_not_a_unicode_encode_error():
    # the size check encoded the text as UTF-8 first: a raw UnicodeEncodeError for an override
    # holding a command-line byte that is not UTF-8 (a file is decoded strictly before)
    import yaml

    from gymcurric._parsing import load_yaml

    with pytest.raises(yaml.YAMLError, match="unacceptable character #xdcff"):
        load_yaml("a: x\udcff")


def test_an_infinity_written_as_such_is_still_read():
    from gymcurric._parsing import load_yaml, loads_json_unique

    inf = float("inf")
    text = "a: .inf\nb: -.Inf\nc: !!float inf\nd: 1.0e+308\ne: 1e400\n"  # e: a string
    assert load_yaml(text) == {"a": inf, "b": -inf, "c": inf, "d": 1e308, "e": "1e400"}
    text = '{"a": Infinity, "b": -Infinity, "c": 1e308, "d": 1e-400}'
    assert loads_json_unique(text) == {"a": inf, "b": -inf, "c": 1e308, "d": 0.0}


def test_both_config_readers_read_the_same_floats_with_one_resolver(tmp_path):
    # the curriculum reader (load_yaml_unique) read 1e-3, 1e5, -2E-4 and 1.0e5 as strings,
    # the train reader as floats; both now load through _yaml_floats.float_loader
    from gymcurric._parsing import load_yaml_unique
    from gymcurric.datapacks.schedule import load_curriculum_config
    from gymcurric.train.config import load_config

    text = "a: 1e-3\nb: 1e5\nc: -2E-4\nd: 1.0e5\ne: .5E+1\nf: 1_000\ng: '1e5'\nh: e5\ni: 1e\n"
    want = {"a": 1e-3, "b": 1e5, "c": -2e-4, "d": 1e5, "e": 5.0, "f": 1000, "g": "1e5"}
    assert load_yaml_unique(text) == {**want, "h": "e5", "i": "1e"}
    assert [type(v) for v in load_yaml_unique(text).values()][:5] == [float] * 5
    path = tmp_path / "cur.yaml"
    for line, key in (("window: 1e400\n", "window"), ("run:\n  seed: -1E+400\n", "run.seed")):
        path.write_text(line)
        read = load_curriculum_config if key == "window" else load_config
        with pytest.raises(ConfigError, match="too large for a float") as info:
            read(path)
        assert (info.value.key, info.value.value, info.value.source) == (
            key,
            line.rpartition(" ")[2].strip(),
            str(path),
        )


@pytest.mark.parametrize("key", ["!!set x", "!!map x", "!!omap x", "!!seq x"])
def test_a_yaml_key_tagged_as_a_collection_is_a_yaml_error_naming_the_line(tmp_path, key):
    # the duplicate-key check put the key (an empty set, dict or list) in a dict: a raw
    # TypeError ("unhashable type: 'set'") from both config readers before
    import yaml

    from gymcurric._parsing import load_yaml_unique
    from gymcurric.datapacks.schedule import load_curriculum_config
    from gymcurric.train.config import load_config

    text = f"a:\n  {key}: 1\n"
    with pytest.raises(yaml.YAMLError, match=r"line 2, column"):
        load_yaml_unique(text)
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"(?s)^{re.escape(str(path))}: not valid YAML: .*line 2"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"(?s)invalid YAML \(.*line 2"):
        load_curriculum_config(path)


def test_a_yaml_integer_in_another_base_is_read_up_to_pythons_digit_limit():
    from gymcurric._parsing import load_yaml

    limit = sys.get_int_max_str_digits()
    assert load_yaml(f"a: {hex(10**limit - 1)}\nb: 0b101\nc: 1:30\nd: 017\n") == {
        "a": 10**limit - 1,
        "b": 5,
        "c": 90,
        "d": 15,
    }
    with pytest.raises(DataError, match=f"more than {limit:,} decimal digits"):
        load_yaml(f"a: {hex(10**limit)}\n")


def test_a_yaml_integer_too_long_to_be_under_the_limit_is_refused_before_it_is_built(monkeypatch):
    # PyYAML builds a sexagesimal integer in time quadratic in its length (the 1 MiB file
    # allowed holds 350,000 parts); one longer than any integer under the limit is not built
    import yaml

    from gymcurric._parsing import load_yaml

    built = []
    constructors = yaml.SafeLoader.yaml_constructors
    read_int = constructors["tag:yaml.org,2002:int"]
    monkeypatch.setitem(
        constructors,
        "tag:yaml.org,2002:int",
        lambda self, node: built.append(1) or read_int(self, node),
    )
    limit = sys.get_int_max_str_digits()
    text = ":".join(["59"] * (4 * limit // 3 + 2))
    with pytest.raises(DataError, match=r"^x\.yaml: line 2: cannot read '59:59.*past Python's"):
        load_yaml(f"a: 1\nb: {text}\n", source="x.yaml")
    assert built == [1]  # a's
    # as long once its underscores are dropped (as PyYAML drops them): read
    assert load_yaml(f"a: 0b{'_' * 9}{'0' * (4 * limit - 3)}1010\n") == {"a": 10}


@pytest.mark.parametrize(
    "prefix,digits,value",
    [
        ("0", "17", 0o17),
        ("-0", "17", -0o17),
        ("+0b", "101", 5),
        ("0x", "1f", 31),
        ("-0x0_", "1f", -31),
        # the prefix int(digits, base) takes after PyYAML's: int("0o17", 8), int("0x1f", 16)
        ("!!int 0o", "17", 15),
        ("!!int -0x0x_", "1f", -31),
        # in either case, as int() takes it
        ("!!int 0O", "17", 15),
        ("!!int 0x0X", "1f", 31),
        ("!!int 0b0B", "101", 5),
    ],
)
def test_a_zero_padded_yaml_integer_is_read_however_long(prefix, digits, value):
    # leading zeros carry no value (PyYAML reads such an integer in base 2, 8 or 16, in time
    # linear in its length): a small one padded past 4 * limit + 3 characters was refused as
    # "past Python's digits", which it is not
    from gymcurric._parsing import load_yaml

    limit = sys.get_int_max_str_digits()
    padded = f"{prefix}{'0' * (4 * limit + 10)}{digits}"
    assert load_yaml(f"a: {padded}\n") == {"a": value}
    # padded or not, a value past the limit is still refused
    with pytest.raises(DataError, match=f"more than {limit:,} decimal digits"):
        load_yaml(f"a: 0x{'0' * (4 * limit + 10)}{10**limit:x}\n")


def test_a_json_integer_past_pythons_digit_limit_is_a_data_error_naming_the_file():
    # a raw ValueError ("use sys.set_int_max_str_digits()") before
    from gymcurric._parsing import loads_json, loads_json_unique

    text = '{"a": [' + "9" * (sys.get_int_max_str_digits() + 1) + "]}"
    for load in (loads_json, loads_json_unique):
        with pytest.raises(DataError, match=r"^x\.json: an integer too long to read \(") as info:
            load(text, source="x.json")
        assert "sys.set_int_max_str_digits" not in str(info.value)


def test_yaml_size_aliases_and_depth_are_bounded():
    from gymcurric._parsing import MAX_YAML_BYTES, MAX_YAML_NODES, load_yaml

    assert load_yaml("a: &x [1, 2]\nb: *x\n", source="ok.yaml") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(DataError, match=rf"bomb\.yaml: .*{MAX_YAML_NODES:,}.*alias"):
        load_yaml(billion_laughs(), source="bomb.yaml")
    with pytest.raises(DataError, match=r"big\.yaml: .*bytes"):
        load_yaml("#" * (MAX_YAML_BYTES + 1), source="big.yaml")
    with pytest.raises(DataError, match=r"deep\.yaml: .*nest"):
        load_yaml(DEEP, source="deep.yaml")
    with pytest.raises(DataError, match=r"self\.yaml: .*recursive"):
        load_yaml("a: &a [*a]\n", source="self.yaml")


def test_the_shipped_configs_still_load():
    from gymcurric.train.config import load_config

    configs = sorted((Path(__file__).parents[1] / "gymcurric/train/configs").glob("*.yaml"))
    assert configs
    for path in configs:
        load_config(path)


# ------------------------------------------------------------------------------- datapacks
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
@pytest.mark.parametrize(
    "text,got",
    [
        (DEEP, "nest"),
        # an integer past Python's digit limit: a raw ValueError (validate's traceback) before
        ('{"pack_id": ' + "9" * 5000 + "}", "an integer too long"),
    ],
)
def test_deep_json_datapack_is_a_data_error(tmp_path, suffix, text, got):
    folder = tmp_path / "packs"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(json.dumps(record("p0")) + "\n")
    (folder / f"deep{suffix}").write_text(text + "\n")
    with pytest.raises(DataError, match=rf"deep{suffix}.*{got}"):
        load_datapacks(folder)
    packs, errors = validate_datapacks(folder)
    assert [p.pack_id for p in packs] == ["p0"]
    assert len(errors) == 1 and f"deep{suffix}" in errors[0], errors


def test_datapacks_validate_cli_reports_deep_json(tmp_path):
    folder = tmp_path / "packs"
    folder.mkdir()
    (folder / "deep.json").write_text(DEEP)
    out = run_cli("datapacks", "validate", str(folder))
    assert out.returncode == 1, out.stderr  # validate: 1 = problems found, listed on stdout
    assert "Traceback" not in out.stderr + out.stdout
    assert "deep.json" in out.stdout and "nest" in out.stdout
    assert "0 valid datapacks, 1 error" in out.stderr


def test_curriculum_config_alias_bomb_is_a_config_error(tmp_path):
    from gymcurric.datapacks.schedule import load_curriculum_config

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    with pytest.raises(ConfigError, match=r"bomb\.yaml.*alias"):
        load_curriculum_config(bomb)
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(ConfigError, match=r"deep\.json.*nest"):
        load_curriculum_config(deep)
    # through the CLI, next to a valid datapack folder: listed as an error, no traceback
    folder = tmp_path / "packs"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(json.dumps(record("p0")) + "\n")
    out = run_cli("datapacks", "validate", str(folder), "--config", str(bomb))
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert "bomb.yaml" in out.stdout and "alias" in out.stdout


# ----------------------------------------------------------------------------------- train
def test_train_dry_run_refuses_the_alias_bomb_fast(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    out = run_cli("train", "--config", str(bomb), "--dry-run", timeout=60)
    assert out.returncode == 2, out.stderr  # a user error: "gymcurric train: error: ..."
    assert "Traceback" not in out.stderr
    assert "bomb.yaml" in out.stderr and "alias" in out.stderr


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml"])
def test_train_config_nesting_is_bounded(tmp_path, name):
    from gymcurric.train.config import load_config

    path = tmp_path / name
    path.write_text(DEEP)
    with pytest.raises(DataError, match=rf"{name}.*nest"):
        load_config(path)


@pytest.mark.parametrize("text", ["run: !<{}> 1\n", "run: !{} 1\n", "run: *{}\n"])
def test_a_long_yaml_tag_or_alias_is_not_quoted_whole(tmp_path, text):
    # PyYAML's message quoted the 100,000-character tag / alias name whole, in both readers
    from gymcurric.datapacks.schedule import load_curriculum_config
    from gymcurric.train.config import load_config

    path = tmp_path / "run.yaml"
    path.write_text(text.format("a" * 100_000))
    for load, error in ((load_config, DataError), (load_curriculum_config, ConfigError)):
        with pytest.raises(error, match=r"run\.yaml.*(the tag|undefined alias)") as info:
            load(path)
        assert len(str(info.value)) < 1_000 and "100,0" in str(info.value)


@pytest.mark.parametrize("line", ["\n", "# c\n"])
def test_a_huge_yaml_text_is_not_split_into_a_list_of_lines_to_find_it_blank(line):
    # the blank-file check built a list of every line first (8 bytes a line, plus the
    # comment's own string): a 4 MiB YAML file of newlines took 32 MiB, 8x the text, before
    # load_yaml refused it as over MAX_YAML_BYTES
    import tracemalloc

    from gymcurric._parsing import MAX_YAML_BYTES, is_blank_config, load_yaml

    text = line * (4 * MAX_YAML_BYTES // len(line))
    assert is_blank_config(line * 10, yaml=True)
    tracemalloc.start()
    try:
        blank = is_blank_config(text, yaml=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not blank and peak < MAX_YAML_BYTES  # it is too large: load_yaml says so
    with pytest.raises(DataError, match=rf"big\.yaml: .*at most {MAX_YAML_BYTES:,} bytes"):
        load_yaml(text, source="big.yaml")
