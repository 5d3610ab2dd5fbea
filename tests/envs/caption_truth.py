"""What a Safety-Gymnasium caption must say, recomputed from a task's own arrays.

The documented caption rules (distance bins, eight egocentric sectors, floor-plane bearings,
contacts read by body) written out independently of ``gymcurric.envs.safety_captions``, and
:func:`expected_caption`, the whole sentence they give for a real task. Shared by
``test_safety_captions.py``, ``test_safety_captions_damaged.py``,
``test_safety_captions_geometry.py`` and ``test_safety_captions_tasks.py``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

# The documented scheme, restated (not imported from gymcurric) so that a silent change fails
# the caption tests.
BINS = ((0.25, "very close"), (0.5, "close"), (1.0, "near"))
SECTORS = (
    "ahead",
    "ahead-left",
    "left",
    "behind-left",
    "behind",
    "behind-right",
    "right",
    "ahead-right",
)
KINDS = (  # caption order: task attribute, singular, plural, body-name stem
    ("hazards", "hazard", "hazards", "hazard"),
    ("gremlins", "gremlin", "gremlins", "gremlin"),
    ("vases", "vase", "vases", "vase"),
    ("pillars", "pillar", "pillars", "pillar"),
    ("buttons", "button", "buttons", "button"),
)
NUMBERS = dict(enumerate(("no", "a", "two", "three", "four", "five", "six", "seven", "eight")))


def bin_word(edge: float) -> str:
    """The distance word for an object whose edge is ``edge`` metres away."""
    return next((w for bound, w in BINS if edge < bound), "far")


def ego_angle(task: Any, xy: np.ndarray) -> float:
    """Degrees, counter-clockwise from the agent's forward direction, in the floor plane.

    The documented rule for every robot: forward is the body x axis (the first column of
    ``task.agent.mat``) projected onto the floor, and the angle is the one between it and the
    floor offset to the object. safety-gymnasium's lidar instead rotates the 3-D offset into the
    body frame; that agrees only while the body is level, and a Car tilts when it runs into
    things (2.9° on SafetyCarGoal2-v0), which moved a vase across a sector boundary.
    """
    forward = task.agent.mat[:2, 0]
    offset = np.asarray(xy, dtype=float)[:2] - task.agent.pos[:2]
    cross = forward[0] * offset[1] - forward[1] * offset[0]
    return math.degrees(math.atan2(cross, forward @ offset))


class Ambiguous(Exception):
    """A value lies on a bin or sector boundary: the state is skipped, not judged."""


def place_words(task: Any, xy: np.ndarray, radius: float, tol: float) -> str:
    """Distance and bearing words for an object at ``xy`` (``Ambiguous`` near a boundary)."""
    edge = task.agent.dist_xy(xy) - radius
    angle = ego_angle(task, xy)
    near_bin = any(abs(edge - bound) < tol for bound, _ in BINS)
    off_boundary = (angle - 22.5) % 45.0  # degrees past the last sector boundary
    near_sector = min(off_boundary, 45.0 - off_boundary) < 1000 * tol  # 1e-3 degrees per 1e-6 m
    if near_bin or near_sector:
        raise Ambiguous
    return f"{bin_word(edge)} {SECTORS[math.floor((angle + 22.5) / 45.0) % 8]}"


def in_agent(model: Any, body: int) -> bool:
    """Whether ``body`` is the agent's body or hangs below it (walks the parent ids)."""
    while body > 0:  # 0 is the world body
        if model.body(body).name == "agent":
            return True
        body = int(model.body_parentid[body])
    return False


def touched_indices(task: Any, stem: str) -> set[int]:
    """Indices of the ``stem`` objects in contact with the agent, matched by body.

    A contact counts when one geom's body is in the agent's tree and the other geom's body is
    the object's (``vase3``; ``gremlin2obj``/``gremlin2mocap``; ``push_box``). Geom names do not
    do: the push box also collides through its geoms ``col1``-``col4``, and the Racecar's geoms
    have no names (62 missed states on SafetyRacecarPush1-v0, seed 1).
    """
    model, data = task.model, task.data
    pattern = re.compile(rf"{re.escape(stem)}(\d*)(?:obj|mocap)?")
    out = set()
    for contact in data.contact[: data.ncon]:
        bodies = [int(model.geom_bodyid[g]) for g in (contact.geom1, contact.geom2)]
        for mine, other in (bodies, bodies[::-1]):
            found = pattern.fullmatch(model.body(other).name)
            if found and in_agent(model, mine) and not in_agent(model, other):
                out.add(int(found.group(1) or 0))
    return out


def counted(n: int, singular: str, plural: str) -> str:
    """``n`` objects in words: "a hazard", "two vases"."""
    return NUMBERS[n] + " " + (singular if n == 1 else plural)


def expected_caption(task: Any, kind: str, goal_met: bool, tol: float = 1e-6) -> str:
    """The caption, recomputed from the task's arrays with the documented rules."""
    out = [
        {
            "goal": "The agent reached the goal.",
            "button": "The agent pressed the goal button.",
            "push": "The box reached the goal.",
        }[kind]
    ] * goal_met
    inside, touching, listed, present = [], [], [], False
    goal_button = task.buttons.goal_button if kind == "button" else None
    for name, singular, plural, stem in KINDS:
        obj = getattr(task, name, None)
        if obj is None:
            continue
        positions = list(obj.pos)
        touched = touched_indices(task, stem)
        if name == "buttons":
            touched.discard(goal_button)
        if touched:
            touching.append(counted(len(touched), singular, plural))
        n_inside, rows = 0, []
        for i, xy in enumerate(positions):
            if i == goal_button and name == "buttons":
                continue
            present = True
            distance = task.agent.dist_xy(xy)
            if name == "hazards" and abs(distance - obj.size) < tol:
                raise Ambiguous
            if name == "hazards" and distance <= obj.size:
                n_inside += 1
            elif distance - obj.size < 1.0 and i not in touched:
                if abs(distance - obj.size - 1.0) < tol:
                    raise Ambiguous
                rows.append((distance - obj.size, place_words(task, xy, obj.size, tol)))
        if n_inside:
            inside.append(counted(n_inside, singular, plural))
        near = sorted(rows)[:3]
        if near:
            subject = f"A {singular} is" if len(near) == 1 else f"{plural.capitalize()} are"
            phrases = [w for _, w in near]
            joined = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1])
            joined += f" and {phrases[-1]}" if len(phrases) > 1 else ""
            listed.append(f"{subject} {joined}.")
    box_touched = kind == "push" and bool(touched_indices(task, "push_box"))
    if box_touched:
        touching.append("the box")
    if inside:
        out.append(f"The agent is inside {' and '.join(inside)}.")
    if touching:
        joined = touching[0] if len(touching) == 1 else ", ".join(touching[:-1])
        joined += f" and {touching[-1]}" if len(touching) > 1 else ""
        out.append(f"The agent touches {joined}.")
    out += listed
    if present and not (inside or touching or listed):
        out.append("No obstacle is near.")
    if kind == "push":
        out.append(f"The box is {place_words(task, task.push_box.pos, task.push_box.size, tol)}.")
    if kind == "button":
        goal_xy, radius, label = task.buttons.pos[goal_button], task.buttons.size, "goal button"
    else:
        goal_xy, radius, label = task.goal.pos, task.goal.size, "goal"
    if kind != "button" and task.agent.dist_xy(goal_xy) <= radius:  # a button is solid
        out.append(f"The agent is at the {label}.")
    else:
        out.append(f"The {label} is {place_words(task, goal_xy, radius, tol)}.")
    if kind == "push":
        gap = float(np.hypot(*(task.push_box.pos - task.goal.pos)[:2])) - task.goal.size
        word = {"very close": "very close to", "close": "close to", "near": "near"}
        out.append(
            f"The box is {'at' if gap <= 0 else word.get(bin_word(gap), 'far from')} the goal."
        )
    return " ".join(out)
