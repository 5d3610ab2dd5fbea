"""Frame and caption helpers shared by the built-in envs: palette, pixel grids, caption table.

Frames are drawn with numpy only. Everything that does not move within an episode (arena,
hazards, goal) is drawn once per reset into a background frame; a render copies it and paints
the agent inside its bounding box, so a frame costs a few microseconds.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

# Clearly different colours, so that a frame embedder (and a person) can tell the parts apart.
BACKGROUND = np.array([235, 235, 235], dtype=np.uint8)
HAZARD = np.array([210, 50, 50], dtype=np.uint8)
GOAL = np.array([50, 175, 80], dtype=np.uint8)
AGENT = np.array([40, 70, 220], dtype=np.uint8)
AGENT_IN_HAZARD = np.array([255, 215, 0], dtype=np.uint8)

# Caption = one hazard/path clause + one goal clause, or the success sentence alone.
# Index order is the priority order: the first clause that applies is used.
INSIDE, CLOSE_AHEAD, CLOSE_BY, BLOCKED, CLEAR = range(5)
HAZARD_CLAUSES = (
    "The agent is inside a hazard.",
    "A hazard is close ahead.",
    "A hazard is close by.",
    "A hazard blocks the path to the goal.",
    "The path to the goal is clear.",
)
GOAL_NEAR, GOAL_FAR = range(2)
GOAL_CLAUSES = ("The goal is close ahead.", "The goal is far away.")
SUCCESS_CAPTION = "The agent reached the goal."
CAPTIONS: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"{h} {g}" for g in GOAL_CLAUSES) for h in HAZARD_CLAUSES
)


class PixelGrid:
    """World coordinates of the pixel centres of a square top-down view of ``[-half, half]²``.

    Row 0 is the top of the image (largest y), column 0 the left (smallest x).

    Args:
        size: pixels per side.
        half: half the side of the viewed square, in world units.
    """

    def __init__(self, size: int, half: float) -> None:
        self.size = size
        self.half = half
        self.pixel = 2.0 * half / size
        centres = np.asarray(-half + (np.arange(size) + 0.5) * self.pixel, dtype=np.float64)
        self.xs: NDArray[np.float64] = centres
        self.ys: NDArray[np.float64] = np.ascontiguousarray(centres[::-1])

    def discs(self, centres: NDArray[np.float64], radius: float) -> NDArray[np.bool_]:
        """Mask of the pixels whose centre lies inside any disc of ``radius`` at ``centres``."""
        if len(centres) == 0:
            return np.zeros((self.size, self.size), dtype=bool)
        dx2 = (self.xs[None, None, :] - centres[:, 0, None, None]) ** 2
        dy2 = (self.ys[None, :, None] - centres[:, 1, None, None]) ** 2
        return np.asarray((dx2 + dy2 <= radius * radius).any(axis=0))

    def paint_disc(
        self, frame: NDArray[np.uint8], x: float, y: float, radius: float, colour: NDArray[np.uint8]
    ) -> None:
        """Paint a disc into ``frame`` in place, touching only the disc's bounding box."""
        last = self.size - 1
        inv = 1.0 / self.pixel
        j0 = max(0, math.ceil((x - radius + self.half) * inv - 0.5))
        j1 = min(last, math.floor((x + radius + self.half) * inv - 0.5))
        i0 = max(0, math.ceil((self.half - y - radius) * inv - 0.5))
        i1 = min(last, math.floor((self.half - y + radius) * inv - 0.5))
        if j0 > j1 or i0 > i1:
            return
        dx2 = (self.xs[j0 : j1 + 1] - x) ** 2
        dy2 = (self.ys[i0 : i1 + 1] - y) ** 2
        mask = dy2[:, None] + dx2[None, :] <= radius * radius
        frame[i0 : i1 + 1, j0 : j1 + 1][mask] = colour


def cell_edges(cells: int, pixels: int) -> NDArray[np.int64]:
    """Pixel boundaries (``cells + 1`` of them) of ``cells`` near-equal bands over ``pixels``."""
    return (np.arange(cells + 1) * pixels) // cells
