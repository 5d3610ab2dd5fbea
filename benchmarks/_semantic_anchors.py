"""The model-side anchors and checks of ``benchmarks/semantic_overhead.py`` (issue 24).

The forward pass alone, eager (:func:`forward_only`) and replayed as a CUDA graph
(:func:`graphed_forward`), both on pixel values already on the device and synchronised; the
torch preprocessing's pixel values against the HF processor's (:func:`pixel_check`); and the
graphed embedder's embeddings against the eager path's (:func:`graph_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def synchronize(device: Any) -> None:
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize(device)


def forward_only(embedder: Any) -> Callable[[Any], Any]:
    """The model's forward pass alone on prepared pixel values (synchronised)."""
    import torch

    from gymcurric.semantics.hf import pooled

    def forward(pixels: Any) -> Any:
        with torch.inference_mode():
            out = pooled(embedder.model.get_image_features(pixel_values=pixels))
        synchronize(embedder.model_device)
        return out

    return forward


def graphed_forward(embedder: Any) -> Callable[[Any], Any]:
    """The forward pass alone replayed as a CUDA graph (eagerly on the static buffers off CUDA).

    Takes pixel values already on the device, as :func:`forward_only`; each call copies them
    into the graph's static input (one device-to-device copy) and replays it, synchronised.
    """
    from gymcurric.semantics.graphs import StaticGraphRunner
    from gymcurric.semantics.hf import pooled

    runner = StaticGraphRunner(
        lambda pixels: pooled(embedder.model.get_image_features(pixel_values=pixels)).float(),
        embedder.model_device,
    )

    def forward(pixels: Any) -> Any:
        out = runner.run(pixels)
        synchronize(embedder.model_device)
        return out

    return forward


def graph_check(embedder: Any, frames: np.ndarray, min_cos: float = 0.999) -> dict[str, Any]:
    """Graphed ``embed_images`` against the eager path (preprocessing + forward) on the device.

    Three calls: the frames, the frames reversed (the static buffers refilled with other
    frames) and the first five eighths of them (padded to the bucket); then whether the first
    call's result is as it was. ``ok``: every cosine ≥ ``min_cos``, the first result kept,
    and graphs still on afterwards (a capture that failed turns them off, and then the check
    would compare the eager path with itself); ``graph_mode`` is read after the calls.
    """
    from gymcurric.semantics import unit_rows

    forward = forward_only(embedder)

    def eager(batch: np.ndarray) -> np.ndarray:
        return unit_rows(forward(embedder.pixel_values(batch)).float().cpu().numpy())

    n = len(frames)
    batches = {
        "full": frames,
        "reversed": frames[::-1].copy(),
        "padded": frames[: max(1, n * 5 // 8)],
    }
    first = embedder.embed_images(frames)
    kept = first.copy()
    out: dict[str, Any] = {"min_cos_required": min_cos}
    for name, batch in batches.items():
        got = first if name == "full" else embedder.embed_images(batch)
        want = eager(batch)
        out[name] = {
            "rows": len(batch),
            "min_cos": float((got * want).sum(1).min()),
            "max_abs": float(np.abs(got - want).max()),
        }
    out["first_result_kept"] = bool(np.array_equal(first, kept))
    out["graph_mode"] = embedder.graph_mode
    out["ok"] = (
        out["graph_mode"] != "off"
        and out["first_result_kept"]
        and all(out[name]["min_cos"] >= min_cos for name in batches)
    )
    return out


def pixel_check(embedder: Any, frames: np.ndarray) -> dict[str, float]:
    """The torch path's float32 pixel values against the HF processor's, in uint8 grey levels."""
    import torch

    ip = embedder.processor.image_processor
    ref = embedder.processor(images=list(frames), return_tensors="pt")["pixel_values"]
    out = embedder.pixel_values(frames, dtype=torch.float32).cpu()
    level = torch.tensor([ip.rescale_factor / s for s in ip.image_std]).view(1, 3, 1, 1)
    diff = (ref.float() - out).abs() / level
    return {"max_levels": float(diff.max()), "mean_levels": float(diff.mean())}
