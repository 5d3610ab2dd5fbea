"""Check that ``ReplayRing(..., cuda_graphs=True)`` draws exactly what the eager ring draws.

``benchmarks/replay.py --check-graphs`` (``benchmarks/gpu.py`` passes it) runs :func:`check` on
its ``--device``: two device-index rings written with the same steps, one replaying its
uniform draws from CUDA graphs, the other drawing eagerly, each with its own generator seeded
alike. Every field of every draw and the generators' states after each draw must be equal, over
pushes between draws (the oldest row moves), several batch shapes, and eager draws (with
``next_obs``) in between. On CPU the graphed ring runs the captured form eagerly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from _replay_cases import Stream

SHAPES = ((256, 8), (32, 1), (256, 8), (7, 3))


def same(a: Any, b: Any) -> list[str]:
    """The fields of two ``Transitions`` that differ (empty: bit-identical)."""
    pairs = zip(a._fields[:-1], a[:-1], b[:-1], strict=True)
    differ = [f for f, x, y in pairs if not torch.equal(x, y)]
    differ += [f"extras.{n}" for n in a.extras if not torch.equal(a.extras[n], b.extras[n])]
    return differ


def check(device: str, rows: int = 96, num_envs: int = 16, rounds: int = 12) -> dict[str, Any]:
    """Compare the graphed ring's draws with the eager ring's (see the module)."""
    from gymcurric.replay import ReplayRing

    fields = {"obs": ((8, 8, 3), torch.uint8), "action": ((6,), torch.float32)}
    graphed = ReplayRing(rows, num_envs, fields, device, index_strategy="device", cuda_graphs=True)
    eager = ReplayRing(rows, num_envs, fields, device, index_strategy="device")
    stream = Stream(num_envs, (8, 8, 3), np.uint8, seed=3, device=device, flags="tensor")
    stream.ep_len = 40  # episode ends (side-store entries) in most rows

    def push() -> None:
        s = stream.next_device()
        for ring in (graphed, eager):
            ring.push_step(
                s.obs, s.action, s.reward, terminated=s.terminated, truncated=s.truncated,
                final_obs=s.final_obs,
            )  # fmt: skip

    for _ in range(rows + 5):
        push()
    gen_g = torch.Generator(device=device).manual_seed(11)
    gen_e = torch.Generator(device=device).manual_seed(11)
    mismatches: list[str] = []
    draws = 0
    for r in range(rounds):
        for batch, candidates in SHAPES:
            a = graphed.sample_transitions(batch, gen_g, candidates=candidates)
            b = eager.sample_transitions(batch, gen_e, candidates=candidates)
            draws += 1
            differ = same(a, b)
            if not torch.equal(gen_g.get_state(), gen_e.get_state()):
                differ.append("generator state")
            if differ:
                mismatches.append(f"round {r} batch {batch} candidates {candidates}: {differ}")
        if r % 3 == 2:  # an eager draw of the graphed ring (next_obs) in between
            nxt = stream.on_device["obs"][0]
            a = graphed.sample_transitions(64, gen_g, next_obs=nxt)
            b = eager.sample_transitions(64, gen_e, next_obs=nxt)
            differ = same(a, b)
            if differ:
                mismatches.append(f"round {r} next_obs draw: {differ}")
        push()
    graphs = graphed._graphs  # a look inside: were the draws replayed from graphs?
    captured = 0 if graphs is None else sum(d.graph is not None for d in graphs.draws.values())
    return {
        "device": device,
        "draws": draws,
        "equal": not mismatches,
        "mismatches": mismatches[:10],
        "captured_graphs": captured,
    }
