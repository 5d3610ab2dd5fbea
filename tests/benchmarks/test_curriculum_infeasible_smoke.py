"""benchmarks/curriculum_infeasible.py: its task spaces, its ceilings, and a tiny run end to end."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks import load_script

SIZES = {  # tasks per family: trivial, frontier, hard, uncontrollable, unreachable
    "primary": (4, 20, 12, 24, 48),
    "mostly": (4, 20, 12, 72, 207),
    "feasible": (4, 20, 12, 0, 0),
}


def _module():
    return load_script("curriculum_infeasible")


@pytest.mark.parametrize(
    ("space", "size", "infeasible"),
    [("primary", 108, 72), ("mostly", 315, 279), ("feasible", 36, 0)],
)
def test_spaces_have_the_advertised_sizes_and_infeasible_shares(space, size, infeasible):
    mod = _module()
    s = mod.study_space(space)
    assert len(s.tasks) == size
    assert s.infeasible_share == pytest.approx(infeasible / size)
    assert tuple(s.families.count(f) for f in mod.FAMILIES) == SIZES[space]
    keys = {json.dumps(t, sort_keys=True) for t in s.tasks}
    assert len(keys) == size  # no task twice
    assert [mod.family_of(t) for t in s.tasks] == list(s.families)


def test_spaces_share_their_feasible_tasks_and_the_env_accepts_every_task():
    from gymcurric.envs.grid import HazardGridEnv

    mod = _module()
    env = HazardGridEnv(**mod.ENV_KWARGS)
    feasible = {json.dumps(t, sort_keys=True) for t in mod.study_space("feasible").tasks}
    for space in mod.SPACES:
        s = mod.study_space(space)
        mine = {
            json.dumps(t, sort_keys=True)
            for t, f in zip(s.tasks, s.families, strict=True)
            if f in mod.FEASIBLE
        }
        assert mine == feasible
        for t in s.tasks:
            env.reset(seed=0, options={"task": t})
            assert env.task == {**env.default_task, **t}


def test_no_held_out_task_is_trained_on():
    mod = _module()
    held_out = [json.dumps(t, sort_keys=True) for t in mod.HELD_OUT]
    assert len(set(held_out)) == 5
    assert sorted(t["goal_distance"] for t in mod.HELD_OUT) == [27, 29, 31, 33, 35]
    for space in mod.SPACES:
        trained = {json.dumps(t, sort_keys=True) for t in mod.study_space(space).tasks}
        assert not trained & set(held_out), space


def test_task_order_is_fixed_and_does_not_group_families():
    mod = _module()
    first = mod.study_space("mostly")
    mod.study_space.cache_clear()
    again = mod.study_space("mostly")
    assert first is not again and first == again
    rank = [mod.FAMILIES.index(f) for f in first.families]
    assert rank != sorted(rank)
    assert set(first.families[:36]) - set(
        mod.FEASIBLE
    )  # the first 36 ids are not the feasible ones


def test_greedy_reaches_feasible_tasks_and_not_infeasible_ones():
    mod = _module()
    task = mod._task
    feasible = [task(36, 0.0, 120), task(36, 0.3, 120), task(24, 0.3, 120), task(2, 0.0, 120)]
    unreachable = [task(38, 0.0, 37), task(16, 0.0, 15), task(30, 0.0, 22)]
    uncontrollable = [task(38, 1.0, 120)]
    assert {mod.family_of(t) for t in unreachable} == {"unreachable"}
    assert mod.play(feasible, mod.greedy_action, 3).tolist() == [1.0] * 4
    assert mod.play(unreachable, mod.greedy_action, 3).tolist() == [0.0] * 3
    assert mod.play(unreachable, mod.random_action, 3).tolist() == [0.0] * 3
    assert mod.play(uncontrollable, mod.greedy_action, 10)[0] <= 0.2
    # the exact distance is reachable in exactly that many steps, one step less is not
    assert mod.play([task(20, 0.0, 20), task(20, 0.0, 19)], mod.greedy_action, 2).tolist() == [
        1.0,
        0.0,
    ]


def test_paired_ratio_pairs_by_seed():
    mod = _module()
    r = mod.paired_ratio({0: 2.0, 1: 4.0, 2: 6.0}, {0: 1.0, 1: 2.0, 2: 3.0, 3: 100.0})
    assert r == (pytest.approx(2.0), pytest.approx(2.0), pytest.approx(2.0), 3)
    assert mod.paired_ratio({0: 1.0}, {1: 1.0}) is None


def _quick(mod, out, *extra):
    assert mod.main(["--quick", "--out", str(out), *extra]) == 0


def test_quick_run_writes_one_record_per_run_and_summarises(tmp_path, capsys):
    mod = _module()
    out = tmp_path / "records"
    _quick(mod, out)
    paths = sorted(p.name for p in out.glob("*.json"))
    assert paths == ["primary-lp-seed0.json", "primary-uniform-seed0.json"]
    for p in out.glob("*.json"):
        r = json.loads(p.read_text())
        assert set(r) >= {
            "space", "condition", "seed", "commit", "versions", "config", "curriculum",
            "steps_to_threshold", "auc", "final_success", "stopped_at", "history",
        }  # fmt: skip
        assert r["config"]["budget"] == 4096 and r["trained_steps"] >= 4096
        assert r["versions"]["stable-baselines3"] and r["curriculum"]["config"]["scorer"]
        assert [h["steps"] for h in r["history"]] == [0, 2048, 4096]
        for h in r["history"]:
            assert len(h["per_task"]) == 5 and 0.0 <= h["success"] <= 1.0
            assert sum(h["mass"].values()) == pytest.approx(1.0)
            assert set(h["window"]) == {"episodes", "env_steps", "successes"}
        assert (
            sum(sum(h["window"]["episodes"].values()) for h in r["history"]) == r["train_episodes"]
        )
        assert r["train_episodes"] > 0
    capsys.readouterr()
    _quick(mod, out)  # the records exist: nothing runs again
    assert capsys.readouterr().out.count("exists, skipped") == 2
    assert mod.main(["--summarise", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "### primary: 108 tasks, 67% infeasible" in table
    assert "| uniform | 1 | 0/1 |" in table and "| lp | 1 | 0/1 |" in table


@pytest.mark.parametrize(
    ("conditions", "needs"),
    [(("syllabus_lp", "syllabus_plr"), "syllabus"), (("plr", "robust_plr"), "PLRScorer")],
)
def test_quick_run_of_the_optional_conditions(tmp_path, conditions, needs):
    mod = _module()
    if needs == "syllabus":
        pytest.importorskip("syllabus")
    elif conditions[0] not in mod.CONDITIONS:
        pytest.skip("gymcurric.tasks has no PLRScorer")
    _quick(mod, tmp_path, "--steps", "2048", "--conditions", *conditions)
    for cond in conditions:
        r = json.loads((tmp_path / f"primary-{cond}-seed0.json").read_text())
        assert r["train_episodes"] > 0 and [h["steps"] for h in r["history"]] == [0, 2048]
        assert all(sum(h["mass"].values()) == pytest.approx(1.0) for h in r["history"])
        if needs == "syllabus":
            assert r["versions"]["syllabus-rl"]


def test_a_space_without_oracle_runs_takes_the_feasible_uniform_runs_on_its_grid():
    _module()  # puts benchmarks/ on sys.path
    import _infeasible_report as report

    def rec(space, condition, seed, grid):
        return {"space": space, "condition": condition, "seed": seed,
                "config": {"eval_every": grid}}  # fmt: skip

    records = [
        rec("primary", "lp", 0, 10_000),
        rec("feasible", "uniform", 0, 10_000),
        rec("feasible", "uniform", 1, 20_000),  # another grid: not a stand-in
        rec("mostly", "oracle", 0, 20_000),
        rec("mostly", "lp", 0, 20_000),
    ]
    stand_in = report.oracle_stand_in(records, "primary")
    assert [(r["space"], r["condition"], r["seed"]) for r in stand_in] == [("primary", "oracle", 0)]
    assert report.oracle_stand_in(records, "mostly") == []  # it has its own oracle runs
    assert report.oracle_stand_in(records, "feasible") == []


def test_syllabus_queues_are_drained_so_long_runs_cannot_block():
    mod = _module()
    if not mod.syllabus_installed():
        pytest.skip("syllabus-rl is not installed (make bench)")
    from _infeasible_syllabus import SyllabusRun

    tasks = mod.study_space("primary").tasks
    run = SyllabusRun("lp", tasks, n_envs=1, n_steps=8, gamma=0.99, gae_lambda=0.95)
    components = run.sync.components
    drain = run.callbacks()[0]  # the callback the runs get, called after every vector step
    for _ in range(100):  # a pipe holds a few thousand: left to pile up, a put would block
        components.put_task({"next_task": 0})
        components.get_task()  # queues a timing each time
        components.put_update({"update_type": "noop", "metrics": None})
        drain._on_step()
        assert components._task_time_queue.empty() and components.update_queue.empty()
    run.close()
