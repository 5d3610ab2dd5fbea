"""The specification's curriculum config (§4.4) as written, get_schedule and its §6.3 tests."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from gymcurric.datapacks import (
    DataPack,
    DataPackCurriculum,
    DataPackCurriculumConfig,
    DatapackTable,
    StageSpec,
    load_curriculum_config,
)
from gymcurric.errors import ConfigError

from .spec import SPEC_HINTS, SPEC_YAML, compute_urgency, filter_by_prerequisites, spec_record


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "curriculum_dishwashing.yaml"
    path.write_text(SPEC_YAML)
    return path


def test_the_spec_yaml_loads_verbatim(spec_file):
    cfg = load_curriculum_config(spec_file)
    warmup, skill = cfg.stages
    assert (warmup.name, skill.name) == ("warmup", "skill_building")
    assert warmup.strategy_params["tier_ratios"] == {0: 0.5, 1: 0.5, 2: 0.0}
    assert warmup.weight_multipliers == {
        "safety_critical": 2.0,
        "fragile_high": 0.5,
        "fragile_critical": 0.0,
    }
    f = warmup.filters
    assert (f.max_tier, f.exclude_tags, f.curriculum_stage) == (
        1,
        ("fragile_critical", "novel_affordance"),
        "early",
    )
    (rule,) = warmup.rules
    assert (rule.metric, rule.op, rule.threshold, rule.window) == ("error_rate", "<", 0.05, 100)
    assert (warmup.fallback_episode, warmup.fallback_episodes) == (1000, None)
    assert skill.strategy == "tag_aware" and skill.strategy_params["tag_quotas"]["baseline"] == 0.2
    assert skill.strategy_params["allow_overlap"] is True  # the document's default
    # the same config as a dict, and as a path, give the same curriculum
    as_dict = DataPackCurriculum(yaml.safe_load(SPEC_YAML))
    assert as_dict.config == cfg == DataPackCurriculum(str(spec_file)).config
    # and it round-trips through gymcurric's own (list) format
    assert DataPackCurriculumConfig.from_dict(cfg.to_dict()) == cfg


def test_the_spec_warmup_stage_filters_and_weights_spec_records():
    cur = DataPackCurriculum(yaml.safe_load(SPEC_YAML))
    rng = np.random.default_rng(2)
    recs = [spec_record(f"p{i}", rng) for i in range(300)]
    table = DatapackTable([DataPack.from_dict(r) for r in recs])
    w = cur.eligible_weights(table)
    for r, wi in zip(recs, w, strict=True):
        e = r["enrichment"]
        levels = {t["fragility_level"] for t in e["fragility_tags"]}
        novel = any(not t["demonstrated"] for t in e["affordance_tags"])
        out = (
            r["tier"] > 1
            or "critical" in levels
            or novel
            or e["supervision_hints"]["curriculum_stage"] != "early"
        )
        expect = 0.0 if out else 1.0
        if not out and e["supervision_hints"]["safety_critical"]:
            expect *= 2.0
        if not out and "high" in levels:
            expect *= 0.5
        assert wi == expect, r
    assert 0 < (w > 0).sum() < len(recs)


def _write(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "key", "reason"),
    [
        ("type: rolling_error_rate", "type: error_spike", "stages.warmup.transition_rule.type",
         r"expected one of \['rolling_error_rate', 'affordance_success_rate', "
         r"'mpl_improvement_rate', 'mean_return'\]"),
        ("      threshold: 0.05\n", "", "stages.warmup.transition_rule.threshold",
         "required key is missing"),
        ("      window: 100", "      window: 1", "stages.warmup.transition_rule.window",
         "expected an integer >= 2"),
        ("      window: 100", "      windows: 100", "stages.warmup.transition_rule.windows",
         "unknown key"),
        ("fallback_episode: 1000", "fallback_episode: -1", "stages.warmup.fallback_episode",
         "expected an integer >= 0"),
        ("fallback_episode: 1000", "fallback_episodes: 1000", "stages.warmup.fallback_episodes",
         "unknown key; expected one of"),
        ('["fragile_critical", "novel_affordance"]', '["fragile"]',
         "stages.warmup.filter_constraints.exclude_tags[0]", "expected a selector among"),
        ("fragile_high: 0.5", "fragile_high: -0.5",
         "stages.warmup.weight_multipliers['fragile_high']", "expected a finite number >= 0"),
        ("{0: 0.5, 1: 0.5, 2: 0.0}", "{0: 0.5, 1: 0.6, 2: 0.0}",
         "stages.warmup.strategy_params.tier_ratios", "values must sum to 1.0"),
        ("max_tier: 1", "max_tier: 3", "stages.warmup.filter_constraints.max_tier",
         r"expected a tier in \{0, 1, 2\}"),
        ("strategy: tag_aware", "strategy: curious", "stages.skill_building.strategy",
         "expected one of"),
        ("baseline: 0.2", "baseline: 0.3", "stages.skill_building.strategy_params.tag_quotas",
         "values must sum to 1.0"),
        ('curriculum_stage: "early"', "curriculum_stage: 3",
         "stages.warmup.filter_constraints.curriculum_stage", "expected a stage name"),
        ("type: rolling_error_rate", "type: [rolling_error_rate]",
         "stages.warmup.transition_rule.type", "expected one of"),
        ("    weight_multipliers:\n      safety_critical: 2.0\n      fragile_high: 0.5\n"
         "      fragile_critical: 0.0", "    weight_multipliers: safety_critical",
         "stages.warmup.weight_multipliers", "expected a mapping of tag family to factor"),
    ],
)  # fmt: skip
def test_malformed_spec_configs_name_file_key_and_value(tmp_path, old, new, key, reason):
    assert old in SPEC_YAML
    path = _write(tmp_path, SPEC_YAML.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(path)
    err = info.value
    assert (err.key, err.source) == (key, str(path)), str(err)
    assert str(path) in str(err)
    assert re.search(reason, err.reason), err.reason


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("stages: {}", "stages"),
        ("stages: {warmup: [balanced]}", "stages.warmup"),
        ("stages: {warmup: {transition_rule: 0.05}}", "stages.warmup.transition_rule"),
        ("stages: {warmup: {strategy_params: [1]}}", "stages.warmup.strategy_params"),
        ("stages: {warmup: {}}\nwindows: 3", "windows"),
    ],
)
def test_malformed_spec_config_shapes(tmp_path, text, key):
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(_write(tmp_path, text))
    assert info.value.key == key


def test_spec_transitions_by_rule_and_by_the_absolute_fallback_episode():
    config = yaml.safe_load(SPEC_YAML)
    calm = DataPackCurriculum(config)
    for _ in range(100):
        calm.update_diagnostics(success=True, error=False)
    assert calm.stage == "skill_building" and calm.transitions[-1]["reason"] == "rules"
    noisy = DataPackCurriculum(config)
    for i in range(999):
        noisy.update_diagnostics(success=True, error=i % 10 == 0)  # 10 % errors: rule fails
    assert noisy.stage == "warmup"
    noisy.update_diagnostics(success=True, error=True)
    assert noisy.stage == "skill_building" and noisy.transitions[-1] == {
        "episode": 1000,
        "from": "warmup",
        "to": "skill_building",
        "reason": "fallback",
    }
    # fallback_episode counts the curriculum's episodes, not the stage's: a stage entered late
    # by hand is left at the same episode
    late = DataPackCurriculum(
        {"stages": {"a": {"fallback_episode": 10}, "b": {"fallback_episode": 12}, "c": {}}}
    )
    late.set_stage("b", episode=11)
    late.update_diagnostics(success=True)
    assert late.stage == "c" and late.episode == 12


def test_get_schedule_past_present_and_future():
    cur = DataPackCurriculum(yaml.safe_load(SPEC_YAML))
    assert [cur.get_schedule(e).stage for e in (0, 999, 1000, 5000)] == [
        "warmup",
        "warmup",
        "skill_building",
        "skill_building",
    ]
    assert cur.get_schedule(7).episode == 7 and cur.get_schedule(0) == cur.schedule()
    assert cur.episode == 0 and cur.stage == "warmup"  # a query changes nothing
    for _ in range(100):
        cur.update_diagnostics(success=True, error=False)  # rule: leaves warmup at 100
    assert cur.get_schedule(99).stage == "warmup" and cur.get_schedule(100).stage == (
        "skill_building"
    )
    no_auto = DataPackCurriculum({**yaml.safe_load(SPEC_YAML), "auto_advance": False})
    assert no_auto.get_schedule(5000).stage == "warmup"
    for bad in (-1, 2.5, "5000", True):
        with pytest.raises(ConfigError, match=r"get_schedule.*'episode'"):
            cur.get_schedule(bad)


def test_spec_determinism_test_2_runs_as_written():
    config = yaml.safe_load(SPEC_YAML)
    datapacks = [DataPack.from_dict(spec_record(f"p{i}", np.random.default_rng(i))) for i in (1, 2)]

    # §6.3, Test 2, verbatim
    def test_curriculum_determinism():
        curriculum1 = DataPackCurriculum(config, datapacks)
        schedule1 = curriculum1.get_schedule(5000)

        curriculum2 = DataPackCurriculum(config, datapacks)
        schedule2 = curriculum2.get_schedule(5000)

        assert schedule1 == schedule2

    test_curriculum_determinism()
    schedule = DataPackCurriculum(config, datapacks).get_schedule(5000)
    assert schedule.to_dict()["stage"] == "skill_building"
    assert schedule != DataPackCurriculum(config, datapacks).get_schedule(10)  # can differ


def test_gymcurric_configs_and_checkpoints_are_unchanged():
    d = DataPackCurriculumConfig().to_dict()  # what checkpoints hold: no new keys
    assert all("fallback_episode" not in s for s in d["stages"])
    assert all("window" not in r for s in d["stages"] for r in s["rules"])
    cur = DataPackCurriculum()
    assert cur.state_dict()["arrays"]["error"].shape == (100,)
    with pytest.raises(ConfigError, match=r"stages.*expected a list"):
        DataPackCurriculumConfig.from_dict({"stages": "warmup"})


def test_spec_prerequisites_gate_a_datapack_until_both_tags_are_satisfied():
    rng = np.random.default_rng(5)
    recs = [spec_record(f"p{i}", rng) for i in range(6)]
    for r in recs[:3]:
        r["enrichment"]["supervision_hints"].update(SPEC_HINTS)
    packs = [DataPack.from_dict(r) for r in recs]
    stage = StageSpec("only", "balanced")
    cur = DataPackCurriculum(
        DataPackCurriculumConfig(stages=(stage,), prerequisite_min_attempts=2), packs
    )
    table = DatapackTable(packs)

    def eligible():
        return {p.pack_id for p, w in zip(packs, cur.eligible_weights(table), strict=True) if w > 0}

    def reference(satisfied):
        return {r["pack_id"] for r in filter_by_prerequisites(recs, satisfied)}

    assert eligible() == reference(set()) == {"p3", "p4", "p5"}
    for _ in range(2):
        cur.update_diagnostics(success=True, tag_results={"basic_drawer_open": True})
    assert eligible() == reference({"basic_drawer_open"}) == {"p3", "p4", "p5"}
    for _ in range(2):
        cur.update_diagnostics(success=True, tag_results={"fragile_object_awareness": True})
    satisfied = {"basic_drawer_open", "fragile_object_awareness"}
    assert eligible() == reference(satisfied) == {f"p{i}" for i in range(6)}


@pytest.mark.parametrize(
    "stages",
    [
        {"a": {"fallback_episode": 10}, "b": {"fallback_episode": 5}, "c": {}},
        {"a": {"fallback_episode": 0}, "b": {"fallback_episode": 0}, "c": {"fallback_episode": 3},
         "d": {}},
        {"a": {"fallback_episode": 4}, "b": {"fallback_episode": 4}, "c": {"fallback_episode": 9},
         "d": {}},
    ],
)  # fmt: skip
def test_get_schedule_projects_what_the_live_curriculum_does(stages):
    # a stage is played for at least one episode (the curriculum advances at most one stage
    # per finished episode), so a later fallback_episode <= an earlier one ends its stage one
    # episode after it began, in the projection as in the live run
    live = DataPackCurriculum({"stages": stages})
    projections = {0: DataPackCurriculum({"stages": stages})}
    played, left_at = [], []
    for e in range(16):
        played.append(live.stage)
        d = live.get_diagnostics()  # its estimate is exact without rules
        if d["episodes_to_next_stage"] is not None:
            left_at.append((e + d["episodes_to_next_stage"], d["next_stage"]))
        if e == 5:
            projections[5] = DataPackCurriculum({"stages": stages})
            projections[5].load_state_dict(live.state_dict())
        live.update_diagnostics(success=False, error=True)
    for start, cur in projections.items():
        assert [cur.get_schedule(e).stage for e in range(start, 16)] == played[start:], start
    assert [live.get_schedule(e).stage for e in range(16)] == played  # and from the history
    assert all(played[e] == stage for e, stage in left_at if e < 16)


def test_a_duplicate_stage_is_an_error_not_a_lost_stage(tmp_path):
    # PyYAML keeps the later of two equal keys: the first warmup stage would vanish silently
    text = SPEC_YAML.replace("  skill_building:", "  warmup:", 1)
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(path)
    err = info.value
    line = text.splitlines().index("  warmup:", 2) + 1
    assert (err.key, err.value, err.source) == ("stages.warmup", "warmup", str(path))
    assert f"line {line}" in err.reason and "line 2" in err.reason, err.reason
    with pytest.raises(ConfigError, match=r"'stages\.warmup\.strategy_params\.tier_ratios\.0'"):
        load_curriculum_config(_write(tmp_path, SPEC_YAML.replace("{0: 0.5,", "{0: 0.5, 0: 0.2,")))


def _spec_sampler(config, **kw):
    from gymcurric.datapacks import DataPackRLSampler

    rng = np.random.default_rng(3)
    recs = [spec_record(f"p{i:03d}", rng) for i in range(300)]
    for r in recs[:60]:  # enough for the §4.4 warmup stage's filters
        r["tier"] = int(r["tier"] > 0)
        r["enrichment"]["supervision_hints"]["curriculum_stage"] = "early"
        r["enrichment"]["fragility_tags"] = []
        r["enrichment"]["affordance_tags"] = [{"affordance": "grasp", "demonstrated": True}]
    packs = [DataPack.from_dict(r) for r in recs]
    return DataPackRLSampler(packs, DataPackCurriculum(config), **kw), recs


def test_the_sampling_strategy_is_the_default_for_stages_that_name_none():
    # the specification's §2.5: the sampler's strategy is a default the curriculum overrides
    config = yaml.safe_load(SPEC_YAML)
    config["stages"]["frontier"] = {"weight_multipliers": {"tier_2": 2.0}}  # names no strategy
    sampler, _ = _spec_sampler(config, strategy="frontier_prioritized", seed=42)
    seen = {}
    for stage in ("warmup", "skill_building", "frontier"):
        sampler.curriculum.set_stage(stage)
        sampler.sample_batch(16)
        seen[stage] = (sampler.logs[-1]["strategy"], sampler.logs[-1]["strategy_params"])
    assert seen["warmup"] == (
        "balanced",
        {"tier_ratios": {"0": 0.5, "1": 0.5, "2": 0.0}, "use_trust_weighting": True,
         "stratify_by": [], "shuffle": True},
    )  # fmt: skip
    assert seen["skill_building"][0] == "tag_aware"
    assert seen["skill_building"][1]["tag_quotas"]["demonstrated_affordance"] == 0.3
    # the default in a spec-format run takes §2.2.2's tier weights, and its own parameters
    assert seen["frontier"][0] == "frontier_prioritized"
    assert seen["frontier"][1]["tier_weights"] == {"0": 0.2, "1": 0.5, "2": 1.0}
    sampler, _ = _spec_sampler(
        config, strategy="frontier_prioritized", strategy_params={"urgent_ratio": 0.5}
    )
    sampler.curriculum.set_stage("frontier")
    sampler.sample_batch(4)
    params = sampler.logs[-1]["strategy_params"]
    assert (params["urgent_ratio"], params["tier_weights"]["0"]) == (0.5, 0.2)
    # without a sampling strategy, a stage that names none samples with balanced (§2.5)
    sampler, _ = _spec_sampler(config)
    sampler.curriculum.set_stage("frontier")
    sampler.sample_batch(4)
    assert sampler.logs[-1]["strategy"] == "balanced"


def test_in_gymcurric_format_the_sampling_strategy_still_overrides_every_stage():
    from gymcurric.datapacks import DataPackRLSampler

    packs = [DataPack(f"p{i}", "reach", "E-v0", i % 3) for i in range(30)]
    sampler = DataPackRLSampler(packs, DataPackCurriculum(), strategy="frontier_prioritized")
    for stage in ("warmup", "skill_building", "fine_tuning"):
        sampler.curriculum.set_stage(stage)
        sampler.sample_batch(4)
        entry = sampler.logs[-1]
        assert entry["strategy"] == "frontier_prioritized", stage
        assert entry["strategy_params"]["tier_weights"] == {"0": 0.3, "1": 0.6, "2": 1.0}


def test_strategy_params_need_the_stage_s_strategy_in_spec_format(tmp_path):
    path = _write(tmp_path, "stages: {warmup: {strategy_params: {tier_ratios: {0: 1.0}}}}")
    with pytest.raises(ConfigError) as info:
        load_curriculum_config(path)
    assert info.value.key == "stages.warmup.strategy_params"
    assert "name the strategy they are for" in info.value.reason


def test_spec_format_runs_log_the_spec_urgency_in_every_stage():
    config = yaml.safe_load(SPEC_YAML)
    for strategy in (None, "frontier_prioritized"):
        sampler, recs = _spec_sampler(config, strategy=strategy)
        by_id = {r["pack_id"]: r for r in recs}
        for stage in ("warmup", "skill_building"):  # balanced, tag_aware
            sampler.curriculum.set_stage(stage)
            sampler.sample_batch(32)
            entry = sampler.logs[-1]
            expect = [compute_urgency(by_id[s["pack_id"]]) for s in entry["sampled_episodes"]]
            got = [s["urgency_score"] for s in entry["sampled_episodes"]]
            assert got == pytest.approx(expect), (strategy, stage)
            assert entry["diagnostics"]["avg_urgency"] == pytest.approx(np.mean(expect))
