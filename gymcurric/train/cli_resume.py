"""``gymcurric resume RUN_DIR``: continue a run from its last checkpoint."""

from __future__ import annotations

import argparse
from typing import Literal

HELP = "continue a run directory from its last checkpoint (exactly, for dummy envs)"


def _timeout(text: str) -> float | None:
    """``--step-timeout`` / ``--build-timeout``: seconds, or ``none`` for no limit (null)."""
    from gymcurric._checks import MAX_TIMEOUT_S, check_timeout

    if text.strip().lower() in ("none", "null"):
        return None
    try:
        return check_timeout(float(text), "seconds")
    except ValueError:  # not a number; or 0, negative, nan, inf, too large (a ConfigError)
        raise argparse.ArgumentTypeError(
            f"expected seconds > 0 and <= {MAX_TIMEOUT_S:g}, or 'none' (no limit); got {text!r}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``resume`` options."""
    parser.add_argument("run_dir", help="a run directory written by `gymcurric train`")
    parser.add_argument(
        "--total-steps",
        type=int,
        default=None,
        help="train until this many steps (default: the config's)",
    )
    parser.add_argument(
        "--step-timeout",
        type=_timeout,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="replace the run's env.step_timeout (subproc runs): the seconds a worker may take "
        "to answer, or 'none' for no limit; written into the run's config.json, so a later "
        "resume keeps it (default: the config's)",
    )
    parser.add_argument(
        "--build-timeout",
        type=_timeout,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="replace the run's env.build_timeout (subproc runs): the seconds a worker may take "
        "to start and build its env, or 'none' for no limit; written into config.json as "
        "--step-timeout is (default: the config's)",
    )


#: the options that replace a config key, by the key's name in load_run_config's errors
_OPTIONS = {"step_timeout": "--step-timeout", "build_timeout": "--build-timeout"}


def run(args: argparse.Namespace) -> int:
    """Resume and print the summary."""
    from pathlib import Path

    from gymcurric._checks import check_text
    from gymcurric.errors import ConfigError
    from gymcurric.train._checkpoint import latest_steps
    from gymcurric.train._progress import run_with_progress
    from gymcurric.train.build import round_to_steps
    from gymcurric.train.cli_train import announce_rounding, print_summary
    from gymcurric.train.runner import load_run_config, resume

    # absent unless given (argparse.SUPPRESS): None is "no limit", not "keep the config's"
    step_timeout: float | Literal["keep"] | None = getattr(args, "step_timeout", "keep")
    build_timeout: float | Literal["keep"] | None = getattr(args, "build_timeout", "keep")
    # tensorboard's writer encodes its path as strict UTF-8, as for train's --run-dir
    check_text("run_dir", args.run_dir, source="command line", path=True)
    try:
        asked = load_run_config(Path(args.run_dir), args.total_steps, step_timeout, build_timeout)
    except ConfigError as err:  # a run that cannot take it (not subproc): name the option
        if err.key not in _OPTIONS:
            raise
        raise ConfigError(_OPTIONS[err.key], err.value, err.reason, source=err.source) from None
    cfg = announce_rounding(asked, round_to_steps(asked, str(Path(args.run_dir))))
    result = run_with_progress(
        cfg.run.progress_bar,
        cfg.run.total_steps,
        latest_steps(Path(args.run_dir)),
        lambda cb: resume(
            args.run_dir,
            total_steps=args.total_steps,
            step_timeout=step_timeout,
            build_timeout=build_timeout,
            progress=cb,
        ),
    )
    print_summary(result)
    return 0
