"""An int too large for a float (``10**400``) as a float env parameter or task value is a
ConfigError (TaskError for a task) naming the key and the value cut short, not a raw
``OverflowError``."""

import pytest

from gymcurric.envs.grid import HazardGridEnv
from gymcurric.envs.hazard_nav import HazardNavEnv
from gymcurric.errors import ConfigError, TaskError

BIG = 10**400


@pytest.mark.parametrize("name", ["lidar_range", "inertia", "reward_distance", "reward_goal"])
def test_hazard_nav_constructor(name):
    with pytest.raises(ConfigError, match=rf"'{name}'.*\(401 characters\).*fit a float"):
        HazardNavEnv(**{name: BIG})


@pytest.mark.parametrize("name", ["reward_distance", "reward_goal"])
def test_hazard_grid_constructor(name):
    with pytest.raises(ConfigError, match=rf"'{name}'.*\(401 characters\).*fit a float"):
        HazardGridEnv(**{name: BIG})


def test_a_task_value():
    env = HazardNavEnv()
    with pytest.raises(TaskError, match=r"'hazard_radius'.*\(401 characters\).*fit a float"):
        env.reset(options={"task": {"hazard_radius": BIG}})
    with pytest.raises(TaskError, match=r"'num_hazards'.*\(401 characters\).*must be in"):
        env.reset(options={"task": {"num_hazards": BIG}})


def test_a_caption_max_distance():
    from gymcurric.envs.safety_captions import SafetyTaskCaptioner, Scene, caption_scene

    goal = Scene(task="goal", agent_xy=(0.0, 0.0), heading=0.0, goal_xy=(0.0, 5.0))
    for build in (
        lambda: caption_scene(goal, max_distance=BIG),
        lambda: SafetyTaskCaptioner("goal", max_distance=BIG),
    ):
        with pytest.raises(ConfigError, match=r"'max_distance'.*\(401 characters\).*fit a float"):
            build()
    assert caption_scene(goal, max_distance=float("inf"))  # inf: every object, as before
