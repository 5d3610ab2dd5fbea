"""The ``gymcurric`` command: one entry point, one subcommand per capability.

Each subcommand lives next to the code it drives and is imported only when the command line
is parsed, so ``gymcurric --help`` stays fast and a subcommand whose extra is not installed
does not break the others. A subcommand module defines::

    HELP: str                                   # one line for ``gymcurric --help``
    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...  # the exit code

and imports its heavy dependencies (torch, transformers, SB3, ...) inside ``run``.
Exit codes: 0 success, 1 the command ran and found a problem (e.g. an invalid datapack),
2 bad command-line usage or configuration, or a missing extra (the message names the
``pip install "gymcurric[...]"`` to run), 141 stdout was closed before the output was all
written (``gymcurric datapacks sample DIR | head -n 1``): the command stops there without a
word, with the status a shell gives ``cat``, ``seq`` or ``git`` killed by SIGPIPE (128 + 13),
so that ``set -o pipefail`` sees a cut-off output the same way from every tool; 0 would say
that all of it was delivered. 74 (``EX_IOERR`` of ``sysexits.h``) stdout could not be written
for another reason (``gymcurric ... > /dev/full``, a full disk, an I/O error): the command
stops with one line on stderr, ``gymcurric COMMAND: error: cannot write to stdout (...)``,
and no traceback; not 1, which a script would read as the command's own finding. A stderr
that cannot be written (``2>/dev/full``) changes no exit code: its error lines, notices and
progress bar are left out (the bar after one warning), and the command runs on. Without a
stderr (``2>&-``) they are left out too (argparse's usage errors as well), never printed on
stdout in its place.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import select
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn, TextIO

from gymcurric._optional import missing_extra
from gymcurric.errors import GymcurricError

# name -> module; a module that is not present in this install is left out of the parser
COMMANDS: dict[str, str] = {
    "train": "gymcurric.train.cli_train",
    "resume": "gymcurric.train.cli_resume",
    "demo": "gymcurric.train.cli_demo",
    "bench": "gymcurric.train.cli_bench",
    "datapacks": "gymcurric.datapacks.cli",
    "probe": "gymcurric.semantics.probe",
}


#: The exit code when stdout was closed early: a shell's status for a process killed by SIGPIPE.
EXIT_STDOUT_CLOSED = 128 + 13
#: The exit code when stdout could not be written otherwise (a full disk): ``EX_IOERR``.
EXIT_STDOUT_FAILED = 74

# name -> the extra the command needs (named when one of its modules is missing)
COMMAND_EXTRAS: dict[str, str] = {
    "train": "train",
    "resume": "train",
    "demo": "train",
    "datapacks": "datapacks",
    "probe": "semantic",
}


def _load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            return None  # this subcommand is not part of this install
        raise


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error leaves stdout alone without a stderr (``2>&-``).

    ``error()`` prints the usage with ``print_usage(sys.stderr)``, and ``print_usage(None)``
    writes to stdout: ``gymcurric train --bogus 2>&-`` printed it there, where a script reads
    the command's output. The subcommands' parsers are of this class too (argparse's
    ``parser_class`` default).
    """

    def error(self, message: str) -> NoReturn:
        """Exit 2 with the usage and ``message`` on stderr, or with neither without one."""
        if sys.stderr is None:
            self.exit(2)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand this install has."""
    parser = _Parser(
        prog="gymcurric",
        description="Curriculum learning, datapacks, semantic shaping and cost/risk "
        "annotation for Gymnasium environments.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        mod = _load(module)
        if mod is None:
            continue
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(handler=mod.run)
    return parser


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reading end is gone (``| head`` has exited).

    A BrokenPipeError can come from elsewhere too (a worker's pipe, a subprocess): only one
    from stdout ends the command quietly.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file
        return False
    if not hasattr(select, "poll"):  # pragma: no cover - Windows: no way to ask
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _flush_stdout() -> None:
    """Flush stdout; it is ``None`` when the command started with it closed (``>&-``)."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _silence_stdout() -> None:
    """Point stdout at devnull, so the interpreter's last flush at exit raises nothing.

    The recipe of the Python docs (``signal``: "Note on SIGPIPE").
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


class _WatchedStdout:
    """``sys.stdout`` while a command runs: remembers a write or flush that failed.

    So that a full disk (``> /dev/full``) is told from the same ``OSError`` of another file (a
    checkpoint's, which keeps its traceback): only an error of stdout itself ends the command
    with :data:`EXIT_STDOUT_FAILED`. A closed pipe is not recorded: it has its own handling.
    Everything else is the stream's own.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failed = exc
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failed = exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _stdout_failed(argv: Sequence[str] | None, error: OSError) -> int:
    """Say that stdout could not be written, in one line; the exit code to return."""
    # what is left in the buffer must not fail again at exit (exit 120); a stream without a
    # file (replaced in-process) has no such exit
    with contextlib.suppress(AttributeError, OSError, ValueError):
        _silence_stdout()
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((w for w in words if not w.startswith("-")), None)
    prog = f"gymcurric {command}" if command in COMMANDS else "gymcurric"
    with contextlib.suppress(OSError):  # stderr is no better: the exit code says it
        print(f"{prog}: error: cannot write to stdout ({error})", file=sys.stderr)
    return EXIT_STDOUT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gymcurric ARGS``; returns the exit code (also used by the console script)."""
    stdout = sys.stdout
    watched = None if stdout is None else _WatchedStdout(stdout)
    if watched is not None:
        sys.stdout = watched  # a stream as far as callers can see
    try:
        try:
            try:
                code = _main(argv)
            except BrokenPipeError:
                raise
            except SystemExit:  # argparse's --help (and usage errors): its output too, as a
                _flush_stdout()  # return
                raise
            except BaseException as exc:
                if watched is not None and watched.failed is exc:
                    raise  # stdout's own error: reported below
                # the command's own error (its traceback, exit 1) is the one to see: output left
                # in the buffer must not meet a closed pipe or a full disk at exit (exit 120,
                # "Exception ignored"), so it goes now, or is dropped
                try:
                    _flush_stdout()
                except OSError:
                    _silence_stdout()
                raise
            _flush_stdout()  # output still buffered meets a closed pipe here, not at exit
        except BrokenPipeError:
            if not _stdout_closed():
                raise
            _silence_stdout()
            return EXIT_STDOUT_CLOSED
        except OSError as exc:
            if watched is None or watched.failed is not exc:
                raise
            return _stdout_failed(argv, exc)
        except SystemExit:  # argparse's help, whose write error argparse passes over in silence
            if watched is None or watched.failed is None:
                raise
            return _stdout_failed(argv, watched.failed)
        if watched is not None and watched.failed is not None:  # a command passed over it
            return _stdout_failed(argv, watched.failed)
        return code
    finally:
        if watched is not None and sys.stdout is watched:
            sys.stdout = stdout


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    # ``key=value`` overrides may come before or after options (argparse alone would only
    # take them in one run): leftovers go to a command's ``overrides`` when it has one
    args, extra = parser.parse_known_args(argv)
    bad = [a for a in extra if a.startswith("-") or "=" not in a]
    if extra and (bad or not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(bad or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    try:
        return int(args.handler(args))
    except ImportError as exc:
        # an extra this command needs is not installed: name it, not a traceback
        err = missing_extra(
            exc, COMMAND_EXTRAS.get(args.command), purpose=f"by gymcurric {args.command}"
        )
        if err is None and not isinstance(exc, GymcurricError):
            raise
        _say_error(f"gymcurric {args.command}: error: {err or exc}")
        return 2
    except GymcurricError as exc:
        # e.g. a failed sub-env's traceback in its notes
        _say_error(f"gymcurric {args.command}: error: {exc}", *getattr(exc, "__notes__", ()))
        return 2


def _say_error(*lines: str) -> None:
    """Print ``lines`` on stderr; where it cannot be written, the exit code alone says it.

    As for stdout (:func:`_stdout_failed`): with stderr on ``/dev/full`` or a closed pipe the
    command still exits 2, not 1 with a traceback that cannot be written either. Without a
    stderr (``2>&-``) they are left out too, not printed on stdout (``print(file=None)``).
    """
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError):
        for line in lines:
            print(line, file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
