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
that all of it was delivered.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import sys
from collections.abc import Sequence
from types import ModuleType

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


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand this install has."""
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gymcurric ARGS``; returns the exit code (also used by the console script)."""
    try:
        try:
            code = _main(argv)
        except BrokenPipeError:
            raise
        except SystemExit:  # argparse's --help (and usage errors): its output too, as a return
            _flush_stdout()
            raise
        except BaseException:
            # the command's own error (its traceback, exit 1) is the one to see: output left in
            # the buffer must not meet the closed pipe at exit (exit 120, "Exception ignored")
            if _stdout_closed():
                _silence_stdout()
            raise
        _flush_stdout()  # output still buffered meets a closed pipe here, not at exit
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        _silence_stdout()
        return EXIT_STDOUT_CLOSED
    return code


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
        print(f"gymcurric {args.command}: error: {err or exc}", file=sys.stderr)
        return 2
    except GymcurricError as exc:
        print(f"gymcurric {args.command}: error: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):  # e.g. a failed sub-env's traceback
            print(note, file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
