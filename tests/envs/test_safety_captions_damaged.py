"""Captions of real Safety-Gymnasium tasks whose state is damaged (issue 26, bad input).

``tests/envs/test_safety_captions_bad_input.py`` and the pure-generator cases of
``test_safety_captions.py`` feed :func:`caption_scene` hand-made scenes. Here the damage is done
to a real task's MuJoCo state: a NaN written into ``qpos`` (propagated by ``mj_forward``), into
``model.body_pos``, or straight into ``data.xpos``/``data.xmat``; an object type the captioner
has no name for, added to a real task; a goal-button index that is gone. Each caption must say
what is unknown, stay truthful about the rest, and never raise.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from gymcurric.envs.safety_captions import SafetyTaskCaptioner
from tests.envs.caption_truth import SECTORS, Ambiguous, expected_caption

pytestmark = [pytest.mark.safety, pytest.mark.usefixtures("safety_installed")]


@pytest.fixture(scope="module")
def envs() -> Iterator[dict[str, Any]]:
    """The captioning envs of this module by id, each built once (by ``make``), closed at the end.

    A test resets its env with a seed before damaging it; Safety-Gymnasium's reset builds a new
    MuJoCo model and data, so what a test damaged is whole again for the next, and the state is
    the one a new env reset with that seed has (a re-reset repeats the captions:
    ``test_safety_captions_determinism.py``).
    """
    made: dict[str, Any] = {}
    yield made
    for env in made.values():
        env.close()


def make(envs: dict[str, Any], env_id: str, seed: int = 3) -> tuple[Any, Any, str]:
    """The module's env ``env_id`` reset with ``seed``, its task, and the caption at reset."""
    from gymcurric.envs.safety_gymnasium import make_safety_env

    if env_id not in envs:
        envs[env_id] = make_safety_env(env_id, caption=True)
    env = envs[env_id]
    _, info = env.reset(seed=seed)
    return env, env.unwrapped.raw_env.task, info["caption"]  # type: ignore[attr-defined]


def nan_into_qpos(task: Any, body: str) -> None:
    """Write NaN into the first coordinate of ``body``'s first joint and run the kinematics."""
    import mujoco

    model, data = task.model, task.data
    joint = int(model.body(body).jntadr[0])
    assert joint >= 0, f"{body} has no joint"
    data.qpos[int(model.jnt_qposadr[joint])] = np.nan
    mujoco.mj_forward(model, data)


def nan_into_body_pos(task: Any, body: str) -> None:
    """Write NaN into a fixed body's x in the model (hazards, pillars, the goal)."""
    import mujoco

    task.model.body_pos[task.model.body(body).id][0] = np.nan
    mujoco.mj_forward(task.model, task.data)


def sentence(caption: str, start: str) -> str:
    """The one sentence of ``caption`` that starts with ``start`` ("" if none)."""
    found = [s + "." for s in caption.rstrip(".").split(". ") if s.startswith(start)]
    assert len(found) <= 1, caption
    return found[0] if found else ""


def word(edge: float) -> str:
    return next((w for bound, w in ((0.25, "very close"), (0.5, "close"), (1.0, "near"))
                 if edge < bound), "far")  # fmt: skip


@pytest.mark.parametrize(
    ("env_id", "damage", "body", "unknown"),
    [
        ("SafetyPointGoal2-v0", nan_into_qpos, "vase3", "The position of a vase is unknown."),
        ("SafetyPointGoal1-v0", nan_into_body_pos, "hazard2",
         "The position of a hazard is unknown."),
        ("SafetyPointPush2-v0", nan_into_body_pos, "pillar0",
         "The position of a pillar is unknown."),
        ("SafetyCarButton1-v0", nan_into_qpos, "gremlin1obj",
         "The position of a gremlin is unknown."),
        ("SafetyPointGoal1-v0", nan_into_body_pos, "goal", "The goal's position is unknown."),
        ("SafetyPointPush1-v0", nan_into_qpos, "push_box", "The box's position is unknown."),
    ],
)  # fmt: skip
def test_a_nan_object_position_in_the_mujoco_state_is_said_unknown(
    env_id: str, damage: Any, body: str, unknown: str, envs: dict[str, Any]
) -> None:
    env, task, before = make(envs, env_id)
    agent = task.agent.pos.copy()
    damage(task, body)
    assert not np.isfinite(task.data.xpos[task.model.body(body).id][:2]).all()
    assert np.array_equal(task.agent.pos, agent)  # only that object is damaged
    text = SafetyTaskCaptioner(task).caption()
    assert unknown in text, text
    # the damaged object is given no distance: the goal sentence (or the box's) is unchanged
    # unless the damaged object is the goal (or the box) itself
    if body not in ("goal", "push_box"):
        assert sentence(text, "The goal") == sentence(before, "The goal") != ""
    if body == "goal":
        assert "The goal is" not in text and "the goal." not in text  # no box-to-goal either
    if body == "push_box":
        assert "The box is" not in text  # neither the box's place nor its distance to the goal
        assert sentence(text, "The goal is") == sentence(before, "The goal is") != ""


def test_a_nan_agent_position_gives_no_distances_and_never_raises(envs: dict[str, Any]) -> None:
    env, task, _ = make(envs, "SafetyPointGoal1-v0")
    nan_into_qpos(task, "agent")
    assert not np.isfinite(task.agent.pos).all()
    text = SafetyTaskCaptioner(task).caption()
    assert text.startswith("The agent's position is unknown."), text
    for said in ("close", "near", "far", "ahead", "behind", "left", "right", "The goal"):
        assert said not in text, text


def test_a_nan_heading_written_into_xmat_gives_true_distances_without_bearings(
    envs: dict[str, Any],
) -> None:
    env, task, before = make(envs, "SafetyPointGoal1-v0")
    data = task.data
    data.xmat[task.model.body("agent").id] = np.nan  # the data itself, no mj_forward
    text = SafetyTaskCaptioner(task).caption()
    assert text.startswith("The agent's heading is unknown."), text
    assert not any(bearing in text.split() for bearing in SECTORS), text
    edge = task.agent.dist_xy(task.goal.pos) - task.goal.size
    assert text.endswith(f"The goal is {word(edge)}."), text
    # the hazards listed are the ones listed before, in the same order, bearings removed
    listed = sentence(before, "Hazards are") or sentence(before, "A hazard is")
    if listed:
        stripped = listed
        for bearing in sorted(SECTORS, key=len, reverse=True):
            stripped = stripped.replace(" " + bearing, "")
        assert stripped in text, (stripped, text)


def test_a_nan_written_into_xpos_after_a_step_is_said_unknown(envs: dict[str, Any]) -> None:
    env, task, _ = make(envs, "SafetyPointGoal2-v0")
    env.step(np.zeros(2))
    xpos = task.data.xpos
    xpos[task.model.body("vase0").id] = np.nan
    xpos[task.model.body("vase1").id, 1] = np.inf
    text = SafetyTaskCaptioner(task).caption()
    assert "The positions of two vases are unknown." in text, text
    xpos[task.model.body("agent").id] = np.nan
    assert SafetyTaskCaptioner(task).caption().startswith("The agent's position is unknown.")


@pytest.mark.parametrize(
    ("env_id", "action"),
    [("SafetyPointGoal1-v0", None), ("SafetyCarGoal1-v0", None),
     ("SafetyPointGoal1-v0", [np.nan, 0.0])],
)  # fmt: skip
def test_nan_into_the_simulator_then_a_step_never_raises_and_stays_truthful(
    env_id: str, action: Any, envs: dict[str, Any]
) -> None:
    # MuJoCo's mj_step resets the data when it meets a NaN (qpos, or ctrl from the action):
    # the step's caption must describe the state the simulator is then in, not raise
    env, task, _ = make(envs, env_id)
    if action is None:
        nan_into_qpos(task, "vase0")
    _, _, _, _, info = env.step(np.zeros(2) if action is None else np.array(action))
    assert np.isfinite(task.data.xpos).all()
    try:
        assert info["caption"] == expected_caption(task, "goal", bool(info.get("goal_met")))
    except Ambiguous:  # pragma: no cover - the seeds above are not on a boundary
        pytest.fail("the state is on a bin or sector boundary: choose a seed that is not")


def test_an_object_type_outside_the_vocabulary_is_named_with_its_true_place() -> None:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    apples = importlib.import_module("safety_gymnasium.assets.geoms.apples").Apples
    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    # a real safety-gymnasium object the captioner has no word for; left out of the
    # observation (the space is fixed) and placed on the next reset (placements are redone)
    task._add_geoms(apples(num=2, size=0.2, is_lidar_observed=False))
    task.placements_conf.placements = None
    _, info = env.reset(seed=3)
    seen = 0
    for _ in range(12):
        near = sorted(
            (task.agent.dist_xy(xy) - 0.2, i, xy)
            for i, xy in enumerate(task.apples.pos)
            if task.agent.dist_xy(xy) - 0.2 < 1.0
        )
        text = info["caption"]
        goal = sentence(text, "The goal") or sentence(text, "The agent is at the goal")
        without = expected_caption(task, "goal", bool(info.get("goal_met")))
        if near:
            phrases = []
            for edge, _, xy in near:
                offset = np.r_[xy[:2], 0.0] - task.agent.pos
                ego = offset @ task.agent.mat
                angle = math.degrees(math.atan2(ego[1], ego[0]))
                phrases.append(f"{word(edge)} {SECTORS[math.floor((angle + 22.5) / 45) % 8]}")
            said = (
                f"An unknown object 'apples' is {phrases[0]}."
                if len(phrases) == 1
                else f"Unknown objects 'apples' are {', '.join(phrases[:-1])} and {phrases[-1]}."
            )
            assert said in text, (said, text)
            # the rest is the caption of the known objects (apples go after them)
            rest = text.replace(said + " ", "")
            assert rest == without.replace("No obstacle is near. ", ""), (rest, without)
            seen += 1
        else:
            assert "apples" not in text and text == without
        assert goal != ""
        _, _, _, _, info = env.step(np.array([1.0, 0.3]))
    assert seen > 0, "no apple came within 1 m: choose another seed"
    env.close()


def test_a_lost_goal_button_is_said_unknown_and_every_button_is_an_obstacle(
    envs: dict[str, Any],
) -> None:
    env, task, before = make(envs, "SafetyPointButton1-v0")
    assert "The goal button is" in before
    for lost in (None, 99, -1, 1.5):
        task.buttons.goal_button = lost
        text = SafetyTaskCaptioner(task).caption()
        assert text.endswith("The goal button's position is unknown."), (lost, text)
        listed = sentence(text, "Buttons are") or sentence(text, "A button is")
        edges = [task.agent.dist_xy(xy) - task.buttons.size for xy in task.buttons.pos]
        expected = min(3, sum(e < 1.0 for e in edges))
        assert listed.count(",") + listed.count(" and ") + bool(listed) == expected, text
