"""CLIP and SigLIP image/text embedders through HuggingFace ``AutoModel`` / ``AutoProcessor``.

Torch-level module: importing it imports torch and transformers (the ``semantic`` extra).

Loading is offline and safetensors-only: ``model_name`` is a local folder written by
``save_pretrained`` or a hub id already in the local cache (``local_files_only=True``). The
dtype is picked down a chain, each candidate checked with one forward pass of both towers:
bf16 → fp32 on CPU (fp16 runs but is about 4x slower than fp32 on CPUs without native fp16),
bf16 (where supported) → fp16 → fp32 on CUDA. What was loaded and how is in :attr:`status`.

transformers ≥ 5 returns a ``BaseModelOutputWithPooling`` from ``get_image_features`` /
``get_text_features`` (the embedding is ``pooler_output``), 4.x a tensor: both are handled.
SigLIP pools the *last* text position, so its prompts are padded to ``max_length``.

Frames are preprocessed on the model's device by default
(:class:`~gymcurric.semantics.preprocess.TorchImagePreprocessor`, built from the model's own
image processor settings); ``preprocess="hf"`` uses the HF processor on the host instead.
``graphs=True`` runs that preprocessing and the image forward pass on static buffers, captured
as CUDA graphs on a CUDA device (:mod:`gymcurric.semantics.graphs`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric._optional import import_optional
from gymcurric._torch_devices import usable_device
from gymcurric.errors import ConfigError
from gymcurric.semantics.base import Modality, unit_rows
from gymcurric.semantics.graphs import StaticGraphRunner
from gymcurric.semantics.preprocess import TorchImagePreprocessor, UnsupportedImageProcessor
from gymcurric.semantics.shaper import is_oom_error

torch = import_optional("torch", "semantic", purpose="for the HuggingFace embedders")
transformers = import_optional("transformers", "semantic", purpose="for the HuggingFace embedders")

__all__ = ["HFVisionLanguageEmbedder", "dtype_chain", "load_pretrained", "resolve_device"]

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
_TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])
_KINDS = {"clip": "clip", "siglip": "siglip", "siglip2": "siglip"}


def resolve_device(device: str | Any) -> Any:
    """``"auto"`` → ``cuda`` if available else ``cpu``; anything else → ``torch.device``.

    Raises:
        ConfigError: a device torch does not know, or one this machine lacks
            (:func:`gymcurric._torch_devices.usable_device`, as the replay ring checks its own).
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return usable_device(device, hint="'cpu' or 'auto'")


def dtype_chain(dtype: str | Any, device: Any) -> list[Any]:
    """The dtypes to try in order for ``dtype`` (``"auto"`` or one name) on ``device``."""
    if dtype is None or dtype == "auto":
        if device.type == "cuda":
            chain = [torch.float16, torch.float32]
            if torch.cuda.is_bf16_supported():
                chain.insert(0, torch.bfloat16)
            return chain
        return [torch.bfloat16, torch.float32]
    if isinstance(dtype, torch.dtype):
        return [dtype]
    if dtype not in _DTYPES:
        raise ConfigError(
            "dtype", dtype, f"expected 'auto' or one of {sorted(_DTYPES)} (or a torch.dtype)"
        )
    return [_DTYPES[dtype]]


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` → ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def resolve_model_path(model_name: str | os.PathLike[str]) -> str:
    """A folder as given; a hub id is passed on for ``local_files_only`` loading."""
    name = os.fspath(model_name)
    if not name:
        raise ConfigError("model_name", model_name, "must be a folder or a hub id")
    return name


def load_pretrained(loader: Any, path: str, dtype: Any, **kwargs: Any) -> Any:
    """``loader.from_pretrained(path)`` offline, safetensors only, in ``dtype``."""
    dtype_kw = "dtype" if _TRANSFORMERS_MAJOR >= 5 else "torch_dtype"
    return loader.from_pretrained(
        path, local_files_only=True, use_safetensors=True, **{dtype_kw: dtype}, **kwargs
    )


def load_first_working_dtype(
    owner: Any, path: str, chain: Sequence[Any], probe: Any
) -> tuple[np.ndarray, str]:
    """Load ``path`` with ``AutoModel`` in the first dtype of ``chain`` that embeds finitely.

    Sets ``owner.model`` (on ``owner.model_device``, eval mode) and ``owner.dtype``; ``probe()``
    runs a forward pass with them and returns its embeddings.

    Returns:
        The probe's embeddings and ``" (fell back from ...)"`` naming the dtypes that failed
        (empty when the first one worked).

    Raises:
        RuntimeError: no dtype in ``chain`` worked.
    """
    tried: list[str] = []
    owner.model = None
    for candidate in chain:
        try:
            model = load_pretrained(transformers.AutoModel, path, candidate)
            owner.model, owner.dtype = model.to(owner.model_device).eval(), candidate
            out = probe()
            if not np.isfinite(out).all():
                raise FloatingPointError("non-finite embeddings")
            fallback = ", ".join(t.split(":")[0] for t in tried)
            return out, f" (fell back from {fallback})" if tried else ""
        except (RuntimeError, FloatingPointError, TypeError, NotImplementedError) as exc:
            owner.model = None
            tried.append(f"{dtype_name(candidate)}: {type(exc).__name__}: {exc}"[:200])
    raise RuntimeError(f"{path!r}: no dtype worked ({'; '.join(tried)})")


def pooled(out: Any) -> Any:
    """The embedding from a feature getter: a tensor (transformers 4.x) or ``pooler_output``."""
    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "pooler_output", None) is not None:
        return out.pooler_output
    if isinstance(out, tuple | list):
        return out[-1]
    raise TypeError(f"cannot find the pooled embedding in a {type(out).__name__}")


def _frames_batch(frames: Any) -> Any:
    """An ``(n, H, W, 3)`` array or tensor as is (a single frame gets the batch axis), or a list.

    Torch tensors stay where they are (the torch preprocessing moves them to the model's
    device); anything else becomes numpy.
    """
    if isinstance(frames, np.ndarray | torch.Tensor):
        if frames.ndim == 3:
            frames = frames[None]
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected frames of shape (n, H, W, 3), got {tuple(frames.shape)}")
        return frames
    out = [f if isinstance(f, torch.Tensor) else np.asarray(f) for f in frames]
    for f in out:
        if f.ndim != 3 or f.shape[-1] != 3:
            raise ValueError(f"expected (H, W, 3) frames, got one of shape {tuple(f.shape)}")
    return out


def _is_uint8(frames: Any) -> bool:
    if isinstance(frames, np.ndarray | torch.Tensor):
        return frames.dtype in (np.uint8, torch.uint8)
    return all(f.dtype in (np.uint8, torch.uint8) for f in frames)


def _host_frames(frames: Any) -> list[np.ndarray]:
    """Frames as a list of host numpy arrays, for the HF processor."""
    if isinstance(frames, torch.Tensor):
        return list(frames.cpu().numpy())
    return [f.cpu().numpy() if isinstance(f, torch.Tensor) else f for f in frames]


class HFVisionLanguageEmbedder:
    """A CLIP or SigLIP model as an :class:`~gymcurric.semantics.base.Embedder`.

    Frames and texts are embedded with ``get_image_features`` / ``get_text_features`` under
    ``torch.inference_mode()``, cast to float32, moved to the host and L2-normalised.

    Args:
        model_name: a folder written by ``save_pretrained`` (model + processor), or a hub id
            already in the local HuggingFace cache.
        kind: ``"auto"`` (from the config's ``model_type``), ``"clip"`` or ``"siglip"``.
        device: where the model runs (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"auto"``);
            results always come back to the host as numpy.
        dtype: ``"auto"`` (the chain above) or ``"float32"``/``"bfloat16"``/``"float16"``.
        text_max_length: token length of SigLIP's ``max_length`` padding (default: the
            tokenizer's ``model_max_length`` capped by the text model's position embeddings);
            a positive int (a numpy integer is taken as the Python int of its value).
        preprocess: ``"torch"`` (default): resize, crop and normalise frames with torch on
            ``device``, reproducing the model's HF image processor from its settings (same
            pixel values to within a couple of grey levels after resizing; see
            :mod:`gymcurric.semantics.preprocess`). A processor setting it does not reproduce
            falls back to ``"hf"`` and ``status`` says which. ``"hf"``: the HF image processor
            on the host, frame by frame (the reference; several times the model's forward
            time per batch on a GPU).
        graphs: ``True``: embed ``uint8`` frame batches (an array or tensor, not a list of
            frames of different sizes) on static buffers, padded to the next power of two:
            preprocessing and forward pass captured as one CUDA graph per batch size on a
            CUDA device (a few sizes kept; see :mod:`gymcurric.semantics.graphs`), run
            eagerly on the same buffers elsewhere (no speed-up there: it keeps one setting
            valid on both). Needs the torch preprocessing. A capture that fails at run time
            turns graphs off with a ``RuntimeWarning`` and a note in :attr:`status`; the
            frames then take the ordinary path.

    Raises:
        ConfigError: a bad argument, a model of another family, or ``graphs=True`` where the
            frames would not be preprocessed by torch (``preprocess="hf"``, or a processor
            setting the torch preprocessing does not reproduce).
        OSError: the folder or cached hub id cannot be read (transformers' own error).
        RuntimeError: no dtype in the chain produced finite embeddings.

    Attributes:
        dim: the embedding size (the projection size).
        status: e.g. ``"ok: clip '/models/clip' dtype=bfloat16 device=cpu preprocess=torch"``
            (with ``graphs=True`` followed by ``" graphs=cuda"`` or ``" graphs=eager"``),
            then once each ``"; note: ..."`` when frames went through the HF processor
            instead (frames that are not ``uint8``, or a torch preprocessing error), or when
            graphs were turned off.
        preprocess: the preprocessing in use, ``"torch"`` or ``"hf"``.
        graph_mode: ``"cuda"`` (captured graphs), ``"eager"`` (static buffers, no capture:
            not a CUDA device) or ``"off"``.
        model_device: the ``torch.device`` the model is on.
        dtype: the ``torch.dtype`` it runs in.
    """

    modality: Modality = "image"

    def __init__(
        self,
        model_name: str | os.PathLike[str],
        *,
        kind: str = "auto",
        device: str | Any = "cpu",
        dtype: str | Any = "auto",
        text_max_length: int | None = None,
        preprocess: str = "torch",
        graphs: bool = False,
    ) -> None:
        if kind not in ("auto", "clip", "siglip"):
            raise ConfigError("kind", kind, "expected 'auto', 'clip' or 'siglip'")
        if preprocess not in ("torch", "hf"):
            raise ConfigError("preprocess", preprocess, "expected 'torch' or 'hf'")
        if not isinstance(graphs, bool):
            raise ConfigError("graphs", graphs, "expected a bool")
        check_int(
            "text_max_length",
            text_max_length,
            optional=True,
            allow_numpy=True,
            reason="must be a positive int or None",
        )
        if graphs and preprocess != "torch":
            raise ConfigError(
                "graphs",
                graphs,
                f"needs preprocess='torch' (the HF processor runs on the host, "
                f"not in a graph), got preprocess={preprocess!r}",
            )
        path = resolve_model_path(model_name)
        self.model_device = resolve_device(device)
        chain = dtype_chain(dtype, self.model_device)
        config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
        model_type = _KINDS.get(getattr(config, "model_type", ""))
        if model_type is None:
            raise ConfigError(
                "model_name",
                path,
                f"model_type {getattr(config, 'model_type', None)!r} is not a CLIP or SigLIP "
                "model; use kind='caption' for sentence-embedding models",
            )
        if kind != "auto" and kind != model_type:
            raise ConfigError("kind", kind, f"{path!r} holds a {model_type} model")
        self.kind = model_type
        self.processor = transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
        self.preprocess = preprocess
        self._preprocessor: TorchImagePreprocessor | None = None
        self._notes: list[str] = []
        self._graphs: StaticGraphRunner | None = None  # set once the model is loaded
        self.graph_mode = "off"
        preprocess_note = ""
        if preprocess == "torch":
            try:
                self._preprocessor = TorchImagePreprocessor.from_processor(
                    self.processor, self.model_device, torch.float32
                )
            except UnsupportedImageProcessor as exc:
                if graphs:
                    raise ConfigError(
                        "graphs",
                        graphs,
                        f"{path!r}: torch preprocessing, which graphs need, "
                        f"does not reproduce {exc}",
                    ) from None
                self.preprocess = "hf"
                preprocess_note = f" (torch preprocessing does not reproduce {exc})"
        tokenizer = getattr(self.processor, "tokenizer", None)
        limit = getattr(getattr(config, "text_config", None), "max_position_embeddings", None)
        if text_max_length is None:
            text_max_length = int(getattr(tokenizer, "model_max_length", 0) or 0)
            if not 0 < text_max_length < 100_000:  # transformers' "unset" is ~1e30
                text_max_length = int(limit or 64)
            if limit:
                text_max_length = min(text_max_length, int(limit))
        if text_max_length <= 0:
            raise ConfigError("text_max_length", text_max_length, "must be > 0")
        self.text_max_length = int(text_max_length)
        size = getattr(getattr(config, "vision_config", None), "image_size", 224)
        self._probe_frame = np.zeros((int(size), int(size), 3), dtype=np.uint8)
        self.model: Any = None
        self.dtype: Any = None  # set with the model by load_first_working_dtype
        probe, fallback = load_first_working_dtype(
            self,
            path,
            chain,
            lambda: np.concatenate(
                [self._embed_texts(["a photo"]), self._embed_images([self._probe_frame])]
            ),
        )
        self.dim = int(probe.shape[1])
        self.status = (
            f"ok: {self.kind} {path!r} dtype={dtype_name(self.dtype)} "
            f"device={self.model_device}{fallback} preprocess={self.preprocess}{preprocess_note}"
        )
        if graphs:
            self._graphs = StaticGraphRunner(self._frames_to_features, self.model_device)
            self.graph_mode = self._graphs.mode
            self.status += f" graphs={self.graph_mode}"

    def _note(self, note: str) -> None:
        """Add ``note`` to :attr:`status` the first time it happens."""
        if note not in self._notes:
            self._notes.append(note)
            self.status += f"; note: {note}"

    def _pixel_values(self, frames: Any, dtype: Any = None) -> Any:
        dtype = self.dtype if dtype is None else dtype
        if self._preprocessor is not None:
            if _is_uint8(frames):
                try:
                    return self._preprocessor(frames, dtype=dtype)
                except RuntimeError as exc:  # e.g. a downscale factor a CUDA kernel refuses
                    if is_oom_error(exc):
                        raise
                    self._note(
                        f"torch preprocessing failed ({type(exc).__name__}: {exc}"[:200]
                        + "), those frames went through the HF processor"
                    )
            else:
                self._note("frames that are not uint8 go through the HF processor")
        inputs = self.processor(images=_host_frames(frames), return_tensors="pt")
        return inputs["pixel_values"].to(self.model_device, dtype=dtype)

    def pixel_values(self, frames: Any, dtype: Any = None) -> Any:
        """The model's input for ``frames``: ``(n, 3, h, w)`` on :attr:`model_device`.

        Preprocessed as :attr:`preprocess` says, in ``dtype`` (default: the model's
        :attr:`dtype`). Takes what :meth:`embed_images` takes.
        """
        return self._pixel_values(_frames_batch(frames), dtype)

    def _frames_to_features(self, frames: Any) -> Any:
        """``uint8`` frames already on the device → float32 features (what graphs capture)."""
        assert self._preprocessor is not None
        pixels = self._preprocessor(frames, dtype=self.dtype)
        return pooled(self.model.get_image_features(pixel_values=pixels)).float()

    def _embed_graphed(self, frames: Any) -> np.ndarray | None:
        """Frames through the static buffers, or ``None`` where they cannot go (or failed)."""
        if self._graphs is None or isinstance(frames, list) or not _is_uint8(frames):
            return None
        try:
            return unit_rows(self._graphs(frames))
        except Exception as exc:
            if is_oom_error(exc):
                raise
            why = f"{type(exc).__name__}: {exc}"[:200]
            self._graphs, self.graph_mode = None, "off"
            self._note(f"graphs turned off ({why}), frames take the ordinary path")
            warnings.warn(
                f"{self!r}: static-buffer (CUDA graph) embedding failed, turned off: {why}",
                RuntimeWarning,
                stacklevel=4,
            )
            return None

    def _embed_images(self, frames: Any) -> np.ndarray:
        graphed = self._embed_graphed(frames)
        if graphed is not None:
            return graphed
        pixels = self._pixel_values(frames)
        with torch.inference_mode():
            out = pooled(self.model.get_image_features(pixel_values=pixels))
            return unit_rows(out.float().cpu().numpy())

    def _embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        padding: Any = "max_length" if self.kind == "siglip" else True
        inputs = self.processor(
            text=list(texts),
            padding=padding,
            truncation=True,
            max_length=self.text_max_length,
            return_tensors="pt",
        )
        inputs = {k: v.to(self.model_device) for k, v in inputs.items()}
        with torch.inference_mode():
            return unit_rows(pooled(self.model.get_text_features(**inputs)).float().cpu().numpy())

    def embed_images(self, frames: np.ndarray | Sequence[np.ndarray] | Any) -> np.ndarray:
        """Embed RGB ``uint8`` frames; ``(n, dim)`` float32 unit rows on the host.

        ``frames``: an ``(n, H, W, 3)`` or ``(H, W, 3)`` numpy array or torch tensor (a tensor
        may already be on the model's device), or a sequence of ``(H, W, 3)`` frames, which
        may differ in size.
        """
        frames = _frames_batch(frames)
        if len(frames) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_images(frames)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed strings; SigLIP pads to ``max_length``, both truncate."""
        if isinstance(texts, str):
            raise TypeError("embed_texts takes a sequence of strings, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_texts(list(texts))

    def __repr__(self) -> str:
        return f"HFVisionLanguageEmbedder({self.status})"
