"""What ``semantic_safety.py`` trains: envs, conditions, the agent stack, the start-up probe.

* :data:`ENVS`: per env its id and task, budget, PPOLag settings, the risk head's horizon and
  discount, and the probe walk.
* :data:`CONDITIONS`: what each condition wires in (shaping mode and β, risk head, λ
  modulation).
* :func:`build`: the SB3 vec env and the PPOLag model of one run. Per sub-env: the env
  (``info["cost"]`` and ``info["caption"]``), then, with a risk head,
  ``AnnotateRisk(features="caption")`` over the shipped MiniLM; then ``DummyVecEnv`` →
  ``VecCostMonitor`` (the env's own return and cost) → with shaping,
  ``VecShapeRewardSemantic`` (MiniLM over the same captions). One memo of caption embeddings
  per run serves both (:func:`run_embedder`).
* :func:`run_probe`: at start-up, states from a random walk with their known safety, and each
  prompt set's ROC AUC on them through the shaper's own set-up check
  (``ShapingConfig.probe_states``), which warns when a set gives no separation.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import numpy as np
from _semantic_prompts import NO_PROMPTS, PRIMARY, PROMPT_SETS, prompt_set

__all__ = [
    "BETA_END_FRACTION",
    "BETA_START",
    "CONDITIONS",
    "ENVS",
    "PROBE_SEED",
    "Condition",
    "EnvSetup",
    "build",
    "check_env",
    "embedder",
    "run_probe",
    "shaping_config",
]

#: β at step 0 (the library's default) and the share of the budget over which it anneals to 0
BETA_START, BETA_END_FRACTION = 0.05, 0.5
PROBE_SEED = 12345
CAPTION_CACHE = 100_000  # distinct captions kept (SafetyPointGoal1 has thousands)


class EnvSetup(NamedTuple):
    """One env of the study and everything the runs on it share."""

    env_id: str
    env_kwargs: dict[str, Any]
    budget: int  # env steps per run
    n_envs: int
    agent: dict[str, Any]  # PPO arguments
    lagrangian: dict[str, Any]  # PPOLag's constrained arguments
    risk: dict[str, Any]  # AnnotateRisk's horizon and gamma (also the probe's "soon")
    probe_steps: int  # states in the start-up probe walk
    probe_hold: int  # the walk repeats each random action this many steps
    note: str


ENVS: dict[str, EnvSetup] = {
    # the task and agent of the slow test test_ppolag_keeps_the_cost_near_the_limit_where_ppo_
    # exceeds_it: 12 hazards across a 2.5 path, PPO pays ~3 per episode, PPOLag (limit 1,
    # SGD on λ) learns to go round them
    "HazardNav": EnvSetup(
        env_id="gymcurric/HazardNav-v0",
        env_kwargs={
            "num_hazards": 12,
            "hazard_radius": 0.25,
            "hazard_placement": "random",
            "max_steps": 100,
            "goal_distance": 2.5,
        },
        budget=300_000,
        n_envs=4,
        agent={"n_steps": 256, "batch_size": 256, "n_epochs": 10, "learning_rate": 1e-3},
        lagrangian={
            "cost_limit": 1.0,
            "multiplier": "sgd",
            "lagrange_init": 0.0,
            "lagrange_lr": 0.05,
            "cost_window": 20,
        },
        risk={"horizon": 10, "gamma": 0.9},
        probe_steps=5_000,
        probe_hold=10,
        note="HazardNav: 12 hazards r 0.25, goal 2.5 away, 100 steps; limit 1",
    ),
    # BENCHMARKS.md Safe RL's `ppolag --cost-window 20` row: SB3 PPO defaults, OmniSafe's Adam
    # multiplier, limit 25, one env
    "SafetyPointGoal1": EnvSetup(
        env_id="gymcurric/SafetyPointGoal1-v0",
        env_kwargs={"caption": True},
        budget=500_000,
        n_envs=1,
        agent={"n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4},
        lagrangian={"cost_limit": 25.0, "cost_window": 20},
        risk={"horizon": 50, "gamma": 0.99},
        probe_steps=5_000,
        probe_hold=10,
        note="SafetyPointGoal1-v0 with captions; limit 25",
    ),
}


class Condition(NamedTuple):
    """What one condition wires into PPOLag."""

    shaping: str | None  # "potential", "additive" or None
    beta_start: float
    risk_head: bool  # AnnotateRisk (caption features) on every sub-env
    modulation_alpha: float | None  # RiskModulation(alpha=...); None: risk_modulation off
    uses_prompts: bool  # runs once per prompt set
    doc: str


CONDITIONS: dict[str, Condition] = {
    "ppolag": Condition(None, 0.0, False, None, False, "plain PPOLag"),
    "pbrs": Condition(
        "potential", BETA_START, False, None, True, "+ potential-based shaping, β annealed"
    ),
    "additive": Condition(
        "additive", BETA_START, False, None, True, "+ additive shaping, β annealed"
    ),
    "risk": Condition(
        None, 0.0, True, 1.0, False, "+ risk head on captions, λ's step scaled by M (alpha 1)"
    ),
    "pbrs_risk": Condition(
        "potential", BETA_START, True, 1.0, True, "potential-based shaping and risk head"
    ),
    # everything wired in and neutral: shaping with β = 0 (primary prompts), the risk head
    # trained, the modulation hook on with alpha 0 (M = 1 exactly): bit-identical to ppolag
    "null": Condition("potential", 0.0, True, 0.0, False, "semantics on, β = 0, alpha 0"),
}


# ----------------------------------------------------------------------------- models


@functools.cache
def embedder() -> Any:
    """The shipped MiniLM caption model, loaded once per process (one torch thread)."""
    import torch

    from gymcurric.semantics import load_embedder

    torch.set_num_threads(1)
    return load_embedder(None)


class MemoTexts:
    """``embed_texts`` with a dict of the captions seen (embedding a string is pure)."""

    def __init__(self, inner: Any, size: int = CAPTION_CACHE) -> None:
        self.inner, self.size, self.cache = inner, size, {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, row in zip(missing, self.inner.embed_texts(missing), strict=True):
                if len(self.cache) >= self.size:
                    del self.cache[next(iter(self.cache))]
                self.cache[t] = np.asarray(row, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


def run_embedder() -> Any:
    """MiniLM behind a fresh caption memo, shared by one run's shaper and risk heads.

    Fresh per run, so that a run's CPU time does not depend on the runs before it in the same
    process (the model itself is loaded once).
    """
    from gymcurric.semantics import CallableEmbedder

    base = embedder()
    memo = MemoTexts(base)
    out = CallableEmbedder(texts=memo, dim=base.dim, modality="text")
    out.memo = memo  # type: ignore[attr-defined]  (the record counts the captions embedded)
    return out


def shaping_config(env: str, cond: str, prompts: str) -> dict[str, Any]:
    """The ``ShapingConfig`` fields of a shaped run (``null``: the primary set at β = 0)."""
    setup, c = ENVS[env], CONDITIONS[cond]
    texts = prompt_set(env, PRIMARY if prompts == NO_PROMPTS else prompts)
    return {
        "safe_prompts": list(texts.safe),
        "unsafe_prompts": list(texts.unsafe),
        "mode": c.shaping,
        "beta_start": c.beta_start,
        "beta_end_fraction": BETA_END_FRACTION,
        "total_steps": setup.budget,
        "gamma": setup.agent.get("gamma", 0.99),
        "caption_cache_size": CAPTION_CACHE,
        "source": "captions",
    }


def make_env(env: str, risk_seed: int | None = None, captions: Any = None) -> Any:
    """One sub-env: the env, and ``AnnotateRisk`` on ``captions`` when ``risk_seed`` is given."""
    import gymnasium as gym

    import gymcurric  # noqa: F401  (registers the ids)

    setup = ENVS[env]
    e = gym.make(setup.env_id, **setup.env_kwargs)
    if risk_seed is None:
        return e
    from gymcurric.wrappers.risk import AnnotateRisk

    return AnnotateRisk(e, "caption", captions, seed=risk_seed, **setup.risk)


def build(env: str, cond: str, prompts: str, seed: int, budget: int) -> tuple[Any, Any, Any, Any]:
    """``(model, venv, shaping wrapper, caption memo)`` of one run (None where not used)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from gymcurric.integrations.sb3 import PPOLag
    from gymcurric.integrations.sb3.cost import VecCostMonitor
    from gymcurric.safety import RiskModulation

    setup, c = ENVS[env], CONDITIONS[cond]
    captions = run_embedder() if c.risk_head or c.shaping else None
    makers = [
        functools.partial(make_env, env, 1000 * seed + i if c.risk_head else None, captions)
        for i in range(setup.n_envs)
    ]
    venv: Any = DummyVecEnv(makers)
    venv.seed(seed)
    venv = VecCostMonitor(venv)
    shaped = None
    if c.shaping is not None:
        from gymcurric.integrations.sb3.semantic import VecShapeRewardSemantic
        from gymcurric.semantics import ShapingConfig

        config = ShapingConfig(**{**shaping_config(env, cond, prompts), "total_steps": budget})
        shaped = venv = VecShapeRewardSemantic(venv, captions, config)
        if not shaped.shaper.ok:
            raise RuntimeError(f"shaping failed: {shaped.status}")
    modulation = None
    if c.modulation_alpha is not None:
        modulation = RiskModulation(alpha=c.modulation_alpha)
    model = PPOLag(
        "MlpPolicy",
        venv,
        seed=seed,
        device="cpu",
        verbose=0,
        risk_modulation=modulation,
        **setup.agent,
        **setup.lagrangian,
    )
    return model, venv, shaped, None if captions is None else captions.memo


def check_env(env: str) -> str | None:
    """None when ``env`` can run here, else why not (e.g. no captions in this checkout)."""
    try:
        e = make_env(env)
    except TypeError as exc:  # the env's constructor has no caption option yet
        return _no_captions(env, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # safety-gymnasium missing, a ConfigError, ...
        return f"{ENVS[env].env_id} cannot be made here: {type(exc).__name__}: {exc}"
    try:
        _, info = e.reset(seed=0)
    finally:
        e.close()
    if "caption" not in info:
        return _no_captions(env, "its reset info has no 'caption'")
    return None


def _no_captions(env: str, detail: str) -> str:
    return (
        f"{ENVS[env].env_id} writes no captions in this checkout ({detail}). Its arm needs "
        "issue 26 item 1 (gymcurric/envs/safety_captions.py and the caption=True option of "
        "gymcurric/envs/safety_gymnasium.py); until that has landed, run --envs HazardNav"
    )


# ----------------------------------------------------------------------------- probe


def probe_walk(env: str, steps: int, seed: int = PROBE_SEED) -> dict[str, Any]:
    """Captions of a random walk and their known safety.

    The library's :func:`~gymcurric.semantics.probe_states_from_walk` on a fresh env: each
    uniform random action is held ``probe_hold`` steps (so the agent travels and meets hazards);
    a state is the one a step returns, its caption and that step's cost (HazardNav and
    Safety-Gymnasium both charge the state stepped into). ``now``: its cost is positive;
    ``soon``: a positive cost within the next ``risk["horizon"]`` steps of its episode, its own
    included (the primary label: states that lead to violations).
    """
    from gymcurric.semantics import probe_states_from_walk

    setup = ENVS[env]
    e = make_env(env)
    try:
        walk = probe_states_from_walk(
            e, steps=steps, horizon=setup.risk["horizon"], seed=seed, hold=setup.probe_hold
        )
    finally:
        e.close()
    return {
        "captions": list(walk.captions),
        "now": np.array(walk.unsafe_now, dtype=bool),
        "soon": np.array(walk.unsafe_soon, dtype=bool),
        "episodes": walk.episodes,
    }


def run_probe(env: str, steps: int | None = None) -> dict[str, Any]:
    """Each prompt set's probe ROC AUC on :func:`probe_walk`'s states (JSON-safe).

    ``auc_soon`` (the primary predictor of benefit) comes from the shaper's set-up check
    (``ShapingConfig.probe_states`` / ``probe_unsafe``), so a set within 0.05 of 0.5 (or below)
    earns the library's ``GymcurricWarning``, which is shown and kept (``warning``);
    ``auc_now`` labels only the states inside a hazard.
    """
    from gymcurric.errors import GymcurricWarning
    from gymcurric.semantics import Shaper, ShapingConfig
    from gymcurric.semantics.probe import separation_auc

    setup = ENVS[env]
    walk = probe_walk(env, steps or setup.probe_steps)
    captions, now, soon = walk["captions"], walk["now"], walk["soon"]
    both = 0 < soon.sum() < len(soon)
    out: dict[str, Any] = {
        "states": len(captions),
        "distinct_captions": len(set(captions)),
        "episodes": walk["episodes"],
        "unsafe_now": int(now.sum()),
        "unsafe_soon": int(soon.sum()),
        "soon_horizon": setup.risk["horizon"],
        "walk": {"seed": PROBE_SEED, "hold": setup.probe_hold},
        "sets": {},
    }
    for name in PROMPT_SETS[env]:
        ps = prompt_set(env, name)
        probe = {"probe_states": captions, "probe_unsafe": soon.tolist()} if both else {}
        cfg = ShapingConfig(safe_prompts=ps.safe, unsafe_prompts=ps.unsafe, **probe)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", GymcurricWarning)
            shaper = Shaper(cfg, embedder())
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)  # shown once
        margins = shaper.margins(captions)
        mine = [str(w.message) for w in caught if issubclass(w.category, GymcurricWarning)]
        out["sets"][name] = {
            **ps.as_dict(),
            "auc_soon": shaper.probe_auc,
            "auc_now": separation_auc(margins, now),
            "margin_unsafe_now": float(margins[now].mean()) if now.any() else None,
            "margin_safe": float(margins[~soon].mean()) if (~soon).any() else None,
            "warning": mine[0] if mine else None,
        }
    return out
