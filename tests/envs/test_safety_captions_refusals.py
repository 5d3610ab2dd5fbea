"""caption_scene refuses a scene that is not a Scene and a negative radius (ConfigError).

A radius is an object's size in metres (the half-side for boxes), subtracted from the centre
distance to give the edge distance: a negative one was used as given (objects described
farther than their centres, never entered). A NaN radius still counts as 0.
"""

from __future__ import annotations

from typing import Any

import pytest

from gymcurric.envs.safety_captions import ObjectGroup, Scene, caption_scene
from gymcurric.errors import ConfigError


def scene(**kwargs: Any) -> Scene:
    base: dict[str, Any] = {"task": "goal", "agent_xy": (0.0, 0.0), "heading": 0.0}
    base["goal_xy"] = (0.0, 5.0)
    return Scene(**{**base, **kwargs})


@pytest.mark.parametrize("bad", [scene()._asdict(), None, "goal", (0.0, 0.0)])
def test_a_scene_that_is_not_a_scene_is_refused(bad):
    with pytest.raises(ConfigError, match="expected a Scene") as info:
        caption_scene(bad)
    assert info.value.key == "scene" and info.value.value is bad


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"goal_radius": -0.3}, "scene.goal_radius"),
        (
            {"objects": {"hazards": ObjectGroup([[0.5, 0.0]], -0.2)}},
            "scene.objects['hazards'].radius",
        ),
        ({"task": "push", "box_xy": (1.0, 0.0), "box_radius": -0.1}, "scene.box_radius"),
    ],
)
def test_a_negative_radius_is_refused(kwargs, field):
    with pytest.raises(ConfigError, match="radius >= 0") as info:
        caption_scene(scene(**kwargs))
    assert info.value.key == field and info.value.value < 0


def test_zero_and_nan_radii_are_still_taken():
    hazard = {"hazards": ObjectGroup([[0.1, 0.0]], 0.0)}
    assert (
        caption_scene(scene(objects=hazard))
        == "A hazard is very close ahead. The goal is far left."
    )
    nan = {"hazards": ObjectGroup([[0.1, 0.0]], float("nan"))}
    assert caption_scene(scene(objects=nan, goal_radius=float("nan"))) == caption_scene(
        scene(objects=hazard)
    )
