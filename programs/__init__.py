"""DSPy modules: one per stage, the recursive research program, the gathering and taxonomy programs."""

from deepresearch.programs.config import PRESETS, ResearchConfig, preset
from deepresearch.programs.research.program import DeepResearch

__all__ = ["PRESETS", "DeepResearch", "ResearchConfig", "preset"]
