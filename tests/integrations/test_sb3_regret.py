"""RegretScoreCallback and the regret rollout buffers (gymcurric/integrations/sb3/regret.py)."""

from __future__ import annotations

import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.errors import ConfigError
from gymcurric.integrations.sb3 import (
    RegretDictRolloutBuffer,
    RegretRolloutBuffer,
    RegretScoreCallback,
)
from gymcurric.integrations.sb3.regret import segment_scores
from gymcurric.tasks import Curriculum, FixedTaskSpace, PLRScorer, RobustPLRScorer
from gymcurric.wrappers import SampleCurriculumTask

pytestmark = pytest.mark.sb3

# episodes of at most 6..15 steps against 16-step rollouts: some end inside a rollout, some
# straddle two
SPACE = FixedTaskSpace(
    [
        {"size": 5, "goal_distance": 1 + i % 3, "num_hazards": 2 * (i % 2), "max_steps": 6 + 3 * i}
        for i in range(4)
    ]
)
N_STEPS, N_ENVS = 16, 2


class RecordTasks(gym.Wrapper):
    """Records, for every step, the task it was taken in and whether it began the episode."""

    def __init__(self, env):
        super().__init__(env)
        self.tasks, self.begins = [], []
        self._task, self._new = -1, False

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._task, self._new = info["task_id"], True
        return obs, info

    def step(self, action):
        self.tasks.append(self._task)
        self.begins.append(self._new)
        self._new = False
        return self.env.step(action)


def _env(cur):
    return RecordTasks(SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0"), cur))


class SpyCurriculum(Curriculum):
    """Keeps a copy of every ``update_scores`` call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def update_scores(self, task_ids, scores):
        self.calls.append((np.array(task_ids), np.array(scores)))
        super().update_scores(task_ids, scores)


class Snapshot(BaseCallback):
    """At each rollout end: the buffer's advantages and episode starts, and the tasks' scores."""

    def __init__(self, cur):
        super().__init__()
        self.cur, self.rollouts = cur, []

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        buf = self.model.rollout_buffer
        self.rollouts.append(
            {
                "adv": buf.advantages.copy(),
                "starts": buf.episode_starts.copy(),
                "scores": self.cur.scores(np.arange(SPACE.size)),
            }
        )


class Masks(BaseCallback):
    """After the regret callback: the train mask it left on the buffer."""

    def __init__(self):
        super().__init__()
        self.masks = []

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        mask = self.model.rollout_buffer.train_mask
        self.masks.append(None if mask is None else mask.copy())


class Capture(KVWriter):
    """Keeps every dump of the logger."""

    def __init__(self):
        self.dumps = []

    def write(self, key_values, key_excluded, step=0):
        self.dumps.append(dict(key_values))

    def close(self):
        pass


def _logged(model):
    capture = Capture()
    model.set_logger(Logger(None, [capture]))
    return capture


def _ppo(venv, **kwargs):
    return PPO(
        "MlpPolicy",
        venv,
        n_steps=N_STEPS,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device="cpu",
        **kwargs,
    )


def _expected(rollouts, tasks, begins, fn):
    """By hand, from the recorded tasks: ``[(task, score), ...]`` per rollout, env by env."""
    out = []
    for r, ro in enumerate(rollouts):
        pairs = []
        for e in range(N_ENVS):
            seg_task, values = None, []
            for t in range(N_STEPS):
                g = r * N_STEPS + t
                if t > 0 and ro["starts"][t, e]:
                    pairs.append((seg_task, sum(values) / len(values)))
                    values = []
                if not values:
                    seg_task = tasks[e][g]
                assert begins[e][g] == bool(ro["starts"][t, e])  # the buffer agrees
                values.append(fn(float(ro["adv"][t, e])))
            pairs.append((seg_task, sum(values) / len(values)))
        out.append(pairs)
    return out


# ---------------------------------------------------------------- segments


def test_segment_scores_by_hand():
    values = np.array([[1.0, 10.0], [3.0, 20.0], [5.0, 30.0], [7.0, 40.0]])
    starts = np.array([[1, 0], [0, 0], [1, 1], [0, 0]])
    tasks = np.array([[4, 9], [4, 9], [2, 1], [2, 1]])
    seg = segment_scores(values, starts, tasks)
    assert seg.task.tolist() == [4, 2, 9, 1]  # env 0's segments, then env 1's
    assert seg.mean.tolist() == [2.0, 6.0, 15.0, 35.0]
    assert seg.steps.tolist() == [2, 2, 2, 2]
    assert seg.env.tolist() == [0, 0, 1, 1]
    assert seg.new.tolist() == [True, True, False, True]  # env 1 continues an episode
    assert seg.segment_of.tolist() == [[0, 2], [0, 2], [1, 3], [1, 3]]


# ---------------------------------------------------------------- scores from PPO rollouts


def _dummy(cur):
    return DummyVecEnv([partial(_env, cur) for _ in range(N_ENVS)])


def _normalized(cur):
    return VecNormalize(_dummy(cur), gamma=0.99)


def _subproc(cur):
    return SubprocVecEnv([partial(_env, cur) for _ in range(N_ENVS)], start_method="fork")


@pytest.mark.parametrize(
    ("make_venv", "backend"),
    [(_dummy, "local"), (_normalized, "local"), (_subproc, "shared")],
    ids=["dummy", "vecnormalize", "subproc-shared"],
)
@pytest.mark.parametrize("score", ["value_l1", "positive_value_loss"])
def test_scores_arrive_and_match_the_rollout_buffer(make_venv, backend, score):
    cur = SpyCurriculum(SPACE, scorer=PLRScorer(), seed=0, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (py3.12+)
        venv = make_venv(cur)
    try:
        snap = Snapshot(cur)
        callback = RegretScoreCallback(cur, score=score)
        _ppo(venv).learn(3 * N_STEPS * N_ENVS, callback=CallbackList([callback, snap]))
        tasks, begins = venv.get_attr("tasks"), venv.get_attr("begins")
    finally:
        venv.close()
    fn = abs if score == "value_l1" else (lambda a: max(a, 0.0))
    expected = _expected(snap.rollouts, tasks, begins, fn)
    assert len(cur.calls) == 3
    for (ids, scores), pairs in zip(cur.calls, expected, strict=True):
        assert ids.tolist() == [t for t, _ in pairs]
        np.testing.assert_allclose(scores, [s for _, s in pairs], rtol=1e-6)
        assert np.isfinite(scores).all() and (scores >= 0).all()
    n = sum(len(p) for p in expected)
    assert cur.stats()["curriculum/scores"] == n and cur.stats()["curriculum/seen_frac"] > 0
    assert len({t for ids, _ in cur.calls for t in ids.tolist()}) > 1
    cur.close()


def test_same_seed_same_scores():
    def run():
        cur = SpyCurriculum(SPACE, scorer=PLRScorer(), seed=3)
        venv = _dummy(cur)
        _ppo(venv).learn(3 * N_STEPS * N_ENVS, callback=RegretScoreCallback(cur))
        return [(i.tolist(), s.tolist()) for i, s in cur.calls], cur.state.score.tolist()

    assert run() == run()


def test_a_score_callback_logs_and_needs_a_curriculum():
    cur = Curriculum(SPACE, scorer=PLRScorer(), seed=0)
    model = _ppo(_dummy(cur))
    capture = _logged(model)
    model.learn(N_STEPS * N_ENVS, callback=RegretScoreCallback(cur))
    (logged,) = capture.dumps
    assert logged["curriculum/rollout_scored"] >= N_ENVS
    assert logged["curriculum/rollout_score_mean"] > 0
    assert "curriculum/exploratory_frac" not in logged  # only when leaving steps out
    with pytest.raises(ConfigError, match="curriculum"):
        RegretScoreCallback(object())
    with pytest.raises(ConfigError, match="score"):
        RegretScoreCallback(cur, score="gae")
    with pytest.raises(ConfigError, match="train_on_unseen"):
        RegretScoreCallback(cur, train_on_unseen=0)
    unwrapped = DummyVecEnv([lambda: gym.make("gymcurric/HazardGrid-v0")])
    with pytest.raises(ConfigError, match="SampleCurriculumTask"):
        _ppo(unwrapped).learn(N_STEPS, callback=RegretScoreCallback(cur))


def test_defaults_follow_the_scorer():
    plr = RegretScoreCallback(Curriculum(SPACE, scorer=PLRScorer()))
    assert plr.score == "value_l1" and plr.train_on_unseen
    robust = RegretScoreCallback(Curriculum(SPACE, scorer=RobustPLRScorer()))
    assert robust.score == "positive_value_loss" and not robust.train_on_unseen
    assert RegretScoreCallback(Curriculum(SPACE, scorer=RobustPLRScorer()), "value_l1", True)


# ---------------------------------------------------------------- robust PLR: no gradient


def test_robust_plr_needs_a_buffer_that_can_leave_steps_out():
    cur = Curriculum(SPACE, scorer=RobustPLRScorer(), seed=0)
    with pytest.raises(ConfigError, match="rollout_buffer_class=RegretRolloutBuffer"):
        _ppo(_dummy(cur)).learn(N_STEPS, callback=RegretScoreCallback(cur))


def test_robust_plr_leaves_out_exactly_the_episodes_begun_on_unseen_tasks():
    cur = Curriculum(SPACE, scorer=RobustPLRScorer(min_seen=0.0), seed=1)
    venv = _dummy(cur)
    snap, masks = Snapshot(cur), Masks()
    regret = RegretScoreCallback(cur)
    model = _ppo(venv, rollout_buffer_class=RegretRolloutBuffer)
    capture = _logged(model)
    model.learn(8 * N_STEPS * N_ENVS, callback=CallbackList([snap, regret, masks]))
    tasks, begins = venv.get_attr("tasks"), venv.get_attr("begins")
    # by hand: an episode is exploratory if its task had no score in the snapshot taken at the
    # end of the rollout it began in (scores change only at rollout ends)
    unseen_at = [np.isnan(ro["scores"]) for ro in snap.rollouts]
    masked, whole = 0, 0
    for r, mask in enumerate(masks.masks):
        left_out = np.zeros((N_STEPS, N_ENVS), dtype=bool)
        for e in range(N_ENVS):
            for t in range(N_STEPS):
                g = r * N_STEPS + t
                began = max(i for i in range(g + 1) if begins[e][i])
                left_out[t, e] = unseen_at[began // N_STEPS][tasks[e][began]]
        if left_out.all() or not left_out.any():
            assert mask is None  # all left out: trained on whole (and counted); none: no mask
            whole += bool(left_out.all())
        else:
            np.testing.assert_array_equal(mask, ~left_out)
            masked += 1
    assert masked >= 1 and masks.masks[0] is None  # the first rollout has no score yet
    assert regret.unmasked_rollouts == whole >= 1
    assert capture.dumps[-1]["curriculum/unmasked_rollouts"] == whole
    fracs = [d["curriculum/exploratory_frac"] for d in capture.dumps]
    assert fracs[0] == 1.0 and 0.0 < min(f for f in fracs if f > 0) < 1.0


class _LeaveOut(BaseCallback):
    """At rollout end: leave env 1's steps out; perturb the left-out or the kept steps."""

    def __init__(self, perturb):
        super().__init__()
        self.perturb = perturb

    def _on_step(self):
        return True

    def _on_rollout_end(self):
        buf = self.model.rollout_buffer
        left = np.zeros((N_STEPS, N_ENVS), dtype=bool)
        left[:, 1] = True
        if self.perturb is not None:
            where = left if self.perturb == "left" else ~left
            buf.advantages[where] += 100.0
            buf.returns[where] -= 100.0
        buf.train_mask = ~left


def _trained_params(perturb):
    cur = Curriculum(SPACE, seed=0)
    model = _ppo(_dummy(cur), rollout_buffer_class=RegretRolloutBuffer)
    model.learn(N_STEPS * N_ENVS, callback=_LeaveOut(perturb))
    return [p.detach().clone() for p in model.policy.parameters()]


def test_left_out_steps_give_no_gradient():
    base = _trained_params(None)
    same = _trained_params("left")  # whatever the left-out steps hold cannot matter
    for a, b in zip(base, same, strict=True):
        assert torch.equal(a, b)
    moved = _trained_params("kept")  # control: the same change to the kept steps does
    assert any(not torch.equal(a, b) for a, b in zip(base, moved, strict=True))


# ---------------------------------------------------------------- the buffers


def _filled(cls, obs_space, seed=0):
    buf = cls(4, obs_space, gym.spaces.Discrete(3), device="cpu", n_envs=3)
    rng = np.random.default_rng(seed)
    for t in range(4):
        obs = (
            {"a": np.full((3, 1), t, np.float32), "b": np.arange(3, dtype=np.float32)[:, None]}
            if isinstance(obs_space, gym.spaces.Dict)
            else np.stack([np.array([t, e], np.float32) for e in range(3)])
        )
        buf.add(
            obs,
            rng.integers(0, 3, (3, 1)),
            rng.normal(size=3).astype(np.float32),
            np.array([t == 0] * 3),
            torch.zeros(3),
            torch.zeros(3),
        )
    buf.compute_returns_and_advantage(torch.zeros(3), np.zeros(3, dtype=bool))
    return buf


BOX = gym.spaces.Box(-10, 10, (2,), np.float32)
DICT = gym.spaces.Dict(
    {"a": gym.spaces.Box(-10, 10, (1,), np.float32), "b": gym.spaces.Box(-10, 10, (1,))}
)


@pytest.mark.parametrize(
    ("ours", "theirs", "space"),
    [(RegretRolloutBuffer, RolloutBuffer, BOX), (RegretDictRolloutBuffer, DictRolloutBuffer, DICT)],
)
def test_without_a_mask_the_buffers_are_sb3s_batch_for_batch(ours, theirs, space):
    a, b = _filled(ours, space), _filled(theirs, space)
    np.random.seed(5)  # noqa: NPY002 - SB3's get() shuffles with the global generator
    got = [s.advantages for s in a.get(5)]
    np.random.seed(5)  # noqa: NPY002
    want = [s.advantages for s in b.get(5)]
    assert len(got) == len(want) == 3
    for x, y in zip(got, want, strict=True):
        assert torch.equal(x, y)


@pytest.mark.parametrize(
    ("cls", "space"), [(RegretRolloutBuffer, BOX), (RegretDictRolloutBuffer, DICT)]
)
def test_a_mask_leaves_its_steps_out_of_every_minibatch(cls, space):
    buf = _filled(cls, space)
    mask = np.zeros((4, 3), dtype=bool)
    mask[1:, 0] = True  # env 0, steps 1..3
    mask[2, 2] = True  # env 2, step 2
    buf.train_mask = mask
    batches = list(buf.get(3))
    assert [len(s.advantages) for s in batches] == [3, 1]
    kept = torch.cat([s.advantages for s in batches]).sort().values
    want = torch.as_tensor(buf.advantages.reshape(3, 4)[mask.T]).sort().values  # flattened
    assert torch.equal(kept, want.float())
    assert len(list(buf.get(None))) == 1  # batch_size None: one batch of the kept steps
    buf.reset()
    assert buf.train_mask is None


@pytest.mark.parametrize("wrapped", [[0], []], ids=["partly-wrapped", "unwrapped"])
def test_subproc_sub_envs_without_task_id_are_refused_with_the_env_left_working(capfd, wrapped):
    # a get_attr("task_id") in a SubprocVecEnv worker without one made the worker exit (EOFError)
    cur = Curriculum(SPACE, seed=0, backend="shared")
    plain = partial(gym.make, "gymcurric/HazardGrid-v0")
    fns = [partial(_env, cur) if i in wrapped else plain for i in range(N_ENVS)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (py3.12+)
        venv = SubprocVecEnv(fns, start_method="fork")
    try:
        bad = [i for i in range(N_ENVS) if i not in wrapped]
        pattern = rf"sub-envs \[{', '.join(map(str, bad))}\] of {N_ENVS} are not wrapped"
        with pytest.raises(ConfigError, match=pattern) as info:
            _ppo(venv).learn(N_STEPS * N_ENVS, callback=RegretScoreCallback(cur))
        assert "SampleCurriculumTask" in str(info.value)
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
        venv.reset()
        for _ in range(3):
            venv.step(np.array([venv.action_space.sample() for _ in range(N_ENVS)]))
        assert "Traceback" not in capfd.readouterr().err  # a worker's dying words
    finally:
        venv.close()


class OwnTaskId(gym.Wrapper):
    """An env with a ``task_id`` of its own (its level index, say), not the curriculum's."""

    def __init__(self, env):
        super().__init__(env)
        self.task_id = 3


@pytest.mark.parametrize("kind", ["dummy", "subproc"])
def test_sub_envs_with_their_own_task_id_are_refused_with_the_env_left_working(capfd, kind):
    # the scores go to the curriculum under these ids: ids it did not assign are wrong input
    cur = Curriculum(SPACE, seed=0, backend="shared")
    own = lambda: OwnTaskId(gym.make("gymcurric/HazardGrid-v0"))  # noqa: E731
    fns = [partial(_env, cur), own]
    if kind == "dummy":
        venv = DummyVecEnv(fns)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (py3.12+)
            venv = SubprocVecEnv(fns, start_method="fork")
    try:
        with pytest.raises(ConfigError, match=r"sub-envs \[1\] of 2 are not wrapped") as info:
            _ppo(venv).learn(N_STEPS * N_ENVS, callback=RegretScoreCallback(cur))
        assert "SampleCurriculumTask" in str(info.value) and "of their own" in str(info.value)
        if kind == "subproc":
            assert all(p.is_alive() for p in venv.processes), "a worker exited"
        venv.reset()
        venv.step(np.array([venv.action_space.sample() for _ in range(N_ENVS)]))
        assert "Traceback" not in capfd.readouterr().err
    finally:
        venv.close()
        cur.close()
