"""Smoke test of examples/make_datapacks.py: valid, deterministic, accepted by the envs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.datapacks import (
    EPISODE_KEYS,
    TAG_FAMILIES,
    DataPackCurriculum,
    DataPackRLSampler,
    DatapackTable,
    iter_episodes,
    validate_datapacks,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "make_datapacks.py"


def _module():
    spec = importlib.util.spec_from_file_location("make_datapacks", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_writes_valid_varied_datapacks_the_envs_accept(tmp_path):
    mod = _module()
    mod.main(["--out", str(tmp_path / "a"), "--count", "400", "--seed", "3", "--episodes", "3"])
    packs, errors = validate_datapacks(tmp_path / "a", check_episodes=True)
    assert errors == [] and len(packs) == 400
    table = DatapackTable(packs)
    assert set(np.unique(table.tier).tolist()) == {0, 1, 2}
    for family in TAG_FAMILIES:  # every tag family is represented
        assert table.has_tag(family).any(), family
    assert {p.env_id for p in packs} == {mod.NAV, mod.GRID}
    assert all(p.extra["source_robot"] for p in packs)  # extra fields survive loading
    envs = {e: gym.make(e) for e in (mod.NAV, mod.GRID)}
    for pack in packs[::8]:  # the task params are real ones: every reset works
        env = envs[pack.env_id]
        env.reset(seed=pack.seed, options={"task": dict(pack.task_params)})
        assert env.unwrapped.task == {**env.unwrapped.task, **dict(pack.task_params)}
    episodes = list(iter_episodes(packs, require=EPISODE_KEYS))
    assert len(episodes) == 3 and all(ep["reward"].size >= 1 for _, ep in episodes)
    sampler = DataPackRLSampler(packs, curriculum=DataPackCurriculum(), seed=0)
    assert len(sampler.sample_batch(64)) == 64


def test_same_seed_same_files_other_seed_differs(tmp_path):
    mod = _module()
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        mod.write_datapacks(tmp_path / name, 50, seed)
    read = {n: (tmp_path / n / "datapacks-000.jsonl").read_bytes() for n in "abc"}
    assert read["a"] == read["b"] != read["c"]


def test_runs_as_a_script(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "s"), "--count", "1200"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "wrote 1200 datapacks to 2 files" in out.stdout
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "datapacks-000.jsonl",
        "datapacks-001.jsonl",
    ]


def test_recorded_episodes_load_into_the_replay_ring(tmp_path):
    torch = pytest.importorskip("torch")
    from gymcurric.datapacks import load_datapacks
    from gymcurric.replay import ReplayRing
    from gymcurric.replay.episodes import extend_from_episodes

    mod = _module()
    mod.write_datapacks(tmp_path, 40, seed=0, episodes=4)
    packs = [p for p in load_datapacks(tmp_path) if p.env_id == mod.GRID]
    assert packs, "no HazardGrid pack with an episode among the first four"
    obs_dim = np.load(tmp_path / packs[0].episode)["obs"].shape[1]
    ring = ReplayRing(512, 1, {"obs": ((obs_dim,), torch.float32), "action": ((), torch.int64)})
    eps = [(p, ep) for p, ep in iter_episodes(packs, require=EPISODE_KEYS)]
    report = extend_from_episodes(ring, eps)
    assert report.episodes == len(eps) and report.steps == sum(e["reward"].size for _, e in eps)
