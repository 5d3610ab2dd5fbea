"""Test-session settings."""

import os

# Tiny MLPs on 2 cores: torch's intra-op threads only add contention (measured: PPO on 4 envs,
# 2,048 steps took 23.7 s with 2 threads vs 2.9 s with 1 under load). Set before torch loads;
# subprocess workers (SubprocVecEnv, AsyncVectorEnv) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
