"""CLIP/SigLIP image preprocessing in torch, on the model's device.

Torch-level module: importing it imports torch (not transformers).

:class:`TorchImagePreprocessor` reproduces what a HuggingFace ``CLIPImageProcessor`` or
``SiglipImageProcessor`` does to ``uint8`` RGB frames, read from the processor's own settings,
but on a batch tensor: one transfer of the ``uint8`` batch to the device, then resize, centre
crop, rescale and normalise in float32 there, cast to the model's dtype. HF's processors work
frame by frame on the host (PIL, or torchvision), which at 64 envs cost several times the
model's forward pass on a GPU (issue 24).

What is reproduced (transformers 4.x and 5.x, PIL backend as the reference):

* **resize**: ``size={"shortest_edge": s}`` scales the short side to ``s`` and the long side to
  ``int(s * long / short)`` (truncated, as HF does); ``size={"height": h, "width": w}``
  resizes to ``(h, w)``. A frame already at the target size is not resampled. PIL resamples
  with an antialiasing filter (Keys bicubic with ``a = -0.5``, or a triangle for bilinear)
  whose support widens with the downscale factor, in two separable passes (horizontal, then
  vertical) with a ``uint8`` image between and after them. So here: ``F.interpolate(...,
  antialias=True)`` (the same filters), one axis at a time, each pass rounded half up and
  clipped to ``[0, 255]``. Without the rounding between passes, bicubic overshoot that PIL
  clips survives (about 20 grey levels apart on noise); with it, at most 2 levels apart (PIL
  uses fixed-point weights) and almost all pixels equal.
* **centre crop**: top/left offset ``(size - crop) // 2``; a crop larger than the frame pads
  with zeros, ``ceil(d / 2)`` before (the PIL backend's rule; torchvision's pads
  ``floor(d / 2)`` before).
* **rescale and normalise**: ``(x * rescale_factor - mean) / std`` per channel, fused into one
  multiply-add in float32.

Anything else falls back (:class:`UnsupportedImageProcessor` names the setting): another
processor class (e.g. SigLIP2's patch-based one), a resample filter other than bilinear or
bicubic, ``size`` with ``longest_edge``/``max_height``/pixel budgets, ``do_pad``, channels-last
output. ``do_convert_rgb`` is a no-op for the ``(H, W, 3)`` frames accepted here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gymcurric._optional import import_optional
from gymcurric.errors import GymcurricError

torch = import_optional("torch", "semantic", purpose="for torch image preprocessing")
F = torch.nn.functional

__all__ = [
    "ImagePreprocessSpec",
    "TorchImagePreprocessor",
    "UnsupportedImageProcessor",
    "resized_size",
    "spec_from_processor",
]

#: Processor classes whose preprocessing is resize → crop → rescale → normalise (the ``Pil``
#: and ``Fast`` variants are the same processor on another backend).
SUPPORTED_PROCESSORS = frozenset({"CLIPImageProcessor", "SiglipImageProcessor"})
Resample = Literal["bilinear", "bicubic"]
#: PIL resampling codes (``PILImageResampling``) → ``F.interpolate`` mode.
_RESAMPLE: dict[int, Resample] = {2: "bilinear", 3: "bicubic"}
_SIZE_KEYS = (
    "height",
    "width",
    "shortest_edge",
    "longest_edge",
    "max_height",
    "max_width",
    "min_pixels",
    "max_pixels",
)


class UnsupportedImageProcessor(GymcurricError, ValueError):
    """An image processor setting that :class:`TorchImagePreprocessor` does not reproduce."""


@dataclass(frozen=True)
class ImagePreprocessSpec:
    """What a CLIP/SigLIP image processor does to a frame, as plain numbers.

    Attributes:
        shortest_edge: resize the short side to this (the long side keeps the aspect ratio).
        resize_to: resize to this ``(height, width)``; at most one of the two resizes is set.
        resample: ``"bilinear"`` or ``"bicubic"``.
        crop: centre crop to this ``(height, width)``, or ``None``.
        rescale_factor: multiply by this (``1 / 255``), or ``None``.
        mean: per-channel mean subtracted after rescaling, or ``None`` (no normalisation).
        std: per-channel std divided by, with ``mean``.
    """

    shortest_edge: int | None = None
    resize_to: tuple[int, int] | None = None
    resample: Resample = "bicubic"
    crop: tuple[int, int] | None = None
    rescale_factor: float | None = None
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None


def _size_fields(size: Any) -> dict[str, int]:
    """The set fields of an HF ``size``: a dict, a ``SizeDict`` (transformers 5) or ``None``."""
    if size is None:
        return {}
    if isinstance(size, Mapping):
        items = dict(size)
    elif isinstance(size, int):
        raise UnsupportedImageProcessor(f"size={size!r} (an int, not a size dict)")
    else:
        items = {k: getattr(size, k, None) for k in _SIZE_KEYS}
    return {k: int(v) for k, v in items.items() if v is not None}


def _resample_mode(resample: Any) -> Resample:
    if resample is None:  # HF's resize default
        return "bilinear"
    value = getattr(resample, "value", resample)  # PIL enum, or torchvision InterpolationMode
    if isinstance(value, str) and value in _RESAMPLE.values():
        return _RESAMPLE[2] if value == "bilinear" else _RESAMPLE[3]
    if isinstance(value, int) and not isinstance(value, bool) and value in _RESAMPLE:
        return _RESAMPLE[value]
    raise UnsupportedImageProcessor(f"resample={resample!r} (only bilinear and bicubic)")


def _triple(name: str, value: Any) -> tuple[float, float, float]:
    values = [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]
    if len(values) == 1:
        values *= 3
    if len(values) != 3:
        raise UnsupportedImageProcessor(f"{name}={value!r} (expected 3 channels)")
    return values[0], values[1], values[2]


def spec_from_processor(processor: Any) -> ImagePreprocessSpec:
    """Read an HF image processor's settings into an :class:`ImagePreprocessSpec`.

    Args:
        processor: a CLIP/SigLIP image processor, or a processor holding one as
            ``image_processor`` (what ``AutoProcessor`` returns).

    Raises:
        UnsupportedImageProcessor: a processor class or setting not reproduced (the message
            names it).
    """
    ip = getattr(processor, "image_processor", processor)
    name = type(ip).__name__.removesuffix("Pil").removesuffix("Fast")
    if name not in SUPPORTED_PROCESSORS:
        raise UnsupportedImageProcessor(
            f"image processor {type(ip).__name__} (only {sorted(SUPPORTED_PROCESSORS)})"
        )
    if getattr(ip, "do_pad", None):
        raise UnsupportedImageProcessor("do_pad=True")
    data_format = getattr(ip, "data_format", None)
    if data_format is not None and str(getattr(data_format, "value", data_format)) not in (
        "channels_first",
    ):
        raise UnsupportedImageProcessor(f"data_format={data_format!r}")
    shortest_edge, resize_to = None, None
    if getattr(ip, "do_resize", False):
        size = _size_fields(getattr(ip, "size", None))
        if set(size) == {"shortest_edge"}:
            shortest_edge = size["shortest_edge"]
        elif set(size) == {"height", "width"}:
            resize_to = (size["height"], size["width"])
        else:
            raise UnsupportedImageProcessor(f"size={size!r} (only shortest_edge or height/width)")
    crop = None
    if getattr(ip, "do_center_crop", False):
        crop_size = _size_fields(getattr(ip, "crop_size", None))
        if set(crop_size) != {"height", "width"}:
            raise UnsupportedImageProcessor(f"crop_size={crop_size!r} (needs height and width)")
        crop = (crop_size["height"], crop_size["width"])
    for value in (shortest_edge, *(resize_to or ()), *(crop or ())):
        if value is not None and value <= 0:
            raise UnsupportedImageProcessor(f"a size of {value}")
    rescale = float(ip.rescale_factor) if getattr(ip, "do_rescale", False) else None
    mean = std = None
    if getattr(ip, "do_normalize", False):
        mean, std = _triple("image_mean", ip.image_mean), _triple("image_std", ip.image_std)
    return ImagePreprocessSpec(
        shortest_edge=shortest_edge,
        resize_to=resize_to,
        resample=_resample_mode(getattr(ip, "resample", None)),
        crop=crop,
        rescale_factor=rescale,
        mean=mean,
        std=std,
    )


def resized_size(height: int, width: int, spec: ImagePreprocessSpec) -> tuple[int, int]:
    """``(height, width)`` after ``spec``'s resize, rounded as HF rounds it (truncation)."""
    if spec.resize_to is not None:
        return spec.resize_to
    if spec.shortest_edge is None:
        return height, width
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = spec.shortest_edge, int(spec.shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def _quantise(x: Any) -> Any:
    # PIL stores every pass as uint8, rounding half up (fixed point + 1/2, then floor)
    return torch.floor_(x.add_(0.5)).clamp_(0.0, 255.0)


def _resize(x: Any, size: tuple[int, int], mode: str) -> Any:
    """PIL's two-pass antialiased resize of a float ``(n, 3, H, W)`` batch of 0..255 values."""
    height, width = x.shape[-2:]
    if width != size[1]:
        x = _quantise(F.interpolate(x, size=(height, size[1]), mode=mode, antialias=True))
    if height != size[0]:
        x = _quantise(F.interpolate(x, size=size, mode=mode, antialias=True))
    return x


def _center_crop(x: Any, crop: tuple[int, int]) -> Any:
    """The PIL backend's centre crop: offset ``(size - crop) // 2``, zero padding if short."""
    height, width = x.shape[-2:]
    pads = []
    for size, target in ((width, crop[1]), (height, crop[0])):  # F.pad takes the last dim first
        short = max(target - size, 0)
        pads += [math.ceil(short / 2), short - math.ceil(short / 2)]
    if any(pads):
        x = F.pad(x, pads)
        height, width = x.shape[-2:]
    top, left = (height - crop[0]) // 2, (width - crop[1]) // 2
    return x[..., top : top + crop[0], left : left + crop[1]]


def _to_uint8_batches(frames: Any) -> list[tuple[list[int], Any]]:
    """Group frames by shape: ``[(indices, uint8 (k, H, W, 3) numpy array or tensor)]``."""
    if isinstance(frames, np.ndarray | torch.Tensor):
        if frames.ndim == 3:
            frames = frames[None]
        _check_batch(frames)
        return [(list(range(frames.shape[0])), frames)]
    groups: dict[tuple[int, ...], list[int]] = {}
    frames = list(frames)
    for i, f in enumerate(frames):
        groups.setdefault(tuple(f.shape), []).append(i)
    out = []
    for idx in groups.values():
        parts = [frames[i] for i in idx]
        if isinstance(parts[0], torch.Tensor):
            batch = torch.stack([torch.as_tensor(p) for p in parts])
        else:
            batch = np.stack([np.asarray(p) for p in parts])
        _check_batch(batch)
        out.append((idx, batch))
    return out


def _check_batch(batch: Any) -> None:
    if batch.ndim != 4 or batch.shape[-1] != 3:
        raise ValueError(f"expected uint8 frames of shape (n, H, W, 3), got {tuple(batch.shape)}")
    if batch.dtype not in (np.uint8, torch.uint8):
        raise TypeError(f"expected uint8 frames, got dtype {batch.dtype}")


class TorchImagePreprocessor:
    """An HF CLIP/SigLIP image processor reproduced in torch on ``device``.

    Takes ``uint8`` RGB frames: an ``(n, H, W, 3)`` / ``(H, W, 3)`` numpy array or torch
    tensor (on any device), or a sequence of ``(H, W, 3)`` frames (grouped by size, one batch
    per size). Each group goes to ``device`` as ``uint8`` in one transfer; the resize, crop,
    rescale and normalisation run there in float32 (see the module docstring for the exact
    semantics), and the result is cast to ``dtype``. Pixel values match the HF processor's to
    within a couple of ``uint8`` grey levels after resizing (exactly without a resize).

    Args:
        spec: the processing, from :func:`spec_from_processor`.
        device: where to compute (a ``torch.device`` or its name).
        dtype: the dtype of the returned pixel values (the model's).

    Example:
        >>> import numpy as np, torch
        >>> spec = ImagePreprocessSpec(resize_to=(4, 4), rescale_factor=1 / 255,
        ...                            mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
        >>> pre = TorchImagePreprocessor(spec, "cpu", torch.float32)
        >>> px = pre(np.full((2, 8, 8, 3), 255, np.uint8))
        >>> tuple(px.shape), px.dtype, torch.allclose(px, torch.ones_like(px))
        ((2, 3, 4, 4), torch.float32, True)
    """

    def __init__(self, spec: ImagePreprocessSpec, device: Any, dtype: Any) -> None:
        self.spec = spec
        self.device = torch.device(device)
        self.dtype = dtype
        # (x * rescale - mean) / std == x * scale + shift, per channel
        rescale = spec.rescale_factor if spec.rescale_factor is not None else 1.0
        mean = np.asarray(spec.mean if spec.mean is not None else (0.0,) * 3, dtype=np.float64)
        std = np.asarray(spec.std if spec.std is not None else (1.0,) * 3, dtype=np.float64)
        shape = (1, 3, 1, 1)
        self._scale = torch.tensor(rescale / std, dtype=torch.float32, device=self.device)
        self._shift = torch.tensor(-mean / std, dtype=torch.float32, device=self.device)
        self._scale, self._shift = self._scale.view(shape), self._shift.view(shape)
        self._affine = spec.rescale_factor is not None or spec.mean is not None

    @classmethod
    def from_processor(cls, processor: Any, device: Any, dtype: Any) -> TorchImagePreprocessor:
        """Build one from an HF (image) processor; raises :class:`UnsupportedImageProcessor`."""
        return cls(spec_from_processor(processor), device, dtype)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """``(height, width)`` of the pixel values of an ``height`` x ``width`` frame."""
        size = resized_size(height, width, self.spec)
        return self.spec.crop if self.spec.crop is not None else size

    def __call__(self, frames: Any, dtype: Any = None) -> Any:
        """Pixel values ``(n, 3, h, w)`` on :attr:`device` in ``dtype`` (default :attr:`dtype`).

        Raises:
            TypeError: frames that are not ``uint8``.
            ValueError: frames not shaped ``(H, W, 3)``, or frames of different sizes whose
                pixel values differ in size (possible only without a crop or fixed resize).
        """
        groups = _to_uint8_batches(frames)
        dtype = self.dtype if dtype is None else dtype
        outputs = [self._process(batch, dtype) for _, batch in groups]
        if len(outputs) == 1:
            return outputs[0]
        if len({tuple(o.shape[1:]) for o in outputs}) > 1:
            raise ValueError(
                "frames of different sizes give pixel values of different sizes "
                f"({sorted({tuple(o.shape[2:]) for o in outputs})}); add a crop or fixed size"
            )
        stacked = torch.cat(outputs)
        order = torch.as_tensor([i for idx, _ in groups for i in idx], device=self.device)
        out = torch.empty_like(stacked)
        out[order] = stacked  # row j of the groups' concatenation is frame order[j]
        return out

    def _process(self, batch: Any, dtype: Any) -> Any:
        if isinstance(batch, np.ndarray):
            if batch.flags.writeable:
                batch = torch.from_numpy(batch)
            else:  # read-only render buffers: torch warns, but the tensor is only read
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    batch = torch.from_numpy(batch)
        x = batch.to(self.device).permute(0, 3, 1, 2).float()
        size = resized_size(int(x.shape[-2]), int(x.shape[-1]), self.spec)
        x = _resize(x, size, self.spec.resample)
        if self.spec.crop is not None:
            x = _center_crop(x, self.spec.crop)
        if self._affine:
            x = torch.addcmul(self._shift, x, self._scale)
        return x.to(dtype).contiguous()
