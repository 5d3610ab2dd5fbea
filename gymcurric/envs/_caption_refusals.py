"""What :func:`~gymcurric.envs.safety_captions.caption_scene` refuses, named: error paths only.

A caption describes odd positions and kinds as unknown, but two inputs are refused with a
:class:`~gymcurric.errors.ConfigError`: a ``scene`` that is not a ``Scene`` (a dict of its
fields, say: its attributes cannot be read), and a negative radius. A radius is an object's
size in metres (the half-side for the boxes of vases, gremlins and the push box), subtracted
from centre distances to give edge distances; a negative one would put every edge farther than
the centre and never inside. A NaN or infinite radius is taken as 0 (a point), as before.
The refusal of a ``max_distance`` that is no number > 0 a float holds is worded here too
(:func:`distance_refusal`).

Of this module only :func:`distance_refusal` runs while a valid scene is captioned (it checks
``max_distance`` at every ``caption_scene`` call: 2 more of the some 120 calls a caption
makes, by cProfile's count); the other checks in ``safety_captions`` are one comparison
already on the path (``0 <= radius < inf`` in place of ``isfinite``) and a ``try``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gymcurric._checks import finite_reason, is_real, shown
from gymcurric.errors import ConfigError

__all__ = ["RADIUS_REASON", "distance_refusal", "odd_radius", "scene_refusal"]

RADIUS_REASON = (
    "expected a radius >= 0 (m: the object's size, the half-side for vases, gremlins and the "
    "push box)"
)


def odd_radius(radius: float) -> float:
    """A radius outside ``[0, inf)``: 0.0 when NaN or infinite; ConfigError when negative."""
    if math.isfinite(radius):
        raise ConfigError("radius", radius, RADIUS_REASON)
    return 0.0


def _negative_radius_field(scene: Any) -> str:
    """Which field of ``scene`` holds the negative radius (``"radius"`` if none is found)."""
    fields = {"goal_radius": scene.goal_radius, "box_radius": scene.box_radius}
    objects = scene.objects if isinstance(scene.objects, Mapping) else {}
    for kind, group in objects.items():
        fields[f"objects[{kind!r}].radius"] = getattr(group, "radius", 0.0)
    for name, value in fields.items():
        try:
            if float(value) < 0.0:
                return f"scene.{name}"
        except (TypeError, ValueError):
            continue
    return "radius"


def scene_refusal(scene: Any, exc: BaseException, scene_type: type) -> ConfigError | None:
    """The ConfigError to raise for ``exc`` from captioning ``scene``; None: re-raise ``exc``.

    An AttributeError from a ``scene`` that is not a ``scene_type`` names ``scene``; the
    ConfigError of a negative radius names the scene's field that holds it.
    """
    if isinstance(exc, AttributeError) and not isinstance(scene, scene_type):
        got = type(scene).__name__
        return ConfigError("scene", scene, f"expected a {scene_type.__name__}, got a {got}")
    if isinstance(exc, ConfigError) and exc.key == "radius":
        return ConfigError(_negative_radius_field(scene), exc.value, exc.reason)
    return None


def distance_refusal(value: Any, distance: Any) -> ConfigError | None:
    """The error for a ``max_distance`` that is no number > 0 a float holds, or None.

    ``distance`` is ``value`` with a 0-d array's scalar taken out. inf is a distance (every
    object listed); an int too large for a float (``10**400``) is not: ``float()`` raises
    ``OverflowError`` on it.
    """
    if is_real(distance) and distance > 0:
        return None
    reason = finite_reason(distance, "expected a number > 0 (m)")
    return ConfigError("max_distance", shown(value), reason)
