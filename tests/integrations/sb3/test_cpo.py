import math
from functools import partial

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the built-in envs)
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import CPO as ExportedCPO
from gymcurric.integrations.sb3.common import LagrangianMixin
from gymcurric.integrations.sb3.cpo import CPO, conjugate_gradient, cpo_step, line_search
from gymcurric.integrations.sb3.cpo import cpo as cpo_module
from tests.integrations.sb3.hazard_runs import assert_same, hazard_vec, make_hazard, policy_params
from tests.integrations.sb3.poison import Poison
from tests.new_interpreter import call_in_new_interpreter
from tests.stubs import make_scripted

pytestmark = pytest.mark.sb3

SMALL = {"n_steps": 32, "batch_size": 32, "n_critic_updates": 2, "device": "cpu"}

# ------------------------------------------------------------------ the update rule, by hand
# H = diag(2, 1/2), so H⁻¹ = diag(1/2, 2) (not the identity: H and H⁻¹ cannot be confused);
# δ = 1/2, so the trust region is ΔθᵀHΔθ ≤ 1.  g = (2, 0): x = H⁻¹g = (1, 0), q = gᵀx = 2.
# b = (1, 1): p = H⁻¹b = (1/2, 2), s = bᵀp = 5/2, r = gᵀp = 1, A = q - r²/s = 8/5.
F64 = th.float64
H = th.diag(th.tensor([2.0, 0.5], dtype=F64))
G = th.tensor([2.0, 0.0], dtype=F64)
B_GRAD = th.tensor([1.0, 1.0], dtype=F64)
DELTA = 0.5


def fvp(v):
    return H @ v


def step_of(c, b=B_GRAD):
    return cpo_step(G, b, c, DELTA, fvp)


def assert_step(out, expected):
    np.testing.assert_allclose(out.step.numpy(), expected, rtol=1e-6, atol=1e-9)


def test_case_4_no_cost_gradient_and_feasible_is_trpo():
    out = step_of(-1.0, b=th.tensor([1e-4, 0.0], dtype=F64))  # bᵀb = 1e-8 <= 1e-6
    assert out.case == 4
    assert_step(out, [1 / math.sqrt(2), 0.0])  # √(2δ/q)·x = x/√2
    assert out.nu == 0.0


def test_case_3_whole_trust_region_feasible_is_trpo():
    out = step_of(-2.0)  # B = 1 - 4/2.5 = -0.6 < 0, c < 0
    assert out.case == 3
    assert math.isclose(out.B, -0.6)
    assert_step(out, [1 / math.sqrt(2), 0.0])
    assert -2.0 + float(B_GRAD @ out.step) < 0  # and it is feasible


def test_case_2_constraint_cuts_the_trust_region():
    # c = -1/2: B = 1 - 0.25/2.5 = 0.9 >= 0. TRPO's step (1/√2, 0) would give
    # c + bᵀΔθ = 0.207 > 0, so the optimum lies on the line d1 + d2 = 1/2 and the ellipse
    # 2·d1² + d2²/2 = 1: 2.5·d1² - 0.5·d1 - 0.875 = 0, d1 = (0.5 ± 3)/5; the larger gᵀΔθ = 2·d1
    # is at d1 = 0.7, d2 = -0.2.
    out = step_of(-0.5)
    assert out.case == 2
    assert math.isclose(out.A, 1.6) and math.isclose(out.B, 0.9)
    assert_step(out, [0.7, -0.2])
    assert out.lam == pytest.approx(4 / 3) and out.nu == pytest.approx(2 / 15)


def test_case_2_with_slack_is_the_trpo_step():
    # c = -0.8: B = 1 - 0.64/2.5 > 0, but TRPO's step gives c + bᵀΔθ = -0.093 <= 0: nu* = 0
    out = step_of(-0.8)
    assert out.case == 2 and out.nu == 0.0
    assert_step(out, [1 / math.sqrt(2), 0.0])


def test_case_1_feasible_recovery():
    # c = +1/2: B = 0.9. On d1 + d2 = -1/2 and 2·d1² + d2²/2 = 1: 2.5·d1² + 0.5·d1 - 0.875 = 0,
    # d1 = (-0.5 ± 3)/5; the larger gᵀΔθ is at d1 = 0.5, d2 = -1.
    out = step_of(0.5)
    assert out.case == 1
    assert_step(out, [0.5, -1.0])
    assert out.lam == pytest.approx(4 / 3) and out.nu == pytest.approx(2 / 3)


def test_case_0_infeasible_recovery_is_pure_cost_descent():
    # c = 2: B = 1 - 4/2.5 < 0. Δθ = -√(2δ/s)·p = -(1/√2.5)·(1/2, 2)
    out = step_of(2.0)
    assert out.case == 0 and out.lam == 0.0
    k = 1 / math.sqrt(2.5)
    assert_step(out, [-0.5 * k, -2.0 * k])


def test_cases_1_and_2_land_on_both_boundaries_unlike_the_printed_signs():
    # With the paper's printed signs and r = gᵀH⁻¹b (OmniSafe), c = -1/2 gives Λ_a = [0, r/c]
    # = [0, -2], so λ* = √(q/2δ) = √2 and nu* = max(0, √2·c - r)/s = 0: TRPO's step (1/√2, 0),
    # for which c + bᵀΔθ = 0.207 > 0. Ours is on the constraint and on the trust region.
    for c in (-0.5, 0.5):
        out = step_of(c)
        assert c + float(B_GRAD @ out.step) == pytest.approx(0.0, abs=1e-7)
        assert float(out.step @ H @ out.step) == pytest.approx(2 * DELTA)


def test_nonfinite_inputs_give_no_step():
    nan_g = th.tensor([math.nan, 0.0], dtype=F64)
    assert cpo_step(nan_g, B_GRAD, -1.0, DELTA, fvp).case == -1
    assert cpo_step(G, B_GRAD, math.inf, DELTA, fvp).case == -1
    assert cpo_step(G, B_GRAD, -1.0, DELTA, lambda v: v * math.inf).case == -1
    zero = cpo_step(th.zeros(2, dtype=F64), B_GRAD, -1.0, DELTA, fvp)
    assert zero.case == -1 and bool(th.all(zero.direction == 0))


def test_conjugate_gradient_solves_a_small_system_exactly():
    m = th.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]], dtype=F64)
    v = th.tensor([1.0, 2.0, 3.0], dtype=F64)
    np.testing.assert_allclose(
        conjugate_gradient(lambda u: m @ u, v, 3).numpy(), th.linalg.solve(m, v).numpy()
    )


# ----------------------------------------------------------------------------- line search
def kl_grows(kl_at_full, reward=1.0, cost=0.0):
    calls = []

    def evaluate(fraction):
        calls.append(fraction)
        return reward * fraction, cost * fraction, kl_at_full * fraction**2

    return evaluate, calls


SEARCH = {"c": -1.0, "target_kl": 0.01, "reward_before": 0.0, "cost_before": 0.0}


def test_line_search_accepts_the_full_step_first():
    evaluate, calls = kl_grows(0.009)
    out = line_search(evaluate, case=3, **SEARCH)
    assert (out.fraction, out.tries, calls) == (1.0, 1, [1.0])
    assert out.accepted and out.kl == pytest.approx(0.009)


def test_line_search_accepts_after_k_shrinks():
    # KL at fraction f is 0.05·f²: 0.8^k passes once 0.05·0.64^k <= 0.01, first at k = 4
    evaluate, calls = kl_grows(0.05)
    out = line_search(evaluate, case=3, shrink=0.8, **SEARCH)
    assert out.tries == 5 and out.fraction == pytest.approx(0.8**4)
    assert calls == pytest.approx([1.0, 0.8, 0.64, 0.512, 0.4096])


def test_line_search_rejects_everything():
    evaluate, calls = kl_grows(1e9)
    out = line_search(evaluate, case=3, max_iter=7, **SEARCH)
    assert not out.accepted and (out.fraction, out.tries, len(calls)) == (0.0, 7, 7)


def test_line_search_checks():
    # the reward may not get worse in cases 2-4, and may in cases 0-1
    worse, _ = kl_grows(0.001, reward=-1.0)
    assert not line_search(worse, case=2, max_iter=3, **SEARCH).accepted
    assert line_search(worse, case=1, max_iter=3, **SEARCH).accepted
    # the cost surrogate may rise by max(0, -c)
    costly, _ = kl_grows(0.001, cost=0.5)
    assert line_search(costly, case=3, **SEARCH).fraction == 1.0  # 0.5 <= 1
    # 0.5·f <= 0.3 first at f = 0.8³ (0.5·0.64 = 0.32 is over)
    assert line_search(costly, case=3, **{**SEARCH, "c": -0.3}).fraction == pytest.approx(0.512)
    assert not line_search(costly, case=1, max_iter=5, **{**SEARCH, "c": 0.1}).accepted
    # non-finite evaluations are rejected
    nan = line_search(lambda f: (math.nan, 0.0, 0.0), case=0, max_iter=2, **SEARCH)
    assert not nan.accepted


# ------------------------------------------------------------------------------- the agent
def short_vec(seed=0, n=2, **task):
    """HazardNav episodes of 16 steps, so that the first rollout of 32 steps finishes some."""
    venv = DummyVecEnv([partial(make_hazard, **{"max_steps": 16, **task})] * n)
    venv.seed(seed)
    return venv


def test_shares_the_cost_code_and_is_exported():
    assert ExportedCPO is CPO and issubclass(CPO, LagrangianMixin) and issubclass(CPO, TRPO)
    for name in ("collect_rollouts", "_train_cost_critic", "dump_logs"):
        assert getattr(CPO, name) is getattr(LagrangianMixin, name)


def test_parity_with_trpo_when_the_constraint_is_inactive():
    kw = {**SMALL, "line_search_max_iter": 10}
    trpo = TRPO("MlpPolicy", short_vec(), seed=2, **kw).learn(192)
    cpo = CPO("MlpPolicy", short_vec(), seed=2, cost_limit=1e6, **kw).learn(192)
    assert cpo.logger.name_to_value["train/cpo_case"] in (3, 4)
    assert cpo._n_updates == 3 and cpo.line_search_failures == 0
    a, b = policy_params(trpo), policy_params(cpo)
    assert set(b) - set(a) == {k for k in b if k.startswith("cost_value_net")}
    for k in a:
        assert th.equal(a[k], b[k]), k
    # ... and the test can fail: an active constraint changes the step
    active = CPO("MlpPolicy", short_vec(), seed=2, cost_limit=0.0, **kw).learn(192)
    assert active.logger.name_to_value["train/cpo_case"] in (0, 1, 2)
    c = policy_params(active)
    assert not all(th.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize(
    ("scale", "expected_c"), [("reference", (5.0 - 2.0) / 4), ("omnisafe", 3.0)]
)
def test_constraint_gap_scaling(scale, expected_c):
    # scripted episodes of 4 steps with costs 0.5, 1, 1.5, 2: J_c = 5, L = 4; d = 2
    venv = DummyVecEnv([partial(make_scripted, 4)] * 2)
    model = CPO(
        "MlpPolicy", venv, n_steps=8, batch_size=16, n_critic_updates=1, cost_limit=2.0,
        constraint_scale=scale, seed=0, device="cpu",
    ).learn(16)  # fmt: skip
    assert list(model.ep_len_buffer) == [4] * 4 and list(model.ep_cost_buffer) == [5.0] * 4
    assert model.constraint_gap(2.0) == (pytest.approx(expected_c), 5.0, 4.0)
    assert model.logger.name_to_value["train/cpo_c"] == pytest.approx(expected_c)


def test_no_finished_episode_means_no_policy_step():
    model = CPO("MlpPolicy", short_vec(max_steps=500), seed=0, **SMALL)
    before = policy_params(model)
    model.learn(64)
    after = policy_params(model)
    logs = model.logger.name_to_value
    assert logs["train/cpo_case"] == -1 and logs["train/is_line_search_success"] == 0.0
    assert model.nonfinite_skipped == 0 and model.line_search_failures == 0
    for k in before:
        if not k.startswith(("mlp_extractor.value_net", "value_net", "cost_value_net")):
            assert th.equal(before[k], after[k]), k
    assert not th.equal(before["value_net.weight"], after["value_net.weight"])


def actor_keys(params):
    return [k for k in params if "value" not in k]


def test_rejected_line_search_leaves_the_policy_and_is_counted(monkeypatch):
    kl = cpo_module.kl_divergence
    # the same Fisher matrix (a constant does not change it), but every trial is over the limit
    monkeypatch.setattr(cpo_module, "kl_divergence", lambda p, q: kl(p, q) + 1.0)
    model = CPO("MlpPolicy", short_vec(), seed=0, line_search_max_iter=3, **SMALL)
    before = policy_params(model)
    model.learn(192)  # 3 rollouts of 2 x 32 steps
    after = policy_params(model)
    assert model.line_search_failures == model._n_updates == 3
    logs = model.logger.name_to_value
    assert logs["train/cpo_line_search_failures"] == 3 and logs["train/cpo_step_fraction"] == 0
    assert logs["train/cpo_line_search_steps"] == 3
    for k in actor_keys(before):
        assert th.equal(before[k], after[k]), k
    assert not th.equal(before["value_net.weight"], after["value_net.weight"])


def test_nonfinite_gradients_skip_the_update_and_count_it():
    model = CPO("MlpPolicy", short_vec(), seed=0, **SMALL)
    before = policy_params(model)
    model.learn(192, callback=Poison("advantages", (0, 0)))  # raises nothing
    after = policy_params(model)
    assert model.nonfinite_skipped == 3 and model.line_search_failures == 0
    assert model.logger.name_to_value["train/cpo_nonfinite_skipped"] == 3
    for k in actor_keys(before):
        assert th.equal(before[k], after[k]), k
    for k, v in after.items():
        assert bool(th.isfinite(v).all()), k  # nothing corrupted


def test_nonfinite_fisher_products_skip_the_update(monkeypatch):
    model = CPO("MlpPolicy", short_vec(), seed=0, **SMALL)
    fvp_ok = model.hessian_vector_product
    monkeypatch.setattr(model, "hessian_vector_product", lambda *a, **k: fvp_ok(*a, **k) * math.nan)
    before = policy_params(model)
    model.learn(128)
    assert model.nonfinite_skipped == 2
    after = policy_params(model)
    for k in actor_keys(before):
        assert th.equal(before[k], after[k]), k


class PoisonReturns(BaseCallback):
    """NaN reward returns in the first rollout, NaN cost returns in the second and third."""

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        buffer = self.model.rollout_buffer
        if self.model._n_updates == 0:
            buffer.returns[0, 0] = np.nan
        else:
            buffer.cost_returns[0, 0] = np.nan


def test_nonfinite_critic_targets_skip_the_fit_and_count_it_saved_with_the_model(tmp_path):
    model = CPO("MlpPolicy", short_vec(), seed=0, **SMALL)
    model.learn(192, callback=PoisonReturns())  # 3 updates: each skips one critic's fit
    assert model.nonfinite_skipped == 3 and model._n_updates == 3  # 1 reward + 2 cost fits
    logs = model.logger.name_to_value
    assert logs["train/nonfinite_skipped"] == logs["train/cpo_nonfinite_skipped"] == 3
    for k, v in policy_params(model).items():
        assert bool(th.isfinite(v).all()), k  # no critic took the NaN targets
    model.save(tmp_path / "cpo.zip")
    assert CPO.load(tmp_path / "cpo.zip", device="cpu").nonfinite_skipped == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"constraint_scale": "paper"}, "constraint_scale.*'reference' or 'omnisafe'"),
        ({"risk_modulation": True}, "risk_modulation"),
        ({"target_kl": 0.0}, "target_kl"),
        ({"line_search_shrinking_factor": 1.0}, "line_search_shrinking_factor"),
        ({"line_search_max_iter": 0}, "line_search_max_iter"),
        ({"cost_limit": -1.0}, "cost_limit"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CPO("MlpPolicy", short_vec(), **SMALL, **kwargs)


def test_no_lagrange_multiplier():
    model = CPO("MlpPolicy", short_vec(), **SMALL)
    assert getattr(model, "lagrange_multiplier", None) is None


def test_learns_on_hazard_nav_with_vec_normalize_and_logs():
    venv = VecNormalize(hazard_vec(), norm_reward=True)
    model = CPO("MlpPolicy", venv, seed=0, cost_limit=2.0, **SMALL).learn(256)
    logs = model.logger.name_to_value
    for key in (
        "train/cpo_case", "train/cpo_c", "train/cpo_q", "train/cpo_r", "train/cpo_s",
        "train/cpo_A", "train/cpo_B", "train/cpo_lambda", "train/cpo_nu",
        "train/cpo_step_fraction", "train/cpo_line_search_steps", "train/cost_value_loss",
        "train/cost_limit", "train/value_loss", "train/policy_objective",
    ):  # fmt: skip
        assert key in logs, key
    assert model.ep_cost_buffer and max(model.ep_cost_buffer) > 0  # raw costs, not normalised
    assert all(bool(th.isfinite(v).all()) for v in policy_params(model).values())


def test_learns_from_the_env_id():
    model = CPO("MlpPolicy", "gymcurric/HazardNav-v0", seed=0, **SMALL).learn(64)
    assert model.num_timesteps == 64


# ------------------------------------------------------------- save, load elsewhere, continue
def continue_saved(path, out):
    """Load ``path``, continue 320 steps, save the :func:`snapshot` to ``out`` (new process)."""
    model = CPO.load(path, env=hazard_vec(), device="cpu")
    model.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    model.learn(320, reset_num_timesteps=False)
    th.save({"snapshot": snapshot(model)}, out)


def snapshot(model):
    return {
        "policy": policy_params(model),
        "optimizer": model.policy.optimizer.state_dict(),
        "cost_optimizer": model.policy.cost_optimizer.state_dict(),
        "ep_cost": list(model.ep_cost_buffer),
        "ep_len": list(model.ep_len_buffer),
        "counts": [model.num_timesteps, model.line_search_failures, model.nonfinite_skipped],
    }


def test_save_load_in_a_new_interpreter_and_continue_equals_uninterrupted(tmp_path):
    kw = {**SMALL, "seed": 1, "cost_limit": 0.5, "cost_window": 5}
    a = CPO("MlpPolicy", hazard_vec(seed=1), **kw).learn(320)
    assert a.ep_len_buffer  # the episode window matters below
    a.save(tmp_path / "cpo.zip")
    out = tmp_path / "resumed.pt"
    call_in_new_interpreter(
        "tests.integrations.sb3.test_cpo", "continue_saved", str(tmp_path / "cpo.zip"), str(out)
    )
    a.set_env(hazard_vec())  # continues from a fresh reset of the same seeded envs
    a.get_env().seed(7)
    th.manual_seed(11)
    np.random.seed(11)  # noqa: NPY002  (SB3 shuffles with the global RNG)
    a.learn(320, reset_num_timesteps=False)
    resumed = th.load(out, weights_only=False)["snapshot"]
    assert resumed["counts"][0] == 640
    assert_same(snapshot(a), resumed)


def test_building_the_cost_critic_leaves_the_cuda_generators_alone(monkeypatch):
    # th.manual_seed reseeds the CUDA generators too, which fork_rng(devices=[]) does not
    # restore: on a GPU the actions were then not TRPO's (parity held on the CPU only).
    seeded = []
    monkeypatch.setattr(th.cuda, "manual_seed_all", seeded.append)
    th.manual_seed(0)
    seeded.clear()
    CPO("MlpPolicy", short_vec(), seed=0, **SMALL)
    assert seeded == [0]  # SB3's own set_random_seed, nothing from the cost critic
