"""Captions for Safety-Gymnasium's Goal, Button and Push tasks, read from the simulator state.

``SafetyGymnasiumEnv(id, caption=True)`` writes ``info["caption"]`` at reset and on every step,
for caption embedders (:class:`~gymcurric.semantics.caption.CaptionEmbedder`) and risk heads that
read captions. A caption is a few short sentences in the style of
:class:`~gymcurric.envs.hazard_nav.HazardNavEnv`'s, e.g. ``"The agent is inside a hazard.
Hazards are close ahead-left and near behind. A vase is very close right. The goal is far
ahead."``. In order, it says:

1. the event of this step: ``"The agent reached the goal."`` (Goal), ``"The agent pressed the
   goal button."`` (Button), ``"The box reached the goal."`` (Push), when safety-gymnasium
   reports ``goal_met`` (the task then moves the goal: the rest describes the new one);
2. what the agent is inside or touching: inside a hazard when the agent's centre is within the
   hazard's radius in the floor plane (safety-gymnasium's hazard-cost rule); touching a vase,
   pillar, gremlin, button or the box when MuJoCo lists a contact between a geom of the agent's
   body tree and a geom of that object's body (the rule of safety-gymnasium's contact costs,
   which match geom names; the box also collides through geoms named ``col1``-``col4``);
3. the nearest other hazards, gremlins, vases, pillars and buttons: at most ``max_per_kind``
   (3) of each kind whose edge is nearer than ``max_distance`` (1 m), nearest first, or ``"No
   obstacle is near."`` when the task has obstacles and none of this applies;
4. Push: the box's distance and bearing; all: the goal's (Button: the goal button's), or ``"The
   agent is at the goal."`` when its centre is within the goal's radius (Goal, Push: the goal is
   an area; a button and the box are solid, never entered, so at most ``"very close"``); Push:
   the box's distance to the goal.

Distances are from the agent's centre to the object's edge (centre distance minus the object's
radius: ``size`` for hazards, pillars, buttons, the goal; the half-side ``size`` for the boxes
of vases, gremlins and the push box), in the floor plane, binned so that captions repeat and a
caption cache hits: under 0.25 m ``"very close"``, under 0.5 m ``"close"``, under 1 m
``"near"``, else ``"far"`` (:data:`DISTANCE_BINS`). Bearings are egocentric, one of eight 45°
sectors centred on ``"ahead"``, ``"ahead-left"``, ``"left"``, ``"behind-left"``, ``"behind"``,
``"behind-right"``, ``"right"``, ``"ahead-right"`` (:data:`BEARINGS`), measured in the floor plane
from the agent body's x axis projected onto the floor (while the body is level, the direction
safety-gymnasium's lidar and compass call 0; the lidar rotates the 3-D offset into the tilted
body frame instead, which differs near sector boundaries once a body tilts: the legged robots
and the Racecar as they move, the Car by a few degrees when it runs into things); an object on
a sector boundary belongs to the sector counter-clockwise of it.

Odd input is described: a kind outside the vocabulary as ``unknown object '<kind>'``, a NaN (or
unreadable) position as unknown (``"The position of a vase is unknown."``, ``"The agent's
position is unknown."``); a NaN heading gives distances without bearings, a NaN radius counts as
0, an obstacle table that is not a mapping is ``"The obstacles are unknown."`` (None: none), a
group that is not an :class:`ObjectGroup` is taken as its positions. Refused (ConfigError): a
``scene`` that is not a :class:`Scene` (a dict) and a negative radius (a size, m).

:func:`caption_scene` is the pure generator (numpy only, no mujoco); :class:`SafetyTaskCaptioner`
reads a safety-gymnasium task's state into a :class:`Scene` and captions it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from gymcurric.envs._caption_refusals import distance_refusal, odd_radius, scene_refusal
from gymcurric.errors import ConfigError

__all__ = [
    "BEARINGS",
    "DISTANCE_BINS",
    "MAX_DISTANCE",
    "MAX_PER_KIND",
    "ObjectGroup",
    "SafetyTaskCaptioner",
    "Scene",
    "bearing_word",
    "caption_scene",
    "distance_word",
    "task_kind",
]

#: Egocentric bearings, counter-clockwise from straight ahead, one per 45° sector.
BEARINGS: tuple[str, ...] = (
    "ahead",
    "ahead-left",
    "left",
    "behind-left",
    "behind",
    "behind-right",
    "right",
    "ahead-right",
)
#: (upper edge distance in m, word); an edge distance at or beyond the last bound is ``"far"``.
DISTANCE_BINS: tuple[tuple[float, str], ...] = ((0.25, "very close"), (0.5, "close"), (1.0, "near"))
FAR = "far"
MAX_PER_KIND = 3
MAX_DISTANCE = 1.0

_SECTOR = math.pi / 4
_TWO_PI = 2.0 * math.pi
# Known obstacle kinds, in caption order: attribute name on the task -> (singular, plural).
_KINDS: dict[str, tuple[str, str]] = {
    "hazards": ("hazard", "hazards"),
    "gremlins": ("gremlin", "gremlins"),
    "vases": ("vase", "vases"),
    "pillars": ("pillar", "pillars"),
    "buttons": ("button", "buttons"),
}
# Kinds the agent can be inside (area objects, no collision geometry).
_AREAS = frozenset({"hazards"})
_NUMBERS = ("no", "a", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_EVENTS = {
    "goal": "The agent reached the goal.",
    "button": "The agent pressed the goal button.",
    "push": "The box reached the goal.",
}
_TO_GOAL = {"very close": "very close to", "close": "close to", "near": "near", FAR: "far from"}


def distance_word(edge: float) -> str:
    """The bin of an edge distance in m: ``"very close"``, ``"close"``, ``"near"`` or ``"far"``.

    >>> distance_word(0.1), distance_word(0.25), distance_word(0.99), distance_word(3.0)
    ('very close', 'close', 'near', 'far')
    """
    for bound, word in DISTANCE_BINS:
        if edge < bound:
            return word
    return FAR


def bearing_word(ego_x: float, ego_y: float) -> str:
    """The bearing of a point at ``(ego_x, ego_y)`` in the agent's frame (x ahead, y left).

    >>> bearing_word(1.0, 0.0), bearing_word(0.0, 1.0), bearing_word(-1.0, -1.0)
    ('ahead', 'left', 'behind-right')
    """
    sector = math.floor(math.atan2(ego_y, ego_x) / _SECTOR + 0.5)
    return BEARINGS[sector % 8]


class ObjectGroup(NamedTuple):
    """Objects of one kind: ``(n, 2)`` world floor positions, one radius, touched indices."""

    positions: Any
    radius: float = 0.0
    touching: Collection[int] = ()


class Scene(NamedTuple):
    """What a caption describes, in world coordinates (metres, radians).

    Attributes:
        task: ``"goal"``, ``"button"`` or ``"push"``.
        agent_xy: the agent's floor position.
        heading: world angle of the agent's forward (body x) axis, counter-clockwise from +x.
        objects: obstacle groups by kind (``"hazards"``, ``"gremlins"``, ``"vases"``,
            ``"pillars"``, ``"buttons"``; Button: the buttons other than the goal button).
        goal_xy: the goal's position (Button: the goal button's).
        goal_radius: the goal's radius (Button: the button's).
        box_xy: Push: the box's position.
        box_radius: the box's half-side.
        box_touching: the agent touches the box.
        goal_met: safety-gymnasium reported ``goal_met`` this step.
    """

    task: str
    agent_xy: Any
    heading: float
    objects: Mapping[str, ObjectGroup] = MappingProxyType({})
    goal_xy: Any = None
    goal_radius: float = 0.0
    box_xy: Any = None
    box_radius: float = 0.0
    box_touching: bool = False
    goal_met: bool = False


def caption_scene(
    scene: Scene, *, max_per_kind: int = MAX_PER_KIND, max_distance: float = MAX_DISTANCE
) -> str:
    """Describe a :class:`Scene` in a few sentences (see the module docstring for the rules).

    Never raises on bad positions or kinds: they are described as unknown.

    Args:
        scene: the state to describe.
        max_per_kind: most objects of one kind listed.
        max_distance: objects whose edge is this far (m) or farther are not listed.

    Raises:
        ConfigError: ``max_per_kind`` is not an int >= 0 or ``max_distance`` not a number > 0
            (as :class:`SafetyTaskCaptioner`); ``scene`` is not a :class:`Scene` (a dict, say);
            a radius (an object's size, m) is negative.

    Returns:
        The caption.

    Examples:
        >>> scene = Scene(
        ...     "goal",
        ...     agent_xy=(0.0, 0.0),
        ...     heading=0.0,
        ...     objects={"hazards": ObjectGroup([[0.1, 0.0], [0.0, 0.6], [-2.0, 0.0]], 0.2)},
        ...     goal_xy=(0.0, -3.0),
        ...     goal_radius=0.3,
        ... )
        >>> caption_scene(scene)
        'The agent is inside a hazard. A hazard is close left. The goal is far right.'
    """
    # as Python numbers: numpy 2 compares a float with an np.float32 limit in float32 (NEP 50)
    max_per_kind, max_distance = _check_limits(max_per_kind, max_distance)
    try:  # costs nothing until it catches: a scene that is no Scene, a negative radius
        out: list[str] = []
        if scene.goal_met:
            task = scene.task if isinstance(scene.task, str) else "goal"
            out.append(_EVENTS.get(task, _EVENTS["goal"]))
        agent = _point(scene.agent_xy)
        ax, ay = agent if agent is not None else (0.0, 0.0)
        heading = _float(scene.heading)
        if agent is None:
            out.append("The agent's position is unknown.")
        elif not math.isfinite(heading):
            out.append("The agent's heading is unknown.")
        # (cos, sin) of the heading: egocentric x = dx·cos + dy·sin, y = dy·cos - dx·sin
        turn = (math.cos(heading), math.sin(heading)) if math.isfinite(heading) else None
        inside: list[str] = []
        touching: list[str] = []
        listed: list[str] = []
        has_obstacles = any_near = False
        objects = scene.objects if scene.objects is not None else {}
        if not isinstance(objects, Mapping):
            listed.append("The obstacles are unknown.")
            objects = {}
        for kind in _ordered(objects):
            group = objects[kind]
            singular, plural = _names(kind)
            # an ObjectGroup, or anything else taken as its positions
            touched = {int(i) for i in _indices(getattr(group, "touching", ()))}
            if touched:
                touching.append(_count(len(touched), singular, plural))
            rows = _rows(getattr(group, "positions", group))
            if rows is None:
                listed.append(f"The positions of {plural} are unknown.")
                has_obstacles = True
                continue
            has_obstacles = has_obstacles or len(rows) > 0
            radius = _radius(getattr(group, "radius", 0.0))
            near: list[tuple[float, int, float, float]] = []
            unknown = inside_count = 0
            for i, row in enumerate(rows):
                try:  # one isfinite for both: a sum is finite only if both terms are
                    dx, dy = row[0] - ax, row[1] - ay
                    known = math.isfinite(dx + dy)
                except (TypeError, ValueError, IndexError, KeyError):
                    known = False
                if not known:
                    unknown += 1
                    continue
                if agent is None:
                    continue
                edge = math.hypot(dx, dy) - radius
                if edge <= 0.0 and kind in _AREAS:
                    inside_count += 1
                elif edge < max_distance and i not in touched:
                    near.append((edge, i, dx, dy))
            if inside_count:
                inside.append(_count(inside_count, singular, plural))
            if unknown:
                listed.append(_unknown_positions(unknown, singular, plural))
            near.sort()
            any_near = any_near or bool(near)
            phrases = [_where(edge, dx, dy, turn) for edge, _, dx, dy in near[:max_per_kind]]
            if phrases:
                subject = _article(singular) + " is" if len(phrases) == 1 else plural + " are"
                listed.append(f"{_cap(subject)} {_join(phrases)}.")
        if scene.box_touching:
            touching.append("the box")
        if inside:
            out.append(f"The agent is inside {_join(inside)}.")
        if touching:
            out.append(f"The agent touches {_join(touching)}.")
        out.extend(listed)
        if agent is not None and has_obstacles and not (inside or touching or listed or any_near):
            out.append("No obstacle is near.")
        box = None
        if scene.task == "push":
            box = _point(scene.box_xy)
            if box is None:
                out.append("The box's position is unknown.")
            elif agent is not None:
                where = _where_object(box, scene.box_radius, agent, turn, solid=True)
                out.append(f"The box is {where}.")
        goal = _point(scene.goal_xy)
        name = "goal button" if scene.task == "button" else "goal"
        if goal is None:
            out.append(f"The {name}'s position is unknown.")
        elif agent is not None:
            solid = scene.task == "button"  # a button is pressed by touching, not entered
            where = _where_object(goal, scene.goal_radius, agent, turn, solid=solid)
            out.append(f"The {name} is {where}." if where else f"The agent is at the {name}.")
        if goal is not None and box is not None:
            gap = math.hypot(box[0] - goal[0], box[1] - goal[1]) - _radius(scene.goal_radius)
            word = "at" if gap <= 0.0 else _TO_GOAL[distance_word(gap)]
            out.append(f"The box is {word} the goal.")
        return " ".join(out)
    except (AttributeError, ConfigError) as exc:
        if (refusal := scene_refusal(scene, exc, Scene)) is None:
            raise
        raise refusal from None


def task_kind(task: Any) -> str:
    """``"goal"``, ``"button"`` or ``"push"`` for a safety-gymnasium navigation task object.

    Raises:
        ConfigError: the task is none of these (Circle, Run, Race, velocity tasks).
    """
    bases = {cls.__name__ for cls in type(task).__mro__}
    for kind, base in (("button", "ButtonLevel0"), ("push", "PushLevel0"), ("goal", "GoalLevel0")):
        if base in bases:
            return kind
    raise ConfigError(
        "caption",
        True,
        f"captions are written for Goal, Button and Push tasks, not {type(task).__name__}",
    )


class _Group(NamedTuple):
    kind: str
    bodies: list[int]  # body id per object, -1 where the body was not found
    radius: float


class SafetyTaskCaptioner:
    """Captions a safety-gymnasium Goal, Button or Push task from its MuJoCo state.

    Reads the agent's position and heading (``data.xpos``/``xmat`` of body ``"agent"``), the
    objects' positions (the bodies safety-gymnasium reads in ``task.<kind>.pos``), their
    ``size`` and the current contacts, and describes them with :func:`caption_scene`. The body
    and geom tables are rebuilt whenever the task rebuilds its MuJoCo model (every reset).

    Args:
        task: the task (``SafetyGymnasiumEnv.raw_env.task``).
        max_per_kind: most objects of one kind listed.
        max_distance: objects whose edge is this far (m) or farther are not listed.

    Raises:
        ConfigError: the task is not a Goal, Button or Push task, or an argument is invalid.
    """

    def __init__(
        self, task: Any, *, max_per_kind: int = MAX_PER_KIND, max_distance: float = MAX_DISTANCE
    ) -> None:
        self.max_per_kind, self.max_distance = _check_limits(max_per_kind, max_distance)
        self.kind = task_kind(task)
        self.task = task
        self._model: Any = None

    def _bind(self) -> None:
        task = self.task
        model = task.model
        self._agent = _body_id(model, "agent")
        geom_body = np.asarray(model.geom_bodyid)
        roots = np.asarray(model.body_rootid)[geom_body]
        self._agent_geoms = frozenset(np.flatnonzero(roots == self._agent).tolist())
        # geom id -> (group, index) of the object it belongs to; group -2 is the push box
        self._owners: dict[int, tuple[int, int]] = {}
        self._groups: list[_Group] = []
        self._goal = self._box = -1
        for obstacle in task._obstacles:
            name = str(obstacle.name)
            if name in ("goal", "push_box"):
                body = _body_id(model, name)
                if name == "goal":
                    self._goal = body
                else:
                    self._box = body
                    self._own(geom_body, body, -2, 0)
                continue
            count = getattr(obstacle, "num", None)
            stem = name[:-1] if count is not None else name
            suffixes = ("obj", "mocap") if getattr(obstacle, "type", None) == "mocaps" else ("",)
            bodies = []
            for i in range(int(count) if count is not None else 1):
                label = f"{stem}{i}" if count is not None else stem
                ids = [_body_id(model, label + suffix) for suffix in suffixes]
                for body in ids:
                    self._own(geom_body, body, len(self._groups), i)
                bodies.append(ids[0])
            radius = _radius(getattr(obstacle, "size", 0.0))
            self._groups.append(_Group(name, bodies, radius))
        self._model = model

    def _own(self, geom_body: np.ndarray, body: int, group: int, index: int) -> None:
        if body >= 0:
            for geom in np.flatnonzero(geom_body == body).tolist():
                self._owners[geom] = (group, index)

    def scene(self, *, goal_met: bool = False) -> Scene:
        """The task's current state as a :class:`Scene`."""
        task = self.task
        if task.model is not self._model:
            self._bind()
        data = task.data
        xpos = data.xpos[:, :2].tolist()
        xpos.append([math.nan, math.nan])  # body id -1: not found
        touched: dict[int, set[int]] = {}
        if data.ncon:
            agent, owners = self._agent_geoms, self._owners
            for g1, g2 in data.contact.geom.tolist():
                other = g2 if g1 in agent else g1 if g2 in agent else -1
                owner = owners.get(other)
                if owner is not None and (g1 in agent) != (g2 in agent):
                    touched.setdefault(owner[0], set()).add(owner[1])
        objects: dict[str, ObjectGroup] = {}
        goal_xy = xpos[self._goal]
        goal_radius = _radius(getattr(getattr(task, "goal", None), "size", 0.0))
        for g, group in enumerate(self._groups):
            positions = [xpos[body] for body in group.bodies]
            hits = touched.get(g, set())
            if self.kind == "button" and group.kind == "buttons":
                positions, hits, goal_xy = _split_goal_button(positions, hits, task)
                goal_radius = group.radius
            objects[group.kind] = ObjectGroup(positions, group.radius, hits)
        mat = data.xmat[self._agent]
        return Scene(
            self.kind,
            agent_xy=xpos[self._agent],
            heading=math.atan2(float(mat[3]), float(mat[0])),
            objects=objects,
            goal_xy=goal_xy,
            goal_radius=goal_radius,
            box_xy=xpos[self._box] if self.kind == "push" else None,
            box_radius=_radius(getattr(getattr(task, "push_box", None), "size", 0.0)),
            box_touching=-2 in touched,
            goal_met=goal_met,
        )

    def caption(self, *, goal_met: bool = False) -> str:
        """The caption of the task's current state (``goal_met``: the step's ``goal_met``)."""
        return caption_scene(
            self.scene(goal_met=goal_met),
            max_per_kind=self.max_per_kind,
            max_distance=self.max_distance,
        )


def _check_limits(max_per_kind: Any, max_distance: Any) -> tuple[int, float]:
    """The limits as ``(int, float)``; ConfigError unless they are an int >= 0 and a number > 0.

    numpy scalars and 0-d arrays count (``np.int64(3)``, ``np.array(2.5)``, as ``np.load``
    gives them); bools of either kind do not.
    """
    per_kind, distance = _scalar(max_per_kind), _scalar(max_distance)
    if not isinstance(per_kind, numbers.Integral) or _is_bool(per_kind) or per_kind < 0:
        raise ConfigError("max_per_kind", max_per_kind, "expected an int >= 0")
    refusal = distance_refusal(max_distance, distance)  # None: a number > 0 that a float holds
    if refusal is not None:
        raise refusal
    return int(per_kind), float(distance)


def _scalar(value: Any) -> Any:
    """A 0-d numpy array's scalar (``np.array(3)`` -> ``np.int64(3)``); anything else as is."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _body_id(model: Any, name: str) -> int:
    try:
        return int(model.body(name).id)
    except KeyError:
        return -1


def _split_goal_button(
    positions: list[Any], hits: set[int], task: Any
) -> tuple[list[Any], set[int], Any]:
    """Button tasks: the goal button is the goal, the others are obstacles (indices shift)."""
    found: Any = getattr(getattr(task, "buttons", None), "goal_button", None)
    goal = int(found) if _is_index(found) else -1
    if not 0 <= goal < len(positions):
        return positions, hits, None
    others = {i - (i > goal) for i in hits if i != goal}
    return positions[:goal] + positions[goal + 1 :], others, positions[goal]


# ----------------------------------------------------------------------------- helpers
def _ordered(objects: Mapping[str, ObjectGroup]) -> list[str]:
    known = [k for k in _KINDS if k in objects]
    # str: unknown kinds of different types (a str and an int) sort without a TypeError
    return known + sorted((k for k in objects if k not in _KINDS), key=str)


def _names(kind: Any) -> tuple[str, str]:
    if kind in _KINDS:
        return _KINDS[kind]
    return f"unknown object {kind!r}", f"unknown objects {kind!r}"


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _radius(value: Any) -> float:
    radius = _float(value)
    return radius if 0.0 <= radius < math.inf else odd_radius(radius)


def _is_index(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _indices(values: Any) -> Collection[int]:
    if type(values) in (set, frozenset, tuple, list) and not values:
        return ()
    try:
        return [int(i) for i in values if _is_index(i)]
    except TypeError:
        return []


def _pair(row: Any) -> tuple[float, float] | None:
    """A finite ``(x, y)`` from a row of 2 or more coordinates, else ``None``."""
    try:
        x, y = float(row[0]), float(row[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return (x, y) if math.isfinite(x) and math.isfinite(y) else None


def _point(value: Any) -> tuple[float, float] | None:
    if isinstance(value, np.ndarray):
        value = value.reshape(-1).tolist()
    return _pair(value) if value is not None else None


def _rows(value: Any) -> list[Any] | None:
    """The rows of ``(n, 2)``/``(n, 3)`` positions (a single row of numbers counts as one)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if type(value) is list and (not value or type(value[0]) is list):
        return value  # the common case, rows as lists (SafetyTaskCaptioner, ndarray.tolist())
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return None
    if value and _pair(value) is not None:  # one (x, y), not a list of rows
        return [value]
    return list(value)


def _where(edge: float, dx: float, dy: float, turn: tuple[float, float] | None) -> str:
    """``"<distance> <bearing>"`` (``turn``: cos, sin of the heading; ``None``: no bearing)."""
    if turn is None:
        return distance_word(edge)
    cos, sin = turn
    return f"{distance_word(edge)} {bearing_word(dx * cos + dy * sin, dy * cos - dx * sin)}"


def _where_object(
    xy: tuple[float, float],
    radius: Any,
    agent: tuple[float, float],
    turn: tuple[float, float] | None,
    *,
    solid: bool = False,
) -> str:
    """``"<distance> <bearing>"`` of an object; ``""`` when the agent is within an area's radius.

    A solid object (a button, the box) is ``"very close"`` however small the edge distance.
    """
    dx, dy = xy[0] - agent[0], xy[1] - agent[1]
    edge = math.hypot(dx, dy) - _radius(radius)
    return "" if edge <= 0.0 and not solid else _where(edge, dx, dy, turn)


def _count(n: int, singular: str, plural: str) -> str:
    if n == 1:
        return _article(singular)
    return f"{_NUMBERS[n] if n < len(_NUMBERS) else n} {plural}"


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _unknown_positions(n: int, singular: str, plural: str) -> str:
    if n == 1:
        return f"The position of {_article(singular)} is unknown."
    return f"The positions of {_count(n, singular, plural)} are unknown."


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
