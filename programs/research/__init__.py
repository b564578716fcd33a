"""The research program (`DeepResearch`) and its strategies: `eco`, `hero` and `parallel`."""

from deepresearch.programs.research.program import DeepResearch

__all__ = ["DeepResearch"]
