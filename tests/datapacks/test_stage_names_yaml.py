"""A stage name YAML reads as a number or a bool is named as written, with 'quote it'."""

from __future__ import annotations

import pytest

from gymcurric._yaml_floats import unquoted_name_error
from gymcurric.datapacks import load_curriculum_config
from gymcurric.errors import ConfigError

pytest.importorskip("yaml")


@pytest.mark.parametrize(
    "text,key,literal,line",
    [
        ("stages:\n  - name: 1e3\n  - name: b\n", "stages[0].name", "1e3", 2),
        ("stages:\n  1e3: {strategy: balanced}\n  b: {}\n", "stages.1e3.name", "1e3", 2),
        (
            "stages:\n  - name: a\n    filters:\n      curriculum_stage: 1e3\n",
            "stages[0].filters.curriculum_stage",
            "1e3",
            4,
        ),
        (
            "stages:\n  - name: a\n    filters: {curriculum_stage: [a, -2E-4]}\n",
            "stages[0].filters.curriculum_stage",
            "-2E-4",
            3,
        ),
        # a list whose repr is over 80 characters: af888d0 passed it cut to one string, so the
        # 1e3 in it was no longer found (no line, no 'quote it')
        (
            "stages:\n  - name: a\n    filters:\n      curriculum_stage: ["
            + ", ".join(f"stage_number_{i}" for i in range(8))
            + ", 1e3]\n",
            "stages[0].filters.curriculum_stage",
            "1e3",
            4,
        ),
        # the first 1000 is a setting, not a name: the name's literal and line are given
        (
            "stages:\n  - name: a\n    fallback_episodes: 1000\n  - name: 1000\n",
            "stages[1].name",
            "1000",
            4,
        ),
        ("stages:\n  123: {}\n", "stages.123.name", "123", 2),
        ("stages:\n  - name: yes\n", "stages[0].name", "yes", 2),
    ],
    ids=[
        "name",
        "spec key",
        "filter",
        "filter list",
        "long filter list",
        "int after a setting",
        "int key",
        "bool",
    ],
)
def test_a_stage_name_read_as_a_number_is_named_as_written_and_to_be_quoted(
    tmp_path, text, key, literal, line
):
    # 7197e71 reads 1e3 as the float 1000.0: such a name, text before, was refused as
    # 'stages[0].name': 1000.0 or 'stages.1000.0.name', a value and a key the file never wrote
    f = tmp_path / "cur.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=rf"\(line {line}\) as .*: quote it, '") as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value, info.value.source) == (key, literal, str(f))
    assert f"quote it, '{literal}'" in info.value.reason


def test_a_quoted_stage_name_like_a_number_loads(tmp_path):
    f = tmp_path / "cur.yaml"
    f.write_text("stages:\n  - name: '1e3'\n  - name: b\n    filters: {curriculum_stage: '1e3'}\n")
    config = load_curriculum_config(f)
    assert [s.name for s in config.stages] == ["1e3", "b"]
    assert config.stages[1].filters.curriculum_stage == "1e3"


def test_a_json_stage_name_that_is_a_number_keeps_its_error(tmp_path):
    f = tmp_path / "cur.json"
    f.write_text('{"stages": [{"name": 1000.0}]}')
    with pytest.raises(ConfigError, match="expected a non-empty string") as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value) == ("stages[0].name", 1000.0)


@pytest.mark.parametrize(
    "text,key,literal,line",
    [
        # the name (line 2) reads as the same float, but the filter (line 3) was refused
        (
            "stages:\n  - name: 1e3\n    filters: {curriculum_stage: 1000.0}\n",
            "stages[0].filters.curriculum_stage",
            "1000.0",
            3,
        ),
        (
            "stages:\n  - name: a\n    filters: {curriculum_stage: 1e3}\n  - name: 1e3\n",
            "stages[0].filters.curriculum_stage",
            "1e3",
            3,
        ),
        (
            "stages:\n  a: {filter_constraints: {curriculum_stage: 1e3}}\n  1e3: {}\n",
            "stages.a.filter_constraints.curriculum_stage",
            "1e3",
            2,
        ),
        # the key as written too, not stages.1000.0.filter_constraints.curriculum_stage
        (
            "stages:\n  1e3: {filter_constraints: {curriculum_stage: 2e3}}\n",
            "stages.1e3.filter_constraints.curriculum_stage",
            "2e3",
            2,
        ),
        ("stages:\n  - {<<: {name: 1e3}}\n", "stages[0].name", "1e3", 2),
    ],
    ids=[
        "name then filter",
        "filter then later name",
        "spec filter then key",
        "spec key in the filter's key",
        "merge key",
    ],
)
def test_the_literal_named_is_the_one_at_the_refused_key(tmp_path, text, key, literal, line):
    # 539990f named the first matching scalar in breadth-first order, whatever the key refused:
    # the stage's own name (line 2) or a later stage's name (line 4 / 3) for a filter's value,
    # and kept a spec stage key read as a number (1000.0) in the dotted key of its settings
    f = tmp_path / "cur.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value) == (key, literal)
    assert f"YAML reads {literal} (line {line}) as " in info.value.reason


@pytest.mark.parametrize(
    "text,key",
    [
        ("stages:\n  - name: 1e3\n---\na: 1\n", "stages[0].name"),  # two documents
        ("stages: [{name: 1e3", "stages[0].name"),  # not YAML
        ("stages:\n  - name: !!float 12\n", "stages[0].name"),  # tagged: quoting it fails
        ("stages:\n  - name: a\n", "stages[0].name"),  # no number there
        ("stages:\n  - name: 1e3\n", "stages[9].name"),  # no such key
    ],
)
def test_where_no_literal_is_found_the_error_stays_as_it_was(text, key):
    exc = ConfigError(key, 1000.0 if "!!" not in text else 12.0, "expected a non-empty string")
    assert unquoted_name_error(exc, text) is exc


@pytest.mark.parametrize(
    "name,text",
    [
        ("cur.yaml", "stages:\n  - name: BIG\n"),
        ("cur.yaml", "stages:\n  - name: a\n    filters: {curriculum_stage: BIG}\n"),
        ("cur.yaml", "stages:\n  - name: " + "0" * 90 + "1e3\n"),  # 1000.0, a long literal
        ("cur.json", '{"stages": [{"name": BIG}]}'),
        ("cur.json", '{"stages": [{"name": "a", "filters": {"curriculum_stage": BIG}}]}'),
        ("cur.json", '{"stages": [{"name": "a", "filters": {"curriculum_stage": ["a", BIG]}}]}'),
    ],
)
def test_a_long_stage_name_read_as_a_number_is_cut_in_the_message(tmp_path, name, text):
    # an int of 400 digits was shown whole (in YAML three times: value, literal, 'quote it')
    f = tmp_path / name
    f.write_text(text.replace("BIG", str(10**400)))
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(f)
    assert info.value.key.startswith("stages[0].") and info.value.source == str(f)
    message = str(info.value).removeprefix(str(f))
    assert " characters)" in message and len(message) < 400, message
