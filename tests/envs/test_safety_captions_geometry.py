"""Caption rules that follow MuJoCo's bodies and the floor plane (issue 26, item 1).

``caption_truth.expected_caption`` first recomputed captions with safety-gymnasium's own
conventions (the lidar's body frame for Point and Car; contacts by geom-name prefix). Long
random rollouts (1,000 steps x 2 seeds) found two places where those conventions and the
caption's documented rules part, and the caption is the one that follows the simulator (the
checker now follows the documented rules; its long rollouts are
``test_long_random_rollouts_are_captioned_truthfully``):

1. Bearings. The caption measures a bearing in the floor plane from the agent's x axis
projected onto the floor, for every robot. safety-gymnasium's lidar instead rotates the 3-D
offset into the body frame; the two agree while the body is level and part near sector
boundaries once it tilts.
The Car tilts a few degrees when it runs into things (2.9° seen on SafetyCarGoal2-v0, where
a vase was "behind-left" in the caption and in the lidar's frame 0.18° past the boundary to
"behind"). Here the Car is tilted on purpose and a vase put where the two rules differ.

2. Touching. The caption counts a contact between any geom of the agent's body tree and any
geom of an object's body. The push box collides through geoms named ``col1``...``col4`` and
the Racecar's geoms have no names, so a rule by name prefix (``push_box``) misses the
Racecar's bumper against the box (62 of 2,000 states on SafetyRacecarPush1-v0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.envs.caption_truth import SECTORS

pytestmark = [pytest.mark.safety, pytest.mark.usefixtures("safety_installed")]


def sector(degrees: float) -> str:
    return SECTORS[math.floor((degrees + 22.5) / 45.0) % 8]


@pytest.mark.parametrize("tilt", [3.0, 15.0])
def test_a_tilted_car_gives_floor_plane_bearings(tilt: float) -> None:
    import mujoco

    from gymcurric.envs.safety_captions import SafetyTaskCaptioner
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyCarGoal1-v0", caption=True)
    env.reset(seed=3)
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    model, data = task.model, task.data

    def qpos_of(body: str) -> int:
        joint = int(model.body(body).jntadr[0])
        assert model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_FREE
        return int(model.jnt_qposadr[joint])

    # tilt the Car about a horizontal axis 45° off its heading (roll and pitch together)
    agent = qpos_of("agent")
    heading = math.atan2(task.agent.mat[1, 0], task.agent.mat[0, 0])
    axis = np.array([math.cos(heading + math.pi / 4), math.sin(heading + math.pi / 4), 0.0])
    turn = np.zeros(4)
    mujoco.mju_axisAngle2Quat(turn, axis, math.radians(tilt))
    quat = np.zeros(4)
    mujoco.mju_mulQuat(quat, turn, data.qpos[agent + 3 : agent + 7].copy())
    data.qpos[agent + 3 : agent + 7] = quat
    mujoco.mj_forward(model, data)
    mat, pos = task.agent.mat, task.agent.pos
    assert math.degrees(math.acos(mat[2, 2])) == pytest.approx(tilt, abs=1e-6)
    heading = math.atan2(mat[1, 0], mat[0, 0])  # the projected x axis

    def lidar_angle(floor_degrees: float) -> float:
        world = heading + math.radians(floor_degrees)
        offset = np.array([0.7 * math.cos(world), 0.7 * math.sin(world), -pos[2]])
        ego = offset @ mat
        return math.degrees(math.atan2(ego[1], ego[0]))

    def off_boundary(degrees: float) -> float:
        past = (degrees - 22.5) % 45.0
        return min(past, 45.0 - past)

    # floor bearings (clear of a boundary) whose lidar bearing is in another sector
    candidates = [
        a for a in np.arange(-180.0, 180.0, 0.05)
        if sector(a) != sector(lidar_angle(a)) and off_boundary(a) > 0.02
    ]  # fmt: skip
    assert candidates, "the tilt moves no bearing across a boundary"
    floor = float(candidates[len(candidates) // 2])
    world = heading + math.radians(floor)
    xy = pos[:2] + 0.7 * np.array([math.cos(world), math.sin(world)])
    vase = qpos_of("vase0")
    data.qpos[vase : vase + 2] = xy
    mujoco.mj_forward(model, data)
    text = SafetyTaskCaptioner(task).caption()
    edge = task.agent.dist_xy(task.vases.pos[0]) - task.vases.size  # 0.6
    word = "close" if edge < 0.5 else "near"
    assert abs(edge - 0.5) > 0.01
    assert f"A vase is {word} {sector(floor)}." in text, (floor, text)
    assert sector(floor) != sector(lidar_angle(floor))  # the lidar's frame would say otherwise
    env.close()


def test_the_racecar_touches_the_box_through_its_collision_geoms() -> None:
    import mujoco

    from gymcurric.envs.safety_captions import SafetyTaskCaptioner
    from gymcurric.envs.safety_gymnasium import make_safety_env

    env = make_safety_env("SafetyRacecarPush1-v0", caption=True)
    _, info = env.reset(seed=1)
    assert "touches" not in info["caption"]
    task = env.unwrapped.raw_env.task  # type: ignore[attr-defined]
    model, data = task.model, task.data
    agent, box = model.body("agent").id, model.body("push_box").id
    box_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] == box}
    assert {model.geom(g).name for g in box_geoms} >= {"push_box", "col1"}

    def box_contacts() -> list[str]:
        """Names of the box geoms an agent geom touches (MuJoCo's contact list)."""
        out = []
        for g1, g2 in data.contact.geom[: data.ncon].tolist():
            for mine, other in ((g1, g2), (g2, g1)):
                ours = model.body_rootid[model.geom_bodyid[mine]] == agent
                if ours and other in box_geoms:
                    out.append(model.geom(other).name)
        return out

    joint = int(model.body("push_box").jntadr[0])
    adr = int(model.jnt_qposadr[joint])
    mat = task.agent.mat
    ahead = np.array([mat[0, 0], mat[1, 0]]) / math.hypot(mat[0, 0], mat[1, 0])
    found = []
    for distance in np.arange(0.8, 0.1, -0.01):  # slide the box towards the bumper
        data.qpos[adr : adr + 2] = task.agent.pos[:2] + distance * ahead
        mujoco.mj_forward(model, data)
        found = box_contacts()
        if found:
            break
    assert found, "the box never met the Racecar"
    text = SafetyTaskCaptioner(task).caption()
    assert "The agent touches the box." in text, (found, text)
    # the contact is through the box's collision geoms: no name starts with "push_box"
    assert not any(name.startswith("push_box") for name in found), found
    env.close()
