import copy
import json
import re

import numpy as np
import pytest

from gymcurric.datapacks import (
    LOG_FILENAME,
    DataPack,
    DataPackCurriculum,
    DataPackRLSampler,
    FrontierPrioritizedStrategy,
)
from gymcurric.errors import ConfigError

from .packs import minimal, record


def _packs():
    packs = [DataPack.from_dict(record(f"r{i}", tier=i % 3)) for i in range(30)]
    packs += [
        DataPack.from_dict(
            minimal(
                f"m{i}",
                i % 3,
                enrichment={"novelty": (i % 10) / 10},
                supervision_hints={"prerequisite_tags": ["grasp"]} if i < 5 else {},
            )
        )
        for i in range(60)
    ]
    return packs


def _strip(logs):
    return [{k: v for k, v in e.items() if k != "timestamp"} for e in logs]


def _drive(sampler, curriculum, n=30):
    ids = []
    for i in range(n):
        ids.append([p.pack_id for p in sampler.sample_batch(8)])
        if curriculum is not None:
            curriculum.update_diagnostics(
                success=True, error=i % 4 == 0, tag_results={"grasp": True}
            )
    return ids


@pytest.mark.parametrize("with_curriculum", [False, True])
def test_same_seed_same_batches_logs_and_diagnostics(with_curriculum):
    runs = []
    for _ in range(2):
        cur = DataPackCurriculum() if with_curriculum else None
        s = DataPackRLSampler(_packs(), curriculum=cur, seed=5)
        runs.append((_drive(s, cur), _strip(s.logs), s.get_diagnostics()))
    assert runs[0] == runs[1]
    other = DataPackRLSampler(_packs(), seed=6)
    assert _drive(other, None) != runs[0][0]


def test_log_entry_content():
    s = DataPackRLSampler(_packs(), strategy=FrontierPrioritizedStrategy(), seed=0)
    batch = s.sample_batch(10)
    e = json.loads(json.dumps(s.logs[-1]))
    assert e["sample_id"] == 0 and e["strategy"] == "frontier_prioritized"
    assert e["strategy_params"]["urgent_ratio"] == 0.8 and e["seed"] == 0
    assert e["episode_count"] is None and e["curriculum_stage"] is None and e["batch_size"] == 10
    assert [x["pack_id"] for x in e["sampled_episodes"]] == [p.pack_id for p in batch]
    u = FrontierPrioritizedStrategy().urgency(s.table)
    rows = [s.table.index(p.pack_id) for p in batch]
    assert [x["urgency_score"] for x in e["sampled_episodes"]] == pytest.approx(u[rows].tolist())
    d = e["diagnostics"]
    tiers = [p.tier for p in batch]
    assert d["tier_distribution"] == {str(t): tiers.count(t) for t in (0, 1, 2)}
    assert d["avg_urgency"] == pytest.approx(u[rows].mean())
    assert d["avg_novelty"] == pytest.approx(np.mean([p.enrichment.novelty for p in batch]))
    assert d["safety_critical_count"] == sum(p.supervision_hints.safety_critical for p in batch)
    fragile = sum(p.enrichment.fragility in ("high", "critical") for p in batch)
    assert d["fragile_object_count"] == fragile == d["tag_family_counts"]["fragile_objects"]
    # tag_coverage: the share of the batch carrying each kind of tag (the spec's §2.4)
    assert d["tag_coverage"]["novelty"] == sum(p.enrichment.novelty > 0 for p in batch) / 10
    assert d["tag_coverage"]["fragility"] == fragile / 10  # record(): "high"; minimal(): none
    assert set(d["tag_coverage"]) == {
        "fragility", "risk", "affordance", "efficiency", "novelty", "intervention"
    }  # fmt: skip
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", e["timestamp"])


def test_curriculum_stage_filters_and_prerequisites_apply():
    cur = DataPackCurriculum()
    s = DataPackRLSampler(_packs(), curriculum=cur, seed=0)
    for _ in range(20):
        batch = s.sample_batch(16)
        assert all(p.tier <= 1 for p in batch)  # warmup: max_tier 1
        assert not any(p.supervision_hints.prerequisite_tags for p in batch)  # nothing satisfied
    assert s.logs[-1]["curriculum_stage"] == "warmup" and s.logs[-1]["episode_count"] == 0
    cur.set_stage("frontier", episode=10)
    s.sample_batch(4)
    assert (
        s.logs[-1]["curriculum_stage"],
        s.logs[-1]["strategy"],
        s.logs[-1]["episode_count"],
    ) == (
        "frontier",
        "frontier_prioritized",
        10,
    )
    assert s.get_diagnostics()["curriculum"]["stage"] == "frontier"


def test_reset_and_state_dict_reproduce():
    s = DataPackRLSampler(_packs(), seed=1)
    first = _drive(s, None, 5)
    s.reset()
    assert _drive(s, None, 5) == first and len(s.logs) == 5
    state = s.state_dict()
    nxt = _drive(s, None, 3)
    t = DataPackRLSampler(_packs(), seed=99)
    t.load_state_dict(state)
    assert _drive(t, None, 3) == nxt
    s.reset(seed=2)
    assert _drive(s, None, 5) != first


def test_write_logs_appends_only_new_entries(tmp_path):
    s = DataPackRLSampler(_packs(), seed=0)
    s.sample_batch(3)
    path = s.write_logs(tmp_path / "run")
    assert path.name == LOG_FILENAME
    s.sample_batch(3)
    s.sample_batch(3)
    s.write_logs(tmp_path / "run")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [e["sample_id"] for e in lines] == [0, 1, 2]


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True, None])
def test_a_bad_seed_is_a_config_error_naming_it(seed):
    with pytest.raises(ConfigError, match=r"'seed'") as info:
        DataPackRLSampler(_packs(), seed=seed)
    assert info.value.value == seed
    s = DataPackRLSampler(_packs(), seed=np.int64(4))  # numpy integers are seeds too
    assert s.seed == 4 and isinstance(s.seed, int)
    if seed is not None:  # reset(seed=None) keeps the seed
        with pytest.raises(ConfigError, match=r"'seed'"):
            s.reset(seed=seed)
        assert s.seed == 4


def test_write_logs_into_an_unwritable_place_names_the_run_dir(tmp_path):
    s = DataPackRLSampler(_packs(), seed=0)
    s.sample_batch(3)
    blocker = tmp_path / "a_file"
    blocker.write_text("kept")
    with pytest.raises(ConfigError, match="cannot write the sampling log") as info:
        s.write_logs(blocker)
    assert (info.value.key, info.value.value) == ("run_dir", str(blocker))
    assert blocker.read_text() == "kept"
    path = s.write_logs(tmp_path / "run")  # nothing was counted as written by the failed call
    assert [json.loads(x)["sample_id"] for x in path.read_text().splitlines()] == [0]


def test_a_state_that_does_not_fit_is_refused_leaving_the_sampler_as_it_was():
    s = DataPackRLSampler(_packs(), seed=3)
    s.sample_batch(4)
    before = copy.deepcopy(s.state_dict())
    good = s.state_dict()
    for bad, key in (
        ({"x": 1}, "'seed'"),
        ({**good, "seed": -2}, "'seed'"),
        ({**good, "rng": {"bit_generator": "nope"}}, "'rng'"),
        ({**good, "sample_id": "a"}, "'sample_id'"),
        ({**good, "tier_counts": [1, 2]}, "'tier_counts'"),
        ({**good, "kind_counts": [1]}, "'kind_counts'"),
    ):
        with pytest.raises(ConfigError, match=key):
            s.load_state_dict(bad)
        after = s.state_dict()
        assert after["seed"] == 3 and after["rng"] == before["rng"], bad
        assert after["sample_id"] == 1
        for k in ("tier_counts", "family_counts", "kind_counts"):
            assert np.array_equal(after[k], before[k]), (bad, k)
    with pytest.raises(ConfigError, match="expected a mapping"):
        s.load_state_dict(None)


@pytest.mark.parametrize("bad", ["x", -1, 2.5, True])
def test_a_bad_kinds_counted_is_refused_before_anything_changes(bad):
    # kinds_counted was read last, after the seed, generator and counts had been replaced
    s = DataPackRLSampler(_packs(), seed=3)
    s.sample_batch(4)
    before = copy.deepcopy(s.state_dict())
    other = DataPackRLSampler(_packs(), seed=9)
    other.sample_batch(7)
    with pytest.raises(ConfigError, match=r"load_state_dict: .*'kinds_counted'"):
        s.load_state_dict({**other.state_dict(), "kinds_counted": bad})
    after = s.state_dict()
    assert (after["seed"], after["rng"], after["sample_id"]) == (3, before["rng"], 1)
    assert after["kinds_counted"] == before["kinds_counted"]
    for k in ("tier_counts", "family_counts", "kind_counts"):
        assert np.array_equal(after[k], before[k]), k
    state = other.state_dict()
    del state["kinds_counted"]  # absent (an older state): the batches counted
    s.load_state_dict(state)
    assert s.state_dict()["kinds_counted"] == 7


@pytest.mark.parametrize("params", [[("shuffle", True)], 5])
@pytest.mark.parametrize("how", ["specification", "strategy object"])
def test_strategy_params_that_are_not_a_mapping_are_a_config_error_on_every_path(params, how):
    # refused as make_strategy refuses it: also before the specification's defaults are
    # merged in, and beside a strategy given as an object (a raw TypeError on both paths)
    import yaml

    from gymcurric.datapacks import DataPackCurriculum, make_strategy

    from .spec import SPEC_YAML

    if how == "specification":
        kwargs = {
            "curriculum": DataPackCurriculum(yaml.safe_load(SPEC_YAML)),
            "strategy": "tag_aware",
        }
        reason = "expected a mapping of tag_aware's parameter names"
    else:
        kwargs = {"strategy": make_strategy("balanced")}
        reason = "expected a mapping of the strategy's parameter names"
    with pytest.raises(ConfigError, match=rf"DataPackRLSampler: .*'strategy_params'.*{reason}"):
        DataPackRLSampler(_packs(), strategy_params=params, **kwargs)


def test_sampler_never_mutates_datapacks():
    packs = _packs()
    before = copy.deepcopy([p.to_dict() for p in packs])
    cur = DataPackCurriculum()
    s = DataPackRLSampler(packs, curriculum=cur, seed=0)
    _drive(s, cur, 50)
    for stage in ("skill_building", "frontier", "fine_tuning"):
        cur.set_stage(stage)
        _drive(s, cur, 10)
    assert [p.to_dict() for p in packs] == before
    assert all(a is b for a, b in zip(s.table.records, packs, strict=True))


def test_empty_or_all_ineligible():
    with pytest.raises(ConfigError, match="at least one datapack"):
        DataPackRLSampler([])
    packs = [DataPack.from_dict(minimal("x", 2))]
    s = DataPackRLSampler(packs, curriculum=DataPackCurriculum())  # warmup excludes tier 2
    with pytest.raises(ConfigError, match="no eligible datapack"):
        s.sample_batch(1)
    assert np.array_equal(s.get_diagnostics()["datapacks_sampled"], 0)


def test_eligibility_follows_newly_satisfied_prerequisites():
    cur = DataPackCurriculum()
    s = DataPackRLSampler(_packs(), curriculum=cur, seed=0)
    gated = {f"m{i}" for i in range(5) if i % 3 <= 1}  # tiers 0-1 that need "grasp"
    seen = {p.pack_id for _ in range(20) for p in s.sample_batch(16)}
    assert not seen & gated
    for _ in range(10):  # the default needs 10 attempts above 0.9 success
        cur.update_diagnostics(success=True, tag_results={"grasp": True})
    assert "grasp" in cur.satisfied_tags and cur.stage == "warmup"
    seen = {p.pack_id for _ in range(40) for p in s.sample_batch(16)}
    assert seen & gated  # the cached eligibility was recomputed
    assert all(e["weight"] > 0 for e in s.logs[-1]["sampled_episodes"])


def _as_saved(state, tmp_path):
    """``state`` through a JSON file, as a checkpoint would hold it (arrays as lists)."""
    path = tmp_path / "sampler_state.json"
    path.write_text(
        json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in state.items()})
    )
    return json.loads(path.read_text())


def test_a_state_saved_before_tag_kinds_recounts_its_totals_from_the_log(tmp_path):
    from gymcurric.errors import GymcurricWarning

    s = DataPackRLSampler(_packs(), curriculum=DataPackCurriculum(), seed=3)
    for _ in range(6):
        s.sample_batch(8)
    s.write_logs(tmp_path)
    state = s.state_dict()
    # as saved before the tag kinds and the last three tag families existed
    old = {k: v for k, v in state.items() if k not in ("kind_counts", "kinds_counted")}
    old["family_counts"] = state["family_counts"][:9]
    old = _as_saved(old, tmp_path)
    expect = s.get_diagnostics()
    assert 0 < max(expect["tag_coverage"].values()) <= 1
    fresh = DataPackRLSampler(_packs(), curriculum=DataPackCurriculum(), seed=99)
    fresh.load_state_dict(old, sampling_log=tmp_path / LOG_FILENAME)
    assert fresh.get_diagnostics() == expect
    # a log written under the old field names ("samples") is read too
    log = tmp_path / LOG_FILENAME
    log.write_text(log.read_text().replace('"sampled_episodes"', '"samples"'))
    fresh = DataPackRLSampler(_packs(), curriculum=DataPackCurriculum(), seed=99)
    fresh.load_state_dict(old, sampling_log=log)
    assert fresh.get_diagnostics() == expect
    # and it goes on exactly
    s.sample_batch(8)
    fresh.sample_batch(8)
    assert _strip(fresh.logs) == _strip(s.logs[-1:])
    assert fresh.get_diagnostics()["tag_coverage"] == s.get_diagnostics()["tag_coverage"]
    # without the log (or with one that does not fit) the shares cover the batches drawn
    # after the resume, and a warning says so; never shares too low
    for log_arg in (None, tmp_path / "absent.jsonl"):
        blind = DataPackRLSampler(_packs(), curriculum=DataPackCurriculum(), seed=99)
        with pytest.warns(GymcurricWarning, match="tag_coverage"):
            blind.load_state_dict(old, sampling_log=log_arg)
        assert set(blind.get_diagnostics()["tag_coverage"].values()) == {0.0}
        blind.sample_batch(8)
        assert (
            blind.get_diagnostics()["tag_coverage"] == blind.logs[-1]["diagnostics"]["tag_coverage"]
        )
    # a state with the kind counts needs no log
    fresh = DataPackRLSampler(_packs(), curriculum=DataPackCurriculum(), seed=99)
    fresh.load_state_dict(_as_saved(state, tmp_path))
    assert fresh.get_diagnostics() == expect
