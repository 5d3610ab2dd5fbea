"""caption_scene never raises (issue 26): scenes that used to raise TypeError / AttributeError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gymcurric.envs.safety_captions import ObjectGroup, SafetyTaskCaptioner, Scene, caption_scene
from gymcurric.errors import ConfigError


def scene(**kwargs: Any) -> Scene:
    base: dict[str, Any] = {"task": "goal", "agent_xy": (0.0, 0.0), "heading": 0.0}
    base.setdefault("goal_xy", (0.0, 5.0))
    return Scene(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # unknown kinds of different types: sorting them raised TypeError
        ({"objects": {"apples": ObjectGroup([[0.3, 0.0]]), 5: ObjectGroup([[0.0, 0.2]])}},
         "An unknown object 5 is very close left. An unknown object 'apples' is close ahead."),
        # no obstacle table at all
        ({"objects": None}, "The goal is far left."),
        ({"objects": "hazards"}, "The obstacles are unknown. The goal is far left."),
        # a group that is not an ObjectGroup: its positions, or unknown
        ({"objects": {"vases": [[0.3, 0.0]]}}, "A vase is close ahead."),
        ({"objects": {"vases": None}}, "The positions of vases are unknown."),
        # an unhashable task name: said as the goal task's event
        ({"task": ["goal"], "goal_met": True}, "The agent reached the goal."),
    ],
)  # fmt: skip
def test_odd_scenes_are_described_and_never_raise(kwargs: dict[str, Any], expected: str) -> None:
    text = caption_scene(scene(**kwargs))
    assert expected in text, text


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_distance": float("nan")}, "max_distance"),
        ({"max_distance": 0.0}, "max_distance"),
        ({"max_distance": -1.0}, "max_distance"),
        ({"max_distance": "1"}, "max_distance"),
        ({"max_distance": True}, "max_distance"),  # a bool was taken as 1 m
        ({"max_per_kind": -1}, "max_per_kind"),
        ({"max_per_kind": 1.5}, "max_per_kind"),
        ({"max_per_kind": True}, "max_per_kind"),
    ],
)
def test_bad_limits_are_a_config_error_as_in_the_captioner(kwargs: dict[str, Any], key: str):
    # max_distance=nan said "No obstacle is near." with a hazard right at the agent
    near = scene(objects={"hazards": ObjectGroup([[0.1, 0.0]], 0.2)})
    with pytest.raises(ConfigError) as caught:
        caption_scene(near, **kwargs)
    assert caught.value.key == key and caught.value.value is next(iter(kwargs.values()))
    assert key in str(caught.value) and repr(caught.value.value) in str(caught.value)
    with pytest.raises(ConfigError) as same:  # the captioner's own check, word for word
        SafetyTaskCaptioner("goal", **kwargs)
    assert str(same.value) == str(caught.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_per_kind": np.int64(1)},
        {"max_per_kind": np.uint8(0)},
        {"max_distance": np.float32(2.5)},
        {"max_distance": np.int32(3)},
        {"max_per_kind": np.array(2)},  # 0-d arrays, as np.load(...)["max_distance"] gives
        {"max_distance": np.array(1.5)},
    ],
)
def test_numpy_scalar_limits_are_accepted_like_python_numbers(kwargs: dict[str, Any]) -> None:
    # a limit read from a numpy array or a config loaded with numpy was refused
    plain = {key: value.item() for key, value in kwargs.items()}
    near = scene(objects={"hazards": ObjectGroup([[0.3, 0.0], [0.0, 0.4]], 0.2)})
    assert caption_scene(near, **kwargs) == caption_scene(near, **plain)
    captioner = SafetyTaskCaptioner(GoalLevel0(), **kwargs)
    assert type(captioner.max_per_kind) is int and type(captioner.max_distance) is float


class GoalLevel0:
    """Named as safety-gymnasium's base class, which is all the captioner's kind check reads."""


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_per_kind": np.True_},
        {"max_distance": np.True_},
        {"max_distance": np.array(True)},
        {"max_distance": np.array([1.5])},  # 1-d: not a number
        {"max_per_kind": np.array(1.5)},
    ],
)
def test_numpy_bools_and_non_scalars_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        caption_scene(scene(), **kwargs)
    assert caught.value.key == next(iter(kwargs))
    assert caught.value.value is next(iter(kwargs.values()))  # the value as received


def test_a_float32_max_distance_is_compared_as_its_python_float() -> None:
    # numpy 2 compares a Python float with np.float32 in float32 (NEP 50): an edge just past
    # float(np.float32(0.1)) - 1.5e-9 rounds to that float32 and was not "< max_distance" in
    # caption_scene, while SafetyTaskCaptioner (which stores float(max_distance)) listed it
    limit = np.float32(0.1)
    edge = float(limit) - 1.5e-9  # below the limit as a float64, equal to it as a float32
    near = scene(objects={"hazards": ObjectGroup([[0.2 + edge, 0.0]], 0.2)})
    as_float = caption_scene(near, max_distance=float(limit))
    assert "A hazard is" in as_float
    assert caption_scene(near, max_distance=limit) == as_float
