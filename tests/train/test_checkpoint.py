"""The checkpoint protocol under kills, logs cut back to it, failed starts, damaged files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from gymcurric.errors import ConfigError, DataError
from gymcurric.train.runner import resume, train
from tests.train.run_harness import (
    ROOT,
    monitor_rows,
    progress_rows,
    run_cli,
    run_config,
    run_script,
    same_params,
)

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
    cfg = run_config(768)
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
        out = run_cli("resume", str(run), check=False)
        assert out.returncode == 2 and "no complete checkpoint" in out.stderr
        run_cli("train", "--config", str(cfg_file), "--run-dir", str(run))
    else:
        run_cli("resume", str(run))
    train(cfg, run_dir=tmp_path / "full")
    assert same_params(tmp_path / "full/model.zip", run / "model.zip")
    assert progress_rows(tmp_path / "full/progress.csv") == progress_rows(run / "progress.csv")
    assert monitor_rows(tmp_path / "full") == monitor_rows(run)
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
    cfg_file.write_text(json.dumps(run_config(768).to_dict()))
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
    proc = run_script(code, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    part = tmp_path / "part"
    steps = [int(r["time/total_timesteps"]) for r in progress_rows(part / "progress.csv", drop=())]
    assert max(steps) > 256  # the killed chunk wrote rows past the checkpoint
    run_cli("resume", str(part))
    train(run_config(768), run_dir=tmp_path / "full")
    steps = [int(r["time/total_timesteps"]) for r in progress_rows(part / "progress.csv", drop=())]
    assert len(steps) == len(set(steps))
    assert progress_rows(tmp_path / "full/progress.csv") == progress_rows(part / "progress.csv")
    assert monitor_rows(tmp_path / "full") == monitor_rows(part)
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
        train(run_config(256, agent={"kwargs": {"n_step": 128}}), run_dir=run)
    assert not run.exists()
    run.mkdir()
    with pytest.raises(ConfigError):
        train(
            run_config(256, env={"id": "NoSuchEnv-v9"}, curriculum={"enabled": False}), run_dir=run
        )
    assert run.is_dir() and not any(run.iterdir())
    # a run killed before its first checkpoint left config.json: a rerun starts afresh
    (run / "config.json").write_text(json.dumps(run_config(256).to_dict()))
    (run / "progress.csv").write_text("LEFTOVER\n")
    assert train(run_config(256), run_dir=run)["total_steps"] == 256
    assert "LEFTOVER" not in (run / "progress.csv").read_text()
    # a directory that holds something else is not deleted
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no gymcurric run"):
        train(run_config(256), run_dir=other)
    assert (other / "notes.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("finished") / "r"
    train(run_config(256), run_dir=run)
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


#: damaged files also resumed through the CLI (a new interpreter each, ~3 s): the run's config
#: (read before the checkpoint) and SB3's model.zip (read by SB3's loader)
CLI_CHECKED = {"config.json", "model.zip"}


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
    if name in CLI_CHECKED:  # the CLI turns every DataError into the same exit: two suffice
        # the same through the CLI: exit 2, the file named, no traceback
        out = run_cli("resume", str(run), "--total-steps", "512", check=False)
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


def test_a_damaged_history_file_costs_the_heatmap_not_the_run(tmp_path):
    from gymcurric.train.plots import write_plots

    run = tmp_path / "r"
    cfg = run_config(256, run={"plots": True})
    train(cfg, run_dir=run)
    (run / "curriculum_history.npz").write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"curriculum_history\.npz"):
        write_plots(run, cfg)
