"""Stub envs and embedders for the semantic wrapper tests (importable by spawned workers).

:class:`StateEnv` walks through states ``v = (offset + t) % 5``; state ``v`` has the caption
``"state v"`` and an 8x8 frame filled with ``v``. The stub embedders map both to the unit vector
at angle ``v·π/8``, and the prompts ``"safe"``/``"unsafe"`` to the axes, so the raw margin of
state ``v`` is ``cos(vπ/8) - sin(vπ/8)`` (see :func:`margin`).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from gymcurric.semantics import CallableEmbedder


def margin(v: int) -> float:
    a = v * math.pi / 8
    return math.cos(a) - math.sin(a)


def _vec(v: float) -> list[float]:
    a = v * math.pi / 8
    return [math.cos(a), math.sin(a)]


def embed_texts(texts: list[str]) -> np.ndarray:
    rows = []
    for t in texts:
        if t.startswith("state "):
            rows.append(_vec(int(t.split()[1])))
        else:
            rows.append([0.0, 1.0] if "unsafe" in t else [1.0, 0.0])
    return np.array(rows)


def embed_frames(frames: Any) -> np.ndarray:
    return np.array([_vec(float(np.asarray(f)[0, 0, 0])) for f in frames])


def caption_embedder() -> CallableEmbedder:
    return CallableEmbedder(texts=embed_texts, modality="text")


def frame_embedder(images=embed_frames) -> CallableEmbedder:
    return CallableEmbedder(images=images, texts=embed_texts, modality="image")


STUB_CONFIG = dict(
    safe_prompts=["safe"],
    unsafe_prompts=["unsafe"],
    margin_norm_enable=False,
    beta_start=1.0,
    beta_end_fraction=1.0,
    total_steps=10**12,
)


class StateEnv(gym.Env[np.ndarray, int]):
    """Deterministic states with captions and frames; reward = step index; cost-free."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        episode_len: int = 4,
        offset: int = 0,
        truncate: bool = False,
        render_mode: str | None = "rgb_array",
        captions: bool = True,
        describe: bool = False,
    ) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.episode_len, self.offset, self.truncate = episode_len, offset, truncate
        self.render_mode = render_mode
        self.captions = captions
        if describe:
            self.describe = self._describe
        self.t = 0

    @property
    def v(self) -> int:
        return (self.offset + self.t) % 5

    def _describe(self) -> str:
        return f"state {self.v}"

    def _info(self) -> dict[str, Any]:
        return {"caption": f"state {self.v}"} if self.captions else {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.v], np.float32), self._info()

    def step(self, action: int):
        self.t += 1
        done = self.t >= self.episode_len
        terminated, truncated = (False, done) if self.truncate else (done, False)
        return np.array([self.v], np.float32), float(self.t), terminated, truncated, self._info()

    def render(self) -> np.ndarray:
        return np.full((8, 8, 3), self.v, dtype=np.uint8)
