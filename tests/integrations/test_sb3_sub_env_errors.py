"""A sub-env method gymcurric calls that raises ends no worker of an SB3 ``SubprocVecEnv``.

The ``SubprocVecEnv`` worker exits on an exception in an ``env_method``: before
``call_sub_envs``, a user's ``describe()`` that raised once (``VecShapeRewardSemantic``) or a
``flush_curriculum()`` that raised (a checkpoint) left the env broken (``EOFError`` at the next
call). Now the error names the sub-env, the method and the original error, and the env goes on.
So does a value a sub-env's method returns that its worker's pipe cannot pickle (the worker
exited on it too), or that the main process cannot load.
"""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

from gymcurric.errors import SubEnvCallError
from gymcurric.integrations.sb3 import save_curriculum_state
from gymcurric.integrations.sb3.semantic import VecShapeRewardSemantic
from gymcurric.tasks import Curriculum
from gymcurric.wrappers._sub_envs import call_sub_envs
from tests.semantics.stubs import STUB_CONFIG, caption_embedder
from tests.sub_env_faults import SPACE, DescribeFails, WorkerOnly, flush_fails, unsendable

pytestmark = pytest.mark.sb3


def test_describe_that_raises_names_the_sub_env_and_the_env_goes_on():
    # SB3's default start method (forkserver): the worker imports gymcurric on the call
    fns = [partial(DescribeFails), partial(DescribeFails, fail_at=2, error=KeyError)]
    venv = SubprocVecEnv(fns)
    shaped = VecShapeRewardSemantic(venv, caption_embedder(), STUB_CONFIG)
    try:
        shaped.reset()
        shaped.step(np.zeros(2, np.int64))
        with pytest.raises(SubEnvCallError, match=r"sub-env 1: describe\(\) raised") as caught:
            shaped.step(np.zeros(2, np.int64))
        error = caught.value
        assert (error.index, error.method) == (1, "describe")
        assert error.error_type == "builtins.KeyError"
        assert "no words for step 2" in error.error_message
        assert isinstance(error.__cause__, KeyError)
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
        infos = shaped.step(np.zeros(2, np.int64))[-1]  # it goes on
        assert all(np.isfinite(info["shaping"]) for info in infos)
    finally:
        shaped.close()


def test_flush_that_raises_at_a_checkpoint_keeps_the_workers(tmp_path, capfd):
    cur = Curriculum(SPACE, seed=0, backend="shared")
    fns = [partial(flush_fails, cur), partial(flush_fails, cur, OSError("the channel is gone"))]
    venv = VecMonitor(SubprocVecEnv(fns, start_method="fork"))
    try:
        venv.reset()
        for _ in range(4):
            venv.step(np.zeros(2, dtype=np.int64))
        # under the wrapper's own name for it (a user's flush_curriculum above is not called)
        match = r"sub-env 1: curriculum_task_flush\(\) raised builtins.OSError: the channel"
        with pytest.raises(SubEnvCallError, match=match):
            save_curriculum_state(tmp_path / "c.npz", cur, env=venv)
        assert all(p.is_alive() for p in venv.venv.processes), "a worker exited"
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
        venv.step(np.zeros(2, dtype=np.int64))
    finally:
        venv.close()
        cur.close()


def test_gymcurric_train_checkpoint_flush_that_raises_keeps_the_workers(tmp_path):
    from types import SimpleNamespace

    from gymcurric.train.runner import _save_checkpoint

    cur = Curriculum(SPACE, seed=0, backend="shared")
    venv = SubprocVecEnv(
        [partial(flush_fails, cur, OSError("the channel is gone"))], start_method="fork"
    )
    built = SimpleNamespace(sampler=None, curriculum=cur, venv=venv)
    cfg = SimpleNamespace(env=SimpleNamespace(vectorization="subproc"))
    try:
        venv.reset()
        with pytest.raises(SubEnvCallError, match=r"sub-env 0: curriculum_task_flush\(\)"):
            _save_checkpoint(None, built, cfg, tmp_path, None)  # fails before it reads a model
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
    finally:
        venv.close()
        cur.close()


@pytest.mark.timeout(60)  # before the fix, the main process waited on the dead worker forever
@pytest.mark.parametrize("kind", ["subproc", "dummy"])
def test_a_value_a_worker_cannot_send_is_an_error_and_the_worker_goes_on(capfd, kind):
    # the worker's remote.send(value) raised on the lock, and the worker exited (EOFError next)
    fns = [unsendable, unsendable]
    venv = SubprocVecEnv(fns, start_method="fork") if kind == "subproc" else DummyVecEnv(fns)
    try:
        venv.reset()
        if kind == "dummy":  # in-process: the values are handed over as they are
            assert all(type(v) is type(threading.Lock()) for v in call_sub_envs(venv, "lock"))
            assert isinstance(call_sub_envs(venv, "unloadable", indices=[1])[0], WorkerOnly)
            with pytest.raises(SubEnvCallError, match="describe") as caught:
                call_sub_envs(venv, "describe", indices=[0])  # StateEnv without captions
            assert not caught.value.in_worker and "worker goes on" not in str(caught.value)
            return
        match = r"sub-env 1: the value lock\(\) returned cannot be sent to the main process"
        with pytest.raises(SubEnvCallError, match=match) as caught:
            call_sub_envs(venv, "lock", indices=[1])
        assert (caught.value.index, caught.value.stage) == (1, "send")
        assert all(p.is_alive() for p in venv.processes), "a worker exited"
        with pytest.raises(SubEnvCallError, match=r"unloadable\(\) returned does not load"):
            call_sub_envs(venv, "unloadable")
        assert call_sub_envs(venv, "number") == [7, 7]  # it goes on
        venv.step(np.zeros(2, dtype=np.int64))
        assert "Traceback" not in capfd.readouterr().err  # no worker's dying words
    finally:
        venv.close()
