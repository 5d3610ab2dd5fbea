import math
import pickle
import subprocess
import sys

import numpy as np
import pytest

from gymcurric.errors import ConfigError, DataError, NonFiniteValueError, TaskError
from gymcurric.tasks import (
    BoxTaskSpace,
    Curriculum,
    CurriculumConfig,
    DualPool,
    FieldSpec,
    LearningProgressScorer,
    LocalBackend,
    OpenEndedPool,
    SequentialScorer,
    SignalConfig,
    Stage,
    StopCondition,
    UniformScorer,
)

from .curriculum_cases import bucketed_space, fixed_space, resume_configs, stateless_outcome
from .learners import PracticeLearner, coin, run

# ---------------------------------------------------------------- learning behaviour


def _episodes_to_master(cur, kinds, seed, linear):
    """Episodes until 80 % of the learnable tasks (kind 0) are mastered (success >= 0.8)."""
    learner = PracticeLearner(kinds, seed=seed, linear=linear)
    learnable = np.flatnonzero(kinds == 0).tolist()
    for ep in range(20_000):
        tid = int(cur.sample()[0])
        s = learner(tid, ep)
        cur.update(tid, float(s), success=s)
        if ep % 100 == 0:
            need = {t: learner.centre.get(t, math.inf) for t in learnable}
            if linear:  # success n / c reaches 0.8 at 0.8 c
                done = [learner.practice.get(t, 0) >= 0.8 * need[t] for t in learnable]
            else:  # sigmoid((n - c) / 15) reaches 0.8 at c + 15 ln 4
                done = [learner.practice.get(t, 0) >= need[t] + 21 for t in learnable]
            if np.mean(done) >= 0.8:
                return ep
    return 20_000


@pytest.mark.parametrize(("linear", "bound"), [(True, 0.7), (False, 0.9)])
def test_lp_masters_the_learnable_tasks_sooner_than_uniform(linear, bound):
    # a third learnable, a third mastered, a third impossible; paired by seed with uniform
    kinds = np.arange(30) % 3
    lp, uni = [], []
    for seed in range(4):
        lp.append(_episodes_to_master(Curriculum(fixed_space(30), seed=seed), kinds, seed, linear))
        uniform = Curriculum(fixed_space(30), seed=seed, scorer=UniformScorer())
        uni.append(_episodes_to_master(uniform, kinds, seed, linear))
    assert np.mean(lp) < bound * np.mean(uni), (lp, uni)


def test_lp_moves_away_from_tasks_once_mastered():
    # group 0 improves during episodes 0-1500 then stays mastered; group 1 improves 2500-4000
    def p(tid, t):
        g = tid // 5
        if g == 0:
            return min(max(t / 1500, 0.0), 1.0)
        if g == 1:
            return min(max((t - 2500) / 1500, 0.0), 1.0)
        return 0.0 if g == 2 else 1.0

    cur = Curriculum(fixed_space(20), seed=3)
    rng = np.random.default_rng(4)
    seq = np.array(run(cur, lambda tid, t: bool(rng.random() < p(tid, t)), 4000))
    early = np.bincount(seq[300:1500] // 5, minlength=4) / 1200
    late = np.bincount(seq[2800:] // 5, minlength=4) / 1200
    assert early[0] > 0.6, early
    assert late[0] < 0.2 and late[1] > 0.6, late


# ---------------------------------------------------------------- determinism / resume


@pytest.mark.parametrize("name", list(resume_configs()))
def test_resume_reproduces_the_uninterrupted_task_sequence(name):
    make_space, cfg = resume_configs()[name]
    full = Curriculum(make_space(), cfg, seed=5)
    reference = run(full, stateless_outcome, 2500)

    first = Curriculum(make_space(), cfg, seed=5)
    head = run(first, stateless_outcome, 1234)  # mid-cadence
    blob = pickle.dumps(first.state_dict())
    del first
    resumed = Curriculum(make_space(), cfg, seed=999)  # the seed comes from the checkpoint
    resumed.load_state_dict(pickle.loads(blob))
    tail = run(resumed, stateless_outcome, 2500 - 1234, start=1234)
    assert head + tail == reference
    for key, arr in full.state_dict()["arrays"].items():
        assert np.array_equal(arr, resumed.state_dict()["arrays"][key]), key


def test_same_seed_same_sequence_other_seed_differs():
    def seq(seed):
        return run(
            Curriculum(
                bucketed_space(),
                pool=DualPool(explore_size=8, exploit_size=8, min_samples=4),
                seed=seed,
            ),
            stateless_outcome,
            600,
        )

    assert seq(1) == seq(1)
    assert seq(1) != seq(2)


def test_update_batch_equals_sequential_updates():
    a, b = (
        Curriculum(fixed_space(10), seed=0, recompute_every=4),
        Curriculum(fixed_space(10), seed=0, recompute_every=4),
    )
    ids = a.sample(50)
    assert np.array_equal(ids, b.sample(50))
    succ = [bool(i % 3) for i in range(50)]
    costs = [float(i % 2) for i in range(50)]
    for i in range(50):
        a.update(int(ids[i]), 1.0, success=succ[i], cost=costs[i])
    b.update_batch(ids, np.ones(50), succ, costs)
    for key, arr in a.state_dict()["arrays"].items():
        assert np.array_equal(arr, b.state_dict()["arrays"][key]), key


def test_update_batch_validates_everything_first():
    cur = Curriculum(fixed_space(5))
    before = cur.state_dict()["arrays"]
    with pytest.raises(NonFiniteValueError):
        cur.update_batch([0, 1, 2], [1.0, math.nan, 1.0])
    with pytest.raises(ConfigError, match="differ in length"):
        cur.update_batch([0, 1], [1.0])
    for key, arr in cur.state_dict()["arrays"].items():
        assert np.array_equal(arr, before[key]), key


# ---------------------------------------------------------------- checkpoint errors


@pytest.mark.parametrize(
    "other,key",
    [
        (lambda: Curriculum(bucketed_space(seed=1), pool=OpenEndedPool(capacity=20)), "space.seed"),
        (lambda: Curriculum(bucketed_space(), pool=OpenEndedPool(capacity=21)), "pool.capacity"),
        (
            lambda: Curriculum(
                bucketed_space(), pool=OpenEndedPool(capacity=20), recompute_every=3
            ),
            "recompute_every",
        ),
        (
            lambda: Curriculum(
                bucketed_space(),
                pool=OpenEndedPool(capacity=20),
                scorer=LearningProgressScorer(theta=0.2),
            ),
            "scorer.theta",
        ),
        (
            lambda: Curriculum(bucketed_space(), pool=DualPool(explore_size=5, exploit_size=15)),
            "pool.type",
        ),
    ],
)
def test_state_dict_from_another_configuration_names_what_differs(other, key):
    saved = Curriculum(bucketed_space(), pool=OpenEndedPool(capacity=20)).state_dict()
    with pytest.raises(DataError, match="another configuration") as exc:
        other().load_state_dict(saved)
    assert key in str(exc.value)


def test_malformed_state_dicts():
    cur = Curriculum(fixed_space(4))
    with pytest.raises(DataError, match="not a curriculum state dict"):
        cur.load_state_dict({"arrays": {}})
    sd = cur.state_dict()
    sd["arrays"]["fast"] = sd["arrays"]["fast"][:2]
    with pytest.raises(DataError, match="'fast'"):
        cur.load_state_dict(sd)


# ---------------------------------------------------------------- errors and edge cases


def test_nan_return_is_a_clear_error_and_changes_nothing():
    cur = Curriculum(fixed_space(3))
    with pytest.raises(NonFiniteValueError, match="task_id=1"):
        cur.update(1, math.nan)
    with pytest.raises(NonFiniteValueError, match="cost"):
        cur.update(1, 1.0, cost=math.inf)
    assert cur.stats()["curriculum/updates"] == 0.0


def test_bad_config_values_name_field_and_value():
    with pytest.raises(ConfigError) as exc:
        Curriculum(fixed_space(3), recompute_every=0)
    assert exc.value.key == "recompute_every" and "0" in str(exc.value)
    with pytest.raises(ConfigError, match="unknown keyword"):
        Curriculum(fixed_space(3), recompute_evry=4)
    with pytest.raises(ConfigError, match="'scorer'"):
        CurriculumConfig(scorer="lp")  # type: ignore[arg-type]


def test_config_round_trip_and_file_errors():
    cfg = CurriculumConfig(
        scorer=SequentialScorer(
            (Stage((0,), StopCondition(min_episodes=3)), Stage((1, 2))),
            inner=LearningProgressScorer(temperature=0.3, weighting="sigmoid"),
        ),
        signal=SignalConfig(return_range=(0.0, 10.0)),
        seed=2,
    )
    assert CurriculumConfig.from_dict(cfg.to_dict()) == cfg
    bad = cfg.to_dict()
    bad["scorer"]["inner"]["temperature"] = -1
    with pytest.raises(
        ConfigError,
        match=r"run\.yaml: invalid value for 'scorer\.inner\."
        r"temperature': -1",
    ):
        CurriculumConfig.from_dict(bad, source="run.yaml")
    with pytest.raises(ConfigError, match=r"pool\.evict"):
        CurriculumConfig.from_dict({"pool": {"type": "DualPool", "evict": 1}})
    with pytest.raises(ConfigError, match=r"pool\.type"):
        CurriculumConfig.from_dict({"pool": {"type": "NoSuchPool"}})


def test_unknown_ids_are_errors_and_evicted_ids_are_counted_as_stale():
    cur = Curriculum(fixed_space(3))
    with pytest.raises(ConfigError, match="task_id"):
        cur.update(3, 1.0)
    for bad in ("0", 1.0, True):
        with pytest.raises(ConfigError, match="task_id"):
            cur.update(bad, 1.0)  # type: ignore[arg-type]
    cur.update(np.int64(1), 1.0)
    assert cur.state.count[1] == 1
    cur = Curriculum(bucketed_space(), pool=OpenEndedPool(capacity=5))
    cur.update(12345, 1.0)  # not (or no longer) in the pool
    assert cur.stats()["curriculum/stale_updates"] == 1.0


def test_validator_rejecting_every_generated_task_is_a_clear_error():
    space = bucketed_space(validator=lambda t: False, max_retries=4)
    with pytest.raises(TaskError, match="validator rejected 5 generated tasks"):
        Curriculum(space, pool=OpenEndedPool(capacity=3))


def test_rejected_generated_tasks_are_retried_and_reported():
    space = bucketed_space(validator=lambda t: t["a"] % 2 == 0)
    cur = Curriculum(space, pool=OpenEndedPool(capacity=40))
    assert all(space.task(int(t))["a"] % 2 == 0 for t in cur.state.task_id)
    assert cur.stats()["curriculum/invalid_generated"] > 5


def test_mark_invalid_removes_and_refills_then_fails_clearly_when_nothing_is_left():
    cur = Curriculum(bucketed_space(), pool=OpenEndedPool(capacity=4))
    bad = int(cur.sample()[0])
    cur.mark_invalid(bad, "env refused")
    assert bad not in cur.state.task_id and cur.stats()["curriculum/num_tasks"] == 4
    fixed = Curriculum(fixed_space(3))
    fixed.mark_invalid(0)
    fixed.mark_invalid(2)
    assert set(fixed.sample(100).tolist()) == {1}
    assert fixed.stats()["curriculum/invalid_reported"] == 2.0
    with pytest.raises(TaskError, match=r"no valid task left.*'hazard overlap'"):
        fixed.mark_invalid(1, "hazard overlap")


def test_box_updates_score_the_cell_of_each_variant():
    space = BoxTaskSpace([0.0], [1.0], bins=4)
    cur = Curriculum(space, seed=0)
    ids = cur.sample(200)
    assert len(set(ids.tolist())) > 150  # fresh variants
    tid = int(ids[0])
    for _ in range(3):
        cur.update(tid, 1.0, success=True)
    assert cur.state.count[space.key(tid)] == 3
    assert space.task(tid) == cur.task(tid)


def test_stats_are_flat_finite_floats_with_the_curriculum_prefix():
    cur = Curriculum(bucketed_space(), pool=DualPool(explore_size=5, exploit_size=5, min_samples=3))
    run(cur, coin(0), 300)
    stats = cur.stats()
    assert stats and all(k.startswith("curriculum/") for k in stats)
    assert all(type(v) is float and math.isfinite(v) for v in stats.values())


class _OneBufferBackend(LocalBackend):
    """All arrays as views of one flat byte buffer, the layout a shared-memory block uses."""

    def allocate(self, layout: dict[str, FieldSpec]) -> dict[str, np.ndarray]:
        offsets, total = {}, 0
        for name, spec in layout.items():
            offsets[name] = total
            total += -(-spec.nbytes // 64) * 64
        self.buffer = np.zeros(total, dtype=np.uint8)
        return {
            name: self.buffer[offsets[name] : offsets[name] + spec.nbytes]
            .view(spec.dtype)
            .reshape(spec.shape)
            for name, spec in layout.items()
        }


def test_state_lives_in_backend_memory_and_behaves_identically():
    backend = _OneBufferBackend()
    cfg = CurriculumConfig(pool=DualPool(explore_size=6, exploit_size=6, min_samples=4))
    a = Curriculum(bucketed_space(), cfg, backend=backend)
    b = Curriculum(bucketed_space(), cfg)
    assert run(a, stateless_outcome, 800) == run(b, stateless_outcome, 800)
    assert np.shares_memory(a.state.fast, backend.buffer)
    assert backend.buffer.any()


def test_core_imports_only_numpy_and_gymnasium():
    code = (
        "import sys, gymcurric.tasks; heavy = ('torch', 'stable_baselines3', 'ray', "
        "'mujoco', 'transformers', 'pydantic', 'scipy'); "
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_invalidate_recomputes_before_the_next_sample():
    cur = Curriculum(fixed_space(4))
    before = cur.stats()["curriculum/recomputes"]
    cur.sample()
    assert cur.stats()["curriculum/recomputes"] == before
    cur.invalidate()
    cur.sample()
    assert cur.stats()["curriculum/recomputes"] == before + 1


@pytest.mark.parametrize(
    ("data", "key", "choices"),
    [
        (
            {"scorer": {"type": "PLR"}},
            "scorer.type",
            "'LearningProgressScorer', 'PLRScorer', 'RobustPLRScorer', 'Sequential",
        ),
        ({"scorer": {"type": "ReplacementPool"}}, "scorer.type", "'LearnabilityScorer'"),
        ({"pool": {"type": "UniformScorer"}}, "pool.type", "'DualPool', 'OpenEndedPool'"),
        (
            {"scorer": {"type": "SequentialScorer", "stages": [{"type": "Nope"}]}},
            r"scorer.stages\[0\].type",
            r"\['Stage'\]",
        ),
    ],
)
def test_an_unknown_or_wrong_kind_of_part_names_the_choices_of_its_key(data, key, choices):
    with pytest.raises(ConfigError, match=rf"run\.yaml: invalid value for '{key}'.*{choices}"):
        CurriculumConfig.from_dict(data, source="run.yaml")
