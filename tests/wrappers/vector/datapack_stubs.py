"""HazardGrid datapacks, a spy sampler and sampler-holding wrappers for the datapack env tests.

Shared by ``test_datapack.py``, ``test_sub_env_names.py`` and their Stable-Baselines3
counterparts in ``tests/integrations``; the env factories are importable in worker processes.
"""

import threading

import gymnasium as gym

import gymcurric  # noqa: F401  (registers the env ids)
from gymcurric.datapacks import DataPack
from gymcurric.wrappers.datapack import PresentDatapack as SinglePresentDatapack
from tests.datapacks.packs import record

ENV_ID = "gymcurric/HazardGrid-v0"


def packs(n: int = 8) -> list[DataPack]:
    """HazardGrid datapacks with distinct sizes, hazards and short, different time limits."""
    return [
        DataPack.from_dict(
            record(
                f"p{i}",
                env_id=ENV_ID,
                tier=i % 3,
                task_params={
                    "size": 4 + i % 3,
                    "goal_distance": 1 + i % 2,  # random actions sometimes reach it
                    "num_hazards": i % 4,
                    "max_steps": 3 + i % 4,
                },
                seed=50 + i,
                enrichment={"affordances": [{"name": "reach"}]},
                supervision_hints={"safety_critical": False},
            )
        )
        for i in range(n)
    ]


class Events:
    """Spy curriculum + stub sampler sharing one event list (draws and reports, in order)."""

    def __init__(self, records):
        self.records, self.i, self.events = records, 0, []
        self.curriculum = self

    def sample_batch(self, n):
        out = [self.records[(self.i + k) % len(self.records)] for k in range(n)]
        self.i += n
        self.events.append(("draw", [p.pack_id for p in out]))
        return out

    def update_diagnostics(self, **kwargs):
        self.events.append(("report", kwargs))

    def get_diagnostics(self):
        return {"draws": self.i}

    def reports(self):
        return [e[1] for e in self.events if e[0] == "report"]


class WithSampler(gym.Wrapper):
    """A user wrapper with a ``sampler`` attribute of its own (unrelated to datapacks)."""

    def __init__(self, env, sampler):
        super().__init__(env)
        self.sampler = sampler


class LockedSampler(Events):
    """A sampler that cannot be pickled (built in the worker, it can never leave it)."""

    def __init__(self, records):
        super().__init__(records)
        self.lock = threading.Lock()


def user_sampler_above(env):
    """``env`` under PresentDatapack (no sampler), under a user wrapper holding a sampler."""
    return WithSampler(SinglePresentDatapack(env, None), LockedSampler(packs()))


def own_sampler_below_none(env):
    """``env`` under PresentDatapack with its own sampler, under a user wrapper with none."""
    return WithSampler(SinglePresentDatapack(env, LockedSampler(packs())), None)


class SuccessUnreported(gym.Wrapper):
    """Each step's ``is_success`` is None (SB3's "not reported") and ``success`` is ``success``.

    With ``success=None`` the info has no ``success`` key: no success is reported at all. The
    reset info's ``is_success`` is None too: a vector env types each info array by the first
    sub-env holding the key, so a reset's ``False`` beside an ending sub-env's ``None`` in one
    ``NEXT_STEP`` step would turn that ``None`` into ``False`` before any wrapper sees it.
    """

    def __init__(self, env, success=True):
        super().__init__(env)
        self.success = success

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "is_success": None}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = {**info, "is_success": None}
        if self.success is not None:
            info["success"] = self.success
        return obs, reward, terminated, truncated, info


def success_unreported(env, success=True):
    """``env`` under PresentDatapack (no sampler), under :class:`SuccessUnreported`."""
    return SuccessUnreported(SinglePresentDatapack(env, None), success)
