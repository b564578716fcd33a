"""Optional dependencies: which extra installs which feature, and the one-line error when it is missing.

The core install (DSPy, numpy, scipy, pydantic, tqdm, PyStemmer, rank-bm25, openai) runs BM25 research
offline and against any LM. Everything heavier sits behind an extra and is imported only when its feature runs.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# extra -> (what it installs, the feature that needs it)
EXTRAS = {
    "dense": ("torch, sentence-transformers", "dense retrieval and sentence embeddings"),
    "hf": ("datasets", "Hugging Face datasets (hf:NAME corpora, hub question and query sets, TaxoBench)"),
    "qdrant": ("qdrant-client", "the Qdrant backend"),
    "plots": ("matplotlib", "plots (the depth x breadth heatmap)"),
    "pdf": ("pypdf", "reading PDFs"),
    "refs": ("bibtexparser", "reading BibTeX"),
    "ray": ("ray", "a Ray cluster (batch --ray)"),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def install_hint(extra: str) -> str:
    return f"pip install 'dspy-deepresearch[{extra}]'"


def require(module: str, extra: str, feature: str | None = None) -> ModuleType:
    """Imports `module`, or raises MissingExtra naming `feature` and the extra to install.

    >>> require("numpy", "dense").__name__
    'numpy'
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; choose one of: {', '.join(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(f"{feature or EXTRAS[extra][1]} needs the {extra!r} extra: {install_hint(extra)}") \
            from err


__all__ = ["EXTRAS", "MissingExtra", "install_hint", "require"]
