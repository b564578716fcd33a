"""DSPy modules: one per stage, the recursive research program, the gathering and taxonomy programs."""

from programs.config import PRESETS, ResearchConfig, preset
from programs.research.program import DeepResearch

__all__ = ["PRESETS", "DeepResearch", "ResearchConfig", "preset"]
