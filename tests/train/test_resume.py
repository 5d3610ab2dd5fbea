"""Resume as users run it: ``gymcurric resume RUN`` in a new interpreter, after a kill too."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.train.runner import resume, train
from tests.train.test_runner import _cfg, _packs

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args, check=True, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"exit {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out


def _script(code, *, check=True, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=check,
    )


def _rows(path, drop=("time/",)):
    """progress.csv without wall-clock measures (times, latencies)."""
    with open(path) as f:
        return [
            {k: v for k, v in r.items() if not k.startswith(drop) and "latency" not in k}
            for r in csv.DictReader(f)
        ]


def _monitor(run):
    """Every episode row of a run (monitor.csv and the resumed parts), without wall times."""
    rows = []
    for p in sorted(run.glob("*monitor.csv"), key=lambda p: (p.name != "monitor.csv", p.name)):
        lines = p.read_text().splitlines()[1:]  # the JSON header line
        rows += [{k: v for k, v in r.items() if k != "t"} for r in csv.DictReader(lines)]
    return rows


def _same_params(a, b):
    """The same weights, optimiser states and extra torch variables (any algorithm)."""
    from stable_baselines3.common.save_util import load_from_zip_file

    _, pa, va = load_from_zip_file(a, device="cpu")
    _, pb, vb = load_from_zip_file(b, device="cpu")

    def flat(x, prefix=""):
        if isinstance(x, dict):
            return {k2: v2 for k, v in x.items() for k2, v2 in flat(v, f"{prefix}/{k}").items()}
        if isinstance(x, list | tuple):
            return {k2: v2 for i, v in enumerate(x) for k2, v2 in flat(v, f"{prefix}/{i}").items()}
        return {prefix: x}

    fa, fb = flat({"p": pa, "v": va}), flat({"p": pb, "v": vb})
    assert fa.keys() == fb.keys()
    return all(
        torch.equal(fa[k], fb[k]) if isinstance(fa[k], torch.Tensor) else fa[k] == fb[k] for k in fa
    )


# dummy vectorisation: tasks from {a local curriculum, a shared one, datapacks} x VecNormalize x
# shaping, every pair of values covered (the full product is the slow test below), plus the
# Lagrangian agent with the risk and Saute wrappers
SOURCES = {
    "local": {},
    "shared": {"curriculum": {"backend": "shared"}},
    "datapacks": {"curriculum": {"enabled": False}, "datapacks": {"enabled": True}},
}
NORMALIZE = {"normalize": {"agent": {"normalize": True}}, "raw": {}}
SHAPING = {
    "shaping": {"shaping": {"enabled": True, "params": {"config": {"capture_interval": 2}}}},
    "unshaped": {},
}


def _combo(source, norm, shaping):
    out = json.loads(json.dumps(SOURCES[source]))
    for part in (NORMALIZE[norm], SHAPING[shaping]):
        for key, value in part.items():
            out[key] = {**out.get(key, {}), **value}
    return out


PAIRWISE = [
    ("local", "raw", "unshaped"),
    ("local", "normalize", "shaping"),
    ("shared", "normalize", "unshaped"),
    ("shared", "raw", "shaping"),
    ("datapacks", "normalize", "unshaped"),
    ("datapacks", "raw", "shaping"),
]
COMBOS = {"-".join(c): _combo(*c) for c in PAIRWISE}
COMBOS["ppolag-risk-saute"] = {
    "agent": {"algo": "ppolag", "kwargs": {"n_steps": 64, "batch_size": 64, "cost_limit": 1.0}},
    "risk": {"enabled": True, "params": {"train_every": 64}},
    "saute": {"enabled": True, "params": {"safety_budget": 5.0, "max_episode_steps": 40}},
}
FULL = {
    "-".join((a, b, c)): _combo(a, b, c)
    for a in SOURCES
    for b in NORMALIZE
    for c in SHAPING
    if (a, b, c) not in PAIRWISE
}


def _combo_cfg(name, total, tmp_path):
    sections = json.loads(json.dumps({**COMBOS, **FULL}[name]))
    if "datapacks" in sections:
        sections["datapacks"]["dir"] = str(_packs(tmp_path))
    return _cfg(total, **sections)


class _Interrupt(BaseException):
    """Stands for Ctrl-C: raised by a callback partway through a chunk."""


def _train_interrupted(cfg, run_dir, at, monkeypatch):
    from stable_baselines3.common.callbacks import BaseCallback

    from gymcurric.train import runner

    class Stop(BaseCallback):
        def _on_step(self):
            if self.num_timesteps >= at:
                raise _Interrupt
            return True

    old = runner._callbacks
    with monkeypatch.context() as m:
        m.setattr(runner, "_callbacks", lambda built, cfg: [*old(built, cfg), Stop()])
        with pytest.raises(_Interrupt):
            train(cfg, run_dir=run_dir)


@pytest.mark.parametrize(
    "combo", [*COMBOS, *(pytest.param(name, marks=pytest.mark.slow) for name in FULL)]
)
def test_dummy_resume_in_a_new_interpreter_is_exact(tmp_path, combo, monkeypatch):
    cfg = _combo_cfg(combo, 768, tmp_path)
    train(cfg, run_dir=tmp_path / "full")
    # stopped partway through the second chunk: it has written rows past the checkpoint
    _train_interrupted(cfg, tmp_path / "part", 400, monkeypatch)
    # nothing a pickle could carry: the checkpoint is JSON, npz and SB3's model.zip
    names = {p.name for p in (tmp_path / "part/checkpoint").iterdir()}
    assert not {n for n in names if n.endswith(".pkl")} - {"vecnormalize.pkl"}
    out = _cli("resume", str(tmp_path / "part"))
    assert "768" in out.stdout
    full, part = tmp_path / "full", tmp_path / "part"
    assert _same_params(full / "model.zip", part / "model.zip")
    assert _rows(full / "progress.csv") == _rows(part / "progress.csv")
    assert _monitor(full) == _monitor(part)
    if combo.startswith("datapacks"):

        def entries(run):  # without the wall-clock timestamps
            lines = (run / "datapacks/datapack_samples.jsonl").read_text().splitlines()
            return [{k: v for k, v in json.loads(x).items() if k != "timestamp"} for x in lines]

        assert entries(full) == entries(part)
    summary = json.loads((part / "summary.json").read_text())
    assert summary["total_steps"] == 768 and summary["steps_this_session"] == 512


def test_resumed_vecnormalize_keeps_its_statistics_in_sb3_format(tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import gymcurric  # noqa: F401
    from gymcurric.wrappers import AnnotateCost

    cfg = _cfg(256, agent={"normalize": True}, curriculum={"enabled": False})
    train(cfg, run_dir=tmp_path / "r")
    ckpt = tmp_path / "r/checkpoint/vecnormalize.pkl"
    final = tmp_path / "r/vecnormalize.pkl"
    assert ckpt.is_file() and final.is_file()
    import gymnasium as gym

    venv = DummyVecEnv([lambda: AnnotateCost(gym.make("gymcurric/HazardGrid-v0"))])
    norm = VecNormalize.load(str(final), venv)
    assert norm.obs_rms.count > 256  # the statistics of the run, as SB3 loads them


@pytest.mark.slow
@pytest.mark.parametrize("source", list(SOURCES)[1:])
@pytest.mark.parametrize("shaping", list(SHAPING))
def test_subproc_resume_keeps_the_normalisation(tmp_path, source, shaping):
    from stable_baselines3.common.vec_env import VecNormalize

    sections = _combo(source, "normalize", shaping)
    if source == "datapacks":
        sections["datapacks"]["dir"] = str(_packs(tmp_path))
    sections["env"] = {"vectorization": "subproc", "start_method": "forkserver"}
    cfg = _cfg(256, **sections)
    train(cfg, run_dir=tmp_path / "r")
    before = VecNormalize.load(str(tmp_path / "r/vecnormalize.pkl"), _DummyVenv())
    _cli("resume", str(tmp_path / "r"), "--total-steps", "512")
    after = VecNormalize.load(str(tmp_path / "r/vecnormalize.pkl"), _DummyVenv())
    # continued, not restarted from zero: 256 more steps of 2 envs on top of the first part's
    assert after.obs_rms.count >= before.obs_rms.count + 256
    assert json.loads((tmp_path / "r/summary.json").read_text())["total_steps"] == 512


def _DummyVenv():
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import gymcurric  # noqa: F401

    return DummyVecEnv([lambda: gym.make("gymcurric/HazardGrid-v0")])


# -- the checkpoint swap, killed at each of its steps ------------------------------------------

KILL = """
import os, shutil, signal, sys
from pathlib import Path
from gymcurric.train import _checkpoint
from gymcurric.train.config import TrainConfig
from gymcurric.train.runner import train
import json

ops = {{"n": 0}}
AT = {at}

def count(fn):
    def wrapped(*a, **k):
        if Path(str(a[0])).name.startswith("checkpoint"):
            ops["n"] += 1
            if ops["n"] == AT:
                os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **k)
    return wrapped

_checkpoint.os.replace = count(os.replace)
_checkpoint.shutil.rmtree = count(shutil.rmtree)
cfg = TrainConfig.from_dict(json.loads(Path(sys.argv[1]).read_text()))
train(cfg, run_dir=sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("at", range(1, 10))
def test_a_kill_at_any_step_of_the_swap_leaves_a_resumable_run(tmp_path, at):
    """Kill before file operation ``at``: 1-3 are the first checkpoint's (rmtree tmp,
    tmp -> final, rmtree old: there is no old one to move aside), 4-8 the second's (rmtree tmp,
    rmtree old, final -> old, tmp -> final, rmtree old), 9 the start of the third. Killed
    before the first checkpoint exists (1), the run has nothing to resume: resume says so and
    a new ``train`` starts afresh."""
    cfg = _cfg(768)
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(cfg.to_dict()))
    proc = subprocess.run(
        [sys.executable, "-c", KILL.format(at=at), str(cfg_file), str(tmp_path / "part")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run = tmp_path / "part"
    if at == 1:
        out = _cli("resume", str(run), check=False)
        assert out.returncode == 2 and "no complete checkpoint" in out.stderr
        _cli("train", "--config", str(cfg_file), "--run-dir", str(run))
    else:
        _cli("resume", str(run))
    train(cfg, run_dir=tmp_path / "full")
    assert _same_params(tmp_path / "full/model.zip", run / "model.zip")
    assert _rows(tmp_path / "full/progress.csv") == _rows(run / "progress.csv")
    assert _monitor(tmp_path / "full") == _monitor(run)
    assert not (run / "checkpoint.tmp").exists() and not (run / "checkpoint.old").exists()


def test_recover_picks_the_newest_complete_checkpoint(tmp_path):
    from gymcurric.train._checkpoint import commit, recover

    def writer(text):
        return lambda folder: (folder / "x.txt").write_text(text)

    run = tmp_path / "run"
    run.mkdir()
    # a kill after step 2 of a swap: checkpoint.old (10 steps) and checkpoint.tmp (20)
    for steps, text, name in ((10, "ten", "checkpoint.old"), (20, "twenty", "checkpoint.tmp")):
        commit(tmp_path / name, steps, writer(text), {})
        os.replace(tmp_path / name / "checkpoint", run / name)
    tmp_path = run
    # and a later save killed while writing: a folder without its manifest is never picked
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "x.txt").write_text("thirty")
    folder, manifest = recover(tmp_path)
    assert manifest["num_timesteps"] == 20 and (folder / "x.txt").read_text() == "twenty"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    # a damaged file makes a checkpoint incomplete: it is named, and never picked
    (folder / "x.txt").write_text("tw")
    with pytest.raises(DataError, match=r"x\.txt.*damaged"):
        recover(tmp_path)
    (folder / "x.txt").write_text("twenty")
    (folder / "manifest.json").write_text("{")
    with pytest.raises(DataError, match=r"manifest\.json"):
        recover(tmp_path)


# -- logs are cut back to the checkpoint -------------------------------------------------------


@pytest.mark.slow
def test_rows_written_after_the_checkpoint_are_not_kept(tmp_path):
    # killed in the middle of the second chunk: rows after the first checkpoint exist on disk
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(_cfg(768).to_dict()))
    code = f"""
        import json, os, signal
        from pathlib import Path
        from stable_baselines3.common.callbacks import BaseCallback
        from gymcurric.train import runner
        from gymcurric.train.config import TrainConfig

        class Kill(BaseCallback):
            def _on_step(self):
                if self.num_timesteps >= 448:
                    os.kill(os.getpid(), signal.SIGKILL)
                return True

        old = runner._callbacks
        runner._callbacks = lambda built, cfg: [*old(built, cfg), Kill()]
        cfg = TrainConfig.from_dict(json.loads(Path({str(cfg_file)!r}).read_text()))
        runner.train(cfg, run_dir={str(tmp_path / "part")!r})
    """
    proc = _script(code, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    part = tmp_path / "part"
    steps = [int(r["time/total_timesteps"]) for r in _rows(part / "progress.csv", drop=())]
    assert max(steps) > 256  # the killed chunk wrote rows past the checkpoint
    _cli("resume", str(part))
    train(_cfg(768), run_dir=tmp_path / "full")
    steps = [int(r["time/total_timesteps"]) for r in _rows(part / "progress.csv", drop=())]
    assert len(steps) == len(set(steps))
    assert _rows(tmp_path / "full/progress.csv") == _rows(part / "progress.csv")
    assert _monitor(tmp_path / "full") == _monitor(part)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def scalars(run):
        events = []
        for f in sorted(run.glob("events.out.tfevents.*")):
            acc = EventAccumulator(str(f))
            acc.Reload()
            events += [e.step for e in acc.Scalars("rollout/ep_len_mean")]
        return events

    assert scalars(part) == scalars(tmp_path / "full")


# -- failed starts, damaged files ------------------------------------------------------------


def test_a_failed_start_leaves_nothing_and_the_rerun_starts(tmp_path):
    run = tmp_path / "r"
    with pytest.raises(ConfigError):
        train(_cfg(256, agent={"kwargs": {"n_step": 128}}), run_dir=run)
    assert not run.exists()
    run.mkdir()
    with pytest.raises(ConfigError):
        train(_cfg(256, env={"id": "NoSuchEnv-v9"}, curriculum={"enabled": False}), run_dir=run)
    assert run.is_dir() and not any(run.iterdir())
    # a run killed before its first checkpoint left config.json: a rerun starts afresh
    (run / "config.json").write_text(json.dumps(_cfg(256).to_dict()))
    (run / "progress.csv").write_text("LEFTOVER\n")
    assert train(_cfg(256), run_dir=run)["total_steps"] == 256
    assert "LEFTOVER" not in (run / "progress.csv").read_text()
    # a directory that holds something else is not deleted
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no gymcurric run"):
        train(_cfg(256), run_dir=other)
    assert (other / "notes.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("finished") / "r"
    train(_cfg(256), run_dir=run)
    return run


DAMAGE = {
    "config.json": (lambda p: p.write_text("{not json"), "config.json"),
    "state.json": (
        lambda p: p.write_text('{"format": "gymcurric-run-state/1", "rng"'),
        "state.json",
    ),
    "state.npz": (lambda p: p.write_bytes(p.read_bytes()[:50]), "state.npz"),
    "model.zip": (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "model.zip"),
    "curriculum.npz": (lambda p: p.write_bytes(b""), "curriculum.npz"),
    "curriculum_history.npz": (lambda p: p.write_bytes(b"garbage"), "curriculum_history.npz"),
    "manifest.json": (lambda p: p.write_text("[]"), "manifest.json"),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_run_file_is_a_data_error_naming_it(tmp_path, finished_run, name):
    import shutil

    run = tmp_path / "r"
    shutil.copytree(finished_run, run)
    target = run / name if name == "config.json" else run / "checkpoint" / name
    damage, expected = DAMAGE[name]
    damage(target)
    with pytest.raises(DataError, match=expected.replace(".", r"\.")):
        resume(run, total_steps=512)
    # the same through the CLI: exit 2, the file named, no traceback
    out = _cli("resume", str(run), "--total-steps", "512", check=False)
    assert out.returncode == 2 and expected in out.stderr and "Traceback" not in out.stderr


def test_a_consistent_but_wrong_state_is_refused_naming_the_file(tmp_path, finished_run):
    """Files rewritten whole (manifest updated too) are still checked for what they hold."""
    import shutil

    from gymcurric.train._checkpoint import MANIFEST, _sha256

    run = tmp_path / "r"
    shutil.copytree(finished_run, run)
    ckpt = run / "checkpoint"
    tree = json.loads((ckpt / "state.json").read_text())
    tree["venv"]["layers"][0][0] = "SomethingElse"
    (ckpt / "state.json").write_text(json.dumps(tree))
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["files"]["state.json"] = {
        "size": (ckpt / "state.json").stat().st_size,
        "sha256": _sha256(ckpt / "state.json"),
    }
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"state\.json.*SomethingElse"):
        resume(run, total_steps=512)


def test_a_checkpoint_written_before_the_renames_still_resumes(tmp_path, finished_run):
    """state.json stores wrapper class names; those of issue 22's old names still match."""
    import shutil

    from gymcurric._deprecated import RENAMED
    from gymcurric.train._checkpoint import MANIFEST, _sha256

    run = tmp_path / "r"
    shutil.copytree(finished_run, run)
    ckpt = run / "checkpoint"
    text = (ckpt / "state.json").read_text()
    assert '"SampleCurriculumTask"' in text  # the per-env chain names the renamed wrapper
    for old, new in RENAMED.items():
        text = text.replace(f'"{new}"', f'"{old}"')
    (ckpt / "state.json").write_text(text)
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["files"]["state.json"] = {
        "size": (ckpt / "state.json").stat().st_size,
        "sha256": _sha256(ckpt / "state.json"),
    }
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    resume(run, total_steps=384)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total_steps"] == 384


def test_a_crafted_state_cannot_name_a_class_to_build(tmp_path):
    from gymcurric.train._runstate import decode

    with pytest.raises(DataError, match=r"os\.system"):
        decode({"$obj": "os.system", "vars": {}}, {})
    for name in (
        "gymcurric.train.runner.os.system",
        "gymcurric.train.runner.Path",
        "gymcurric.train.runner.os",
    ):
        with pytest.raises(DataError, match=r"not run state|unknown"):
            decode({"$obj": name, "vars": {}}, {})
    with pytest.raises(DataError, match="not run state"):
        decode({"$data": "gymcurric.train.runner.Path", "dict": {}}, {})


def test_state_codec_round_trips_plain_state():
    from collections import deque

    from gymcurric.train._runstate import decode, encode

    gen = np.random.default_rng(3)
    value = {
        "a": [1, 2.5, float("nan"), float("inf"), None, True, "x"],
        3: (np.arange(4), np.float32(2.0)),
        "g": gen,
        "d": deque([1, 2], maxlen=5),
        "t": torch.arange(3, dtype=torch.bfloat16),
        "tg": torch.Generator().manual_seed(5),
        "floats": [0.1 * i for i in range(40)],  # packed into one array
        "ints": list(range(-20, 20)),
        "mixed": [1, 2.0] * 10,
    }
    arrays: dict = {}
    tree = json.loads(json.dumps(encode(value, arrays)))
    back = decode(tree, arrays)
    assert back["a"][:2] == [1, 2.5] and np.isnan(back["a"][2]) and back["a"][3] == np.inf
    np.testing.assert_array_equal(back[3][0], np.arange(4))
    assert back[3][1] == np.float32(2.0) and back[3][1].dtype == np.float32
    assert back["g"].integers(1 << 30) == gen.integers(1 << 30)
    assert back["d"] == deque([1, 2], maxlen=5) and back["d"].maxlen == 5
    assert back["t"].dtype == torch.bfloat16 and torch.equal(back["t"], value["t"])
    assert torch.equal(torch.rand(2, generator=back["tg"]), torch.rand(2, generator=value["tg"]))
    for key in ("floats", "ints", "mixed"):
        assert back[key] == value[key]
        assert [type(v) for v in back[key]] == [type(v) for v in value[key]]
    assert "$list" in json.dumps(tree["$dict"][-3])


def test_steps_are_whole_rollouts_announced_and_the_bar_starts_at_the_checkpoint(tmp_path):
    # 2 envs x 64 steps: 300 -> 384, checkpoints every 200 -> 256
    cfg = _cfg(300, run={"checkpoint_every": 200})
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps(cfg.to_dict()))
    out = _cli("train", "--config", str(cfg_file), "--run-dir", str(tmp_path / "r"))
    assert "run.total_steps 300 -> 384" in out.stderr
    assert "for 384 steps" in out.stdout
    run = tmp_path / "r"
    saved = json.loads((run / "config.json").read_text())["run"]
    assert saved["total_steps"] == 384 and saved["checkpoint_every"] == 256
    assert json.loads((run / "summary.json").read_text())["total_steps"] == 384
    # resume to 500 -> 512: announced, the summary says what this session trained
    code = f"""
        import sys
        from gymcurric import cli
        from gymcurric.train import _progress
        seen = []
        def bar(enabled, total, initial, job):
            seen.append((total, initial))
            return job(None)
        _progress.run_with_progress = bar
        code = cli.main(["resume", {str(run)!r}, "--total-steps", "500"])
        print("BAR", seen)
        sys.exit(code)
    """
    out = _script(code)
    assert "run.total_steps 500 -> 512" in out.stderr
    assert "BAR [(512, 384)]" in out.stdout
    assert "for 128 steps (to 512 in all)" in out.stdout


def test_a_damaged_history_file_costs_the_heatmap_not_the_run(tmp_path):
    from gymcurric.train.plots import write_plots

    run = tmp_path / "r"
    cfg = _cfg(256, run={"plots": True})
    train(cfg, run_dir=run)
    (run / "curriculum_history.npz").write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"curriculum_history\.npz"):
        write_plots(run, cfg)


def test_episode_log_replays_a_six_tuple_env_exactly():
    import gymnasium as gym

    from gymcurric.train._runstate import EpisodeLog

    class SixTuple(gym.Env):
        observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float64)
        action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.x = self.np_random.normal(size=2)
            return self.x.copy(), {}

        def step(self, action):
            self.x = self.x + action + self.np_random.normal(size=2) * 0.1
            return self.x.copy(), 0.0, 1.0, False, False, {}

    a = EpisodeLog(SixTuple())
    a.reset(seed=4)
    a.reset()
    for _ in range(7):
        a.step(np.full(2, 0.5, np.float32))
    arrays: dict = {}
    saved = json.loads(json.dumps(a.episode_state(arrays)))
    b = EpisodeLog(SixTuple())
    b.replay(saved, arrays)
    act = np.full(2, -0.25, np.float32)
    np.testing.assert_array_equal(a.step(act)[0], b.step(act)[0])
    a.reset(), b.reset()  # the seeders continue alike
    np.testing.assert_array_equal(a.env.x, b.env.x)
