"""benchmarks/datapack_sampling.py runs end to end (structure only; timings are never asserted)."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from gymcurric.datapacks import DataPack, DataPackRLSampler, make_strategy
from tests.benchmarks import load_script
from tests.datapacks.packs import record

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "datapack_sampling.py"


def test_benchmark_small_run():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--n", "1500", "--batches", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "load_datapacks (parse + validate + freeze)" in out
    for label in ("balanced", "frontier_prioritized", "tag_aware", "stage warmup",
                  "stage fine_tuning"):  # fmt: skip
        assert re.search(rf"^{label}\s+\d+\.\d+.*x\s+\d+x", out, re.MULTILINE), label
    assert "slowest gymcurric median" in out


def test_baseline_follows_the_same_strategy_law():
    """The per-datapack baseline is faithful: same tier and tag quotas as the library."""
    mod = load_script("datapack_sampling")
    packs = [
        DataPack.from_dict(
            record(f"p{i}", tier=i % 3, supervision_hints={"safety_critical": i % 5 == 0})
        )
        for i in range(300)
    ]
    base = mod.PyDatapackSampler(packs, seed=0)
    for name in ("balanced", "tag_aware"):
        strategy = make_strategy(name)
        ours = DataPackRLSampler(packs, strategy=strategy, seed=0)
        a = [p.tier for _ in range(50) for p in ours.sample_batch(20)]
        b = [p.tier for _ in range(50) for p in base.sample_batch(20, strategy, None, set())]
        np.testing.assert_allclose(
            np.bincount(a, minlength=3) / len(a), np.bincount(b, minlength=3) / len(b), atol=0.03
        )
