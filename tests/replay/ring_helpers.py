"""Shared helpers of the ReplayRing tests (``test_ring.py``, ``test_ring_persist.py``, ...)."""

import hashlib

import numpy as np
import pytest
import torch

from gymcurric.replay import ReplayRing

#: (device, index strategy) of the ``device`` fixture (conftest.py)
PLACEMENTS = [
    pytest.param(("cpu", "host"), id="cpu-host"),
    pytest.param(("cpu", "device"), id="cpu-device"),
    pytest.param(
        ("cuda", "device"),
        id="cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    ),
]
#: The index strategy of rings made by ``make`` (None: the device's default); the ``device``
#: fixture sets it for the test it runs.
INDEX_STRATEGY = None


def strategy():
    """The keyword arguments that give a ring the current test's index strategy."""
    return {"index_strategy": INDEX_STRATEGY}


def gen(device, seed=0):
    return torch.Generator(device=device).manual_seed(seed)


def make(device, capacity=5, num_envs=2, **kw):
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)}
    fields.update(kw.pop("fields", {}))
    return ReplayRing(capacity, num_envs, fields, device, **(strategy() | kw))


def push(ring, k, *, term=None, trunc=None, final=None, is_first=None, **kw):
    """Row k: obs = k (+100 * env), action = -k, reward = k, cost = k / 2."""
    E = ring.num_envs
    obs = torch.full((E, 3), float(k), device=ring.device) + 100 * torch.arange(
        E, device=ring.device
    ).view(E, 1)
    ring.push_step(
        obs,
        torch.full((E, 2), -float(k), device=ring.device),
        np.full(E, float(k)),
        cost=np.full(E, k / 2),
        terminated=np.zeros(E, bool) if term is None else np.asarray(term),
        truncated=np.zeros(E, bool) if trunc is None else np.asarray(trunc),
        final_obs=final,
        is_first=is_first,
        **kw,
    )


def step_of(obs_value):
    return obs_value % 100


def filled(device, debug=False):
    ring = make(device, capacity=6, num_envs=2, debug_checks=debug)
    for k in range(9):
        push(ring, k, term=[k % 3 == 2, False], final=torch.zeros(2, 3, device=device))
    return ring


def digest(tensors):
    """A short hash of tensors' dtypes, shapes and bytes (CPU), for pinned-result tests."""
    h = hashlib.sha256()
    for t in tensors:
        t = torch.as_tensor(t).contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]
