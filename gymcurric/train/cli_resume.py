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
    import json
    from pathlib import Path

    from gymcurric.errors import DataError
    from gymcurric.train._progress import run_with_progress
    from gymcurric.train.cli_train import print_summary
    from gymcurric.train.runner import resume

    cfg_path = Path(args.run_dir) / "config.json"
    if not cfg_path.is_file():
        raise DataError(f"{args.run_dir}: not a gymcurric run directory (no config.json)")
    cfg = json.loads(cfg_path.read_text())
    total = args.total_steps or int(cfg["run"]["total_steps"])
    result = run_with_progress(
        bool(cfg["run"].get("progress_bar", True)),
        total,
        0,
        lambda cb: resume(args.run_dir, total_steps=args.total_steps, progress=cb),
    )
    print_summary(result)
    return 0
