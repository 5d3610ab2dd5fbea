"""Static-buffer embedding (``graphs=True``): the runner and the HF embedder, CPU and CUDA.

On CPU the static buffers, padding, refills and copies run eagerly (the code a CUDA graph
captures, run as is); the ``cuda`` cases capture and replay real graphs and are skipped
without a CUDA device.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from gymcurric.errors import ConfigError
from gymcurric.replay.opcount import count_ops
from gymcurric.semantics import hf, load_embedder
from gymcurric.semantics.graphs import GraphCaptureError, StaticGraphRunner, bucket_size
from gymcurric.semantics.preprocess import UnsupportedImageProcessor
from tests.semantics.tiny_models import cached_tiny

CUDA = pytest.param(
    "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
)
DEVICES = ["cpu", CUDA]
ROOT = Path(__file__).resolve().parents[2]


def frames(n: int, seed: int = 0, size: int = 48) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (n, size, size, 3), dtype=np.uint8)


def row_sums(x: torch.Tensor) -> torch.Tensor:
    """A row-independent function with a float output, like an embedder's."""
    return x.float().flatten(1).sum(1, keepdim=True) * torch.arange(1, 4, device=x.device)


# ------------------------------------------------------------------------------ the runner
def test_bucket_sizes_are_powers_of_two():
    assert [bucket_size(n) for n in (0, 1, 2, 3, 4, 5, 63, 64, 65)] == [
        1,
        1,
        2,
        4,
        4,
        8,
        64,
        64,
        128,
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_runner_refills_pads_and_returns_arrays_it_does_not_touch_again(device):
    runner = StaticGraphRunner(row_sums, device)
    assert runner.mode == ("cuda" if device == "cuda" else "eager")
    a_in, b_in = frames(3, seed=1, size=4), frames(3, seed=2, size=4)
    a = runner(a_in)
    a_copy = a.copy()
    b = runner(b_in)  # same slot (bucket 4), new contents
    np.testing.assert_array_equal(a, a_copy)  # the first result is the caller's own
    np.testing.assert_allclose(a, row_sums(torch.from_numpy(a_in)).numpy())
    np.testing.assert_allclose(b, row_sums(torch.from_numpy(b_in)).numpy())
    assert not np.array_equal(a, b)
    assert runner.slot_keys() == [(4, (4, 4, 3), torch.uint8)]
    c = runner(frames(5, seed=3, size=4))  # a new batch size: a new slot (bucket 8)
    np.testing.assert_allclose(c, row_sums(torch.from_numpy(frames(5, seed=3, size=4))).numpy())
    assert [k[0] for k in runner.slot_keys()] == [4, 8]
    assert runner.captures == (2 if device == "cuda" else 0)
    d = runner(torch.from_numpy(frames(2, seed=4, size=4)).to(device))  # a device tensor
    np.testing.assert_allclose(d, row_sums(torch.from_numpy(frames(2, seed=4, size=4))).numpy())


def test_runner_keeps_a_bounded_number_of_slots_least_recently_used_first():
    runner = StaticGraphRunner(row_sums, "cpu", max_slots=2)
    for n in (1, 2, 1, 4):  # buckets 1, 2, (1 again: most recent), 4 drops 2
        runner(frames(n, size=2))
    assert [k[0] for k in runner.slot_keys()] == [1, 4]
    other = frames(3, size=5)  # another frame size is another slot
    runner(other)
    assert runner.slot_keys()[-1] == (4, (5, 5, 3), torch.uint8)
    readonly = frames(3, size=2)
    readonly.flags.writeable = False
    np.testing.assert_allclose(runner(readonly), row_sums(torch.from_numpy(frames(3, size=2))))


@pytest.mark.parametrize("device", DEVICES)
def test_runner_takes_tensors_of_a_dtype_numpy_lacks(device):
    # bfloat16 pixel values (a bf16 model's forward graphed alone): run 2's benchmark
    # raised "Got unsupported ScalarType BFloat16" making the slot's numpy view
    runner = StaticGraphRunner(row_sums, device)
    batch = torch.from_numpy(frames(3, seed=5, size=4)).to(torch.bfloat16)
    for rows in (batch, batch.to(device)):  # from the host and from the device
        out = runner(rows)
        np.testing.assert_allclose(out, row_sums(batch).numpy(), rtol=1e-2)
    assert runner.slot_keys() == [(4, (4, 4, 3), torch.bfloat16)]


def test_run_returns_a_device_view_that_the_next_call_overwrites():
    runner = StaticGraphRunner(row_sums, "cpu")
    view = runner.run(np.ones((2, 1, 1, 3), np.uint8))
    runner.run(np.zeros((2, 1, 1, 3), np.uint8))
    assert view.tolist() == [[0.0, 0.0, 0.0]] * 2  # documented: read it before the next call


def test_runner_runs_eagerly_on_a_device_that_is_neither_the_cpu_nor_captured():
    """Eager mode off the CPU (CUDA with capture=False, MPS): numpy frames reach the device
    through a host copy (the static input has no numpy view there). "meta" stands in for such
    a device on a CPU-only machine; it checks the buffers' shapes and devices, not values."""
    runner = StaticGraphRunner(row_sums, "meta")
    assert runner.mode == "eager"
    for n in (3, 2):  # a new slot, then the same slot refilled
        out = runner.run(np.ones((n, 2, 2, 3), np.uint8))
        assert out.device.type == "meta" and tuple(out.shape) == (n, 3)
    out = runner.run(torch.ones((3, 2, 2, 3), dtype=torch.uint8))  # a host tensor
    assert tuple(out.shape) == (3, 3)


def test_runner_arguments_are_checked():
    with pytest.raises(ConfigError, match="capture"):
        StaticGraphRunner(row_sums, "cpu", capture=True)
    with pytest.raises(ConfigError, match="max_slots"):
        StaticGraphRunner(row_sums, "cpu", max_slots=0)
    with pytest.raises(ValueError, match="at least one row"):
        StaticGraphRunner(row_sums, "cpu")(np.zeros((0, 2, 2, 3), np.uint8))


def test_runner_syncs_the_host_once_per_call_and_not_in_run():
    runner = StaticGraphRunner(row_sums, "cpu")
    batch = frames(3, size=4)
    runner(batch)  # the slot exists: what follows is the steady state
    with count_ops(host_reads=True) as counted:
        runner.run(batch)
    assert counted.syncs == []
    with count_ops(host_reads=True) as counted:
        runner(batch)
    assert counted.syncs == ["Tensor.numpy"]  # reading the copied rows; nothing else


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runner_on_cuda_copies_in_without_blocking_and_reads_out_once():
    runner = StaticGraphRunner(row_sums, "cuda")
    batch = frames(3, size=4)
    runner(batch)
    with count_ops() as counted:
        out = runner(batch)
    assert len(counted.syncs) == 1 and "_to_copy" in counted.syncs[0]  # the rows to the host
    assert len(counted.transfers) == 1 and "copy_" in counted.transfers[0]  # pinned, async
    np.testing.assert_allclose(out, row_sums(torch.from_numpy(batch)).numpy())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_function_that_syncs_cannot_be_captured():
    # in a process of its own: a failed capture must not leave the test process's CUDA state odd
    code = (
        "import numpy as np\n"
        "from gymcurric.semantics.graphs import GraphCaptureError, StaticGraphRunner\n"
        "runner = StaticGraphRunner(lambda x: x.float() * float(x.float().sum().item() > 0),"
        " 'cuda')\n"
        "try:\n"
        "    runner(np.ones((3, 2), np.uint8))\n"
        "except GraphCaptureError as exc:\n"
        "    print('GraphCaptureError', exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert "GraphCaptureError capturing 4 rows of (2,)" in proc.stdout, proc.stderr[-2000:]


# ------------------------------------------------------------------------- the HF embedder
@pytest.fixture(scope="module", params=["clip", "siglip"])
def kind(request):
    return request.param


def pair(kind: str, device: str, dtype: str = "float32"):
    eager = load_embedder(cached_tiny(kind), dtype=dtype, device=device)
    graphed = load_embedder(cached_tiny(kind), dtype=dtype, device=device, graphs=True)
    return eager, graphed


@pytest.mark.parametrize("device", DEVICES)
def test_graphed_embeddings_equal_the_ordinary_path(kind, device):
    eager, graphed = pair(kind, device)
    mode = "cuda" if device == "cuda" else "eager"
    assert graphed.graph_mode == mode and graphed.status.endswith(f"graphs={mode}")
    assert eager.graph_mode == "off" and "graphs" not in eager.status
    atol = 1e-4 if device == "cuda" else 1e-5
    first_in = frames(5, seed=1)
    first = graphed.embed_images(first_in)
    kept = first.copy()
    np.testing.assert_allclose(first, eager.embed_images(first_in), atol=atol)
    for n, seed in ((5, 2), (3, 3), (9, 4), (5, 5)):  # refills, new sizes, an old size again
        batch = frames(n, seed=seed)
        np.testing.assert_allclose(
            graphed.embed_images(batch), eager.embed_images(batch), atol=atol
        )
    np.testing.assert_array_equal(first, kept)  # later calls did not touch the first result
    runner = graphed._graphs
    assert [k[0] for k in runner.slot_keys()] == [4, 16, 8]
    assert runner.captures == (3 if device == "cuda" else 0)
    on_device = torch.from_numpy(frames(2, seed=6)).to(device)
    np.testing.assert_allclose(
        graphed.embed_images(on_device), eager.embed_images(on_device), atol=atol
    )


@pytest.mark.parametrize("device", DEVICES)
def test_graphed_bf16_is_close_to_the_ordinary_path(device):
    eager, graphed = pair("clip", device, dtype="bfloat16")
    batch = frames(6, seed=7)  # padded to 8 in the graphed path
    cos = (graphed.embed_images(batch) * eager.embed_images(batch)).sum(1)
    assert cos.min() > 0.999


def test_lists_and_non_uint8_frames_take_the_ordinary_path():
    eager, graphed = pair("clip", "cpu")
    batch = frames(3, seed=8)
    np.testing.assert_allclose(
        graphed.embed_images(list(batch)), eager.embed_images(batch), atol=1e-5
    )
    assert graphed._graphs.slot_keys() == []
    graphed.embed_images(batch.astype(np.float32))
    assert graphed._graphs.slot_keys() == [] and "not uint8" in graphed.status


def test_graphed_call_has_one_host_sync_and_its_function_none(kind):
    _, graphed = pair(kind, "cpu")
    batch = frames(4, seed=9)
    graphed.embed_images(batch)
    with count_ops(host_reads=True) as counted:
        graphed.embed_images(batch)
    assert counted.syncs == ["Tensor.numpy"]
    # what a CUDA graph captures, as the runner calls it (no_grad: e.g. SigLIP's attention
    # pooling head takes MultiheadAttention's fast path): no host read anywhere
    with torch.no_grad(), count_ops(host_reads=True) as counted:
        graphed._frames_to_features(torch.from_numpy(batch))
    assert counted.syncs == [] and counted.kernels > 0


def test_graphs_need_the_torch_preprocessing(monkeypatch):
    with pytest.raises(ConfigError, match=r"'graphs'.*preprocess='torch'"):
        load_embedder(cached_tiny("clip"), preprocess="hf", graphs=True)
    with pytest.raises(ConfigError, match=r"'graphs'.*expected a bool"):
        load_embedder(cached_tiny("clip"), graphs="yes")

    def unsupported(*args, **kwargs):
        raise UnsupportedImageProcessor("resample=1 (only bilinear and bicubic)")

    monkeypatch.setattr(hf.TorchImagePreprocessor, "from_processor", unsupported)
    with pytest.raises(ConfigError, match=r"'graphs'.*does not reproduce resample=1"):
        load_embedder(cached_tiny("clip"), graphs=True)
    fallback = load_embedder(cached_tiny("clip"))  # without graphs: the HF processor, as before
    assert fallback.preprocess == "hf"


def test_a_failing_graphed_path_is_turned_off_with_a_warning():
    eager, graphed = pair("clip", "cpu")

    def broken(x):
        raise GraphCaptureError(
            "capturing 4 rows: operation not permitted when stream is capturing"
        )

    graphed._graphs.fn = broken
    batch = frames(3, seed=10)
    with pytest.warns(RuntimeWarning, match="turned off"):
        out = graphed.embed_images(batch)
    np.testing.assert_allclose(out, eager.embed_images(batch), atol=1e-5)
    assert graphed.graph_mode == "off" and "note: graphs turned off" in graphed.status
    graphed.embed_images(batch)  # no second warning: the ordinary path from now on


def test_out_of_memory_in_the_graphed_path_is_raised_for_the_shaper():
    _, graphed = pair("clip", "cpu")

    def oom(x):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    graphed._graphs.fn = oom
    with pytest.raises(torch.cuda.OutOfMemoryError):
        graphed.embed_images(frames(3))
    assert graphed.graph_mode == "eager"  # still on: the shaper halves its batch and retries


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["additive", "potential"])
def test_vector_wrapper_shaping_is_the_same_with_graphs(device, mode):
    """64 px HazardNav frames; episodes of 3 to 8 steps: NEXT_STEP resets vary the batch."""
    import gymnasium as gym

    import gymcurric  # noqa: F401 - registers the envs
    from gymcurric.wrappers.vector.semantic import ShapeRewardSemantic

    def make(max_steps: int):
        return lambda: gym.make(
            "gymcurric/HazardNav-v0", render_mode="rgb_array", max_steps=max_steps
        )

    config = {"margin_norm_enable": False, "beta_start": 1.0, "mode": mode}
    shaping = []
    for graphs in (False, True):
        embedder = load_embedder(cached_tiny("clip"), dtype="float32", device=device, graphs=graphs)
        envs = ShapeRewardSemantic(
            gym.vector.SyncVectorEnv([make(3 + i) for i in range(6)]), embedder, config
        )
        envs.reset(seed=0)
        actions = np.random.default_rng(0).uniform(-1, 1, (24, 6, 2)).astype(np.float32)
        shaping.append(np.stack([envs.step(a)[-1]["shaping"] for a in actions]))
        envs.close()
        if graphs:  # additive: fewer frames on reset steps; potential: the new episodes' too
            assert len(embedder._graphs.slot_keys()) == (2 if mode == "additive" else 1)
    np.testing.assert_allclose(shaping[1], shaping[0], atol=1e-4)
    assert (shaping[0] == 0).any() and np.abs(shaping[0]).sum() > 0
