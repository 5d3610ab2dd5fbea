import json

import numpy as np
import pytest

from gymcurric.datapacks import (
    CurriculumSchedule,
    DataPack,
    DataPackCurriculum,
    DataPackCurriculumConfig,
    DatapackTable,
    FilterConstraints,
    StageSpec,
    TransitionRule,
    load_curriculum_config,
)
from gymcurric.errors import ConfigError

from .packs import minimal


def _cfg(**kw):
    stages = (
        StageSpec("a", rules=(TransitionRule("error_rate", 0.2, "<="),), fallback_episodes=50),
        StageSpec(
            "b",
            "frontier_prioritized",
            rules=(TransitionRule("affordance_success_rate", 0.8),),
            fallback_episodes=30,
        ),
        StageSpec("c", "tag_aware", rules=(TransitionRule("mpl_improvement_rate", 0.05, "<="),)),
    )
    return DataPackCurriculumConfig(
        stages=kw.pop("stages", stages), window=kw.pop("window", 10), **kw
    )


def test_default_stages_and_schedule():
    cur = DataPackCurriculum()
    names = [s.name for s in cur.config.stages]
    assert names == ["warmup", "skill_building", "frontier", "fine_tuning"]
    sch = cur.schedule()
    assert (sch.stage, sch.episode, sch.strategy) == ("warmup", 0, "balanced")
    assert sch.filter_constraints.max_tier == 1
    d = json.loads(json.dumps(sch.to_dict()))
    assert CurriculumSchedule.from_dict(d).to_dict() == d


def test_a_schedule_comes_back_equal_from_its_json_form():
    # JSON turns tier_ratios' / tier_weights' int keys into strings: from_dict restores them
    cur = DataPackCurriculum()
    for episode in (0, 500, 2500, 7500):  # every default stage and strategy
        sch = cur.get_schedule(episode)
        back = CurriculumSchedule.from_dict(json.loads(json.dumps(sch.to_dict())))
        assert back == sch, (back.strategy_params, sch.strategy_params)
    d = sch.to_dict()
    del d["filter_constraints"]
    with pytest.raises(ConfigError, match=r"CurriculumSchedule: .*'filter_constraints'"):
        CurriculumSchedule.from_dict(d)
    with pytest.raises(ConfigError, match=r"CurriculumSchedule: .*'strategy': 'greedy'"):
        CurriculumSchedule.from_dict({**sch.to_dict(), "strategy": "greedy"})


@pytest.mark.parametrize(
    "params",
    [{}, {"shuffle": False}, {"tier_ratios": {0: 0.5, 1: 0.5, 2: 0.0}}, None],
)
def test_a_schedule_built_with_some_parameters_comes_back_with_those(params):
    # from_dict restores the parameters given, in the strategy's form, and adds no defaults
    sch = CurriculumSchedule("s", 0, "balanced", params, {}, FilterConstraints())
    for d in (sch.to_dict(), json.loads(json.dumps(sch.to_dict()))):
        back = CurriculumSchedule.from_dict(d)
        assert back == sch, back.strategy_params


def test_the_curriculum_refuses_what_is_not_datapack_records(tmp_path):
    # as DatapackTable and the sampler do: a path was kept as a tuple of its characters
    p = DataPack.from_dict(minimal("a", 0))
    for packs, value in (
        ("packs/", "packs/"),
        (tmp_path, str(tmp_path)),
        ([p, minimal("b", 1)], minimal("b", 1)),
    ):
        with pytest.raises(ConfigError, match=r"DataPackCurriculum: .*'datapacks'") as info:
            DataPackCurriculum(None, packs)
        assert info.value.value == value
    assert DataPackCurriculum(None, [p]).datapacks == (p,)
    assert DataPackCurriculum(None, DatapackTable([p])).datapacks == (p,)
    assert DataPackCurriculum(None, []).datapacks == DataPackCurriculum().datapacks == ()


def test_advance_by_rule_needs_a_full_window():
    cur = DataPackCurriculum(_cfg())
    for i in range(9):
        assert cur.update_diagnostics(success=True, error=(i == 0)) is None
    assert cur.stage == "a"  # 9 episodes < window 10
    # the 10th episode fills the window: error rate 2/10 = 0.2 <= 0.2
    assert cur.update_diagnostics(success=True, error=True) == "b"
    assert cur.stage == "b" and cur.transitions[-1] == {
        "episode": 10,
        "from": "a",
        "to": "b",
        "reason": "rules",
    }


def test_rule_failing_keeps_stage_until_fallback():
    cur = DataPackCurriculum(_cfg())
    for _ in range(49):
        cur.update_diagnostics(success=False, error=True)
    assert cur.stage == "a"
    assert cur.update_diagnostics(success=False, error=True) == "b"
    assert cur.transitions[-1]["reason"] == "fallback" and cur.stage_start == 50


def test_affordance_and_mpl_rules():
    cur = DataPackCurriculum(_cfg())
    cur.set_stage("b")
    for i in range(10):  # 2 attempts per episode, 1 failure in total: 19/20 = 0.95
        cur.update_diagnostics(success=True, tag_results={"grasp": i > 0, "push": True})
    assert cur.stage == "c" and cur.transitions[-1]["reason"] == "rules"
    # mpl still improving fast: no advance (and c is the last stage anyway)
    for i in range(10):
        cur.update_diagnostics(success=True, mpl=1.0 + i)
    m = cur.metrics()
    assert m["mpl_improvement_rate"] == pytest.approx((8.0 - 3.0) / 3.0)
    assert cur.stage == "c"


def test_mpl_plateau_advances():
    stages = (
        StageSpec("x", rules=(TransitionRule("mpl_improvement_rate", 0.05, "<="),)),
        StageSpec("y"),
    )
    cur = DataPackCurriculum(_cfg(stages=stages))
    for i in range(10):
        cur.update_diagnostics(
            success=True, mpl=[1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.1, 2.0, 2.0, 2.0][i]
        )
    assert cur.stage == "x"  # old half mean 1.6, new half 2.02: +26%
    for _ in range(5):
        cur.update_diagnostics(success=True, mpl=2.0)
    assert cur.stage == "y"


def test_manual_override_and_auto_advance_off():
    cur = DataPackCurriculum(_cfg(auto_advance=False))
    for _ in range(100):
        cur.update_diagnostics(success=True)
    assert cur.stage == "a"
    cur.set_stage("c", episode=7)
    assert (cur.stage, cur.episode, cur.stage_start) == ("c", 7, 7)
    assert cur.transitions[-1] == {"episode": 7, "from": "a", "to": "c", "reason": "manual"}
    with pytest.raises(ConfigError, match=r"'stage': 'zz'.*\['a', 'b', 'c'\]"):
        cur.set_stage("zz")
    with pytest.raises(ConfigError, match="'episode'"):
        cur.set_stage("a", episode=-1)


def test_prerequisites_gate_eligibility():
    packs = [
        DataPack.from_dict(minimal("free", 1)),
        DataPack.from_dict(minimal("needs", 1, supervision_hints={"prerequisite_tags": ["grasp"]})),
        DataPack.from_dict(
            minimal("both", 0, supervision_hints={"prerequisite_tags": ["grasp", "lift"]})
        ),
    ]
    table = DatapackTable(packs)
    cur = DataPackCurriculum(_cfg(prerequisite_min_attempts=5, auto_advance=False))
    assert cur.eligible_weights(table).tolist() == [1.0, 0.0, 0.0]
    for _ in range(4):
        cur.update_diagnostics(success=True, tag_results={"grasp": True})
    assert cur.satisfied_tags == frozenset()  # 4 < 5 attempts
    cur.update_diagnostics(success=True, tag_results={"grasp": True, "lift": False})
    assert cur.satisfied_tags == {"grasp"}
    assert cur.eligible_weights(table).tolist() == [1.0, 1.0, 0.0]
    # 9/10 = 0.9 does not *exceed* the 0.9 threshold
    for _ in range(8):
        cur.update_diagnostics(success=True, tag_results={"lift": True})
    assert "lift" not in cur.satisfied_tags and cur.get_diagnostics()["tag_success_rates"][
        "lift"
    ] == pytest.approx(0.8888888)
    cur.update_diagnostics(success=True, tag_results={"lift": True})
    cur.update_diagnostics(success=True, tag_results={"lift": True})
    assert cur.get_diagnostics()["satisfied_prerequisites"] == ["grasp", "lift"]
    assert cur.eligible_weights(table).tolist() == [1.0, 1.0, 1.0]


def test_filters_and_weight_multipliers():
    packs = [
        DataPack.from_dict(minimal("t0", 0)),
        DataPack.from_dict(minimal("t2", 2)),
        DataPack.from_dict(minimal("safe", 1, supervision_hints={"safety_critical": True})),
        DataPack.from_dict(minimal("frag", 1, enrichment={"fragility": "high"})),
        DataPack.from_dict(minimal("late", 1, supervision_hints={"curriculum_stage": "late"})),
        DataPack.from_dict(minimal("here", 1, supervision_hints={"curriculum_stage": "s"})),
    ]
    table = DatapackTable(packs)
    f = FilterConstraints(min_tier=1, exclude_tags=("fragile_objects",), curriculum_stage="s")
    assert f.mask(table).tolist() == [False, True, True, False, False, True]
    f = FilterConstraints(max_tier=1, require_tags=("safety_critical",))
    assert f.mask(table).tolist() == [False, False, True, False, False, False]
    s = StageSpec("s", weight_multipliers={"safety_critical": 3.0, "baseline": 0.5})
    assert s.weights(table).tolist() == [0.5, 0.5, 3.0, 1.0, 0.5, 0.5]


def test_diagnostics_progress_and_estimate():
    cur = DataPackCurriculum(_cfg())
    for _ in range(20):
        cur.update_diagnostics(success=False, error=True)
    d = cur.get_diagnostics()
    assert (d["stage"], d["episodes_in_stage"], d["stage_progress"]) == ("a", 20, 0.4)
    assert (d["next_stage"], d["episodes_to_next_stage"]) == ("b", 30)
    assert d["rules"] == [
        {"metric": "error_rate", "op": "<=", "threshold": 0.2, "value": 1.0, "holds": False}
    ]
    json.dumps(d)
    cur.set_stage("c")
    d = cur.get_diagnostics()
    assert d["next_stage"] is None and d["episodes_to_next_stage"] is None


def test_same_history_same_schedule_and_state_round_trip():
    rng = np.random.default_rng(0)
    history = [
        dict(
            success=bool(rng.random() < 0.7),
            error=bool(rng.random() < 0.1),
            mpl=float(rng.random()),
            tag_results={"grasp": bool(rng.random() < 0.95)},
        )
        for _ in range(120)
    ]
    a, b = DataPackCurriculum(_cfg()), DataPackCurriculum(_cfg())
    for i, h in enumerate(history):
        a.update_diagnostics(**h)
        b.update_diagnostics(**h)
        if i == 60:
            c = DataPackCurriculum(_cfg())
            c.load_state_dict(a.state_dict())
        if i > 60:
            c.update_diagnostics(**h)
    assert a.schedule() == b.schedule() == c.schedule()
    assert a.get_diagnostics() == b.get_diagnostics() == c.get_diagnostics()
    assert a.transitions == c.transitions and len(a.transitions) >= 1
    with pytest.raises(ConfigError, match="different"):
        DataPackCurriculum().load_state_dict(a.state_dict())


def test_a_state_that_does_not_fit_is_refused_leaving_the_curriculum_as_it_was():
    cur = DataPackCurriculum(_cfg())
    for _ in range(12):
        cur.update_diagnostics(success=True, mpl=1.0, tag_results={"grasp": True})
    before = cur.state_dict()
    good = cur.state_dict()
    arrays = dict(good["arrays"])
    for bad, key in (
        ({k: v for k, v in good.items() if k != "episode"}, "'episode'"),
        ({**good, "arrays": {**arrays, "error": np.zeros(3)}}, "'arrays'"),
        ({**good, "arrays": {**arrays, "colour": arrays["error"]}}, "'arrays'"),
        ({**good, "stage_index": 7}, "'stage_index'"),
        ({**good, "episode": "x"}, "'episode'"),
        ({**good, "tag_ok": [1]}, "'tag_ok'"),
        ({**good, "transitions": 5}, "'transitions'"),
    ):
        with pytest.raises(ConfigError, match=key):
            cur.load_state_dict(bad)
        after = cur.state_dict()
        assert json.dumps(after, default=np.ndarray.tolist) == json.dumps(
            before, default=np.ndarray.tolist
        ), bad
    with pytest.raises(ConfigError, match="expected a mapping"):
        cur.load_state_dict(None)


def test_config_round_trip_and_files(tmp_path):
    cfg = DataPackCurriculumConfig()
    d = json.loads(json.dumps(cfg.to_dict()))
    assert DataPackCurriculumConfig.from_dict(d) == cfg
    (tmp_path / "c.json").write_text(json.dumps(d))
    assert load_curriculum_config(tmp_path / "c.json") == cfg
    pytest.importorskip("yaml")
    (tmp_path / "c.yaml").write_text(
        "window: 20\nstages:\n  - name: only\n    strategy: tag_aware\n"
        "    strategy_params: {tag_quotas: {baseline: 1.0}}\n"
        "    rules: [{metric: error_rate, op: '<=', threshold: 0.1}]\n"
    )
    cfg = load_curriculum_config(tmp_path / "c.yaml")
    assert cfg.window == 20 and cfg.stages[0].strategy_params["tag_quotas"] == {"baseline": 1.0}


@pytest.mark.parametrize(
    "data,match",
    [
        ({"stages": [{"name": "a", "strategy": "greedy"}]}, r"'stages\[0\]\.strategy': 'greedy'"),
        (
            {"stages": [{"name": "a", "strategy_params": {"tier_ratios": {"0": 0.5}}}]},
            r"'stages\[0\]\.strategy_params\.tier_ratios'.*must sum to 1",
        ),
        (
            {"stages": [{"name": "a", "rules": [{"metric": "fun", "threshold": 1}]}]},
            r"'stages\[0\]\.rules\[0\]\.metric': 'fun'",
        ),
        (
            {"stages": [{"name": "a", "filters": {"max_tier": 4}}]},
            r"'stages\[0\]\.filters\.max_tier': 4",
        ),
        ({"stages": [{"name": "a", "colour": 1}]}, r"'stages\[0\]\.colour'"),
        (
            {"stages": [{"name": "a", "strategy_params": 5}]},
            r"'stages\[0\]\.strategy_params': 5 \(expected a mapping",
        ),
        (
            {"stages": [{"name": "a", "strategy_params": ["shuffle"]}]},
            r"'stages\[0\]\.strategy_params': \['shuffle'\] \(expected a mapping",
        ),
        ({"stages": [{"name": "a"}, {"name": "a"}]}, "names unique"),
        ({"stages": [{"name": "a", "weight_multipliers": {"shiny": 2}}]}, "shiny"),
        ({"window": 1}, "'window': 1"),
        ({"prerequisite_threshold": 1.5}, "'prerequisite_threshold'"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, data, match):
    f = tmp_path / "cur.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match) as info:
        load_curriculum_config(f)
    assert str(info.value).startswith(f"{f}: ")


def test_bad_file_syntax(tmp_path):
    f = tmp_path / "cur.json"
    f.write_text("{bad")
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_curriculum_config(f)
    pytest.importorskip("yaml")
    g = tmp_path / "cur.yaml"
    g.write_text("stages: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_curriculum_config(g)


@pytest.mark.parametrize("name", ["cur.YAML", "cur.Yml", "cur.yMl", ".yaml", ".YML"])
def test_a_yaml_suffix_in_any_case_is_read_as_yaml(tmp_path, name):
    # it was read as JSON ("invalid JSON"), while the training config reader lowercases it;
    # so was a file named just ".yaml", whose Path.suffix is ""
    pytest.importorskip("yaml")
    f = tmp_path / name
    f.write_text("window: 20\n")
    assert load_curriculum_config(f).window == 20


@pytest.mark.parametrize(
    "name,text", [("cur.json", '{"window": 20}'), ("cur.yaml", "window: 20\n")]
)
def test_a_config_starting_with_a_utf8_bom_is_read_in_either_format(tmp_path, name, text):
    # a JSON one was refused ("Unexpected UTF-8 BOM") while a YAML one was read
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    f = tmp_path / name
    f.write_text("\ufeff" + text, encoding="utf-8")
    assert load_curriculum_config(f).window == 20
    # a second one is refused by name: YAML read it, JSON said "decode using utf-8-sig"
    f.write_text("\ufeff\ufeff" + text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"starts with 2 UTF-8 byte order marks") as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value, info.value.source) == ("file", str(f), str(f))


@pytest.mark.parametrize(
    "name,text,got",
    [
        ("cur.yaml", "window: 2020-02-30\n", "cannot read '2020-02-30'"),
        ("cur.json", '{"window": ' + "9" * 5000 + "}", "an integer too long to read"),
        # a raw KeyError; and a ValueError where the error printed the 4,800-digit int
        ("cur.yaml", "window: !!bool maybe\n", "cannot read 'maybe' \\(not a valid !!bool"),
        ("cur.yaml", "window: 0x" + "f" * 4000 + "\n", "more than 4,300 decimal digits"),
    ],
)
def test_a_value_the_parser_cannot_build_is_named_as_such(tmp_path, name, text, got):
    # YAML's was called "invalid JSON"; JSON's told to call sys.set_int_max_str_digits()
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ConfigError, match=got) as info:
        load_curriculum_config(f)
    assert "invalid JSON" not in str(info.value) and "sys.set_int" not in str(info.value)
    assert info.value.source == str(f)
    # named as the source and the value of 'file'; a YAML one was named a third time, in the
    # reason (the parser's own message, which named the file too)
    assert str(f) not in info.value.reason and str(info.value).count(str(f)) == 2


@pytest.mark.parametrize(
    "name,text",
    [("cur.json", '{"prerequisite_threshold": 1e400}'), ("cur.yaml", "window: 1.0e+400\n")],
)
def test_a_number_past_a_floats_range_is_named_by_file_and_key(tmp_path, name, text):
    # read as inf, then called "expected an integer" or "in [0, 1]" with the value inf
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ConfigError, match="too large for a float") as info:
        load_curriculum_config(f)
    key, _, literal = text.strip('{}"\n').partition(": ")
    assert (info.value.key, info.value.value) == (key.strip('"'), literal)
    assert info.value.source == str(f)


def test_a_yaml_float_without_a_dot_is_a_float_as_in_a_training_config(tmp_path):
    # YAML 1.1 (PyYAML's safe loader) read 1e-3 as the string '1e-3': a ConfigError "expected a
    # finite number" for a threshold the user wrote as a number; the train reader reads a float
    pytest.importorskip("yaml")
    f = tmp_path / "cur.yaml"
    f.write_text(
        "prerequisite_threshold: 5e-1\nstages:\n  - name: a\n    strategy: frontier_prioritized\n"
        "    strategy_params: {urgency_threshold: 25E-2, safety_boost_factor: 2e0}\n"
        "    weight_multipliers: {safety_critical: 1e1}\n"
        "    rules: [{metric: error_rate, op: '<=', threshold: -2E-4}]\n"
    )
    config = load_curriculum_config(f)
    stage = config.stages[0]
    assert config.prerequisite_threshold == 0.5 and stage.rules[0].threshold == -2e-4
    assert stage.weight_multipliers == {"safety_critical": 10.0}
    assert stage.strategy_params["urgency_threshold"] == 0.25
    assert stage.strategy_params["safety_boost_factor"] == 2.0
    f.write_text("prerequisite_threshold: 1e400\n")  # was the string '1e400', "in [0, 1]"
    with pytest.raises(ConfigError, match=r"too large for a float \(line 1\)") as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value, info.value.source) == (
        "prerequisite_threshold",
        "1e400",
        str(f),
    )


@pytest.mark.parametrize(
    "text,got",
    [
        ("window: &x [*x]\n", "recursive YAML alias at line 1"),
        ("window: 1\nwindow: 2\n", "duplicate key: given at line 1 and line 2"),
    ],
)
def test_a_yaml_error_names_the_file_as_a_json_one_does(tmp_path, text, got):
    pytest.importorskip("yaml")
    f = tmp_path / "cur.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=got) as info:
        load_curriculum_config(f)
    assert info.value.source == str(f) and str(f) not in info.value.reason


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_config_that_is_not_utf8_is_a_config_error_naming_the_file(tmp_path, suffix):
    f = tmp_path / f"cur{suffix}"
    f.write_bytes(b"stages:\n  - name: w\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match=r"cannot read.*utf-8") as info:
        load_curriculum_config(f)
    assert (info.value.key, info.value.value) == ("path", str(f))


def test_mean_return_metric_and_rule():
    from gymcurric.datapacks import StageSpec, TransitionRule

    cfg = DataPackCurriculumConfig(
        window=4,
        stages=(
            StageSpec("a", rules=(TransitionRule("mean_return", 5.0, ">="),)),
            StageSpec("b"),
        ),
    )
    cur = DataPackCurriculum(cfg)
    cur.update_diagnostics(success=True)  # no return reported: not counted
    assert cur.metrics()["mean_return"] is None
    for r in (4.0, 6.0, 4.0):
        assert cur.update_diagnostics(success=True, return_=r) is None
    assert cur.metrics()["mean_return"] == pytest.approx(14.0 / 3)
    assert cur.update_diagnostics(success=True, return_=10.0) == "b"  # (4+6+4+10)/4 >= 5
    state = cur.state_dict()
    assert "return" in state["arrays"]
    other = DataPackCurriculum(cfg)
    other.load_state_dict(state)
    assert other.get_diagnostics() == cur.get_diagnostics()


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("window: 20\nwindow: 30\n", "window", (1, 2)),
        ("stages:\n  - name: a\n    strategy: balanced\n    strategy: tag_aware\n",
         "stages[0].strategy", (3, 4)),
        ("stages:\n  - name: a\n    filters: {max_tier: 1, max_tier: 2}\n",
         "stages[0].filters.max_tier", (3, 3)),
    ],
)  # fmt: skip
def test_duplicate_keys_are_config_errors_in_gymcurric_format_too(tmp_path, text, key, lines):
    pytest.importorskip("yaml")
    f = tmp_path / "cur.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(f)
    err = info.value
    assert (err.key, err.source) == (key, str(f))
    assert f"line {lines[1]}" in err.reason and f"line {lines[0]}" in err.reason, err.reason
    assert str(err).startswith(f"{f}: ")
    # a YAML merge key is not a duplicate: an explicit key overrides the merged one
    f.write_text("base: &b {name: a, strategy: balanced}\nstages:\n  - {<<: *b, name: z}\n")
    with pytest.raises(ConfigError, match="'base'"):  # the unknown key, not a duplicate
        load_curriculum_config(f)
    g = tmp_path / "cur.json"
    g.write_text('{"window": 20, "window": 30}')
    with pytest.raises(ConfigError, match=r"'window'.*duplicate key: given twice") as info:
        load_curriculum_config(g)
    assert (info.value.key, info.value.source) == ("window", str(g))
    assert str(info.value).startswith(f"{g}: ")
    # named by its dotted path, as in YAML (the key alone, 'max_tier', before)
    g.write_text('{"stages": [{"name": "a", "filters": {"max_tier": 1, "max_tier": 2}}]}')
    with pytest.raises(ConfigError, match=r"'stages\[0\]\.filters\.max_tier': 'max_tier'"):
        load_curriculum_config(g)


def test_a_json_curriculum_config_is_decoded_once(tmp_path, json_decodes):
    # the duplicate-key check decoded the text a second time (json.loads with a hook)
    g = tmp_path / "cur.json"
    g.write_text('{"window": 20}')
    assert load_curriculum_config(g).window == 20
    assert json_decodes.count('{"window": 20}') == 1


EMPTY_CONFIGS = [
    ("cur.yaml", ""),
    ("cur.yml", "# the stages come later\n\n   \n"),
    ("cur.yaml", "  \n\t\n"),  # a tab: a YAML syntax error before
    ("cur.yaml", "---\n# nothing\n"),  # an empty YAML document
    ("cur.json", ""),
    ("cur.json", " \n\n"),
]


@pytest.mark.parametrize(("name", "text"), EMPTY_CONFIGS)
def test_an_empty_curriculum_config_file_is_an_error_naming_it(tmp_path, name, text):
    # it loaded the shipped default without a word, hiding the mistake (a JSON one was
    # "invalid JSON (Expecting value ...)")
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="the file is empty") as info:
        load_curriculum_config(path)
    assert (info.value.key, info.value.value, info.value.source) == ("file", str(path), str(path))
    with pytest.raises(ConfigError, match="the file is empty"):
        DataPackCurriculum(path)


@pytest.mark.parametrize("comment", ["// to do", "# to do"])
def test_comment_lines_are_not_an_empty_curriculum_config_where_they_are_not_comments(
    tmp_path, comment
):
    # JSON has no comments, and YAML reads "// ..." as text: such a file was "the file is
    # empty: it holds ... only comments", while the same lines before a setting were invalid
    g = tmp_path / "cur.json"
    for text in (f"{comment}\n", f'{comment}\n{{"window": 20}}\n'):
        g.write_text(text)
        with pytest.raises(ConfigError, match=r"invalid JSON \(Expecting value") as info:
            load_curriculum_config(g)
        assert (info.value.key, info.value.source) == ("file", str(g))
    f = tmp_path / "cur.yaml"
    f.write_text("// to do\n")
    with pytest.raises(ConfigError, match="expected a mapping") as info:
        load_curriculum_config(f)
    assert (info.value.value, info.value.source) == ("// to do", str(f))


def test_a_json_null_curriculum_config_is_not_a_mapping_rather_than_an_empty_file(tmp_path):
    # it was "the file is empty: it holds no settings (only whitespace, YAML comments or an
    # empty YAML document)", none of which a JSON file holding null is
    g = tmp_path / "cur.json"
    g.write_text("null\n")
    with pytest.raises(ConfigError, match="expected a mapping") as info:
        load_curriculum_config(g)
    assert (info.value.value, info.value.source) == (None, str(g))


def test_no_curriculum_config_file_is_the_shipped_default(tmp_path):
    assert DataPackCurriculum().config == DataPackCurriculumConfig()
    path = tmp_path / "cur.yaml"
    path.write_text("{}\n")  # an explicit empty mapping holds settings: none changed
    assert load_curriculum_config(path) == DataPackCurriculumConfig()
