"""DSPy modules: one per stage, the recursive research program, the gathering and taxonomy programs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (PEP 562): importing a submodule such as deepresearch.programs.formats.config_file
# (which `deepresearch --help` does) must not load the research program and DSPy with it.
_EXPORTS = {
    "PRESETS": "deepresearch.programs.config",
    "ResearchConfig": "deepresearch.programs.config",
    "preset": "deepresearch.programs.config",
    "DeepResearch": "deepresearch.programs.research.program",
}

__all__ = ["PRESETS", "DeepResearch", "ResearchConfig", "preset"]

if TYPE_CHECKING:
    from deepresearch.programs.config import PRESETS, ResearchConfig, preset
    from deepresearch.programs.research.program import DeepResearch


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'deepresearch.programs' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
