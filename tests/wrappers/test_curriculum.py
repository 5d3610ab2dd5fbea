import math

import gymnasium as gym
import numpy as np
import pytest

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import (
    ConfigError,
    DataError,
    InfoKeyConflictError,
    NonFiniteValueError,
    TaskError,
)
from gymcurric.tasks import BucketedTaskSpace, Curriculum, FixedTaskSpace, ReplacementPool, Span
from gymcurric.wrappers import (
    SampleCurriculumTask,
    env_task_ids,
    load_curriculum_state,
    save_curriculum_state,
    task_key,
)
from tests.curriculum_stubs import TaskStubEnv, levels


class Spy:
    """Delegates to a real curriculum and records what the wrapper reports."""

    def __init__(self, cur):
        self._cur = cur
        self.updates, self.invalid = [], []

    def __getattr__(self, name):
        return getattr(self._cur, name)

    def update(self, task_id, return_, success=None, cost=None):
        self.updates.append((task_id, return_, success, cost))
        self._cur.update(task_id, return_, success, cost)

    def mark_invalid(self, task_id, reason=""):
        self.invalid.append((task_id, reason))
        self._cur.mark_invalid(task_id, reason)


def episode(env, options=None, seed=None):
    obs, info = env.reset(seed=seed, options=options)
    steps = 0
    while True:
        steps += 1
        *_, terminated, truncated, last = env.step(0)
        if terminated or truncated:
            return info, last, steps


def test_picks_a_task_at_every_reset_without_options_and_reports_the_episode():
    spy = Spy(Curriculum(levels(4), seed=0))
    inner = TaskStubEnv()
    env = SampleCurriculumTask(inner, spy)
    for _ in range(6):
        info, last, steps = episode(env)
        tid = info["task_id"]
        assert isinstance(tid, int) and info["task"] == levels(4).task(tid) == inner.task
        assert env.task_id == tid and env.task == info["task"]
        level = info["task"]["level"]
        assert spy.updates[-1] == (tid, 3.0 * level, level % 2 == 0, 1.5)
        assert "task" not in last and "task_id" not in last  # reset-only keys
    assert len(spy.updates) == 6
    assert spy.stats()["curriculum/updates"] == 6.0


@pytest.mark.parametrize(
    ("kwargs", "env_kwargs", "expected_success"),
    [
        ({"success_fn": lambda info: 0.25}, {}, 0.25),
        ({}, {"success_key": "success"}, True),
        ({}, {"success_key": "other"}, None),
        # is_success None is "not reported" (SB3): success is read, not taken for a failure
        ({}, {"success_key": "success", "is_success_none": True}, True),
        ({}, {"success_key": "other", "is_success_none": True}, None),
    ],
)
def test_success_sources(kwargs, env_kwargs, expected_success):
    spy = Spy(Curriculum(FixedTaskSpace([{"level": 2}]), seed=0))
    env = SampleCurriculumTask(TaskStubEnv(**env_kwargs), spy, **kwargs)
    episode(env)
    assert spy.updates[0][2] == expected_success


def test_no_cost_in_info_reports_none():
    spy = Spy(Curriculum(levels(2), seed=0))
    episode(SampleCurriculumTask(TaskStubEnv(cost=False), spy))
    assert spy.updates[0][3] is None


def test_explicit_task_is_honoured_and_not_reported():
    spy = Spy(Curriculum(levels(3), seed=0))
    inner = TaskStubEnv()
    env = SampleCurriculumTask(inner, spy)
    info, _, _ = episode(env, options={"task": {"level": 7, "len": 2}, "other": 1})
    assert info["task"] == {"level": 7, "len": 2} == inner.task
    assert info["task_id"] == -1 == env.task_id
    assert spy.updates == [] and spy.stats()["curriculum/samples"] == 0.0
    info, _, _ = episode(env)  # back to the curriculum
    assert info["task_id"] >= 0 and len(spy.updates) == 1


def test_other_options_reach_the_env():
    seen = []

    class Env(TaskStubEnv):
        def reset(self, *, seed=None, options=None):
            seen.append(dict(options))
            return super().reset(seed=seed, options=options)

    env = SampleCurriculumTask(Env(), Curriculum(levels(2), seed=0))
    env.reset(options={"foo": 1})
    assert seen[0]["foo"] == 1 and "level" in seen[0]["task"]


def test_episode_cut_short_by_reset_is_not_reported():
    spy = Spy(Curriculum(levels(2, length=5), seed=0))
    env = SampleCurriculumTask(TaskStubEnv(), spy)
    env.reset()
    env.step(0)
    episode(env)
    assert len(spy.updates) == 1 and spy.updates[0][1] == 5.0 * env.task["level"]


def test_rejected_task_is_marked_invalid_and_another_drawn():
    tasks = [{"level": 0, "reject": True}, {"level": 1}, {"level": 2, "reject": True}]
    spy = Spy(Curriculum(FixedTaskSpace(tasks), seed=0))
    env = SampleCurriculumTask(TaskStubEnv(), spy)
    for _ in range(5):
        info, _, _ = episode(env)
        assert info["task_id"] == 1
    assert {t for t, _ in spy.invalid} <= {0, 2}
    assert env.rejections == len(spy.invalid) >= 1
    assert all("TaskError" in reason for _, reason in spy.invalid)
    assert spy.stats()["curriculum/invalid_reported"] == float(env.rejections)


def test_rejections_beyond_max_retries_raise_a_clear_error():
    cur = Curriculum(FixedTaskSpace([{"level": i, "reject": True} for i in range(10)]), seed=0)
    env = SampleCurriculumTask(TaskStubEnv(), cur, max_retries=2)
    with pytest.raises(TaskError, match=r"refused 3 curriculum tasks.*max_retries=2.*refuses"):
        env.reset()
    assert env.rejections == 3


def test_every_task_rejected_is_the_curriculum_error():
    cur = Curriculum(FixedTaskSpace([{"level": 0, "reject": True}]), seed=0)
    with pytest.raises(TaskError, match="no valid task left"):
        SampleCurriculumTask(TaskStubEnv(), cur).reset()


@pytest.mark.parametrize("key", ["task", "task_id"])
def test_env_setting_task_keys_is_a_conflict(key):
    env = SampleCurriculumTask(TaskStubEnv(reset_info={key: 1}), Curriculum(levels(2), seed=0))
    with pytest.raises(InfoKeyConflictError, match=f"'{key}'"):
        env.reset()


def test_nan_return_names_the_task_and_leaves_everything_usable():
    space = FixedTaskSpace([{"level": 1, "nan": True}, {"level": 2}])
    cur = Curriculum(space, seed=0)
    env = SampleCurriculumTask(TaskStubEnv(), cur)
    nan_episodes = ok_episodes = 0
    for _ in range(10):
        env.reset()
        try:
            for _ in range(3):
                env.step(0)
        except NonFiniteValueError as exc:
            nan_episodes += 1
            assert "task_id=0" in str(exc)
            assert any("'nan': True" in note for note in exc.__notes__)
        else:
            ok_episodes += 1
    assert nan_episodes and ok_episodes
    assert cur.stats()["curriculum/updates"] == float(ok_episodes)


def test_seeded_resets_give_the_same_task_stream():
    def stream(seed, cur_seed=3):
        env = SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(20), seed=cur_seed))
        out = [episode(env, seed=seed)[0]["task_id"]]
        out += [episode(env)[0]["task_id"] for _ in range(30)]
        return out

    assert stream(0) == stream(0)
    # the curriculum's generator follows reset(seed=...)
    assert stream(0, cur_seed=3) == stream(0, cur_seed=4)
    assert stream(0) != stream(1)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"cache_size": 0}, "cache_size"),
        ({"max_retries": -1}, "max_retries"),
        ({"success_fn": 3}, "success_fn"),
        ({"factory": "x"}, "factory"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(2), seed=0), **kwargs)


def test_not_a_curriculum_or_no_env():
    with pytest.raises(ConfigError, match="missing methods"):
        SampleCurriculumTask(TaskStubEnv(), object())
    with pytest.raises(ConfigError, match="env=None with a factory"):
        SampleCurriculumTask(None, Curriculum(levels(2), seed=0))


# ---------------------------------------------------------------- factory


class Factory:
    def __init__(self, **kwargs):
        self.made, self.kwargs = [], kwargs

    def __call__(self, task):
        env = TaskStubEnv(name=f"f{len(self.made)}", fixed_task=task, **self.kwargs)
        self.made.append(env)
        return env


def test_factory_builds_caches_and_closes_envs():
    factory = Factory()
    spy = Spy(Curriculum(levels(6), seed=0))
    env = SampleCurriculumTask(None, spy, factory=factory, cache_size=2)
    assert len(factory.made) == 1  # built from the curriculum's first live task
    seen = []
    for i in range(30):
        info, _, _ = episode(env, seed=0 if i == 0 else None)
        assert env.unwrapped.task == info["task"]  # the env built for this task runs it
        seen.append(task_key(info["task"]))
    assert len(spy.updates) == 30
    open_envs = [e for e in factory.made if not e.closed]
    assert len(open_envs) <= 2 and env.unwrapped in open_envs
    assert len(factory.made) < 30  # cache hits happen
    evicted = [e for e in factory.made if e.closed]
    assert evicted, "the cache never evicted an env"
    # every newly built env after the seeded reset got a seed: reproducible layouts
    assert all(e.seeds[0] is not None for e in factory.made[1:])
    env.close()
    assert all(e.closed for e in factory.made)


def test_factory_template_env_gives_the_spaces_and_is_closed_at_first_reset():
    template = TaskStubEnv()
    env = SampleCurriculumTask(template, Curriculum(levels(2), seed=0), factory=Factory())
    assert env.observation_space == template.observation_space
    env.reset()
    assert template.closed and env.unwrapped is not template


def test_factory_env_with_other_spaces_is_a_config_error_not_a_rejection():
    calls = []

    def factory(task):
        calls.append(task)
        return TaskStubEnv(fixed_task=task, obs_dim=1 if len(calls) == 1 else 2)

    env = SampleCurriculumTask(None, Curriculum(levels(5), seed=0), factory=factory)
    with pytest.raises(ConfigError, match="observation_space"):
        for _ in range(20):
            env.reset()
    assert env.rejections == 0


def test_factory_refusing_a_task_is_a_rejection():
    tasks = [{"level": 0}, {"level": 1, "reject": True}]
    spy = Spy(Curriculum(FixedTaskSpace(tasks), seed=0))
    env = SampleCurriculumTask(None, spy, factory=Factory())
    for _ in range(6):
        assert episode(env)[0]["task_id"] == 0
    assert [t for t, _ in spy.invalid] == [1]


def test_task_key_is_stable_and_rejects_unsafe_tasks():
    assert task_key({"b": 1, "a": 2}) == task_key({"a": 2, "b": 1})
    with pytest.raises(ConfigError, match="JSON-safe"):
        task_key({"a": math.nan})


# ---------------------------------------------------------------- real envs


def test_hazard_grid_with_a_bucketed_space():
    space = BucketedTaskSpace(
        {"goal_distance": [Span(1, 4)], "num_hazards": [0, 2, 4]}, base={"size": 6}, seed=0
    )
    cur = Curriculum(space, pool=ReplacementPool(capacity=8), seed=0)
    env = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), cur)
    for i in range(5):
        info, last, _ = episode(env, seed=i)
        assert env.unwrapped.task["size"] == 6
        assert env.unwrapped.task["num_hazards"] == info["task"]["num_hazards"]
    assert cur.stats()["curriculum/updates"] == 5.0


def test_hazard_grid_refusing_a_task():
    tasks = [{"size": 4, "goal_distance": 20}, {"size": 4, "goal_distance": 2}]
    spy = Spy(Curriculum(FixedTaskSpace(tasks), seed=0))
    env = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), spy)
    for _ in range(4):
        assert env.reset()[1]["task_id"] == 1
    assert [t for t, _ in spy.invalid] == [0]
    assert "goal_distance" in spy.invalid[0][1]


# ---------------------------------------------------------------- checkpoints


def test_state_file_round_trip_and_resume_of_a_single_env(tmp_path):
    def run(env, n):
        return [episode(env)[0]["task_id"] for _ in range(n)]

    env = SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(8), seed=0, recompute_every=2))
    run(env, 10)
    env.reset()  # the checkpoint is taken right after a reset: the env runs a fresh task
    path = save_curriculum_state(tmp_path / "sub" / "c.npz", env.curriculum, env=env)
    with np.load(path, allow_pickle=False) as z:
        assert "meta" in z.files and z["env_task_ids"].tolist() == [env.task_id]
    expected = [env.task_id]  # the uninterrupted env plays the episode it reset to, then on
    while not any(env.step(0)[2:4]):
        pass
    expected += run(env, 11)

    env2 = SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(8), seed=9, recompute_every=2))
    state = load_curriculum_state(path, env2.curriculum, env=env2)
    assert state["env_task_ids"] == [expected[0]] and env2.pending_task_id == expected[0]
    assert run(env2, 12) == expected
    assert env2.pending_task_id is None


def test_state_file_errors_name_the_file(tmp_path):
    cur = Curriculum(levels(3), seed=0)
    path = save_curriculum_state(tmp_path / "c.npz", cur)
    with pytest.raises(DataError, match=r"c\.npz.*another configuration"):
        load_curriculum_state(path, Curriculum(levels(4), seed=0))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"bad\.npz.*not a gymcurric curriculum checkpoint"):
        load_curriculum_state(bad)
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(DataError, match="not a gymcurric curriculum checkpoint"):
        load_curriculum_state(tmp_path / "other.npz")
    with pytest.raises(DataError, match="saved the tasks of 0 envs"):
        load_curriculum_state(path, env=SampleCurriculumTask(TaskStubEnv(), cur))
    with pytest.raises(ConfigError, match="SampleCurriculumTask"):
        env_task_ids(TaskStubEnv())


def test_pending_task_id_validation():
    env = SampleCurriculumTask(TaskStubEnv(), Curriculum(levels(2), seed=0))
    env.pending_task_id = np.int64(1)
    assert env.pending_task_id == 1
    env.pending_task_id = -1
    assert env.pending_task_id is None
    with pytest.raises(ConfigError, match="pending_task_id"):
        env.pending_task_id = -3


def test_a_refused_first_reset_under_gym_make_leaves_the_env_checker_working():
    # gym.make adds PassiveEnvChecker; a first reset that raises used to leave it without
    # reset data, so the first step crashed (TypeError) after a successful retry
    gym.register("gymcurric-test/TaskStub-v0", entry_point=TaskStubEnv)
    try:
        tasks = [{"level": 0, "reject": True}, {"level": 1}]
        for seed in range(4):  # whichever task is drawn first, the run goes on
            cur = Curriculum(FixedTaskSpace(tasks), seed=seed)
            env = SampleCurriculumTask(gym.make("gymcurric-test/TaskStub-v0"), cur)
            env.reset(seed=seed)
            env.step(0)
            env.step(0)
            assert env.task == {"level": 1}
    finally:
        gym.registry.pop("gymcurric-test/TaskStub-v0")
