"""Tiny random CLIP and SigLIP checkpoints built offline (no pytest needed to import this).

Random weights carry no meaning: these exist to run the *real* loading path
(``AutoModel``/``AutoProcessor.from_pretrained(folder)``, safetensors) in tests, a few hundred
KiB each, built in about 0.1 s once torch and transformers are imported.

Usage::

    from tests.semantics.tiny_models import build_tiny_clip, build_tiny_siglip
    path = build_tiny_clip(tmp_path / "clip")   # returns the folder as a str
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Side of the square image the tiny vision towers take (frames are resized to it).
IMAGE_SIZE = 32
#: Text length: long enough for the test prompts with a char-level vocab (one token per char).
MAX_TEXT_LEN = 64
#: Projection size of the tiny CLIP (its embedding ``dim``); SigLIP's is its hidden size, 32.
CLIP_DIM = 16
SIGLIP_DIM = 32


def tiny_tokenizer() -> Any:
    """A char-level byte-BPE ``CLIPTokenizer`` built in memory (2 specials + 512 symbols)."""
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=MAX_TEXT_LEN)


def _configs(tok: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    txt = dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=MAX_TEXT_LEN,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    vis = dict(
        image_size=IMAGE_SIZE,
        patch_size=8,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
    )
    return txt, vis


def _quiet() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def build_tiny_clip(path: str | os.PathLike[str], seed: int = 0) -> str:
    """Save a tiny random CLIP model + processor to ``path`` (created); return it as a str."""
    _quiet()
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor

    tok = tiny_tokenizer()
    txt, vis = _configs(tok)
    torch.manual_seed(seed)
    model = CLIPModel(CLIPConfig(text_config=txt, vision_config=vis, projection_dim=CLIP_DIM))
    ip = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    CLIPProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)
    return str(out)


def build_tiny_siglip(path: str | os.PathLike[str], seed: int = 0) -> str:
    """Save a tiny random SigLIP model + processor to ``path`` (created); return it as a str."""
    _quiet()
    import torch
    from transformers import SiglipConfig, SiglipImageProcessorPil, SiglipModel, SiglipProcessor

    tok = tiny_tokenizer()
    txt, vis = _configs(tok)
    torch.manual_seed(seed)
    model = SiglipModel(SiglipConfig(text_config=txt, vision_config=vis))
    ip = SiglipImageProcessorPil(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    SiglipProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)
    return str(out)


__all__ = [
    "CLIP_DIM",
    "IMAGE_SIZE",
    "MAX_TEXT_LEN",
    "SIGLIP_DIM",
    "build_tiny_clip",
    "cached_tiny",
    "build_tiny_siglip",
    "tiny_tokenizer",
]


_CACHE: dict[str, str] = {}


def cached_tiny(kind: str) -> str:
    """A tiny ``"clip"`` or ``"siglip"`` folder built once per process (in a temp dir)."""
    if kind not in _CACHE:
        import atexit
        import shutil
        import tempfile

        root = tempfile.mkdtemp(prefix=f"gymcurric-tiny-{kind}-")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        builder = build_tiny_clip if kind == "clip" else build_tiny_siglip
        _CACHE[kind] = builder(os.path.join(root, kind))
    return _CACHE[kind]
