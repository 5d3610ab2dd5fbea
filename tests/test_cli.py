"""The ``gymcurric`` entry point: help, usage errors, the console script."""

from __future__ import annotations

import os
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


# -- stdout closed early (``gymcurric ... | head -n 1``) ------------------------------------------


def _packs(folder):
    import json

    from tests.datapacks.packs import record

    folder.mkdir()
    hints = {"safety_critical": False}  # no stage: every stage may draw them
    lines = [json.dumps(record(f"p{i}", tier=i % 3, supervision_hints=hints)) for i in range(30)]
    (folder / "packs.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _run_with_stdout_closed(argv, read_first_line=False, buffered=False, cmd=None):
    """``python -m gymcurric ARGV`` whose stdout pipe has no reader (or loses it after a line).

    ``buffered``: without ``PYTHONUNBUFFERED`` (which the test environment may set), as a user
    runs it: the output waits in stdout's buffer until a flush, at the latest at exit.
    """
    import os

    cmd = cmd or [sys.executable, "-m", "gymcurric", *argv]
    env = {k: v for k, v in os.environ.items() if not (buffered and k == "PYTHONUNBUFFERED")}
    if read_first_line:  # `| head -n 1`: the reader goes after one line of a long output
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err.decode()
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -n 0`: nothing will ever be read
    try:
        done = subprocess.run(cmd, stdout=write_end, stderr=subprocess.PIPE, timeout=120, env=env)
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode()


def _argv_places(tmp_path) -> dict[str, str]:
    """What PACKS (valid datapacks) and BAD (a folder of broken records) stand for in argv."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "packs.jsonl").write_text("{not json\n" * 50)
    return {"PACKS": str(_packs(tmp_path / "packs")), "BAD": str(bad)}


@pytest.mark.parametrize(
    "argv",
    [["datapacks", "sample", "PACKS", "--batch-size", "8"],
     ["datapacks", "validate", "BAD"],  # one line per problem on stdout
     ["demo", "--list"]],
)  # fmt: skip
def test_a_closed_stdout_ends_the_command_quietly_with_141(tmp_path, argv):
    if argv[0] == "demo" and cli._load(cli.COMMANDS["demo"]) is None:
        pytest.skip("gymcurric demo is not part of this install")
    places = _argv_places(tmp_path)
    code, err = _run_with_stdout_closed([places.get(a, a) for a in argv])
    assert code == 141, err  # cli.EXIT_STDOUT_CLOSED
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception" not in err


def test_a_reader_that_stops_after_one_line_ends_the_command_quietly(tmp_path):
    # ~300 kB of JSON: far more than a pipe holds, so the writer meets the closed pipe
    argv = ["datapacks", "sample", str(_packs(tmp_path / "packs")), "--batch-size", "3000"]
    code, err = _run_with_stdout_closed(argv, read_first_line=True)
    assert code == 141 and err == "", err


def test_a_broken_pipe_that_is_not_stdout_still_raises():
    # a worker's or subprocess's pipe breaking is an error to see, not a `| head`
    code = (
        "import sys\n"
        "import gymcurric.datapacks.cli as dp\n"
        "def boom(args):\n"
        "    raise BrokenPipeError(32, 'a worker pipe')\n"
        "dp.run = boom\n"
        "from gymcurric.cli import main\n"
        "sys.exit(main(['datapacks', 'validate-log', 'x']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "BrokenPipeError: [Errno 32] a worker pipe" in done.stderr


@pytest.mark.parametrize("argv", [["--help"], ["datapacks", "--help"]])
def test_a_closed_stdout_during_help_ends_quietly_with_141(argv):
    # argparse prints the help into stdout's buffer and exits (SystemExit) before main's flush:
    # the closed pipe was met at interpreter exit ("Exception ignored ... BrokenPipeError", 120)
    code, err = _run_with_stdout_closed(argv, buffered=True)
    assert code == 141 and err == "", (code, err)


def test_an_error_with_stdout_closed_keeps_its_traceback_and_exit_code():
    # the command's own error is the one to see: exit 1 and its traceback, and the output left
    # in stdout's buffer does not add a BrokenPipeError (and exit 120) at interpreter exit
    code = (
        "import sys\n"
        "import gymcurric.datapacks.cli as dp\n"
        "def boom(args):\n"
        "    print('some output')\n"
        "    raise RuntimeError('the real error')\n"
        "dp.run = boom\n"
        "from gymcurric.cli import main\n"
        "sys.exit(main(['datapacks', 'validate-log', 'x']))\n"
    )
    status, err = _run_with_stdout_closed([], buffered=True, cmd=[sys.executable, "-c", code])
    assert status == 1 and "RuntimeError: the real error" in err, (status, err)
    assert "BrokenPipeError" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("argv", [["datapacks", "sample", "PACKS"], ["--help"]])
def test_a_stdout_closed_from_the_start_is_no_error(tmp_path, argv):
    # `gymcurric ... >&-`: Python starts with sys.stdout None, print() writes nothing and the
    # command succeeds as before main flushed stdout (it raised AttributeError there, exit 1)
    import os

    argv = [str(_packs(tmp_path / "packs")) if a == "PACKS" else a for a in argv]
    done = subprocess.run(
        [sys.executable, "-m", "gymcurric", *argv],
        stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


# -- stdout that cannot be written (``gymcurric ... > /dev/full``: a full disk) -------------------

FULL = "/dev/full"  # every write fails with ENOSPC


def _run_with_stdout_full(argv, buffered, cmd=None):
    """``python -m gymcurric ARGV > /dev/full``; ``buffered`` as in _run_with_stdout_closed."""
    import os

    cmd = cmd or [sys.executable, "-m", "gymcurric", *argv]
    env = {k: v for k, v in os.environ.items() if not (buffered and k == "PYTHONUNBUFFERED")}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open(FULL, "w") as full:
        done = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, timeout=120, env=env)
    return done.returncode, done.stderr.decode()


@pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    ("argv", "prog"),
    [(["datapacks", "sample", "PACKS", "--batch-size", "8"], "gymcurric datapacks"),
     (["datapacks", "validate", "BAD"], "gymcurric datapacks"),  # exit 1 when written
     (["demo", "--list"], "gymcurric demo"),
     (["--help"], "gymcurric")],
)  # fmt: skip
def test_a_full_stdout_is_one_line_of_error_and_exit_74(tmp_path, argv, prog, buffered):
    # a traceback and exit 120 at the interpreter's last flush (buffered), or the print's
    # traceback and exit 1 (unbuffered); argparse's --help passed over it and exited 0
    if argv[0] == "demo" and cli._load(cli.COMMANDS["demo"]) is None:
        pytest.skip("gymcurric demo is not part of this install")
    places = _argv_places(tmp_path)
    code, err = _run_with_stdout_full([places.get(a, a) for a in argv], buffered)
    assert code == 74, err  # cli.EXIT_STDOUT_FAILED, EX_IOERR
    assert err == f"{prog}: error: cannot write to stdout ([Errno 28] No space left on device)\n"


@pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here")
def test_a_full_disk_that_is_not_stdout_keeps_its_traceback():
    # an OSError of another file (a checkpoint on a full disk) is the command's own error
    code = (
        "import errno, sys\n"
        "import gymcurric.datapacks.cli as dp\n"
        "def boom(args):\n"
        "    print('some output')\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', 'run/model.zip')\n"
        "dp.run = boom\n"
        "from gymcurric.cli import main\n"
        "sys.exit(main(['datapacks', 'validate-log', 'x']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" in done.stderr, done.stderr
    assert "OSError: [Errno 28] No space left on device: 'run/model.zip'" in done.stderr
    # the same with stdout on /dev/full, its output still buffered: the command's error too,
    # and the buffered output adds no "Exception ignored" (and exit 120) at exit
    status, err = _run_with_stdout_full([], True, cmd=[sys.executable, "-c", code])
    assert status == 1 and "'run/model.zip'" in err, (status, err)
    assert "Exception ignored" not in err and "cannot write to stdout" not in err, err


class _FullStderr:
    """stderr on /dev/full (``2>/dev/full``): every write fails with ENOSPC."""

    def write(self, text):
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass


def test_an_error_line_that_cannot_be_written_still_exits_2(tmp_path, monkeypatch):
    # the print of the error line raised its OSError: exit 1 with a traceback (nowhere to go)
    if cli._load(cli.COMMANDS["train"]) is None:
        pytest.skip("gymcurric train is not part of this install")
    monkeypatch.setattr(sys, "stderr", _FullStderr())
    assert cli.main(["train", "--config", str(tmp_path / "nope.yaml")]) == 2


def test_without_a_stderr_an_error_line_is_left_out_not_printed_on_stdout(
    tmp_path, monkeypatch, capsys
):
    # started with 2>&- (sys.stderr None): print(file=None) wrote the error line on stdout
    if cli._load(cli.COMMANDS["train"]) is None:
        pytest.skip("gymcurric train is not part of this install")
    monkeypatch.setattr(sys, "stderr", None)
    assert cli.main(["train", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("stderr", [None, _FullStderr()], ids=["no stderr", "stderr full"])
def test_a_datapacks_summary_without_a_stderr_to_take_it_changes_neither_stdout_nor_exit_code(
    tmp_path, monkeypatch, capsys, stderr
):
    # validate's and validate-log's summary line ("DIR: valid: ...") on stderr: with 2>&-
    # print(file=None) wrote it on stdout among the error lines, and with 2>/dev/full its
    # OSError made a valid folder exit 1 (a traceback nowhere to go)
    import json

    from tests.datapacks.packs import record

    (tmp_path / "p0.json").write_text(json.dumps(record()))
    log = tmp_path / "log.jsonl"
    log.write_text("")
    monkeypatch.setattr(sys, "stderr", stderr)
    assert cli.main(["datapacks", "validate", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""
    assert cli.main(["datapacks", "validate-log", str(log)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{log}: no records: ") and out.count("\n") == 1, out


@pytest.mark.parametrize("argv", [["no-such-command"], ["train", "--no-such-option"]])
def test_without_a_stderr_a_usage_error_is_left_out_not_printed_on_stdout(
    monkeypatch, capsys, argv
):
    # argparse's error() prints the usage with print_usage(sys.stderr), and print_usage(None)
    # writes to stdout: 'gymcurric train --bogus 2>&-' printed "usage: ..." there
    if argv[0] == "train" and cli._load(cli.COMMANDS["train"]) is None:
        pytest.skip("gymcurric train is not part of this install")
    monkeypatch.setattr(sys, "stderr", None)
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2 and capsys.readouterr().out == ""
