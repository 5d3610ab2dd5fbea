"""Thread-CPU probes around a sub-env, for ``curriculum_worker_cost.py`` (importable by workers).

``make_probed`` builds ``gym.make(env_id)`` with :class:`Inner` directly around the bare env and
:class:`Outer` outside everything (the curriculum wrapper, when given, sits between them). Each
probe adds the thread CPU time (``time.thread_time_ns``) of the calls it wraps; ``Outer.close``
writes the sums to ``<out_dir>/<tag>_<pid>.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

_T = time.thread_time_ns


class Inner(gym.Wrapper):
    """Directly around the bare env: its own reset and step time."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.acc = {"inner_reset": 0, "inner_step": 0, "n_reset": 0, "n_step": 0}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        t = _T()
        out = self.env.reset(seed=seed, options=options)
        self.acc["inner_reset"] += _T() - t
        self.acc["n_reset"] += 1
        return out

    def step(self, action: Any) -> Any:
        t = _T()
        out = self.env.step(action)
        self.acc["inner_step"] += _T() - t
        self.acc["n_step"] += 1
        return out


class Outer(gym.Wrapper):
    """Outermost: the whole stack's reset and step time."""

    def __init__(self, env: gym.Env, out: str) -> None:
        super().__init__(env)
        self.out = out
        self.acc = {"outer_reset": 0, "outer_step": 0}

    def reset(self, **kwargs: Any) -> Any:
        t = _T()
        out = self.env.reset(**kwargs)
        self.acc["outer_reset"] += _T() - t
        return out

    def step(self, action: Any) -> Any:
        t = _T()
        out = self.env.step(action)
        self.acc["outer_step"] += _T() - t
        return out

    def close(self) -> None:
        inner: Any = self.env
        while not isinstance(inner, Inner):
            inner = inner.env
        Path(f"{self.out}_{os.getpid()}.json").write_text(json.dumps({**self.acc, **inner.acc}))
        super().close()


def make_probed(out: str, curriculum: Any = None, channel: Any = None) -> gym.Env:
    """The trivial benchmark env with probes; wrapped in ``SampleCurriculumTask`` if a curriculum is
    given (bound to ``channel`` when that is given too)."""
    import _trivial_env as trivial

    from gymcurric.wrappers import SampleCurriculumTask

    env = gym.make(trivial.register())
    e: Any = env
    while isinstance(e.env, gym.Wrapper):
        e = e.env
    e.env = Inner(e.env)
    if curriculum is not None:
        env = SampleCurriculumTask(env, curriculum, channel=channel)
    return Outer(env, out)
