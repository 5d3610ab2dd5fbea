"""``gymcurric resume RUN_DIR``: continue a run from its last checkpoint."""

from __future__ import annotations

import argparse

HELP = "continue a run directory from its last checkpoint (exactly, for dummy envs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``resume`` options."""
    parser.add_argument("run_dir", help="a run directory written by `gymcurric train`")
    parser.add_argument(
        "--total-steps",
        type=int,
        default=None,
        help="train until this many steps (default: the config's)",
    )


def run(args: argparse.Namespace) -> int:
    """Resume and print the summary."""
    from pathlib import Path

    from gymcurric.train._checkpoint import latest_steps
    from gymcurric.train._progress import run_with_progress
    from gymcurric.train.build import round_to_steps
    from gymcurric.train.cli_train import announce_rounding, print_summary
    from gymcurric.train.runner import load_run_config, resume

    asked = load_run_config(Path(args.run_dir), args.total_steps)
    cfg = announce_rounding(asked, round_to_steps(asked, str(Path(args.run_dir))))
    result = run_with_progress(
        cfg.run.progress_bar,
        cfg.run.total_steps,
        latest_steps(Path(args.run_dir)),
        lambda cb: resume(args.run_dir, total_steps=args.total_steps, progress=cb),
    )
    print_summary(result)
    return 0
