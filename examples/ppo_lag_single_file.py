"""Single-file PPO-Lagrangian on a Gymnasium vector env (CleanRL style, no Stable-Baselines3).

The point of this file: a hand-written agent that only reads ``info["cost"]`` gets every gymcurric
feature without a line of agent code changing. ``make_envs`` is the only place that looks at
``--curriculum``, ``--datapacks``, ``--shaping``, ``--risk`` and ``--saute``; everything below
``Agent`` is the same for all of them.

    python examples/ppo_lag_single_file.py --total-timesteps 50000 --cost-limit 5
    python examples/ppo_lag_single_file.py --curriculum           # learning-progress tasks
    python examples/ppo_lag_single_file.py --datapacks DIR        # staged datapack curriculum
    python examples/ppo_lag_single_file.py --shaping --risk       # MiniLM caption shaping + risk
    python examples/ppo_lag_single_file.py --saute                # Saute budget in the obs

Algorithm (OmniSafe's PPOLag, ``omnisafe/algorithms/on_policy/naive_lagrange/ppo_lag.py``):

* two critics, ``V_r`` and ``V_c``; separate GAE for reward and cost (``gae_lambda``,
  ``cost_gae_lambda``); ``A_r`` standardised, ``A_c`` only centred
  (``common/buffer/vector_onpolicy_buffer.py``);
* the penalised advantage ``A = (A_r - λ·A_c) / (1 + λ)`` (``_compute_adv_surrogate``) in the usual
  clipped surrogate ``-min(r·A, clip(r, 1±ε)·A)`` (r the probability ratio);
* once per iteration, *before* the policy update, λ takes one Adam step on the loss
  ``-λ·(J_c - d)`` (init 0.001, lr 0.035, then clamped at 0; ``omnisafe/common/lagrange.py``),
  where ``J_c`` is the mean undiscounted cost of the last ``cost_window`` finished episodes and
  ``d`` is ``--cost-limit``.

Gymnasium 1.x vector autoreset (``NEXT_STEP``, the default): when sub-env ``i`` ends at step
``t``, the step ``t + 1`` call ignores its action and resets it, returning reward 0 and the first
observation of the new episode. That "reset step" is not a transition: we store it with
``valid = False`` and exclude it from every loss and statistic. It is also what makes the
time-limit bootstrap easy: the observation stored at ``t + 1`` for the reset step is the *final*
observation of the ended episode, so ``V(obs[t + 1])`` is exactly the truncation bootstrap.

Measured (2026-11-22, seed 0, 8 envs, ``--num-steps 128``, shared 2-core CPU), HazardNav with
``--env-kwargs '{"hazard_placement": "between"}'`` (hazards across the straight path), mean of
the last 100 episodes after 100k-200k steps: unconstrained (``--cost-limit 1e9``) return 2.75,
cost 9.2; ``--cost-limit 2`` with OmniSafe's λ lr 0.035: λ rises ~0.035 per iteration (Adam on
a scalar is sign-like) to 3.5 at 200k steps, cost 8.4, still above the limit; ``--cost-limit 2
--lambda-lr 0.2``: cost 54 → 0.7 at 100k steps (λ peaks at 5.8, then falls), return 2.56.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Normal

import gymcurric  # noqa: F401  (registers gymcurric/HazardNav-v0)
from gymcurric.safety.costs import check_vector_cost_dtype


@dataclass
class Args:
    env_id: str = "gymcurric/HazardNav-v0"
    """Gymnasium id of a continuous-action env whose steps report ``info["cost"]``."""
    env_kwargs: str = "{}"
    """JSON dict of env constructor kwargs, e.g. '{"hazard_placement": "between"}'."""
    seed: int = 0
    """Seed of the envs, the torch generator and the curriculum / datapack sampler."""
    device: str = "cpu"
    """Torch device of the agent."""
    total_timesteps: int = 50_000
    """Env steps in all (all sub-envs together)."""
    num_envs: int = 8
    """Number of sub-envs (a Gymnasium ``SyncVectorEnv``)."""
    num_steps: int = 256
    """Vector steps per rollout (one iteration = ``num_envs * num_steps`` env steps)."""
    learning_rate: float = 3e-4
    """Adam learning rate of actor and both critics."""
    gamma: float = 0.99
    """Reward discount."""
    gae_lambda: float = 0.95
    """GAE λ of the reward advantage."""
    cost_gamma: float = 0.99
    """Cost discount."""
    cost_gae_lambda: float = 0.95
    """GAE λ of the cost advantage."""
    update_epochs: int = 10
    """Passes over the rollout per iteration."""
    num_minibatches: int = 8
    """Minibatches per pass."""
    clip_coef: float = 0.2
    """PPO ratio clip ε."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Weight of both value losses."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float = 0.02
    """Stop the epochs of an iteration once the approximate KL exceeds this (0: never)."""
    cost_limit: float = 5.0
    """``d``: the allowed mean episode cost."""
    lagrangian_init: float = 0.001
    """Initial λ (OmniSafe default)."""
    lambda_lr: float = 0.035
    """Adam learning rate of λ (OmniSafe default)."""
    cost_window: int = 100
    """``J_c`` is the mean cost of this many most recent finished episodes."""
    curriculum: bool = False
    """Pick each episode's HazardNav task with a learning-progress curriculum."""
    datapacks: str | None = None
    """Directory of datapacks (JSON/JSONL) presented by the staged datapack curriculum."""
    shaping: bool = False
    """Add semantic reward shaping from the shipped offline MiniLM caption model."""
    risk: bool = False
    """Annotate ``info["risk"]`` with an online risk head (the agent ignores it)."""
    saute: bool = False
    """Append the Saute safety budget (budget ``cost_limit``) to the observation."""


def parse_args(argv: list[str] | None = None) -> Args:
    """Argparse built from ``Args``; each field's docstring is its ``--help`` text."""
    tree = ast.parse(inspect.getsource(Args))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {
        a.target.id: b.value.value
        for a, b in itertools.pairwise(body)
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr)
    }
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs[f.name]
            )
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default, help=docs[f.name])
    return Args(**vars(parser.parse_args(argv)))


# ------------------------------------------------------------------ env construction (only here)
def make_envs(args: Args) -> gym.vector.VectorEnv:
    """The vector env, with the gymcurric features the options ask for."""
    if args.curriculum and args.datapacks:
        raise SystemExit("--curriculum and --datapacks both choose tasks: pick one")
    n, kw = args.num_envs, json.loads(args.env_kwargs)
    if args.curriculum:
        from gymcurric.tasks import BucketedTaskSpace, Curriculum, ReplacementPool, Span
        from gymcurric.wrappers.vector import make_curriculum_vec

        space = BucketedTaskSpace(
            {"num_hazards": [0, 4, 8, 12], "goal_distance": [Span(1.0, 1.8), Span(1.8, 3.0)]},
            base={"arena_size": 4.0, "max_steps": 200},
            seed=args.seed,
        )
        envs: Any = make_curriculum_vec(
            args.env_id,
            Curriculum(space, pool=ReplacementPool(capacity=16), seed=args.seed),
            n,
            **kw,
        )
    elif args.datapacks:
        from gymcurric.datapacks import DataPackRLSampler
        from gymcurric.datapacks.cli import build_sampler
        from gymcurric.wrappers.vector import make_datapack_vec

        sampler = build_sampler(args.datapacks, seed=args.seed)
        packs = [p for p in sampler.table.records if p.env_id == args.env_id]
        if not packs:
            raise SystemExit(f"no datapack in {args.datapacks} is for {args.env_id}")
        if len(packs) < len(sampler.table):  # a mixed set: keep this env's packs
            sampler = DataPackRLSampler(packs, curriculum=sampler.curriculum, seed=args.seed)
        envs = make_datapack_vec(args.env_id, sampler, n, **kw)
    else:
        envs = gym.make_vec(args.env_id, num_envs=n, vectorization_mode="sync", **kw)
    if args.risk:
        from gymcurric.wrappers.vector.risk import AnnotateRisk

        envs = AnnotateRisk(envs, horizon=50, seed=args.seed)
    if args.shaping:
        from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic

        # embedder None: the shipped offline MiniLM caption model, HazardNav prompts by default
        envs = ShapeRewardSemantic(envs, None, {"total_steps": args.total_timesteps})
    if args.saute:
        from gymcurric.wrappers.vector.saute import AugmentStateSaute

        envs = AugmentStateSaute(
            envs, safety_budget=max(args.cost_limit, 1e-3), max_episode_steps=200
        )
    return envs


# ------------------------------------------------------------------ agent (never changes)
def layer(i: int, o: int, std: float = 2**0.5) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


def mlp(i: int, o: int, std: float) -> nn.Sequential:
    return nn.Sequential(layer(i, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, o, std))


class Agent(nn.Module):
    """Gaussian actor, reward critic ``V_r`` and cost critic ``V_c`` (separate MLPs)."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, act_dim, 0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))
        self.critic = mlp(obs_dim, 1, 1.0)
        self.cost_critic = mlp(obs_dim, 1, 1.0)

    def values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.critic(x).squeeze(-1), self.cost_critic(x).squeeze(-1)

    def dist(self, x: torch.Tensor) -> Normal:
        return Normal(self.actor(x), self.log_std.exp())


def gae(
    rew: torch.Tensor,
    val: torch.Tensor,
    next_val: torch.Tensor,
    term: torch.Tensor,
    done: torch.Tensor,
    valid: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """GAE over a rollout of shape (T, N); ``next_val`` is V of the observation after the last step.

    ``delta_t = r_t + gamma·V(s_{t+1})·(1 - term_t) - V(s_t)``: after a truncation ``s_{t+1}`` is
    the stored final observation (the next row is the reset step), so the time limit bootstraps.
    The recursion stops at every episode end; reset-step rows (``valid = 0``) get 0.
    """
    adv = torch.zeros_like(rew)
    last = torch.zeros_like(rew[0])
    for t in reversed(range(rew.shape[0])):
        nv = next_val if t == rew.shape[0] - 1 else val[t + 1]
        delta = rew[t] + gamma * nv * (1.0 - term[t]) - val[t]
        last = (delta + gamma * lam * (1.0 - done[t]) * last) * valid[t]
        adv[t] = last
    return adv


def read_costs(infos: dict[str, Any], n: int) -> np.ndarray:
    """This step's cost per sub-env from the vector info (``cost`` with its ``_cost`` mask).

    Gymnasium types each step's info array by the first sub-env that reports the key, so an env
    that reports ``cost=0`` (int) next to a float cost has the float truncated before we see it;
    ``check_vector_cost_dtype`` warns once when the array arrives as int or bool.
    """
    if "cost" not in infos:
        return np.zeros(n)
    check_vector_cost_dtype(infos["cost"], "examples/ppo_lag_single_file.py")
    return np.where(infos.get("_cost", np.ones(n, bool)), infos["cost"], 0.0).astype(np.float64)


def train(args: Args) -> dict[str, Any]:
    """Run PPO-Lagrangian; returns the per-iteration history, final λ, agent and (closed) envs."""
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(args.seed)  # minibatch shuffles
    torch.manual_seed(args.seed)  # network initialisation and action sampling
    device = torch.device(args.device)
    envs = make_envs(args)
    mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        raise SystemExit(f"this agent expects NEXT_STEP autoreset, got {mode}")
    n, T = args.num_envs, args.num_steps
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    act_space = envs.single_action_space
    agent = Agent(obs_dim, int(np.prod(act_space.shape))).to(device)
    opt = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    lam = nn.Parameter(torch.tensor(max(args.lagrangian_init, 0.0)))
    lam_opt = torch.optim.Adam([lam], lr=args.lambda_lr)

    def buf(*shape: int) -> torch.Tensor:
        return torch.zeros((T, n, *shape), device=device)

    obs_b, act_b, logp_b = buf(obs_dim), buf(*act_space.shape), buf()
    rew_b, cost_b, term_b, done_b, valid_b, val_b, cval_b = (buf() for _ in range(7))
    ep_ret, ep_cost = np.zeros(n), np.zeros(n)
    recent_ret: deque[float] = deque(maxlen=args.cost_window)
    recent_cost: deque[float] = deque(maxlen=args.cost_window)
    saw_cost = False
    history: list[dict[str, float]] = []

    obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(obs_np, dtype=torch.float32, device=device).reshape(n, -1)
    prev_done = np.zeros(n, bool)  # sub-envs whose next step is a reset step
    iterations = max(1, args.total_timesteps // (n * T))
    low, high = act_space.low, act_space.high
    start = time.time()
    for it in range(1, iterations + 1):
        for t in range(T):
            obs_b[t] = next_obs
            valid_b[t] = torch.as_tensor(~prev_done, dtype=torch.float32)
            with torch.no_grad():
                d = agent.dist(next_obs)
                action = d.sample()
                logp_b[t] = d.log_prob(action).sum(-1)
                val_b[t], cval_b[t] = agent.values(next_obs)
            act_b[t] = action
            obs_np, r, term, trunc, infos = envs.step(np.clip(action.cpu().numpy(), low, high))
            c = read_costs(infos, n)
            saw_cost = saw_cost or "cost" in infos
            live = ~prev_done
            rew_b[t] = torch.as_tensor(r * live, dtype=torch.float32)
            cost_b[t] = torch.as_tensor(c * live, dtype=torch.float32)
            done = np.logical_or(term, trunc) & live
            term_b[t] = torch.as_tensor(term & live, dtype=torch.float32)
            done_b[t] = torch.as_tensor(done, dtype=torch.float32)
            ep_ret += r * live
            ep_cost += c * live
            for i in np.flatnonzero(done):
                recent_ret.append(float(ep_ret[i]))
                recent_cost.append(float(ep_cost[i]))
            ep_ret[done], ep_cost[done] = 0.0, 0.0
            prev_done = done
            next_obs = torch.as_tensor(obs_np, dtype=torch.float32, device=device).reshape(n, -1)
        if not saw_cost:
            raise SystemExit(f"{args.env_id} never reported info['cost']: PPO-Lag needs costs")

        # λ first (OmniSafe order): one Adam step on -λ·(J_c - d), then clamp λ ≥ 0.
        jc = float(np.mean(recent_cost)) if recent_cost else 0.0
        if recent_cost:
            lam_opt.zero_grad()
            (-lam * (jc - args.cost_limit)).backward()
            lam_opt.step()
            with torch.no_grad():
                lam.clamp_(min=0.0)
        penalty = float(lam.item())

        with torch.no_grad():
            next_v, next_cv = agent.values(next_obs)
            adv = gae(rew_b, val_b, next_v, term_b, done_b, valid_b, args.gamma, args.gae_lambda)
            cadv = gae(
                cost_b,
                cval_b,
                next_cv,
                term_b,
                done_b,
                valid_b,
                args.cost_gamma,
                args.cost_gae_lambda,
            )
        ret, cret = adv + val_b, cadv + cval_b
        keep = valid_b.reshape(-1) > 0  # drop the reset steps
        b_obs, b_act = obs_b.reshape(-1, obs_dim)[keep], act_b.reshape(-1, *act_space.shape)[keep]
        b_logp, b_adv, b_cadv, b_ret, b_cret = (
            x.reshape(-1)[keep] for x in (logp_b, adv, cadv, ret, cret)
        )
        b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)  # A_r standardised
        b_cadv = b_cadv - b_cadv.mean()  # A_c centred only
        # Penalised advantage, OmniSafe PPOLag._compute_adv_surrogate: A = (A_r - λ·A_c)/(1 + λ)
        b_pen = (b_adv - penalty * b_cadv) / (1.0 + penalty)

        size = b_obs.shape[0]
        mb = max(1, size // args.num_minibatches)
        kl = 0.0
        for _ in range(args.update_epochs):
            perm = torch.randperm(size, generator=gen).to(device)
            for s in range(0, size, mb):
                idx = perm[s : s + mb]
                d = agent.dist(b_obs[idx])
                logp = d.log_prob(b_act[idx]).sum(-1)
                ratio = (logp - b_logp[idx]).exp()
                a = b_pen[idx]
                clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = -torch.min(ratio * a, clipped * a).mean()
                v, cv = agent.values(b_obs[idx])
                v_loss = ((v - b_ret[idx]) ** 2).mean() + ((cv - b_cret[idx]) ** 2).mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * d.entropy().sum(-1).mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
            with torch.no_grad():
                logr = agent.dist(b_obs).log_prob(b_act).sum(-1) - b_logp
                kl = float(((logr.exp() - 1) - logr).mean())
            if args.target_kl and kl > args.target_kl:
                break

        row = {
            "iteration": it,
            "steps": it * n * T,
            "ep_return": float(np.mean(recent_ret)) if recent_ret else float("nan"),
            "ep_cost": jc if recent_cost else float("nan"),
            "lambda": penalty,
            "kl": kl,
        }
        history.append(row)
        print(
            f"iter {it:4d}  steps {row['steps']:8d}  return {row['ep_return']:8.3f}  "
            f"ep_cost {row['ep_cost']:7.2f}  λ {penalty:.4f}  kl {kl:.4f}  "
            f"sps {int(row['steps'] / (time.time() - start))}",
            flush=True,
        )
    envs.close()
    return {"history": history, "lambda": float(lam.item()), "agent": agent, "envs": envs}


if __name__ == "__main__":
    train(parse_args())
