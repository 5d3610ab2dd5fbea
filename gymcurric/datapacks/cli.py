"""``gymcurric datapacks``: validate a datapack directory, or draw one batch and print its log.

Usage::

    gymcurric datapacks validate DIR [--enrichment-dir DIR] [--recursive] [--check-episodes]
                                     [--config FILE]
    gymcurric datapacks sample DIR [--enrichment-dir DIR] [--config FILE] [--strategy NAME]
                                   [--stage NAME] [--batch-size N] [--seed S] [--run-dir DIR]
    gymcurric datapacks validate-log FILE

``validate`` prints one line per problem (file, line or record, field, value) and exits 1 if
there is any, 0 otherwise. ``sample`` prints the sampler's JSON log entry for one batch (exit 0);
a bad directory, config, strategy or stage exits 2 with the error. ``validate-log`` checks a
``datapack_samples.jsonl`` against the shipped JSON Schema (one line per problem, exit 1 if any;
a log without a record is one).

``--enrichment-dir`` merges Stage 2.4 enrichments into the datapacks by ``pack_id``
(:mod:`gymcurric.datapacks.merge`); ``--config`` takes either curriculum config format.

The training command's options ``--datapack-dir``, ``--enrichment-dir``, ``--curriculum-config``,
``--sampling-strategy`` and ``--curriculum-auto-advance`` are defined here too
(:func:`add_train_arguments`), with :func:`sampler_from_args` / :func:`build_sampler` to turn
them into a :class:`~gymcurric.datapacks.DataPackRLSampler`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from typing import Any

from gymcurric.datapacks.curriculum import DataPackCurriculum
from gymcurric.datapacks.loading import load_datapacks, validate_datapacks
from gymcurric.datapacks.sampler import DataPackRLSampler
from gymcurric.datapacks.schedule import DataPackCurriculumConfig, load_curriculum_config
from gymcurric.datapacks.strategies import STRATEGIES
from gymcurric.errors import ConfigError, DataError

__all__ = [
    "HELP",
    "add_arguments",
    "add_train_arguments",
    "build_sampler",
    "run",
    "sampler_from_args",
]

HELP = "validate a datapack directory, or sample a batch from it and print the log entry"
_ENRICH_HELP = "Stage 2.4 enrichments (.json/.jsonl) to merge into the datapacks by pack_id"


def build_sampler(
    datapack_dir: str | os.PathLike[str],
    curriculum_config: str | os.PathLike[str] | None = None,
    sampling_strategy: str | None = None,
    curriculum_auto_advance: bool | None = None,
    *,
    seed: int = 0,
    recursive: bool = False,
    env_id: str | None = None,
    enrichment_dir: str | os.PathLike[str] | None = None,
) -> DataPackRLSampler:
    """A sampler over the datapacks in ``datapack_dir``, with the staged curriculum.

    Args:
        datapack_dir: directory (or file) of ``.json`` / ``.jsonl`` datapacks.
        curriculum_config: a YAML / JSON :class:`DataPackCurriculumConfig` file; ``None``: the
            shipped four-stage default.
        sampling_strategy: a strategy name (with its default parameters): with a config in
            gymcurric's format it overrides every stage's strategy; in the specification's it
            is the default for the stages that name none (a stage's own wins, and the
            specification's default parameters apply); ``None``: each stage's own.
        curriculum_auto_advance: overrides the config's ``auto_advance``; ``None`` keeps it.
        seed: the sampler's seed.
        recursive: read sub-directories of ``datapack_dir`` too.
        env_id: keep only the datapacks recorded for this env id, and those that name no env
            (a folder may mix envs).
        enrichment_dir: Stage 2.4 enrichments to merge in by ``pack_id``.

    Raises:
        DataError: invalid datapacks (file, line, field and value named), or none for
            ``env_id``.
        ConfigError: bad config file, unknown strategy.
    """
    if sampling_strategy is not None and sampling_strategy not in STRATEGIES:
        raise ConfigError(
            "sampling_strategy", sampling_strategy, f"expected one of {sorted(STRATEGIES)}"
        )
    config = (
        load_curriculum_config(curriculum_config)
        if curriculum_config is not None
        else DataPackCurriculumConfig()
    )
    if curriculum_auto_advance is not None:
        config = dataclasses.replace(config, auto_advance=bool(curriculum_auto_advance))
    packs = load_datapacks(datapack_dir, recursive=recursive, enrichment_dir=enrichment_dir)
    if env_id is not None:  # a datapack without an env_id runs in any env
        found = sorted({p.env_id for p in packs if p.env_id is not None})
        packs = [p for p in packs if p.env_id in (None, env_id)]
        if not packs:
            raise DataError(
                f"{datapack_dir}: no datapack has env_id {env_id!r} (the env ids found: {found})"
            )
    return DataPackRLSampler(
        packs, curriculum=DataPackCurriculum(config), strategy=sampling_strategy, seed=seed
    )


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the training command's datapack options (see :func:`sampler_from_args`)."""
    g = parser.add_argument_group("datapacks")
    g.add_argument("--datapack-dir", default=None, help="directory of .json/.jsonl datapacks")
    g.add_argument(
        "--enrichment-dir", default=None, help="Stage 2.4 enrichments, merged in by pack_id"
    )
    g.add_argument(
        "--curriculum-config", default=None, help="YAML/JSON datapack curriculum (stages)"
    )
    g.add_argument(
        "--sampling-strategy",
        default=None,
        choices=sorted(STRATEGIES),
        help="gymcurric's config format: override every stage's strategy; the "
        "specification's: the default for stages that name none",
    )
    g.add_argument(
        "--curriculum-auto-advance",
        default=None,
        action=argparse.BooleanOptionalAction,
        help="advance stages by rule/fallback (default: the config's auto_advance)",
    )


def sampler_from_args(args: argparse.Namespace, *, seed: int = 0) -> DataPackRLSampler | None:
    """The sampler the options of :func:`add_train_arguments` describe (``None`` without a dir)."""
    if args.datapack_dir is None:
        for opt in (
            "enrichment_dir",
            "curriculum_config",
            "sampling_strategy",
            "curriculum_auto_advance",
        ):
            if getattr(args, opt, None) is not None:
                raise ConfigError(
                    f"--{opt.replace('_', '-')}",
                    getattr(args, opt),
                    "needs --datapack-dir",
                )
        return None
    return build_sampler(
        args.datapack_dir,
        args.curriculum_config,
        args.sampling_strategy,
        args.curriculum_auto_advance,
        seed=seed,
        enrichment_dir=getattr(args, "enrichment_dir", None),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``validate`` and ``sample`` sub-subcommands."""
    sub = parser.add_subparsers(dest="datapacks_command", metavar="{validate,sample,validate-log}")
    sub.required = True
    v = sub.add_parser("validate", help="check every datapack; exit 1 on any problem")
    v.add_argument("dir", help="directory (or file) of .json/.jsonl datapacks")
    v.add_argument("--enrichment-dir", default=None, help=_ENRICH_HELP)
    v.add_argument("--recursive", action="store_true", help="read sub-directories too")
    v.add_argument(
        "--check-episodes", action="store_true", help="also load every recorded episode .npz"
    )
    v.add_argument("--config", default=None, help="also validate this curriculum config")
    s = sub.add_parser("sample", help="draw one batch and print the sampler's JSON log entry")
    s.add_argument("dir", help="directory (or file) of .json/.jsonl datapacks")
    s.add_argument("--enrichment-dir", default=None, help=_ENRICH_HELP)
    s.add_argument("--config", default=None, help="YAML/JSON curriculum config (default stages)")
    s.add_argument(
        "--strategy",
        default=None,
        help=f"one of {sorted(STRATEGIES)}: overrides the stage's (gymcurric's config "
        "format) or is the default for a stage that names none (the specification's)",
    )
    s.add_argument("--stage", default=None, help="sample in this stage (default: the first)")
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--recursive", action="store_true", help="read sub-directories too")
    s.add_argument("--run-dir", default=None, help="also append the entry to the JSONL log here")
    g = sub.add_parser(
        "validate-log", help="check a datapack_samples.jsonl against the shipped JSON Schema"
    )
    g.add_argument("log", help="the JSONL sampling log")


def _validate(args: argparse.Namespace) -> int:
    packs, errors = validate_datapacks(
        args.dir,
        recursive=args.recursive,
        check_episodes=args.check_episodes,
        enrichment_dir=args.enrichment_dir,
    )
    if args.config is not None:
        try:
            load_curriculum_config(args.config)
        except ConfigError as exc:
            errors.append(str(exc))
    for line in errors:
        print(line)
    n_err = len(errors)
    status = "invalid" if n_err else "valid"
    _summary(
        f"{args.dir}: {status}: {len(packs)} valid datapacks, {n_err} "
        f"error{'' if n_err == 1 else 's'}"
    )
    return 1 if errors else 0


def _summary(line: str) -> None:
    """Print the summary ``line`` on stderr, left out where there is none to write to.

    As the CLI's error lines: with stderr on ``/dev/full`` or a closed pipe the exit code is
    still the check's (not 1 and a traceback that cannot be written either), and without a
    stderr (``2>&-``) the line is not printed on stdout (``print(file=None)``) among the
    errors.
    """
    if sys.stderr is None:
        return
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr)


def _sample(args: argparse.Namespace) -> int:
    sampler = build_sampler(
        args.dir,
        args.config,
        args.strategy,
        None,
        seed=args.seed,
        recursive=args.recursive,
        enrichment_dir=args.enrichment_dir,
    )
    if args.stage is not None:
        assert sampler.curriculum is not None
        sampler.curriculum.set_stage(args.stage)
    sampler.sample_batch(args.batch_size)
    entry: dict[str, Any] = sampler.logs[-1]
    if args.run_dir is not None:
        sampler.write_logs(args.run_dir)
    print(json.dumps(entry, indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``gymcurric datapacks ...``; the exit code."""
    if args.datapacks_command == "validate":
        return _validate(args)
    if args.datapacks_command == "validate-log":
        from gymcurric.datapacks.logschema import validate_sampling_log

        errors = validate_sampling_log(args.log)
        for line in errors:
            print(line)
        n = len(errors)
        _summary(f"{args.log}: {'invalid' if n else 'valid'}: {n} error{'' if n == 1 else 's'}")
        return 1 if errors else 0
    return _sample(args)
