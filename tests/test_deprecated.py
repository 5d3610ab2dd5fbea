"""The wrappers' old names (issue 22): each still imports, warns naming the new one, and works."""

from __future__ import annotations

import importlib
import pickle
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

import gymcurric  # registers the envs; its wrappers module is used below
from gymcurric._deprecated import RENAMED, current_name
from gymcurric.datapacks import DataPack, DataPackRLSampler
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import AnnotateCost, PresentDatapack, SampleCurriculumTask

ENV_ID = "gymcurric/HazardGrid-v0"

# (module, old name): every place an old name was importable from before the rename
ALIASES = [
    ("gymcurric", "CurriculumTask"),
    ("gymcurric", "DatapackTask"),
    ("gymcurric.wrappers", "CurriculumTask"),
    ("gymcurric.wrappers", "DatapackTask"),
    ("gymcurric.wrappers", "SauteBudget"),
    ("gymcurric.wrappers.curriculum", "CurriculumTask"),
    ("gymcurric.wrappers.datapack", "DatapackTask"),
    ("gymcurric.wrappers.saute", "SauteBudget"),
    ("gymcurric.wrappers.vector", "CurriculumTask"),
    ("gymcurric.wrappers.vector", "DatapackTask"),
    ("gymcurric.wrappers.vector", "SauteBudget"),
    ("gymcurric.wrappers.vector.curriculum", "CurriculumTask"),
    ("gymcurric.wrappers.vector.datapack", "DatapackTask"),
    ("gymcurric.wrappers.vector.saute", "SauteBudget"),
    ("gymcurric.integrations.sb3", "VecDatapackTask"),
    ("gymcurric.integrations.sb3", "VecSemanticShaping"),
    ("gymcurric.integrations.sb3.datapack", "VecDatapackTask"),
    ("gymcurric.integrations.sb3.semantic", "VecSemanticShaping"),
]


def curriculum() -> Curriculum:
    return Curriculum(FixedTaskSpace([{"size": 5, "num_hazards": n} for n in (0, 1)]), seed=0)


def sampler() -> DataPackRLSampler:
    packs = [
        DataPack(f"p{n}", "nav", ENV_ID, 0, task_params={"size": 5, "num_hazards": n}, seed=n)
        for n in range(2)
    ]
    return DataPackRLSampler(packs, seed=0)


def costly() -> gym.Env:
    return AnnotateCost(gym.make("CartPole-v1"), cost_fn=lambda o, a, i: 1.0)


def shaping_venv(cls: type) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from tests.semantics.stubs import STUB_CONFIG, StateEnv, caption_embedder

    return cls(DummyVecEnv([StateEnv]), caption_embedder(), STUB_CONFIG)


def datapack_venv(cls: type) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv

    return cls(DummyVecEnv([lambda: PresentDatapack(gym.make(ENV_ID), None)]), sampler())


def curriculum_vec(cls: type) -> Any:
    cur = curriculum()
    return cls(SyncVectorEnv([lambda: SampleCurriculumTask(gym.make(ENV_ID), cur)]), cur)


def datapack_vec(cls: type) -> Any:
    return cls(SyncVectorEnv([lambda: PresentDatapack(gym.make(ENV_ID), None)]), sampler())


# the renamed class (module.qualname) -> how to build one with the class it is handed
BUILD = {
    "gymcurric.wrappers.curriculum.SampleCurriculumTask": lambda cls: cls(
        gym.make(ENV_ID), curriculum()
    ),
    "gymcurric.wrappers.datapack.PresentDatapack": lambda cls: cls(gym.make(ENV_ID), sampler()),
    "gymcurric.wrappers.saute.AugmentStateSaute": lambda cls: cls(costly(), 2.0),
    "gymcurric.wrappers.vector.curriculum.SampleCurriculumTask": curriculum_vec,
    "gymcurric.wrappers.vector.datapack.PresentDatapack": datapack_vec,
    "gymcurric.wrappers.vector.saute.AugmentStateSaute": lambda cls: cls(
        SyncVectorEnv([costly]), 2.0, max_episode_steps=500
    ),
    "gymcurric.integrations.sb3.datapack.VecPresentDatapack": datapack_venv,
    "gymcurric.integrations.sb3.semantic.VecShapeRewardSemantic": shaping_venv,
}


def run_two_steps(env: Any) -> None:
    if isinstance(env, gym.Env | gym.vector.VectorEnv):
        env.reset(seed=0)
        env.step(env.action_space.sample())
        env.step(env.action_space.sample())
    else:  # an SB3 VecEnv
        env.reset()
        env.step(np.zeros(env.num_envs, np.int64))
        env.step(np.zeros(env.num_envs, np.int64))


@pytest.mark.parametrize(("module", "old"), ALIASES, ids=[f"{m}.{o}" for m, o in ALIASES])
def test_old_name_warns_naming_the_new_one_and_still_works(module, old):
    if ".sb3" in module:
        pytest.importorskip("stable_baselines3")
    mod = importlib.import_module(module)
    new = RENAMED[old]
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated.*{module}\.{new}"):
        alias = getattr(mod, old)
    assert alias is getattr(mod, new)  # the same class: isinstance and pickles keep working
    cls = getattr(mod, new)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # only the access warns, once
        env = BUILD[f"{cls.__module__}.{cls.__qualname__}"](alias)
    assert isinstance(env, cls)
    run_two_steps(env)
    env.close()


def test_a_from_import_of_an_old_name_warns_at_the_importing_line():
    with pytest.warns(DeprecationWarning, match="renamed gymcurric.wrappers.AugmentStateSaute"):
        from gymcurric.wrappers import SauteBudget  # noqa: F401
    with pytest.warns(DeprecationWarning) as record:
        gymcurric.wrappers.CurriculumTask  # noqa: B018
    assert record[0].filename == __file__  # stacklevel: the user's line, not gymcurric's


def test_old_names_stay_out_of_all_and_unknown_names_still_fail():
    for module, old in ALIASES:
        if ".sb3" not in module:
            assert old not in importlib.import_module(module).__all__
    with pytest.raises(AttributeError, match="NoSuchWrapper"):
        gymcurric.wrappers.NoSuchWrapper  # noqa: B018
    assert not hasattr(gymcurric.wrappers.vector, "NoSuchWrapper")


def test_a_pickle_written_before_the_rename_finds_the_class():
    # pickle looks a class up by module attribute: the old name resolves, with the warning
    with pytest.warns(DeprecationWarning):
        found = pickle.loads(b"cgymcurric.wrappers.saute\nSauteBudget\n.")
    from gymcurric.wrappers.saute import AugmentStateSaute

    assert found is AugmentStateSaute


def test_current_name_maps_old_names_and_keeps_others():
    assert current_name("CurriculumTask") == "SampleCurriculumTask"
    assert current_name("VecSemanticShaping") == "VecShapeRewardSemantic"
    assert current_name("VecCostMonitor") == "VecCostMonitor"
    assert set(RENAMED.values()).isdisjoint(RENAMED)  # no chains of renames


def test_the_lagrange_module_is_multipliers_under_its_old_name():
    pytest.importorskip("torch")
    from gymcurric.integrations.sb3.common import lagrange, multipliers

    for name in multipliers.__all__:
        with pytest.warns(
            DeprecationWarning, match=rf"lagrange\.{name} is deprecated.*multipliers"
        ):
            assert getattr(lagrange, name) is getattr(multipliers, name)
    with pytest.warns(DeprecationWarning, match="renamed gymcurric.integrations.sb3.common.multi"):
        from gymcurric.integrations.sb3.common.lagrange import LagrangeMultiplier
    lam = LagrangeMultiplier(init=0.0, lr=0.5, optimizer="sgd")
    lam.update(ep_cost=30.0, cost_limit=25.0)
    assert isinstance(lam, multipliers.LagrangeMultiplier) and lam.value > 0
    with pytest.warns(DeprecationWarning):  # private names too: old pickles name them
        assert lagrange._InputSaturation is multipliers._InputSaturation
    with pytest.raises(AttributeError):
        lagrange.NoSuchName  # noqa: B018
    assert not hasattr(lagrange, "__path__")
