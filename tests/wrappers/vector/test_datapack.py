from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.datapacks import (
    DataPack,
    DataPackCurriculum,
    DataPackCurriculumConfig,
    DataPackRLSampler,
)
from gymcurric.errors import ConfigError
from gymcurric.wrappers.datapack import PresentDatapack as SinglePresentDatapack
from gymcurric.wrappers.vector.datapack import PresentDatapack, make_datapack_vec, sub_env_info
from tests.datapacks.packs import record
from tests.wrappers.vector.datapack_stubs import (
    ENV_ID,
    Events,
    own_sampler_below_none,
    packs,
    success_unreported,
    user_sampler_above,
)

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


def make(mode, sampler, vec="sync", n=2, **kw):
    return make_datapack_vec(
        ENV_ID, sampler, num_envs=n, vectorization_mode=vec,
        vector_kwargs={"autoreset_mode": mode}, **kw,
    )  # fmt: skip


def rollout(envs, steps=40, seed=0):
    """Step with seeded actions; reference outcomes computed from what the vector env returned.

    Returns (ended episodes in order as (sub-env, pack_id, return, error, success), presented
    pack ids per sub-env in order).
    """
    mode = envs.metadata["autoreset_mode"]
    n = envs.num_envs
    rng = np.random.default_rng(seed)
    _, info = envs.reset(seed=seed)
    assert info["_datapack"].all()
    presented = [[pid] for pid in info["datapack"]["pack_id"]]
    assert [p.pack_id for p in envs.datapacks] == [s[0] for s in presented]
    ret, cost = np.zeros(n), np.zeros(n)
    episodes = []
    for _ in range(steps):
        _, r, term, trunc, info = envs.step(rng.integers(0, 4, size=n))
        dones = term | trunc
        step_cost = np.where(info.get("_cost", np.zeros(n, bool)), info.get("cost", 0.0), 0.0)
        if mode == AutoresetMode.SAME_STEP and dones.any():
            fin = info["final_info"]
            step_cost = np.where(dones, np.where(fin["_cost"], fin["cost"], 0.0), step_cost)
            success = np.where(dones, fin["is_success"], False)
        else:
            success = info.get("is_success", np.zeros(n, bool))
        ret += r
        cost += step_cost
        for i in np.flatnonzero(dones):
            episodes.append(
                (int(i), envs.datapacks[i].pack_id, float(ret[i]), bool(cost[i] > 0),
                 bool(success[i]))
            )  # fmt: skip
            ret[i] = cost[i] = 0.0
        if "_datapack" in info:
            for i in np.flatnonzero(info["_datapack"]):
                presented[i].append(info["datapack"]["pack_id"][i])
    return episodes, presented


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vec", ["sync", "async"])
def test_outcomes_and_presentation_match_the_vector_stream(mode, vec):
    sampler = Events(packs())
    envs = make(mode, sampler, vec=vec)
    episodes, presented = rollout(envs)
    tasks = envs.env.get_attr("task")  # the tasks really running in the sub-envs
    envs.close()
    # every ended episode was reported once, in order, with what the agent saw
    reports = sampler.reports()
    assert len(reports) == len(episodes) >= 6
    for rep, (_, _, ret, err, ok) in zip(reports, episodes, strict=True):
        assert rep["return_"] == pytest.approx(ret, abs=1e-9)
        assert (rep["error"], rep["success"], rep["tag_results"]) == (err, ok, {"reach": ok})
    assert any(e[3] for e in episodes)  # some episode hit a hazard
    assert {e[4] for e in episodes} == {True, False}  # some reached the goal, some did not
    assert len({round(e[2], 6) for e in episodes}) > 2  # returns differ between episodes
    # each sub-env ran exactly the datapacks presented to it, in order; the last one is live
    for i in range(envs.num_envs):
        mine = [e[1] for e in episodes if e[0] == i]
        assert mine == presented[i][: len(mine)] and len(presented[i]) == len(mine) + 1
        pack = next(p for p in packs() if p.pack_id == presented[i][-1])
        assert tasks[i]["size"] == pack.task_params["size"]
        assert tasks[i]["max_steps"] == pack.task_params["max_steps"]
    # every drawn datapack was presented (NEXT_STEP) or is presented / waiting (SAME_STEP)
    drawn = [pid for e in sampler.events if e[0] == "draw" for pid in e[1]]
    shown = sorted(pid for seq in presented for pid in seq)
    waiting = 0 if mode == AutoresetMode.NEXT_STEP else envs.num_envs
    assert len(drawn) == len(shown) + waiting


@pytest.mark.parametrize("mode", MODES)
def test_sync_and_async_agree(mode):
    results = []
    for vec in ("sync", "async"):
        sampler = DataPackRLSampler(packs(), curriculum=DataPackCurriculum(), seed=3)
        envs = make(mode, sampler, vec=vec, n=3)
        episodes, presented = rollout(envs, steps=30, seed=1)
        envs.close()
        results.append((episodes, presented, sampler.curriculum.get_diagnostics()))
    assert results[0] == results[1]


def test_next_step_draws_after_reporting():
    sampler = Events(packs())
    envs = make(AutoresetMode.NEXT_STEP, sampler)
    rollout(envs, steps=20)
    envs.close()
    kinds = [e[0] for e in sampler.events]
    # first draw for the reset; afterwards every draw follows the reports of that step
    assert kinds[0] == "draw"
    for k in range(1, len(kinds)):
        if kinds[k] == "draw":
            assert kinds[k - 1] == "report"
    n_draws = sum(len(e[1]) for e in sampler.events if e[0] == "draw")
    assert n_draws == 2 + len(sampler.reports())  # one new datapack per ended episode


def test_same_step_keeps_one_preset_ahead():
    sampler = Events(packs())
    envs = make(AutoresetMode.SAME_STEP, sampler)
    _, info = envs.reset(seed=0)
    assert [e[1] for e in sampler.events] == [["p0", "p1"], ["p2", "p3"]]
    assert list(info["datapack"]["pack_id"]) == ["p0", "p1"]
    presets = envs.env.get_attr("next_datapack")
    assert [p.pack_id for p in presets] == ["p2", "p3"]
    envs.close()


def test_stages_advance_from_async_workers():
    safe = [
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
    cur = DataPackCurriculum(DataPackCurriculumConfig(window=4))
    sampler = DataPackRLSampler(safe, curriculum=cur, seed=0)
    envs = make(AutoresetMode.NEXT_STEP, sampler, vec="async")
    envs.reset(seed=0)
    for _ in range(12):
        envs.step(np.zeros(2, np.int64))
    envs.close()
    assert cur.episode >= 4 and cur.stage == "skill_building"
    assert cur.metrics()["mean_return"] is not None
    assert any(
        e["curriculum_stage"] == "skill_building" for e in sampler.logs
    )  # later draws use it
    assert envs.get_diagnostics()["curriculum"]["stage"] == "skill_building"


def test_explicit_task_reset_draws_and_reports_nothing():
    sampler = Events(packs())
    envs = make(AutoresetMode.NEXT_STEP, sampler)
    _, info = envs.reset(options={"task": {"size": 4, "max_steps": 2}})
    assert sampler.events == [] and envs.datapacks == [None, None]
    assert all(d is None for d in info["datapack"])
    envs.step(np.zeros(2, np.int64))
    _, _, term, trunc, _ = envs.step(np.zeros(2, np.int64))
    assert (term | trunc).all() and sampler.reports() == []
    _, _, _, _, info = envs.step(np.zeros(2, np.int64))  # autoreset: back to datapacks
    assert list(info["datapack"]["pack_id"]) == ["p0", "p1"]
    envs.close()


def test_disabled_mode_draws_at_masked_reset():
    sampler = Events(packs())
    envs = make(AutoresetMode.DISABLED, sampler)
    envs.reset(seed=0)
    dones = np.zeros(2, bool)
    while not dones.any():
        _, _, term, trunc, _ = envs.step(np.zeros(2, np.int64))
        dones = term | trunc
    assert len(sampler.reports()) == int(dones.sum())
    _, info = envs.reset(options={"reset_mask": dones})
    assert info["_datapack"].tolist() == dones.tolist()
    assert sampler.events[-1] == ("draw", ["p2", "p3"][: int(dones.sum())])
    envs.close()


def _wrapped_or_not(wrapped):
    env = gym.make(ENV_ID)
    return SinglePresentDatapack(env, None) if wrapped else env


@pytest.mark.parametrize("vec", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_unwrapped_sub_envs_are_refused_with_the_env_left_working(vec):
    # an AsyncVectorEnv's sub-envs are asked too (has_wrapper_attr: no worker exits), no
    # longer found out only when an episode starts without info['datapack']
    base = vec([partial(_wrapped_or_not, True), partial(_wrapped_or_not, False)])
    try:
        with pytest.raises(ConfigError, match=r"sub-envs \[1\] are not wrapped in .*Present"):
            PresentDatapack(base, Events(packs()))
        assert base.call("has_wrapper_attr", "datapack_has_sampler") == (True, False)
    finally:
        base.close()


@pytest.mark.parametrize("vec", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_every_unwrapped_sub_env_is_named(vec):
    # the SyncVectorEnv check named only the first unwrapped sub-env, the AsyncVectorEnv one
    # all of them
    base = vec([partial(_wrapped_or_not, wrapped) for wrapped in (False, True, False)])
    try:
        with pytest.raises(ConfigError) as err:
            PresentDatapack(base, Events(packs()))
        assert (err.value.key, err.value.source) == ("env", "vector.PresentDatapack")
        assert "sub-envs [0, 2] are not wrapped in gymcurric.wrappers.PresentDatapack" in str(
            err.value
        )
    finally:
        base.close()


@pytest.mark.parametrize("vec", ["sync", "async"])
def test_a_user_wrapper_with_a_sampler_above_present_datapack_is_not_read(vec):
    # get_wrapper_attr('sampler') would take the user's; the datapacks come from the twin's
    sampler = Events(packs())
    base = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode=vec, wrappers=[user_sampler_above])
    envs = PresentDatapack(base, sampler)
    try:
        _, info = envs.reset(seed=0)
        assert info["datapack"]["pack_id"].tolist() == ["p0", "p1"]
        assert [p.pack_id for p in envs.datapacks] == ["p0", "p1"]
        assert sampler.events == [("draw", ["p0", "p1"])]
        for _ in range(12):
            envs.step(np.zeros(2, dtype=np.int64))
        assert len(sampler.reports()) >= 2  # the episodes ended reached the twin's curriculum
        if vec == "sync":  # the user's sampler (it cannot leave an async worker): untouched
            assert [sub.sampler.events for sub in base.envs] == [[], []]
    finally:
        envs.close()


@pytest.mark.parametrize("vec", ["sync", "async"])
def test_own_sampler_under_a_user_wrapper_is_refused_with_the_env_left_working(vec):
    # fails on the old code for async (no check: each worker drew and reported to its own
    # copy); the sampler lives in the worker and cannot be pickled, so only a bool comes back
    base = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode=vec, wrappers=[own_sampler_below_none]
    )
    try:
        with pytest.raises(ConfigError, match=r"sub-envs \[0, 1\] .* their own sampler"):
            PresentDatapack(base, Events(packs()))
        assert base.call("has_wrapper_attr", "datapack_has_sampler") == (True, True)
        base.reset(seed=0)
    finally:
        base.close()


def test_sub_env_with_its_own_sampler_is_refused():
    own = DataPackRLSampler(packs(), seed=0)
    sync = gym.make_vec(
        ENV_ID, num_envs=2, vectorization_mode="sync",
        wrappers=[partial(SinglePresentDatapack, sampler=own)],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="own sampler"):
        PresentDatapack(sync, own)


def test_arguments_are_validated():
    sampler = Events(packs())
    envs = make(AutoresetMode.NEXT_STEP, sampler)
    for kwargs, key in (({"success_fn": 1}, "success_fn"), ({"mpl_fn": 2}, "mpl_fn")):
        with pytest.raises(ConfigError, match=key):
            PresentDatapack(envs.env, sampler, **kwargs)
    with pytest.raises(ConfigError, match="sampler"):
        PresentDatapack(envs.env, object())
    with pytest.raises(ConfigError, match="vectorization_mode"):
        make_datapack_vec(ENV_ID, sampler, vectorization_mode="vector")
    for num_envs in (0, -1, 1.5, True):  # refused before any sub-env is built
        with pytest.raises(ConfigError, match=r"make_datapack_vec: .*'num_envs'"):
            make_datapack_vec(ENV_ID, sampler, num_envs=num_envs, vectorization_mode="async")
    for kwargs in ({"sampler": object()}, {"sampler": sampler, "mpl_fn": 2}):
        with pytest.raises(ConfigError, match=r"make_datapack_vec: "):
            make_datapack_vec(ENV_ID, **kwargs, num_envs=2, vectorization_mode="async")
    envs.close()


def test_a_numpy_integer_count_builds_as_before():
    # a count read from an array (np.int64) built before the count was checked; still does
    envs = make_datapack_vec(ENV_ID, Events(packs()), num_envs=np.int64(2))
    assert envs.num_envs == 2 and type(envs.num_envs) is int
    envs.reset(seed=0)
    envs.close()
    with pytest.raises(ConfigError, match=r"'num_envs': np.int64\(0\)"):
        make_datapack_vec(ENV_ID, Events(packs()), num_envs=np.int64(0))


def test_success_fn_and_mpl_fn_see_the_sub_env_final_info():
    seen = []

    def success(info):
        seen.append(info)
        return True

    sampler = Events(packs())
    envs = make(AutoresetMode.SAME_STEP, sampler, success_fn=success, mpl_fn=lambda i: 1.5)
    rollout(envs, steps=10)
    envs.close()
    assert seen and all("is_success" in i and "datapack" not in i for i in seen)
    assert all(r["success"] is True and r["mpl"] == 1.5 for r in sampler.reports())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("success", "reported"), [(True, True), (None, False)])
def test_is_success_none_in_a_sub_env_is_not_reported(mode, success, reported):
    # a sub-env's is_success None (SB3's "not reported") falls back to its success, as for a
    # single env; the vector info holds it in an object array ([None, None])
    sampler = Events(packs())
    fns = [lambda: success_unreported(gym.make(ENV_ID), success) for _ in range(2)]
    envs = PresentDatapack(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode), sampler)
    envs.reset(seed=0)
    for _ in range(20):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.close()
    assert sampler.reports() and all(r["success"] is reported for r in sampler.reports())


def test_sub_env_info():
    infos = {
        "cost": np.array([0.0, 1.0]),
        "_cost": np.array([True, True]),
        "datapack": {"pack_id": np.array(["a", None], object), "_pack_id": np.array([1, 0], bool)},
        "_datapack": np.array([True, False]),
    }
    assert sub_env_info(infos, 0) == {"cost": 0.0, "datapack": {"pack_id": "a"}}
    assert sub_env_info(infos, 1) == {"cost": 1.0}
    assert isinstance(sub_env_info(infos, 1)["cost"], float)
