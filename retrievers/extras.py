"""Optional dependencies: which extra installs which feature, and the one-line error when it is missing.

The core install (DSPy, numpy, scipy, scikit-learn, pydantic, tqdm, PyStemmer, rank-bm25, openai) runs BM25 research
offline and against any LM. Everything heavier sits behind an extra and is imported only when its feature runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
from collections.abc import Mapping
from pathlib import Path
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
    "mcp": ("mcp", "the MCP server (deepresearch mcp)"),
}

# extra -> the modules that must import for it (checked without importing them: torch takes seconds)
MODULES = {
    "dense": ("torch", "sentence_transformers"),
    "hf": ("datasets",),
    "qdrant": ("qdrant_client",),
    "plots": ("matplotlib",),
    "pdf": ("pypdf",),
    "refs": ("bibtexparser",),
    "mcp": ("mcp",),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def install_hint(extra: str) -> str:
    """The command that installs `extra` (or several, comma-joined) for this copy of the package.

    Run from a clone (an editable install, or the clone on sys.path), the package's folder holds
    pyproject.toml and the command installs that clone with the extra: the package is not on PyPI. From a
    wheel it names the distribution.
    """
    root = Path(__file__).resolve().parents[1]  # the folder `deepresearch` imports from
    if (root / "pyproject.toml").is_file():
        return f"pip install -e {shlex.quote(f'{root}[{extra}]')}"
    return f"pip install {shlex.quote(f'dspy-deepresearch[{extra}]')}"


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
        raise MissingExtra(f"{feature or EXTRAS[extra][1]} needs the {extra!r} extra: {install_hint(extra)}") from err


def is_installed(extra: str) -> bool:
    """Whether every module of `extra` can be found (found, not imported: a blocked or absent one is missing)."""
    for module in MODULES[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except (ImportError, ValueError):  # a blocker on sys.meta_path, or sys.modules[module] = None
            return False
    return True


def check_extras(needs: Mapping[str, str]) -> None:
    """Raises one MissingExtra naming every extra in `needs` (extra -> the feature that needs it) that is not
    installed, and the one command that installs them all; does nothing when all are there.

    Called before a run starts, so that no run does its work and then fails for want of an extra.

    >>> check_extras({})
    """
    unknown = set(needs) - set(EXTRAS)
    if unknown:
        raise ValueError(f"unknown extra {min(unknown)!r}; choose one of: {', '.join(EXTRAS)}")
    missing = [extra for extra in needs if not is_installed(extra)]
    if not missing:
        return
    what = "; ".join(f"{needs[extra]} needs the {extra!r} extra" for extra in missing)
    raise MissingExtra(f"{what}: {install_hint(','.join(missing))}")
