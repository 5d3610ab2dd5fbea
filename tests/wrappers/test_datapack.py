import json
import re
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.datapacks import (
    DataPack,
    DataPackCurriculum,
    DataPackCurriculumConfig,
    DataPackRLSampler,
    load_datapacks,
)
from gymcurric.errors import ConfigError, InfoKeyConflictError, TaskError
from gymcurric.wrappers import PresentDatapack, datapack_info
from gymcurric.wrappers.datapack import check_datapack_tasks
from gymcurric.wrappers.vector.datapack import make_datapack_vec
from tests.datapacks.packs import record
from tests.wrappers.vector.datapack_stubs import SuccessUnreported

ENV_ID = "gymcurric/HazardGrid-v0"


def packs(n: int = 6) -> list[DataPack]:
    """Small HazardGrid datapacks: distinct sizes / hazard counts, seeds, tiers 0 and 1."""
    return [
        DataPack.from_dict(
            record(
                f"p{i}",
                env_id=ENV_ID,
                tier=i % 2,
                task_params={"size": 4 + i, "num_hazards": i, "max_steps": 12},
                seed=100 + i,
                objective_vector=[1.0, 0.5 * i],
                trust_score=0.5 + 0.05 * i,
                enrichment={"affordances": [{"name": "reach"}]},
                supervision_hints={"safety_critical": False},
            )
        )
        for i in range(n)
    ]


def run_episode(env, seed=None, options=None, actions=None):
    obs, info = env.reset(seed=seed, options=options)
    rewards, infos, t, done = [], [info], 0, False
    while not done:
        a = actions[t % len(actions)] if actions is not None else env.action_space.sample()
        obs, r, term, trunc, step_info = env.step(a)
        rewards.append(float(r))
        infos.append(step_info)
        done = term or trunc
        t += 1
    return rewards, infos


class SpyCurriculum:
    """Records what the wrapper reports."""

    def __init__(self):
        self.calls = []

    def update_diagnostics(self, **kwargs):
        self.calls.append(kwargs)


class StubSampler:
    """A sampler with a fixed datapack sequence and a spy curriculum."""

    def __init__(self, records):
        self.records, self.i = records, 0
        self.curriculum = SpyCurriculum()

    def sample_batch(self, n):
        out = [self.records[(self.i + k) % len(self.records)] for k in range(n)]
        self.i += n
        return out


def test_task_and_seed_reach_the_env():
    recs = packs()
    sampler = StubSampler(recs)
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    for pack in recs[:3]:
        obs, info = env.reset()
        expected = {**env.unwrapped.default_task, **dict(pack.task_params)}
        assert env.unwrapped.task == expected
        assert env.datapack is pack
        # the pack's seed was used: a plain env reset with that seed and task gives the same obs
        ref = gym.make(ENV_ID)
        ref_obs, _ = ref.reset(seed=pack.seed, options={"task": dict(pack.task_params)})
        np.testing.assert_array_equal(obs, ref_obs)


def test_explicit_seed_wins_over_pack_seed():
    pack = packs()[4]
    task = dict(pack.task_params)
    a = PresentDatapack(gym.make(ENV_ID), StubSampler([pack]))
    b = gym.make(ENV_ID)
    obs_a, _ = a.reset(seed=5)
    obs_b, _ = b.reset(seed=5, options={"task": task})
    np.testing.assert_array_equal(obs_a, obs_b)
    obs_c, _ = b.reset(seed=pack.seed, options={"task": task})
    assert not np.array_equal(obs_a, obs_c)  # the two seeds give different layouts


def test_info_datapack_content_is_json_safe():
    recs = packs()
    env = PresentDatapack(gym.make(ENV_ID), StubSampler(recs[3:]))
    _, info = env.reset()
    assert info["datapack"] == {
        "pack_id": "p3",
        "tier": 1,
        "task_type": "pick_place",
        "objective_vector": [1.0, 1.5],
        "trust_score": pytest.approx(0.65),
    }
    assert json.loads(json.dumps(info["datapack"])) == info["datapack"]
    assert info["datapack"] == datapack_info(recs[3])
    assert "task" not in info and "task_id" not in info  # SampleCurriculumTask's keys


def test_same_sampler_seed_same_pack_sequence():
    def sequence(seed):
        env = PresentDatapack(gym.make(ENV_ID), DataPackRLSampler(packs(), seed=seed))
        return [env.reset()[1]["datapack"]["pack_id"] for _ in range(12)]

    assert sequence(3) == sequence(3)
    assert len(set(sequence(3))) > 1
    assert sequence(3) != sequence(4)


def test_sampler_logs_one_entry_per_reset():
    sampler = DataPackRLSampler(packs(), seed=0)
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    ids = [env.reset()[1]["datapack"]["pack_id"] for _ in range(3)]
    assert [e["sampled_episodes"][0]["pack_id"] for e in sampler.logs] == ids


def test_diagnostics_reported_at_episode_end():
    sampler = StubSampler(packs())
    env = PresentDatapack(
        gym.make(ENV_ID), sampler, success_fn=lambda info: True, mpl_fn=lambda i: 2
    )
    env.reset()
    env.step(0)
    assert sampler.curriculum.calls == []  # not before the episode ends
    env.reset()  # an episode cut short by a reset is not reported
    rewards, _ = run_episode(env, actions=[0])
    assert sampler.curriculum.calls == [
        {
            "success": True,
            "error": False,
            "mpl": 2.0,
            "tag_results": {"reach": True},
            "return_": pytest.approx(sum(rewards)),
        }
    ]


def test_episode_return_reaches_the_curriculum():
    # the mean over the stage's window equals the mean of what the env paid out
    cur = DataPackCurriculum()
    env = PresentDatapack(gym.make(ENV_ID), DataPackRLSampler(packs(), curriculum=cur, seed=2))
    totals = [sum(run_episode(env, actions=[0, 1, 2, 3])[0]) for _ in range(3)]
    assert cur.metrics()["mean_return"] == pytest.approx(np.mean(totals))


def test_preset_datapack_is_presented_once():
    recs = packs()
    sampler = StubSampler(recs)
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    env.next_datapack = recs[5]
    _, info = env.reset()
    assert info["datapack"]["pack_id"] == "p5" and env.next_datapack is None
    assert sampler.i == 0  # nothing drawn for a preset
    _, info = env.reset()
    assert info["datapack"]["pack_id"] == "p0" and sampler.i == 1


def test_no_sampler_needs_a_preset():
    recs = packs()
    env = PresentDatapack(gym.make(ENV_ID), None)
    env.set_wrapper_attr("next_datapack", recs[2])  # how a vector env sets it
    _, info = env.reset()
    assert info["datapack"]["pack_id"] == "p2"
    run_episode(env, options={"task": {"size": 4}}, actions=[0])  # explicit tasks still run
    with pytest.raises(ConfigError, match="next_datapack"):
        env.reset()


def test_success_counted_in_real_curriculum():
    cur = DataPackCurriculum()
    sampler = DataPackRLSampler(packs(), curriculum=cur, seed=0)
    env = PresentDatapack(gym.make(ENV_ID), sampler, success_fn=lambda info: True)
    for _ in range(3):
        run_episode(env)
    assert cur.episode == 3
    assert cur.metrics()["success_rate"] == 1.0
    env2 = PresentDatapack(gym.make(ENV_ID), sampler, success_fn=lambda info: False)
    run_episode(env2)
    assert cur.metrics()["success_rate"] == pytest.approx(0.75)


def test_error_from_episode_cost():
    class CostEnv(gym.Wrapper):
        def __init__(self, env, cost):
            super().__init__(env)
            self.cost = cost

        def step(self, action):
            obs, r, term, trunc, info = self.env.step(action)
            info = {**info, "cost": 1.0 if self.cost else 0.0}
            return obs, r, term, trunc, info

    for cost, expected in ((True, True), (False, False)):
        sampler = StubSampler(packs())
        run_episode(PresentDatapack(CostEnv(gym.make(ENV_ID), cost), sampler), actions=[0])
        assert sampler.curriculum.calls[-1]["error"] is expected


def test_success_from_info_is_success():
    sampler = StubSampler(packs())
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    _, infos = run_episode(env, actions=[0])
    assert sampler.curriculum.calls[-1]["success"] is bool(infos[-1]["is_success"])


@pytest.mark.parametrize(("success", "reported"), [(True, True), (False, False), (None, False)])
def test_is_success_none_is_not_reported_and_success_is_read(success, reported):
    # SB3 / Gymnasium: None means "not reported", so info["success"] is read, as if is_success
    # were absent (it was read as a failure)
    sampler = StubSampler(packs())
    env = PresentDatapack(SuccessUnreported(gym.make(ENV_ID), success), sampler)
    for _ in range(2):
        run_episode(env, actions=[0])
    assert [c["success"] for c in sampler.curriculum.calls] == [reported, reported]
    assert all(c["tag_results"] == {"reach": reported} for c in sampler.curriculum.calls)


def test_explicit_task_draws_nothing_and_is_not_reported():
    sampler = StubSampler(packs())
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    task = {"size": 5, "num_hazards": 1, "max_steps": 5}
    _, infos = run_episode(env, options={"task": task}, actions=[0])
    assert infos[0]["datapack"] is None and env.datapack is None
    assert env.unwrapped.task["size"] == 5
    assert sampler.i == 0 and sampler.curriculum.calls == []


def test_a_task_the_env_refuses_names_the_datapack_and_its_file(tmp_path):
    bad = tmp_path / "packs.jsonl"
    bad.write_text(json.dumps(record("typo", env_id=ENV_ID, task_params={"sizee": 5})) + "\n")
    (pack,) = load_datapacks(bad)
    env = PresentDatapack(gym.make(ENV_ID), StubSampler([pack]))
    with pytest.raises(TaskError) as info:
        env.reset()
    err = info.value  # still the env's TaskError (key, value, reason), now saying where
    assert (err.key, err.value) == ("task_params.sizee", 5) and "unknown task key" in err.reason
    assert str(err).startswith(f"{bad}: datapack 'typo': task_params refused by HazardGridEnv")
    # through a vector env (as gymcurric train runs it), the message is the same
    envs = make_datapack_vec(ENV_ID, StubSampler([pack]), num_envs=2)
    with pytest.raises(TaskError, match=rf"^{re.escape(str(bad))}: datapack 'typo': "):
        envs.reset(seed=0)
    envs.close()
    # ... and check_datapack_tasks finds it before any reset, from the env's validate_task
    env = gym.make(ENV_ID)
    with pytest.raises(TaskError) as info:
        check_datapack_tasks(env, [*packs(), pack])
    assert str(info.value) == str(err)
    check_datapack_tasks(env, packs())  # tasks the env takes
    check_datapack_tasks(gym.make("CartPole-v1"), [pack])  # no validate_task: nothing checked


def test_info_key_conflict_raises():
    class Sets(gym.Wrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, "datapack": "mine"}

    env = PresentDatapack(Sets(gym.make(ENV_ID)), StubSampler(packs()))
    with pytest.raises(InfoKeyConflictError, match="datapack"):
        env.reset()


def test_rewards_and_observations_unchanged():
    pack = packs()[4]
    actions = [0, 1, 2, 3, 1, 1, 2]
    env = PresentDatapack(gym.make(ENV_ID), StubSampler([pack]))
    ref = gym.make(ENV_ID)
    r1, i1 = run_episode(env, actions=actions)
    r2, i2 = run_episode(
        ref, seed=pack.seed, options={"task": dict(pack.task_params)}, actions=actions
    )
    assert r1 == r2 and len(r1) > 1
    assert [i.get("cost") for i in i1[1:]] == [i.get("cost") for i in i2[1:]]


def test_datapacks_never_mutated():
    recs = packs()
    before = [r.to_dict() for r in recs]
    env = PresentDatapack(
        gym.make(ENV_ID), DataPackRLSampler(recs, curriculum=DataPackCurriculum())
    )
    for _ in range(4):
        run_episode(env)
    assert [r.to_dict() for r in recs] == before


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"sampler": object()}, "sampler"),
        ({"success_fn": 3}, "success_fn"),
        ({"mpl_fn": 1}, "mpl_fn"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, key):
    kw = {"sampler": StubSampler(packs()), **kwargs}
    with pytest.raises(ConfigError, match=key):
        PresentDatapack(gym.make(ENV_ID), **kw)


def test_inside_sync_vector_env():
    cur = DataPackCurriculum()
    sampler = DataPackRLSampler(packs(), curriculum=cur, seed=1)
    envs = gym.make_vec(
        ENV_ID,
        num_envs=2,
        vectorization_mode="sync",
        wrappers=[partial(PresentDatapack, sampler=sampler)],
    )
    _, info = envs.reset(seed=0)
    assert info["_datapack"].all()
    ids = list(info["datapack"]["pack_id"])
    assert ids == [e["sampled_episodes"][0]["pack_id"] for e in sampler.logs]
    for sub, pid in zip(envs.envs, ids, strict=True):
        pack = next(p for p in packs() if p.pack_id == pid)
        assert sub.unwrapped.task["size"] == pack.task_params["size"]
    for _ in range(30):  # max_steps 12: every sub-env finishes at least two episodes
        envs.step(envs.action_space.sample())
    assert cur.episode >= 4
    envs.close()


def test_stages_advance_during_training():
    # no hazards: every episode is error-free, so warmup's error-rate rule holds after a window
    safe = [
        DataPack.from_dict(
            record(
                f"s{i}",
                env_id=ENV_ID,
                tier=i % 2,
                task_params={"size": 4, "num_hazards": 0, "max_steps": 5},
                seed=i,
                supervision_hints={"safety_critical": False},
            )
        )
        for i in range(4)
    ]
    cur = DataPackCurriculum(DataPackCurriculumConfig(window=3))
    sampler = DataPackRLSampler(safe, curriculum=cur, seed=0)
    env = PresentDatapack(gym.make(ENV_ID), sampler)
    assert cur.stage == "warmup"
    for _ in range(3):
        run_episode(env, actions=[0])
    assert cur.stage == "skill_building"
    assert (
        sampler.logs[-1]["curriculum_stage"] == "warmup"
    )  # the last draw happened before the advance
