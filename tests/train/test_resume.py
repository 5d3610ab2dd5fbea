"""Resume as users run it: ``gymcurric resume RUN`` in a new interpreter, after a kill too."""

from __future__ import annotations

import json

import pytest

from gymcurric.train.runner import train
from tests.train.run_harness import (
    monitor_rows,
    progress_rows,
    run_cli,
    run_config,
    run_script,
    same_params,
    write_packs,
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
# the safe-RL agents without a multiplier: CPO and P3O (cost critics), PPOSimmer (its VecSimmer,
# mid-episode safety states and budget controller are part of the saved run)
_ROLLOUT = {"n_steps": 64, "batch_size": 64}
COMBOS["cpo"] = {"agent": {"algo": "cpo", "kwargs": _ROLLOUT}}
COMBOS["p3o"] = {"agent": {"algo": "p3o", "kwargs": {**_ROLLOUT, "cost_limit": 1.0}}}
_SIMMER = {**_ROLLOUT, "safety_budget": 5.0, "max_episode_steps": 40}
COMBOS["pposimmer-pi-normalize"] = {
    "agent": {"algo": "pposimmer", "normalize": True, "kwargs": _SIMMER},
}
COMBOS["pposimmer-q"] = {
    "agent": {"algo": "pposimmer", "kwargs": {**_SIMMER, "controller": "q"}},
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
        sections["datapacks"]["dir"] = str(write_packs(tmp_path))
    return run_config(total, **sections)


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


# in the default suite: every source, normalisation and shaping at least once, and the
# agents whose saved state differs most (PPOLag with risk and Saute, PPOSimmer); the rest slow
# (CPO and P3O resume in a new interpreter is also tested in tests/integrations/sb3)
SLOW_COMBOS = {"shared-normalize-unshaped", "datapacks-normalize-unshaped", "cpo", "p3o",
               "pposimmer-q"}  # fmt: skip


DEFAULT_COMBOS = [name for name in COMBOS if name not in SLOW_COMBOS]
# `gymcurric resume RUN` for each run in turn, in one new interpreter: each run's own output
# (stderr too: fd 2 joins stdout) between markers, and its exit code
RESUME_EACH = """
    import os, sys, traceback
    os.dup2(1, 2)
    from gymcurric import cli
    for run in {runs!r}:
        print("@@ run", run, flush=True)
        try:
            code = cli.main(["resume", run])
        except SystemExit as exc:
            code = exc.code
        except Exception:
            traceback.print_exc()
            code = "raised"
        sys.stderr.flush()
        sys.stdout.flush()
        print("@@ exit", code, flush=True)
"""


def _train_full_and_interrupted(combo, folder, monkeypatch):
    cfg = _combo_cfg(combo, 768, folder)
    train(cfg, run_dir=folder / "full")
    # stopped partway through the second chunk: it has written rows past the checkpoint
    _train_interrupted(cfg, folder / "part", 400, monkeypatch)


@pytest.fixture(scope="module")
def resumed_together(tmp_path_factory):
    """The default combos trained here (whole, and interrupted), then every interrupted run
    resumed by the CLI in one new interpreter: ``{combo: (folder, exit code, its output)}``.

    One interpreter for the six resumes instead of six: each still resumes from files only,
    in another process than the one that trained it.
    """
    folders = {combo: tmp_path_factory.mktemp(combo) for combo in DEFAULT_COMBOS}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for combo, folder in folders.items():
            _train_full_and_interrupted(combo, folder, monkeypatch)
    runs = [str(folder / "part") for folder in folders.values()]
    out = run_script(RESUME_EACH.format(runs=runs), check=False)
    # a run cut off by the child's end (a crash) fails with what it printed; the runs before it
    # keep their results, the runs after it fail as not run
    outputs = {run: (f"none: the child ended ({out.returncode}) first", out.stdout) for run in runs}
    for chunk in out.stdout.split("@@ run ")[1:]:
        run, rest = chunk.split("\n", 1)
        text, marker, code = rest.rpartition("@@ exit ")
        cut_off = f"none: the child ended ({out.returncode}) during this run"
        outputs[run] = (code.strip(), text) if marker else (cut_off, rest)
    if out.returncode != 0 and all(code == "0" for code, _ in outputs.values()):
        # the interpreter failed at its end, as each run's own `gymcurric resume` process would
        ended = f"0, then the child exited {out.returncode}"
        outputs = {run: (ended, text + out.stdout[-2000:]) for run, (_, text) in outputs.items()}
    return {
        combo: (folder, *outputs[str(folder / "part")], out.stderr)
        for combo, folder in folders.items()
    }


@pytest.mark.parametrize(
    "combo",
    [
        *(pytest.param(name, marks=pytest.mark.slow) if name in SLOW_COMBOS else name
          for name in COMBOS),
        *(pytest.param(name, marks=pytest.mark.slow) for name in FULL),
    ],
)  # fmt: skip
def test_dummy_resume_in_a_new_interpreter_is_exact(tmp_path, combo, monkeypatch, request):
    if combo in DEFAULT_COMBOS:  # resumed with the other default combos (one interpreter)
        tmp_path, code, stdout, stderr = request.getfixturevalue("resumed_together")[combo]
        assert code == "0", f"exit {code}\n{stdout}\n{stderr}"
    else:
        _train_full_and_interrupted(combo, tmp_path, monkeypatch)
    # nothing a pickle could carry: the checkpoint is JSON, npz and SB3's model.zip
    names = {p.name for p in (tmp_path / "part/checkpoint").iterdir()}
    assert not {n for n in names if n.endswith(".pkl")} - {"vecnormalize.pkl"}
    if combo not in DEFAULT_COMBOS:
        stdout = run_cli("resume", str(tmp_path / "part")).stdout
    assert "768" in stdout
    full, part = tmp_path / "full", tmp_path / "part"
    assert same_params(full / "model.zip", part / "model.zip")
    assert progress_rows(full / "progress.csv") == progress_rows(part / "progress.csv")
    assert monitor_rows(full) == monitor_rows(part)
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

    cfg = run_config(256, agent={"normalize": True}, curriculum={"enabled": False})
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
        sections["datapacks"]["dir"] = str(write_packs(tmp_path))
    sections["env"] = {"vectorization": "subproc", "start_method": "forkserver"}
    cfg = run_config(256, **sections)
    train(cfg, run_dir=tmp_path / "r")
    before = VecNormalize.load(str(tmp_path / "r/vecnormalize.pkl"), _DummyVenv())
    run_cli("resume", str(tmp_path / "r"), "--total-steps", "512")
    after = VecNormalize.load(str(tmp_path / "r/vecnormalize.pkl"), _DummyVenv())
    # continued, not restarted from zero: 256 more steps of 2 envs on top of the first part's
    assert after.obs_rms.count >= before.obs_rms.count + 256
    assert json.loads((tmp_path / "r/summary.json").read_text())["total_steps"] == 512


def _DummyVenv():
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import gymcurric  # noqa: F401

    return DummyVecEnv([lambda: gym.make("gymcurric/HazardGrid-v0")])


def test_steps_are_whole_rollouts_announced_and_the_bar_starts_at_the_checkpoint(tmp_path, capsys):
    from gymcurric import cli

    # 2 envs x 64 steps: 300 -> 384, checkpoints every 200 -> 256
    cfg = run_config(300, run={"checkpoint_every": 200})
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps(cfg.to_dict()))
    # trained here (the CLI's own main); the resume below is the one in a new interpreter
    assert cli.main(["train", "--config", str(cfg_file), "--run-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr()
    assert "run.total_steps 300 -> 384" in out.err
    assert "for 384 steps" in out.out
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
    out = run_script(code)
    assert "run.total_steps 500 -> 512" in out.stderr
    assert "BAR [(512, 384)]" in out.stdout
    assert "for 128 steps (to 512 in all)" in out.stdout


def test_a_run_dir_with_a_byte_that_is_not_utf8_is_refused_before_resuming(tmp_path, capsys):
    # train refuses such a --run-dir (e5de826); one renamed so afterwards resumed into a raw
    # UnicodeEncodeError ('surrogates not allowed') from tensorboard's event writer
    import os

    from gymcurric import cli

    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps(run_config(128).to_dict()))
    assert cli.main(["train", "--config", str(cfg_file), "--run-dir", str(tmp_path / "r")]) == 0
    run = tmp_path / "r\udce9"
    os.rename(tmp_path / "r", run)  # the byte 0xe9 on disk: a Latin-1 name
    capsys.readouterr()
    assert cli.main(["resume", str(run), "--total-steps", "256"]) == 2
    err = capsys.readouterr().err
    assert "'run_dir'" in err and "\\udce9" in err and "Traceback" not in err
