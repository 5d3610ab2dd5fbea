"""Smoke and unit tests of examples/ppo_lag_single_file.py (the hand-written PPO-Lagrangian)."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import gymcurric  # noqa: F401  (registers the env ids)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "ppo_lag_single_file.py"
FIXED_ID = "tests_ppo_lag/FixedCost-v0"
FIXED_TRUNC_ID = "tests_ppo_lag/FixedCostTruncated-v0"
EPISODE_LEN = 7


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("ppo_lag_single_file", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


MOD = _module()


class FixedCostEnv(gym.Env[np.ndarray, np.ndarray]):
    """Episodes of exactly 7 steps, reward 1 and cost 1 per step; the *reset* info carries a
    bogus ``cost`` of 100 that an agent reading reset steps as transitions would count."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, truncate: bool = False) -> None:
        self.truncate = truncate
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {"cost": 100.0}

    def step(self, action: np.ndarray):
        self.t += 1
        end = self.t >= EPISODE_LEN
        obs = np.full(3, self.t / EPISODE_LEN, np.float32)
        return obs, 1.0, end and not self.truncate, end and self.truncate, {"cost": 1.0}


if FIXED_ID not in gym.registry:
    gym.register(FIXED_ID, entry_point=FixedCostEnv)
    gym.register(FIXED_TRUNC_ID, entry_point=FixedCostEnv, kwargs={"truncate": True})


def _args(**kw: Any) -> Any:
    base = {"total_timesteps": 1024, "num_envs": 4, "num_steps": 128, "update_epochs": 2}
    return MOD.Args(**{**base, **kw})


def _run(**kw: Any) -> dict[str, Any]:
    out = MOD.train(_args(**kw))
    assert len(out["history"]) == 2
    last = out["history"][-1]
    assert math.isfinite(last["ep_return"]) and math.isfinite(last["ep_cost"])
    for p in out["agent"].parameters():
        assert torch.isfinite(p).all()
    return out


# ---------------------------------------------------------------- unit: GAE with reset steps
def test_gae_matches_a_hand_computed_reference_with_terminal_truncation_and_reset_steps():
    g, lam = 0.9, 0.5
    # one sub-env, 6 rows: episode A (rows 0-1, terminated at 1), reset step (row 2),
    # episode B (rows 3-4, truncated at 4), reset step (row 5, holds B's final observation)
    rew = torch.tensor([1.0, 2.0, 0.0, 3.0, 4.0, 0.0]).unsqueeze(1)
    val = torch.tensor([0.5, 0.6, 9.0, 0.7, 0.8, 0.9]).unsqueeze(1)
    term = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]).unsqueeze(1)
    done = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0]).unsqueeze(1)
    valid = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 0.0]).unsqueeze(1)
    adv = MOD.gae(rew, val, torch.tensor([5.0]), term, done, valid, g, lam).squeeze(1)
    d1 = 2.0 - 0.6  # terminal: no bootstrap
    d0 = 1.0 + g * 0.6 - 0.5
    d4 = 4.0 + g * 0.9 - 0.8  # truncation: bootstrap from the final observation (row 5)
    d3 = 3.0 + g * 0.8 - 0.7
    ref = [d0 + g * lam * d1, d1, 0.0, d3 + g * lam * d4, d4, 0.0]
    assert adv.tolist() == pytest.approx(ref)


def test_reset_steps_are_masked_out_of_episode_stats():
    out = _run(env_id=FIXED_ID)
    last = out["history"][-1]
    # a reset step counted as a transition would add its 100 cost (or an 8th step)
    assert last["ep_cost"] == EPISODE_LEN
    assert last["ep_return"] == EPISODE_LEN


def test_truncated_episodes_are_counted_the_same():
    out = _run(env_id=FIXED_TRUNC_ID)
    assert out["history"][-1]["ep_cost"] == EPISODE_LEN


# ---------------------------------------------------------------- λ
def test_lambda_rises_with_zero_cost_limit_and_stays_near_zero_with_a_huge_one():
    up = MOD.train(_args(env_id=FIXED_ID, cost_limit=0.0, total_timesteps=2048))
    lams = [row["lambda"] for row in up["history"]]
    assert all(b > a for a, b in itertools.pairwise(lams)), lams
    assert lams[-1] > 0.1  # ~0.035 per Adam step from 0.001
    down = MOD.train(_args(env_id=FIXED_ID, cost_limit=1e6, total_timesteps=2048))
    assert all(row["lambda"] == 0.0 for row in down["history"])


def test_env_without_costs_is_a_clear_error():
    with pytest.raises(SystemExit, match="never reported info\\['cost'\\]"):
        MOD.train(_args(env_id="Pendulum-v1", total_timesteps=512))


def test_read_costs_masks_absent_costs_and_warns_on_an_int_cost_array(monkeypatch):
    import gymcurric.safety.costs as costs_module
    from gymcurric.errors import GymcurricWarning

    monkeypatch.setattr(costs_module, "_DTYPE_WARNED", set())
    infos = {"cost": np.array([0.5, 7.0, 2.0]), "_cost": np.array([True, False, True])}
    np.testing.assert_array_equal(MOD.read_costs(infos, 3), [0.5, 0.0, 2.0])
    np.testing.assert_array_equal(MOD.read_costs({}, 2), [0.0, 0.0])
    # Gymnasium built this array from an int 0 in sub-env 0: sub-env 1's 0.5 is already gone
    with pytest.warns(GymcurricWarning, match="ppo_lag_single_file.*int64"):
        MOD.read_costs({"cost": np.array([0, 0], np.int64), "_cost": np.ones(2, bool)}, 2)


# ---------------------------------------------------------------- every gymcurric option
def test_plain_hazard_nav():
    out = _run()
    assert out["history"][-1]["ep_cost"] > 0.0  # HazardNav's default task has hazards


def test_curriculum_option_feeds_the_curriculum():
    out = _run(curriculum=True)
    assert out["envs"].curriculum.stats()["curriculum/updates"] > 0


def test_datapacks_option_advances_the_datapack_curriculum(tmp_path):
    make = importlib.util.spec_from_file_location(
        "make_datapacks", ROOT / "examples" / "make_datapacks.py"
    )
    assert make is not None and make.loader is not None
    mk = importlib.util.module_from_spec(make)
    make.loader.exec_module(mk)
    mk.write_datapacks(tmp_path, 60, 0, 0)
    out = _run(datapacks=str(tmp_path))
    sampler = out["envs"].sampler
    assert sampler.curriculum.episode > 0
    assert {p.env_id for p in sampler.table.records} == {"gymcurric/HazardNav-v0"}


def test_risk_option():
    out = _run(risk=True)
    assert out["envs"].stats()  # the risk head ran (stats are its telemetry)


def test_saute_option_augments_the_observation():
    out = _run(saute=True)
    assert out["agent"].actor[0].in_features == 23 + 1


def test_curriculum_and_datapacks_together_is_refused():
    with pytest.raises(SystemExit, match="pick one"):
        MOD.make_envs(_args(curriculum=True, datapacks="x"))


@pytest.mark.slow
def test_shaping_option_with_the_offline_minilm():
    out = _run(shaping=True)
    assert out["envs"].status.startswith("ok"), out["envs"].status


# ---------------------------------------------------------------- command line
def test_cli_parses_every_field_with_its_docstring_as_help():
    args = MOD.parse_args(
        ["--cost-limit", "3", "--curriculum", "--datapacks", "d", "--num-envs", "2"]
    )
    assert (args.cost_limit, args.curriculum, args.datapacks, args.num_envs) == (3.0, True, "d", 2)
    assert args.shaping is False and args.env_id == "gymcurric/HazardNav-v0"
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for f in dataclasses.fields(MOD.Args):
        assert "--" + f.name.replace("_", "-") in out
    assert "allowed mean episode cost" in out


def test_env_kwargs_reach_the_env():
    out = _run(env_kwargs='{"num_hazards": 0}')
    assert out["history"][-1]["ep_cost"] == 0.0
    assert out["history"][-1]["lambda"] == 0.0  # under the limit: λ → 0 (clamped)
