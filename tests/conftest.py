"""Test-session settings."""

import os

import pytest

# Tiny MLPs on 2 cores: torch's intra-op threads only add contention (measured: PPO on 4 envs,
# 2,048 steps took 23.7 s with 2 threads vs 2.9 s with 1 under load). Set before torch loads;
# subprocess workers (SubprocVecEnv, AsyncVectorEnv) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# Every SB3 learn() without a logger of its own makes an empty tempdir/SB3-<date> directory
# (stable_baselines3.common.logger.configure); the suite left thousands of them in /tmp. One
# directory per test session instead, removed at exit (subprocesses inherit it).
if "SB3_LOGDIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _sb3_logdir = tempfile.mkdtemp(prefix="gymcurric-tests-sb3-")
    os.environ["SB3_LOGDIR"] = _sb3_logdir
    atexit.register(shutil.rmtree, _sb3_logdir, ignore_errors=True)


@pytest.fixture
def safety_installed() -> None:
    """Skip unless mujoco and safety-gymnasium are installed (tests.safety_support)."""
    from tests.safety_support import needs_safety

    needs_safety()


@pytest.fixture
def json_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``json.JSONDecoder.decode`` reads during the test, in order."""
    import json

    decoded: list[str] = []
    decode = json.JSONDecoder.decode

    def counting(self, text, *args, **kwargs):  # type: ignore[no-untyped-def]
        decoded.append(text)
        return decode(self, text, *args, **kwargs)

    monkeypatch.setattr(json.JSONDecoder, "decode", counting)
    return decoded
