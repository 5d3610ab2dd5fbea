"""Every exported wrapper records all its constructor arguments (STYLE.md convention 1).

One test over ``__all__`` of :mod:`gymcurric.wrappers`, :mod:`gymcurric.wrappers.vector` and
(when SB3 is installed) :mod:`gymcurric.integrations.sb3`, as Gymnasium tests its wrappers: each
class that subclasses ``gym.utils.RecordConstructorArgs`` is built on a small stub env with a
value for every parameter (non-default where a stub allows), and ``_saved_kwargs`` must hold
exactly the parameters of ``__init__`` (``env`` aside) with the values given. Objects are
recorded as they were given, never copied: a curriculum, a sampler or a model is shared, not
duplicated (a config dataclass may be recorded validated, as an equal copy).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector import SyncVectorEnv

import gymcurric  # noqa: F401 - registers the envs
from gymcurric.datapacks import DataPack, DataPackRLSampler
from gymcurric.semantics import ShapingConfig
from gymcurric.tasks import Curriculum
from tests.curriculum_stubs import TaskStubEnv, levels, make_wrapped
from tests.semantics.stubs import STUB_CONFIG, StateEnv, caption_embedder
from tests.stubs import ScriptedCostEnv

ENV_ID = "gymcurric/HazardGrid-v0"
MODULES = (
    "gymcurric.wrappers",
    "gymcurric.wrappers.vector",
    "gymcurric.replay",
    "gymcurric.integrations.sb3",
)


def exported_classes(module_name: str) -> list[tuple[str, type]]:
    """``(qualified export name, class)`` of every class in a module's ``__all__``."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # the sb3 (or torch) extra is not installed
        return []
    objects = ((name, getattr(module, name)) for name in module.__all__)
    return [(f"{module_name}.{name}", obj) for name, obj in objects if inspect.isclass(obj)]


RECORDING = [
    (name, cls)
    for module in MODULES
    for name, cls in exported_classes(module)
    if issubclass(cls, gym.utils.RecordConstructorArgs)
]


def sampler() -> DataPackRLSampler:
    packs = [
        DataPack(f"p{n}", "nav", ENV_ID, 0, task_params={"size": 5, "num_hazards": n}, seed=n)
        for n in range(2)
    ]
    return DataPackRLSampler(packs, seed=0)


def scripted_vec() -> SyncVectorEnv:
    return SyncVectorEnv([ScriptedCostEnv] * 2)


def cost_args() -> dict[str, Any]:
    return {
        "cost_fn": lambda obs, action, info: 1.0,
        "nonfinite": "raise",
        "nonfinite_value": 2.0,
        "queue_length": 7,
    }


def risk_args() -> dict[str, Any]:
    pytest.importorskip("torch")
    return {
        "features": "obs",
        "embedder": None,
        "gamma": 0.9,
        "horizon": 7,
        "truncation": "drop",
        "train_every": 5,
        "risk_lr": 1e-2,
        "risk_min_samples": 16,
        "risk_batch_size": 8,
        "risk_update_iters": 2,
        "buffer_size": 100,
        "hidden": (8,),
        "history": 50,
        "seed": 3,
        "device": "cpu",
    }


def saute_args() -> dict[str, Any]:
    return {
        "safety_budget": 2.0,
        "saute_gamma": 0.9,
        "max_episode_steps": 7,
        "unsafe_reward": -0.2,
        "nonfinite": "raise",
        "nonfinite_value": 1.0,
    }


def shaping_args(**extra: Any) -> dict[str, Any]:
    # batch_max as the vector wrapper's own argument sets it, so the config it records is equal
    config = ShapingConfig.coerce(STUB_CONFIG, batch_max=5)
    args = {"embedder": caption_embedder(), "config": config, "kind": "caption"}
    return {**args, "device": "cpu", "dtype": "float32", **extra}


def datapack_args() -> dict[str, Any]:
    return {"sampler": sampler(), "success_fn": lambda info: True, "mpl_fn": lambda info: 1.0}


def curriculum_args() -> dict[str, Any]:
    return {
        "curriculum": Curriculum(levels(2), seed=0),
        "success_fn": lambda info: True,
        "factory": lambda task: TaskStubEnv(),
        "cache_size": 2,
        "max_retries": 3,
        "reseed_curriculum": False,
        "channel": None,  # a TaskChannel needs shared memory and an async vector env
    }


def vector_curriculum() -> tuple[Any, dict[str, Any]]:
    cur = Curriculum(levels(2), seed=0)
    env = SyncVectorEnv([partial(make_wrapped, cur)] * 2)
    return env, {"curriculum": cur, "channel": None, "reseed_curriculum": False, "overlap": True}


def vector_datapack() -> tuple[Any, dict[str, Any]]:
    from gymcurric.wrappers.datapack import PresentDatapack

    return SyncVectorEnv([lambda: PresentDatapack(gym.make(ENV_ID), None)] * 2), datapack_args()


def ring_recorder() -> tuple[Any, dict[str, Any]]:
    from gymcurric.replay import ReplayRing

    env = scripted_vec()
    ring = ReplayRing.from_spaces(8, 2, env.single_observation_space, env.single_action_space)
    return env, {"ring": ring, "extra_fn": lambda prev_obs, actions, infos: {}}


#: the exported name -> ``() -> (env to wrap, every constructor argument but env)``
CASES: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {
    "gymcurric.wrappers.AnnotateCost": lambda: (ScriptedCostEnv(), cost_args()),
    "gymcurric.wrappers.EmitCostTuple": lambda: (ScriptedCostEnv(), {}),
    "gymcurric.wrappers.RecordEpisodeStatisticsWithCost": lambda: (
        ScriptedCostEnv(),
        {"buffer_length": 7, "stats_key": "ep"},
    ),
    "gymcurric.wrappers.SampleCurriculumTask": lambda: (TaskStubEnv(), curriculum_args()),
    "gymcurric.wrappers.PresentDatapack": lambda: (gym.make(ENV_ID), datapack_args()),
    "gymcurric.wrappers.AnnotateRisk": lambda: (ScriptedCostEnv(), risk_args()),
    "gymcurric.wrappers.AugmentStateSaute": lambda: (ScriptedCostEnv(), saute_args()),
    "gymcurric.wrappers.ShapeRewardSemantic": lambda: (StateEnv(), shaping_args()),
    "gymcurric.wrappers.vector.AnnotateCost": lambda: (scripted_vec(), cost_args()),
    "gymcurric.wrappers.vector.AnnotateRisk": lambda: (scripted_vec(), risk_args()),
    "gymcurric.wrappers.vector.AugmentStateSaute": lambda: (scripted_vec(), saute_args()),
    "gymcurric.wrappers.vector.PresentDatapack": vector_datapack,
    "gymcurric.wrappers.vector.RecordEpisodeStatisticsWithCost": lambda: (
        scripted_vec(),
        {"buffer_length": 7, "stats_key": "ep"},
    ),
    "gymcurric.wrappers.vector.SampleCurriculumTask": vector_curriculum,
    "gymcurric.replay.RecordToRing": ring_recorder,
    "gymcurric.wrappers.vector.ShapeRewardSemantic": lambda: (
        SyncVectorEnv([StateEnv] * 2),
        shaping_args(batch_max=5),
    ),
}


def constructor_params(cls: type) -> list[str]:
    """The parameters of ``cls.__init__`` but ``self`` and the wrapped env (the first one)."""
    return list(inspect.signature(cls.__init__).parameters)[2:]


@pytest.mark.parametrize(("name", "cls"), RECORDING, ids=[name for name, _ in RECORDING])
def test_every_wrapper_records_all_its_constructor_arguments(name, cls):
    assert name in CASES, f"add a case for {name} (every argument, non-default values) to CASES"
    env, kwargs = CASES[name]()
    params = constructor_params(cls)
    assert sorted(kwargs) == sorted(params), f"the case for {name} must pass every argument"
    wrapper = cls(env, **kwargs)
    try:
        assert sorted(wrapper._saved_kwargs) == sorted(params)
        for key, value in kwargs.items():
            saved = wrapper._saved_kwargs[key]
            # a config dataclass may be recorded validated (an equal copy); anything else, a
            # shared object above all, exactly as given
            same = saved == value if dataclasses.is_dataclass(value) else saved is value
            assert same, f"{name} records {key!r} as given"
    finally:
        wrapper.close()


def test_every_exported_wrapper_records_its_arguments():
    # convention 1: a Gymnasium wrapper, single or vector, subclasses RecordConstructorArgs
    # (SB3's VecEnvWrappers have no such protocol and are checked only if they opt in)
    kinds = (gym.Wrapper, gym.vector.VectorWrapper)
    wrappers = [
        name
        for module in ("gymcurric.wrappers", "gymcurric.wrappers.vector")
        for name, cls in exported_classes(module)
        if issubclass(cls, kinds)
    ]
    recording = {name for name, _ in RECORDING}
    assert wrappers and not [name for name in wrappers if name not in recording]
    assert sorted(CASES) == sorted(recording)  # no case left for a class no longer exported
