"""benchmarks/omnisafe_side_by_side.py without the OmniSafe venv: our side, records, summary.

The fixture ``data/omnisafe_ppolag_s0_*`` is a real OmniSafe 0.5.0 PPOLag run (seed 0, 4,000
steps in 2 epochs of 2,000, SafetyPointGoal1-v0) made with ``--lib omnisafe``: its
``progress.csv``, the episodes our runner recorded, and its per-epoch CPU times.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "omnisafe_side_by_side.py"
DATA = Path(__file__).resolve().parent / "data"
PROGRESS = DATA / "omnisafe_ppolag_s0_progress.csv"
EPISODES = DATA / "omnisafe_ppolag_s0_episodes.csv"
RUNNER_META = DATA / "omnisafe_ppolag_s0_runner.json"


@pytest.fixture(scope="module")
def side():
    return load_script("omnisafe_side_by_side")


@pytest.fixture(scope="module")
def records(side):
    import _omnisafe_records

    return _omnisafe_records


def _safety_gymnasium_or_skip() -> None:
    try:
        from gymcurric.envs.safety_gymnasium import make_safety_env

        make_safety_env("SafetyPointGoal1-v0").close()
    except Exception as exc:  # not installed, or not loadable on this stack
        pytest.skip(f"SafetyPointGoal1-v0 cannot be built in this venv: {exc!r}")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_gymcurric_side_tiny_budget(tmp_path, records):
    """200 steps in epochs of 100: two rows of the common schema, no episode finished yet."""
    _safety_gymnasium_or_skip()
    proc = _run(
        "--lib", "gymcurric", "--algo", "ppolag", "--seed", "3", "--steps", "200",
        "--steps-per-epoch", "100", "--out", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = records.read_rows(tmp_path / "gymcurric__ppolag__s3.csv")
    assert [r["env_steps"] for r in rows] == [100, 200]
    assert [r["epoch"] for r in rows] == [0, 1]
    assert all(r["episodes"] == 0 and math.isnan(r["ep_ret"]) for r in rows)
    assert rows[0]["wall_s"] < rows[1]["wall_s"]
    assert rows[1]["steps_per_s"] == pytest.approx(200 / rows[1]["wall_s"])
    assert rows[1]["lagrange_multiplier"] == pytest.approx(0.001)  # no J_c yet: λ unchanged
    meta = json.loads((tmp_path / "gymcurric__ppolag__s3.json").read_text())
    assert meta["torch_threads"] == 1
    assert meta["settings"]["n_steps"] == 100
    assert meta["settings"]["cost_window"] == 50  # OmniSafe's J_c window
    assert meta["settings"]["n_epochs"] == 40


@pytest.mark.slow
def test_gymcurric_side_records_episodes(tmp_path, records):
    """2,000 steps in epochs of 1,000: one SafetyPointGoal1 episode per epoch."""
    _safety_gymnasium_or_skip()
    proc = _run(
        "--lib", "gymcurric", "--algo", "cppopid", "--seed", "0", "--steps", "2000",
        "--steps-per-epoch", "1000", "--out", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = records.read_rows(tmp_path / "gymcurric__cppopid__s0.csv")
    episodes = records.read_episodes(tmp_path / "gymcurric__cppopid__s0_episodes.csv")
    assert [e[0] for e in episodes] == [1000, 2000]
    assert [r["episodes"] for r in rows] == [1, 2]
    assert rows[1]["ep_cost"] == pytest.approx((episodes[0][2] + episodes[1][2]) / 2)


def test_omnisafe_without_venv_is_a_clear_error(tmp_path, side, monkeypatch):
    monkeypatch.setattr(side, "VENV_PYTHON", tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(SystemExit, match=r"--lib omnisafe needs the OmniSafe venv.*--setup"):
        side.main(
            ["--lib", "omnisafe", "--algo", "ppolag", "--seed", "0", "--steps", "2000",
             "--steps-per-epoch", "1000", "--out", str(tmp_path)]
        )  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "1500", "--steps-per-epoch", "1000"], r"--steps must be .* got 1500"),
        (["--steps", "1000", "--steps-per-epoch", "0"], r"--steps-per-epoch must be > 0, got 0"),
        (["--steps", "1000", "--seed", "-1"], r"--seed must be >= 0, got -1"),
    ],
)
def test_bad_run_arguments_name_the_parameter(tmp_path, side, extra, message):
    args = ["--lib", "gymcurric", "--algo", "ppolag", "--seed", "0", "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match=message):
        side.main(args + extra)


def test_gymcurric_cpo_missing_is_a_clear_error(side, monkeypatch):
    import _omnisafe_ours

    monkeypatch.setitem(sys.modules, "gymcurric.integrations.sb3", None)  # import fails
    with pytest.raises(SystemExit, match=r"--lib gymcurric --algo cpo: .*CPO is not available"):
        _omnisafe_ours.make_model("cpo", None, 0, 2000, 1000)


def test_actor_lr_schedule_is_omnisafes_linear_lr(side):
    """Epoch k of E updates with lr·(1 - k/E); SB3 asks at progress 1 - (k+1)/E."""
    import _omnisafe_ours

    schedule = _omnisafe_ours.actor_lr_schedule(3e-4, epochs=4)
    got = [schedule(1 - (k + 1) / 4) for k in range(4)]
    assert got == pytest.approx([3e-4, 2.25e-4, 1.5e-4, 0.75e-4])


def test_progress_csv_converts_to_the_common_schema(records):
    episodes = records.read_episodes(EPISODES)
    cpu = json.loads(RUNNER_META.read_text())["epoch_cpu_s"]
    rows = records.convert_progress(PROGRESS, episodes, cpu)
    with PROGRESS.open() as f:
        raw = list(csv.DictReader(f))
    assert [r["env_steps"] for r in rows] == [2000, 4000]
    assert [r["episodes"] for r in rows] == [2, 4]
    for row, r in zip(rows, raw, strict=True):
        assert row["lagrange_multiplier"] == pytest.approx(float(r["Metrics/LagrangeMultiplier"]))
        assert row["wall_s"] == pytest.approx(float(r["Time/Total"]))
        assert row["steps_per_cpu_s"] == pytest.approx(row["env_steps"] / row["cpu_s"])
    # our window over the recorded episodes is exactly OmniSafe's logged one
    assert records.check_against_progress(rows, PROGRESS) == []
    assert rows[1]["ep_cost"] == pytest.approx(sum(e[2] for e in episodes) / 4)
    # without the episode record: OmniSafe's own 50-episode window, the 100 ones unknown
    bare = records.convert_progress(PROGRESS, None)
    assert bare[1]["ep_cost_w50"] == pytest.approx(float(raw[1]["Metrics/EpCost"]))
    assert math.isnan(bare[1]["ep_cost"]) and math.isnan(bare[1]["cpu_s"])


def test_progress_csv_missing_columns_is_a_clear_error(tmp_path, records):
    bad = tmp_path / "progress.csv"
    bad.write_text("Metrics/EpRet,Time/Total\n1,2\n")
    with pytest.raises(SystemExit, match=r"not an OmniSafe progress.csv.*TotalEnvSteps"):
        records.convert_progress(bad, None)


def _fake_run(records, out: Path, lib: str, seed: int, ret: float, cost: float, speed: float):
    """10 epochs of 100 steps, one 50-step episode per half epoch: return/cost after 900."""
    episodes = [
        (s, ret if s > 900 else 0.0, cost if s > 900 else 99.0, 50, s / speed)
        for s in range(50, 1001, 50)
    ]
    epochs = [(s, 0.5, s / speed, s / speed / 2) for s in range(100, 1001, 100)]
    stem = records.run_stem(lib, "ppolag", seed)
    records.write_rows(out / f"{stem}.csv", records.epoch_rows(epochs, episodes))
    records.write_episodes(out / f"{stem}_episodes.csv", episodes)


def test_summarise_table_json_and_curves(tmp_path, side, records):
    import _omnisafe_summary

    _fake_run(records, tmp_path, "gymcurric", 0, ret=10.0, cost=20.0, speed=400.0)
    _fake_run(records, tmp_path, "gymcurric", 1, ret=14.0, cost=30.0, speed=200.0)
    # OmniSafe seed 0 from the real progress.csv converted without episodes (epoch windows)
    omni = records.convert_progress(PROGRESS, None)
    records.write_rows(tmp_path / "omnisafe__ppolag__s0.csv", omni)
    summary = _omnisafe_summary.summarise(tmp_path, ["ppolag"], [0, 1, 2])

    ours = summary["groups"]["gymcurric/ppolag"]
    assert ours["missing_seeds"] == [2]
    assert ours["per_seed"]["0"]["return"] == pytest.approx(10.0)  # episodes after 900 only
    assert ours["per_seed"]["1"]["cost"] == pytest.approx(30.0)
    assert ours["return_mean"] == pytest.approx(12.0)
    assert ours["return_ci95"] == pytest.approx(12.706 * 2.0)  # t(1)·sd/√n, sd = 2√2
    assert ours["steps_per_s_mean"] == pytest.approx(300.0)
    assert ours["steps_per_cpu_s_mean"] == pytest.approx(600.0)
    theirs = summary["groups"]["omnisafe/ppolag"]
    assert theirs["missing_seeds"] == [1, 2]
    assert theirs["per_seed"]["0"]["source"] == "epoch windows"  # the last epoch's w50
    assert theirs["per_seed"]["0"]["cost"] == pytest.approx(omni[-1]["ep_cost_w50"])
    ratio = summary["groups"]["ratio/ppolag"]["steps_per_s_gymcurric_over_omnisafe"]
    assert ratio == pytest.approx(300.0 / omni[-1]["steps_per_s"])
    assert summary["groups"]["ratio/ppolag"]["steps_per_cpu_s_gymcurric_over_omnisafe"] is None

    table = (tmp_path / "summary.md").read_text()
    assert "s2: missing" in table and "s1: missing" in table
    assert "12.00 ± 25.41" in table
    assert "†" in table  # OmniSafe's seed 0 comes from epoch windows
    json.loads((tmp_path / "summary.json").read_text(), parse_constant=pytest.fail)
    pytest.importorskip("matplotlib")
    assert (tmp_path / "curves_ppolag.png").stat().st_size > 0


def test_summarise_cli_on_an_empty_dir_reports_all_missing(tmp_path):
    proc = _run("--summarise", str(tmp_path), "--algos", "cpo", "--seeds", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| cpo | omnisafe | 0/1 | s0: missing" in proc.stdout


def test_setup_shim_turns_array_defaults_into_factories():
    import _omnisafe_setup

    code = (
        _omnisafe_setup.SHIM + "\nimport dataclasses, numpy as np\n"
        "@dataclasses.dataclass\nclass C:\n    color: np.ndarray = np.array([1.0, 2.0])\n"
        "a, b = C(), C()\na.color[0] = 5.0\nprint(b.color[0])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1.0"


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [("1.23.5", "<1.24", True), ("2.4.6", "<1.24", False), ("2.0.3", "==2.0.3", True),
     (None, "", False), ("0.1", "", True)],
)  # fmt: skip
def test_setup_version_checks(version, spec, ok):
    import _omnisafe_setup

    assert _omnisafe_setup._satisfied(version, spec) is ok
