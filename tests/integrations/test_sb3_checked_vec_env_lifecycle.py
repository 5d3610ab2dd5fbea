"""CheckedSubprocVecEnv from start to close: a hang while building, an interrupted wait, fds.

An env that hung in its constructor blocked the vector env's construction for ever (a worker's
first answer had no time limit). Every call that could hang runs in a thread with a time limit,
so a regression fails, not hangs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from gymcurric.errors import ConfigError, SubEnvError
from gymcurric.integrations.sb3 import CheckedSubprocVecEnv
from gymcurric.integrations.sb3.checked_vec_env import CLOSE_GRACE_S
from tests.faulty_envs import HANG_S
from tests.integrations.checked_vec_env_support import ended, grid_factories, within, worker_pids

# ------------------------------------------------------------ an env that hangs while built


def _build_hang(tmp_path: Any, start_method: str, build_s: list[float], limit: float) -> Any:
    """The SubEnvError of a CheckedSubprocVecEnv whose sub-envs take ``build_s`` s to build."""
    fns = grid_factories(tmp_path, build_s)
    with pytest.raises(SubEnvError) as caught:
        within(lambda: CheckedSubprocVecEnv(fns, start_method, build_timeout=limit))
    pids = worker_pids(tmp_path)
    assert len(pids) == len(build_s) and ended(pids)  # terminated and reaped: no zombie
    return caught.value


def test_an_env_that_hangs_while_built_is_named_and_every_worker_ends(tmp_path):
    # sub-env 1 sleeps HANG_S in its constructor; sub-env 0 is built: it is closed as usual
    err = _build_hang(tmp_path, "fork", [0.0, HANG_S], 5.0)
    assert str(err) == (
        "sub-env 1: building the env: no reply within 5 s (the worker is alive: hung while "
        "building its env?); the vector env cannot go on"
    )
    assert (err.index, err.command, err.error_type, err.timeout) == (
        1,
        "building the env",
        None,
        5.0,
    )


@pytest.mark.parametrize("start_method", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_workers_still_building_are_terminated_at_once(tmp_path, start_method):
    # both hang: sub-env 1, still building when sub-env 0's limit ends, is not given the
    # CLOSE_GRACE_S that a worker reading commands gets
    limit = 1.0 if start_method == "fork" else 10.0
    err = within(
        lambda: _build_hang(tmp_path, start_method, [HANG_S, HANG_S], limit),
        limit + CLOSE_GRACE_S - 1,
    )
    assert (err.index, err.command, err.timeout) == (0, "building the env", limit)
    assert "hung while building its env?" in str(err)


def test_with_a_build_timeout_healthy_workers_answer_as_without(tmp_path):
    def run(**kwargs: Any) -> list[Any]:
        env = within(
            lambda: CheckedSubprocVecEnv(grid_factories(tmp_path, [0.0, 0.0]), "fork", **kwargs)
        )
        try:
            env.seed(3)
            out = [env.reset()]
            for _ in range(45):  # an episode's end (max_steps 40)
                out += env.step(np.ones(2, dtype=np.int64))[:3]
            return out
        finally:
            within(env.close)

    plain, limited = run(), run(build_timeout=60.0, timeout=30.0)
    assert len(plain) == len(limited)
    assert all(np.array_equal(a, b) for a, b in zip(plain, limited, strict=True))


def test_an_env_that_cannot_be_built_is_named_at_construction_with_a_build_timeout(tmp_path):
    # without one, sub-env 1's error came at the first reset (only sub-env 0 is asked at first)
    fns = grid_factories(tmp_path, [0.0, 0.0])
    fns[1].keywords["num_hazards"] = 1000
    with pytest.raises(ConfigError, match="num_hazards") as caught:
        within(lambda: CheckedSubprocVecEnv(fns, "fork", build_timeout=60.0))
    assert caught.value.__notes__[-1].startswith("sub-env 1: building the env raised this")
    assert ended(worker_pids(tmp_path))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), True, "5"])
def test_a_bad_build_timeout_is_a_config_error_naming_it_before_any_worker_starts(bad):
    with pytest.raises(ConfigError) as caught:
        CheckedSubprocVecEnv([], start_method="fork", build_timeout=bad)
    assert caught.value.key == "build_timeout" and caught.value.value is bad
    expected = f"CheckedSubprocVecEnv: invalid value for 'build_timeout': {bad!r} (expected"
    assert str(caught.value).startswith(expected), caught.value
