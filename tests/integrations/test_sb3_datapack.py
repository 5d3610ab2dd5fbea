"""VecPresentDatapack: central datapack sampling for SB3 DummyVecEnv / SubprocVecEnv."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.datapacks import (
    DataPack,
    DataPackCurriculum,
    DataPackCurriculumConfig,
    DataPackRLSampler,
)
from gymcurric.datapacks.loading import load_datapacks
from gymcurric.errors import ConfigError, TaskError
from gymcurric.integrations.sb3 import CheckedDummyVecEnv, CheckedSubprocVecEnv
from gymcurric.integrations.sb3 import datapack as datapack_module
from gymcurric.integrations.sb3.datapack import (
    DatapackCallback,
    VecPresentDatapack,
    make_datapack_vec_env,
)
from gymcurric.wrappers.datapack import PresentDatapack
from tests.datapacks.packs import record
from tests.wrappers.vector.datapack_stubs import (
    ENV_ID,
    Events,
    LockedSampler,
    WithSampler,
    own_sampler_below_none,
    packs,
)

FORKSERVER = {"start_method": "forkserver"}


def safe_packs() -> list[DataPack]:
    """Hazard-free 3-step episodes: with window=4 the default curriculum leaves warmup fast."""
    return [
        DataPack.from_dict(
            record(
                f"s{i}",
                env_id=ENV_ID,
                tier=i % 2,
                task_params={"size": 4, "num_hazards": 0, "max_steps": 3},
                seed=i,
                supervision_hints={"safety_critical": False},
            )
        )
        for i in range(4)
    ]


def rollout(venv: VecPresentDatapack, steps: int = 40, seed: int = 0):
    """Seeded random actions. Returns, computed here from what the vector env returned: the
    ended episodes in (step, sub-env) order as (sub-env, pack id, return, cost, success), the
    pack id each reset of each sub-env reported, and the sub-envs that ended at each step."""
    rng = np.random.default_rng(seed)
    venv.reset()
    n = venv.num_envs
    started = [[venv.reset_infos[i]["datapack"]["pack_id"]] for i in range(n)]
    ret, cost = np.zeros(n), np.zeros(n)
    episodes: list[tuple] = []
    ends: list[list[int]] = []
    for _ in range(steps):
        _, rewards, dones, infos = venv.step(rng.integers(0, 4, n))
        ret += rewards
        cost += [info["cost"] for info in infos]
        ended = np.flatnonzero(dones).tolist()
        for i in ended:
            pack = venv.datapacks[i]
            success = bool(infos[i]["is_success"])
            episodes.append((i, pack.pack_id, ret[i], cost[i], success))
            started[i].append(venv.reset_infos[i]["datapack"]["pack_id"])
            ret[i] = cost[i] = 0.0
        if ended:
            ends.append(ended)
    return episodes, started, ends


def test_reports_match_the_stream_and_presets_run_one_episode_ahead():
    sampler = Events(packs())
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=0)
    episodes, started, ends = rollout(venv, steps=60)
    venv.close()
    reports = [e[1] for e in sampler.events if e[0] == "report"]
    assert len(reports) == len(episodes) > 10
    assert any(ep[4] for ep in episodes) and any(ep[3] > 0 for ep in episodes)
    for rep, (_, _, ret, cost, success) in zip(reports, episodes, strict=True):
        assert rep["return_"] == pytest.approx(ret)
        assert (rep["error"], rep["success"], rep["tag_results"]) == (
            cost > 0,
            success,
            {"reach": success},
        )
    # one episode ahead: the first reset draws episode 1 and episode 2 of both sub-envs; each
    # later draw (one batch per step with ended episodes, in sub-env order) is episode k + 2
    # of the sub-env whose episode k just ended
    draws = [e[1] for e in sampler.events if e[0] == "draw"]
    assert draws[:2] == [["p0", "p1"], ["p2", "p3"]]
    expected = [["p0", "p2"], ["p1", "p3"]]
    for ended, batch in zip(ends, draws[2:], strict=True):
        for i, pack_id in zip(ended, batch, strict=True):
            expected[i].append(pack_id)
    for i in range(2):
        assert started[i] == expected[i][: len(started[i])]
        assert [p.pack_id for p in [venv.next_datapacks[i]]] == [expected[i][len(started[i])]]
        ran = [ep[1] for ep in episodes if ep[0] == i]  # venv.datapacks named the ended episode
        assert ran == started[i][: len(ran)]


def test_report_order_is_by_step_then_sub_env():
    sampler = Events(packs())
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=3, seed=1)
    episodes, _, _ = rollout(venv, steps=30, seed=1)
    venv.close()
    kinds = [e[0] for e in sampler.events]
    assert kinds[:2] == ["draw", "draw"]
    # after the first reset, each step's reports are followed by exactly one draw of as many
    i = 2
    while i < len(kinds):
        j = i
        while kinds[j] == "report":
            j += 1
        assert j > i and kinds[j] == "draw"
        assert len(sampler.events[j][1]) == j - i
        i = j + 1
    assert len(episodes) == kinds.count("report")


def _sequence(vec_env_cls, vec_env_kwargs=None):
    cur = DataPackCurriculum(DataPackCurriculumConfig(window=4))
    sampler = DataPackRLSampler(packs(), curriculum=cur, seed=3)
    venv = make_datapack_vec_env(
        ENV_ID, sampler, n_envs=2, seed=5, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs
    )
    episodes, started, _ = rollout(venv, steps=50, seed=2)
    venv.close()
    return (
        episodes,
        started,
        [[p["pack_id"] for p in e["sampled_episodes"]] for e in sampler.logs],
        cur,
    )


@pytest.mark.slow  # the SubprocVecEnv path is in the default suite through the sampler tests
def test_dummy_and_subproc_give_the_same_datapack_sequence():
    dummy = _sequence(DummyVecEnv)
    sub = _sequence(SubprocVecEnv, FORKSERVER)
    # episodes: sub-env, pack, return (float32 rewards from both), cost, success
    assert dummy[0] == sub[0]
    assert dummy[1] == sub[1]  # what every reset presented
    assert dummy[2] == sub[2]  # the sampler's logs
    assert dummy[3].episode == sub[3].episode > 10  # worker episodes reached the curriculum


def seeded_stream(n_envs, steps, vec_env_cls=None, vec_env_kwargs=None, float64_rewards=False):
    """Everything a seeded run gives: per step the observations, the rewards (and their dtype) and
    the dones; the sampler's log (timestamps aside) and its diagnostics (the curriculum's)."""
    sampler = DataPackRLSampler(
        packs(), curriculum=DataPackCurriculum(DataPackCurriculumConfig(window=4)), seed=3
    )
    venv = make_datapack_vec_env(
        ENV_ID,
        sampler,
        n_envs=n_envs,
        seed=5,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
    )
    if float64_rewards:  # SubprocVecEnv's rewards: np.stack of the workers' float64 rewards
        venv.venv.buf_rews = np.zeros(n_envs, dtype=np.float64)
    rng = np.random.default_rng(2)
    stream = [venv.reset().tolist()]
    for _ in range(steps):
        obs, rewards, dones, _ = venv.step(rng.integers(0, 4, n_envs))
        stream.append((obs.tolist(), rewards.dtype.str, rewards.tolist(), dones.tolist()))
    venv.close()
    logs = [{k: v for k, v in e.items() if k != "timestamp"} for e in sampler.logs]
    return stream, json.dumps(logs, sort_keys=True), json.dumps(sampler.get_diagnostics())


def test_the_stream_and_reports_do_not_depend_on_the_inner_reward_dtype():
    # SB3's DummyVecEnv returns float32 rewards, SubprocVecEnv float64 ones: the returns reported
    # (mean_return, the sampler's log) differed in the last bits; DummyVecEnv's stream is kept
    dummy = seeded_stream(3, 120)
    as_subproc = seeded_stream(3, 120, float64_rewards=True)
    assert dummy[0][1][1] == np.dtype(np.float32).str
    assert dummy == as_subproc


@pytest.mark.slow  # three forkserver workers
def test_dummy_and_subproc_give_the_same_seeded_run():
    dummy = seeded_stream(3, 200)
    assert dummy == seeded_stream(3, 200, CheckedSubprocVecEnv, FORKSERVER)
    assert dummy == seeded_stream(3, 200, SubprocVecEnv)  # SB3's, its default start method


def _learn(vec_env_cls, vec_env_kwargs=None):
    cur = DataPackCurriculum(DataPackCurriculumConfig(window=4))
    sampler = DataPackRLSampler(safe_packs(), curriculum=cur, seed=0)
    venv = make_datapack_vec_env(
        ENV_ID, sampler, n_envs=2, seed=0, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs
    )
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    venv.close()
    assert cur.episode >= 4 and cur.stage == "skill_building"
    assert cur.metrics()["mean_return"] is not None
    assert any(
        e["curriculum_stage"] == "skill_building" for e in sampler.logs
    )  # later draws use it
    assert venv.get_diagnostics()["curriculum"]["stage"] == "skill_building"
    return cur.episode


def test_stages_advance_during_ppo_learn_dummy():
    assert _learn(DummyVecEnv) >= 40  # 128 steps of 3-step episodes


@pytest.mark.slow
def test_stages_advance_from_subproc_worker_episodes_during_ppo_learn():
    assert _learn(SubprocVecEnv, FORKSERVER) >= 40


def test_reset_mid_episode_reports_nothing_and_presents_the_preset():
    sampler = Events(packs())
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=0)
    venv.reset()
    venv.step(np.zeros(2, np.int64))  # max_steps >= 3: nobody ends
    assert venv.next_datapacks[0].pack_id == "p2"
    venv.reset()
    assert not [e for e in sampler.events if e[0] == "report"]
    assert [venv.reset_infos[i]["datapack"]["pack_id"] for i in range(2)] == ["p2", "p3"]
    assert [p.pack_id for p in venv.datapacks] == ["p2", "p3"]
    assert [p.pack_id for p in venv.next_datapacks] == ["p4", "p5"]
    venv.close()


def test_success_fn_is_used():
    sampler = Events(packs())
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=0, success_fn=lambda info: True)
    rollout(venv, steps=12)
    venv.close()
    reports = [e[1] for e in sampler.events if e[0] == "report"]
    assert reports and all(r["success"] for r in reports)


def test_clear_errors():
    plain = make_vec_env(ENV_ID, n_envs=2)
    with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] are not wrapped"):
        VecPresentDatapack(plain, Events(packs()))
    own = make_vec_env(
        ENV_ID, n_envs=2, wrapper_class=PresentDatapack, wrapper_kwargs={"sampler": Events(packs())}
    )
    with pytest.raises(ConfigError, match="their own sampler"):
        VecPresentDatapack(own, Events(packs()))
    ok = make_vec_env(
        ENV_ID, n_envs=2, wrapper_class=PresentDatapack, wrapper_kwargs={"sampler": None}
    )
    with pytest.raises(ConfigError, match="sample_batch"):
        VecPresentDatapack(ok, object())
    with pytest.raises(ConfigError, match="success_fn"):
        VecPresentDatapack(ok, Events(packs()), success_fn=3)
    with pytest.raises(ConfigError, match="VecEnv"):
        VecPresentDatapack("not a venv", Events(packs()))  # type: ignore[arg-type]
    for n_envs in (0, -1, 1.5, True):  # refused before any sub-env is built
        with pytest.raises(ConfigError, match=r"make_datapack_vec_env: .*'n_envs'"):
            make_datapack_vec_env(ENV_ID, Events(packs()), n_envs=n_envs, vec_env_cls=SubprocVecEnv)
    with pytest.raises(ConfigError, match=r"make_datapack_vec_env: .*'sampler'"):
        make_datapack_vec_env(ENV_ID, object(), n_envs=2, vec_env_cls=SubprocVecEnv)
    venv = VecPresentDatapack(ok, Events(packs()))  # make_vec_env's wrapper_class route works too
    venv.reset()
    assert [p.pack_id for p in venv.datapacks] == ["p0", "p1"]
    venv.close()
    plain.close()
    own.close()


def test_a_numpy_integer_n_envs_builds_as_before():
    # a count read from an array (np.int64) built before the count was checked; still does
    venv = make_datapack_vec_env(ENV_ID, Events(packs()), n_envs=np.int64(2))
    assert venv.num_envs == 2
    venv.reset()
    assert [p.pack_id for p in venv.datapacks] == ["p0", "p1"]
    venv.close()
    with pytest.raises(ConfigError, match=r"'n_envs': np.int64\(0\)"):
        make_datapack_vec_env(ENV_ID, Events(packs()), n_envs=np.int64(0))


def test_callback_logs_the_stage_during_learn(tmp_path):
    cur = DataPackCurriculum(DataPackCurriculumConfig(window=4))
    sampler = DataPackRLSampler(safe_packs(), curriculum=cur, seed=0)
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    callback = DatapackCallback(venv)
    model.learn(128, callback=callback)
    venv.close()
    rows = (tmp_path / "progress.csv").read_text().splitlines()
    header = rows[0].split(",")
    stage = [row.split(",")[header.index("datapack/stage_index")] for row in rows[1:]]
    assert stage[-1] == "1.0"  # skill_building, logged from the rollouts
    assert callback.last["datapack/stage"] == "skill_building"
    assert callback.last["datapack/episode"] == cur.episode
    with pytest.raises(ConfigError, match="get_diagnostics"):
        DatapackCallback(object())


def test_explicit_task_via_set_options_draws_and_reports_nothing():
    sampler = Events(packs())
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=0)
    venv.reset()
    draws = len(sampler.events)
    venv.set_options({"task": {"size": 4, "num_hazards": 0, "max_steps": 2}})
    venv.reset()
    assert venv.datapacks == [None, None] and len(sampler.events) == draws  # presets kept
    assert [p.pack_id for p in venv.next_datapacks] == ["p2", "p3"]
    for _ in range(2):  # the explicit 2-step episodes end: not reported, presets presented
        venv.step(np.zeros(2, np.int64))
    assert not [e for e in sampler.events if e[0] == "report"]
    assert [venv.reset_infos[i]["datapack"]["pack_id"] for i in range(2)] == ["p2", "p3"]
    assert [p.pack_id for p in venv.next_datapacks] == ["p4", "p5"]
    venv.close()


# SubprocVecEnv (forkserver: ~5 s a test) is slow: the names read are the same with DummyVecEnv,
# and a safe call's worker surviving a refusal on SubprocVecEnv is covered by
# tests/integrations/test_sb3_sub_env_names.py (resuming a refused task, [subproc])
VEC_ENVS = [(DummyVecEnv, None), pytest.param(SubprocVecEnv, FORKSERVER, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("vec_env_cls", "vec_env_kwargs"), VEC_ENVS)
def test_a_user_wrapper_with_a_sampler_above_present_datapack_is_not_read(
    vec_env_cls, vec_env_kwargs
):
    # SB3's get_attr takes the outermost wrapper with the name: 'sampler' would be the user's
    # (which cannot even be pickled out of a worker); the datapacks come from the central one
    sampler = Events(packs())
    venv = make_datapack_vec_env(
        ENV_ID, sampler, n_envs=2, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs,
        wrapper=lambda env: WithSampler(env, LockedSampler(packs())),
    )  # fmt: skip
    try:
        venv.reset()
        assert [p.pack_id for p in venv.datapacks] == ["p0", "p1"]
        for _ in range(12):
            venv.step(np.zeros(2, dtype=np.int64))
        assert sum(e[0] == "report" for e in sampler.events) >= 2
        if vec_env_cls is DummyVecEnv:  # the user's sampler (it cannot leave a worker): untouched
            assert [sub.sampler.events for sub in venv.venv.envs] == [[], []]
    finally:
        venv.close()


@pytest.mark.parametrize(("vec_env_cls", "vec_env_kwargs"), VEC_ENVS)
def test_own_sampler_under_a_user_wrapper_is_refused_with_the_env_left_working(
    vec_env_cls, vec_env_kwargs
):
    # a PresentDatapack with its own sampler under a user wrapper with sampler=None; the sampler
    # is built in the worker and cannot be pickled: reading it (datapack_sampler) made the
    # SubprocVecEnv worker exit (EOFError); datapack_has_sampler sends back a bool
    hidden = make_vec_env(
        ENV_ID, n_envs=2, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs,
        wrapper_class=own_sampler_below_none,
    )  # fmt: skip
    try:
        with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] .* their own sampler"):
            VecPresentDatapack(hidden, Events(packs()))
        assert hidden.env_method("has_wrapper_attr", "datapack_has_sampler") == [True, True]
        hidden.reset()
    finally:
        hidden.close()


def _stream(vec_env_cls, steps=30):
    """Every step's observations, rewards and dones of a seeded run, and the sampler's log."""
    sampler = DataPackRLSampler(packs(), curriculum=DataPackCurriculum(), seed=3)
    venv = make_datapack_vec_env(ENV_ID, sampler, n_envs=2, seed=5, vec_env_cls=vec_env_cls)
    base = type(venv.venv)
    rng = np.random.default_rng(2)
    out = [venv.reset().copy()]
    for _ in range(steps):
        obs, rewards, dones, _ = venv.step(rng.integers(0, 4, 2))
        out += [obs.copy(), rewards.copy(), dones.copy()]
    venv.close()
    return base, out, [[p["pack_id"] for p in e["sampled_episodes"]] for e in sampler.logs]


def test_the_default_vector_env_is_gymcurrics_checked_one_and_steps_as_sb3s_did():
    # as gymcurric train builds it: a sub-env's error names it (SB3's DummyVecEnv, the old
    # default, let it escape raw); an explicit vec_env_cls is used as given
    checked, stream, log = _stream(None)
    plain, old_stream, old_log = _stream(DummyVecEnv)
    assert checked is CheckedDummyVecEnv and issubclass(checked, DummyVecEnv)
    assert plain is DummyVecEnv
    assert len(stream) == len(old_stream) and log == old_log
    assert all(np.array_equal(a, b) for a, b in zip(stream, old_stream, strict=True))


def test_a_task_the_env_refuses_is_named_before_any_sub_env_is_built(tmp_path, monkeypatch):
    bad = tmp_path / "packs.jsonl"
    bad.write_text(json.dumps(record("typo", env_id=ENV_ID, task_params={"sizee": 5})) + "\n")
    sampler = DataPackRLSampler([*packs(), *load_datapacks(bad)], seed=0)
    built = []
    monkeypatch.setattr(datapack_module, "make_vec_env", lambda *a, **k: built.append(a))
    for vec_env_cls in (None, DummyVecEnv, SubprocVecEnv):  # the check does not depend on it
        with pytest.raises(TaskError) as info:
            make_datapack_vec_env(ENV_ID, sampler, n_envs=2, vec_env_cls=vec_env_cls)
        assert str(info.value).startswith(f"{bad}: datapack 'typo': task_params refused by")
        assert (info.value.key, info.value.value) == ("task_params.sizee", 5)
    assert built == []


class _TextCost(gym.Wrapper):
    """Reports each step's cost as text, a number formatted for a log."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "cost": f"{info.get('cost', 0.0)}"}


def test_a_cost_written_as_text_is_refused_naming_the_sub_env():
    # float("0.0") read it without a word; every other cost reader refuses text
    venv = VecPresentDatapack(
        make_vec_env(
            ENV_ID, n_envs=2, wrapper_class=lambda e: PresentDatapack(_TextCost(e), sampler=None)
        ),
        Events(packs()),
    )
    venv.reset()
    with pytest.raises(ConfigError, match=r"VecPresentDatapack: .*info\['cost'\]\[0\].*'0\.0'"):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.close()


class _Cost(gym.Wrapper):
    """Reports each step's cost as the given kind of number."""

    def __init__(self, env, kind):
        super().__init__(env)
        self.kind = kind

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "cost": self.kind(0.5)}


def test_a_step_of_number_costs_needs_no_check_per_sub_env(monkeypatch):
    # the check of each sub-env's cost ran on every step; one np.asarray shows no text
    calls = []
    monkeypatch.setattr(datapack_module, "check_cost_values", lambda *a, **k: calls.append(a))
    kinds = [float, np.float32, lambda c: c > 0]
    venv = VecPresentDatapack(
        DummyVecEnv(
            [lambda k=k: PresentDatapack(_Cost(gym.make(ENV_ID), k), sampler=None) for k in kinds]
        ),
        Events(packs()),
    )
    venv.reset()
    for _ in range(3):
        venv.step(np.zeros(3, dtype=np.int64))
    venv.close()
    assert calls == []
