"""benchmarks/_semantic_runs.py: the StudyRecorder's rows for agents with and without λ.

No training: the recorder's events are driven by hand with stub models (PPOLag-like with a
λ, CPO-like and P3O-like whose ``lagrange_multiplier`` raises, P3O-like with ``last_kappa``),
and the record they make goes through ``--summarise``'s reader.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.benchmarks import load_script


@pytest.fixture(scope="module")
def runs():
    return load_script("_semantic_runs")


class _NoLambda:
    """CPO / P3O: ``lagrange_multiplier`` is a property that raises AttributeError."""

    def __init__(self, **attrs: Any) -> None:
        self.num_timesteps = 0
        self.logger = SimpleNamespace(name_to_value={})
        self.__dict__.update(attrs)

    @property
    def lagrange_multiplier(self) -> float:
        raise AttributeError("no Lagrange multiplier")


def ppolag_like() -> Any:
    return SimpleNamespace(
        num_timesteps=0, lagrange_multiplier=0.0, logger=SimpleNamespace(name_to_value={})
    )


def drive(runs: Any, model: Any, update: Any, rollouts: int = 2) -> Any:
    """``rollouts`` rollouts of HazardNav's shape (4 envs) through a recorder, then the end.

    ``update(model, j)`` plays the update that uses rollout ``j`` (SB3 trains after
    ``_on_rollout_end``). Each rollout: 2 steps, env 0 pays cost 1 at each, one episode ends.
    """
    spec = runs.RunSpec("HazardNav", "ppolag", "none", 0, 2048, "unused")
    rec = runs.StudyRecorder(spec, None, lambda *a, **k: None)
    rec.start(model, None)
    no = np.zeros(4, dtype=bool)
    for j in range(rollouts):
        for k in range(2):
            model.num_timesteps += 4
            infos: list[dict[str, Any]] = [{"cost": 1.0}, {"cost": 0.0}, {}, {}]
            infos[2]["cost"] = infos[3]["cost"] = 0.0
            if k == 1:
                infos[1]["episode"] = {"r": 2.0 + j, "c": 0.0, "l": 7}
            rec.step(model, None, infos, no)
        rec.rollout_end(model, None)
        update(model, j)
    rec.end(model)
    return rec


def test_lambda_and_modulation_of_each_update_go_in_the_row_of_its_rollout(runs):
    def update(model: Any, j: int) -> None:
        model.lagrange_multiplier = 0.5 * (j + 1)
        model.logger.name_to_value["risk/modulation_scale"] = 0.75

    rec = drive(runs, ppolag_like(), update)
    assert [r["lambda"] for r in rec.rows] == [0.5, 1.0]
    assert [r["mod"] for r in rec.rows] == [0.75, 0.75]
    assert all("kappa" not in r for r in rec.rows)  # PPOLag records keep their schema
    assert [r["step_cost"] for r in rec.rows] == [2.0, 2.0] and rec.cum_cost == 4.0
    assert rec.episodes["r"] == [2.0, 3.0]


@pytest.mark.parametrize("name", ["cpo", "p3o"])
def test_an_agent_without_lambda_records_nan_and_p3o_its_kappa(runs, name):
    kappa = {"last_kappa": 20.0} if name == "p3o" else {}

    def update(model: Any, j: int) -> None:
        if name == "p3o":
            model.last_kappa = 4.0 * (j + 1)

    rec = drive(runs, _NoLambda(**kappa), update)
    assert all(math.isnan(r["lambda"]) for r in rec.rows)
    assert all(math.isnan(r["mod"]) for r in rec.rows)  # nothing logged: no modulation
    if name == "p3o":
        assert [r["kappa"] for r in rec.rows] == [4.0, 8.0]
    else:
        assert all("kappa" not in r for r in rec.rows)


def test_a_p3o_row_whose_update_has_not_run_has_nan_kappa(runs):
    spec = runs.RunSpec("HazardNav", "ppolag", "none", 0, 2048, "unused")
    rec = runs.StudyRecorder(spec, None, lambda *a, **k: None)
    model = _NoLambda(last_kappa=20.0)
    rec.start(model, None)
    rec.step(model, None, [{"cost": 0.0}] * 4, np.zeros(4, dtype=bool))
    rec.rollout_end(model, None)  # an interrupted run's flush sees this row
    assert math.isnan(rec.rows[0]["kappa"]) and math.isnan(rec.rows[0]["lambda"])


def test_records_without_lambda_and_with_kappa_summarise_beside_ppolag(runs, tmp_path):
    """The NaN λ is written as null and the extra ``kappa`` key is read past by the report."""
    report = load_script("_semantic_report")

    def lam(model: Any, j: int) -> None:
        model.lagrange_multiplier = 0.5 * (j + 1)

    def kap(model: Any, j: int) -> None:
        model.last_kappa = 4.0

    for seed, cond, model, update in [
        (0, "ppolag", ppolag_like(), lam),
        (0, "risk", _NoLambda(last_kappa=20.0), kap),
    ]:
        rec = drive(runs, model, update)
        spec = runs.RunSpec("HazardNav", cond, "none", seed, 16, str(tmp_path))
        record = {
            "env": "HazardNav",
            "condition": cond,
            "prompts": "none",
            "seed": seed,
            "complete": True,
            "config": runs._config(spec),
            "trained_steps": rec.k * 4,
            "cum_cost": rec.cum_cost,
            "violation_steps": rec.violations,
            "cpu_seconds": 1.0,
            "wall_seconds": 1.0,
            "rows": rec.rows,
            "episodes": rec.episodes,
            "risk_quality": None,
            "commit": "0123456789",
            "gymcurric_modified": False,
            "load_average_start": 1.0,
        }
        runs.write_atomic(spec.path, record)
    written = json.loads((tmp_path / "HazardNav-risk-none-seed0.json").read_text())
    assert [r["lambda"] for r in written["rows"]] == [None, None]
    assert [r["kappa"] for r in written["rows"]] == [4.0, 4.0]
    done, partial = report.load_records(tmp_path)
    assert len(done) == 2 and not partial
    by_cond = {r["condition"]: r["metrics"] for r in done}
    assert by_cond["ppolag"]["final_lambda"] == 1.0
    assert math.isnan(by_cond["risk"]["final_lambda"])
    text = report.summarise(done, partial)
    assert "| risk | none |" in text
