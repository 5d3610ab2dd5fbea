import subprocess
import sys
from pathlib import Path

import gymnasium as gym

import gymcurric

HEAVY = ("torch", "mujoco", "stable_baselines3", "transformers", "ray", "safety_gymnasium")


def test_import_is_light():
    code = (
        "import sys, gymcurric, gymcurric.wrappers, gymcurric.wrappers.vector, gymcurric.envs;"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_public_api_is_exported():
    for name in gymcurric.__all__:
        assert hasattr(gymcurric, name), name


def test_missing_extra_names_the_extra(monkeypatch):
    from gymcurric._optional import import_optional
    from gymcurric.errors import DependencyNotInstalled

    try:
        import_optional("gymcurric_no_such_module", "sb3", purpose="by a test")
    except DependencyNotInstalled as exc:
        assert 'pip install "gymcurric[sb3]"' in str(exc)
    else:
        raise AssertionError("expected DependencyNotInstalled")


def test_builtin_ids_registered():
    assert "gymcurric/HazardNav-v0" in gym.registry
    assert "gymcurric/HazardGrid-v0" in gym.registry


def test_config_error_survives_async_vector_env_reraise():
    import pickle

    from gymcurric.errors import ConfigError, TaskError

    err = TaskError("num_hazards", -1, "must be >= 0", source="reset(options)")
    # what AsyncVectorEnv does: pickle the instance through a queue, then type(err)(err)
    reraised = type(err)(pickle.loads(pickle.dumps(err)))
    assert isinstance(reraised, TaskError)
    assert str(reraised) == str(err)
    assert (reraised.key, reraised.value, reraised.source) == ("num_hazards", -1, "reset(options)")
    plain = ConfigError("just a message")
    assert str(pickle.loads(pickle.dumps(plain))) == "just a message"


def test_the_declared_license_ships_with_the_package():
    import tomllib

    root = Path(__file__).resolve().parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["license"]
    text = (root / "LICENSE").read_text()
    assert declared == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
