"""OmniSafe 0.5.0 and gymcurric's safe-RL agents side by side on SafetyPointGoal1-v0 (issue 25).

Three commands::

    # once: OmniSafe 0.5.0 in its own venv, .omnisafe-venv/ (a few minutes; idempotent)
    .venv/bin/python benchmarks/omnisafe_side_by_side.py --setup

    # one run: LIB in {omnisafe, gymcurric}, ALGO in {ppolag, cppopid, cpo}
    .venv/bin/python benchmarks/omnisafe_side_by_side.py --lib LIB --algo ALGO --seed 0 \\
        --steps 500000 --out benchmarks/reference/omnisafe_side_by_side

    # the table (markdown + JSON) and the curves
    .venv/bin/python benchmarks/omnisafe_side_by_side.py \\
        --summarise benchmarks/reference/omnisafe_side_by_side

A run writes ``OUT/<lib>__<algo>__s<seed>.csv`` (one row per epoch: env steps, return and cost
means over the last 100 episodes — computed by the same code from every episode for both
libraries —, λ, wall seconds, env steps/s; the schema is in ``_omnisafe_records.py``),
``..._episodes.csv`` (every episode) and ``....json`` (the config that ran, versions, times);
an OmniSafe run also ``..._progress.csv`` (OmniSafe's own log, copied). OmniSafe's log
directory (``config.json``, the saved models, its console output) goes to ``--raw-dir``
(default ``benchmarks/results/omnisafe_raw/``, git-ignored). The env is SafetyPointGoal1-v0
with cost limit 25 in both.

**OmniSafe side.** ``omnisafe.Agent(ALGO, 'SafetyPointGoal1-v0', custom_cfgs=...)`` runs in
``.omnisafe-venv`` as a subprocess (``_omnisafe_runner.py``) with OmniSafe's default config
(``configs/on-policy/{PPOLag,CPPOPID,CPO}.yaml``) except ``seed``, ``total_steps``, device
cpu, ``torch_threads`` 1 (default 16), ``vector_env_nums`` 1 and ``parallel`` 1 (both
defaults, set explicitly), wandb and tensorboard off, and ``steps_per_epoch`` only when
``--steps-per-epoch`` is given. Its env is safety-gymnasium 1.0.0 on mujoco 2.3.3 and
gymnasium 0.28.1 (ours: the same package on mujoco 4.0.0 / gymnasium 1.4.0, through
``gymcurric.envs``): same task, not bit-identical trajectories. Seeds are passed as they are.

**gymcurric side.** PPOLag, PPOPIDLag (= CPPOPID) and CPO with OmniSafe's defaults mirrored
(``_omnisafe_ours.py``), one env built as ``benchmarks/safety_gym.py`` builds it. torch runs on
one thread in both (``torch.set_num_threads(1)``, and ``OMP_NUM_THREADS=1`` for OmniSafe's
process): on 2 cores more threads only slow small MLPs down.

=====================================  ==============================  ==========================
OmniSafe default (PPOLag, CPPOPID)      gymcurric                       matched?
=====================================  ==============================  ==========================
steps_per_epoch 20000, 1 env            ``n_steps`` 20000 (1 rollout    yes
                                        = 1 epoch)
update_iters 40, batch_size 64          ``n_epochs`` 40, batch 64;      yes
                                        ``cost_n_epochs`` 40
target_kl 0.02: full-batch KL after     ``target_kl`` 0.02/1.5: SB3     no: same threshold,
each pass, stop if > 0.02               stops at a minibatch whose      other estimator and
                                        approx KL > 1.5·target_kl       granularity; our cost
                                                                        critic never stops
clip 0.2, entropy_coef 0                ``clip_range`` 0.2, ent 0       yes
gamma .99, lam .95, cost_gamma .99,     ``gamma``, ``gae_lambda``,      yes
lam_c .95                               ``cost_gamma``,
                                        ``cost_gae_lambda``
obs_normalize (clip 5), reward/cost     ``VecNormalize(norm_obs,        nearly: std floor 1e-2
not normalised                          norm_reward=False)``,           vs √(var+1e-8); OmniSafe
                                        ``clip_obs`` 5                  passes obs 1 raw
standardized_rew_adv,                   ``normalize_advantage``,        no: OmniSafe over the
standardized_cost_adv (A_c centred)     ``center_cost_advantage``       epoch, ours per
                                                                        minibatch of 64
max_grad_norm 40 (actor, each critic)   ``max_grad_norm`` 40 (actor     nearly: SB3 clips actor
                                        and reward critic together),    and reward critic as
                                        ``cost_max_grad_norm`` 40       one vector
use_critic_norm, critic_norm_coef       —                               no: SB3's optimiser is
0.001 (L2 on critic weights)                                            shared with the actor
critic loss MSE (own Adam)              ``vf_coef`` 1                   yes (Adam per param.)
actor lr 3e-4, LinearLR → 0 per epoch   lr schedule 3e-4·(1 - k/E)      actor yes; but SB3 also
critics lr 3e-4 constant                at epoch k of E                 decays both critics' lr
MLP [64, 64] tanh, kaiming_uniform,     ``net_arch`` pi/vf [64, 64],    yes (PyTorch's default
Gaussian with learned log_std = 0       Tanh, ``ortho_init=False``,     Linear init is
                                        ``log_std_init`` 0              kaiming_uniform(a=√5))
cost_limit 25; J_c = mean cost of the   ``cost_limit`` 25,              yes (the note's 100 is
last **50** episodes (logger window)    ``cost_window`` 50              not what 0.5.0 does)
PPOLag: λ init 0.001, Adam lr 0.035,    ``lagrange_init`` 0.001,        yes
λ ≥ 0, updated before the policy        ``lagrange_lr`` 0.035, adam
CPPOPID: kp .1, ki .01, kd .01,         ``PPOPIDLag(kp, ki, kd,         yes (per rollout = per
d_delay 10, EMA alpha .95, penalty_max  d_delay, p/d_ema_alpha,         epoch, so
100, sum_norm (A_r - λA_c)/(1+λ)        penalty_max)``                  ``pid_epoch_steps`` None)
env reset at each epoch start           SB3 keeps the episode going     same when steps_per_epoch
                                                                        is a multiple of 1000
=====================================  ==============================  ==========================

=====================================  ==============================  ==========================
OmniSafe default (CPO)                  gymcurric ``CPO``               matched?
=====================================  ==============================  ==========================
steps_per_epoch 20000                   ``n_steps`` 20000               yes
critics: update_iters 10, batch 128,    ``n_critic_updates`` 10,        yes
lr 1e-3 constant                        ``cost_n_epochs`` 10, batch
                                        128, ``learning_rate`` 1e-3
target_kl 0.01, cg_iters 15,            ``target_kl`` 0.01,             yes
cg_damping 0.1, fvp_sample_freq 1       ``cg_max_steps`` 15,
                                        ``cg_damping`` 0.1,
                                        ``sub_sampling_factor`` 1
line search 20 steps, decay 0.8         ``line_search_max_iter`` 20,    yes
                                        shrinking 0.8
max_grad_norm 40 on both critics        ``cost_max_grad_norm`` 40;      no for the reward
                                        sb3-contrib's reward critic     critic
                                        is not clipped
critic_norm_coef 0.001                  —                               no
c = J_c - d (J_c: 50-episode window)    ``constraint_scale``            no, on purpose (issue
                                        "reference": (J_c - d)/L;       25: follow the paper);
                                        ``cost_window`` 50              ``--cpo-constraint-scale
                                                                        omnisafe`` for parity
=====================================  ==============================  ==========================

The gymcurric CPO is imported lazily: in a checkout without
``gymcurric.integrations.sb3.CPO``, ``--lib gymcurric --algo cpo`` stops with a message.

``--summarise DIR``: per (lib, algo) the return and cost over the last 10 % of env steps of
each seed (the mean of the episodes that ended there, from ``..._episodes.csv``), their mean
with a 95 % Student-t interval, env steps/s of each run (training and updates, from the start
of learning; the host's load shows in it, so compare runs made in the same hour) and the
ratio gymcurric/OmniSafe of the mean steps/s; ``summary.md``, ``summary.json`` and
``curves_<algo>.png`` (matplotlib, when installed). Seeds without a run are listed as missing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _omnisafe_records import (  # noqa: E402
    ALGOS,
    LIBS,
    check_against_progress,
    convert_progress,
    read_episodes,
    run_stem,
    write_episodes,
    write_rows,
)
from _omnisafe_setup import VENV, VENV_PYTHON  # noqa: E402

OMNISAFE_NAMES = {"ppolag": "PPOLag", "cppopid": "CPPOPID", "cpo": "CPO"}
ENV = "SafetyPointGoal1-v0"
DEFAULT_STEPS_PER_EPOCH = 20_000
RUNNER = _HERE / "_omnisafe_runner.py"
RAW_DIR = _HERE / "results" / "omnisafe_raw"  # benchmarks/results/ is git-ignored


def _check_run_args(args: argparse.Namespace) -> None:
    for name in ("algo", "seed", "steps", "out"):
        if getattr(args, name) is None:
            raise SystemExit(f"--lib {args.lib}: --{name} is required")
    if args.seed < 0:
        raise SystemExit(f"--seed must be >= 0, got {args.seed}")
    spe = args.steps_per_epoch or DEFAULT_STEPS_PER_EPOCH
    if args.steps_per_epoch is not None and args.steps_per_epoch <= 0:
        raise SystemExit(f"--steps-per-epoch must be > 0, got {args.steps_per_epoch}")
    if args.steps <= 0 or args.steps % spe:
        raise SystemExit(
            f"--steps must be a positive multiple of the steps per epoch ({spe}), got "
            f"{args.steps} (OmniSafe runs total_steps // steps_per_epoch whole epochs)"
        )


def run_omnisafe(args: argparse.Namespace) -> Path:
    """One OmniSafe run in its venv; its progress.csv converted to the common schema."""
    if not VENV_PYTHON.exists():
        raise SystemExit(
            f"--lib omnisafe needs the OmniSafe venv, and {VENV_PYTHON} does not exist; "
            "create it with: .venv/bin/python benchmarks/omnisafe_side_by_side.py --setup"
        )
    stem = run_stem("omnisafe", args.algo, args.seed)
    out: Path = args.out
    raw = args.raw_dir / stem
    if raw.exists():
        shutil.rmtree(raw)  # a rerun replaces the run; OmniSafe would add a second dir
    raw.mkdir(parents=True)
    cmd = [
        str(VENV_PYTHON),
        str(RUNNER),
        "--algo", OMNISAFE_NAMES[args.algo],
        "--env", ENV,
        "--seed", str(args.seed),
        "--steps", str(args.steps),
        "--log-dir", str(raw),
        "--episodes", str(raw / "episodes.csv"),
        "--meta", str(raw / "runner.json"),
    ]  # fmt: skip
    if args.steps_per_epoch is not None:
        cmd += ["--steps-per-epoch", str(args.steps_per_epoch)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    env.pop("PYTHONPATH", None)  # nothing of gymcurric's venv may leak into OmniSafe's
    print(f"[omnisafe] {' '.join(cmd)}\n[omnisafe] log: {raw / 'stdout.log'}", flush=True)
    t0 = time.perf_counter()
    with (raw / "stdout.log").open("w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (raw / "stdout.log").read_text()[-3000:]
        raise SystemExit(f"OmniSafe run failed (exit {proc.returncode}); log tail:\n{tail}")
    progress = sorted(raw.rglob("progress.csv"))
    if len(progress) != 1:
        raise SystemExit(f"expected one progress.csv under {raw}, found {len(progress)}")
    episodes = read_episodes(raw / "episodes.csv")
    meta = json.loads((raw / "runner.json").read_text())
    rows = convert_progress(progress[0], episodes, meta["epoch_cpu_s"])
    problems = check_against_progress(rows, progress[0])
    for p in problems:
        print(f"[omnisafe] WARNING: window mismatch with progress.csv: {p}", flush=True)
    write_rows(out / f"{stem}.csv", rows)
    write_episodes(out / f"{stem}_episodes.csv", episodes)
    shutil.copyfile(progress[0], out / f"{stem}_progress.csv")
    meta.update(
        lib="omnisafe",
        algo=args.algo,
        seed=args.seed,
        env=ENV,
        process_s=process_s,
        omnisafe_log_dir=str(progress[0].parent),
        window_mismatches=problems,
    )
    (out / f"{stem}.json").write_text(json.dumps(meta, indent=2, default=str))
    return out / f"{stem}.csv"


def run_gymcurric(args: argparse.Namespace) -> Path:
    """One run of our agent with OmniSafe's defaults mirrored."""
    import torch as th

    th.set_num_threads(1)
    from _omnisafe_ours import EpochRecorder, make_model, make_venv

    stem = run_stem("gymcurric", args.algo, args.seed)
    out: Path = args.out
    t0 = time.perf_counter()
    rec = EpochRecorder(
        out / f"{stem}.csv", out / f"{stem}_episodes.csv", has_multiplier=args.algo != "cpo"
    )
    with warnings.catch_warnings():
        # 20000 (OmniSafe's epoch) is not a multiple of 64: the last minibatch is short, as
        # in OmniSafe's DataLoader (SB3 warns about it when the model is built)
        warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
        venv = make_venv(args.seed)
        model = make_model(
            args.algo, venv, args.seed, args.steps, args.steps_per_epoch, args.cpo_constraint_scale
        )
        t_learn = time.perf_counter()
        model.learn(args.steps, callback=rec)
    learn_s = time.perf_counter() - t_learn
    venv.close()
    import stable_baselines3

    import gymcurric

    settings = {
        k: (v if isinstance(v, int | float | str | bool | type(None)) else repr(v))
        for k, v in vars(model).items()
        if k
        in {
            "n_steps", "batch_size", "n_epochs", "target_kl", "gamma", "gae_lambda", "ent_coef",
            "vf_coef", "max_grad_norm", "cost_window", "cost_n_epochs", "cost_max_grad_norm",
            "n_critic_updates", "cg_max_steps", "cg_damping", "line_search_max_iter",
            "line_search_shrinking_factor", "sub_sampling_factor", "constraint_scale",
        }
    }  # fmt: skip
    meta = {
        "lib": "gymcurric",
        "algo": args.algo,
        "seed": args.seed,
        "env": ENV,
        "class": type(model).__name__,
        "gymcurric": getattr(gymcurric, "__version__", "?"),
        "stable_baselines3": stable_baselines3.__version__,
        "torch": th.__version__,
        "python": platform.python_version(),
        "torch_threads": th.get_num_threads(),
        "settings": settings,
        "env_steps": int(model.num_timesteps),
        "import_and_build_s": t_learn - t0,
        "learn_s": learn_s,
        "final_lambda": rec.rows[-1]["lagrange_multiplier"] if rec.rows else None,
    }
    (out / f"{stem}.json").write_text(json.dumps(meta, indent=2, default=str))
    return out / f"{stem}.csv"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--setup", action="store_true", help="create .omnisafe-venv (idempotent)")
    mode.add_argument("--lib", choices=LIBS, help="run one (lib, algo, seed)")
    mode.add_argument("--summarise", type=Path, metavar="DIR", help="table and curves of DIR")
    p.add_argument("--algo", choices=ALGOS)
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int, help="env steps (a multiple of the epoch)")
    p.add_argument("--out", type=Path, help="where the run's files go")
    p.add_argument(
        "--steps-per-epoch",
        type=int,
        default=None,
        help="both libraries' epoch (= our rollout); default OmniSafe's 20000",
    )
    p.add_argument(
        "--raw-dir",
        type=Path,
        default=RAW_DIR,
        help="where OmniSafe's own log dirs go (saved models included; git-ignored default)",
    )
    p.add_argument(
        "--cpo-constraint-scale",
        choices=("reference", "omnisafe"),
        default="reference",
        help="gymcurric CPO only: c = (J_c - d)/L as the reference code (default) or J_c - d",
    )
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS), help="--summarise")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="--summarise")
    p.add_argument("--cost-limit", type=float, default=25.0, help="--summarise: plotted line")
    args = p.parse_args(argv)

    if args.setup:
        from _omnisafe_setup import setup_venv

        setup_venv()
        print(f"OmniSafe venv ready: {VENV}")
        return 0
    if args.summarise is not None:
        from _omnisafe_summary import summarise

        if not args.summarise.is_dir():
            raise SystemExit(f"--summarise: {args.summarise} is not a directory")
        summarise(args.summarise, args.algos, args.seeds, args.cost_limit)
        return 0
    _check_run_args(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = run_omnisafe(args) if args.lib == "omnisafe" else run_gymcurric(args)
    from _omnisafe_records import read_rows

    last = read_rows(path)[-1]
    print(
        f"{args.lib} {args.algo} s{args.seed}: {int(last['env_steps'])} steps, "
        f"return {last['ep_ret']:.2f} cost {last['ep_cost']:.2f} (mean of the last "
        f"{min(100, int(last['episodes']))} episodes), λ {last['lagrange_multiplier']:.4g}, "
        f"{last['steps_per_s']:.1f} env steps/s -> {path}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
