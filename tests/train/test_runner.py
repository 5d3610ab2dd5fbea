"""The training runner: run directory, composed stacks, exact resume, errors."""

from __future__ import annotations

import csv
import json
from typing import Any

import numpy as np
import pytest
import torch

from gymcurric.errors import ConfigError, DataError
from gymcurric.train.config import TrainConfig
from gymcurric.train.runner import resume, train
from tests.train.run_harness import run_config, write_packs


def _rows(path):
    with open(path) as f:
        return [
            {k: v for k, v in r.items() if not k.startswith("time/")} for r in csv.DictReader(f)
        ]


def _params(path):
    from stable_baselines3 import PPO

    return PPO.load(path, device="cpu").policy.state_dict()


def test_run_directory_holds_what_the_docs_promise(tmp_path):
    out = train(run_config(run={"plots": True}), run_dir=tmp_path / "r")
    run = tmp_path / "r"
    for name in (
        "config.json",
        "progress.csv",
        "monitor.csv",
        "model.zip",
        "curriculum.npz",
        "curriculum_history.npz",
        "summary.json",
        "checkpoint/model.zip",
        "plots/return_cost.png",
        "plots/curriculum.png",
    ):
        assert (run / name).is_file(), name
    assert list(run.glob("events.out.tfevents.*"))
    assert TrainConfig.from_dict(json.loads((run / "config.json").read_text())) == run_config(
        run={"plots": True}
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total_steps"] == out["total_steps"] == 512
    assert summary["ep_cost_mean"] is not None and "curriculum" in summary
    header = (run / "progress.csv").read_text().splitlines()[0].split(",")
    assert "rollout/ep_cost_mean" in header and "curriculum/entropy" in header
    with np.load(run / "curriculum_history.npz") as h:
        assert h["probs"].shape == (len(h["steps"]), len(h["keys"]))
        np.testing.assert_allclose(h["probs"].sum(axis=1), 1.0, rtol=1e-6)


def test_same_seed_same_model_and_logs(tmp_path):
    train(run_config(), run_dir=tmp_path / "a")
    train(run_config(), run_dir=tmp_path / "b")
    pa, pb = _params(tmp_path / "a/model.zip"), _params(tmp_path / "b/model.zip")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert _rows(tmp_path / "a/progress.csv") == _rows(tmp_path / "b/progress.csv")
    other = train(run_config(run={"seed": 1}), run_dir=tmp_path / "c")
    pc = _params(tmp_path / "c/model.zip")
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)
    assert other["seed"] == 1


def test_resume_equals_the_uninterrupted_run(tmp_path):
    train(run_config(768), run_dir=tmp_path / "full")
    train(run_config(256), run_dir=tmp_path / "part")
    out = resume(tmp_path / "part", total_steps=768)
    assert out["total_steps"] == 768
    pa, pb = _params(tmp_path / "full/model.zip"), _params(tmp_path / "part/model.zip")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert _rows(tmp_path / "full/progress.csv") == _rows(tmp_path / "part/progress.csv")
    full = json.loads((tmp_path / "full/summary.json").read_text())
    assert out["curriculum"] == full["curriculum"]
    # the first part's episode log is kept; the resumed part writes its own
    assert (tmp_path / "part/monitor.csv").is_file()
    assert (tmp_path / "part/resumed-256.monitor.csv").is_file()
    from gymcurric.train.plots import read_monitor

    both = read_monitor(tmp_path / "part")
    assert len(both["r"]) == len(read_monitor(tmp_path / "full")["r"])


def test_an_existing_run_directory_is_not_overwritten(tmp_path):
    train(run_config(256), run_dir=tmp_path / "r")
    before = (tmp_path / "r/summary.json").read_text()
    with pytest.raises(ConfigError, match="resume"):
        train(run_config(256), run_dir=tmp_path / "r")
    assert (tmp_path / "r/summary.json").read_text() == before
    train(run_config(256, run={"seed": 3}), run_dir=tmp_path / "r", overwrite=True)
    assert json.loads((tmp_path / "r/summary.json").read_text())["seed"] == 3


def test_resume_errors_name_the_directory(tmp_path):
    with pytest.raises(DataError, match=r"no config\.json"):
        resume(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(run_config().to_dict()))
    with pytest.raises(DataError, match="no checkpoint"):
        resume(tmp_path)


def test_a_saved_config_with_one_bom_is_read_as_the_config_readers_read_one(tmp_path):
    # an editor's BOM: `gymcurric train --config` and load_curriculum_config drop one, while
    # resume refused the run ("not valid JSON (Unexpected UTF-8 BOM ...)")
    from gymcurric.train.runner import load_run_config

    text = json.dumps(run_config().to_dict())
    (tmp_path / "config.json").write_text("\ufeff" + text, encoding="utf-8")
    assert load_run_config(tmp_path) == run_config()
    (tmp_path / "config.json").write_text("\ufeff\ufeff" + text, encoding="utf-8")
    with pytest.raises(DataError, match=r"config\.json: starts with 2 UTF-8 byte order marks"):
        load_run_config(tmp_path)


def test_a_saved_config_with_a_number_past_a_floats_range_names_the_key(tmp_path):
    # json read a hand-edited 1e400 as inf without a word
    from gymcurric.train.runner import load_run_config

    text = json.dumps(run_config().to_dict()).replace('"seed": 0', '"seed": 0, "x": 1e400')
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError, match="too large for a float") as info:
        load_run_config(tmp_path)
    assert (info.value.key, info.value.value) == ("run.x", "1e400")
    assert info.value.source == str(tmp_path / "config.json")


def test_a_saved_config_with_a_byte_that_is_not_utf8_in_env_kwargs_resumes(tmp_path):
    # a Latin-1 file name given on the command line (caf\xe9) reads as "caf\udce9" and trained;
    # f5bd086 refused it in config.json, so such a run could no longer be resumed
    from gymcurric.train.runner import load_run_config

    data = TrainConfig().to_dict()
    data["env"]["kwargs"] = {"path": "caf\udce9.npz"}
    (tmp_path / "config.json").write_text(json.dumps(data))  # as the run wrote it
    assert load_run_config(tmp_path).env.kwargs == {"path": "caf\udce9.npz"}


@pytest.mark.parametrize(
    "sections",
    [
        {"curriculum": {"enabled": False}},
        {"agent": {"normalize": True}},
        {"cost": {"enabled": False}},
        {"risk": {"enabled": True, "params": {"train_every": 64}}},
        {"saute": {"enabled": True, "params": {"safety_budget": 5.0, "max_episode_steps": 40}}},
        {
            "agent": {
                "algo": "ppolag",
                "kwargs": {"n_steps": 64, "batch_size": 64, "cost_limit": 1.0},
            }
        },
        {
            "agent": {
                "algo": "pidlag",
                "kwargs": {"n_steps": 64, "batch_size": 64, "pid_epoch_steps": 20_000},
            }
        },
        {"agent": {"algo": "trpolag", "kwargs": {"n_steps": 64, "batch_size": 64}}},
        {"agent": {"algo": "cpo", "kwargs": {"n_steps": 64, "batch_size": 64}}},
        {"agent": {"algo": "p3o", "kwargs": {"n_steps": 64, "batch_size": 64}}},
        {
            "agent": {
                "algo": "pposimmer",
                "kwargs": {"n_steps": 64, "batch_size": 64, "max_episode_steps": 200},
            }
        },
        {
            "env": {"id": "gymcurric/HazardNav-v0"},
            "curriculum": {"enabled": False},
            "agent": {
                "algo": "sac",
                "kwargs": {"learning_starts": 64, "buffer_size": 512, "batch_size": 32},
            },
        },
        {
            "env": {"id": "gymcurric/HazardNav-v0"},
            "curriculum": {
                "space": {"type": "fixed", "tasks": [{"num_hazards": 0}, {"num_hazards": 8}]},
                "config": {"pool": {"type": "ReplacementPool"}},
            },
        },
    ],
    ids=[
        "no-curriculum",
        "vecnormalize",
        "no-cost-wrapper",
        "risk",
        "saute",
        "ppolag",
        "pidlag",
        "trpolag",
        "cpo",
        "p3o",
        "pposimmer",
        "sac-replay-ring",
        "hazardnav-fixed-tasks",
    ],
)
def test_composed_stacks_build_and_run(tmp_path, sections):
    out = train(run_config(256, **sections), run_dir=tmp_path / "r")
    assert out["total_steps"] == 256
    header = ((tmp_path / "r" / "progress.csv").read_text().splitlines() or [""])[0]
    if "risk" in sections:
        assert "risk/pred_mean" in header and "risk/modulation_scale" in header
    if sections.get("agent", {}).get("algo") == "sac":
        from stable_baselines3 import SAC

        from gymcurric.integrations.sb3 import RingReplayBuffer

        assert SAC.load(tmp_path / "r" / "model.zip").replay_buffer_class is RingReplayBuffer
    elif sections.get("agent", {}).get("algo") in ("cpo", "p3o", "pposimmer"):
        assert "rollout/ep_cost_mean" in header  # no multiplier: the cost is still logged
        algo = sections["agent"]["algo"]
        assert {"cpo": "train/cpo_case", "p3o": "train/kappa", "pposimmer": "simmer/budget"}[
            algo
        ] in header
        # no λ in the summary (not a λ of 0); P3O's penalty weight κ instead
        assert "lagrange_multiplier" not in out and ("kappa" in out) == (algo == "p3o")
        if algo == "p3o":
            assert out["kappa"] == 20.0
        if algo == "pposimmer":  # the PI reference spans the run, not each checkpoint chunk
            from gymcurric.integrations.sb3 import PPOSimmer

            assert PPOSimmer.load(tmp_path / "r" / "model.zip").reference_horizon == 256
    elif sections.get("agent", {}).get("algo", "ppo") != "ppo":
        assert "train/lagrange_multiplier" in header and out["lagrange_multiplier"] >= 0


@pytest.mark.slow
def test_subproc_with_shared_curriculum_runs_and_resumes(tmp_path):
    cfg = run_config(
        512,
        env={"vectorization": "subproc", "start_method": "forkserver"},
        curriculum={"backend": "shared"},
    )
    out = train(cfg, run_dir=tmp_path / "r")
    assert out["curriculum"]["curriculum/updates"] > 0
    again = resume(tmp_path / "r", total_steps=768)  # fresh workers, continued state
    assert again["total_steps"] == 768
    assert again["curriculum"]["curriculum/updates"] > out["curriculum"]["curriculum/updates"]


def test_bad_curriculum_space_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as exc:
        train(run_config(curriculum={"space": {"type": "spiral"}}), run_dir=tmp_path / "r")
    assert exc.value.key == "curriculum.space.type"
    with pytest.raises(ConfigError) as exc:
        train(
            run_config(curriculum={"config": {"pool": {"type": "DualPool", "explore_size": -1}}}),
            run_dir=tmp_path / "s",
        )
    assert str(exc.value.key).startswith("curriculum.config")


def test_unknown_env_and_bad_agent_kwargs_are_config_errors(tmp_path):
    with pytest.raises(ConfigError) as exc:
        train(
            run_config(env={"id": "NoSuchEnv-v9"}, curriculum={"enabled": False}),
            run_dir=tmp_path / "r",
        )
    assert exc.value.key == "env.id"
    with pytest.raises(ConfigError) as exc:
        train(run_config(agent={"kwargs": {"n_stepz": 5}}), run_dir=tmp_path / "s")
    assert exc.value.key == "agent.kwargs.n_stepz"
    # PPOSimmer's VecSimmer is built with the env stack: its settings are named as agent kwargs
    simmer = {"algo": "pposimmer", "kwargs": {"saute_gamma": 1.5, "max_episode_steps": 40}}
    with pytest.raises(ConfigError) as exc:
        train(run_config(agent=simmer), run_dir=tmp_path / "t")
    assert exc.value.key == "agent.kwargs.saute_gamma" and exc.value.value == 1.5


def test_caption_shaping_stack_logs_semantics(tmp_path):
    cfg = run_config(
        256,
        shaping={"enabled": True, "params": {"config": {"capture_interval": 2}}},
        run={"plots": True},
    )
    out = train(cfg, run_dir=tmp_path / "r")
    assert out["total_steps"] == 256
    header = (tmp_path / "r" / "progress.csv").read_text().splitlines()[0]
    assert "semantics/beta" in header and "semantics/norm_margin" in header
    assert (tmp_path / "r" / "plots" / "shaping.png").is_file()
    with pytest.raises(ConfigError) as exc:
        train(
            run_config(256, shaping={"enabled": True, "params": {"bogus": 1}}),
            run_dir=tmp_path / "s",
        )
    assert exc.value.key == "shaping.params.bogus"


def test_datapack_stack_presents_datapacks_and_writes_logs(tmp_path):
    packs = write_packs(tmp_path)
    cfg = run_config(
        256, curriculum={"enabled": False}, datapacks={"enabled": True, "dir": str(packs)}
    )
    out = train(cfg, run_dir=tmp_path / "r")
    assert out["total_steps"] == 256
    logs = list((tmp_path / "r" / "datapacks").rglob("*.jsonl"))
    entries = [json.loads(line) for line in logs[0].read_text().splitlines()] if logs else []
    assert entries and all(e["sampled_episodes"][0]["pack_id"].startswith("p") for e in entries)
    header = (tmp_path / "r" / "progress.csv").read_text().splitlines()[0]
    assert "datapack/stage_index" in header
    # resume continues the same sampler (its logs go on from where they stopped)
    again = resume(tmp_path / "r", total_steps=384)
    assert again["total_steps"] == 384
    ids = [json.loads(line)["sample_id"] for line in logs[0].read_text().splitlines()]
    assert ids == list(range(len(ids))) and len(ids) > len(entries)
    # a folder with another env's datapacks is refused, naming what it holds
    with pytest.raises(DataError, match="HazardGrid"):
        train(
            run_config(
                256,
                env={"id": "gymcurric/HazardNav-v0"},
                curriculum={"enabled": False},
                datapacks={"enabled": True, "dir": str(packs)},
            ),
            run_dir=tmp_path / "s",
        )


@pytest.mark.slow
def test_datapacks_under_subproc_share_one_sampler(tmp_path):
    from tests.datapacks.packs import record

    packs = tmp_path / "packs"
    packs.mkdir()
    recs = [
        record(
            f"p{i}",
            env_id="gymcurric/HazardGrid-v0",
            tier=i % 3,
            seed=i,
            task_params={"goal_distance": 1 + i % 5, "size": 8, "max_steps": 40},
        )
        for i in range(6)
    ]
    for r in recs:
        r["supervision_hints"]["prerequisite_tags"] = []
    (packs / "p.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    cfg = run_config(
        256,
        curriculum={"enabled": False},
        datapacks={"enabled": True, "dir": str(packs)},
        env={"vectorization": "subproc", "start_method": "forkserver"},
    )
    out = train(cfg, run_dir=tmp_path / "r")
    assert out["total_steps"] == 256
    log = (tmp_path / "r" / "datapacks" / "datapack_samples.jsonl").read_text().splitlines()
    assert len(log) > 2  # one stream of draws in this process, not one per worker


def test_a_regret_curriculum_gets_its_scores_from_the_runner(tmp_path):
    from stable_baselines3 import PPO

    from gymcurric.integrations.sb3 import RegretRolloutBuffer

    scorer = {
        "scorer": {"type": "RobustPLRScorer"},
        "pool": {"type": "ReplacementPool", "capacity": 6},
    }
    cfg = run_config(256, curriculum={"config": scorer})
    out = train(cfg, run_dir=tmp_path / "r")
    assert out["curriculum"]["curriculum/scores"] > 0  # RegretScoreCallback was attached
    header = (tmp_path / "r" / "progress.csv").read_text().splitlines()[0]
    assert "curriculum/rollout_score_mean" in header and "curriculum/exploratory_frac" in header
    # robust PLR on plain PPO: the buffer that leaves new tasks' steps out of training
    assert PPO.load(tmp_path / "r" / "model.zip").rollout_buffer_class is RegretRolloutBuffer


@pytest.mark.slow
def test_datapack_runs_are_the_same_under_dummy_and_subproc(tmp_path):
    # SubprocVecEnv's float64 rewards (DummyVecEnv's are float32) changed the returns reported
    # to the datapack curriculum, rollout/ep_rew_mean and VecNormalize's statistics
    from tests.train.run_harness import monitor_rows, progress_rows, same_params

    packs = write_packs(tmp_path)
    runs = {}
    for vec in ("dummy", "subproc"):
        cfg = run_config(
            256,
            curriculum={"enabled": False},
            datapacks={"enabled": True, "dir": str(packs)},
            env={"num_envs": 3, "vectorization": vec},
            agent={"normalize": True, "kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1}},
        )
        runs[vec] = run = tmp_path / vec
        train(cfg, run_dir=run)
    logs = {
        vec: [
            {k: v for k, v in json.loads(line).items() if k != "timestamp"}
            for line in (run / "datapacks" / "datapack_samples.jsonl").read_text().splitlines()
        ]
        for vec, run in runs.items()
    }
    assert logs["dummy"] == logs["subproc"] and logs["dummy"]
    dummy, sub = runs["dummy"], runs["subproc"]
    assert progress_rows(dummy / "progress.csv") == progress_rows(sub / "progress.csv")
    assert monitor_rows(dummy) == monitor_rows(sub)
    assert same_params(dummy / "model.zip", sub / "model.zip")


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["gymcurric/HazardNav-v0", "gymcurric/HazardGrid-v0"])
def test_runs_without_datapacks_are_the_same_under_dummy_and_subproc(tmp_path, env_id):
    # SB3's SubprocVecEnv gives float64 rewards, DummyVecEnv float32: VecCostMonitor's returns
    # (monitor.csv, rollout/ep_rew_mean) and VecNormalize's statistics differed in the last bits
    from tests.train.run_harness import monitor_rows, progress_rows, same_params

    runs = {}
    for vec in ("dummy", "subproc"):
        cfg = run_config(
            256,
            curriculum={"enabled": False},
            env={"id": env_id, "kwargs": {"max_steps": 30}, "num_envs": 3, "vectorization": vec},
            agent={"normalize": True, "kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1}},
        )
        runs[vec] = run = tmp_path / vec
        train(cfg, run_dir=run)
    dummy, sub = runs["dummy"], runs["subproc"]
    assert monitor_rows(dummy) == monitor_rows(sub) and monitor_rows(dummy)
    assert progress_rows(dummy / "progress.csv") == progress_rows(sub / "progress.csv")
    assert same_params(dummy / "model.zip", sub / "model.zip")


class _Unsendable:
    def __reduce__(self) -> Any:
        raise TypeError("the datapack sampler is not sent to the workers")


def test_the_sub_env_factory_does_not_carry_the_datapack_sampler():
    # a subproc worker gets the factory pickled; the sampler draws in the main process only
    import cloudpickle

    from gymcurric.train.build import build_env_fn
    from gymcurric.wrappers.datapack import PresentDatapack

    factory = build_env_fn(run_config(curriculum={"enabled": False}), None, _Unsendable())
    env = cloudpickle.loads(cloudpickle.dumps(factory))()
    try:
        assert isinstance(env, PresentDatapack)
    finally:
        env.close()


class _Layer:
    """A vec env (``venv`` None) or a wrapper over one: counts its close() calls."""

    def __init__(self, venv: Any = None, interrupt: bool = False) -> None:
        if venv is not None:
            self.venv = venv
        self.interrupt, self.closes = interrupt, 0

    def close(self) -> None:
        self.closes += 1
        if hasattr(self, "venv"):
            self.venv.close()
        elif self.interrupt and self.closes == 1:
            raise KeyboardInterrupt  # a Ctrl-C while the workers finish


@pytest.mark.parametrize("interrupt", [False, True])
def test_built_closes_its_envs_once_and_finishes_an_interrupted_close(interrupt):
    from gymcurric.train.build import Built

    base = _Layer(interrupt=interrupt)
    wrapper = _Layer(base)
    built = Built(venv=wrapper)
    if interrupt:
        with pytest.raises(KeyboardInterrupt):
            built.close_envs()  # _finish's close
    else:
        built.close_envs()
    built.close()  # the runner's final close
    built.close()
    # the wrappers closed once; the base again only to finish an interrupted close
    assert (wrapper.closes, base.closes) == (1, 2 if interrupt else 1)


def test_a_sub_env_close_that_raises_at_the_end_is_raised_once(tmp_path, monkeypatch):
    # the close that failed (in _finish) was tried again by the runner's final close(): a
    # DummyVecEnv closed the failing sub-env again, and its repeated error replaced the first
    import tests.faulty_envs as faulty
    from tests.faulty_envs import MAKE_ID

    closes: list[int] = []

    def failing_close(self: Any) -> None:
        closes.append(id(self))
        if id(self) == closes[0]:  # the first sub-env's close fails, every time
            raise RuntimeError(f"sub-env close failed (call {closes.count(id(self))})")

    monkeypatch.setattr(faulty.FaultyGrid, "close", failing_close)
    env = {"id": MAKE_ID, "kwargs": {"fail_at": 10**9, "size": 8, "max_steps": 40}}
    cfg = run_config(128, env=env, curriculum={"enabled": False}, run={"checkpoint_every": 128})
    with pytest.raises(RuntimeError, match=r"\(call 1\)") as caught:
        train(cfg, run_dir=tmp_path / "r")
    assert closes.count(closes[0]) == 1 and caught.value.__context__ is None  # closed once
    assert (tmp_path / "r" / "model.zip").is_file()  # the run is kept


def test_a_ctrl_c_while_the_workers_close_at_the_end_leaves_no_worker_running(
    tmp_path, monkeypatch
):
    # Built.close_envs marked the envs closed before closing them: a KeyboardInterrupt in
    # _finish's close (the workers flushing their last updates) left the runner's final close
    # nothing to do, and the workers running after train() returned (here for 60 s). The
    # Ctrl-C comes from a thread (tests/interrupts.py): pytest-timeout's SIGALRM stays armed
    from gymcurric.integrations.sb3 import CheckedSubprocVecEnv
    from tests.faulty_envs import MAKE_ID
    from tests.interrupts import interrupts

    envs: list[Any] = []
    close = CheckedSubprocVecEnv.close

    def interrupted_close(self: Any) -> None:
        if not envs:  # the first close: interrupted while it waits for the workers
            envs.append(self)
            sent.after(0.5)
        close(self)

    monkeypatch.setattr(CheckedSubprocVecEnv, "close", interrupted_close)
    kwargs = {"fail_at": 10**9, "close_s": 60.0, "size": 8, "max_steps": 40}
    env = {"id": MAKE_ID, "vectorization": "subproc", "start_method": "fork", "kwargs": kwargs}
    cfg = run_config(128, env=env, curriculum={"enabled": False}, run={"checkpoint_every": 128})
    try:
        with interrupts() as sent, pytest.raises(KeyboardInterrupt):
            train(cfg, run_dir=tmp_path / "r")
        alive = [p.pid for p in envs[0].processes if p.is_alive()]
    finally:
        for process in envs[0].processes if envs else []:
            if process.is_alive():  # the old code's leftovers: not left to the next test
                process.kill()
                process.join()
    assert len(envs[0].processes) == 2 and alive == []
    assert (tmp_path / "r" / "checkpoint").is_dir()  # the run's checkpoint is kept


def test_a_wrapper_close_that_raises_at_the_end_still_ends_the_workers(tmp_path, monkeypatch):
    # VecMonitor closes its monitor file before the vector env below it: an error there (EIO
    # on a network filesystem, say) counted as a done close, and the runner's final close()
    # left the subprocess workers running after train() raised
    import errno

    from stable_baselines3.common.monitor import ResultsWriter

    from gymcurric.integrations.sb3 import CheckedSubprocVecEnv
    from tests.faulty_envs import MAKE_ID

    envs: list[Any] = []
    init = CheckedSubprocVecEnv.__init__

    def recorded_init(self: Any, *args: Any, **kwargs: Any) -> None:
        envs.append(self)
        init(self, *args, **kwargs)

    def failing_close(self: Any) -> None:
        raise OSError(errno.EIO, "Input/output error", "monitor.csv")

    monkeypatch.setattr(CheckedSubprocVecEnv, "__init__", recorded_init)
    monkeypatch.setattr(ResultsWriter, "close", failing_close)
    kwargs = {"fail_at": 10**9, "size": 8, "max_steps": 40}
    env = {"id": MAKE_ID, "vectorization": "subproc", "start_method": "fork", "kwargs": kwargs}
    cfg = run_config(128, env=env, curriculum={"enabled": False}, run={"checkpoint_every": 128})
    try:
        with pytest.raises(OSError, match="Input/output error") as caught:
            train(cfg, run_dir=tmp_path / "r")
        exit_codes = [p.exitcode for p in envs[0].processes]
    finally:
        for process in envs[0].processes if envs else []:
            if process.is_alive():  # the old code's leftovers: not left to the next test
                process.kill()
                process.join()
    assert len(envs) == 1 and exit_codes == [0, 0]  # closed as usual, not left running
    assert caught.value.__context__ is None  # raised once
