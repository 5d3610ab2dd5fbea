"""``gymcurric train --config FILE [key=value ...]``: train into a run directory."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from gymcurric.train._overrides import Setting

HELP = "train an agent from a YAML/JSON config (overrides as dotted key=value)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` options."""
    parser.add_argument(
        "--config", "-c", default=None, help="YAML/JSON run config (default: every default)"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="dotted overrides, values read as YAML, e.g. agent.algo=ppolag "
        "run.total_steps=50000 (a flag's value is never read as YAML: a path is as typed)",
    )
    parser.add_argument(
        "--run-dir", default=None, help="the run directory (default: run.out_dir/run.name)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing run directory"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, build the envs and the agent, print the merged config; train nothing",
    )
    # the datapack-sampler specification's train flags (its §4.4), as aliases of config keys
    parser.add_argument("--datapack-dir", default=None, help="= datapacks.dir (enables them)")
    parser.add_argument("--enrichment-dir", default=None, help="= datapacks.enrichment_dir")
    parser.add_argument("--curriculum-config", default=None, help="= datapacks.curriculum_config")
    parser.add_argument(
        "--sampling-strategy",
        default=None,
        help="= datapacks.strategy (the specification's config format: the default for "
        "stages that name none; gymcurric's: forced on every stage)",
    )
    parser.add_argument(
        "--curriculum-auto-advance",
        default=None,
        nargs="?",
        const="true",
        metavar="{true,false}",
        action=_AutoAdvance,
        help="= datapacks.auto_advance (alone: true)",
    )
    parser.add_argument(
        "--no-curriculum-auto-advance",
        dest="curriculum_auto_advance",
        action="store_const",
        const="false",
        help="= datapacks.auto_advance=false",
    )
    parser.add_argument(
        "--episodes", default=None, metavar="N", help="= datapacks.episodes (a whole number)"
    )
    parser.add_argument("--seed", default=None, metavar="N", help="= run.seed (a whole number)")


class _AutoAdvance(argparse.Action):
    """``--curriculum-auto-advance [true|false]``: alone it means true (the specification's form).

    A following ``key=value`` override is not its value: it goes back to the overrides.
    """

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        if isinstance(values, str) and values.lower() not in ("true", "false"):
            if "=" not in values:
                parser.error(f"argument {option}: expected true or false; got {values!r}")
            namespace.pushed_overrides = [*getattr(namespace, "pushed_overrides", []), values]
            values = "true"
        setattr(namespace, self.dest, values.lower() if isinstance(values, str) else values)


_TEXT_FLAGS = (  # (argument, config key): a path or a name, passed on exactly as typed
    ("datapack_dir", "datapacks.dir"),
    ("enrichment_dir", "datapacks.enrichment_dir"),
    ("curriculum_config", "datapacks.curriculum_config"),
    ("sampling_strategy", "datapacks.strategy"),
)
_INT_FLAGS = (("episodes", "datapacks.episodes"), ("seed", "run.seed"))
# a whole number in decimal, as int() reads it (underscores between digits, a sign)
_DECIMAL = re.compile(r"[+-]?[0-9](?:_?[0-9])*", re.ASCII)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_settings(args: argparse.Namespace) -> list[Setting]:
    """The config keys the flags set, their values typed here, never read as YAML text.

    A folder named ``2024``, ``null`` or ``runs #2`` is that string; ``--seed`` and
    ``--episodes`` are whole numbers (:func:`whole_number`).
    """
    from gymcurric.train._overrides import Setting

    out = []
    if args.datapack_dir is not None:
        out.append(Setting("datapacks.enabled", True, "--datapack-dir"))
    for name, key in _TEXT_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            out.append(Setting(key, value, _flag(name)))
    if args.curriculum_auto_advance is not None:  # "true" or "false" (_AutoAdvance)
        advance = args.curriculum_auto_advance == "true"
        out.append(Setting("datapacks.auto_advance", advance, "--curriculum-auto-advance"))
    for name, key in _INT_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            out.append(Setting(key, whole_number(_flag(name), value), _flag(name)))
    return out


def whole_number(flag: str, text: str) -> int:
    """A number flag's value: a whole number written in decimal (``42``, ``-1``, ``1_000``).

    Its range is the config key's to check (``run.seed`` from 0 to 2**32 - 1).

    Raises:
        ConfigError: naming ``flag`` and the text: anything else (``1.5``, ``null``, ``5 #c``,
            ``0x10``), and a leading zero (``017``), which YAML, that read these flags before,
            took for an octal number (15).

    Examples:
        >>> whole_number("--seed", " 42"), whole_number("--seed", "1_000")
        (42, 1000)
        >>> whole_number("--seed", "017")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        gymcurric.errors.ConfigError: command line: invalid value for '--seed': '017' (a ...
    """
    from gymcurric._checks import cut
    from gymcurric.errors import ConfigError

    digits = text.strip()
    if _DECIMAL.fullmatch(digits) is None:
        why = "expected a whole number in decimal, e.g. 42"
        raise ConfigError(flag, cut(text), why, source="command line")
    if len(digits.lstrip("+-")) > 1 and digits.lstrip("+-").startswith("0"):
        why = "a leading 0 is ambiguous (YAML reads 017 as the octal 15); write it without"
        raise ConfigError(flag, cut(text), why, source="command line")
    try:
        return int(digits)
    except ValueError as exc:  # more digits than Python converts (4,300)
        raise ConfigError(flag, cut(text), str(exc), source="command line") from None


def run(args: argparse.Namespace) -> int:
    """Validate, then train; prints the run directory and a summary."""
    import json

    from gymcurric._checks import check_text
    from gymcurric.train.config import load_config

    overrides = [*args.overrides, *getattr(args, "pushed_overrides", [])]
    cfg = load_config(args.config, overrides, flag_settings(args))
    if args.run_dir is not None:  # tensorboard's writer encodes its path as strict UTF-8
        check_text("--run-dir", args.run_dir, source="command line", path=True)
    if args.dry_run:  # build the envs and the agent too: what would fail at the start fails now
        from gymcurric.train.build import check_buildable

        check_buildable(cfg, f"{args.config or 'defaults'}")
        print(json.dumps(cfg.to_dict(), indent=2))
        return 0
    from gymcurric.train._progress import run_with_progress
    from gymcurric.train.build import round_to_steps
    from gymcurric.train.runner import train

    source = f"{args.config or 'defaults'}"
    cfg = announce_rounding(cfg, round_to_steps(cfg, source))
    result = run_with_progress(
        cfg.run.progress_bar,
        cfg.run.total_steps,
        0,
        lambda cb: train(
            cfg, run_dir=args.run_dir, source=source, progress=cb, overwrite=args.overwrite
        ),
    )
    print_summary(result)
    return 0


def announce_rounding(asked: Any, cfg: Any, file: TextIO | None = None) -> Any:
    """Say so when the step counts were rounded up to whole rollouts; returns ``cfg``.

    A notice: where stderr cannot be written (``2>/dev/full``) the run goes on without it
    (``config.json`` and the summary record the steps trained); so does it without a stderr
    (``2>&-``), not on stdout in its place.
    """
    file = file or sys.stderr
    if asked.run.total_steps != cfg.run.total_steps and file is not None:
        with contextlib.suppress(OSError):
            print(
                f"run.total_steps {asked.run.total_steps} -> {cfg.run.total_steps}: the agent "
                "trains in whole rollouts (n_steps x num_envs)",
                file=file,
            )
    return cfg


def print_summary(result: dict[str, Any], file: TextIO | None = None) -> None:
    """Five lines: where the run is, what ran, how it ended."""
    file = file or sys.stdout

    def fmt(v: object) -> str:
        return "n/a" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)

    print(f"run directory: {result['run_dir']}", file=file)
    total, now = result["total_steps"], result.get("steps_this_session", result["total_steps"])
    done = f"{total} steps" if now == total else f"{now} steps (to {total} in all)"
    print(
        f"trained {result['algo']} on {result['env']} for {done} "
        f"in {result['wall_seconds']:.0f} s ({result['steps_per_second']:.0f} steps/s)",
        file=file,
    )
    print(
        f"last {result['episodes_in_window']} episodes: return {fmt(result['ep_return_mean'])}"
        f", cost {fmt(result['ep_cost_mean'])}, success {fmt(result['success_rate'])}",
        file=file,
    )
    extra = []
    if "lagrange_multiplier" in result:
        lam = result["lagrange_multiplier"]  # one λ per constraint with several
        shown = ", ".join(f"{x:.3g}" for x in lam) if isinstance(lam, list) else f"{lam:.3g}"
        extra.append(f"lambda {shown}")
    if "kappa" in result:  # P3O's penalty weight: it has no multiplier
        extra.append(f"kappa {result['kappa']:.3g}")
    cur = result.get("curriculum") or {}
    if cur:
        extra.append(
            f"curriculum entropy {cur.get('curriculum/entropy_norm', float('nan')):.2f}"
            f", mean success {cur.get('curriculum/mean_success', float('nan')):.2f}"
        )
    print("; ".join(extra) if extra else "no curriculum, no Lagrange multiplier", file=file)
    plots = result.get("plots") or []
    print(f"plots: {', '.join(plots) if plots else result.get('plots_error', 'none')}", file=file)
