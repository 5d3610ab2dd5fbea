"""Does semantic and risk guidance make PPO-Lagrangian learn safety faster? (issue 26).

The study of the design ``../shared/spec/semantic-risk-safe-rl-ppolagsem.md`` ("PPOLagSem"):
frozen caption embeddings (the shipped all-MiniLM-L6-v2 over the env's ``info["caption"]``)
turned into an annealed shaping term and a short-horizon cost-to-go predictor (the risk head)
that scales λ's step, on top of gymcurric's ``PPOLag``. The pre-registration (goal, metrics,
predictions) is ``reference/semantic_safety/README.md``.

Conditions (:data:`_semantic_setup.CONDITIONS`):

=========== ================================================================================
ppolag      plain PPOLag
pbrs        + potential-based shaping ``β(gamma φ(s') - φ(s))``, ``φ`` the normalised margin,
            β = 0.05 cosine-annealed to 0 at half the budget
additive    + additive shaping ``β m̄`` (same β schedule)
risk        + risk head (``AnnotateRisk(features="caption")``) and ``risk_modulation``
            (``RiskModulation(alpha=1)``: λ's step times M, M in [0.5, 1])
pbrs_risk   pbrs and risk together
null        everything wired in and neutral: shaping with β = 0, the risk head trained, the
            modulation hook with alpha 0 (M = 1): bit-identical to ppolag (a test checks it)
=========== ================================================================================

Envs (:data:`_semantic_setup.ENVS`): ``HazardNav`` (``gymcurric/HazardNav-v0``, captions built
in; 3e5 steps, 4 envs, limit 1) and ``SafetyPointGoal1`` (``gymcurric/SafetyPointGoal1-v0``
with ``caption=True``, issue 26 item 1; 5e5 steps, 1 env, limit 25). Seeds 0-4. Prompt sets
(:mod:`_semantic_prompts`): ``specific`` (primary), ``default``, ``vague``; they apply to the
shaped conditions, the others run once (prompts ``none``).

Lanes (``--lane``): ``core`` = every condition, prompts ``specific`` (the goal is judged
there); ``prompts`` = the shaped conditions with ``default`` and ``vague`` (prompt
sensitivity); ``all`` (default) = both.

Start-up: each env is checked (SafetyPointGoal1 without captions stops with a message), then
probed (:func:`_semantic_setup.run_probe`: every prompt set's ROC AUC on states of a random
walk, through the shaper's own set-up check, which warns on an AUC within 0.05 of 0.5). The
probe goes to ``<out>/probe-<env>.json`` and into every record.

Records: one JSON per (env, condition, prompts, seed) under ``--out`` (default
``reference/semantic_safety/records/``), written as the run goes (:mod:`_semantic_runs`); a
complete record is skipped, an incomplete one is rerun from the start. ``--summarise`` reads
the records alone and prints the tables (:mod:`_semantic_report`; metrics in
:mod:`_semantic_metrics`), writes them to ``<out>/summary.md`` and the figures to
``<out>/figures/`` (or ``--figures``).

    python benchmarks/semantic_safety.py --quick                      # smoke run, ~1 minute
    python benchmarks/semantic_safety.py --envs HazardNav --lane core --seeds 0 1 2 3 4
    python benchmarks/semantic_safety.py --summarise

torch runs on one thread per process (two threads made small-MLP training ~8x slower on this
2-core machine); ``--workers N`` trains N runs at once in separate processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # the --workers processes import the siblings by name
    sys.path.insert(0, str(_HERE))

from _semantic_prompts import NO_PROMPTS, PRIMARY, PROMPT_NAMES  # noqa: E402
from _semantic_report import figures, load_records, summarise  # noqa: E402
from _semantic_runs import RunSpec, record_path, run_one, train_run, write_atomic  # noqa: E402, F401
from _semantic_setup import CONDITIONS, ENVS, check_env, run_probe  # noqa: E402

RECORDS = _HERE / "reference" / "semantic_safety" / "records"
SEEDS = (0, 1, 2, 3, 4)
SHAPED = tuple(c for c, v in CONDITIONS.items() if v.uses_prompts)
LANES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "core": (tuple(CONDITIONS), (PRIMARY,)),
    "prompts": (SHAPED, tuple(p for p in PROMPT_NAMES if p != PRIMARY)),
    "all": (tuple(CONDITIONS), PROMPT_NAMES),
}
QUICK = {"steps": 2048, "probe_steps": 600, "conditions": ("ppolag", "pbrs_risk")}


def plan(
    envs: Sequence[str],
    conditions: Sequence[str],
    prompts: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    steps: int | None = None,
    probes: dict[str, Any] | None = None,
) -> list[RunSpec]:
    """The runs, seed-major (a part-finished study has whole seeds); prompt-free conditions once."""
    specs = []
    for seed in seeds:
        for env in envs:
            for cond in conditions:
                names = prompts if CONDITIONS[cond].uses_prompts else (NO_PROMPTS,)
                for name in names:
                    budget = steps or ENVS[env].budget
                    probe = (probes or {}).get(env)
                    specs.append(RunSpec(env, cond, name, seed, budget, str(out), probe))
    return specs


def _probe(env: str, out: Path, steps: int | None) -> dict[str, Any]:
    t = time.process_time()
    probe = run_probe(env, steps)
    write_atomic(out / f"probe-{env}.json", probe)  # lanes may run side by side
    sets = ", ".join(
        f"{name} {p['auc_soon']:.3f}/{p['auc_now']:.3f}{' (WARNING)' if p['warning'] else ''}"
        for name, p in probe["sets"].items()
    )
    print(
        f"probe {env}: ROC AUC soon/now per prompt set: {sets} "
        f"({probe['states']} states, {time.process_time() - t:.0f} s CPU)",
        flush=True,
    )
    return probe


def _read_probes(out: Path) -> dict[str, dict[str, Any]]:
    probes = {}
    for path in sorted(out.glob("probe-*.json")):
        probes[path.stem.removeprefix("probe-")] = json.loads(path.read_text())
    return probes


def summarise_folder(out: Path, figure_dir: Path | None = None) -> str:
    """Print and write ``<out>/summary.md`` and the figures, from the records alone."""
    records, partial = load_records(out)
    text = summarise(records, partial, _read_probes(out))
    print(text)
    if records:
        (out / "summary.md").write_text(text + "\n")
        for path in figures(records, figure_dir or out / "figures"):
            print(f"figure: {path}")
    return text


def _report(r: dict[str, Any]) -> None:
    m = r["metrics"]
    print(
        f"{r['env']:>16} {r['condition']:>9} {r['prompts']:>8} seed {r['seed']}: cum cost "
        f"{m['cum_cost']:,.0f}, AUC20 {m['return_auc20']:.2f}, last-10 % return "
        f"{m['last10_return']:.2f} cost {m['last10_cost']:.2f}, λ {m['final_lambda']:.2f}, "
        f"{m['cpu_steps_per_s']:.0f} steps/CPU-s, {r['wall_seconds']:.0f} s wall",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the missing runs of the chosen lane (or only summarise)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--envs", nargs="+", choices=tuple(ENVS), default=list(ENVS))
    p.add_argument("--lane", choices=tuple(LANES), default="all")
    p.add_argument("--conditions", nargs="+", choices=tuple(CONDITIONS), default=None)
    p.add_argument("--prompts", nargs="+", choices=PROMPT_NAMES, default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--steps", type=int, default=None, help="budget per run (default: per env)")
    p.add_argument("--probe-steps", type=int, default=None, help="states in the probe walk")
    p.add_argument("--workers", type=int, default=1, help="runs in parallel processes")
    p.add_argument("--out", default=None, help=f"records folder (default {RECORDS})")
    p.add_argument("--summarise", action="store_true", help="only read the records and report")
    p.add_argument("--figures", default=None, help="figure folder (default <out>/figures)")
    p.add_argument("--dry-run", action="store_true", help="list the runs, train nothing")
    p.add_argument("--quick", action="store_true", help="tiny budgets, 1 seed: a smoke run")
    args = p.parse_args(argv)
    conditions, prompts = LANES[args.lane]
    conditions, prompts = args.conditions or conditions, args.prompts or prompts
    if args.quick:
        args.envs, args.seeds = ["HazardNav"], [0]
        conditions = args.conditions or QUICK["conditions"]
        prompts = args.prompts or (PRIMARY,)
        args.steps = min(args.steps or QUICK["steps"], QUICK["steps"])
        args.probe_steps = args.probe_steps or QUICK["probe_steps"]
        if args.out is None:
            args.out = tempfile.mkdtemp(prefix="semantic_safety_")
    out = Path(args.out) if args.out else RECORDS
    figure_dir = Path(args.figures) if args.figures else None
    if args.summarise:
        summarise_folder(out, figure_dir)
        return 0
    for env in args.envs:
        why = check_env(env)
        if why is not None:
            raise SystemExit(f"semantic_safety.py: {why}")
    todo = [
        s
        for s in plan(args.envs, conditions, prompts, args.seeds, out, args.steps)
        if not _complete(s.path)
    ]
    print(f"{len(todo)} runs to do in {out}", flush=True)
    if args.dry_run:
        for s in todo:
            print(f"  {s.env} {s.condition} {s.prompts} seed {s.seed}: {s.budget:,} steps")
        return 0
    if not todo:
        summarise_folder(out, figure_dir)
        return 0
    probes = {env: _probe(env, out, args.probe_steps) for env in sorted({s.env for s in todo})}
    todo = [s._replace(probe=probes[s.env]) for s in todo]
    start = time.perf_counter()
    if args.workers <= 1:
        for spec in todo:
            _report(run_one(spec))
    else:
        # spawn: forking a process whose torch already ran (the probe's MiniLM) can hang
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.workers, mp_context=spawn) as pool:
            for fut in as_completed([pool.submit(run_one, s) for s in todo]):
                _report(fut.result())
    print(f"\n{len(todo)} runs in {time.perf_counter() - start:.0f} s; records in {out}\n")
    summarise_folder(out, figure_dir)
    return 0


def _complete(path: Path) -> bool:
    """Whether a complete record is already at ``path`` (an incomplete one is rerun)."""
    if not path.exists():
        return False
    try:
        done = bool(json.loads(path.read_text()).get("complete"))
    except (OSError, ValueError):
        return False
    if done:
        print(f"exists, skipped: {path}")
    else:
        print(f"incomplete, rerun from the start: {path}")
    return done


if __name__ == "__main__":
    raise SystemExit(main())
