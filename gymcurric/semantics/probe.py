r"""``gymcurric probe``: how well do "safe" and "unsafe" prompts separate a folder of frames?

For prompt engineering without training: embed the prompts and the frames with a CLIP/SigLIP
model, and report

* prompt-set geometry: mean pairwise cosine within the safe set and within the unsafe set
  (intra-class), between the two sets (inter-class), and the cosine and angle between the two
  normalised centroids ``mu_safe`` and ``mu_unsafe`` (the mean of the unit prompt embeddings,
  renormalised; the same centroids the shaper uses);
* per frame: ``sim_safe = cos(e, mu_safe)``, ``sim_unsafe = cos(e, mu_unsafe)`` and the margin
  ``m = sim_safe - sim_unsafe``; over the frames: mean, std, min, max, quantiles and the
  fraction of positive margins.

:func:`separation_auc` scores prompt sets on states whose safety is known (the ROC AUC of
their margins) and :func:`check_separation` warns when that AUC is near 0.5 (no separation) or
below it; the shaper runs both at set-up on ``ShapingConfig.probe_states``.

The report is printed as JSON on stdout and, with ``--out DIR``, written to
``DIR/report.json`` together with one annotated PNG per frame (``<name>_probe.png``: the frame,
enlarged, above a strip with both similarities, the margin and a margin bar).

Example::

    gymcurric probe --model ./my-clip --frames ./frames \
        --safe "a clear path to the goal" --unsafe "a robot inside a red hazard" --out ./probe
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gymcurric.errors import ConfigError, DataError, GymcurricWarning

__all__ = [
    "HELP",
    "SEPARATION_TOLERANCE",
    "add_arguments",
    "centroid",
    "check_separation",
    "probe_separation",
    "run",
    "separation_auc",
    "separation_report",
]

#: A probe AUC within this distance of 0.5 means the prompt sets do not separate the states.
SEPARATION_TOLERANCE = 0.05

HELP = (
    "report how well --safe and --unsafe prompts separate a folder of frames under a "
    "CLIP/SigLIP model (JSON, annotated frames)"
)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
_BATCH = 32
_MIN_WIDTH = 256
_STRIP = 44


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``probe`` options to ``parser``."""
    parser.add_argument("--model", required=True, help="save_pretrained folder (or cached hub id)")
    parser.add_argument("--frames", required=True, help="folder of frames (png/jpg/bmp/gif/webp)")
    parser.add_argument("--safe", required=True, nargs="+", metavar="TEXT", help="safe prompts")
    parser.add_argument("--unsafe", required=True, nargs="+", metavar="TEXT", help="unsafe prompts")
    parser.add_argument("--out", default=None, help="folder for report.json and annotated frames")
    parser.add_argument(
        "--kind", default="auto", choices=("auto", "clip", "siglip"), help="model family"
    )
    parser.add_argument("--device", default="cpu", help="torch device of the model")
    parser.add_argument("--dtype", default="auto", help="model dtype (auto: bf16 -> fp32 chain)")


def centroid(rows: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The normalised mean of unit rows (zero vector if they cancel out)."""
    x = np.asarray(rows, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    mean = x.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 1e-12 else mean


def _mean_offdiag(x: npt.NDArray[np.float64]) -> float | None:
    n = x.shape[0]
    if n < 2:
        return None
    sims = x @ x.T
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def _unit(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    a = np.asarray(x, dtype=np.float64)
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def separation_report(
    frames: npt.ArrayLike, safe: npt.ArrayLike, unsafe: npt.ArrayLike
) -> dict[str, Any]:
    """Prompt-set geometry and per-frame margins (see the module docstring); JSON-safe.

    Args:
        frames: ``(n, d)`` frame embeddings.
        safe: ``(k_s, d)`` safe prompt embeddings.
        unsafe: ``(k_u, d)`` unsafe prompt embeddings.

    Returns:
        ``{"prompts": {...}, "frames": {...}, "per_frame": [{sim_safe, sim_unsafe, margin}]}``.

    Examples:
        >>> r = separation_report([[1, 0], [0, 1]], [[1, 0]], [[0, 1]])
        >>> r["prompts"]["centroid_angle_deg"], [f["margin"] for f in r["per_frame"]]
        (90.0, [1.0, -1.0])
    """
    f, s, u = _unit(frames), _unit(safe), _unit(unsafe)
    mu_s, mu_u = centroid(s), centroid(u)
    cos_c = float(np.clip(mu_s @ mu_u, -1.0, 1.0))
    sim_s = f @ mu_s
    sim_u = f @ mu_u
    margin = sim_s - sim_u
    qs = np.quantile(margin, [0.05, 0.25, 0.5, 0.75, 0.95]) if margin.size else [np.nan] * 5
    return {
        "prompts": {
            "n_safe": int(s.shape[0]),
            "n_unsafe": int(u.shape[0]),
            "safe_intra_similarity": _mean_offdiag(s),
            "unsafe_intra_similarity": _mean_offdiag(u),
            "inter_similarity": float((s @ u.T).mean()),
            "centroid_cosine": cos_c,
            "centroid_angle_deg": float(np.degrees(np.arccos(cos_c))),
        },
        "frames": {
            "n": int(f.shape[0]),
            "sim_safe_mean": float(sim_s.mean()) if f.shape[0] else None,
            "sim_unsafe_mean": float(sim_u.mean()) if f.shape[0] else None,
            "margin": {
                "mean": float(margin.mean()) if margin.size else None,
                "std": float(margin.std()) if margin.size else None,
                "min": float(margin.min()) if margin.size else None,
                "max": float(margin.max()) if margin.size else None,
                "p05": float(qs[0]),
                "p25": float(qs[1]),
                "p50": float(qs[2]),
                "p75": float(qs[3]),
                "p95": float(qs[4]),
                "frac_positive": float((margin > 0).mean()) if margin.size else None,
            },
        },
        "per_frame": [
            {"sim_safe": float(a), "sim_unsafe": float(b), "margin": float(m)}
            for a, b, m in zip(sim_s, sim_u, margin, strict=True)
        ],
    }


def separation_auc(margins: npt.ArrayLike, unsafe: npt.ArrayLike) -> float:
    """ROC AUC of the margins for telling safe states from unsafe ones.

    The probability that a safe state's margin exceeds an unsafe state's (ties count one
    half; Mann-Whitney U over the two groups): 1 when every safe state scores above every
    unsafe one, 0.5 when the margins carry no information, below 0.5 when the prompt sets
    rank the states the wrong way round.

    Args:
        margins: ``(n,)`` raw margins ``cos(e, mu_safe) - cos(e, mu_unsafe)`` of known states.
        unsafe: ``(n,)`` True for the states known to be unsafe.

    Returns:
        The AUC, or NaN when one of the two groups is empty or a margin is not finite.

    Examples:
        >>> separation_auc([0.3, 0.1, -0.2, 0.1], [False, False, True, True])
        0.875
    """
    m = np.asarray(margins, dtype=np.float64).reshape(-1)
    bad = np.asarray(unsafe, dtype=bool).reshape(-1)
    if m.shape != bad.shape:
        raise ConfigError("unsafe", bad.shape, f"expected one label per margin {m.shape}")
    n_bad = int(bad.sum())
    n_good = m.size - n_bad
    if n_bad == 0 or n_good == 0 or not np.isfinite(m).all():
        return float("nan")
    # average ranks (ties share theirs): U = rank sum of the safe group - n(n+1)/2
    order = np.argsort(m, kind="stable")
    ranks = np.empty(m.size, dtype=np.float64)
    ranks[order] = np.arange(1, m.size + 1)
    values, inverse, counts = np.unique(m, return_inverse=True, return_counts=True)
    if values.size < m.size:
        ranks = (np.bincount(inverse, weights=ranks) / counts)[inverse]
    u = ranks[~bad].sum() - n_good * (n_good + 1) / 2.0
    return float(u / (n_good * n_bad))


def check_separation(
    auc: float,
    tolerance: float = SEPARATION_TOLERANCE,
    *,
    what: str = "the prompt sets",
    stacklevel: int = 2,
) -> bool:
    """Warn when a probe AUC says the prompts do not separate safe from unsafe states.

    One :class:`~gymcurric.errors.GymcurricWarning` when ``auc`` is within ``tolerance`` of 0.5
    (the margins carry no information: shaping only adds noise) or below ``0.5 - tolerance``
    (the sets rank unsafe states above safe ones: shaping pushes towards them). A NaN AUC (a
    group was empty) warns nothing.

    Returns:
        True when the AUC shows a separation in the right direction (or is NaN).
    """
    if not 0.0 <= tolerance <= 0.5:
        raise ConfigError("tolerance", tolerance, "expected a number in [0, 0.5]")
    if not np.isfinite(auc) or auc > 0.5 + tolerance:
        return True
    if auc >= 0.5 - tolerance:
        problem = "do not separate unsafe states from safe ones"
    else:
        problem = "rank unsafe states above safe ones (are the two sets swapped?)"
    warnings.warn(
        f"{what} {problem}: probe ROC AUC {auc:.3f} (0.5: no separation, 1: perfect); the "
        "shaping term will not point away from unsafe states. Reword the prompts in the "
        "style of the states (captions or frames) and check them with a probe.",
        GymcurricWarning,
        stacklevel=stacklevel + 1,
    )
    return False


def probe_separation(
    margins: npt.ArrayLike,
    unsafe: npt.ArrayLike,
    tolerance: float = SEPARATION_TOLERANCE,
    *,
    what: str = "the prompt sets",
    stacklevel: int = 2,
) -> float:
    """:func:`separation_auc` of known states' margins, checked by :func:`check_separation`.

    A NaN AUC warns too (one :class:`~gymcurric.errors.GymcurricWarning`, never an error): the
    AUC could not be computed, because some states' embeddings or margins are not finite (how
    many is said) or the states are not both safe and unsafe ones.

    Returns:
        The AUC (NaN when it could not be computed).

    Raises:
        ConfigError: ``tolerance`` is not in [0, 0.5] (whether or not the AUC is NaN).
    """
    if not 0.0 <= tolerance <= 0.5:  # as check_separation, which a NaN AUC does not reach
        raise ConfigError("tolerance", tolerance, "expected a number in [0, 0.5]")
    m = np.asarray(margins, dtype=np.float64).reshape(-1)
    auc = separation_auc(m, unsafe)
    if not np.isnan(auc):
        check_separation(auc, tolerance, what=what, stacklevel=stacklevel + 1)
        return auc
    bad = int((~np.isfinite(m)).sum())
    why = (
        f"{bad} of {m.size} probe states have non-finite embeddings/margins"
        if bad
        else "the probe states are not both safe and unsafe ones"
    )
    warnings.warn(
        f"the probe ROC AUC of {what} could not be computed (NaN): {why}; whether the prompts "
        "separate unsafe states from safe ones is unknown. Check the embedder on these states.",
        GymcurricWarning,
        stacklevel=stacklevel + 1,
    )
    return auc


def _frame_files(folder: str) -> list[Path]:
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError("--frames", folder, "is not a directory")
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ConfigError("--frames", folder, f"holds no image files {IMAGE_SUFFIXES}")
    return files


def _check_out(out: str) -> None:
    """Refuse an ``--out`` that cannot be a writable folder, before the model is loaded.

    Nothing is created here: the folder is made when the report is written. (As root, a
    read-only folder passes :func:`os.access`; the write itself then fails, see :func:`run`.)
    """
    path = Path(out)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        what = "is a file" if existing == path else f"cannot be created: {existing} is a file"
        raise ConfigError("--out", out, f"{what}; expected a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is" if existing == path else f"cannot be created: {existing} is"
        raise ConfigError("--out", out, f"{what} not writable")


def _read_frame(image_type: Any, path: Path) -> Any:
    """The frame at ``path`` as an RGB image; DataError naming the file if it does not decode."""
    try:
        with image_type.open(path) as im:
            return im.convert("RGB")
    except image_type.UnidentifiedImageError:
        reason = "not an image file, or one in a format PIL cannot read"
    except (OSError, SyntaxError, ValueError, image_type.DecompressionBombError) as exc:
        reason = str(exc) or type(exc).__name__  # e.g. "image file is truncated"
    raise DataError(
        f"--frames: {path}: cannot read the frame ({reason}); remove or replace the file"
    )


def _annotate(image: Any, row: dict[str, Any], scale: float, dest: Path) -> None:
    from PIL import Image, ImageDraw

    w, h = image.size
    factor = max(1, -(-_MIN_WIDTH // w))
    big = image.resize((w * factor, h * factor), Image.Resampling.NEAREST)
    canvas = Image.new("RGB", (big.width, big.height + _STRIP), (255, 255, 255))
    canvas.paste(big, (0, 0))
    draw = ImageDraw.Draw(canvas)
    m = row["margin"]
    colour = (0, 130, 0) if m > 0 else (190, 0, 0)
    draw.text(
        (4, big.height + 2),
        f"safe {row['sim_safe']:+.3f}  unsafe {row['sim_unsafe']:+.3f}",
        fill=(0, 0, 0),
    )
    draw.text((4, big.height + 15), f"margin {m:+.4f}", fill=colour)
    mid = big.width // 2
    length = round((big.width // 2 - 4) * min(1.0, abs(m) / scale)) if scale > 0 else 0
    top = big.height + 31
    draw.line([(mid, top - 2), (mid, top + 10)], fill=(0, 0, 0))
    x0, x1 = (mid, mid + length) if m > 0 else (mid - length, mid)
    draw.rectangle([(x0, top), (x1, top + 8)], fill=colour)
    canvas.save(dest)


def _stat_of(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _drop_partial(path: Path, before: os.stat_result | None, exc: OSError) -> str:
    """Remove ``path`` if ``exc`` cut it off mid-write; what to add to the error if it stays.

    ``before``: its stat before this write (``None``: there was no file). An error with a file
    name failed to open it; one without came after it was created or emptied (e.g. a full
    disk), and only then does the file differ from ``before``: what is there is part of the
    new file, nothing earlier, so removing it loses nothing.
    """
    now = _stat_of(path)
    if exc.filename is not None or now is None or not stat.S_ISREG(now.st_mode):
        return ""
    key = (now.st_ino, now.st_size, now.st_mtime_ns)
    if before is not None and key == (before.st_ino, before.st_size, before.st_mtime_ns):
        return ""  # not opened yet: left as it was
    try:
        path.unlink()
    except OSError:
        return f" (a cut-off {path.name} is left there)"
    return ""


def run(args: argparse.Namespace) -> int:
    """Run the probe; 0 on success, 2 (via ConfigError) on bad prompts, model or frames folder.

    A caption model embeds no frames: it is a bad model here, as an empty prompt is a bad one.
    A frame that does not decode is a DataError naming the file; an ``--out`` that is a file or
    under one is refused before the model loads, and one that fails while being written (the
    report is then printed on stdout all the same, and the files written stay; the one the
    error cut off is removed, and named) a ConfigError.
    The errors name the option but not the command, which ``gymcurric``'s error line names.
    """
    for flag, prompts in (("--safe", args.safe), ("--unsafe", args.unsafe)):
        if not all(isinstance(p, str) and p.strip() for p in prompts):  # as ShapingConfig
            raise ConfigError(flag, prompts, "expected non-empty strings")
    files = _frame_files(args.frames)
    if args.out:
        _check_out(args.out)
    from PIL import Image

    from gymcurric.semantics.base import embedder_modality
    from gymcurric.semantics.embedders import load_embedder

    try:
        embedder = load_embedder(args.model, kind=args.kind, device=args.device, dtype=args.dtype)
    except ConfigError as exc:
        if exc.key not in ("model_name", "kind", "device", "dtype"):
            raise
        flag = "--model" if exc.key == "model_name" else f"--{exc.key}"
        raise ConfigError(flag, exc.value, exc.reason) from None
    except (OSError, ValueError) as exc:
        raise ConfigError("--model", args.model, f"could not be loaded: {exc}") from exc
    if embedder_modality(embedder) != "image":
        raise ConfigError(
            "--model",
            args.model,
            f"is a caption (sentence-embedding) model ({getattr(embedder, 'status', '')}), "
            "which embeds no frames; the probe needs a CLIP/SigLIP model",
        )
    images: list[Any] = [_read_frame(Image, p) for p in files]
    arrays = [np.asarray(im) for im in images]
    frame_emb = np.concatenate(
        [embedder.embed_images(arrays[i : i + _BATCH]) for i in range(0, len(arrays), _BATCH)]
    )
    safe: Sequence[str] = list(args.safe)
    unsafe: Sequence[str] = list(args.unsafe)
    report = separation_report(frame_emb, embedder.embed_texts(safe), embedder.embed_texts(unsafe))
    for row, p in zip(report["per_frame"], files, strict=True):
        row["file"] = p.name
    report = {
        "model": str(args.model),
        "status": str(getattr(embedder, "status", "")),
        "safe": safe,
        "unsafe": unsafe,
        **report,
    }
    if args.out:
        out = Path(args.out)
        # the file (or folder) being written, the one an error is about, and its stat before
        writing, before = out, None
        try:
            out.mkdir(parents=True, exist_ok=True)
            scale = max((abs(r["margin"]) for r in report["per_frame"]), default=0.0)
            for im, row, p in zip(images, report["per_frame"], files, strict=True):
                dest = out / f"{p.stem}_probe.png"
                writing, before = dest, _stat_of(dest)
                _annotate(im, row, scale, dest)
                row["annotated"] = dest.name
            report["out"] = str(out)
            writing = out / "report.json"
            before = _stat_of(writing)
            writing.write_text(json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            # the model's work is not lost: the report still goes to stdout (without "out";
            # "annotated" on the frames written), and nothing written before is removed
            report.pop("out", None)
            json.dump(report, sys.stdout, indent=2)
            sys.stdout.write("\n")
            done = sum("annotated" in r for r in report["per_frame"])
            raise ConfigError(
                "--out",
                args.out,
                f"could not be written: {exc.strerror or exc}: {exc.filename or writing}"
                f"{_drop_partial(writing, before, exc)}; {done} of {len(files)} annotated "
                "frames were written there, report.json was not written; the report is on stdout",
            ) from exc
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
