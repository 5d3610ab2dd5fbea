"""TrainConfig: validation errors name file, key and value; overrides; round trip."""

from __future__ import annotations

import base64
import json
import re

import pytest

import gymcurric.train
from gymcurric.errors import ConfigError, DataError
from gymcurric.train.cli_demo import shipped_configs
from gymcurric.train.config import TrainConfig, apply_overrides, load_config
from tests.train.override_errors import refused_override


def test_defaults_round_trip_through_json():
    cfg = TrainConfig()
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg


@pytest.mark.parametrize(
    ("data", "key", "value"),
    [
        ({"env": {"num_envs": 0}}, "env.num_envs", 0),
        ({"env": {"num_envs": "4"}}, "env.num_envs", "4"),
        ({"env": {"vectorization": "async"}}, "env.vectorization", "async"),
        ({"agent": {"algo": "a2c"}}, "agent.algo", "a2c"),
        ({"agent": {"lr": 1}}, "agent.lr", 1),
        ({"run": {"total_steps": -5}}, "run.total_steps", -5),
        ({"run": {"seed": True}}, "run.seed", True),
        ({"run": {"seed": 2**32}}, "run.seed", 2**32),  # SB3's np.random.seed: a traceback
        ({"run": {"checkpoint_every": 0}}, "run.checkpoint_every", 0),
        ({"cost": {"nonfinite": "zero"}}, "cost.nonfinite", "zero"),
        ({"curriculum": {"enabled": True}}, "curriculum.space", {}),
        ({"datapacks": {"enabled": True}}, "datapacks.dir", None),
        ({"bogus": 1}, "bogus", 1),
        ({"env": []}, "env", []),
        ({"env": {"vectorization": "subproc", "step_timeout": 0}}, "env.step_timeout", 0),
        ({"env": {"vectorization": "subproc", "step_timeout": -2}}, "env.step_timeout", -2),
        ({"env": {"vectorization": "subproc", "step_timeout": "5"}}, "env.step_timeout", "5"),
        ({"env": {"vectorization": "subproc", "step_timeout": True}}, "env.step_timeout", True),
        (
            {"env": {"vectorization": "subproc", "step_timeout": float("inf")}},
            "env.step_timeout",
            float("inf"),
        ),
        ({"env": {"vectorization": "dummy", "step_timeout": 5}}, "env.step_timeout", 5),
        ({"env": {"vectorization": "subproc", "build_timeout": 0}}, "env.build_timeout", 0),
        ({"env": {"vectorization": "subproc", "build_timeout": "60"}}, "env.build_timeout", "60"),
        ({"env": {"vectorization": "dummy", "build_timeout": 60}}, "env.build_timeout", 60),
    ],
)
def test_bad_values_name_the_dotted_key_and_the_value(data, key, value):
    with pytest.raises(ConfigError) as exc:
        TrainConfig.from_dict(data, source="my.yaml")
    assert exc.value.key == key
    assert exc.value.value == value
    assert "my.yaml" in str(exc.value)


def test_step_and_build_timeouts_are_for_subproc_workers_and_reach_the_vector_env():
    from gymcurric.train.build import build_run

    with pytest.raises(ConfigError, match="only subproc workers can be timed out"):
        TrainConfig.from_dict({"env": {"step_timeout": 5}})  # dummy by default
    assert TrainConfig().env.step_timeout is None and TrainConfig().env.build_timeout is None
    cfg = TrainConfig.from_dict(
        {
            "env": {
                "id": "gymcurric/HazardGrid-v0",
                "num_envs": 1,
                "vectorization": "subproc",
                "start_method": "fork",
                "step_timeout": 2.5,
                "build_timeout": 60,
            },
            "curriculum": {"enabled": False},
        }
    )
    built = build_run(cfg)
    try:
        assert (built.venv.unwrapped.timeout, built.venv.unwrapped.build_timeout) == (2.5, 60.0)
    finally:
        built.close()


def test_cross_section_rules():
    space = {"type": "fixed", "tasks": [{}]}
    with pytest.raises(ConfigError, match="backend"):
        TrainConfig.from_dict(
            {"env": {"vectorization": "subproc"}, "curriculum": {"enabled": True, "space": space}}
        )
    with pytest.raises(ConfigError, match="not both"):
        TrainConfig.from_dict(
            {
                "curriculum": {"enabled": True, "space": space},
                "datapacks": {"enabled": True, "dir": "x"},
            }
        )


def test_overrides_parse_yaml_values_and_create_nested_keys():
    out = apply_overrides(
        {"agent": {"kwargs": {}}},
        [
            "agent.kwargs.learning_rate=1e-3",
            "run.plots=false",
            "agent.kwargs.net_arch=[64, 64]",
            "env.id=gymcurric/HazardGrid-v0",
        ],
    )
    assert out["agent"]["kwargs"] == {"learning_rate": 1e-3, "net_arch": [64, 64]}
    assert out["run"]["plots"] is False
    assert out["env"]["id"] == "gymcurric/HazardGrid-v0"


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_malformed_overrides_are_config_errors(bad):
    with pytest.raises(ConfigError, match=r"dotted\.key=value"):
        apply_overrides({}, [bad])


@pytest.mark.parametrize(
    ("override", "key", "got"),
    [
        ("env.kwargs.start=2020-02-30", "env.kwargs.start", "cannot read '2020-02-30' (day is"),
        ("env.kwargs.flag=!!bool maybe", "env.kwargs.flag", "not a valid !!bool value"),
        ("env.kwargs.x=1e400", "env.kwargs.x", "a number too large for a float, which"),
        ("env.kwargs.xs=[1, -1e400]", "env.kwargs.xs[1]", "a number too large for a float"),
        ("env.kwargs.m={a: 1, a: 2}", "env.kwargs.m.a", "duplicate key"),
    ],
)
def test_an_override_value_yaml_cannot_build_is_refused_as_in_a_file(override, key, got):
    # it became the override's text (a date that does not exist, 'maybe', '{a: 1, a: 2}') or
    # inf without a word, where a file with the same value is refused
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, [override])
    assert (info.value.key, info.value.source) == (key, "command line")
    assert info.value.value == override.partition("=")[2] and got in info.value.reason
    with pytest.raises(ConfigError, match=re.escape(got)):
        load_config(None, [override])


def test_an_override_that_is_not_yaml_is_its_text_and_a_quoted_one_a_string():
    out = apply_overrides({}, ["a.glob=*.json", "a.day='2020-02-30'", "a.big='1e400'"])
    assert out["a"] == {"glob": "*.json", "day": "2020-02-30", "big": "1e400"}
    long = "env.kwargs.n=0x" + "f" * 4000  # past Python's digit limit: cut in the message
    with pytest.raises(ConfigError, match=r"\(4,002 characters\)") as info:
        apply_overrides({}, [long])
    assert len(str(info.value)) < 500


@pytest.mark.parametrize("text", ["!", "#c", "&a", "! ", "  #c", "---", " ", "!!null x"])
def test_an_override_yaml_reads_as_null_without_writing_one_is_refused(text):
    # a comment, a bare tag or an anchor with nothing after it read as null without a word
    error = refused_override(text)
    assert "reads it as null" in error.reason and "quote it" in error.reason
    assert ("only whitespace" in error.reason) == (not text.strip())
    with pytest.raises(ConfigError, match="reads it as null"):
        load_config(None, [f"env.kwargs.x={text}"])


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("-", "the item env.kwargs.x[0] (character 2: nothing is written)"),
        ("- ", "the item env.kwargs.x[0] (character 2: nothing is written)"),
        ("- a\n-", "the item env.kwargs.x[1] (character 6: nothing is written)"),
        ("- - ", "the item env.kwargs.x[0][0] (character 4: nothing is written)"),
        ("?", "a key of env.kwargs.x (character 2: nothing is written)"),
        ("{? }", "a key of env.kwargs.x (character 3: nothing is written)"),
        ("{a, b}", "the value env.kwargs.x.a (character 3: nothing is written)"),
        ("{a: }", "the value env.kwargs.x.a (character 4: nothing is written)"),
        ("[a: ]", "the value env.kwargs.x[0].a (character 4: nothing is written)"),
        ("{a: [1, {b: }]}", "the value env.kwargs.x.a[1].b (character 12: nothing is written)"),
        ("[a, ! ]", "the item env.kwargs.x[1] (character 5: '!', with no null after it)"),
        ("[a, &x]", "the item env.kwargs.x[1] (character 5: '&x', with no null after it)"),
        ("[! '']", "the item env.kwargs.x[0] (character 2: \"! ''\", with no null after it)"),
        ("[!!null x]", "the item env.kwargs.x[0] (character 2: '!!null x', with no null"),
    ],
)
def test_an_override_yaml_reads_as_holding_a_null_it_does_not_write_is_refused(text, where):
    # `x=-` read as [None], `x=?` as {None: None}, `x={a, b}` as {a: None, b: None}: the null
    # refused where it is the whole value (`x=!`) passed without a word inside a structure
    error = refused_override(text)
    assert "reads part of it as null where no null is written: " + where in error.reason
    assert "quote it for a string: env.kwargs.x=\"'...'\"" in error.reason
    assert "or write null there" in error.reason
    with pytest.raises(ConfigError, match="reads part of it as null"):
        load_config(None, [f"env.kwargs.x={text}"])


def test_an_override_that_writes_its_nulls_inside_a_structure_keeps_them():
    texts = ["[1, null]", "{a: ~}", "{a: Null, b: [NULL, !!null ]}", "[&a ~, *a]", "{~: 1}"]
    texts += ["[! null]", "!!set {a, b}", "[a, b, ]", "{a: 1, }", "['', \"\"]", "[[], {}]"]
    out = apply_overrides({}, [f"a.v{i}={text}" for i, text in enumerate(texts)])
    assert list(out["a"].values()) == [
        [1, None],
        {"a": None},
        {"a": None, "b": [None, None]},
        [None, None],
        {None: 1},
        [None],
        {"a", "b"},  # a !!set's values are null in YAML: not refused
        ["a", "b"],
        {"a": 1},
        ["", ""],
        [[], {}],
    ]


def test_flag_settings_are_public_and_applied_as_typed():
    # load_config/apply_overrides take settings: the type is gymcurric.train.Setting
    from gymcurric.train import Setting as PublicSetting

    setting = PublicSetting("run.out_dir", "2024", "--out-dir")
    assert load_config(None, [], [setting]).run.out_dir == "2024"
    assert "Setting" in gymcurric.train.__all__


def test_an_override_that_writes_null_is_null_and_an_empty_one_an_empty_string():
    texts = ["null", "Null", "NULL", "~", "!!null", "&a ~", "'#c'", "", "a#b", "'x #c'"]
    out = apply_overrides({}, [f"a.v{i}={text}" for i, text in enumerate(texts)])
    assert list(out["a"].values()) == [None, None, None, None, None, None, "#c", "", "a#b", "x #c"]


@pytest.mark.parametrize(
    ("text", "comment"),
    [
        ("foo #c", "#c"),
        ("null # c", "# c"),
        ("'a' #c", "#c"),
        ("[1, 2] # c", "# c"),
        ("[1, #c\n 2]", "#c"),
        ("a # b # c", "# b # c"),
    ],
)
def test_an_override_with_a_comment_after_its_value_is_refused(text, comment):
    # `x=foo #c` became 'foo' (and `x=null # c` null): the text after the `#` was dropped
    error = refused_override(text)
    assert f"YAML reads {comment!r} as a comment and drops it" in error.reason
    assert "quote it for a string: env.kwargs.x=\"'...'\"" in error.reason
    with pytest.raises(ConfigError, match="as a comment and drops it"):
        load_config(None, [f"env.kwargs.x={text}"])


def test_override_through_a_scalar_is_an_error():
    with pytest.raises(ConfigError, match="not a mapping"):
        apply_overrides({"run": {"seed": 1}}, ["run.seed.x=2"])


def test_load_config_names_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("env:\n  num_envs: zero\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and exc.value.key == "env.num_envs"
    bad = tmp_path / "broken.json"
    bad.write_text('{"env": {"id": }')
    with pytest.raises(DataError, match=r"broken\.json:1"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"run:\n  name: w\xe9\n")  # not UTF-8: named, not a UnicodeDecodeError
    with pytest.raises(ConfigError, match=r"cannot read.*utf-8") as info:
        load_config(latin1)
    assert info.value.value == str(latin1)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(lst)


@pytest.mark.parametrize("name", [".yaml", ".YML", "run.Yaml"])
def test_a_file_named_for_yaml_is_read_as_yaml(tmp_path, name):
    # one named just ".yaml" has no Path.suffix: it was read as JSON ("not valid JSON")
    path = tmp_path / name
    path.write_text("run:\n  seed: 3\n")
    assert load_config(path).run.seed == 3
    json_file = tmp_path / ".json"
    json_file.write_text('{"run": {"seed": 4}}')
    assert load_config(json_file).run.seed == 4


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.yaml", "env:\n  kwargs:\n    x: 1e400\n"),
        ("run.yml", "env:\n  kwargs:\n    x: -1.0e+400\n"),
        ("run.json", '{"env": {"kwargs": {"x": 1e400}}}'),
    ],
)
def test_a_number_past_a_floats_range_is_refused_naming_file_key_and_literal(tmp_path, name, text):
    # read as inf without a word; `.inf` (YAML) and `Infinity` (JSON) still are
    path = tmp_path / name
    path.write_text(text)
    literal = text.rpartition(": ")[2].strip("}\n")
    with pytest.raises(ConfigError, match="too large for a float") as info:
        load_config(path)
    assert (info.value.key, info.value.value, info.value.source) == (
        "env.kwargs.x",
        literal,
        str(path),
    )
    path.write_text(text.replace(literal, ".inf" if name != "run.json" else "Infinity"))
    assert load_config(path).env.kwargs == {"x": float("inf")}


def test_overrides_are_validated_like_the_file(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run": {"total_steps": 100}}))
    cfg = load_config(path, ["run.total_steps=200"])
    assert cfg.run.total_steps == 200
    with pytest.raises(ConfigError, match="overrides") as exc:
        load_config(path, ["run.total_steps=lots"])
    assert exc.value.value == "lots"


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_config_validates(name):
    cfg = load_config(shipped_configs()[name])
    assert cfg.run.total_steps > 0


def test_yaml_files_read_exponent_floats(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("agent:\n  kwargs: {learning_rate: 3e-4, ent_coef: 1.5E-2, name: e5}\n")
    kwargs = load_config(path).agent.kwargs
    assert kwargs == {"learning_rate": 3e-4, "ent_coef": 1.5e-2, "name": "e5"}


def test_a_key_given_twice_in_a_yaml_config_is_refused_with_both_lines(tmp_path):
    from gymcurric.errors import ConfigError

    path = tmp_path / "run.yaml"
    path.write_text("run:\n  total_steps: 100\n  total_steps: 200\nagent:\n  algo: ppo\n")
    with pytest.raises(ConfigError, match="line 2 and line 3") as exc:
        load_config(path)
    assert exc.value.key == "run.total_steps" and str(path) in str(exc.value)
    merged = tmp_path / "merged.yaml"  # a merge key is not a duplicate: the explicit key wins
    merged.write_text("base: &b {total_steps: 100}\nrun:\n  <<: *b\n  total_steps: 300\n")
    from gymcurric._parsing import load_yaml_unique  # the train config's YAML reader

    assert load_yaml_unique(merged.read_text())["run"]["total_steps"] == 300


def test_a_key_given_twice_in_a_json_config_is_refused_naming_it(tmp_path):
    # json.loads kept the later of two keys without a word: a run of 200 steps, not 100
    from gymcurric.errors import ConfigError

    path = tmp_path / "run.json"
    path.write_text('{"run": {"total_steps": 100, "total_steps": 200}, "agent": {"algo": "ppo"}}')
    with pytest.raises(ConfigError, match="given twice in one JSON object") as exc:
        load_config(path)
    # the dotted path, as for YAML (the key alone, "total_steps", before)
    assert exc.value.key == "run.total_steps" and exc.value.source == str(path)
    path.write_text('{"run": {"total_steps": 100}, "agent": {"algo": "ppo"}}')
    assert load_config(path).run.total_steps == 100


@pytest.mark.parametrize(
    "name,text",
    [("run.json", '{"run": {"total_steps": 100}}'), ("run.yaml", "run:\n  total_steps: 100\n")],
)
def test_a_config_starting_with_a_utf8_bom_is_read_in_either_format(tmp_path, name, text):
    # a JSON one was refused ("not valid JSON: Unexpected UTF-8 BOM"), a YAML one read
    path = tmp_path / name
    path.write_text("\ufeff" + text, encoding="utf-8")
    assert load_config(path).run.total_steps == 100
    # a second one is refused by name: YAML read it, JSON said "decode using utf-8-sig"
    path.write_text("\ufeff\ufeff" + text, encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: starts with 2 UTF-8 byte"):
        load_config(path)


@pytest.mark.parametrize(
    "name,text,got",
    [
        ("run.yaml", "run:\n  seed: 2020-02-30\n", ": line 2: cannot read '2020-02-30'"),
        ("run.json", '{"run": {"seed": ' + "9" * 5000 + "}}", ": an integer too long to read"),
        # a KeyError and an IndexError from PyYAML's constructors before
        ("run.yaml", "run:\n  seed: !!bool maybe\n", ": line 2: cannot read 'maybe' (not a valid"),
        ("run.yaml", "run:\n  seed: !!int ''\n", ": line 2: cannot read '' (not a valid !!int"),
        # built without Python's digit limit (not base 10), then json.dumps raised a ValueError
        ("run.yaml", "run:\n  seed: 0x" + "f" * 4000 + "\n", ": line 2: cannot read '0xfff"),
    ],
)
def test_a_value_the_parser_cannot_build_is_a_data_error_naming_the_file(tmp_path, name, text, got):
    # a raw ValueError (a traceback from gymcurric train) before
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError, match="^" + re.escape(f"{path}{got}")):
        load_config(path)


@pytest.mark.parametrize(
    "text,key,got",
    [
        ("run:\n  name: 2024-05-01\n", "run.name", "a value of type date"),
        ("env:\n  kwargs:\n    start: 2024-05-01 10:00:00\n", "env.kwargs.start", "datetime"),
        ("env:\n  kwargs:\n    blob: !!binary aGk=\n", "env.kwargs.blob", "bytes (YAML reads"),
        ("env:\n  kwargs:\n    ids: !!set {a}\n", "env.kwargs.ids", "set (YAML reads !!set"),
        ("env:\n  kwargs:\n    2024-05-01: 1\n", "env.kwargs.2024-05-01", "a key of type date"),
    ],
)
def test_a_yaml_value_json_cannot_write_is_a_config_error_naming_the_key(tmp_path, text, key, got):
    # a raw TypeError ("Object of type date is not JSON serializable") from gymcurric train before
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(got)) as info:
        load_config(path)
    assert (info.value.key, info.value.source) == (key, str(path))


def test_a_long_key_json_cannot_write_is_named_cut(tmp_path):
    # a !!binary key was quoted whole, twice (the dotted key and the value): 60,000 characters
    # for a 40 KB file
    path = tmp_path / "run.yaml"
    blob = base64.b64encode(b"x" * 30_000).decode()
    path.write_text(f"env:\n  kwargs:\n    ? !!binary {blob}\n    : 1\n")
    with pytest.raises(ConfigError, match=r"a key of type bytes \(YAML reads !!binary") as info:
        load_config(path)
    assert len(str(info.value)) < 1_000 and "30,003 characters" in str(info.value)
    assert info.value.key.startswith("env.kwargs.b'xxx")


@pytest.mark.parametrize("override", ["env.kwargs.start=2024-05-01", "agent.kwargs.ids=!!set {a}"])
def test_an_override_json_cannot_write_is_a_config_error_naming_the_key(override):
    # a kwargs mapping takes any value: the date reached config.json's json.dumps, a raw
    # TypeError from `gymcurric train` (--dry-run too)
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=r"a value of type (date|set)") as info:
        load_config(None, [override])
    assert (info.value.key, info.value.source) == (key, "defaults + overrides")


@pytest.mark.parametrize(
    ("text", "key", "at"),
    [
        ('{"run": {"name": "a\\ud800b"}}', "run.name", 1),
        ('{"run": {"out_dir": "runs/\\udcff"}}', "run.out_dir", 5),
        ('{"env": {"kwargs": {"\\udc7f": 1}}}', "env.kwargs.\udc7f", 0),
        ('{"env": {"id": "a\\udce9"}}', "env.id", 1),
        ('{"agent": {"kwargs": {"net_arch": ["x", "\\ud83d"]}}}', "agent.kwargs.net_arch[1]", 0),
    ],
)
def test_a_string_with_a_lone_surrogate_is_refused_naming_the_key(tmp_path, text, key, at):
    # a run name (or out_dir) with one reached mkdir: a raw UnicodeEncodeError ("surrogates
    # not allowed") after the config was accepted, --dry-run included
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"lone UTF-16 surrogate, .* at character {at}") as info:
        load_config(path)
    assert (info.value.key, info.value.source) == (key, str(path))
    override = f"{key}=x\udcff"  # a command-line byte that is not UTF-8 reads as one
    if key.startswith("run."):
        with pytest.raises(ConfigError, match="lone UTF-16 surrogate") as info:
            load_config(None, [override])
        assert (info.value.key, info.value.value) == (key, "x\udcff")
    path.write_text('{"run": {"name": "caf\\u00e9 \\ud83d\\ude00"}}')  # a pair is one character
    assert load_config(path).run.name == "caf\u00e9 \U0001f600"


def test_a_byte_that_is_not_utf8_is_passed_on_where_no_run_directory_is_named_with_it(tmp_path):
    # a Latin-1 file name on the command line reads as "caf\udce9" (surrogateescape), which os
    # functions write back as the byte: it trained before f5bd086 refused every such string
    cfg = load_config(None, ["env.kwargs.path=/data/caf\udce9.npz", "env.kwargs.n=caf\udcff"])
    assert cfg.env.kwargs == {"path": "/data/caf\udce9.npz", "n": "caf\udcff"}
    path = tmp_path / "run.json"
    path.write_text('{"env": {"kwargs": {"files": {"\\udce9.npz": 1}}}}')
    assert load_config(path).env.kwargs == {"files": {"\udce9.npz": 1}}
    for key in ("run.name", "run.out_dir", "env.id"):  # the run directory: tensorboard's
        with pytest.raises(ConfigError, match="lone UTF-16 surrogate") as info:  # UTF-8 paths
            load_config(None, [f"{key}=caf\udce9"])
        assert info.value.key == key


def test_a_json_config_is_decoded_once(tmp_path, json_decodes):
    # the duplicate-key check decoded the text a second time (json.loads with a hook)
    path = tmp_path / "run.json"
    # spaced unlike json.dumps: apply_overrides copies the parsed dict through a JSON round trip
    text = '{"run": {"total_steps":100}, "agent": {"algo":"ppo"}}'
    path.write_text(text)
    assert load_config(path).run.total_steps == 100
    assert json_decodes.count(text) == 1


@pytest.mark.parametrize(
    ("name", "text"),
    [("run.yaml", ""), ("run.yml", "# todo\n  \n"), ("run.yaml", "---\n"), ("run.json", " \n")],
)
def test_an_empty_config_file_is_an_error_naming_it(tmp_path, name, text):
    # it trained with the defaults without a word (a JSON one was "not valid JSON")
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="the file is empty") as info:
        load_config(path)
    assert (info.value.key, info.value.value) == ("--config", str(path))
    assert load_config(None) == TrainConfig()  # no file: the defaults


@pytest.mark.parametrize("comment", ["// to do", "# to do"])
def test_comment_lines_are_not_called_an_empty_file_where_they_are_not_comments(tmp_path, comment):
    # JSON has no comments, and YAML reads "// ..." as text: such a file was "the file is
    # empty: it holds ... only comments", while the same lines before a setting were "not
    # valid JSON"; it is what the format makes of it, as before empty files were refused
    path = tmp_path / "run.json"
    for text in (f"{comment}\n", f'{comment}\n{{"run": {{"seed": 1}}}}\n'):
        path.write_text(text)
        with pytest.raises(DataError, match=r"run\.json:1: not valid JSON: Expecting value"):
            load_config(path)
    path = tmp_path / "run.yaml"
    path.write_text("// to do\n")
    with pytest.raises(ConfigError, match="the file must hold a mapping") as info:
        load_config(path)
    assert info.value.value == "// to do"


def test_a_json_null_config_is_not_a_mapping_rather_than_an_empty_file(tmp_path):
    # it was "the file is empty: it holds no settings (only whitespace, YAML comments or an
    # empty YAML document)", none of which a JSON file holding null is
    path = tmp_path / "run.json"
    path.write_text("null\n")
    with pytest.raises(ConfigError, match="the file must hold a mapping") as info:
        load_config(path)
    assert (info.value.key, info.value.value, info.value.source) == ("config", None, str(path))


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("file", "agent.kwargs.learning_rate"),
        ("override", "agent.kwargs.learning_rate"),
        ("override", "env.step_timeout"),  # check_timeout
        ("override", "cost.nonfinite_value"),  # an unknown key: its value cut too
    ],
)
def test_an_integer_too_large_for_a_float_is_refused_naming_the_key_and_the_value_cut(
    tmp_path, where, key
):
    # math.isfinite raised OverflowError: int too large to convert to float
    big = "1" + "0" * 400
    path = tmp_path / "run.yaml"
    section, _, rest = key.partition(".")
    inline = "{" + rest.replace(".", ": {") + ": " + big + "}" * (rest.count(".") + 1)
    path.write_text(f"{section}: {inline}\n" if where == "file" else "env: {num_envs: 1}\n")
    overrides = [f"{key}={big}"] if where == "override" else []
    with pytest.raises(ConfigError) as info:
        cfg = load_config(path)
        TrainConfig.from_dict(apply_overrides(cfg.to_dict(), overrides))
    assert info.value.key == key
    assert info.value.value == f"{big[:60]}... (401 characters)"


@pytest.mark.parametrize(
    "item",
    ['"a\\ud800"', "2020-01-01", "!!binary aGk=", ".nan", "1e400", "{b: 1, b: 2}"],
    ids=["lone surrogate", "date", "bytes", "NaN", "past float", "key twice"],
)
def test_a_list_item_is_named_by_its_index_in_brackets_by_every_check(tmp_path, item):
    # the checks of plain values named it env.kwargs.x.1, those of the YAML reader x[1]
    path = tmp_path / "run.yaml"
    path.write_text(f"env:\n  kwargs:\n    x: [0, {item}]\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key.startswith("env.kwargs.x[1]"), info.value.key
