"""Building embedders: :func:`load_embedder` and :class:`CallableEmbedder` for user callables.

Importing this module does not import torch: the HuggingFace embedders are imported inside
:func:`load_embedder` when one is built.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gymcurric._checks import check_int
from gymcurric.errors import ConfigError, UnreadableModelError
from gymcurric.semantics.base import (
    Embedder,
    FailedEmbedder,
    Modality,
    embedder_modality,
    unit_rows,
)

__all__ = [
    "CallableEmbedder",
    "detect_kind",
    "intended_modality",
    "load_embedder",
    "load_embedder_soft",
]

_KINDS = ("auto", "clip", "siglip", "caption")
_VLM_TYPES = {"clip": "clip", "siglip": "siglip", "siglip2": "siglip"}


class CallableEmbedder:
    """Any user function(s) as an :class:`~gymcurric.semantics.base.Embedder`.

    The functions return one row per input, any float dtype; rows are L2-normalised to float32.
    ``dim`` is taken from the first call when not given.

    Args:
        images: ``images(frames) -> (n, d)`` for ``(n, H, W, 3)`` uint8 frames, or ``None``.
        texts: ``texts(list_of_str) -> (n, d)``, or ``None``.
        dim: the embedding size, if known (a numpy integer: the Python int of its value).
        modality: ``"image"`` (states are frames) or ``"text"`` (states are captions); by
            default ``"text"`` when only ``texts`` is given.

    Examples:
        >>> import numpy as np
        >>> red = lambda frames: np.stack(
        ...     [np.asarray(frames)[..., 0].mean((1, 2)), np.full(len(frames), 128.0)], 1)
        >>> words = lambda texts: np.array([[1.0, 0.0] if "red" in t else [0.0, 1.0]
        ...                                 for t in texts])
        >>> e = CallableEmbedder(images=red, texts=words)
        >>> e.embed_texts(["red danger", "calm"]).astype(float).round(3).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        >>> e.embed_images(np.full((1, 4, 4, 3), 128, np.uint8)).astype(float).round(3).tolist()
        [[0.707, 0.707]]
    """

    def __init__(
        self,
        images: Callable[[Any], Any] | None = None,
        texts: Callable[[list[str]], Any] | None = None,
        *,
        dim: int | None = None,
        modality: Modality | None = None,
    ) -> None:
        if images is None and texts is None:
            raise ConfigError("images", None, "give an images and/or a texts callable")
        for name, fn in (("images", images), ("texts", texts)):
            if fn is not None and not callable(fn):
                raise ConfigError(name, fn, "must be callable or None", source="CallableEmbedder")
        if modality is None:
            modality = "text" if images is None else "image"
        if modality not in ("image", "text"):
            raise ConfigError("modality", modality, "expected 'image' or 'text'")
        check_int(
            "dim", dim, optional=True, allow_numpy=True, reason="must be a positive int or None"
        )
        self._images, self._texts = images, texts
        self.modality: Modality = modality
        self.dim = 0 if dim is None else dim if isinstance(dim, int) else int(dim)
        name = getattr(images or texts, "__name__", type(images or texts).__name__)
        self.status = f"ok: callable {name}"

    def _rows(self, out: Any, n: int, what: str) -> np.ndarray:
        rows = np.asarray(out, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != n:
            raise ValueError(f"the {what} callable returned shape {rows.shape}, expected ({n}, d)")
        if self.dim and rows.shape[1] != self.dim:
            raise ValueError(f"the {what} callable returned d={rows.shape[1]}, expected {self.dim}")
        self.dim = int(rows.shape[1])
        return unit_rows(rows)

    def embed_images(self, frames: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
        """Call the ``images`` function on the frames; unit rows."""
        if self._images is None:
            raise TypeError("this CallableEmbedder has no images callable")
        batch = np.asarray(frames) if not isinstance(frames, np.ndarray) else frames
        return self._rows(self._images(batch), len(batch), "images")

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Call the ``texts`` function on the strings; unit rows."""
        if self._texts is None:
            raise TypeError("this CallableEmbedder has no texts callable")
        texts = [str(t) for t in texts]
        return self._rows(self._texts(texts), len(texts), "texts")

    def __repr__(self) -> str:
        return f"CallableEmbedder({self.status}, modality={self.modality!r})"


# a hub id as huggingface_hub validates one: "name" or "namespace/name", ASCII [A-Za-z0-9_.-],
# neither part starting or ending with "-" or ".", at most 96 characters, no "--" or ".."
_HUB_ID = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b", re.ASCII)
_CALLERS = "a model folder or a cached hub id (str or os.PathLike), an Embedder, a callable or None"


def _check_name(model_name: Any) -> None:
    """ConfigError for a ``model_name`` of the wrong type, empty, or a missing path.

    A name that is no existing path and that no hub id can be (absolute, ``./``, ``../``,
    ``~``, a backslash, two or more ``/``, ...) is a missing folder:
    :class:`~gymcurric.errors.UnreadableModelError` (fail-soft loading degrades). A name a hub
    id can be (``"org/name"``) goes to the hub loader.
    """
    if not isinstance(model_name, str | os.PathLike):
        raise ConfigError("model_name", model_name, f"expected {_CALLERS}")
    name = os.fspath(model_name)
    if not isinstance(name, str) or not name:
        empty = "an empty name; " if isinstance(name, str) else ""
        raise ConfigError("model_name", model_name, f"{empty}expected {_CALLERS}")
    hub_id = bool(len(name) <= 96 and _HUB_ID.fullmatch(name) and not name.endswith(".git"))
    if not (hub_id and "--" not in name and ".." not in name) and not os.path.exists(name):
        tilde = " (a leading ~ is not expanded)" if name.startswith("~") else ""
        raise UnreadableModelError("model_name", name, f"no such folder{tilde}")


def detect_kind(model_name: str | os.PathLike[str]) -> str:
    """``"clip"``, ``"siglip"`` or ``"caption"`` from a local folder's ``config.json``.

    A hub id (not a folder) is read through transformers' cache (offline).

    Raises:
        ConfigError: ``model_name`` is not a str or path; an
            :class:`~gymcurric.errors.UnreadableModelError` where it is a path that does not
            exist (a name no hub id can be) or a folder without a readable ``config.json``.
        OSError: a hub id that is not in the local cache (transformers' own error).
    """
    _check_name(model_name)
    folder = Path(os.fspath(model_name))
    if folder.is_dir():
        config_file = folder / "config.json"
        if not config_file.is_file():
            raise UnreadableModelError("model_name", str(model_name), "folder has no config.json")
        model_type: Any
        try:
            config = json.loads(config_file.read_text())
            model_type = config.get("model_type", "") if isinstance(config, dict) else None
        except (OSError, ValueError) as exc:
            raise UnreadableModelError(
                "model_name", str(model_name), f"unreadable config.json: {exc}"
            ) from None
        if not isinstance(model_type, str):
            raise UnreadableModelError(
                "model_name", str(model_name), "config.json holds no 'model_type' string"
            )
    else:
        from gymcurric.semantics.hf import transformers

        config = transformers.AutoConfig.from_pretrained(
            os.fspath(model_name), local_files_only=True
        )
        model_type = str(getattr(config, "model_type", ""))
    return _VLM_TYPES.get(model_type, "caption")


def load_embedder(
    model_name: str | os.PathLike[str] | Embedder | Callable[..., Any] | None = None,
    kind: str = "auto",
    *,
    device: str = "cpu",
    dtype: str = "auto",
    **kwargs: Any,
) -> Embedder:
    """Build an embedder from a model folder / cached hub id, an embedder, or a callable.

    Args:
        model_name: a ``save_pretrained`` folder or a hub id in the local cache (offline); an
            object that already is an :class:`~gymcurric.semantics.base.Embedder` (returned
            as is); a callable (wrapped in :class:`CallableEmbedder`, used for frames and, with
            ``kind="caption"``, for captions); ``None`` with ``kind`` ``"caption"`` or
            ``"auto"``: the shipped offline MiniLM caption model.
        kind: ``"auto"`` (from the folder's ``config.json``: CLIP/SigLIP model types are
            vision-language, anything else is a sentence-embedding model for captions),
            ``"clip"``, ``"siglip"`` or ``"caption"``.
        device: where the model runs (``"cpu"``, ``"cuda"``, ``"auto"``).
        dtype: ``"auto"`` (bf16 → fp32 on CPU, bf16/fp16 → fp32 on CUDA) or one dtype; for
            caption models ``"auto"`` means float32.
        **kwargs: passed to :class:`~gymcurric.semantics.hf.HFVisionLanguageEmbedder` or
            :class:`~gymcurric.semantics.caption.CaptionEmbedder`.

    Raises:
        ConfigError: bad ``kind``; a ``model_name`` of another type (e.g. an int) or empty; a
            missing folder (a name that does not exist and that no hub id can be: absolute,
            ``./``, ``../``, ``~``, two or more ``/``); a model that is not of the requested
            kind (``kind="caption"`` on a CLIP/SigLIP folder, ``"siglip"`` on a CLIP one); a
            keyword the model's kind does not take (``preprocess``, ``graphs``,
            ``text_max_length``: CLIP/SigLIP only; ``max_length``: caption models only). A
            missing folder, or one without a readable ``config.json``, is the subclass
            :class:`~gymcurric.errors.UnreadableModelError`.
        DependencyNotInstalled: torch/transformers missing (``pip install "gymcurric[semantic]"``).
        OSError: the model cannot be read (a hub id not in the local cache, no safetensors).
    """
    if kind not in _KINDS:
        raise ConfigError("kind", kind, f"expected one of {_KINDS}")
    if isinstance(model_name, Embedder):
        return model_name
    if callable(model_name):
        if kind == "caption":
            return CallableEmbedder(texts=model_name, modality="text")
        return CallableEmbedder(images=model_name, texts=model_name, modality="image")
    if model_name is None:
        if kind not in ("auto", "caption"):
            raise ConfigError("model_name", None, f"kind={kind!r} needs a model folder")
        kind = "caption"
    else:
        _check_name(model_name)
        if kind == "auto":
            kind = detect_kind(model_name)
    _check_keywords(kind, kwargs)
    if kind == "caption":
        from gymcurric.semantics.caption import CaptionEmbedder

        return CaptionEmbedder(
            model_name, device=device, dtype="float32" if dtype == "auto" else dtype, **kwargs
        )
    from gymcurric.semantics.hf import HFVisionLanguageEmbedder

    assert model_name is not None
    return HFVisionLanguageEmbedder(model_name, kind=kind, device=device, dtype=dtype, **kwargs)


_KEYWORDS = {"caption": ("max_length",), "vlm": ("text_max_length", "preprocess", "graphs")}


def _check_keywords(kind: str, kwargs: dict[str, Any]) -> None:
    """ConfigError naming a keyword that the embedder of ``kind`` does not take."""
    for key in kwargs:
        if key in _KEYWORDS["caption" if kind == "caption" else "vlm"]:
            continue
        if key in _KEYWORDS["caption"] or key in _KEYWORDS["vlm"]:
            family = "caption" if key in _KEYWORDS["caption"] else "CLIP/SigLIP"
            raise ConfigError(key, kwargs[key], f"{family} models only, not kind={kind!r}")
        raise ConfigError(
            key,
            kwargs[key],
            "not a load_embedder keyword (caption models take max_length; CLIP/SigLIP models "
            "text_max_length, preprocess and graphs)",
        )


def intended_modality(model_name: Any, kind: str = "auto") -> Modality | None:
    """What the model requested by ``load_embedder(model_name, kind)`` embeds, without loading it.

    ``"text"`` for caption models (``kind="caption"``, or ``None``: the shipped MiniLM),
    ``"image"`` for CLIP/SigLIP (``kind``, or the folder's ``config.json``), an embedder's or a
    callable's own modality; ``None`` when nothing tells (a missing folder, an uncached hub id,
    a folder without a readable ``config.json``).
    """
    if isinstance(model_name, Embedder):
        return embedder_modality(model_name)
    if kind == "caption" or (model_name is None and kind == "auto"):
        return "text"
    if kind in ("clip", "siglip") or callable(model_name):
        return "image"
    if isinstance(model_name, str | os.PathLike) and Path(os.fspath(model_name)).is_dir():
        try:
            return "text" if detect_kind(model_name) == "caption" else "image"
        except ConfigError:
            return None
    return None


def load_embedder_soft(
    model_name: str | os.PathLike[str] | Embedder | Callable[..., Any] | None = None,
    kind: str = "auto",
    *,
    device: str = "cpu",
    dtype: str = "auto",
    **kwargs: Any,
) -> Embedder:
    """:func:`load_embedder`, but a model that cannot be loaded gives a :class:`FailedEmbedder`.

    Bad arguments, programming mistakes rather than an unavailable model, still raise
    :class:`~gymcurric.errors.ConfigError`: an unknown ``kind``, a bad ``device`` or ``dtype``,
    a ``model_name`` that is no str, path, embedder, callable or None (``42``) or is empty, a
    model of another kind than ``kind`` asks for (``kind="caption"`` on a CLIP/SigLIP folder),
    a keyword the model's kind does not take. A model that cannot be had (a missing folder, a
    folder without a readable ``config.json``, an uncached hub id, a corrupt checkpoint,
    missing torch or transformers) is caught, and the returned embedder's ``status`` says
    ``"failed: load ...: <error>"``. Its ``modality`` is the requested model's, as far as the
    arguments and the folder tell (:func:`intended_modality`), so that wrappers still know
    whether states would have been captions or frames.
    """
    name = os.fspath(model_name) if isinstance(model_name, str | os.PathLike) else model_name

    def failed(why: str) -> FailedEmbedder:
        return FailedEmbedder(
            f"failed: load {name!r}: {why}"[:500], intended_modality(model_name, kind)
        )

    if kind not in _KINDS:
        raise ConfigError("kind", kind, f"expected one of {_KINDS}")
    try:  # a missing folder is refused before torch and transformers are imported
        return load_embedder(model_name, kind, device=device, dtype=dtype, **kwargs)
    except UnreadableModelError as exc:
        return failed(exc.reason)
    except ConfigError:
        raise
    except Exception as exc:
        return failed(f"{type(exc).__name__}: {exc}")
