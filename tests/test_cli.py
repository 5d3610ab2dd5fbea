"""The ``gymcurric`` entry point: help, usage errors, the console script."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gymcurric import cli


def test_help_exits_zero_and_lists_the_installed_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: gymcurric" in out
    for name, module in cli.COMMANDS.items():
        listed = re.search(rf"^\s+{name}\s", out, re.MULTILINE) is not None
        assert listed == (cli._load(module) is not None), name


def test_unknown_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_an_absent_subcommand_is_left_out_but_a_broken_one_raises(monkeypatch, tmp_path):
    monkeypatch.setitem(cli.COMMANDS, "ghost", "gymcurric.no_such_module")
    assert cli._load("gymcurric.no_such_module") is None
    cli.build_parser()  # the absent module does not break the others
    # a present module whose own import fails (a dependency is missing) must surface
    (tmp_path / "gc_broken_cli.py").write_text("import gc_surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="gc_surely_not_installed_pkg"):
        cli._load("gc_broken_cli")


def test_python_dash_m_runs_the_same_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "gymcurric", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "usage: gymcurric" in out.stdout
